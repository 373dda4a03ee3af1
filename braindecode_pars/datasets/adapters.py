"""The one reader of labelled windows: whatever the user passes, ``(X, y, sfreq, groups)``.

Every estimator of the package (:class:`~braindecode_pars.PARSClassifier`, the
band-power floor) and the command line read their input through
:func:`read_windows`, so arrays, braindecode windows, ``Subset`` s and skorch
``SliceDataset`` s of them, the lists of window items scikit-learn makes of windows
when it splits them, and ``mne.Epochs`` all behave alike. The windows are read
once, into one float32 array, and checked (shape, NaN and inf) on the way.
"""

from __future__ import annotations

import dataclasses

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset
from skorch.helper import SliceDataset
from torch.utils.data import Dataset, Subset


@dataclasses.dataclass
class Windows:
    """Windows as every consumer reads them.

    Attributes
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times), float32
    y : ndarray, shape (n_windows,) | None
        Labels: given, or read from the windows (metadata ``target``, item labels,
        events of ``mne.Epochs``); None where there are none.
    sfreq : float | None
        The sampling rate, from the windows or the ``sfreq`` given; None for arrays
        without one.
    groups : ndarray, shape (n_windows,) | None
        The group (subject) of every window: given, or the ``subject`` metadata
        column of braindecode windows.
    ch_names : list of str | None
        Channel names where the windows carry them.
    """

    X: np.ndarray
    y: np.ndarray | None
    sfreq: float | None
    groups: np.ndarray | None = None
    ch_names: list | None = None

    def __len__(self):
        return len(self.X)

    @property
    def shape(self):
        """(n_chans, n_times) of every window."""
        return tuple(self.X.shape[1:])


def _unwrap(dataset, indices=None):
    """The dataset under nested ``Subset`` s (and a ``SliceDataset``), and indices into it."""
    if isinstance(dataset, SliceDataset):
        indices = dataset.indices_ if indices is None else np.asarray(dataset.indices_)[indices]
        dataset = dataset.dataset
    while isinstance(dataset, Subset):
        inner = np.asarray(dataset.indices, dtype=np.int64)
        indices = inner if indices is None else inner[np.asarray(indices, dtype=np.int64)]
        dataset = dataset.dataset
    return dataset, None if indices is None else np.asarray(indices, dtype=np.int64)


def is_window_items(X):
    """Whether ``X`` is a list of window items ``(x, y, ...)``, as indexing windows gives."""
    if not isinstance(X, list | tuple) or len(X) == 0:
        return False
    if not all(isinstance(item, tuple) and len(item) >= 2 for item in X):
        return False
    return np.ndim(X[0][0]) == 2


def windows_info(windows):
    """The ``mne.Info`` of braindecode windows (their first recording)."""
    first = windows.datasets[0]
    return first.raw.info if getattr(first, "raw", None) is not None else first.windows.info


def _stack_braindecode(windows, indices):
    """One float32 array of braindecode windows (all, or those at ``indices``).

    A preloaded recording is read once through MNE's ``get_data`` and sliced per
    window; other windows are read one by one. Windows of different shapes are
    refused, naming the shapes.
    """
    selected = np.arange(len(windows)) if indices is None else indices
    ends = np.asarray(windows.cumulative_sizes, dtype=np.int64)
    which = np.searchsorted(ends, selected, side="right")  # the recording of each window
    starts = np.concatenate([[0], ends[:-1]])
    out = [None] * len(selected)
    for k in np.unique(which):
        ds = windows.datasets[k]
        positions = np.flatnonzero(which == k)
        local = selected[positions] - starts[k]
        raw = getattr(ds, "raw", None)
        crop_inds = getattr(ds, "crop_inds", None)
        if raw is not None and getattr(raw, "preload", False) and crop_inds is not None:
            data = raw.get_data()
            items = (data[:, a:b] for _, a, b in np.asarray(crop_inds)[local])
        else:
            items = (np.asarray(ds[int(i)][0]) for i in local)
        for position, window in zip(positions, items, strict=True):
            out[position] = window
    return _stack(out, "X")


def _stack(items, name):
    shapes = {np.shape(item) for item in items}
    if len(shapes) != 1:
        raise ValueError(
            f"'{name}' windows must all have one shape (n_chans, n_times), but got "
            f"{sorted(shapes)}."
        )
    return np.stack([np.asarray(item, dtype=np.float32) for item in items])


def _metadata_column(windows, indices, column):
    """The windows' metadata ``column`` (of the ``indices`` if given), or None without one."""
    metadata = windows.get_metadata()
    if column not in metadata.columns:
        return None
    values = metadata[column].to_numpy()
    return values if indices is None else values[indices]


def labels_of(y):
    """``y`` as an array; a skorch ``SliceDataset(windows, idx=1)`` reads the windows'
    metadata rather than every window."""
    if isinstance(y, SliceDataset):
        base, indices = _unwrap(y)
        if isinstance(base, BaseConcatDataset) and y.idx == 1:
            targets = _metadata_column(base, indices, "target")
            if targets is not None:
                return targets
        return np.asarray([np.asarray(v).item() for v in y])
    return None if y is None else np.asarray(y)


def read_windows(X, y=None, groups=None, sfreq=None, name="X"):
    """Read windows once into :class:`Windows`, checked.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times) | braindecode windows | Subset | \
SliceDataset | list of window items | mne.Epochs
        braindecode windows are a ``BaseConcatDataset`` of windows; a ``Subset`` or a
        skorch ``SliceDataset`` (``idx=0``) of them keeps their metadata; the lists of
        items ``(x, y, inds)`` that scikit-learn's splitters make of windows carry
        their labels but not their sampling rate.
    y : array-like | SliceDataset | None
        Labels; None: read from the windows where they carry them.
    groups : array-like | None
        The group of every window; None: the ``subject`` metadata column of
        braindecode windows, where there is one.
    sfreq : float | None
        The sampling rate of input that does not carry one (arrays, item lists); when
        the windows carry one, the two must agree.
    name : str
        The parameter's name in error messages.

    Returns
    -------
    windows : Windows
    """
    y = labels_of(y)
    own_sfreq, own_groups, ch_names, own_y = None, None, None, None
    if isinstance(X, SliceDataset) and X.idx != 0:
        raise ValueError(
            f"'{name}' is a SliceDataset of item {X.idx} of each window; pass "
            f"SliceDataset(windows, idx=0) as '{name}' (and idx=1 as 'y')."
        )
    base, indices = _unwrap(X) if isinstance(X, SliceDataset | Subset) else (X, None)
    if isinstance(base, BaseConcatDataset):
        if len(base) == 0 or (indices is not None and len(indices) == 0):
            raise ValueError(f"'{name}' holds no window.")
        array = _stack_braindecode(base, indices)
        info = windows_info(base)
        own_sfreq = float(info["sfreq"])
        ch_names = list(info["ch_names"]) if len(info["ch_names"]) == array.shape[1] else None
        own_y = _metadata_column(base, indices, "target")
        own_groups = _metadata_column(base, indices, "subject")
    elif isinstance(base, mne.BaseEpochs):
        array = base.get_data(copy=True).astype(np.float32)
        own_sfreq, ch_names, own_y = float(base.info["sfreq"]), list(base.ch_names), None
        own_y = base.events[:, 2]
    elif is_window_items(base):
        array = _stack([item[0] for item in base], name)
        own_y = np.asarray([np.asarray(item[1]).item() for item in base])
    elif isinstance(base, Dataset):  # any other dataset of items (x, y, ...)
        items = [base[i] for i in (range(len(base)) if indices is None else indices)]
        if not items:
            raise ValueError(f"'{name}' holds no window.")
        array = _stack([item[0] for item in items], name)
        own_y = np.asarray([np.asarray(item[1]).item() for item in items])
    else:
        array = np.asarray(X)
        if array.ndim != 3:
            raise ValueError(
                f"'{name}' must be windows of shape (n_windows, n_chans, n_times), but got "
                f"an array of shape {array.shape}."
            )
        if not np.issubdtype(array.dtype, np.number) or np.issubdtype(
            array.dtype, np.complexfloating
        ):
            raise ValueError(f"'{name}' must be real numbers, but got dtype {array.dtype}.")
        array = array.astype(np.float32, copy=False)
    if array.ndim != 3:
        raise ValueError(
            f"'{name}' items must be windows of shape (n_chans, n_times), but got shape "
            f"{array.shape[1:]}; cut recordings into windows with braindecode's "
            "create_windows_from_events or create_fixed_length_windows."
        )
    if len(array) == 0:
        raise ValueError(f"'{name}' holds no window.")
    bad = int((~np.isfinite(array)).any(axis=(1, 2)).sum())
    if bad:
        raise ValueError(
            f"'{name}' holds NaN or infinite values in {bad} window(s) (of {len(array)})."
        )
    if own_sfreq is not None and sfreq is not None and abs(own_sfreq - float(sfreq)) > 1e-6:
        raise ValueError(
            f"'sfreq'={sfreq} differs from the sampling rate of the '{name}' windows "
            f"({own_sfreq} Hz)."
        )
    if y is None:
        y = own_y
    elif y.shape != (len(array),):
        raise ValueError(
            f"'y' must have shape ({len(array)},), one label per window, but got {y.shape}."
        )
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (len(array),):
            raise ValueError(
                f"'groups' must have shape ({len(array)},), one group per window, but got "
                f"{groups.shape}."
            )
    else:
        groups = own_groups
    return Windows(
        X=array,
        y=y,
        sfreq=own_sfreq if own_sfreq is not None else (None if sfreq is None else float(sfreq)),
        groups=groups,
        ch_names=ch_names,
    )
