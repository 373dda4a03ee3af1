"""Cost of the PARS pair decoder beside the encoder, on this machine.

Two modes. ``--mode table`` (the default) records:

1. the training step (forward, backward, AdamW step) of PARS against the step of the
   encoder alone on the same patches and masks (its loss a plain mean of squares),
   in windows per second, at three encoder sizes: 64 x 4 (the shipped ``pars-small``)
   and 128 x 6 (8 heads, ff 256), both at batch 64 of 10-s windows at 100 Hz, and the
   paper's 512 x 8 at batch 16 of 30-s windows at 200 Hz; 40 patches, pos_mask_ratio
   0.8 throughout; at 64 x 4 also under bf16 autocast, through ``torch.compile``,
   and spread over two processes of one thread each (DistributedDataParallel with
   gloo, the global batch of 64 shared); and the step of every pretext task at
   64 x 4, in the same table;
2. where the time of a PARS step goes at 64 x 4 and 128 x 6 (a hand breakdown: each
   part timed on its own, the median over the steps);
3. at the paper's size, the folded decoders against the naive, materialising ones;
4. the peak resident memory of one training step at n_patches 40, 80 and 128, each
   configuration in a fresh process.

``--mode ab`` compares the decoder of the git revision ``--against`` with this one's,
for changes smaller than this machine's drift (up to a third within minutes; the retired
``--mode repeat`` measured it: ``pair_decoder_repeat.md``): the pair decoder of that revision
(``braindecode_pars/models/pair/decoders.py``, or ``models/pair_decoders.py`` before
the package's subfolders) is loaded beside the working one, and every round runs the
64 x 4 PARS step
with the decoder as each module's class (the same parameters; their order alternating)
and the encoder-alone step, so that each round's ratios share the machine's state.
Reported per run: each version's median ratio to the encoder-alone step, and the
median over rounds of the new step's time over the old one's.

Usage::

    python -m benchmarks.bench_pair_decoder --out benchmarks/results/pair_decoder.md
    python -m benchmarks.bench_pair_decoder --mode ab --against HEAD~1 \
        --out benchmarks/results/pair_decoder_ab.md
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import json
import logging
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

from benchmarks.lib.measure import (
    ROOT,
    alternating_step_times,
    check_at_least_one,
    in_child,
    machine,
    median_times,
    paired_ratio,
    peak_growth,
    report_parser,
    step_times,
    write_report,
)
from benchmarks.lib.steps import (
    SIZES,
    SMALL_BATCH,
    SMALL_N_TIMES,
    SMALL_SFREQ,
    make_steps,
    optimiser,
)
from braindecode_pars import PARS
from braindecode_pars.models.encoder_config import ENCODER_SIZES
from braindecode_pars.models.pretext import PRETEXT_MODELS

logger = logging.getLogger("bench_pair_decoder")


#: Written under the tables. The notes of the recorded run (the other ways to run the
#: step on a CPU, the fused AdamW, how far the ratio can go, what was tried and not kept,
#: the page faults, the decoder heads, the drift) are in ``results/pair_decoder.md``;
#: they were this constant until the script stopped carrying them (``git log -p --
#: benchmarks/results/pair_decoder.md`` has them for every run).
NOTES = """## Notes

The notes on these measurements, what was tried and what was kept, are under the
tables of the recorded run (`git log -p -- benchmarks/results/pair_decoder.md`). This
machine's speed moves by up to a third from minute to minute: compare ratios measured
in the same rounds (`--mode ab`), not windows/s of two runs.
"""


def pretext_step(method, batch_size):
    """A training step of a pretext task with its defaults, 64 x 4, 10-s windows at 100 Hz."""
    model = PRETEXT_MODELS[method](
        n_times=SMALL_N_TIMES, sfreq=SMALL_SFREQ, **ENCODER_SIZES["small"]
    )
    opt = optimiser(model)
    X = torch.randn(batch_size, 1, SMALL_N_TIMES)

    def step():
        opt.zero_grad(set_to_none=True)
        model(X)["loss"].backward()
        opt.step()

    return step


def step_breakdown(size, batch_size, repeats, warmup=2):
    """Median milliseconds of each part of a PARS step (10-s windows, 40 patches).

    The model's step methods are wrapped in timers and the step runs as in training,
    so that the parts add up to the whole forward; "rest of the forward" is what
    ``PARS.forward`` does beside them (input check, the N x N prediction grid, the
    pair mask, the trivial loss). The backward pass is split by timing, in the same
    step, the backward of the decoder alone on a detached copy of the encoder's output.
    """
    model = PARS(n_times=SMALL_N_TIMES, sfreq=SMALL_SFREQ, n_patches=40, **size)
    opt = optimiser(model)
    X = torch.randn(batch_size, 1, SMALL_N_TIMES)
    parts = {
        "sample_patches": "sampling and masking",
        "mask_positions": "sampling and masking",
        "forward_encoder": "encoder forward",
        "forward_decoder_counted": "decoder forward",
        "shift_targets": "targets and loss",
        "forward_loss": "targets and loss",
    }
    step = {}

    def timed(name, method):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            out = method(*args, **kwargs)
            step[name] = step.get(name, 0.0) + 1e3 * (time.perf_counter() - t0)
            return out

        return wrapper

    for attr, name in parts.items():
        setattr(model, attr, timed(name, getattr(model, attr)))

    def run():
        step.clear()
        opt.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        out = model(X)
        t1 = time.perf_counter()
        out["loss"].backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        step["rest of the forward"] = 1e3 * (t1 - t0) - sum(step.values())
        step["backward"] = 1e3 * (t2 - t1)
        step["AdamW step"] = 1e3 * (t3 - t2)
        # the decoder's share of the backward pass, on the same patches and masks
        y = model.encoder(X, starts=out["starts"], pos_mask=out["pos_mask"]).detach()
        y.requires_grad_()
        idx = out["pos_mask"].nonzero()[:, 1].view(batch_size, -1)
        theta = model.shift_targets(out["starts"].gather(1, idx))
        loss = model.forward_loss(model.decoder(y, idx), theta)
        t0 = time.perf_counter()
        loss.backward()
        decoder_backward = 1e3 * (time.perf_counter() - t0)
        return {
            **{name: step[name] for name in dict.fromkeys(parts.values())},
            "rest of the forward": step["rest of the forward"],
            "encoder backward": step["backward"] - decoder_backward,
            "decoder backward": decoder_backward,
            "AdamW step": step["AdamW step"],
        }

    for _ in range(warmup):
        run()
    rows = [run() for _ in range(repeats)]
    return {name: statistics.median(r[name] for r in rows) for name in rows[0]}


def _ddp_worker(rank, world, port, threads, global_batch, repeats, results):
    """One process of :func:`ddp_rates`: DistributedDataParallel PARS and encoder-alone
    steps on its share of the global batch, timed on rank 0 (each step ends in the
    gradients' all-reduce, so the ranks stay in step)."""
    import os

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        # each rank its own windows, patches and masks; DistributedDataParallel
        # broadcasts rank 0's weights when it wraps the modules
        torch.manual_seed(rank + 1)
        size, small = SIZES["64 x 4"]
        steps = make_steps(
            40, "cross_attention", "folded", global_batch // world, size, small,
            wrap=DDP, own_encoder=True,
        )  # fmt: skip
        times = step_times(list(steps), repeats, warmup=3)
        if rank == 0:
            results.put(times)
    finally:
        dist.destroy_process_group()


def ddp_rates(world=2, threads=1, global_batch=SMALL_BATCH, repeats=21):
    """Step times (PARS, encoder alone; a list each) of 64 x 4 pretraining spread over
    ``world`` CPU processes of ``threads`` torch threads each, the global batch shared
    (as ``torchrun --nproc_per_node 2 braindecode-pars pretrain --threads 1``)."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    mp.start_processes(
        _ddp_worker,
        args=(world, port, threads, global_batch, repeats, results),
        nprocs=world,
        start_method="spawn",
    )
    return results.get()


def summary(times):
    """Median PARS and encoder-alone step times of interleaved ``times`` and their
    paired ratio as the tables print it, "median (q1-q3)"."""
    t_pars, t_enc = (statistics.median(t) for t in times)
    ratio, q1, q3 = paired_ratio(*times)
    return t_pars, t_enc, f"{ratio:.2f} ({q1:.2f}-{q3:.2f})"


def memory_child(n_patches, impl, what, batch_size):
    """Run in a fresh process: growth of the peak resident memory over one step, in MiB."""
    pars_step, encoder_step = make_steps(n_patches, "cross_attention", impl, batch_size)
    peak, elapsed = peak_growth(pars_step if what == "pars" else encoder_step)
    print(json.dumps({"peak_mib": peak, "step_s": elapsed}))


def measure_memory(n_patches, impl, what, batch_size):
    return in_child(__spec__.name, n_patches, impl, what, batch_size)


def step_table(args):
    """The report of ``--mode table``: its lines."""
    B, R = args.batch_size, args.repeats
    lines = [
        "# Pair decoder benchmark",
        "",
        f"Machine: {machine()}. Training steps (forward, backward, AdamW as pretraining "
        f"builds it: fused), median of {R} steps after 2 warm-up steps, the steps "
        "compared interleaved. The ratio of step times is the median over the rounds of "
        "the ratio of a round's two steps (one after the other), with its quartiles: "
        "this machine's speed drifts by up to a third within minutes, which a ratio of "
        "two medians taken over different moments would carry.",
        "",
        "Command: `python -m benchmarks.bench_pair_decoder --out "
        "benchmarks/results/pair_decoder.md`",
        "",
        "## PARS step against the encoder alone, and every pretext task",
        "",
        "Encoder-alone step: the same encoder on the same patches and masks, its loss a "
        "mean of squares. 64 x 4 and 128 x 6 (8 heads, ff 256): batch 64 of 10-s windows "
        f"at 100 Hz; 512 x 8: the paper's size, batch {B} of 30-s windows at 200 Hz; PARS "
        "with 40 patches, pos_mask_ratio 0.8, the folded cross-attention decoder. MAE, MP3 "
        "and DropPos use their defaults (the 10 non-overlapping 1-s patches of a window).",
        "",
        "| encoder | pretext task | windows/s | encoder-alone windows/s | "
        "ratio of step times (quartiles) |",
        "|---|---|---|---|---|",
    ]
    steps = {}

    def emit(line):
        """Add a table row to the report and show it now (the run takes a while)."""
        lines.append(line)
        print(line, flush=True)

    def row(label, batch, times):
        """A row of the step table from interleaved PARS and encoder-alone times."""
        t_pars, t_enc, ratio = summary(times)
        emit(f"| {label} | PARS | {batch / t_pars:,.0f} | {batch / t_enc:,.0f} | {ratio} |")

    def size_row(name):
        """The step-table row of an encoder size of SIZES; its step times."""
        size, small = SIZES[name]
        batch = SMALL_BATCH if small else B
        pars_step, encoder_step = make_steps(40, "cross_attention", "folded", batch, size, small)
        times = step_times([pars_step, encoder_step], R)
        row(name, batch, times)
        return times

    for name in SIZES:
        steps[name] = size_row(name)
    variants = {
        "1 thread": dict(threads=1),
        "bf16 autocast": dict(amp=True),
        "torch.compile": dict(wrap=torch.compile),
        "torch.compile, bf16 autocast": dict(amp=True, wrap=torch.compile),
    }
    for label, options in variants.items():
        size, small = SIZES["64 x 4"]
        threads = options.pop("threads", None)
        pars_step, encoder_step = make_steps(
            40, "cross_attention", "folded", SMALL_BATCH, size, small, **options
        )
        default_threads = torch.get_num_threads()
        torch.set_num_threads(threads or default_threads)
        try:
            row(f"64 x 4, {label}", SMALL_BATCH, step_times([pars_step, encoder_step], R, 3))
        finally:
            torch.set_num_threads(default_threads)
    row(
        f"64 x 4, 2 processes x 1 thread (DDP, gloo; global batch {SMALL_BATCH})",
        SMALL_BATCH,
        ddp_rates(world=2, threads=1, repeats=R),
    )
    others = ("mae", "mp3", "droppos")
    times = median_times([pretext_step(m, SMALL_BATCH) for m in others], R)
    for method, t in zip(others, times, strict=True):
        label = {"mae": "MAE", "mp3": "MP3", "droppos": "DropPos"}[method]
        emit(f"| 64 x 4 | {label} | {SMALL_BATCH / t:,.0f} | | |")

    lines += [
        "",
        "## Where the time of a PARS step goes",
        "",
        "Milliseconds per step (batch 64, 10-s windows at 100 Hz, 40 patches), each part "
        "timed on its own, median over the steps; see `step_breakdown` for how the "
        "backward pass is split.",
        "",
        "| part | 64 x 4 (ms) | 128 x 6 (ms) |",
        "|---|---|---|",
    ]
    small = step_breakdown(SIZES["64 x 4"][0], SMALL_BATCH, R)
    mid = step_breakdown(SIZES["128 x 6"][0], SMALL_BATCH, R)
    for part in small:
        emit(f"| {part} | {small[part]:.1f} | {mid[part]:.1f} |")
    emit(f"| sum | {sum(small.values()):.1f} | {sum(mid.values()):.1f} |")

    lines += [
        "",
        f"## Folded and naive decoders at the paper's size, batch {B}, n_patches = 40",
        "",
        "| decoder | implementation | PARS step (s) | encoder-alone step (s) | ratio (quartiles) |",
        "|---|---|---|---|---|",
    ]
    for decoder in ("cross_attention", "mlp"):
        for impl in ("folded", "naive"):
            if (decoder, impl) == ("cross_attention", "folded"):
                times = steps["512 x 8 (paper)"]
            else:
                times = step_times(list(make_steps(40, decoder, impl, B)), R)
            t_pars, t_enc, ratio = summary(times)
            emit(f"| {decoder} | {impl} | {t_pars:.3f} | {t_enc:.3f} | {ratio} |")
    lines += [
        "",
        "## Peak memory of one training step (cross-attention decoder, paper's size)",
        "",
        "Growth of the process's peak resident memory (VmHWM, reset before the step) over "
        "the first training step, which also allocates the gradients and AdamW's state "
        "(about 200 MiB at this size); each configuration in a fresh process. Step times "
        "here are first steps.",
        "",
        "| n_patches | masked pairs per window | encoder alone (MiB) | folded (MiB) | "
        "naive (MiB) | folded step (s) | naive step (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_patches in (40, 80, 128):
        enc = measure_memory(n_patches, "folded", "encoder", B)
        fol = measure_memory(n_patches, "folded", "pars", B)
        nai = measure_memory(n_patches, "naive", "pars", B)
        n_m = round(0.8 * n_patches)
        emit(
            f"| {n_patches} | {n_m * n_m} | {enc['peak_mib']:.0f} | {fol['peak_mib']:.0f} | "
            f"{nai['peak_mib']:.0f} | {fol['step_s']:.2f} | {nai['step_s']:.2f} |"
        )
    lines += [
        "",
        "## The 64 x 4 and paper-size rows again, at the end of the run",
        "",
        "The first two rows of the step table measured anew, minutes later, on new models:",
        "how much the same measurement moves within one run on this machine.",
        "",
        "| encoder | pretext task | windows/s | encoder-alone windows/s | "
        "ratio of step times (quartiles) |",
        "|---|---|---|---|---|",
    ]
    for name in ("64 x 4", "512 x 8 (paper)"):
        size_row(name)
    return [*lines, "", *NOTES.strip().splitlines()]


#: The package whose modules ``--mode ab`` loads as they are in another revision.
MODELS = "braindecode_pars/models"
#: Revisions loaded so far in this process, by commit: their ``pair_decoders`` module.
_LOADED = {}


def _git(*args, revision):
    """The output of ``git args`` in this checkout; a ``SystemExit`` naming
    ``--against revision`` when git fails."""
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except subprocess.CalledProcessError as err:
        raise SystemExit(
            f"bench_pair_decoder: '--against {revision}': git has no {MODELS} there "
            f"({err.stderr.strip()})"
        ) from None


def load_revision(revision):
    """``--mode ab``: the pair-decoder module as it is in git ``revision``.

    The modules of that revision's pair decoder are written to a folder that becomes
    the package ``braindecode_pars.models_<commit>``, and its ``pair_decoders`` is
    imported from there: every module of ``braindecode_pars/models`` in the layout
    before the package's subfolders (``models/pair_decoders.py``), the modules of
    ``braindecode_pars/models/pair`` after it (``decoders.py`` as ``pair_decoders``,
    ``tables.py`` as ``pair_tables``..., their imports of each other rewritten to
    match). The modules it imports beside it (the pair-attention operator) are that
    revision's too, while the package's other modules resolve to this checkout's (the
    argument checks of the layout before the subfolders to this checkout's
    ``braindecode_pars._util.checks``). Its ``torch.library`` operators are registered under
    the namespace ``braindecode_pars_<commit>``, so that they neither replace this
    revision's operators nor run in their place."""
    commit = _git("rev-parse", "--verify", f"{revision}^{{commit}}", revision=revision)
    commit = commit.strip()[:12]
    if commit in _LOADED:
        return _LOADED[commit]
    names = _git("ls-tree", "--name-only", f"{commit}:{MODELS}", revision=revision).split()
    package_name = f"braindecode_pars.models_{commit}"
    if "pair_decoders.py" in names:  # the layout before the subfolders
        files = {name: name for name in names if name.endswith(".py")}
        folder_in_git = MODELS
    elif "pair" in names:  # models/pair/decoders.py, tables.py, kernels.py...
        pair = _git("ls-tree", "--name-only", f"{commit}:{MODELS}/pair", revision=revision)
        files = {n: f"pair_{n}" for n in pair.split() if n.endswith(".py") and n != "__init__.py"}
        folder_in_git = f"{MODELS}/pair"
    else:
        raise SystemExit(
            f"bench_pair_decoder: '--against {revision}': git has neither "
            f"{MODELS}/pair_decoders.py nor {MODELS}/pair/ there"
        )
    folder = Path(tempfile.mkdtemp(prefix=f"pair_decoders_{commit}_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    namespace = f"braindecode_pars_{commit}"
    for name, target in files.items():
        source = _git("show", f"{commit}:{folder_in_git}/{name}", revision=revision)
        source = source.replace("braindecode_pars::", f"{namespace}::")
        source = source.replace("torch.ops.braindecode_pars.", f"torch.ops.{namespace}.")
        # the layout before the subfolders kept its argument checks in ``_checks``
        source = source.replace(
            "from .._checks import", "from braindecode_pars._util.checks import"
        )
        # the subfolder's modules import each other by absolute name: this package's
        source = re.sub(
            r"from braindecode_pars\.models\.pair import (\w+)",
            lambda m: f"from {package_name} import pair_{m.group(1)}",
            source,
        )
        source = re.sub(
            r"braindecode_pars\.models\.pair\.(\w+)",
            lambda m: f"{package_name}.pair_{m.group(1)}",
            source,
        )
        (folder / target).write_text(source)
    package = types.ModuleType(package_name)
    package.__path__, package.__package__ = [str(folder)], package.__name__
    sys.modules[package.__name__] = package
    _LOADED[commit] = importlib.import_module(f"{package.__name__}.pair_decoders")
    return _LOADED[commit]


def ab_rounds(old_class, rounds, warmup=3):
    """``--mode ab``: per round the times of the PARS step with its decoder of class
    ``old_class`` and of this revision's class, and of the encoder-alone step (seconds).

    The decoder keeps its parameters; only its class changes between the steps, and
    with it all the code its forward and backward run (the functions of the other
    revision's module included).
    """
    encoder, small = SIZES["64 x 4"]
    pars_step, encoder_step = make_steps(
        40, "cross_attention", "folded", SMALL_BATCH, encoder, small
    )
    decoder = pars_step.model.decoder
    new_class = type(decoder)

    def with_class(cls):
        def step():
            decoder.__class__ = cls
            pars_step()

        return step

    steps = [with_class(old_class), with_class(new_class), encoder_step]
    try:
        return alternating_step_times(steps, rounds, warmup)
    finally:
        decoder.__class__ = new_class


def ab_summary(times):
    """(old ratio, new ratio, new / old step): medians over the rounds."""
    old, new, encoder = times
    return paired_ratio(old, encoder)[0], paired_ratio(new, encoder)[0], paired_ratio(new, old)[0]


def ab_report(results, args, revision_line):
    """The Markdown lines of ``--mode ab``: every run, then the medians over the runs."""
    lines = [
        "# The 64 x 4 PARS step: this revision's pair decoder against another's",
        "",
        f"Machine: {machine()}. {revision_line} Each run: {args.rounds} rounds after 3 "
        "warm-up rounds, each round the PARS step with either decoder (their order "
        "alternating) and the encoder-alone step; the same model and batch (batch 64 of "
        "10-s windows at 100 Hz, 40 patches, pos_mask_ratio 0.8, folded cross-attention "
        "decoder, fused AdamW). Ratios: medians over the rounds.",
        "",
        f"Command: `python -m benchmarks.bench_pair_decoder --mode ab --against "
        f"{args.against} --runs {args.runs} --rounds {args.rounds} --out {args.out or '...'}`",
        "",
        "| run | ratio to the encoder-alone step, against | ratio, this revision | "
        "step time, this revision / against |",
        "|---|---|---|---|",
    ]
    for i, (old, new, rel) in enumerate(results, 1):
        lines.append(f"| {i} | {old:.3f} | {new:.3f} | {rel:.3f} |")
    medians = [statistics.median(r[k] for r in results) for k in range(3)]
    lines.append(f"| median | {medians[0]:.3f} | {medians[1]:.3f} | {medians[2]:.3f} |")
    lines.append(
        f"| runs where this revision's ratio is lower | | "
        f"{sum(r[1] < r[0] for r in results)} of {len(results)} | |"
    )
    return lines


def ab(args):
    """The report of ``--mode ab``: its lines."""
    old = load_revision(args.against)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", args.against],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    head = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    results = []
    for i in range(args.runs):
        results.append(ab_summary(ab_rounds(old.CrossAttentionPairDecoder, args.rounds)))
        logger.info("run %d: against %.3f, this %.3f, step %.3f", i + 1, *results[-1])
    line = f"This revision: {head}; against: {args.against} ({commit})."
    return ab_report(results, args, line)


def main(argv=None):
    parser = report_parser(__doc__)
    parser.add_argument("--mode", choices=("table", "ab"), default="table")
    parser.add_argument("--batch-size", type=int, default=16, help="at the paper's size")
    parser.add_argument("--repeats", type=int, default=21, help="interleaved rounds per row")
    parser.add_argument("--runs", type=int, default=5, help="ab: runs")
    parser.add_argument("--against", help="ab: git revision of the other decoder")
    parser.add_argument("--rounds", type=int, default=100, help="ab: rounds per run")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        n_patches, impl, what, batch_size = args.child
        memory_child(int(n_patches), impl, what, int(batch_size))
        return
    check_at_least_one(parser, args, "repeats", "runs", "rounds")
    if args.mode == "ab" and args.against is None:
        parser.error("--mode ab needs --against: the git revision of the other decoder")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(0)
    if args.mode == "ab":
        lines = ab(args)
    else:
        lines = step_table(args)
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
