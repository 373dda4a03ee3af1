"""The single-channel pretraining view of multi-channel windows (paper section 2.5)."""

from __future__ import annotations

import numpy as np
import torch
from braindecode.datasets import BaseConcatDataset
from torch.utils.data import Dataset

from .._checks import check_int


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
    memory-mapped store written by :func:`write_window_store`.

    Parameters
    ----------
    windows : braindecode BaseConcatDataset | numpy.ndarray | list of them
        braindecode windows (from ``create_windows_from_events`` or
        ``create_fixed_length_windows``; preloaded recordings are read in memory),
        or arrays of shape (n_windows, n_chans, n_times_window). Several sources
        are concatenated.
    n_times : int | None
        Samples per crop; default: the window length (which must then be the same
        for every window).
    max_shift : int | None
        Largest shift of the crop from the window's start, in samples; default: half
        a crop. 0 keeps crops aligned with the windows.

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
        index = []  # (recording, window start, window stop)
        for source in sources:
            self._add(source, index)
        self._finish(np.asarray(index, dtype=np.int64), n_times, max_shift)

    @classmethod
    def from_store(cls, path, n_times=None, max_shift=None):
        """The view of a store written by :func:`write_window_store`, memory-mapped.

        Nothing is read until items are drawn; DataLoader workers share the mapped
        files through the page cache.
        """
        from .store import read_window_store

        view = cls.__new__(cls)
        view.recordings, index, info = read_window_store(path)
        view.sfreq = info["sfreq"]
        view._finish(index, n_times, max_shift)
        return view

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
                raw = getattr(ds, "raw", None)
                if raw is not None:
                    self.sfreq = raw.info["sfreq"]
                if raw is not None and getattr(raw, "preload", False):
                    rec = len(self.recordings)
                    self.recordings.append(np.asarray(raw.get_data(picks="eeg"), np.float32))
                    for _, start, stop in ds.crop_inds:
                        index.append((rec, int(start), int(stop)))
                else:  # epochs-based or lazy windows: each window stands alone
                    for i in range(len(ds)):
                        self._add_window(np.asarray(ds[i][0], np.float32), index)
            return
        array = np.asarray(source, dtype=np.float32)
        if array.ndim != 3:
            raise ValueError(
                "'windows' arrays must have shape (n_windows, n_chans, n_times), but got "
                f"shape {array.shape}."
            )
        for window in array:
            self._add_window(window, index)

    def _add_window(self, window, index):
        self.recordings.append(window)
        index.append((len(self.recordings) - 1, 0, window.shape[1]))

    def __len__(self):
        return len(self.index)

    def crop_bounds(self, i):
        """Smallest and largest crop start for item ``i`` (inclusive)."""
        rec, start, stop = self.index[i]
        last = self.recordings[rec].shape[1] - self.n_times  # last start inside the recording
        low = min(max(0, start - self.max_shift), last)
        high = min(last, max(start, stop - self.n_times) + self.max_shift)
        return int(low), int(max(low, high))

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
        items = self._draw(np.asarray(indices, dtype=np.int64), np.random.default_rng(seed))
        X = torch.stack([x for x, _ in items])
        return torch.utils.data.TensorDataset(X, torch.zeros(len(X)))

    def __getitems__(self, indices):
        """A batch of items at once: the random draws are made together, crops are slices."""
        return self._draw(np.asarray(indices, dtype=np.int64), self._generator())

    def _draw(self, indices, rng):
        rows = self.index[indices]
        out = []
        for (rec, _, _), i, u, v in zip(
            rows, indices, rng.random(len(indices)), rng.random(len(indices)), strict=True
        ):
            recording = self.recordings[rec]
            low, high = self.crop_bounds(i)
            start = low + int(u * (high - low + 1))
            channel = int(v * recording.shape[0])
            x = np.array(
                recording[channel : channel + 1, start : start + self.n_times], dtype=np.float32
            )
            out.append((torch.from_numpy(x), 0))
        return out
