"""Where the pretraining loops wait on a GPU: host synchronisations and the GPU's busy
share per step, from ``torch.profiler``, of the bare step and of both loops.

``bench_pretrain_loop.py`` says how many windows per second each loop keeps of the bare
step; this says why, in the terms a GPU trace gives. For the bare step (``bench_gpu.py``'s
``TrainingSteps``, which ends every step with ``torch.cuda.synchronize()`` by design),
``PARSPretrainer.fit`` and ``braindecode-pars pretrain`` on the same corpus, model,
batch, precision and compile mode, each run under ``torch.profiler`` (CPU and CUDA
activities), it counts per step:

- the CUDA runtime calls that make the host wait for the device
  (:data:`SYNC_CALLS`: stream, device and event synchronisations, blocking copies), and
  the asynchronous copies (``cudaMemcpyAsync``), one of which is each batch's copy to
  the GPU;
- the kernels launched;
- the GPU's busy share: the union of its kernels' and copies' intervals over the
  wall-clock time (1: the GPU never waited for the host).

The loops' figures are marginal, as ``bench_pretrain_loop.py``'s rates: a long and a
short run each profiled, and the difference taken, so that what a fit pays once
(building the model, reading the corpus, the validation draws) drops out. On a CPU
there is no CUDA activity: the table gives the host's operators per step and says n/a
for the rest (``--tiny --device cpu`` is the dry run). The profiler slows the host;
the rates are ``bench_pretrain_loop.py``'s to quote, these are its reasons.

Usage::

    python -m benchmarks.bench_loop_trace --size paper --device cuda --steps 60 \
        [--compile-mode reduce-overhead] --out benchmarks/results/loop_trace_gpu.md
    python -m benchmarks.bench_loop_trace --tiny --device cpu   # the dry run
"""

from __future__ import annotations

import argparse
import datetime
import logging
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from benchmarks.lib.device_steps import synchronize
from benchmarks.lib.loops import (
    CONFIGS,
    SHORT,
    Loops,
    bare_steps,
    corpus,
    loop_arguments,
    parse_loop_args,
    write_store,
)
from benchmarks.lib.measure import machine, write_report

#: CUDA runtime calls after which the host has waited for the device.
SYNC_CALLS = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",
    "cudaMemcpy2D",
)
#: The asynchronous copy, counted apart.
ASYNC_COPY = "cudaMemcpyAsync"


def _union(intervals):
    """Total length of the union of (start, end) intervals."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def trace(run, cuda):
    """``run()`` under ``torch.profiler``: a dict of totals over the run: ``wall`` (s),
    ``ops`` (the host's operators), and on CUDA ``syncs``, ``copies``, ``kernels`` and
    ``busy`` (s of the GPU's union of kernels and copies)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        run()
        wall = time.perf_counter() - t0
    events = prof.events()
    out = dict(wall=wall, ops=sum(1 for e in events if e.name.startswith("aten::")))
    if not cuda:
        return out
    device = [e for e in events if e.device_type == DeviceType.CUDA]
    out["syncs"] = sum(1 for e in events if e.name in SYNC_CALLS)
    out["copies"] = sum(1 for e in events if e.name == ASYNC_COPY)
    out["kernels"] = sum(1 for e in device if "memcpy" not in e.name.lower())
    out["busy"] = _union((e.time_range.start, e.time_range.end) for e in device) / 1e6
    return out


def per_step(short, long, steps):
    """The marginal figures per step between a short and a long run of ``steps``; the
    busy share is the GPU's busy time over the wall-clock time the extra steps took."""
    extra = steps[1] - steps[0]
    row = {k: (long[k] - short[k]) / extra for k in long if k != "busy"}
    if "busy" in long:
        row["busy"] = (long["busy"] - short["busy"]) / (long["wall"] - short["wall"])
    return row


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    loop_arguments(parser, "paper")
    parser.add_argument("--steps", type=int, default=60,
        help="steps of the long runs (default: 60)")  # fmt: skip
    return parse_loop_args(parser, argv)


def main(argv=None):
    args = parse_args(argv)
    config = CONFIGS[args.size]
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    batch = args.batch_size or config.batch_sizes[0]
    steps = (max(1, int(args.steps * SHORT)), args.steps)
    logging.getLogger("braindecode_pars").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="Pretraining ended with a pretext skill")
    X = corpus(config, batch, batches=args.corpus_batches)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(config, X, Path(tmp) / "store")
        loops = Loops(config, X, store, Path(tmp), batch, device, cuda, cuda,
                      args.compile_mode, args.workers, args.batches,
                      args.decoder_kernel)  # fmt: skip
        bare = bare_steps(config, batch, device, cuda, cuda, args.compile_mode,
                          args.decoder_kernel)  # fmt: skip
        for _ in range(3):  # compile, allocate, record the graphs
            bare.pars_step()
        loops.estimator(steps[0])  # the loops' cold compilations, untimed
        loops.cli("warm-up", steps[0])

        def bare_run(n):
            return lambda: [bare.pars_step() for _ in range(n)]

        runs = {
            "bare training step (a synchronize ends each step)": bare_run,
            "`PARSPretrainer.fit`": lambda n: lambda: loops.estimator(n),
            "`braindecode-pars pretrain`": lambda n: lambda: loops.cli(f"traced-{n}", n),
        }
        for label, make in runs.items():
            short, long = (trace(make(n), cuda) for n in steps)
            rows[label] = per_step(short, long, steps)
            synchronize(device)
    na = "n/a"

    def cell(row, key, fmt):
        return na if key not in row else format(row[key], fmt)

    name = torch.cuda.get_device_name(device) if cuda else f"CPU ({machine()}), a dry run"
    lines = [
        "# Where the pretraining loops wait",
        "",
        "Written by `benchmarks/bench_loop_trace.py`: per step, under `torch.profiler`, the "
        "CUDA runtime calls that make the host wait for the device, the asynchronous "
        "copies, the kernels, and the GPU's busy share (the union of its kernels' and "
        "copies' intervals over the wall-clock time); the loops' figures are marginal "
        f"(runs of {steps[1]} and {steps[0]} steps, differenced). The profiler slows the "
        "host; the rates to quote are `bench_pretrain_loop.py`'s.",
        "",
        f"- Device: {name}",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "- Command: `python "
        + shlex.join(["-m", "benchmarks.bench_loop_trace", *sys.argv[1:]])
        + "`",
        f"- Model: {config.name}; batch {batch}; "
        + (
            "bf16 autocast + torch.compile (mode " + (args.compile_mode or "default") + ")"
            if cuda
            else "float32, not compiled"
        ),  # fmt: skip
        f"- Corpus: {len(X)} windows (about {args.corpus_batches} training batches an "
        f"epoch); the command line's DataLoader workers: {args.workers}",
        "",
        "| what | wall ms per step (profiled) | host operators per step | host waits per "
        "step | async copies per step | kernels per step | GPU busy share |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, row in rows.items():
        lines.append(
            f"| {label} | {1e3 * row['wall']:.2f} | {row['ops']:.0f} | "
            f"{cell(row, 'syncs', '.2f')} | {cell(row, 'copies', '.2f')} | "
            f"{cell(row, 'kernels', '.0f')} | {cell(row, 'busy', '.2f')} |"
        )
    write_report(lines, args.out)
    return rows


if __name__ == "__main__":
    main()
