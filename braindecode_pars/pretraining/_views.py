"""The single-channel pretraining view of multi-channel windows (paper section 2.5)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import torch
from braindecode.datasets import BaseConcatDataset
from torch.utils.data import Dataset, get_worker_info

from braindecode_pars._util.channels import check_same_sfreq, describe, eeg_picks, read_float32
from braindecode_pars._util.checks import check_int
from braindecode_pars._util.seeding import _Batch
from braindecode_pars.io.windowing import RecordingStream
from braindecode_pars.models.encoder import log_std_statistics
from braindecode_pars.store import read_window_store


class SingleChannelWindows(Dataset):
    """One random channel of a randomly shifted crop of each window, for pretraining.

    The paper's pretraining augmentations (section 2.5): "random cropping and
    randomly selecting one channel from multi-channel recordings". Every access to
    item ``i`` draws a new channel and a new crop: a crop of ``n_times`` samples
    whose start lies within ``max_shift`` samples of window ``i``'s own start,
    inside its recording. Where the recording around a window is unknown (arrays,
    epochs), the crop stays inside the window.

    Draws come from a generator seeded by torch's, so ``torch.manual_seed`` makes
    them reproducible and DataLoader workers draw differently. A DataLoader fetches
    whole batches through ``__getitems__``. :meth:`from_store` reads a
    memory-mapped store written by :func:`write_window_store`: the way to pretrain
    on a corpus larger than memory, or in several processes.

    Only EEG channels are drawn (MNE's channel type ``eeg``, bad channels left out),
    whether the recordings are preloaded, read from their files or cut into epochs;
    arrays carry no channel types and every channel is drawn. Every source must
    have one sampling rate.

    Parameters
    ----------
    windows : braindecode BaseConcatDataset | RecordingStream | numpy.ndarray | list of them
        braindecode windows (from ``create_windows_from_events`` or
        ``create_fixed_length_windows``), whose recordings are copied to float32
        (read from their files when they are not preloaded), or epochs-based windows,
        copied one by one; a
        :class:`~braindecode_pars.io.windowing.RecordingStream` (a reader's
        ``lazy=True`` output), read one recording at a time and kept as float32;
        arrays of shape (n_windows, n_chans, n_times_window). Several sources are
        concatenated. The view holds every recording in memory, as float32: for a
        corpus larger than that, write a store and use :meth:`from_store`.
    n_times : int | None
        Samples per crop; default: the window length (which must then be the same
        for every window).
    max_shift : int | None
        Largest shift of the crop from the window's start, in samples; default: half
        a crop. 0 keeps crops aligned with the windows.

    Attributes
    ----------
    split_groups : numpy.ndarray | None
        One label per window (e.g. its subject) by which pretraining holds windows
        out for validation (see
        :func:`~braindecode_pars.pretraining._split.held_out_recordings`); None
        (default): by recording.

    Examples
    --------
    >>> import numpy as np
    >>> view = SingleChannelWindows(np.random.randn(10, 8, 500), n_times=400)
    >>> x, _ = view[3]
    >>> tuple(x.shape)
    (1, 400)
    """

    def __init__(self, windows, n_times=None, max_shift=None):
        sources = windows if isinstance(windows, list | tuple) else [windows]
        self.recordings = []  # (n_chans, n_samples) float32 arrays, or memory maps
        self.sfreq = None
        self._store = None
        self._scales = None  # a store's scale of every recording (stored = value x scale)
        self.split_groups = None
        index = []  # (recording, window start, window stop)
        for source in sources:
            self._add(source, index)
        self._finish(np.asarray(index, dtype=np.int64), n_times, max_shift)

    @classmethod
    def from_store(cls, path, n_times=None, max_shift=None):
        """The view of a store written by :func:`write_window_store`, memory-mapped.

        Nothing is read until items are drawn; processes and DataLoader workers
        share the mapped file through the page cache. A store written before
        ``subject_from`` whose descriptions hold EDF headers' patient codes is named
        in a warning, once (:func:`~braindecode_pars.store.anonymize` rewrites it).
        """
        from braindecode_pars.store.identity import warn_header_identities

        view = cls.__new__(cls)
        view.recordings, index, info = read_window_store(path, descriptions=False)
        warn_header_identities(path)  # a store that names people, once
        view.sfreq = info["sfreq"]
        view._store = str(path)
        scales = np.asarray(info.get("scales", []), dtype=np.float64)
        view._scales = scales.astype(np.float32) if (scales != 1).any() else None
        view.split_groups = None
        view._finish(index, n_times, max_shift)
        return view

    def __getstate__(self):
        """A view of a store pickles without its data (DataLoader workers started by
        spawn or forkserver map the store again)."""
        state = self.__dict__.copy()
        state.pop("_gather", None)  # views of the recordings: made again where drawn
        state.pop("_bounds", None)  # computed again where drawn
        if state.get("_store") is not None:
            state["recordings"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.__dict__.get("_store") is not None and self.recordings is None:
            self.recordings = read_window_store(self._store, descriptions=False)[0]

    def _finish(self, index, n_times, max_shift):
        if len(index) == 0:
            raise ValueError("'windows' holds no window.")
        self.index = index
        self._rng = None
        lengths = self.index[:, 2] - self.index[:, 1]
        if n_times is None:
            if len(np.unique(lengths)) != 1:
                raise ValueError(
                    f"Windows have lengths {sorted(np.unique(lengths).tolist())[:5]}...; "
                    "pass 'n_times' to crop them to one length."
                )
            n_times = int(lengths[0])
        self.n_times = check_int("n_times", n_times, 1)
        shortest = min(r.shape[1] for r in self.recordings)
        if self.n_times > shortest:
            raise ValueError(
                f"'n_times'={self.n_times} is longer than the shortest recording or window "
                f"({shortest} samples)."
            )
        self.max_shift = (
            self.n_times // 2 if max_shift is None else check_int("max_shift", max_shift, 0)
        )

    def _add(self, source, index):
        if isinstance(source, BaseConcatDataset):
            for ds in source.datasets:
                self._add_dataset(ds, index)
            return
        if isinstance(source, RecordingStream | Iterator):
            for windows in source:  # one recording at a time, kept as float32
                self._add(windows, index)
                del windows  # let the recording go before the next one is read
            return
        array = np.asarray(source, dtype=np.float32)
        if array.ndim != 3:
            raise ValueError(
                "'windows' arrays must have shape (n_windows, n_chans, n_times), but got "
                f"shape {array.shape}."
            )
        for window in array:
            self._add_window(window, index)

    def _add_dataset(self, ds, index):
        """One braindecode windows dataset: its EEG channels, at the common rate."""
        what = describe(ds, len(self.recordings))
        raw = getattr(ds, "raw", None)
        signal = raw if raw is not None else getattr(ds, "windows", None)
        if signal is None:  # not an MNE-backed dataset: read its items as they are
            for i in range(len(ds)):
                self._add_window(np.asarray(ds[i][0], np.float32), index)
            return
        self.sfreq = check_same_sfreq(self.sfreq, signal.info["sfreq"], what)
        picks = eeg_picks(signal.info, what)
        if raw is not None:
            if getattr(ds, "crop_inds", None) is None:
                raise ValueError(
                    f"{what} is a recording, not windows: cut it into windows first "
                    "(braindecode's create_fixed_length_windows)."
                )
            rec = len(self.recordings)
            self.recordings.append(read_float32(raw, picks))
            for _, start, stop in ds.crop_inds:
                index.append((rec, int(start), int(stop)))
        else:  # epochs-based windows: each window stands alone
            for window in signal.get_data(picks=picks):
                self._add_window(np.asarray(window, np.float32), index)

    def _add_window(self, window, index):
        self.recordings.append(window)
        index.append((len(self.recordings) - 1, 0, window.shape[1]))

    def __len__(self):
        return len(self.index)

    def crop_bounds(self, i):
        """Smallest and largest crop start for item ``i`` (inclusive)."""
        low, high = self._crop_bounds(np.asarray([i]))
        return int(low[0]), int(high[0])

    def _crop_bounds(self, indices):
        """:meth:`crop_bounds` of every item of ``indices``: two arrays (those of every
        item computed once, :meth:`_all_bounds`, and indexed)."""
        low, high = self._all_bounds()
        return low[indices], high[indices]

    def _all_bounds(self):
        """The crop bounds of every item, computed once for the view's index, recordings,
        ``n_times`` and ``max_shift`` (again when any of them is replaced)."""
        layout = self._layout()
        key = (self.index, layout, self.n_times, self.max_shift)
        kept = self.__dict__.get("_bounds")
        same = (
            kept is not None
            and kept[0][0] is key[0]
            and kept[0][1] is key[1]
            and kept[0][2:] == key[2:]
        )
        if not same:
            rows = self.index
            last = layout.n_samples[rows[:, 0]] - self.n_times  # the last start in each
            low = np.minimum(np.maximum(0, rows[:, 1] - self.max_shift), last)
            high = np.minimum(
                last, np.maximum(rows[:, 1], rows[:, 2] - self.n_times) + self.max_shift
            )
            kept = self._bounds = (key, (low, np.maximum(low, high)))
        return kept[1]

    def __getitem__(self, i):
        return self.__getitems__([i])[0]

    def reseed(self):
        """Draw from here on as a new process would: the view's generator is made again
        from torch's at the next draw, so that :func:`torch.manual_seed` then ``reseed()``
        gives the same draws each time (the view keeps its generator per process
        otherwise)."""
        self._rng = None

    def _generator(self):
        """numpy generator seeded from torch's, once per process (DataLoader workers differ)."""
        seed = torch.initial_seed()
        if self._rng is None or self._rng_seed != seed:
            self._rng = np.random.default_rng([seed % 2**63, int(torch.randint(0, 2**31, ()))])
            self._rng_seed = seed
        return self._rng

    def fixed_draws(self, indices, seed=0):
        """Items ``indices`` drawn once with a seeded generator, as a TensorDataset.

        The same ``seed`` gives the same crops and channels: a validation set whose
        windows do not change from epoch to epoch. Torch's global generator is not
        touched.
        """
        X = self._draw(np.asarray(indices, dtype=np.int64), np.random.default_rng(seed))
        return torch.utils.data.TensorDataset(X, torch.zeros(len(X)))

    def log_std_statistics(self, n=4096, seed=0, eps=1e-5):
        """The mean and standard deviation of the log standard deviation of ``n`` items
        drawn with a seeded generator (all of them when there are fewer): what an
        encoder with ``normalization="window+scale"`` takes as ``log_std_mean`` and
        ``log_std_std`` (:func:`~braindecode_pars.models.encoder.log_std_statistics`).
        The same view and seed give the same values, so a resumed run finds the settings
        it saved."""
        check_int("n", n, 1)
        rng = np.random.default_rng(seed)
        indices = np.sort(rng.choice(len(self), size=min(int(n), len(self)), replace=False))
        return log_std_statistics(self._draw(indices, rng), eps=eps)

    def __getitems__(self, indices):
        """A batch of items at once: the random draws are made together, crops are slices."""
        X = self._draw(np.asarray(indices, dtype=np.int64), self._generator())
        return [(x, 0) for x in X]

    def batch(self, indices, pinned=False, seed=None):
        """Items ``indices`` as one batch, ``(X, y)``: ``X`` (n, 1, n_times) float32 (the
        draws of :meth:`__getitems__`), ``y`` zeros; no copy per item, no collation (a
        DataLoader of :class:`_BatchedView` reads batches so). In a DataLoader worker the
        batch is written straight into shared memory, which the DataLoader hands to the
        training process as it is (a batch of ordinary memory is copied there); with
        ``pinned`` (in the training process, for a GPU) straight into pinned memory,
        which a pinning DataLoader keeps as it is (ordinary memory is copied there). With
        a ``seed``, the draws come from a generator of that seed alone (a pretraining
        run's batch: the same draws in any process or worker, at any resume), otherwise
        from the view's generator of this process."""
        shared = get_worker_info() is not None
        pinned = pinned and not shared  # a worker's batch goes to shared memory
        rng = self._generator() if seed is None else np.random.default_rng(seed)
        X = self._draw(np.asarray(indices, dtype=np.int64), rng, shared, pinned)
        return X, torch.zeros(len(X), pin_memory=pinned)

    def _draw(self, indices, rng, shared=False, pinned=False):
        """The crops of ``indices``, (n, 1, n_times) float32, drawn from ``rng``; with
        ``shared``, written into shared memory, with ``pinned`` into pinned memory.

        Two uniforms per item (``rng.random(n)`` twice): the start ``low + floor(u *
        (high - low + 1))`` within :meth:`crop_bounds`, the channel ``floor(v *
        n_chans)``. The crops are gathered a block of memory at a time
        (:meth:`_layout`), not one by one."""
        u, v = rng.random(len(indices)), rng.random(len(indices))
        layout = self._layout()
        recs = self.index[indices, 0]
        low, high = self._crop_bounds(indices)
        starts = low + (u * (high - low + 1)).astype(np.int64)
        picks = (v * layout.n_chans[recs]).astype(np.int64)
        X = torch.empty((len(indices), 1, self.n_times), dtype=torch.float32, pin_memory=pinned)
        if shared:
            X.share_memory_()
        self._gather_crops(layout, recs, picks, starts, X[:, 0])
        if getattr(self, "_scales", None) is not None:  # a float16 store's recordings
            out = X.numpy()
            out /= self._scales[recs][:, None, None]
        return X

    def _layout(self):
        """Where every recording's samples lie (a :class:`_Layout`), found once per
        process."""
        layout = self.__dict__.get("_gather")
        if layout is None or len(layout.n_chans) != len(self.recordings):
            layout = self._gather = _Layout(self.recordings)
        return layout

    def _gather_crops(self, layout, recs, picks, starts, out):
        """Copy channel ``picks[k]`` of recording ``recs[k]`` from sample ``starts[k]``
        into ``out[k]`` (an (n, n_times) float32 tensor): with one ``index_select``
        straight into ``out`` when one block of memory holds every crop (arrays, a
        store), a slice copy each otherwise (recordings read one by one; the copies,
        not the loop, then take most of the time)."""
        n = self.n_times
        blocks = layout.block[recs]
        elements = layout.offset[recs] + picks * layout.stride[recs] + starts
        if blocks[0] >= 0 and (blocks == blocks[0]).all():
            windows = layout.windows(int(blocks[0]), n)
            if windows.dtype == out.dtype:
                torch.index_select(windows, 0, torch.from_numpy(elements), out=out)
            else:  # float16 storage, converted exactly
                out.copy_(torch.index_select(windows, 0, torch.from_numpy(elements)))
            return
        rows = out.numpy()
        places = zip(recs.tolist(), blocks.tolist(), elements.tolist(), strict=True)
        for k, (r, block, e) in enumerate(places):
            if block >= 0:
                rows[k] = layout.blocks[block][e : e + n]
            else:  # a recording whose samples are not contiguous in time
                rows[k] = self.recordings[r][picks[k], starts[k] : starts[k] + n]


class _Layout:
    """Where the samples of a view's recordings lie: every recording's channels and
    samples, and, where its samples are contiguous in time inside one contiguous array
    (the arrays a view was given, whose windows are views of them; a store's mapped
    file; a recording read into memory), that array flattened (its *block*), the offset
    of the recording's first sample there and its channel stride, in elements. Sample
    ``t`` of channel ``c`` of recording ``r`` is then ``blocks[block[r]][offset[r] + c *
    stride[r] + t]``; ``block[r]`` is -1 for a recording whose samples are not so laid
    out (read one crop at a time).
    """

    def __init__(self, recordings):
        n = len(recordings)
        self.n_chans = np.empty(n, np.int64)
        self.n_samples = np.empty(n, np.int64)
        self.block, self.offset, self.stride = (np.full(n, -1, np.int64) for _ in range(3))
        self.blocks, self._windows = [], {}
        roots = {}  # id of a root array -> its block
        for r, recording in enumerate(recordings):
            self.n_chans[r], self.n_samples[r] = recording.shape
            root = recording
            while isinstance(root.base, np.ndarray):
                root = root.base
            item = recording.itemsize
            if not (
                root.flags.c_contiguous
                and root.dtype == recording.dtype
                and recording.strides[1] == item
                and recording.strides[0] % item == 0
            ):
                continue
            block = roots.get(id(root))
            if block is None:
                block = roots[id(root)] = len(self.blocks)
                self.blocks.append(root.reshape(-1))
            address = recording.__array_interface__["data"][0]
            self.block[r] = block
            self.offset[r] = (address - root.__array_interface__["data"][0]) // item
            self.stride[r] = recording.strides[0] // item

    def windows(self, block, n_times):
        """Every run of ``n_times`` consecutive samples of ``block``, as the rows of a
        strided tensor that shares its memory (no copy): row ``e`` starts at element
        ``e``."""
        key = (block, n_times)
        if key not in self._windows:
            with warnings.catch_warnings():  # a store's map is read-only: only read here
                warnings.filterwarnings("ignore", "The given NumPy array is not writable")
                flat = torch.from_numpy(self.blocks[block])
            self._windows[key] = flat.unfold(0, n_times, 1)
        return self._windows[key]


#: Bytes of recordings (and of their index) that :class:`_DeviceCrops` uploads at most
#: by default.
_DEVICE_CROPS_BYTES = 2 * 2**30


class _DeviceCrops:
    """A view's recordings uploaded once to a device, and its crops drawn there.

    The recordings (a float16 store's divided by their scales, as
    :meth:`SingleChannelWindows._draw` does) are copied once, as float32, into one flat
    tensor on ``device``, with every recording's offset, channels and samples and every
    window's recording and crop bounds (:meth:`SingleChannelWindows.crop_bounds`); then
    a batch of crops is drawn with torch operations only, on the device, from a
    ``torch.Generator`` of that device: a start uniform over the window's crop bounds,
    a channel uniform over its recording's, the crop gathered by ``index_select`` from
    the flat tensor. Any device torch runs on: the same code on a CPU, a GPU, MPS.

    Parameters
    ----------
    view : SingleChannelWindows
    device : str | torch.device
    max_bytes : int
        The upload is refused (``ValueError``) when the recordings and their index take
        more bytes than this (:meth:`bytes_needed`).

    Examples
    --------
    >>> view = SingleChannelWindows(np.random.randn(10, 8, 500), n_times=400)
    >>> crops = _DeviceCrops(view, "cpu")
    >>> X = crops.draw([1, 3, 3], torch.Generator().manual_seed(0))
    >>> tuple(X.shape)
    (3, 1, 400)
    """

    def __init__(self, view, device="cpu", max_bytes=_DEVICE_CROPS_BYTES):
        check_int("max_bytes", max_bytes, 1)
        needed = self.bytes_needed(view)
        if needed > max_bytes:
            raise ValueError(
                f"'max_bytes' must be at least the {needed} bytes the view's recordings and "
                f"index take on the device, but got {max_bytes}."
            )
        self.device, self.n_times = torch.device(device), view.n_times
        layout = view._layout()
        sizes = layout.n_chans * layout.n_samples
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        self.flat = torch.empty(int(offsets[-1]), dtype=torch.float32, device=self.device)
        scales = getattr(view, "_scales", None)
        chunk, first = [], 0  # recordings copied ~64 MiB at a time
        for r, recording in enumerate(view.recordings):
            samples = np.asarray(recording, dtype=np.float32).reshape(-1)
            chunk.append(samples if scales is None else samples / scales[r])
            if offsets[r + 1] - offsets[first] >= 2**24 or r + 1 == len(view.recordings):
                block = torch.from_numpy(np.concatenate(chunk))
                self.flat[offsets[first] : offsets[r + 1]].copy_(block)
                chunk, first = [], r + 1
        low, high = view._crop_bounds(np.arange(len(view)))

        def on_device(values):
            return torch.as_tensor(np.asarray(values, dtype=np.int64), device=self.device)

        self.rec_offset, self.rec_chans = on_device(offsets[:-1]), on_device(layout.n_chans)
        self.rec_samples = on_device(layout.n_samples)
        self.rec, self.low, self.high = on_device(view.index[:, 0]), on_device(low), on_device(high)
        self.windows = self.flat.unfold(0, self.n_times, 1)

    @staticmethod
    def bytes_needed(view):
        """Bytes the recordings of ``view`` (float32) and their index take on the device."""
        layout = view._layout()
        samples = int((layout.n_chans * layout.n_samples).sum())
        return 4 * samples + 8 * (3 * len(layout.n_chans) + 3 * len(view))

    def draw(self, indices, generator=None, positions=False):
        """The crops of windows ``indices``, (n, 1, n_times) float32 on the device, drawn
        from ``generator`` (a ``torch.Generator`` of the device; None: torch's default);
        with ``positions``, also each crop's start and channel."""
        if self.device.type == "cuda" and not isinstance(indices, torch.Tensor):
            # through pinned memory, without waiting: a copy from pageable memory would
            # wait for the device
            host = torch.as_tensor(np.asarray(indices, dtype=np.int64)).pin_memory()
            indices = host.to(self.device, non_blocking=True)
        else:
            indices = torch.as_tensor(indices, dtype=torch.int64, device=self.device)
        n = len(indices)
        # two uniform integers per crop, modulo the choices: a bias below choices / 2**62
        draws = torch.randint(
            0, 2**62, (2, n), generator=generator, device=self.device, dtype=torch.int64
        )
        low, rec = self.low[indices], self.rec[indices]
        starts = low + draws[0] % (self.high[indices] - low + 1)
        channels = draws[1] % self.rec_chans[rec]
        elements = self.rec_offset[rec] + channels * self.rec_samples[rec] + starts
        X = torch.index_select(self.windows, 0, elements).unsqueeze(1)
        return (X, starts, channels) if positions else X


class _DeviceBatches:
    """Training batches whose crops are drawn on a device: the batches of window indices
    of ``batches`` (a ``BatchSampler`` over a view or a ``Subset`` of one), each drawn by
    :meth:`_DeviceCrops.draw` from one generator of the device, as ``(X, y)`` on the
    device (``y`` zeros): no host draw, no copy to the device. The generator is seeded
    from torch's global generator when the batches are made (a process's own seed, as
    the host draw's numpy generator is: :meth:`SingleChannelWindows._generator`), and
    anew from each batch's own seed when ``batches`` gives
    :class:`~braindecode_pars._util.seeding._Batch` objects (a pretraining run's).

    Examples
    --------
    >>> view = SingleChannelWindows(np.random.randn(10, 8, 500), n_times=400)
    >>> sampler = torch.utils.data.BatchSampler(range(10), 4, drop_last=True)
    >>> batches = _DeviceBatches(_DeviceCrops(view, "cpu"), sampler, view)
    >>> len(batches), [tuple(X.shape) for X, _ in batches]
    (2, [(4, 1, 400), (4, 1, 400)])
    """

    def __init__(self, crops, batches, dataset):
        self.crops, self.batches = crops, batches
        self.indices = None
        if isinstance(dataset, torch.utils.data.Subset):
            self.indices = np.asarray(dataset.indices, dtype=np.int64)
        seed = int(torch.randint(0, 2**62, (), dtype=torch.int64))
        self.generator = torch.Generator(device=crops.device).manual_seed(seed)

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        for batch in self.batches:
            if isinstance(batch, _Batch):  # a run's batch: its draws from its own seed
                self.generator.manual_seed(batch.seed)
                batch = batch.indices
            indices = np.asarray(batch, dtype=np.int64)
            if self.indices is not None:
                indices = self.indices[indices]
            X = self.crops.draw(indices, self.generator)
            yield X, torch.zeros(len(X), device=self.crops.device)


class _HostBatches:
    """The batches of a :class:`_BatchedView` read in this process: ``view[batch]`` for
    each batch of ``batches`` (its sampler), what a DataLoader without worker processes
    and with ``batch_size=None`` hands out (the dataset's item as it is, its pinned
    memory kept), without the DataLoader's work per batch and per pass (a profiler
    range, its fetcher, the item's conversion, a seed drawn from torch's global
    generator: about a tenth of a millisecond a batch on a CPU; the seeds of a
    pretraining run's batches are their own, :class:`~braindecode_pars._util.seeding._Batch`).

    Examples
    --------
    >>> view = SingleChannelWindows(np.random.randn(10, 8, 500), n_times=400)
    >>> sampler = torch.utils.data.BatchSampler(range(10), 4, drop_last=True)
    >>> batches = _HostBatches(_BatchedView(view), sampler)
    >>> len(batches), [tuple(X.shape) for X, _ in batches]
    (2, [(4, 1, 400), (4, 1, 400)])
    """

    #: As a DataLoader's: the sampler gives whole batches.
    batch_size = None

    def __init__(self, view, batches):
        self.dataset, self.sampler = view, batches

    @property
    def pin_memory(self):
        """Whether the batches come in pinned memory (the view writes them there)."""
        return bool(self.dataset.pinned)

    def __len__(self):
        return len(self.sampler)

    def __iter__(self):
        view = self.dataset
        for batch in self.sampler:
            yield view[batch]


class _BatchedView(Dataset):
    """Batches of a :class:`SingleChannelWindows` (or a ``Subset`` of one) read whole:
    ``dataset[indices]`` is :meth:`SingleChannelWindows.batch`, for a DataLoader with
    ``batch_size=None`` and a ``BatchSampler``, so that a batch of crops is written once
    into one array and not collated item by item.

    Parameters
    ----------
    dataset : SingleChannelWindows | torch.utils.data.Subset
    pinned : bool
        Write the batches read in this process into pinned memory (for a DataLoader
        that pins, with no worker processes: the crops are then copied once, not twice).
    """

    def __init__(self, dataset, pinned=False):
        self.dataset, self.pinned = dataset, pinned
        self.view, self.indices = dataset, None
        if isinstance(dataset, torch.utils.data.Subset):
            self.view, self.indices = dataset.dataset, np.asarray(dataset.indices)

    @staticmethod
    def reads(dataset):
        """Whether ``dataset`` is a view (or a ``Subset`` of one) this class batches."""
        if isinstance(dataset, torch.utils.data.Subset):
            dataset = dataset.dataset
        return isinstance(dataset, SingleChannelWindows)

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, indices):
        seed = None
        if isinstance(indices, _Batch):  # a run's batch, with the seed of its draws
            indices, seed = indices.indices, indices.seed
        indices = np.asarray(indices, dtype=np.int64)
        indices = indices if self.indices is None else self.indices[indices]
        return self.view.batch(indices, pinned=self.pinned, seed=seed)
