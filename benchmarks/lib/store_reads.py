"""Reading a window store as pretraining reads it: batches of random crops through a
DataLoader, memory-mapped or in the order of the disk, from a cold or a warm page cache
(``rehearsal_tueg``, and the retired ``bench_data_path``)."""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path

import numpy as np
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

from benchmarks.lib.page_cache import cached_fraction, drop_cached_pages
from braindecode_pars.pretraining.disk_order import DiskOrderBatches
from braindecode_pars.pretraining.views import SingleChannelWindows

#: The paper's pretraining crops: 30 s at 200 Hz.
SFREQ, CROP_SECONDS = 200.0, 30.0


class BatchedReads(Dataset):
    """Batches of a :class:`~braindecode_pars.pretraining.views.SingleChannelWindows`
    read whole, as pretraining's DataLoader reads them: ``reads[indices]`` is the view's
    ``batch(indices)`` (one array of crops, no collation), for a DataLoader with
    ``batch_size=None`` and a ``BatchSampler``."""

    def __init__(self, view):
        self.view = view

    def __len__(self):
        return len(self.view)

    def __getitem__(self, indices):
        return self.view.batch(np.asarray(indices, dtype=np.int64))


def data_file(store):
    """The store's data file (its ``info.json`` names it; ``data.f32`` by default)."""
    store = Path(store)
    info = json.loads((store / "info.json").read_text())
    return store / info.get("data_file", "data.f32")


def warm_up(path):
    """Read the whole file once, so that it sits in the page cache."""
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def random_loader(view, batch_size, workers):
    """Today's read: batches of random windows through :class:`BatchedReads`, endless."""
    sampler = RandomSampler(view, replacement=True, num_samples=1 << 40)
    batches = BatchSampler(sampler, batch_size, drop_last=False)
    return DataLoader(BatchedReads(view), sampler=batches, batch_size=None, num_workers=workers)


def disk_loader(view, batch_size, workers, prefetch=True, seed=0):
    """The read in the order of the disk; its ``set_epoch`` is the dataset's."""
    batches = DiskOrderBatches(view, batch_size, seed=seed, prefetch=prefetch)
    loader = DataLoader(
        batches, batch_size=None, num_workers=workers, persistent_workers=workers > 0
    )
    loader.set_epoch = batches.set_epoch
    return loader


def crops_per_second(loader, n_crops):
    """Crops per second ``loader`` gives over ``n_crops`` after its first batch, epoch
    after epoch (each a new order, for a loader with ``set_epoch``)."""
    count, epoch, seconds, first = 0, 0, 0.0, True
    while count < n_crops:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        it = iter(loader)
        t0 = time.perf_counter()
        for X, _ in it:
            if first:  # workers started, first batch read: the clock starts now
                first, t0 = False, time.perf_counter()
                continue
            count += len(X)
            if count >= n_crops:
                break
        seconds += time.perf_counter() - t0
        del it
        epoch += 1
    return count / seconds


def measure(store, n_crops, batch_size=256, workers=(0,)):
    """Rows of (read, cache, workers, crops, crops/s, cached share before, after) on
    ``store``.

    A cold row reads as many crops as the store has windows at most (one epoch of the
    disk-order read, a crop of one channel of each window), so that it reads from the
    disk and not from pages it brought in itself. Every row maps the store anew, after
    the previous row's maps are gone: pages mapped by a live process are not evicted."""
    n_times = int(CROP_SECONDS * SFREQ)
    reads = {
        "random, memory-mapped": lambda v, w: random_loader(v, batch_size, w),
        "disk order": lambda v, w: disk_loader(v, batch_size, w),
        "disk order, no read-ahead": lambda v, w: disk_loader(v, batch_size, w, prefetch=False),
    }
    path = data_file(store)
    n_windows = len(SingleChannelWindows.from_store(store, n_times=n_times))
    rows = []
    for cache in ("cold", "warm"):
        for read, make in reads.items():
            for w in workers:
                gc.collect()
                if cache == "cold":
                    drop_cached_pages(path)
                else:
                    warm_up(path)
                before = cached_fraction(path)
                view = SingleChannelWindows.from_store(store, n_times=n_times)
                loader = make(view, w)
                crops = min(n_crops, n_windows) if cache == "cold" else n_crops
                rate = crops_per_second(loader, crops)
                del loader, view
                gc.collect()
                rows.append(
                    {
                        "read": read,
                        "cache": cache,
                        "workers": w,
                        "crops": crops,
                        "crops_per_s": round(rate),
                        "cached_before": round(before, 3),
                        "cached_after": round(cached_fraction(path), 3),
                    }
                )
                print(rows[-1], flush=True)
    return rows
