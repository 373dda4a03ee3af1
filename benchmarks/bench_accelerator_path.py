"""The accelerator path of a PARS step, checked on a CPU: memory and FLOPs against the encoder.

A CPU in eager mode does not take the path a GPU takes, so a CPU-only check can pass
while the GPU path grows. This script takes that path on a CPU:

- the step is compiled with ``torch.compile(backend="aot_eager")``: Dynamo and
  AOTAutograd trace forward and backward as they do for Inductor, and the traced graph
  runs eagerly;
- the pair operator (:func:`braindecode_pars.models.pair.attention.pair_attention`)
  runs as on an accelerator: the chunks of windows sized by
  ``ACCELERATOR_SCRATCH_RATIO``, not the CPU's cache-sized ones, and the tables
  recomputed in the backward pass, not kept (``--cpu-path`` keeps the CPU's way).

For n_patches 40 and 128 it records, PARS against the encoder alone on the same patches
and masks (the same model's encoder, its loss a mean of squares, compiled the same way):

1. **memory**: the growth of the process's resident peak (VmHWM, reset before the step)
   over one training step (forward, backward, AdamW) after a warm-up step that
   allocates AdamW's state, each measured in a fresh process whose malloc maps every
   block of 128 KiB or more on its own and unmaps it when freed (so the resident peak
   follows what the step holds); on a 128 x 2 encoder
   (8 heads, feed-forward 128, 8 decoder heads), 30-s windows at 200 Hz, batch 64;
2. **FLOPs**: ``torch.utils.flop_counter`` over the forward and backward, on fake
   tensors (shapes only, nothing computed) at the paper's size (512 x 8, 30-s windows
   at 200 Hz) and batch 64, the 128 x 2 encoder beside it.

The targets: at 128 patches, PARS at most 1.5 times the encoder's memory growth and
1.1 times its FLOPs (at the paper's size: on the 128 x 2 encoder the decoder's
``n^2 N`` products per head weigh more against the encoder's, so its FLOPs row is
given for scale). ``benchmarks/tests/test_bench_accelerator_path.py`` runs the check at
128 patches in ``make test-lab``.

Usage::

    python -m benchmarks.bench_accelerator_path --out benchmarks/results/accelerator_path.md
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import shlex
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from benchmarks.lib.malloc import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, glibc
from benchmarks.lib.measure import in_child, machine, peak_growth, write_report
from benchmarks.lib.steps import model_and_batch
from braindecode_pars.models.encoder_config import PatchEncoderConfig
from braindecode_pars.models.pair import attention as pair_attention

#: The encoder whose steps are run for the memory rows: 128 x 2 with the paper's
#: proportions (8 heads, feed-forward as wide as the tokens).
MEMORY_SIZE = {"emb_dim": 128, "depth": 2, "n_heads": 8, "ff_dim": 128}
#: n_patches of the rows.
PATCHES = (40, 128)
#: The targets at 128 patches: PARS / encoder alone.
MAX_MEMORY_RATIO, MAX_FLOP_RATIO = 1.5, 1.1
#: The target of the float32 share of a paper-size step's FLOPs under bf16 autocast.
MAX_FLOAT32_SHARE = 0.03


def build(size, n_patches, batch_size, decoder_impl="folded"):
    """A PARS model of encoder ``size`` (seed 0), a batch, and fixed patches and masks."""
    torch.manual_seed(0)
    return model_and_batch(
        batch_size,
        n_patches=n_patches,
        decoder_impl=decoder_impl,
        **PatchEncoderConfig.from_size(size).asdict(),
    )


def losses(model, X, starts, pos_mask, compiled):
    """The two losses as functions: PARS's, and the encoder alone's (mean of squares)."""
    pars, encoder = model, model.encoder
    if compiled:
        pars = torch.compile(model, backend="aot_eager", dynamic=False)
        encoder = torch.compile(model.encoder, backend="aot_eager", dynamic=False)
    return {
        "pars": lambda: pars(X)["loss"],
        "encoder": lambda: encoder(X, starts=starts, pos_mask=pos_mask).pow(2).mean(),
    }


def track_live_memory():
    """Have glibc map every block of 128 KiB or more on its own and unmap it when freed,
    so that the resident peak follows the memory a step holds, not what malloc kept."""
    libc = glibc()
    if libc is None:
        raise RuntimeError("the memory rows need glibc's malloc (Linux)")
    for param in (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD):
        if libc.mallopt(param, 128 * 1024) != 1:
            raise RuntimeError(f"mallopt({param}) failed")


#: The block of :func:`accelerator_path`, kept open for the rest of the process (a
#: block without a reference would be closed by the garbage collector).
_OPEN_BLOCKS = contextlib.ExitStack()


def accelerator_path():
    """Make the pair operator, on a CPU, run as it runs on an accelerator, for the rest
    of this process (a child's)."""
    _OPEN_BLOCKS.enter_context(pair_attention.accelerator_layout())


def memory_child(what, n_patches, batch_size, cpu_path):
    """In a fresh process: MiB of resident-peak growth of one compiled training step."""
    torch.set_num_threads(1)
    track_live_memory()
    if not cpu_path:
        accelerator_path()
        # the tables recomputed in backward, as a GPU does once they exceed the operator's
        # byte budget (batch 1024 at the paper's size): the memory target is that path's
        pair_attention.KEEP_TABLES_BYTES = 0
    model, X, starts, pos_mask = build(MEMORY_SIZE, n_patches, batch_size)
    loss = losses(model, X, starts, pos_mask, compiled=True)[what]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad(set_to_none=True)
        loss().backward()
        opt.step()

    step()  # compiles, and allocates AdamW's state
    step()
    return {"growth_mib": peak_growth(step)[0]}


def memory_row(n_patches, batch_size, cpu_path=False):
    """PARS's and the encoder's step memory growth (MiB), each in a fresh process."""
    return {
        what: in_child(__spec__.name, "memory", what, n_patches, batch_size, int(cpu_path))[
            "growth_mib"
        ]
        for what in ("encoder", "pars")
    }


def flop_row(size, n_patches, batch_size, decoder_impl="folded"):
    """FLOPs of a forward and backward of PARS and of the encoder alone (fake tensors),
    the pair operator on the accelerator's path."""
    with pair_attention.accelerator_layout():
        return _count_flops(size, n_patches, batch_size, decoder_impl)


def _count_flops(size, n_patches, batch_size, decoder_impl):
    counts = {}
    with FakeTensorMode(allow_non_fake_inputs=True):
        model, X, starts, pos_mask = build(size, n_patches, batch_size, decoder_impl)
        for what, loss in losses(model, X, starts, pos_mask, compiled=False).items():
            with FlopCounterMode(display=False) as counter:
                loss().backward()
            counts[what] = counter.get_total_flops()
            model.zero_grad(set_to_none=True)
    return counts


class DtypeFlops(TorchDispatchMode):
    """FLOPs of the operations ``torch.utils.flop_counter`` counts, by the dtype of their
    first tensor argument: under autocast the mode sees each product after autocast's
    cast, and the pair operator as one call with its registered formula (its own
    products are float32 whatever autocast says)."""

    def __init__(self):
        super().__init__()
        self.flops = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        count = flop_registry.get(func._overloadpacket)
        if count is not None:
            dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor))
            flops = count(*args, **kwargs, out_val=out)
            self.flops[dtype] = self.flops.get(dtype, 0) + flops
        return out


def float32_share(size, n_patches, batch_size):
    """The float32 share of the matrix-product FLOPs of a PARS training step's forward
    and backward under bf16 autocast (fake tensors, the accelerator's path)."""
    with pair_attention.accelerator_layout(), FakeTensorMode(allow_non_fake_inputs=True):
        model, X, _, _ = build(size, n_patches, batch_size)
        with DtypeFlops() as counter:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(X)["loss"]
            loss.backward()
    total = sum(counter.flops.values())
    return counter.flops.get(torch.float32, 0) / total


def parse_args(argv=None):
    """The command line; ``argv`` as ``sys.argv[1:]`` (that if None)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the Markdown report here (default: stdout only)")
    parser.add_argument("--batch-size", type=int, default=64, help="(default: 64)")
    parser.add_argument(
        "--patches", type=int, nargs="+", default=list(PATCHES), help="(default: 40 128)"
    )
    parser.add_argument(
        "--cpu-path",
        action="store_true",
        help="the pair operator as it runs on a CPU (default: as on an accelerator)",
    )
    return parser.parse_args(argv)


def main(argv=None):
    """Run the check; write its report; return ``{n_patches: row}``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--child"]:  # a fresh process for one memory figure
        _, _, what, n_patches, batch, cpu_path = argv
        print(json.dumps(memory_child(what, int(n_patches), int(batch), cpu_path == "1")))
        return None
    args = parse_args(argv)
    torch.set_num_threads(1)
    rows = {}
    for n in args.patches:
        mem = memory_row(n, args.batch_size, args.cpu_path)
        flops = flop_row("paper", n, args.batch_size)
        small = flop_row(MEMORY_SIZE, n, args.batch_size)
        rows[n] = dict(
            memory=mem,
            memory_ratio=mem["pars"] / mem["encoder"],
            flops=flops,
            flop_ratio=flops["pars"] / flops["encoder"],
            small_flop_ratio=small["pars"] / small["encoder"],
            float32_share=float32_share("paper", n, args.batch_size),
        )
    command = shlex.join(["python", "-m", "benchmarks.bench_accelerator_path", *argv])
    lines = [
        "# The accelerator path of a PARS step, on a CPU",
        "",
        f"- Machine: {machine()}",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d} UTC",
        f"- Command: `{command}`",
        '- Path: `torch.compile(backend="aot_eager")`, the pair operator over the '
        + ("CPU's path" if args.cpu_path else "accelerator's path, as on a GPU"),
        f"- Memory: 128 x 2 encoder, 30-s windows at 200 Hz, batch {args.batch_size}, one "
        "training step after two warm-up steps, resident-peak growth, each figure in a "
        "fresh process. FLOPs: forward and backward on fake tensors, batch "
        f"{args.batch_size}.",
        f"- Targets at 128 patches: memory ratio <= {MAX_MEMORY_RATIO}, FLOP ratio (paper "
        f"size) <= {MAX_FLOP_RATIO}; at 40 patches, the float32 share of a paper-size "
        f"step's matrix-product FLOPs under bf16 autocast <= {MAX_FLOAT32_SHARE:.0%} (the "
        "decoder's projections in bf16, the pair operator's tables in float32; counted by "
        "the dtype each product runs in, on fake tensors).",
        "",
        "| patches | encoder step growth (MiB) | PARS step growth (MiB) | memory ratio "
        "| FLOP ratio, 512 x 8 (paper) | FLOP ratio, 128 x 2 "
        "| float32 share of the FLOPs under bf16 autocast, 512 x 8 |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, row in rows.items():
        lines.append(
            f"| {n} | {row['memory']['encoder']:.0f} | {row['memory']['pars']:.0f} "
            f"| {row['memory_ratio']:.2f} | {row['flop_ratio']:.3f} "
            f"| {row['small_flop_ratio']:.3f} | {row['float32_share']:.1%} |"
        )
    write_report(lines, args.out)
    return rows


if __name__ == "__main__":
    main()
