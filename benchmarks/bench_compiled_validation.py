"""A compiled pretraining fit with a validation set: its graphs, graph breaks, recompiles.

``PretrainNet`` fits PARS (the small encoder, 64 x 4, on ramps whose level gives a
patch's position away) for ``--epochs`` epochs with a held-out validation set, compiled
with ``torch.compile`` in ``--mode`` (``reduce-overhead``: the training and validation
steps replayed as CUDA graphs), and reports what torch.compile's counters say of it:
the unique graphs, the graph breaks with their reasons, the recompilations, and the
pretext skill of the last epoch (the fit learns). Validation draws its patches and masks
with a seeded generator outside the compiled module; a graph break here means a draw
went back inside it.

Usage::

    python -m benchmarks.bench_compiled_validation --device cuda --mode reduce-overhead
    python -m benchmarks.bench_compiled_validation --device cpu --backend aot_eager --tiny
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import time

import torch
from torch._dynamo.utils import counters

from benchmarks.lib.measure import machine, write_report
from braindecode_pars import PARS
from braindecode_pars.pretraining.net import PretrainNet


def ramps(n, T, generator):
    """``n`` single-channel ramps of ``T`` samples: random slope and offset, some noise."""
    t = torch.linspace(0, 1, T)
    gain = torch.rand(n, 1, 1, generator=generator) * 4 + 0.5
    offset = torch.randn(n, 1, 1, generator=generator)
    X = gain * t + offset + 0.01 * torch.randn(n, 1, T, generator=generator)
    return torch.utils.data.TensorDataset(X, torch.zeros(n))


def fit(device, mode, backend, epochs, tiny):
    """Fit once; the counters, the skill and the seconds."""
    size = (
        dict(emb_dim=32, depth=1, n_heads=4, ff_dim=32)
        if tiny
        else dict(emb_dim=64, depth=4, n_heads=4, ff_dim=128)
    )
    torch.manual_seed(0)
    model = PARS(n_times=1000, sfreq=100, n_patches=40, pos_mask_ratio=0.8, **size)
    cuda = torch.device(device).type == "cuda"
    net = PretrainNet(
        model, max_epochs=epochs, batch_size=16 if tiny else 128, lr=1e-3,
        progress_bar=False, device=device, amp=cuda, compile=True, compile__mode=mode,
        compile__backend=backend, valid_fraction=0.25,
    )  # fmt: skip
    torch._dynamo.reset()
    counters.clear()
    t0 = time.perf_counter()
    net.fit(ramps(64 if tiny else 1024, 1000, torch.Generator().manual_seed(0)))
    seconds = time.perf_counter() - t0
    stats = dict(counters["stats"])
    breaks = dict(counters["graph_break"])
    last = net.history[-1]
    return dict(
        unique_graphs=stats.get("unique_graphs", 0),
        calls_captured=stats.get("calls_captured", 0),
        graph_breaks=sum(breaks.values()),
        break_reasons=sorted({reason.splitlines()[0] for reason in breaks}),
        recompiles=sum(counters["recompiles"].values()) if "recompiles" in counters else 0,
        valid_skill=last.get("valid_skill"),
        train_skill=last.get("train_skill"),
        seconds=seconds,
    )


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--mode", default="reduce-overhead", help="torch.compile's mode")
    parser.add_argument("--backend", default="inductor", help="torch.compile's backend")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="a 32 x 1 encoder: a CPU check")
    parser.add_argument("--out", help="the Markdown report (default: stdout only)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({machine()})"
    r = fit(args.device, args.mode, args.backend, args.epochs, args.tiny)
    command = shlex.join(["python", "-m", "benchmarks.bench_compiled_validation", *argv])
    lines = [
        "# A compiled pretraining fit with a validation set",
        "",
        f"- Device: {name}; torch {torch.__version__}",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- Command: `{command}`",
        f"- PARS, {'32 x 1' if args.tiny else '64 x 4'} encoder, {args.epochs} epochs, a "
        "validation set of a quarter of the windows, torch.compile mode "
        f"`{args.mode}`, backend `{args.backend}`"
        + (", bf16 autocast" if device.type == "cuda" else ""),
        "",
        "| unique graphs | calls captured | graph breaks | recompiles | train skill | valid "
        "skill | seconds |",
        "|---|---|---|---|---|---|---|",
        f"| {r['unique_graphs']} | {r['calls_captured']} | {r['graph_breaks']} | "
        f"{r['recompiles']} | {r['train_skill']:.3f} | {r['valid_skill']:.3f} | "
        f"{r['seconds']:.1f} |",
    ]
    if r["break_reasons"]:
        lines += ["", "Graph-break reasons: " + "; ".join(r["break_reasons"]) + "."]
    write_report(lines, args.out)
    return r


if __name__ == "__main__":
    main()
