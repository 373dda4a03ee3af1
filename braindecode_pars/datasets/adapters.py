"""The one reader of labelled windows: whatever the user passes, ``(X, y, sfreq, groups)``.

Every estimator of the package (:class:`~braindecode_pars.PARSClassifier`, the
band-power floor) and the command line read their input through
:func:`read_windows`, so arrays, braindecode windows, ``Subset`` s and skorch
``SliceDataset`` s of them, the lists of window items scikit-learn makes of windows
when it splits them, and ``mne.Epochs`` all behave alike. The windows are read
once, into one float32 array, and checked (shape, NaN and inf) on the way.

:func:`resample_windows` brings windows to another sampling rate (a pretrained
encoder's) with MNE's resampling, whatever form they come in.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import numbers

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset
from braindecode.preprocessing import Preprocessor
from skorch.helper import SliceDataset
from torch.utils.data import Dataset, Subset

logger = logging.getLogger(__name__)

#: The resampling methods of MNE (``mne.filter.resample``), its default first.
RESAMPLE_METHODS = ("fft", "polyphase")


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


def _check_rate(name, value):
    """``value`` as a float, if it is a positive finite sampling rate; else ValueError."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"Invalid value for the '{name}' parameter. Allowed values are positive finite "
            f"numbers (a sampling rate in Hz), but got {value!r} instead."
        )
    return float(value)


def _resampled_length(n_times, sfreq, new_sfreq, name="X"):
    """The number of samples of ``n_times`` samples at ``sfreq`` once at ``new_sfreq``
    (MNE's rounding), at least 1."""
    n_new = int(round(n_times * new_sfreq / sfreq))
    if n_new < 1:
        raise ValueError(
            f"'{name}' windows of {n_times} samples at {sfreq} Hz hold no sample at "
            f"new_sfreq={new_sfreq} Hz."
        )
    return n_new


def _rescaled_metadata(metadata, ratio, n_times=None):
    """Window metadata with ``i_start_in_trial``/``i_stop_in_trial`` in samples at the new
    rate (``ratio`` = new / old); windows kept inside a recording of ``n_times`` samples."""
    metadata = metadata.copy()
    start = metadata["i_start_in_trial"].to_numpy(dtype=np.int64)
    stop = metadata["i_stop_in_trial"].to_numpy(dtype=np.int64)
    length = np.round((stop - start) * ratio).astype(np.int64)
    start = np.round(start * ratio).astype(np.int64)
    if n_times is not None:  # rounding may push the last window one sample out
        start = np.clip(start, 0, np.maximum(n_times - length, 0))
    metadata["i_start_in_trial"] = start
    metadata["i_stop_in_trial"] = start + length
    return metadata


def _resample_record(ds, new_sfreq, method, n_jobs=None):
    """One braindecode dataset (windows of a Raw or of Epochs, or a recording) at
    ``new_sfreq``, as a new dataset; ``ds`` is left as it was."""
    preprocessor = Preprocessor(
        "resample",
        sfreq=new_sfreq,
        method=method,
        n_jobs=n_jobs,
        verbose="error",
        apply_on_array=False,
    )
    new = copy.copy(ds)  # the same description, transform and targets, new data
    new._description = None if ds.description is None else ds.description.copy()
    if getattr(ds, "raw", None) is not None:
        old_sfreq = float(ds.raw.info["sfreq"])
        new.raw = preprocessor.apply(ds.raw.copy())  # braindecode's resampling of a Raw
        new.raw_preproc_kwargs = [*getattr(ds, "raw_preproc_kwargs", []), preprocessor.serialize()]
    elif getattr(ds, "windows", None) is not None:
        old_sfreq = float(ds.windows.info["sfreq"])
        epochs = ds.windows.copy()
        epochs.load_data()
        new.windows = preprocessor.apply(epochs)  # mne.Epochs.resample
        new._fast_disk = False  # the windows are in memory now, not read from the Raw
        new.window_preproc_kwargs = [
            *getattr(ds, "window_preproc_kwargs", []),
            preprocessor.serialize(),
        ]
    else:
        raise TypeError(
            f"'X' holds a {type(ds).__name__}, a dataset without 'raw' or 'windows' to resample."
        )
    metadata = getattr(ds, "metadata", None)
    if metadata is not None and hasattr(ds, "crop_inds"):
        raw = getattr(new, "raw", None)
        n_times = raw.n_times if getattr(ds, "raw", None) is not None else None
        metadata = _rescaled_metadata(metadata, new_sfreq / old_sfreq, n_times)
        new.metadata = metadata
        if getattr(ds, "windows", None) is not None and getattr(ds, "raw", None) is None:
            new.windows.metadata = metadata
        new.crop_inds = metadata.loc[
            :, ["i_window_in_trial", "i_start_in_trial", "i_stop_in_trial"]
        ].to_numpy()
        if hasattr(ds, "window_kwargs"):
            step = ("resample_windows", {"sfreq": new_sfreq, "method": method})
            new.window_kwargs = [*ds.window_kwargs, step]
    return new


def resample_windows(X, sfreq, new_sfreq, *, method="fft", n_jobs=None):
    """Windows resampled to ``new_sfreq`` with MNE's resampling, in the form they came in.

    A pretrained encoder works at one sampling rate (the shipped ``pars-small`` at
    100 Hz) while data come at others (``load_physionet_mi()`` gives 200 Hz): this
    brings them to the encoder's rate. MNE does the resampling (anti-aliasing
    included) in every case:

    - an array (n_windows, n_chans, n_times): every window on its own, as
      ``mne.EpochsArray(X, info).resample(new_sfreq)`` does (``mne.filter.resample``
      with MNE's settings for epochs: ``npad="auto"``, ``window="auto"``,
      ``pad="edge"``);
    - ``mne.Epochs``: ``epochs.copy().resample(new_sfreq)``;
    - braindecode windows (a ``BaseConcatDataset``): windows cut from a Raw
      (``create_windows_from_events``, ``create_fixed_length_windows``) have their
      whole recording resampled, braindecode's way (``Preprocessor("resample",
      sfreq=new_sfreq)``, i.e. ``raw.resample``), and their start and stop samples
      moved to the new rate (rounded to the nearest sample); windows held as
      ``mne.Epochs`` are resampled as epochs; recordings not cut into windows are
      resampled whole. ``Subset`` s and skorch ``SliceDataset`` s of windows keep
      their indices.

    The input is left as it was. Resampling whole recordings before cutting windows
    (``Preprocessor("resample", sfreq=...)`` in braindecode's ``preprocess``) gives the
    same samples as the braindecode case here (up to the rounding of window starts)
    and is the cheaper way when you build the windows yourself.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times) | braindecode windows | Subset | \
SliceDataset | mne.Epochs
        The windows.
    sfreq : float | None
        The windows' sampling rate in Hz. Needed for an array; for windows that carry
        theirs (braindecode windows, ``mne.Epochs``) None, or the same rate.
    new_sfreq : float
        The sampling rate to resample to, in Hz (e.g. ``load_encoder("pars-small").sfreq``).
    method : "fft" | "polyphase"
        MNE's resampling method (``mne.filter.resample``); "fft", MNE's default.
    n_jobs : int | None
        Parallel jobs of MNE's resampling.

    Returns
    -------
    resampled : ndarray | BaseConcatDataset | Subset | SliceDataset | mne.Epochs
        The same kind as ``X``: an array of shape (n_windows, n_chans,
        round(n_times * new_sfreq / sfreq)) and X's float dtype (float64 for integer
        input), or new windows or epochs at ``new_sfreq``.

    Raises
    ------
    ValueError
        For a rate that is not a positive finite number, an array that is not 3-D,
        an unknown ``method``, a ``sfreq`` that differs from the windows' own, or
        windows that would hold no sample.

    Examples
    --------
    Arrays, at 200 Hz to the shipped encoder's 100 Hz:

    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((8, 64, 800))  # 4-s windows, 200 Hz
    >>> resample_windows(X, sfreq=200.0, new_sfreq=100.0).shape
    (8, 64, 400)

    braindecode windows (and ``mne.Epochs``) carry their rate:

    >>> from braindecode_pars.datasets import load_physionet_mi
    >>> windows = load_physionet_mi(runs=[4])  # doctest: +SKIP
    >>> at_100 = resample_windows(windows, None, 100.0)  # doctest: +SKIP
    >>> at_100[0][0].shape  # doctest: +SKIP
    (64, 400)
    """
    new_sfreq = _check_rate("new_sfreq", new_sfreq)
    if method not in RESAMPLE_METHODS:
        allowed = " and ".join(repr(m) for m in RESAMPLE_METHODS)
        raise ValueError(
            f"Invalid value for the 'method' parameter. Allowed values are {allowed}, but "
            f"got {method!r} instead."
        )
    if isinstance(X, SliceDataset):
        inner = resample_windows(X.dataset, sfreq, new_sfreq, method=method, n_jobs=n_jobs)
        return SliceDataset(inner, idx=X.idx, indices=X.indices)
    if isinstance(X, Subset):
        inner = resample_windows(X.dataset, sfreq, new_sfreq, method=method, n_jobs=n_jobs)
        return Subset(inner, X.indices)
    if isinstance(X, BaseConcatDataset | mne.BaseEpochs):
        info = X.info if isinstance(X, mne.BaseEpochs) else windows_info(X)
        own = float(info["sfreq"])
        if sfreq is not None and abs(_check_rate("sfreq", sfreq) - own) > 1e-6:
            raise ValueError(
                f"'sfreq'={sfreq} differs from the sampling rate of the 'X' windows "
                f"({own} Hz); pass sfreq=None for windows that carry their rate."
            )
        if isinstance(X, mne.BaseEpochs):
            _resampled_length(len(X.times), own, new_sfreq)
            with mne.use_log_level("error"):
                epochs = X.copy().load_data()
                return epochs.resample(new_sfreq, method=method, n_jobs=n_jobs)
        for ds in X.datasets:
            if hasattr(ds, "crop_inds") and len(ds.crop_inds):
                _, start, stop = ds.crop_inds[0]
                _resampled_length(int(stop - start), own, new_sfreq)
        logger.info("Resampling %d windows from %s Hz to %s Hz.", len(X), own, new_sfreq)
        with mne.use_log_level("error"):
            datasets = [_resample_record(ds, new_sfreq, method, n_jobs) for ds in X.datasets]
        return BaseConcatDataset(
            datasets,
            target_transform=getattr(X, "target_transform", None),
        )
    array = np.asarray(X)
    if array.ndim != 3:
        raise ValueError(
            "Invalid value for the 'X' parameter. Allowed values are arrays of shape "
            "(n_windows, n_chans, n_times), braindecode windows and mne.Epochs, but got "
            f"an array of shape {array.shape} instead."
        )
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"'X' must be real numbers, but got dtype {array.dtype}.")
    if sfreq is None:
        raise ValueError(
            "Invalid value for the 'sfreq' parameter. Allowed values are positive finite "
            "numbers (a sampling rate in Hz): an array does not carry its rate, but got "
            "None instead."
        )
    sfreq = _check_rate("sfreq", sfreq)
    _resampled_length(array.shape[-1], sfreq, new_sfreq)
    dtype = array.dtype if np.issubdtype(array.dtype, np.floating) else np.float64
    resampled = mne.filter.resample(
        array.astype(np.float64),
        up=new_sfreq,
        down=sfreq,
        npad="auto",
        window="auto",
        pad="edge",
        method=method,
        n_jobs=n_jobs,
        verbose="error",
    )  # what mne.Epochs.resample does
    return resampled.astype(dtype, copy=False)
