"""Pretraining batches of a window store read in the order of the disk: :class:`DiskOrderBatches`.

A store's windows lie in its data file one recording after the other, each recording's
channels one after the other. Drawing a random window for every crop
(:class:`~braindecode_pars.pretraining._views._BatchedView` under a random
sampler) makes one small random read per crop anywhere in the file: from the page
cache it is a memory copy, from a disk it is a seek. :class:`DiskOrderBatches` reads
instead as pre-shuffled shards are read:

1. the windows, in the order of the file, are cut into *chunks* of ``chunk_windows``
   consecutive windows;
2. every epoch the chunks are put in a random order (seeded by the seed and the
   epoch), and the windows of every ``buffer_chunks`` consecutive chunks of that order
   are shuffled among themselves (a shuffle buffer of that many chunks);
3. that sequence is split into equal shares, one per DDP rank (padded by its own
   start, as torch's ``DistributedSampler`` pads, or cut), so that every rank takes the
   same number of steps, and each rank's share into batches;
4. a rank's batches are read in groups of about one buffer: the group's crops
   (a random channel and crop of each window, as
   :class:`~braindecode_pars.pretraining.SingleChannelWindows` draws them) are copied from
   the memory-mapped file in the order of their place in it, while the kernel is asked
   (``posix_fadvise(POSIX_FADV_WILLNEED)``) to read the next group's already, so that
   one thread keeps many reads in flight; DataLoader workers take contiguous runs of
   groups.

Every window of the training share is read once per epoch; the order of the windows,
their channels and crops change with the epoch and are the same for the same seed,
epoch, number of ranks and batch size, whatever the number of workers (which only
interleaves the groups' batches). A pass can start within its epoch (``start``, the
rest of an epoch a stopped run had begun): the batches before it are skipped (the groups
they fill are not read), and the rest are those of the whole pass, in its order, for the
same number of DataLoader workers. In a worker process the batches
are written straight into shared memory, which the DataLoader hands to the training
process without copying.
"""

from __future__ import annotations

import json
import math
import mmap
import os
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import IterableDataset, Subset, get_worker_info

from braindecode_pars._util.checks import check_int, check_option
from braindecode_pars.pretraining._views import SingleChannelWindows

#: What :class:`DiskOrderBatches` does with the windows left over when a share is not a
#: multiple of the number of ranks.
_UNEVEN = ("pad", "drop")


def _store_view(dataset):
    """The store-backed view of ``dataset`` (a view or a ``Subset`` of one) and the
    window indices it trains on."""
    view, indices = dataset, None
    if isinstance(dataset, Subset):
        view, indices = dataset.dataset, np.asarray(dataset.indices, dtype=np.int64)
    if not isinstance(view, SingleChannelWindows) or getattr(view, "_store", None) is None:
        raise TypeError(
            "'dataset' must be a SingleChannelWindows.from_store view (or a Subset of one): "
            f"reading in the order of the disk needs a window store, but got "
            f"{type(view).__name__}."
        )
    if indices is None:
        indices = np.arange(len(view), dtype=np.int64)
    return view, indices


def _store_layout(path):
    """The data file, its dtype, every recording's (offset, n_chans, n_samples) in
    elements and its scale (stored value = value x scale; None: all 1), read from a
    store folder."""
    path = Path(path)
    info = json.loads((path / "info.json").read_text())
    dtype = np.dtype(info.get("dtype", "<f4"))
    data_file = path / info.get("data_file", "data.f32")
    with np.load(path / "index.npz") as arrays:
        recordings = np.asarray(arrays["recordings"], dtype=np.int64).reshape(-1, 3)
        scales = arrays["scales"] if "scales" in arrays.files else np.ones(len(recordings))
    scales = np.asarray(scales, dtype=np.float32)
    return data_file, dtype, recordings, (scales if (scales != 1).any() else None)


def _shuffled_in_chunks(n_windows, chunk_windows, buffer_chunks, rng):
    """A permutation of ``range(n_windows)`` that follows the file in chunks.

    The positions are cut into chunks of ``chunk_windows`` consecutive positions, the
    chunks put in a random order, and the positions of every ``buffer_chunks``
    consecutive chunks of that order shuffled among themselves.

    Parameters
    ----------
    n_windows, chunk_windows, buffer_chunks : int
    rng : numpy.random.Generator

    Returns
    -------
    order : ndarray of int64, shape (n_windows,)
    """
    n_chunks = math.ceil(n_windows / chunk_windows)
    chunks = rng.permutation(n_chunks)
    order = []
    for first in range(0, n_chunks, buffer_chunks):
        block = np.concatenate(
            [
                np.arange(c * chunk_windows, min(n_windows, (c + 1) * chunk_windows))
                for c in chunks[first : first + buffer_chunks]
            ]
        )
        order.append(rng.permutation(block))
    return np.concatenate(order) if order else np.zeros(0, np.int64)


def _rank_share(order, rank, world_size, uneven="pad"):
    """The contiguous share of ``order`` that process ``rank`` of ``world_size`` reads.

    Every share has the same length: ``ceil(n / world_size)`` with ``uneven="pad"``
    (the sequence is continued by its own start, as ``DistributedSampler`` pads: a few
    windows are read twice in the epoch), ``n // world_size`` with ``"drop"`` (the last
    ``n % world_size`` windows of the epoch's order are left out; the order changes
    every epoch, so which ones changes too).
    """
    check_option("uneven", uneven, _UNEVEN)
    n = len(order)
    if uneven == "pad":
        per = math.ceil(n / world_size)
        order = np.resize(order, per * world_size)  # np.resize repeats from the start
    else:
        per = n // world_size
    return order[rank * per : (rank + 1) * per]


class DiskOrderBatches(IterableDataset):
    """Batches of random single-channel crops of a store, read in the order of the disk.

    An iterable of ``(X, y)`` batches, ``X`` a (n, 1, n_times) float32 tensor and ``y``
    zeros, for a ``DataLoader(..., batch_size=None)``; see the module's description for
    the order. ``set_epoch`` chooses the epoch's order (as ``DistributedSampler``'s
    does); DataLoader workers, persistent or not, read the epoch set last.

    Parameters
    ----------
    dataset : SingleChannelWindows | torch.utils.data.Subset
        A :meth:`SingleChannelWindows.from_store` view, or a ``Subset`` of one (e.g. the
        training share of a validation split): its windows are read.
    batch_size : int
        Crops per batch (per process under DDP).
    seed : int
        Seed of the order and of the draws; under DDP it must be the same on every
        rank (the order is split among them).
    chunk_windows : int
        Consecutive windows of the file read as a unit of the order.
    buffer_chunks : int
        Chunks whose windows are shuffled together; a batch holds windows of about
        this many places of the file.
    rank, world_size : int
        This process and the number of processes (DDP); default: one process.
    uneven : {"pad", "drop"}
        When the windows are not a multiple of ``world_size``: every rank reads
        ``ceil(n / world_size)`` windows, the first of the epoch's order again
        (``"pad"``, as ``DistributedSampler``), or ``n // world_size`` (``"drop"``).
        Either way every rank takes :meth:`epoch_batches` steps per epoch.
    drop_last : bool
        Leave out a rank's last batch when it is short and not the only one (a share of
        fewer windows than ``batch_size`` is still read, as one short batch): every step
        of a rank's epoch then has ``batch_size`` crops, one shape for a compiled step.
    prefetch : bool
        Ask the kernel to read the next group of crops (``POSIX_FADV_WILLNEED``) before
        the current one is read, so that a single thread keeps several reads in flight,
        and map the store ``MADV_RANDOM`` (a missing page brings in itself only, not the
        kernel's read-around). False: neither, as a plain memory map reads.

    Examples
    --------
    >>> from torch.utils.data import DataLoader
    >>> view = SingleChannelWindows.from_store("store/")  # doctest: +SKIP
    >>> batches = DiskOrderBatches(view, batch_size=256, seed=0)  # doctest: +SKIP
    >>> loader = DataLoader(batches, batch_size=None, num_workers=4)  # doctest: +SKIP
    >>> batches.set_epoch(1)  # doctest: +SKIP
    >>> for X, _ in loader:  # doctest: +SKIP
    ...     pass
    """

    def __init__(
        self,
        dataset,
        batch_size,
        seed=0,
        chunk_windows=64,
        buffer_chunks=16,
        rank=0,
        world_size=1,
        uneven="pad",
        drop_last=False,
        prefetch=True,
    ):
        self.view, self.indices = _store_view(dataset)
        self.batch_size = check_int("batch_size", batch_size, 1)
        self.seed = check_int("seed", seed, 0)
        self.chunk_windows = check_int("chunk_windows", chunk_windows, 1)
        self.buffer_chunks = check_int("buffer_chunks", buffer_chunks, 1)
        self.world_size = check_int("world_size", world_size, 1)
        self.rank = check_int("rank", rank, 0)
        if self.rank >= self.world_size:
            raise ValueError(
                f"'rank' must be below 'world_size' ({self.world_size}), but got {self.rank}."
            )
        check_option("uneven", uneven, _UNEVEN)
        self.uneven, self.drop_last, self.prefetch = uneven, bool(drop_last), bool(prefetch)
        if self.per_rank() == 0:
            raise ValueError(
                f"{len(self.indices)} windows leave none to each of {self.world_size} "
                "processes with uneven='drop'."
            )
        self._data_file, self._dtype, layout, self._scales = _store_layout(self.view._store)
        self._rec_offset, self._rec_chans, self._rec_len = layout.T
        # the windows in the order of the file: recording, then start
        rows = self.view.index[self.indices]
        self.indices = self.indices[np.lexsort((rows[:, 1], rows[:, 0]))]
        # the epoch and the batch it starts at, in shared memory so that worker
        # processes (persistent or not) read the ones set last
        self._epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._start = torch.zeros(1, dtype=torch.int64).share_memory_()

    # -- the order --------------------------------------------------------------------------
    def set_epoch(self, epoch):
        """The epoch whose order the next pass reads."""
        self._epoch[0] = int(epoch)

    @property
    def epoch(self):
        return int(self._epoch[0])

    @property
    def start(self):
        """The batch of the epoch the next pass starts at (0: the whole epoch): a resumed
        epoch's rest, the batches a stopped sitting had taken skipped and not read."""
        return int(self._start[0])

    @start.setter
    def start(self, value):
        self._start[0] = check_int("start", value, 0)

    def epoch_batches(self):
        """Batches each rank reads in a whole epoch (the same on every rank)."""
        per = self.per_rank()
        if self.drop_last and per >= self.batch_size:
            return per // self.batch_size
        return math.ceil(per / self.batch_size)

    def per_rank(self):
        """Windows each rank reads per epoch."""
        n = len(self.indices)
        return math.ceil(n / self.world_size) if self.uneven == "pad" else n // self.world_size

    def __len__(self):
        """Batches the next pass of each rank reads: the epoch's, from :attr:`start`."""
        return max(self.epoch_batches() - self.start, 0)

    def epoch_order(self, epoch=None):
        """Window indices (of the view) in the order all ranks share in ``epoch``."""
        epoch = self.epoch if epoch is None else epoch
        rng = np.random.default_rng([self.seed, epoch])
        order = _shuffled_in_chunks(len(self.indices), self.chunk_windows, self.buffer_chunks, rng)
        return self.indices[order]

    def rank_windows(self, epoch=None):
        """The window indices this rank reads in ``epoch``, in order, batch after batch."""
        share = _rank_share(self.epoch_order(epoch), self.rank, self.world_size, self.uneven)
        return share[: self.epoch_batches() * self.batch_size]

    def _needed_bytes(self):
        """Bytes the data file must hold: up to the end of its last recording."""
        ends = self._rec_offset + self._rec_chans * self._rec_len
        return int(ends.max()) * self._dtype.itemsize

    def _groups(self, n_batches):
        """Batches per read group (about one shuffle buffer) and the number of groups."""
        per_group = max(1, round(self.chunk_windows * self.buffer_chunks / self.batch_size))
        return per_group, math.ceil(n_batches / per_group)

    # -- reading ----------------------------------------------------------------------------
    def _plan(self, windows, epoch, group):
        """Byte offsets of the crops of ``windows`` (a random channel and crop each), and
        their recordings."""
        rng = np.random.default_rng([self.seed, epoch, self.rank, group])
        u, v = rng.random(len(windows)), rng.random(len(windows))
        recs = self.view.index[windows, 0]
        low, high = self.view._crop_bounds(windows)
        starts = low + (u * (high - low + 1)).astype(np.int64)
        channels = (v * self._rec_chans[recs]).astype(np.int64)
        elements = self._rec_offset[recs] + channels * self._rec_len[recs] + starts
        return elements * self._dtype.itemsize, recs

    def _advise(self, fd, offsets):
        """Ask the kernel to read these crops now (merged when less than 64 KiB apart)."""
        nbytes = self.view.n_times * self._dtype.itemsize
        ordered = np.sort(offsets)
        gaps = np.flatnonzero(np.diff(ordered) > nbytes + (1 << 16))
        firsts = np.concatenate([[0], gaps + 1])
        lasts = np.concatenate([gaps, [len(ordered) - 1]])
        for a, b in zip(ordered[firsts].tolist(), ordered[lasts].tolist(), strict=True):
            os.posix_fadvise(fd, a, b - a + nbytes, os.POSIX_FADV_WILLNEED)

    def _mapped(self):
        """The data file mapped read-only, as a flat array; once per process (the map is
        not pickled: a worker maps the file again).

        The map is advised ``MADV_RANDOM``: a crop that is not in the page cache faults
        in its own pages only, where the kernel's read-around would read up to
        ``read_ahead_kb`` (often megabytes) around each; the crops' pages are asked for
        beforehand with ``POSIX_FADV_WILLNEED``, exactly."""
        if getattr(self, "_flat", None) is None:
            with open(self._data_file, "rb") as f:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            if self.prefetch and hasattr(mapped, "madvise"):
                mapped.madvise(mmap.MADV_RANDOM)
            self._flat = np.frombuffer(mapped, dtype=self._dtype)
        return self._flat

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_flat"] = None
        return state

    def _read(self, flat, offsets, recs, out):
        """Copy the crops at byte ``offsets`` of the mapped data file ``flat`` into the rows
        of ``out`` (n, n_times) float32, in the order of the file, and divide those of a
        scaled recording (``recs``: the recording of each) by its scale."""
        n_times = self.view.n_times
        elements = (offsets // self._dtype.itemsize).tolist()
        for k in np.argsort(offsets, kind="stable").tolist():
            e = elements[k]
            out[k] = flat[e : e + n_times]  # float16 storage is converted here
        if self._scales is not None:
            out /= self._scales[recs][:, None]

    def _worker_groups(self, n_groups, workers, worker_id):
        """The groups a DataLoader worker reads: a contiguous run of them."""
        return range(worker_id * n_groups // workers, (worker_id + 1) * n_groups // workers)

    def _resumed_share(self, n_batches, workers, worker_id):
        """The share of the epoch's groups this worker reads from :attr:`start` on, and
        how many of its first batches to skip.

        The DataLoader hands over one batch from each worker in turn, worker 0 first, a
        worker with nothing left passed over (its order with ``in_order=True``, the
        default): the whole epoch is that interleave of the workers' shares. A pass from
        ``start`` takes the same interleave from its ``start``-th batch: each share's
        batches among the first ``start`` are skipped, and the shares are handed to the
        workers rotated so that the share whose turn it is goes to worker 0."""
        per_group, n_groups = self._groups(n_batches)
        shares = [self._worker_groups(n_groups, workers, w) for w in range(workers)]
        counts = [max(min(n_batches, g.stop * per_group) - g.start * per_group, 0) for g in shares]
        turns = [w for k in range(max(counts)) for w in range(workers) if k < counts[w]]
        first = turns[self.start] if self.start < len(turns) else 0
        share = (worker_id + first) % workers
        return shares[share], turns[: self.start].count(share)

    def __iter__(self):
        epoch = self.epoch
        windows = self.rank_windows(epoch)
        n_batches = self.epoch_batches()
        per_group, n_groups = self._groups(n_batches)
        worker = get_worker_info()
        workers, worker_id = (1, 0) if worker is None else (worker.num_workers, worker.id)
        mine, skip = self._worker_groups(n_groups, workers, worker_id), 0
        B = self.batch_size
        # a resumed epoch: the batches the stopped sitting took are skipped (whole groups
        # not read; the crops of a group are drawn by its own seed, so the rest of a
        # group read from its middle are the crops the run never stopped read)
        if self.start:
            mine, skip = self._resumed_share(n_batches, workers, worker_id)
        if skip and len(mine):
            first = mine.start * per_group + skip
            mine = range(min(mine.stop, mine.start + skip // per_group), mine.stop)
            skip = first - mine.start * per_group if len(mine) else 0

        def group_windows(g):
            return windows[g * per_group * B : min(n_batches, (g + 1) * per_group) * B]

        if os.path.getsize(self._data_file) < self._needed_bytes():
            raise OSError(
                f"The data file of the window store '{self.view._store}' is shorter than "
                "its index says: the store is damaged; write it again."
            )
        flat = self._mapped()
        fd = os.open(self._data_file, os.O_RDONLY)
        try:
            upcoming = None
            if self.prefetch and len(mine):  # the first group's reads, all in flight
                upcoming = self._plan(group_windows(mine[0]), epoch, mine[0])
                self._advise(fd, upcoming[0])
            for g in mine:
                plan = self._plan(group_windows(g), epoch, g) if upcoming is None else upcoming
                upcoming = None
                if self.prefetch and g + 1 in mine:
                    upcoming = self._plan(group_windows(g + 1), epoch, g + 1)
                    self._advise(fd, upcoming[0])
                out = torch.empty((len(plan[0]), 1, self.view.n_times), dtype=torch.float32)
                if worker is not None:  # handed to the training process without a copy
                    out.share_memory_()
                self._read(flat, *plan, out.numpy()[:, 0])
                for first in range(skip * B, len(out), B):
                    X = out[first : first + B]
                    yield X, torch.zeros(len(X))
                skip = 0
        finally:
            os.close(fd)
