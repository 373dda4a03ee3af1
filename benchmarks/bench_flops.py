"""FLOPs of a PARS training step per window, by component, and the MFU of the recorded GPU runs.

**The count.** ``torch.utils.flop_counter.FlopCounterMode`` over the forward and the
backward pass of one training step, on fake tensors on the CPU (shapes only, nothing
computed, so the paper's size at batch 1024 costs no arithmetic). The counter counts
matrix products, as twice their multiply-adds: ``mm``, ``addmm``, ``bmm``, attention,
and the pair operator (the ``torch.library`` operator ``braindecode_pars::pair_attention``
and its backward), which registers its own formulas with ``register_flop_formula``.
Elementwise work (LayerNorm, GELU, the softmax, the loss, AdamW) counts 0, the usual
convention of an MFU. torch's registry has no formula for the CPU's attention kernel
(``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward), so a plain
counter on a CPU leaves the encoder's attention out; this script counts it with the
formulas torch registers for the GPU's attention kernels (:data:`CPU_SDPA`).

**The components** are counted each on its own, forward then backward, on the shapes
they have in the step, with the same draws of patches and masks: the patch tokenizer
and position embedding (``PatchEncoder.tokenize`` and ``position_embedding``), the
encoder's transformer blocks and final norm (``PatchEncoder.encode``), the
cross-attention decoder (``CrossAttentionPairDecoder.forward_counted``) split into the
pair operator (its two ops), the folding of its weights (``folded_weights``: per step,
not per window) and its two projections (the rest of the decoder), and the loss
(``PARS.forward_loss`` on the shift targets). "The rest" is the whole step's count less
the components': 0 when they account for every counted FLOP. The encoder-alone step is
the one ``bench_gpu.py`` times: the encoder on the same patches and masks, its loss a
mean of squares.

The pair operator is counted with its tables kept for the backward pass (the CPU's path,
and an accelerator's within its byte budget: the model's FLOPs); the recomputation of
the tables in backward, the accelerator's path before the byte budget (85727b8, after
the recorded GPU runs), is reported beside it as hardware FLOPs, not used for the MFU.

**The MFU** of every windows-per-second figure of the recorded GPU results
(:data:`RECORDED`): windows/s x FLOPs per window (forward and backward, the paper's
size at the row's batch) / the card's dense bf16 peak (:data:`CARDS`). The MFU of a
row of db22036's decoder uses this tree's count: the same model, another computation
of it.

Usage::

    python -m benchmarks.bench_flops --out benchmarks/results/flops.md
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import re
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from benchmarks.lib.measure import command_line, machine, report_parser, table_head, write_report
from benchmarks.lib.steps import (
    N_TIMES,
    SFREQ,
    SMALL_BATCH,
    SMALL_N_TIMES,
    SMALL_SFREQ,
    model_and_batch,
)
from braindecode_pars.models.encoder_config import ENCODER_SIZES
from braindecode_pars.models.pair import tables as pair_attention

logger = logging.getLogger(__name__)

aten = torch.ops.aten
RESULTS = Path(__file__).resolve().parent / "results"

#: PARS's patches per window and decoder heads (the paper's and the library's).
N_PATCHES, DECODER_HEADS = 40, 8


@dataclasses.dataclass(frozen=True)
class Size:
    """An encoder size and its windows."""

    label: str
    encoder: dict
    n_times: int
    sfreq: float


SMALL = Size("64 x 4 (small), 10-s windows at 100 Hz", ENCODER_SIZES["small"], SMALL_N_TIMES,
             SMALL_SFREQ)  # fmt: skip
PAPER = Size("512 x 8 (paper), 30-s windows at 200 Hz", ENCODER_SIZES["paper"], N_TIMES, SFREQ)
#: The report's count tables: (size, batch); the GPU runs are at the paper's size.
TABLES = ((SMALL, SMALL_BATCH), (PAPER, 256), (PAPER, 1024))

#: The components of a PARS step, in the report's order.
COMPONENTS = (
    "patch tokenizer and position embedding",
    "encoder's transformer blocks",
    "decoder's projections",
    "decoder's weight folding",
    "pair operator",
    "loss",
    "the rest",
)
#: The pair operator's ops (their formulas: ``models/pair/tables.py``).
PAIR_OPS = (
    torch.ops.braindecode_pars.pair_attention,
    torch.ops.braindecode_pars.pair_attention_backward,
)

#: The cards of the recorded runs, by the name their result files give: (the board, its
#: dense bf16 peak in FLOP/s). NVIDIA's datasheets give 1,979 TFLOPS of bf16 for the
#: H100 SXM and the H200 SXM, with sparsity: 989.4 dense. The files name no form
#: factor; these names are the SXM boards' (the others' say PCIe or NVL).
CARDS = {
    "NVIDIA H100 80GB HBM3": ("H100 SXM", 989.4e12),
    "NVIDIA H200": ("H200 SXM", 989.4e12),
}
#: The result files whose windows-per-second figures get an MFU.
RECORDED = ("device_check.md", "gpu.md", "gpu_h200_cuda_graphs.md")
#: The first columns of both tables of rates: where a rate comes from and what ran.
RATE_COLUMNS = ("source (file:line)", "card", "batch", "precision", "decoder")


def _cpu_sdpa_flops(query, key, value, *args, out_shape=None, **kwargs):
    return sdpa_flop_count(query, key, value)


def _cpu_sdpa_backward_flops(grad_out, query, key, value, *args, out_shape=None, **kwargs):
    return sdpa_backward_flop_count(grad_out, query, key, value)


#: The CPU's attention kernels, counted as torch counts the GPU's.
CPU_SDPA = {
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa_flops,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward_flops,
}


def counted(fn):
    """Run ``fn()`` under a FLOP counter (:data:`CPU_SDPA` added); return its result and
    ``{op: FLOPs}``."""
    with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as counter:
        out = fn()
    return out, counter.get_flop_counts().get("Global", {})


def phases(fn):
    """FLOPs by op of ``fn()``'s forward, then of the backward pass from its output (a
    gradient of ones): ``({op: FLOPs}, {op: FLOPs})``."""
    out, forward = counted(fn)
    _, backward = counted(lambda: out.backward(torch.ones_like(out)))
    return forward, backward


def total(counts, ops=None):
    """Sum of ``counts`` (``{op: FLOPs}``), over ``ops`` only if given."""
    return sum(v for op, v in counts.items() if ops is None or op in ops)


@dataclasses.dataclass
class StepFlops:
    """FLOPs of one training step of a batch: ``components`` and ``step`` (the PARS step
    counted whole) and ``encoder_alone``, each ``(forward, backward)``."""

    batch_size: int
    components: dict
    step: tuple
    encoder_alone: tuple

    def per_window(self, which):
        """FLOPs per window, forward + backward, of a component, "step" or "encoder"."""
        pair = {"step": self.step, "encoder": self.encoder_alone}.get(which)
        pair = self.components[which] if pair is None else pair
        return sum(pair) / self.batch_size


def step_flops(
    size, batch_size, n_patches=N_PATCHES, decoder_heads=DECODER_HEADS, keep_tables=True
):
    """FLOPs of a PARS training step of ``batch_size`` windows of ``size`` by component,
    and of the encoder-alone step, on fake tensors; ``keep_tables=False``: the pair
    operator on the accelerator's path with its tables recomputed in backward."""
    path = contextlib.nullcontext() if keep_tables else pair_attention.accelerator_layout()
    with path, FakeTensorMode(allow_non_fake_inputs=True):
        torch.manual_seed(0)
        model, X, _, _ = model_and_batch(
            batch_size,
            size.n_times,
            size.sfreq,
            n_patches=n_patches,
            decoder_heads=decoder_heads,
            decoder_keep_tables_bytes=None if keep_tables else 0,
            **size.encoder,
        )
        draws = model.draw(batch_size, "cpu")
        starts, pos_mask, idx = draws["starts"], draws["pos_mask"], draws["masked_idx"]
        encoder, decoder = model.encoder, model.decoder
        B, N, Fd, n = batch_size, n_patches, encoder.emb_dim, model.n_masked

        def leaf(*shape):
            return torch.randn(*shape, requires_grad=True)

        step = phases(lambda: model(X, draws=draws)["loss"])
        tokens = phases(
            lambda: encoder.tokenize(X, starts) + encoder.position_embedding(starts, pos_mask)
        )
        blocks = phases(lambda: encoder.encode(leaf(B, N, Fd)))
        whole_decoder = phases(lambda: decoder.forward_counted(leaf(B, N, Fd), idx)[0])
        fold = phases(lambda: sum(w.sum() for w in decoder.folded_weights(torch.float32)))
        targets = model.shift_targets(starts.gather(1, idx))
        loss = phases(lambda: model.forward_loss(leaf(B, n, n), targets))
        alone = phases(lambda: encoder(X, starts=starts, pos_mask=pos_mask).float().pow(2).mean())
    components = {}
    for i in range(2):  # forward, backward
        operator = total(whole_decoder[i], PAIR_OPS)
        parts = {
            "patch tokenizer and position embedding": total(tokens[i]),
            "encoder's transformer blocks": total(blocks[i]),
            "decoder's projections": total(whole_decoder[i]) - operator - total(fold[i]),
            "decoder's weight folding": total(fold[i]),
            "pair operator": operator,
            "loss": total(loss[i]),
        }
        parts["the rest"] = total(step[i]) - sum(parts.values())
        for name in COMPONENTS:
            components.setdefault(name, []).append(parts[name])
    return StepFlops(
        batch_size,
        {name: tuple(pair) for name, pair in components.items()},
        (total(step[0]), total(step[1])),
        (total(alone[0]), total(alone[1])),
    )


@dataclasses.dataclass(frozen=True)
class Rate:
    """A windows-per-second figure of a recorded result file."""

    file: str
    line: int  # 1-based
    card: str
    batch: int
    setting: str
    decoder: str
    step: str  # "PARS step", "encoder alone", or a loop's name
    windows_s: float


def _cells(line):
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _number(text):
    return float(text.replace(",", ""))


def recorded_rates(path):
    """The windows-per-second figures of a Markdown result file of GPU runs at the paper's
    size: the rows of its tables with a column "PARS windows/s" (and "encoder-alone
    windows/s") or "windows/s (median round)" (the loops' table).

    The card, the batch, the compile mode and the decoder of a table come from its own
    columns where it has them, else from the list lines above it: ``- Device:`` or
    ``- Card:``, ``- Command:`` (``--batch-size``, ``--compile-mode``), ``- Model:``
    (``batch N``; its last ``;`` part the precision), ``- Pair decoder:`` (reset to this
    tree's at every heading of level 1 or 2). Tables under a size other than 512 x 8
    are left out."""
    path = Path(path)
    lines = path.read_text().splitlines()
    state = dict(card=None, batch=None, mode="default", setting=None, decoder="this tree's")
    paper, rates, i = False, [], 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"#{1,2} ", line):
            state["decoder"] = "this tree's"
        item = re.match(r"- (\w[\w ]*): (.*)", line)
        if item:
            key, value = item.group(1), item.group(2)
            if key in ("Device", "Card"):
                state["card"] = value.split(";")[0].strip()
            elif key == "Command":
                batch = re.search(r"--batch-size (\d+)", value)
                mode = re.search(r"--compile-mode (\S+?)[`\s]", value + " ")
                state["batch"] = int(batch.group(1)) if batch else state["batch"]
                state["mode"] = mode.group(1) if mode else "default"
            elif key in ("Encoder", "Model"):
                paper = "512 x 8" in value
                batch = re.search(r"\bbatch (\d+)", value)
                if batch:
                    state["batch"] = int(batch.group(1))
                    state["setting"] = value.split(";")[-1].strip()
            elif key == "Pair decoder":
                state["decoder"] = re.split(r" \(|,", value.strip(), maxsplit=1)[0]
        head_ok = line.startswith("|") and i + 1 < len(lines)
        if head_ok and lines[i + 1].startswith("|---"):
            head = _cells(line)
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                row = dict(zip(head, _cells(lines[i]), strict=True))
                if paper:
                    rates.extend(_row_rates(row, state, path.name, i + 1))
                i += 1
            continue
        i += 1
    return rates


def _row_rates(row, state, file, line):
    """The rates of one table row (see :func:`recorded_rates`)."""
    batch = int(row["batch"]) if row.get("batch") else state["batch"]
    common = dict(file=file, line=line, card=state["card"], batch=batch,
                  decoder=state["decoder"])  # fmt: skip
    if "PARS windows/s" in row:
        mode = row.get("compile mode", state["mode"])
        setting = row.get("precision", "bf16 autocast + torch.compile")
        if "compile" in setting and mode != "default":
            setting += f" ({mode})"
        steps = (("PARS step", "PARS windows/s"), ("encoder alone", "encoder-alone windows/s"))
        return [
            Rate(setting=setting, step=step, windows_s=_number(row[column]), **common)
            for step, column in steps
            if row.get(column)
        ]
    if "windows/s (median round)" in row:
        step = row["what"].replace("`", "")
        step = "PARS step" if step == "bare training step" else step
        windows_s = _number(row["windows/s (median round)"])
        return [Rate(setting=state["setting"], step=step, windows_s=windows_s, **common)]
    return []


def mfu(rate, flops):
    """``(achieved FLOP/s, MFU)`` of ``rate`` (a :class:`Rate`) given ``flops``, the
    :class:`StepFlops` of its batch at the paper's size."""
    if rate.card not in CARDS:
        raise ValueError(
            f"'card' must be one of {sorted(CARDS)} (their peaks are known), but "
            f"{rate.file}:{rate.line} names {rate.card!r}."
        )
    per_window = flops.per_window("encoder" if rate.step == "encoder alone" else "step")
    achieved = rate.windows_s * per_window
    return achieved, achieved / CARDS[rate.card][1]


def _mflop(flops):
    return f"{flops / 1e6:,.2f}"


def count_table(size, flops):
    """The Markdown lines of one size's count."""
    B, whole = flops.batch_size, sum(flops.step)
    lines = [
        f"### {size.label}, batch {B}",
        "",
        *table_head(
            "component",
            "forward (MFLOP per window)",
            "backward (MFLOP per window)",
            "forward + backward (MFLOP per window)",
            "share of the PARS step",
        ),
    ]
    rows = [(name, flops.components[name]) for name in COMPONENTS]
    rows += [("PARS step (counted whole)", flops.step), ("encoder-alone step", flops.encoder_alone)]
    for name, (forward, backward) in rows:
        lines.append(
            f"| {name} | {_mflop(forward / B)} | {_mflop(backward / B)} "
            f"| {_mflop((forward + backward) / B)} | {(forward + backward) / whole:.1%} |"
        )
    return lines


def main(argv=None):
    """Count, read the recorded rates, write the report; return ``(counts, rows)``:
    ``{(size label, batch): StepFlops}`` and the MFU rows ``(Rate, FLOP/s, MFU)``."""
    parser = report_parser(__doc__)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    counts = {(size.label, batch): step_flops(size, batch) for size, batch in TABLES}
    rates = [rate for name in RECORDED for rate in recorded_rates(RESULTS / name)]
    by_batch = {}
    rows = []
    for rate in rates:
        if rate.batch not in by_batch:
            by_batch[rate.batch] = counts.get((PAPER.label, rate.batch)) or step_flops(
                PAPER, rate.batch
            )
        rows.append((rate, *mfu(rate, by_batch[rate.batch])))
    recomputed = step_flops(PAPER, 1024, keep_tables=False)
    kept = counts[(PAPER.label, 1024)]
    extra = (recomputed.components["pair operator"][1] - kept.components["pair operator"][1]) / 1024

    lines = [
        "# FLOPs of a PARS training step, and the MFU of the recorded GPU runs",
        "",
        f"- Machine: {machine()}",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Command: `{command_line(__spec__.name, argv)}`",
        "- Count: `torch.utils.flop_counter.FlopCounterMode` on fake tensors on the CPU, "
        "forward and backward of one training step (no optimiser step), each component "
        "on its own on the shapes it has in the step; FLOPs are twice the multiply-adds "
        "of the matrix products (`mm`, `addmm`, `bmm`, attention) and the pair operator's "
        "own formulas (`braindecode_pars.pair_attention` and its backward, registered in "
        "`braindecode_pars/models/pair/tables.py`); elementwise work (LayerNorm, GELU, "
        "softmax, the loss, AdamW) counts 0. The CPU's attention kernel, which torch's "
        "registry lacks, is counted with torch's formulas for the GPU's.",
        f"- PARS: {N_PATCHES} patches of 1 s, pos_mask_ratio 0.8 (32 masked patches, "
        f"32 x 32 pairs), the cross-attention decoder with {DECODER_HEADS} heads, its "
        "tables kept for backward. The weight folding runs once a step: its FLOPs per "
        "window fall with the batch, as do the pair operator's fallback slots "
        "(`fallback_slots`: at least 256 a call).",
        "",
        "## FLOPs per window, by component",
        "",
    ]
    for size, batch in TABLES:
        lines += [*count_table(size, counts[(size.label, batch)]), ""]
    lines += [
        "With the tables recomputed in backward (the accelerator's path before 85727b8, "
        "which the recorded GPU runs took), the pair operator's backward does "
        f"{_mflop(extra)} MFLOP more per window at the paper's size, batch 1024: "
        f"hardware FLOPs ({_mflop(recomputed.per_window('step'))} MFLOP per window for "
        "the step), left out of the MFU, which counts the model's.",
        "",
        "## MFU of the recorded GPU runs",
        "",
        "MFU = windows/s x FLOPs per window of the step timed (forward + backward, the "
        "paper's size at the row's batch, from the tables above) / the card's dense bf16 "
        "peak: 989.4 TFLOPS for the H100 SXM and the H200 SXM (NVIDIA's datasheets: "
        "1,979 TFLOPS of bf16 Tensor Core, a figure with sparsity; dense is half). The "
        "result files name the cards `NVIDIA H100 80GB HBM3` and `NVIDIA H200`, not their "
        "form factor; these are the names the SXM boards report (the PCIe and NVL boards' "
        "names say so), and the SXM peak is used. Rows in float32 and the pair operator's "
        "own products (float32 in every row) cannot run at the bf16 peak; their MFU is "
        "against it all the same. Rows of db22036's decoder use this tree's count.",
        "",
        *table_head(
            *RATE_COLUMNS,
            "step timed",
            "windows/s",
            "MFLOP per window",
            "TFLOPS",
            "MFU",
        ),
    ]
    for rate, achieved, share in rows:
        flops = by_batch[rate.batch]
        per_window = flops.per_window("encoder" if rate.step == "encoder alone" else "step")
        lines.append(
            f"| `{rate.file}:{rate.line}` | {CARDS[rate.card][0]} | {rate.batch} "
            f"| {rate.setting} | {rate.decoder} | {rate.step} | {rate.windows_s:,.1f} "
            f"| {_mflop(per_window)} | {achieved / 1e12:.1f} | {share:.1%} |"
        )
    lines += ["", *decoder_increment(rows, by_batch)]
    write_report(lines, args.out)
    return counts, rows


def decoder_increment(rows, by_batch):
    """Lines of the decoder's increment: per table row with both a PARS and an
    encoder-alone rate, the extra FLOPs and time per window of the PARS step."""
    pairs = {}
    for rate, _, _ in rows:
        if rate.step in ("PARS step", "encoder alone"):
            pairs.setdefault((rate.file, rate.line), {})[rate.step] = rate
    lines = [
        "## The decoder's increment",
        "",
        "Per row with both steps: the PARS step's time and FLOPs per window over the "
        "encoder-alone step's; the rate at which the decoder's extra FLOPs ran (extra "
        "FLOPs per window over extra seconds per window), against the peak; the "
        "decoder's extra time a step of the row's batch, and the time its extra FLOPs "
        "would take at the encoder-alone step's rate of FLOPs.",
        "",
        *table_head(
            *RATE_COLUMNS,
            "PARS / encoder: time",
            "PARS / encoder: FLOPs",
            "decoder's increment: TFLOPS",
            "decoder's increment: MFU",
            "decoder's time a step (ms)",
            "its FLOPs at the encoder-alone step's rate (ms)",
        ),
    ]
    for (file, line), pair in pairs.items():
        if len(pair) < 2:
            continue
        pars, alone = pair["PARS step"], pair["encoder alone"]
        B = pars.batch
        flops = by_batch[pars.batch]
        f_pars, f_alone = flops.per_window("step"), flops.per_window("encoder")
        t_pars, t_alone = 1 / pars.windows_s, 1 / alone.windows_s
        rate = (f_pars - f_alone) / (t_pars - t_alone) if t_pars > t_alone else float("inf")
        lines.append(
            f"| `{file}:{line}` | {CARDS[pars.card][0]} | {pars.batch} | {pars.setting} "
            f"| {pars.decoder} | {t_pars / t_alone:.2f} | {f_pars / f_alone:.3f} "
            f"| {rate / 1e12:.1f} | {rate / CARDS[pars.card][1]:.1%} "
            f"| {(t_pars - t_alone) * B * 1e3:.2f} "
            f"| {(f_pars - f_alone) * B / (f_alone * alone.windows_s) * 1e3:.2f} |"
        )
    return lines


if __name__ == "__main__":
    main()
