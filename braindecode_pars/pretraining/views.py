"""The single-channel pretraining view of multi-channel windows (paper section 2.5)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
from braindecode.datasets import BaseConcatDataset
from torch.utils.data import Dataset, get_worker_info

from braindecode_pars._util.checks import check_int
from braindecode_pars.io.windowing import RecordingStream
from braindecode_pars.models.encoder import log_std_statistics
from braindecode_pars.store.write import (
    _check_same_sfreq,
    _describe,
    _eeg_picks,
    _read_float32,
    read_window_store,
)


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
        share the mapped file through the page cache.
        """
        view = cls.__new__(cls)
        view.recordings, index, info = read_window_store(path, descriptions=False)
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
        what = _describe(ds, len(self.recordings))
        raw = getattr(ds, "raw", None)
        signal = raw if raw is not None else getattr(ds, "windows", None)
        if signal is None:  # not an MNE-backed dataset: read its items as they are
            for i in range(len(ds)):
                self._add_window(np.asarray(ds[i][0], np.float32), index)
            return
        self.sfreq = _check_same_sfreq(self.sfreq, signal.info["sfreq"], what)
        picks = _eeg_picks(signal.info, what)
        if raw is not None:
            if getattr(ds, "crop_inds", None) is None:
                raise ValueError(
                    f"{what} is a recording, not windows: cut it into windows first "
                    "(braindecode's create_fixed_length_windows)."
                )
            rec = len(self.recordings)
            self.recordings.append(_read_float32(raw, picks))
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
        """:meth:`crop_bounds` of every item of ``indices``: two arrays."""
        rows = self.index[indices]
        lengths = np.array([self.recordings[r].shape[1] for r in rows[:, 0].tolist()])
        last = lengths - self.n_times  # the last start inside each recording
        low = np.minimum(np.maximum(0, rows[:, 1] - self.max_shift), last)
        high = np.minimum(last, np.maximum(rows[:, 1], rows[:, 2] - self.n_times) + self.max_shift)
        return low, np.maximum(low, high)

    def __getitem__(self, i):
        return self.__getitems__([i])[0]

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

    def batch(self, indices, pinned=False):
        """Items ``indices`` as one batch, ``(X, y)``: ``X`` (n, 1, n_times) float32 (the
        draws of :meth:`__getitems__`), ``y`` zeros; no copy per item, no collation (a
        DataLoader of :class:`_BatchedView` reads batches so). In a DataLoader worker the
        batch is written straight into shared memory, which the DataLoader hands to the
        training process as it is (a batch of ordinary memory is copied there); with
        ``pinned`` (in the training process, for a GPU) straight into pinned memory,
        which a pinning DataLoader keeps as it is (ordinary memory is copied there)."""
        shared = get_worker_info() is not None
        pinned = pinned and not shared  # a worker's batch goes to shared memory
        X = self._draw(np.asarray(indices, dtype=np.int64), self._generator(), shared, pinned)
        return X, torch.zeros(len(X), pin_memory=pinned)

    def _draw(self, indices, rng, shared=False, pinned=False):
        """The crops of ``indices``, (n, 1, n_times) float32, drawn from ``rng``; with
        ``shared``, written into shared memory, with ``pinned`` into pinned memory."""
        u, v = rng.random(len(indices)), rng.random(len(indices))
        rows = self.index[indices]
        channels = np.array([self.recordings[r].shape[0] for r in rows[:, 0].tolist()])
        low, high = self._crop_bounds(indices)
        starts = (low + (u * (high - low + 1)).astype(np.int64)).tolist()
        picks = (v * channels).astype(np.int64).tolist()
        X = torch.empty((len(indices), 1, self.n_times), dtype=torch.float32, pin_memory=pinned)
        if shared:
            X.share_memory_()
        out = X.numpy()
        for k, (rec, start, channel) in enumerate(
            zip(rows[:, 0].tolist(), starts, picks, strict=True)
        ):
            out[k, 0] = self.recordings[rec][channel, start : start + self.n_times]
        if getattr(self, "_scales", None) is not None:  # a float16 store's recordings
            out /= self._scales[rows[:, 0]][:, None, None]
        return X


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
        indices = np.asarray(indices, dtype=np.int64)
        indices = indices if self.indices is None else self.indices[indices]
        return self.view.batch(indices, pinned=self.pinned)
