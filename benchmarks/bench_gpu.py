"""PARS training steps on one accelerator: throughput under bf16 and torch.compile, peak memory.

One command records, on one device (a CUDA GPU by default):

1. the training step (forward, backward, AdamW step) of PARS at the paper's size
   (512 x 8, 30-s windows at 200 Hz: the "512 x 8 (paper)" row of
   ``bench_pair_decoder.py``), 40 patches, pos_mask_ratio 0.8, in windows per second,
   in float32, under bf16 autocast, and under bf16 autocast with ``torch.compile``,
   each against the encoder-alone step on the same patches and masks (the encoder of
   the same model, its loss a plain mean of squares, as in ``bench_pair_decoder.py``);
   the first step of each is timed on its own (with ``torch.compile`` it holds the
   compilation of the forward and backward passes);
2. the memory of one training step (bf16 autocast, no compilation, after one warm-up
   step that allocates AdamW's state) at n_patches 40, 80 and 128, PARS and the encoder
   alone: on CUDA the peak allocated (``torch.cuda.max_memory_allocated`` after
   ``reset_peak_memory_stats``) and its growth over what was allocated before the step;
   on a CPU the growth of the resident peak (VmHWM) over the step.

``--tiny`` swaps in a 32 x 1 encoder, 10-s windows at 100 Hz and batch 8, so that the
same code runs on a CPU in seconds; the test suite runs it so, and the benchmark cannot
rot on machines without a GPU.

``--decoder db22036`` swaps db22036's pair decoder (from git, or from
``.device-wheels/`` where ``make device-wheels`` writes it; the factor tables on every
device) into every PARS model,
with the same weights, for an A/B against this tree's on one machine;
``--variants``, ``--memory-patches`` and ``--memory-batch-size`` pick the rows (among
the step table's: the compiled step replayed as CUDA graphs, with the pair operator's
fallback as Triton kernels, and with the fused pair operator, ``models/pair/fused.py``;
where no Triton kernel runs, the report says that the last two ran the torch fallback
and the tables operator, and each row's ``operator`` names the pair operator it ran),
``--profile`` the profiled rows, and ``--json`` writes the results for a script
(``device_check.py``) to read.

Usage::

    python -m benchmarks.bench_gpu --out benchmarks/results/gpu.md
    python -m benchmarks.bench_gpu --device cpu --tiny
    python -m benchmarks.bench_gpu --batch-size 256 1024 --decoder db22036
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import shlex
import sys
import time
from typing import NamedTuple

import torch
import torch._inductor.config
from torch._dynamo.utils import counters

from benchmarks.lib.device_steps import (
    DB22036_SOURCE,
    DECODERS,
    PAPER,
    TINY,
    TrainingSteps,
)
from benchmarks.lib.measure import machine, median_times, peak_growth, write_report
from braindecode_pars.models.pair import kernels as pair_kernels

MIB = 2**20


#: torch.compile's mode that replays the compiled steps as CUDA graphs.
GRAPHS = "reduce-overhead"


class Variant(NamedTuple):
    """How one row of the step table builds its steps (:class:`TrainingSteps`)."""

    bf16: bool  # bf16 autocast
    compiled: bool  # torch.compile
    precision: str  # float32 matmul precision
    tables: torch.dtype  # the decoder's factor-table dtype
    mode: str | None  # torch.compile's mode; None: --compile-mode's
    fallback: str  # the pair operator's fallback kernel ("torch", "triton")
    kernel: str  # the pair operator ("tables"; "fused" where Triton runs, else "tables")


#: Rows of the step table: label -> :class:`Variant`.
VARIANTS = {
    "float32": Variant(False, False, "highest", torch.float32, None, "torch", "tables"),
    "bf16 autocast": Variant(True, False, "highest", torch.float32, None, "torch", "tables"),
    "bf16 autocast + torch.compile": Variant(
        True, True, "highest", torch.float32, None, "torch", "tables",
    ),
    "bf16 autocast, matmul precision 'high' (TF32)": Variant(
        True, False, "high", torch.float32, None, "torch", "tables",
    ),
    "bf16 autocast, float64 factor tables": Variant(
        True, False, "highest", torch.float64, None, "torch", "tables",
    ),
    "bf16 autocast + torch.compile, CUDA graphs": Variant(
        True, True, "highest", torch.float32, GRAPHS, "torch", "tables",
    ),
    "bf16 autocast + torch.compile, Triton fallback": Variant(
        True, True, "highest", torch.float32, None, "triton", "tables",
    ),
    "bf16 autocast + torch.compile, fused operator": Variant(
        True, True, "highest", torch.float32, None, "torch", "fused",
    ),
    "bf16 autocast + torch.compile, fused operator, CUDA graphs": Variant(
        True, True, "highest", torch.float32, GRAPHS, "torch", "fused",
    ),
}  # fmt: skip
#: The names ``--variants`` takes for the rows of :data:`VARIANTS`.
VARIANT_NAMES = dict(zip(
    ("float32", "bf16", "bf16-compile", "bf16-tf32", "bf16-f64tables", "bf16-compile-graphs",
     "bf16-compile-triton", "bf16-compile-fused", "bf16-compile-fused-graphs"),
    VARIANTS, strict=True,
))  # fmt: skip
#: The variants run by default (the device check adds the graphs, Triton and fused rows).
DEFAULT_VARIANTS = ("float32", "bf16", "bf16-compile")
#: n_patches of the memory table.
MEMORY_PATCHES = (40, 80, 128)


def first_step(step):
    """Run ``step`` once: its duration in seconds and the graph breaks it traced."""
    breaks = sum(counters["graph_break"].values())
    t0 = time.perf_counter()
    step()
    return time.perf_counter() - t0, sum(counters["graph_break"].values()) - breaks


#: The parts of a step's profile, for each pair operator (``TrainingSteps.operator``):
#: label -> the profiler events' names that hold them; the first two are the operator's
#: forward and backward.
PROFILE_PARTS = {
    "tables": {
        "pair operator, forward (with its fallback)": "braindecode_pars::pair_attention",
        "pair operator, backward (with its fallback)": "braindecode_pars::pair_attention_backward",
        "of which the fallback, forward": "pair_attention.fallback",
        "of which the fallback, backward": "pair_attention.fallback_backward",
    },
    "fused": {  # one kernel each way, the fallback folded in
        "fused pair operator, forward": "braindecode_pars::pair_attention_fused",
        "fused pair operator, backward": "braindecode_pars::pair_attention_fused_backward",
    },
}


def profile_steps(steps, step_ms, repeats=5):
    """Per-part times of PARS's step in ms per step, from ``torch.profiler``: on CUDA the
    device time of the kernels each part launched, on a CPU its CPU time. Returns a
    dict: ``pars`` and ``encoder``, the two steps' median times of the step table
    (``step_ms``), the :data:`PROFILE_PARTS` of the operator the steps run, and ``rest
    of the decoder`` (the projections, the gather, the loss: PARS less the encoder-alone
    step less the operator). The fallback's rows are profiler ranges
    (``record_function``): on a GPU the span of its kernels, launch gaps included."""
    from torch.profiler import ProfilerActivity, profile

    cuda = steps.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    total = "device_time_total" if cuda else "cpu_time_total"
    steps.pars_step()  # warm
    with profile(activities=activities) as prof:
        for _ in range(repeats):
            steps.pars_step()
    events = prof.key_averages()
    times = dict(zip(("pars", "encoder"), step_ms, strict=True))
    parts = PROFILE_PARTS[steps.operator]
    for label, name in parts.items():
        times[label] = sum(getattr(e, total) for e in events if e.key == name) / repeats / 1e3
    operator = sum(times[label] for label in list(parts)[:2])
    times["rest of the decoder (projections, gather, loss)"] = (
        times["pars"] - times["encoder"] - operator
    )
    return times


def break_reasons():
    """The first line of every graph-break reason torch.compile met in this process."""
    return sorted({reason.splitlines()[0] for reason in counters["graph_break"]})


def step_table(
    config, n_patches, batch_size, device, repeats, backend, mode=None, decoder="tree",
    variants=DEFAULT_VARIANTS, profile=None,
):  # fmt: skip
    """The step table's rows at one batch size: a dict per variant of ``variants`` (labels
    of :data:`VARIANTS`), ``operator`` among them (the pair operator it ran).

    Each variant is a fresh model (seed 0); the first steps are timed one by one, then
    the median over ``repeats`` steps of all six steps interleaved (2 warm-up steps).
    On a CPU a variant whose compilation fails is reported skipped, with the error.
    ``profile``: None, or the labels of the variants to profile (:func:`profile_steps`);
    empty, the first compiled variant, else the last.
    """
    rows, built = {}, {}
    for label in variants:
        v = VARIANTS[label]
        torch.manual_seed(0)
        steps = TrainingSteps(
            config, n_patches, batch_size, device, v.bf16, v.compiled, backend,
            v.mode or mode, decoder, v.precision, v.tables, v.fallback, v.kernel,
        )  # fmt: skip
        try:
            pars_first, pars_breaks = first_step(steps.pars_step)
            enc_first, enc_breaks = first_step(steps.encoder_step)
        except Exception as err:  # a CPU without a working compiler; never on CUDA
            if not v.compiled or steps.device.type == "cuda":
                raise
            rows[label] = dict(
                skipped=f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"
            )
            continue
        built[label] = steps
        rows[label] = dict(
            pars_first=pars_first,
            encoder_first=enc_first,
            breaks=(pars_breaks, enc_breaks) if v.compiled else None,
            operator=steps.operator,
        )
    pairs = [(b.pars_step, b.encoder_step) for b in built.values()]
    times = median_times([step for pair in pairs for step in pair], repeats)
    for i, (label, steps) in enumerate(built.items()):
        t_pars, t_enc = times[2 * i], times[2 * i + 1]
        rows[label].update(
            pars_wps=batch_size / t_pars,
            encoder_wps=batch_size / t_enc,
            ratio=t_pars / t_enc,
            loss=float(steps.pars_loss),
        )
    if profile is not None and built:
        # by default the first compiled variant where there is one, else the last
        first = next((name for name in built if VARIANTS[name].compiled), list(built)[-1])
        for label in [name for name in profile if name in built] if profile else [first]:
            row = rows[label]
            step_ms = (1e3 * batch_size / row["pars_wps"], 1e3 * batch_size / row["encoder_wps"])
            row["profile"] = profile_steps(built[label], step_ms)
    return rows


def step_memory(step, device):
    """Memory of one call of ``step`` in MiB: its growth, and the peak (None on a CPU).

    CUDA: the peak allocated during the step (``max_memory_allocated`` after
    ``reset_peak_memory_stats``) and its growth over the memory allocated before it.
    CPU: the growth of the resident peak (VmHWM) over the resident memory before it.
    """
    if device.type != "cuda":
        return peak_growth(step)[0], None
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    step()
    peak = torch.cuda.max_memory_allocated(device)
    return (peak - before) / MIB, peak / MIB


def memory_row(config, n_patches, batch_size, device, decoder="tree"):
    """Memory of a PARS and of an encoder-alone step (bf16 autocast, eager), each model
    fresh; a step that runs out of GPU memory gives (None, None)."""
    row = {}
    for what in ("encoder", "pars"):
        if device.type == "cuda":  # (on a CPU peak_growth collects)
            gc.collect()
            torch.cuda.empty_cache()
        torch.manual_seed(0)
        steps = step = None
        try:
            steps = TrainingSteps(config, n_patches, batch_size, device, bf16=True, decoder=decoder)
            step = steps.pars_step if what == "pars" else steps.encoder_step
            step()  # allocates AdamW's state
            row[what] = step_memory(step, device)
        except torch.OutOfMemoryError:
            row[what] = (None, None)
        del steps, step
    return row


def parse_args(argv=None):
    """The command line; ``argv`` as ``sys.argv[1:]`` (that if None)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--out", help="write the Markdown tables here (default: stdout only)")
    add("--device", default="cuda", help="torch device (default: cuda)")
    add("--tiny", action="store_true", help="a 32 x 1 encoder and batch 8: seconds on a CPU")
    add("--batch-size", type=int, nargs="+",
        help=f"batch sizes (default: {PAPER.batch_sizes}, with --tiny {TINY.batch_sizes})",
    )  # fmt: skip
    add("--n-patches", type=int, default=40, help="of the step table")
    add("--repeats", type=int, help="timed steps per median (default: 21, with --tiny 3)")
    add("--compile-backend", default="inductor",
        help="torch.compile's backend (default: inductor; aot_eager compiles in seconds)",
    )  # fmt: skip
    add("--compile-mode", choices=("default", "reduce-overhead", "max-autotune-no-cudagraphs"),
        help="torch.compile's mode (default: torch's; reduce-overhead replays the compiled "
        "forward and backward as CUDA graphs)")  # fmt: skip
    add("--decoder", choices=DECODERS, default="tree",
        help="PARS's pair decoder: this tree's (default) or db22036's, for an A/B")  # fmt: skip
    add("--variants", nargs="+", choices=list(VARIANT_NAMES), default=list(DEFAULT_VARIANTS),
        help=f"rows of the step table (default: {' '.join(DEFAULT_VARIANTS)})")  # fmt: skip
    add("--memory-patches", type=int, nargs="*", default=list(MEMORY_PATCHES),
        help=f"n_patches of the memory table (default: {MEMORY_PATCHES}; none: no table)",
    )  # fmt: skip
    add("--memory-batch-size", type=int, nargs="+",
        help="batch sizes of the memory table (default: --batch-size's)")  # fmt: skip
    add("--profile", nargs="*", choices=list(VARIANT_NAMES),
        help="profile steps at the largest batch: the pair operator forward and backward, "
        "its fallback, the encoder, the rest of the decoder; of the variants named (of "
        "--variants'), or with no name of the first compiled one")  # fmt: skip
    add("--json", help="also write the results here as JSON")
    add("--compile-caches", action="store_true",
        help="let torch.compile reuse its on-disk caches (default: disabled, so that a first "
        "step holds the whole compilation)")  # fmt: skip
    return parser.parse_args(argv)


def describe(device):
    """The device's name, and torch's version with its CUDA's."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        return name, (
            f"torch {torch.__version__}, CUDA {torch.version.cuda}, float32 matmul precision "
            f"{torch.get_float32_matmul_precision()!r}"
        )
    return f"CPU ({machine()})", f"torch {torch.__version__}"


def main(argv=None):
    """Run the benchmark, write its Markdown to ``--out`` and stdout; the rows as a dict.

    Parameters
    ----------
    argv : list of str | None
        The command line's arguments (``sys.argv[1:]`` if None).

    Returns
    -------
    results : dict
        ``steps``: {batch size: {variant: row}}; ``memory``: {(batch size, n_patches):
        {"encoder" | "pars": (growth MiB, peak MiB or None)}}.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    config = TINY if args.tiny else PAPER
    device = torch.device(args.device)
    batch_sizes = args.batch_size or config.batch_sizes
    repeats = args.repeats or (3 if args.tiny else 21)
    cuda = device.type == "cuda"
    command = shlex.join(["python", "-m", "benchmarks.bench_gpu", *argv])
    name, versions = describe(device)
    if not args.tiny:
        label = "GPU, the paper's size" if cuda else "CPU, the paper's size, not a GPU figure"
    else:
        label = "GPU" if cuda else "CPU"
        label += ", tiny configuration, not a GPU figure"
    memory_measure = (
        "peak allocated (`torch.cuda.max_memory_allocated` after `reset_peak_memory_stats`)"
        " and its growth over the memory allocated before the step (parameters, AdamW's "
        "state)"
        if cuda
        else "growth of the process's resident peak (VmHWM, reset before the step) over its "
        "resident memory before the step; no allocator peak on a CPU"
    )
    lines = [
        "# PARS training steps on one accelerator",
        "",
        f"## {label}",
        "",
        f"- Device: {name}",
        f"- Versions: {versions}",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Command: `{command}`",
        f"- Encoder: {config.name}; PARS with the folded cross-attention decoder, "
        "pos_mask_ratio 0.8; AdamW (lr 1e-4, weight decay 1e-4).",
        "- Pair decoder: "
        + (
            "this tree's"
            if args.decoder == "tree"
            else "db22036's (`git show " + DB22036_SOURCE + "`), same weights"
        ),
        "",
        f"### Training step, n_patches = {args.n_patches}",
        "",
        f"Windows per second: median of {repeats} steps after 2 warm-up steps, the six "
        "steps of a batch size interleaved"
        + (", each ending with `torch.cuda.synchronize()`" if cuda else "")
        + ". First step: the first call of a fresh model, timed on its own; with "
        f"`torch.compile` (backend `{args.compile_backend}`, mode "
        f"`{args.compile_mode or 'default'}`, `dynamic=False`, the whole "
        "PARS module and the encoder compiled, AdamW eager, on-disk compile caches "
        + ("allowed" if args.compile_caches else "disabled")
        + ") it holds the compilation"
        + (", less what the caches held" if args.compile_caches else "")
        + ". Encoder alone: the same model's encoder on "
        "one fixed draw of patches and masks, its loss a mean of squares. PARS loss: of "
        "the last timed step.",
        "",
        "| batch | precision | PARS windows/s | encoder-alone windows/s | ratio of step times "
        "| PARS first step (s) | encoder-alone first step (s) | graph breaks (PARS, encoder) "
        "| PARS loss |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    results = {"steps": {}, "memory": {}}
    with torch._inductor.config.patch(force_disable_caches=not args.compile_caches):
        for batch in batch_sizes:
            rows = step_table(
                config, args.n_patches, batch, device, repeats, args.compile_backend,
                args.compile_mode, args.decoder, [VARIANT_NAMES[v] for v in args.variants],
                profile=None if args.profile is None or batch != max(batch_sizes)
                else [VARIANT_NAMES[v] for v in args.profile],
            )  # fmt: skip
            results["steps"][batch] = rows
            for variant, r in rows.items():
                if "skipped" in r:
                    lines.append(f"| {batch} | {variant} | skipped: {r['skipped']} |||||||")
                    continue
                breaks = "" if r["breaks"] is None else f"{r['breaks'][0]}, {r['breaks'][1]}"
                lines.append(
                    f"| {batch} | {variant} | {r['pars_wps']:,.1f} | {r['encoder_wps']:,.1f} | "
                    f"{r['ratio']:.2f} | {r['pars_first']:.3g} | {r['encoder_first']:.3g} | "
                    f"{breaks} | {r['loss']:.4f} |"
                )
                print(lines[-1], flush=True)
            write_json(args.json, name, args.decoder, results)  # what ran, should time run out
    profiled = [(b, v, r["profile"]) for b, rows in results["steps"].items()
                for v, r in rows.items() if "profile" in r]  # fmt: skip
    for batch, variant, times in profiled:
        unit = "device time of its kernels" if cuda else "CPU time"
        lines += [
            "",
            f"### Profile of one step: batch {batch}, {variant}",
            "",
            f"`torch.profiler`, {unit}, ms per step (mean of 5 steps): each operator's "
            "time holds the kernels it launched (the fallback's: the span of its "
            "kernels, launch gaps included); PARS and the encoder are the steps' median "
            "times of the table above; the rest of the decoder is PARS less the encoder "
            "less the operator.",
            "",
            "| part | ms per step | share of the PARS step |",
            "|---|---|---|",
        ]
        for part, ms in times.items():
            lines.append(f"| {part} | {ms:.3f} | {ms / times['pars']:.1%} |")
    tried = [v for v in args.variants if VARIANTS[VARIANT_NAMES[v]].fallback == "triton"]
    here = torch.empty(0, device=device)  # a Triton kernel runs where "fused" resolves to it
    if tried and pair_kernels.resolve_decoder_kernel("fused", here) != "fused":
        lines += ["", "The Triton fallback's row ran the torch fallback: no Triton kernel runs "
                  "on this device (a CUDA GPU, or Triton's interpreter)."]  # fmt: skip
    if any(VARIANTS[label].kernel == "fused" and row.get("operator") == "tables"
           for rows in results["steps"].values() for label, row in rows.items()):  # fmt: skip
        lines += ["", "The fused operator's row ran the tables operator: " + (
            "no Triton kernel runs on this device (a CUDA GPU, or Triton's interpreter)."
            if args.decoder == "tree" else "db22036's decoder has no other.")]  # fmt: skip
    reasons = break_reasons()
    if reasons:
        lines += ["", "Graph-break reasons: " + "; ".join(reasons) + "."]
    torch._dynamo.reset()
    lines += [
        "",
        "### Memory of one training step",
        "",
        f"bf16 autocast, no compilation, the second step of a fresh model (the first "
        f"allocates AdamW's state): {memory_measure}.",
        "",
        "| batch | n_patches | masked pairs per window | encoder alone: growth (MiB) "
        "| PARS: growth (MiB) | encoder alone: peak (MiB) | PARS: peak (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for batch in args.memory_batch_size or batch_sizes:
        for n_patches in args.memory_patches:
            row = memory_row(config, n_patches, batch, device, args.decoder)
            results["memory"][batch, n_patches] = row
            cells = []
            for i in (0, 1):  # growths, then peaks
                for what in ("encoder", "pars"):
                    value = row[what][i]
                    if row[what] == (None, None):
                        cells.append("out of memory")
                    else:
                        cells.append("n/a on CPU" if value is None else f"{value:,.0f}")
            n_m = round(0.8 * n_patches)
            lines.append(f"| {batch} | {n_patches} | {n_m * n_m} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    write_report(lines, args.out)
    write_json(args.json, name, args.decoder, results)
    return results


def write_json(path, device, decoder, results):
    """Write ``results`` (:func:`main`'s) to ``path`` as JSON, if a path is given: after
    each batch size's step table and at the end, so that a run stopped later
    (``device_check.py``'s time limits) still gives the steps it timed."""
    if not path:
        return
    record = {
        "device": device,
        "decoder": decoder,
        "steps": {str(b): rows for b, rows in results["steps"].items()},
        "memory": {f"{b}x{n}": row for (b, n), row in results["memory"].items()},
    }
    with open(path, "w") as f:
        json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
