"""Throughput of the pretraining data path: memory-mapped store -> DataLoader batches.

Writes the bundled non-imagery PhysioNet-MI runs (64 channels, 200 Hz) to a window
store once, then measures how many single-channel 30-s windows per second a
DataLoader delivers, each with its own random crop and channel, from the memory-mapped
store and from the in-memory view, in the main process and with worker processes: read
item by item and collated (any DataLoader), and a batch at a time
(:class:`benchmarks.lib.store_reads.BatchedReads`, as pretraining reads).

Usage::

    python -m benchmarks.bench_data_path --out benchmarks/results/data_path.md
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from benchmarks.lib.measure import machine, write_report
from benchmarks.lib.store_reads import BatchedReads
from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
from braindecode_pars.pretraining.views import SingleChannelWindows
from braindecode_pars.store.write import write_window_store


def throughput(view, n_windows, batch_size, workers, batched=False):
    """Windows per second a DataLoader delivers from ``view``: item by item and
    collated, or (``batched``) a batch at a time as pretraining reads."""
    sampler = RandomSampler(view, replacement=True, num_samples=n_windows)
    if batched:
        batches = BatchSampler(sampler, batch_size, drop_last=False)
        loader = DataLoader(
            BatchedReads(view), sampler=batches, batch_size=None, num_workers=workers
        )
    else:
        loader = DataLoader(view, batch_size=batch_size, sampler=sampler, num_workers=workers)
    t0 = time.perf_counter()
    count = 0
    for x, _ in loader:
        count += len(x)
    return count / (time.perf_counter() - t0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--windows", type=int, default=50_000)
    parser.add_argument("--batch-size", type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(0)
    windows = load_physionet_mi_continuous(window_seconds=30, stride_seconds=5)
    folder = tempfile.mkdtemp()
    write_window_store(windows, folder)
    views = {
        "memory-mapped store": SingleChannelWindows.from_store(folder),
        "in memory": SingleChannelWindows(windows),
    }
    n_cores = os.cpu_count()
    lines = [
        "# Pretraining data path",
        "",
        f"Machine: {machine()}, {n_cores} cores. {args.windows} single-channel 30-s windows "
        f"(6000 float32 samples) drawn with replacement from {len(views['in memory'])} "
        f"stored windows of 8 recordings, batch {args.batch_size}, each with its own random "
        "crop and channel. The store (~50 MB) sits in the page cache.",
        "",
        "Command: `python -m benchmarks.bench_data_path --out benchmarks/results/data_path.md`",
        "",
        "| source | read | DataLoader workers | windows/s | windows/s per core used |",
        "|---|---|---|---|---|",
    ]
    for name, view in views.items():
        for batched in (True, False):
            read = "a batch at a time (pretraining)" if batched else "item by item, collated"
            for workers in (0, 1, 2):
                rate = throughput(view, args.windows, args.batch_size, workers, batched)
                cores = max(workers, 1)
                lines.append(f"| {name} | {read} | {workers} | {rate:,.0f} | {rate / cores:,.0f} |")
                print(lines[-1], flush=True)
    lines += [
        "",
        "Workers = 0 reads in the training process itself (one core). With workers, the "
        "main process only receives batches; on this 2-core machine two workers share the "
        "cores with the main process, so per-core figures with 2 workers understate a "
        "machine with a core per worker.",
    ]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
