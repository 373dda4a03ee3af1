"""Reading a window store at scale: random 30-s crops per second, from the disk and from
the page cache, for the random memory-mapped read and the read in the order of the disk.

A store of ``--gb`` gigabytes of synthetic recordings (19 channels at 200 Hz, 20-min
recordings, 30-s windows: TUEG as the paper prepares it) is written once, or ``--store``
names one. Then, in this process with one torch thread, single-channel 30-s crops
(6000 samples, a random crop and channel of each window) are read through a DataLoader
as pretraining reads them:

- *random, memory-mapped*: today's read (``SingleChannelWindows.from_store``, batches of
  random windows drawn a batch at a time, as pretraining's DataLoader draws them);
- *disk order*: :class:`~braindecode_pars.pretraining.disk_order.DiskOrderBatches`, chunks of
  the file in a random order, shuffled in a buffer, each read group's crops read in the
  order of the file (with and without ``POSIX_FADV_WILLNEED`` read-ahead of the next
  group).

*cold*: the store's pages are dropped from the page cache first
(``posix_fadvise(POSIX_FADV_DONTNEED)``, which evicts a file's clean pages; the share of
the file in the cache, from ``mincore``, is reported before and after); *warm*: the
whole file is read once first. With DataLoader workers, the batches come from other
processes through shared memory; the cost of that copy is measured on its own.

Usage (the full size; a store larger than the machine's memory reads cold whatever)::

    python -m benchmarks.bench_read_scale --gb 10 --crops 200000 \\
        --folder /var/tmp/read_scale --out benchmarks/results/read_scale.md
"""

from __future__ import annotations

import argparse
import csv
import inspect
import os
import tempfile
import time
from pathlib import Path

import mne
import numpy as np
import pandas as pd
import torch
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows

from benchmarks.lib.measure import machine, write_report
from benchmarks.lib.store_reads import (
    CROP_SECONDS,
    SFREQ,
    data_file,
    measure,
)
from braindecode_pars.pretraining.views import SingleChannelWindows
from braindecode_pars.store.write import write_window_store

N_CHANS, RECORDING_MINUTES = 19, 20.0


def synthetic_recordings(gb, dtype_bytes=4, seed=0):
    """Windows of 20-min, 19-channel recordings at 200 Hz, one recording at a time,
    ``gb`` gigabytes of stored samples in all."""
    n_times = int(RECORDING_MINUTES * 60 * SFREQ)
    per = N_CHANS * n_times * dtype_bytes
    n_recordings = max(2, round(gb * 1e9 / per))
    info = mne.create_info([f"EEG{c:02d}" for c in range(N_CHANS)], SFREQ, "eeg")
    for r in range(n_recordings):
        rng = np.random.default_rng([seed, r])
        raw = mne.io.RawArray(rng.standard_normal((N_CHANS, n_times)), info, verbose="error")
        ds = BaseConcatDataset([RawDataset(raw, pd.Series({"subject": r}))])
        size = int(CROP_SECONDS * SFREQ)
        yield create_fixed_length_windows(
            ds, window_size_samples=size, window_stride_samples=size, on_last_window="drop"
        )


def write_synthetic_store(folder, gb, dtype="float32"):
    """A store of :func:`synthetic_recordings` in ``folder`` (kept if it is complete)."""
    folder = Path(folder)
    if (folder / "index.npz").is_file():
        return folder
    kwargs = {}
    if dtype != "float32":
        if "dtype" not in inspect.signature(write_window_store).parameters:
            raise SystemExit(f"write_window_store has no 'dtype' here: --dtype {dtype} needs it")
        kwargs["dtype"] = dtype
    nbytes = np.dtype(dtype).itemsize
    write_window_store(synthetic_recordings(gb, nbytes), folder, overwrite=True, **kwargs)
    return folder


def shared_memory_copy(batch_size, n_times, repeats=20):
    """Crops per second of moving a batch into shared memory (what a DataLoader worker's
    batch of ordinary memory costs on its way), and of a batch allocated there."""
    source = torch.randn(batch_size, 1, n_times)
    t0 = time.perf_counter()
    for _ in range(repeats):
        source.clone().share_memory_()
    copied = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(repeats):
        source.clone()
    plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(repeats):
        torch.empty(batch_size, 1, n_times).share_memory_()
    allocated = time.perf_counter() - t0
    return {
        "copy into shared memory": batch_size * repeats / max(copied - plain, 1e-9),
        "allocate in shared memory": batch_size * repeats / allocated,
    }


def report(rows, store, args, copy):
    """The Markdown report of :func:`measure`'s rows."""
    path = data_file(store)
    size = os.path.getsize(path)
    lines = [
        "# Reading a window store at scale",
        "",
        f"Machine: {machine()}, {os.cpu_count()} cores, {_memory_gb():.0f} GB of memory. "
        f"Store: {size / 1e9:.2f} GB data file ({path.suffix}), "
        f"{len(SingleChannelWindows.from_store(store))} windows of 30 s, 19 channels at "
        f"200 Hz. Crops: single-channel 30-s (6000 samples), batch {args.batch_size}, "
        f"{args.crops} crops per warm row and at most one per window per cold row, read "
        "in this process with one torch thread (workers = 0) or by DataLoader workers.",
        "",
        f"Command: `{args.command}`",
        "",
        "| read | cache | DataLoader workers | crops | crops/s | cached share before | after |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['read']} | {r['cache']} | {r['workers']} | {r['crops']:,} | "
            f"{r['crops_per_s']:,} | "
            f"{r['cached_before']:.3f} | {r['cached_after']:.3f} |"
        )
    lines += [
        "",
        "*cold*: the store's clean pages evicted with `posix_fadvise(POSIX_FADV_DONTNEED)` "
        "before the row (the cached share, from `mincore`, says whether they were), and "
        "at most one crop per window read (the first batch, which starts the workers, "
        "not timed); *warm*: the whole data file read once before the row.",
        "",
        f"Shared memory, one batch of {args.batch_size} crops: copied into it "
        f"{copy['copy into shared memory']:,.0f} crops/s, allocated in it "
        f"{copy['allocate in shared memory']:,.0f} crops/s. `DiskOrderBatches` writes a "
        "worker's batches straight into shared memory; a batch of ordinary memory from a "
        "worker (the random read) is copied there on its way to the training process.",
        "",
        "Goal (issue 58): 40,000 crops/s per process.",
    ]
    return lines


def _memory_gb():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gb", type=float, default=10.0, help="size of the synthetic store")
    parser.add_argument("--store", help="measure this store instead of writing one")
    parser.add_argument("--folder", help="where to write the synthetic store (kept)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--crops", type=int, default=200_000, help="crops per row")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", help="Markdown report; a .csv of the rows beside it")
    args = parser.parse_args(argv)
    args.command = "python -m benchmarks.bench_read_scale " + " ".join(argv or [])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    store = args.store or write_synthetic_store(
        args.folder or tempfile.mkdtemp(prefix="read_scale_"), args.gb, args.dtype
    )
    rows = measure(store, args.crops, args.batch_size, args.workers)
    copy = shared_memory_copy(args.batch_size, int(CROP_SECONDS * SFREQ))
    write_report(report(rows, store, args, copy), args.out)
    if args.out:
        with open(Path(args.out).with_suffix(".csv"), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return rows


if __name__ == "__main__":
    main()
