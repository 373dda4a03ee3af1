"""The one reader of labelled windows: whatever the user passes, ``(X, y, sfreq, groups)``.

Every estimator of the package (:class:`~braindecode_pars.PARSClassifier`, the
band-power floor) and the command line read their input through
:func:`read_windows`, so arrays, braindecode windows, ``Subset`` objects and skorch
``SliceDataset`` objects of them, the lists of window items scikit-learn makes of windows
when it splits them, and ``mne.Epochs`` all behave alike. The windows are read
once, into one float32 array allocated up front, and checked (shape, NaN and inf)
on the way; braindecode windows give what braindecode's own indexing gives.

Units: windows of MNE and braindecode objects are read in microvolts, as
braindecode's ``EEGClassifier`` reads them (``mne.Epochs`` through
``get_data(units="uV")``; braindecode windows as they are, which the package's
recipes and readers give in microvolts); arrays are taken as given.
:func:`window_scale` and :func:`_check_scale` tell windows of another unit: band
power and covariances are absolute, so windows in volts given to an estimator fitted on
microvolts give predictions unrelated to the fitted ones. The estimators record
:func:`window_scale` at ``fit`` and call :func:`_check_scale` at ``predict``.

:func:`~braindecode_pars.io.resample_windows` (importable from here
too) brings windows to another sampling rate.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset
from braindecode.datasets.base import EEGWindowsDataset
from mne.defaults import DEFAULTS
from skorch.helper import SliceDataset
from torch.utils.data import Dataset, Subset

from braindecode_pars._util.logs import plural
from braindecode_pars.io._resample import (  # noqa: F401 (re-exported)
    _RESAMPLE_METHODS,
    resample_windows,
)
from braindecode_pars.io.windowing import _short_name, windows_info, windows_sfreq

logger = logging.getLogger(__name__)

#: A window scale at ``predict`` this many times larger (or smaller) than at ``fit``
#: warns (:func:`_check_scale`): a factor of 1e6 is volts against microvolts.
_SCALE_WARNING_FACTOR = 100.0

#: Samples (windows x channels x times) checked (NaN and inf, scale) or read (preloaded
#: ``mne.Epochs``) at a time, so that the temporary arrays stay small (2 MiB in float64).
_CHUNK_SAMPLES = 1 << 18


def _chunks(n, window_size):
    """Slices of ``n`` windows of ``window_size`` samples, about :data:`_CHUNK_SAMPLES`
    samples each (at least one window)."""
    step = max(1, _CHUNK_SAMPLES // max(1, window_size))
    return [slice(start, min(n, start + step)) for start in range(0, n, step)]


def window_scale(X):
    """A robust amplitude of windows: the median over windows of each window's standard
    deviation.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times)
        The windows (an array, as :func:`read_windows` gives them in ``Windows.X``).

    Returns
    -------
    scale : float
        0.0 for flat windows; the same unit as ``X`` (about 10 to 100 for EEG in
        microvolts, 1e-5 to 1e-4 in volts).

    Raises
    ------
    ValueError
        For an array that is not 3-D or holds no window.
    """
    X = np.asarray(X)
    if X.ndim != 3 or len(X) == 0:
        raise ValueError(
            "'X' must be windows of shape (n_windows, n_chans, n_times), at least one, but "
            f"got an array of shape {X.shape}."
        )
    per_window = np.concatenate(
        [
            X[part].reshape(-1, X[0].size).std(axis=1, dtype=np.float64)
            for part in _chunks(len(X), X[0].size)
        ]
    )  # a few windows at a time: float64 copies of those only
    return float(np.median(per_window))


def _check_scale(fitted_scale, X, who):
    """Warn when windows at ``predict`` are in another unit than those fitted.

    Band power and covariances are absolute: windows in volts given to an estimator
    fitted in microvolts (or the reverse) give predictions unrelated to the fitted
    ones, without error. This compares :func:`window_scale` of ``X`` with the scale
    recorded at ``fit`` and warns when they differ by more than
    :data:`_SCALE_WARNING_FACTOR` either way.

    Parameters
    ----------
    fitted_scale : float
        :func:`window_scale` of the windows fitted on.
    X : ndarray, shape (n_windows, n_chans, n_times)
        The windows at ``predict``.
    who : str
        Who is asking (an estimator's name), at the head of the warning.

    Returns
    -------
    factor : float | None
        The scale of ``X`` over ``fitted_scale``; None where either is 0 (flat windows).

    Warns
    -----
    UserWarning
        When the factor is above :data:`_SCALE_WARNING_FACTOR` or below its inverse,
        naming the factor and both scales.
    """
    scale = window_scale(X)
    if not fitted_scale > 0 or not scale > 0:
        return None
    factor = scale / float(fitted_scale)
    if factor > _SCALE_WARNING_FACTOR or factor < 1 / _SCALE_WARNING_FACTOR:
        warnings.warn(
            f"{who}: the windows at predict are about {factor:.3g} times the amplitude of "
            f"those fitted (median standard deviation per window {scale:.3g} against "
            f"{float(fitted_scale):.3g}); are they in another unit (volts vs microvolts)? "
            "Band power and covariances are absolute: give the windows in the unit of fit "
            "(the package reads MNE and braindecode objects in microvolts).",
            UserWarning,
            stacklevel=2,
        )
    return factor


@dataclasses.dataclass
class Windows:
    """Windows as every consumer reads them.

    Attributes
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times), float32
    y : ndarray, shape (n_windows,) | (n_windows, ...) | None
        Labels: given, or read from the windows (metadata ``target``, item labels,
        events of ``mne.Epochs``); None where there are none. Targets of several
        values (braindecode's ``targets_from="channels"`` with several misc
        channels) keep their shape after the first axis.
    sfreq : float | None
        The sampling rate, from the windows or the ``sfreq`` given; None for arrays
        without one.
    groups : ndarray, shape (n_windows,) | None
        The group (subject) of every window: given, or the ``subject`` metadata
        column of braindecode windows.
    ch_names : list of str | None
        Channel names where the windows carry them (braindecode windows, whose first
        recording names them; ``mne.Epochs``), in the order of ``X``'s channels; None
        for arrays and for one-channel recordings of several names. Estimators keep
        them as ``ch_names_`` and match the windows at ``predict`` by them
        (:func:`~braindecode_pars.io.estimator_inputs.match_channels`).
    n_items : int | None
        The number of window items ``(x, y, inds)`` read, where the windows were such a
        list (as scikit-learn's splitters make of braindecode windows); None otherwise.
    """

    X: np.ndarray
    y: np.ndarray | None
    sfreq: float | None
    groups: np.ndarray | None = None
    ch_names: list | None = None
    n_items: int | None = None

    def __len__(self):
        return len(self.X)

    @property
    def shape(self):
        """(n_chans, n_times) of every window."""
        return tuple(self.X.shape[1:])


def _unwrap(dataset, indices=None):
    """The dataset under nested ``Subset`` objects (and a ``SliceDataset``), and indices into it."""
    if isinstance(dataset, SliceDataset):
        indices = dataset.indices_ if indices is None else np.asarray(dataset.indices_)[indices]
        dataset = dataset.dataset
    while isinstance(dataset, Subset):
        inner = np.asarray(dataset.indices, dtype=np.int64)
        indices = inner if indices is None else inner[np.asarray(indices, dtype=np.int64)]
        dataset = dataset.dataset
    return dataset, None if indices is None else np.asarray(indices, dtype=np.int64)


def _is_window_items(X):
    """Whether ``X`` is a list of window items ``(x, y, ...)``, as indexing windows gives."""
    if not isinstance(X, list | tuple) or len(X) == 0:
        return False
    if not all(isinstance(item, tuple) and len(item) >= 2 for item in X):
        return False
    return np.ndim(X[0][0]) == 2


def _reads_recordings_as_is(windows):
    """Whether indexing braindecode ``windows`` gives their recordings' samples and their
    metadata targets: no dataset has a ``transform`` or takes its targets from misc
    channels (``targets_from="channels"``), and the windows have no ``target_transform``.

    Otherwise :func:`read_windows` reads every window through braindecode's indexing
    (``windows[i]``), which applies all three.
    """
    if getattr(windows, "target_transform", None) is not None:
        return False
    return all(
        getattr(ds, "transform", None) is None
        and getattr(ds, "targets_from", "metadata") == "metadata"
        for ds in windows.datasets
    )


class _Stack:
    """One float32 array of ``n`` windows, allocated at the first window and filled in
    place (no list of copies, no second array); a window of another shape is refused,
    naming both shapes."""

    def __init__(self, n, name):
        self.n, self.name, self.out = n, name, None

    def put(self, position, window):
        window = np.asarray(window)
        if self.out is None:
            self.out = np.empty((self.n, *window.shape), dtype=np.float32)
        elif window.shape != self.out.shape[1:]:
            shapes = {tuple(self.out.shape[1:]): 1, tuple(window.shape): 1}
            raise ValueError(_one_shape_message(self.name, shapes))
        self.out[position] = window  # the float32 cast of np.asarray(window, float32)


#: Distinct shapes named at most in :func:`_one_shape_message` (the rest are counted).
_SHAPES_SHOWN = 8


def _one_shape_message(name, shapes, n_windows=None):
    """Why windows of several shapes do not stack into one array, and the fix.

    Parameters
    ----------
    name : str
        The parameter's name (``"X"``).
    shapes : dict
        ``{(n_chans, n_times): number of windows}`` of the distinct shapes met.
    n_windows : int | None
        The number of windows, where all were looked at (None: reading stopped at the
        second shape met).

    Returns
    -------
    message : str
        The distinct shapes, sorted (the first :data:`_SHAPES_SHOWN`, with their counts
        where all were looked at), and the fix: one channel set (``pick``), one length
        (crop, pad, or windows of one length cut from the recordings).
    """
    ordered = sorted(shapes)
    shown = ordered[:_SHAPES_SHOWN]
    if n_windows is None:
        listed = f"{shown}"
    else:
        listed = ", ".join(
            f"{shape} x{shapes[shape]}" if shapes[shape] > 1 else f"{shape}" for shape in shown
        )
        listed = f"{len(ordered)} shapes over {n_windows} windows: [{listed}"
        listed += f", and {len(ordered) - len(shown)} more]" if len(ordered) > len(shown) else "]"
    chans = sorted({shape[0] for shape in ordered if len(shape) == 2})
    times = sorted({shape[-1] for shape in ordered if len(shape) == 2})
    fixes = []
    if len(chans) > 1:
        fixes.append(
            "give every window the same channels (mne's inst.pick(ch_names), or braindecode's "
            "Preprocessor('pick', picks=ch_names) before windowing)"
        )
    if len(times) > 1:
        shortest = times[0]
        fixes.append(
            f"give every window one length ({times[0]} to {times[-1]} samples here): crop "
            f"them to the shortest (np.stack([x[:, :{shortest}] for x in X])), pad them to "
            "the longest, or cut windows of one length from the recordings (braindecode's "
            "create_windows_from_events with window_size_samples, or "
            "create_fixed_length_windows)"
        )
    fix = "; or ".join(fixes) if fixes else "give windows of one shape (n_chans, n_times)"
    return (
        f"'{name}' windows must all have one shape (n_chans, n_times), but got {listed}. "
        f"To stack them into one (n_windows, n_chans, n_times) array, {fix}."
    )


def _stack(items, name):
    """The windows ``items`` (arrays of one shape) as one float32 array."""
    stack = _Stack(len(items), name)
    for position, item in enumerate(items):
        stack.put(position, item)
    return stack.out


def _direct(ds):
    """Whether the windows of ``ds`` are read here as braindecode reads them, without its
    per-item overhead: an ``EEGWindowsDataset`` of an MNE Raw (not a Zarr store)."""
    return (
        isinstance(ds, EEGWindowsDataset)
        and getattr(ds, "_zarr_data", None) is None
        and ds.raw is not None
    )


def _channel_sets(windows):
    """``{channel names: [recordings]}`` of braindecode ``windows``' recordings."""
    sets = {}
    for k, ds in enumerate(windows.datasets):
        signal = getattr(ds, "raw", None) or getattr(ds, "windows", None)
        if signal is not None:
            sets.setdefault(tuple(signal.ch_names), []).append(_short_name(ds, k))
    return sets


def _one_channel_names(sets):
    """The names of one-channel recordings of several names (C3-A1, CZ-A1...), which
    stack by position as one channel; None unless every recording has one channel and
    they have two names or more."""
    if len(sets) < 2 or any(len(channels) != 1 for channels in sets):
        return None
    return [channels[0] for channels in sets]


def _note_one_channel(sets, name):
    """Say (``logging.INFO``) that one-channel recordings of several names are stacked
    by position, naming the names; whether they are."""
    names = _one_channel_names(sets)
    if names is None:
        return False
    counts = ", ".join(f"{ch} ({plural(len(sets[(ch,)]), 'recording')})" for ch in names)
    logger.info(
        "'%s': one-channel recordings of %d channel names, stacked by position as one "
        "channel: %s.",
        name, len(names), counts,
    )  # fmt: skip
    return True


def _same_channels(sets):
    """Whether channel sets (``{channels: [recordings]}``, two or more) are the same
    channels, each once, listed in other orders."""
    first = sorted(next(iter(sets)))
    return len(set(first)) == len(first) and all(sorted(s) == first for s in sets)


def _channel_orders(windows, name):
    """How to read each recording of braindecode ``windows`` whose recordings list the
    same channels in several orders: ``{recording position: channel indices}`` giving
    its channels in the order of the first recording (its ``windows_info``, the
    windows' ``ch_names``), said in one ``logging.INFO`` line; empty where the
    recordings list their channels in one order (or have several channel sets, which
    :func:`_check_one_channel_set` refuses)."""
    sets = _channel_sets(windows)
    if len(sets) < 2 or not _same_channels(sets):
        return {}
    first = list(next(iter(sets)))
    orders = {}
    for k, ds in enumerate(windows.datasets):
        signal = getattr(ds, "raw", None) or getattr(ds, "windows", None)
        names = list(signal.ch_names) if signal is not None else first
        if names != first:
            orders[k] = [names.index(ch) for ch in first]
    logger.info(
        "'%s': the recordings list the same %s in %d orders; every recording's are read "
        "in the order of the first (%s).",
        name, plural(len(first), "channel"), len(sets), ", ".join(first),
    )  # fmt: skip
    return orders


def _check_one_channel_set(windows, name):
    """Refuse braindecode ``windows`` whose recordings have several channel sets, naming
    the recordings, the channels and the option that gives them one set; one-channel
    recordings of several names (sleep labs mix derivations: C3-A1, CZ-A1, Fpz-Cz) stack
    by position, which the log says; the same channels in other orders are read in one
    order (:func:`_channel_orders`)."""
    sets = _channel_sets(windows)
    if len(sets) < 2 or _same_channels(sets) or _note_one_channel(sets, name):
        return
    raise ValueError(_channel_sets_message(sets, f"'{name}' windows come from recordings with"))


def _in_order(window, order, windows, name):
    """A window's channels (rows) in the order ``order`` (None: as they are); a window
    whose rows are not its recording's channels (targets taken from misc channels, a
    transform that changes them) cannot be reordered by name, and is refused."""
    if order is None:
        return window
    window = np.asarray(window)
    if window.shape[0] != len(order):
        raise ValueError(
            _channel_sets_message(
                _channel_sets(windows),
                f"'{name}' windows (whose items are not their recordings' channels, so "
                "they cannot be matched by name) come from recordings with",
            )
        )
    return window[order]


def _channel_sets_message(sets, head):
    """Why recordings of several channel sets (``{channels: [recordings]}``) do not stack
    into one array, and the fix, its channel list written once: ``picks`` of the
    channels they share, or, when they share none, reading each set apart or renaming.

    ``head`` opens the message (``"'X' windows come from recordings with"``); the count
    of sets follows it.
    """
    common = [ch for ch in next(iter(sets)) if all(ch in s for s in sets)]
    parts = []
    for channels, recordings in sorted(sets.items(), key=lambda item: -len(item[1])):
        extra = [ch for ch in channels if ch not in common]
        shown = ", ".join(recordings[:3]) + (
            f" and {len(recordings) - 3} more" if len(recordings) > 3 else ""
        )
        also = f", those shared and {', '.join(extra)}" if extra else ", those shared"
        if not common:
            also = f": {', '.join(channels)}"
        parts.append(f"{len(recordings)} with {plural(len(channels), 'channel')}{also} ({shown})")
    if common:
        fix = (
            f"Keep the {plural(len(common), 'channel')} they share in every recording: "
            f"picks={common!r} (of load_recordings and load_labelled_recordings; the "
            "store command's --channels takes the same names; braindecode's "
            "Preprocessor('pick', picks=...) before windowing)."
        )
    else:
        fix = (
            "They share no channel, so no pick gives them one set. Read the recordings "
            "of each set apart; or, where the channels are the same sites under other "
            "names, rename them to one set before windowing (mne's "
            "Raw.rename_channels). One-channel recordings of different names are stacked "
            "by position."
        )
    return (
        f"{head} {len(sets)} channel sets, which do not stack into one "
        f"(n_windows, n_chans, n_times) array: {'; '.join(parts)}. {fix}"
    )


def _stack_braindecode(windows, indices, name="X"):
    """braindecode windows (all, or those at ``indices``) as one float32 array, and their
    labels where braindecode's indexing gives them.

    When :func:`_reads_recordings_as_is`, every window of an ``EEGWindowsDataset`` is cut
    from its recording with the call braindecode's ``__getitem__`` makes
    (``raw._getitem`` over the window's samples: a float64 copy of that window only, read
    from disk where the recording is not preloaded), and other windows are read as
    ``ds[i][0]``; the labels
    are then the metadata's (None is returned for them). Otherwise every window is
    read as ``windows[i]``, so that each dataset's ``transform``, the windows'
    ``target_transform`` and ``targets_from="channels"`` apply, and the labels are the
    items'. Windows of different shapes are refused, naming the shapes, and recordings
    of several channel sets naming the recordings, the channels and ``picks``;
    recordings that list the same channels in other orders are read in the first one's
    order (:func:`_channel_orders`).

    Returns
    -------
    X : ndarray, shape (n_windows, n_chans, n_times), float32
    labels : list | None
        The items' labels, or None when they are the metadata's ``target``.
    """
    selected = np.arange(len(windows)) if indices is None else indices
    stack = _Stack(len(selected), name)
    ends = np.asarray(windows.cumulative_sizes, dtype=np.int64)
    which = np.searchsorted(ends, selected, side="right")  # the recording of each window
    orders = _channel_orders(windows, name)  # the same channels in other orders
    if not _reads_recordings_as_is(windows):
        _note_one_channel(_channel_sets(windows), name)  # items of them stack as they are
        labels = []
        for position, i in enumerate(selected):
            item = windows[int(i)]
            window = _in_order(item[0], orders.get(int(which[position])), windows, name)
            try:
                stack.put(position, window)
            except ValueError:  # recordings of several channel sets are named, if so
                _check_one_channel_set(windows, name)
                raise
            labels.append(item[1])
        return stack.out, labels
    _check_one_channel_set(windows, name)
    starts = np.concatenate([[0], ends[:-1]])
    for k in np.unique(which):
        ds, order = windows.datasets[k], orders.get(int(k))
        positions = np.flatnonzero(which == k)
        local = selected[positions] - starts[k]
        if _direct(ds):
            raw, crops = ds.raw, np.asarray(ds.crop_inds)[local]
            rows = slice(None) if order is None else order
            for position, (_, a, b) in zip(positions, crops, strict=True):
                window = raw._getitem((rows, slice(int(a), int(b))), return_times=False)
                stack.put(position, window)
        else:
            for position, i in zip(positions, local, strict=True):
                stack.put(position, _in_order(ds[int(i)][0], order, windows, name))
    return stack.out, None


def _metadata_column(windows, indices, column):
    """The windows' metadata ``column`` (of the ``indices`` if given), or None without one."""
    metadata = windows.get_metadata()
    if column not in metadata.columns:
        return None
    values = metadata[column].to_numpy()
    return values if indices is None else values[indices]


def window_metadata(X, column):
    """The metadata ``column`` of braindecode windows ``X`` (or of a ``Subset`` or skorch
    ``SliceDataset`` of them), read without their signals; None for other input, without
    that column, or for ``"target"`` where braindecode's indexing gives other labels than
    the metadata's (:func:`_reads_recordings_as_is`)."""
    base, indices = _unwrap(X) if isinstance(X, SliceDataset | Subset) else (X, None)
    if not isinstance(base, BaseConcatDataset):
        return None
    if column == "target" and not _reads_recordings_as_is(base):
        return None
    return _metadata_column(base, indices, column)


def _label_array(labels):
    """Labels of windows as an array: (n,) for labels of one value each (numbers,
    strings, arrays of one element), (n, ...) for labels of several values."""
    arrays = [np.asarray(label) for label in labels]
    if all(a.size == 1 for a in arrays):
        return np.asarray([a.item() for a in arrays])
    shapes = {a.shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"The windows' labels must all have one shape, but got {sorted(shapes)}.")
    return np.stack(arrays)


def labels_of(y):
    """``y`` as an array; a skorch ``SliceDataset(windows, idx=1)`` reads the windows'
    metadata rather than every window where braindecode's indexing gives the metadata's
    targets (:func:`_reads_recordings_as_is`)."""
    if isinstance(y, SliceDataset):
        base, indices = _unwrap(y)
        if isinstance(base, BaseConcatDataset) and y.idx == 1 and _reads_recordings_as_is(base):
            targets = _metadata_column(base, indices, "target")
            if targets is not None:
                return targets
        return _label_array(list(y))
    return None if y is None else np.asarray(y)


def _voltage_units(epochs):
    """``units`` of ``get_data`` giving every channel measured in volts in microvolts
    (``"uV"`` where the epochs hold EEG only, as braindecode's ``EEGClassifier`` asks)."""
    si_units = DEFAULTS["si_units"]
    return {t: "uV" for t in set(epochs.get_channel_types()) if si_units.get(t) == "V"}


def _read_epochs(epochs, name):
    """``mne.Epochs`` as one float32 array in microvolts (:func:`_voltage_units`).

    Preloaded epochs are read a few at a time into the array (a small float64 copy at a
    time, :func:`_chunks`); others through one ``get_data``, which reads and drops bad
    epochs.
    """
    units = _voltage_units(epochs)
    if not epochs.preload:
        return epochs.get_data(units=units).astype(np.float32)
    n = len(epochs)
    if n == 0:
        raise ValueError(f"'{name}' holds no window.")
    stack = _Stack(n, name)
    for part in _chunks(n, len(epochs.ch_names) * len(epochs.times)):
        for offset, window in enumerate(epochs.get_data(item=part, units=units)):
            stack.put(part.start + offset, window)
    return stack.out


def _count_not_finite(array):
    """The number of windows of ``array`` holding NaN or inf, a few windows at a time."""
    return sum(
        int((~np.isfinite(array[part])).any(axis=(1, 2)).sum())
        for part in _chunks(len(array), array[0].size)
    )


def _check_real(array, name):
    """Refuse an array that is not of real numbers, naming its dtype."""
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.complexfloating):
        raise ValueError(f"'{name}' must be real numbers, but got dtype {array.dtype}.")


def _as_array(X, name):
    """``X`` (an array, or what ``np.asarray`` reads as one) as float32 windows, checked:
    3-D and real. Items of several shapes (which numpy refuses as "inhomogeneous") are
    refused naming their shapes."""
    try:
        array = np.asarray(X)
    except ValueError as err:  # numpy's "inhomogeneous shape": items of several shapes
        shapes = sorted({np.shape(item) for item in X}, key=str) if _sized(X) else []
        raise ValueError(
            f"'{name}' must be windows of shape (n_windows, n_chans, n_times), but its "
            f"items have several shapes ({', '.join(map(str, shapes[:_SHAPES_SHOWN]))}), "
            "which do not stack into one array: give one (n_chans, n_times) array per "
            "window."
        ) from err
    if array.ndim != 3:
        raise ValueError(
            f"'{name}' must be windows of shape (n_windows, n_chans, n_times), but got "
            f"an array of shape {array.shape}."
        )
    _check_real(array, name)
    return array.astype(np.float32, copy=False)


def _sized(X):
    """Whether the items of ``X`` can be listed with their shapes (a list or tuple)."""
    if not isinstance(X, list | tuple):
        return False
    try:
        [np.shape(item) for item in X]
    except ValueError:  # a ragged item
        return False
    return True


def _trial_items(X):
    """The items of ``X`` taken one window each: a list or tuple, or an object array of
    one dimension or of one row or column (a ``scipy.io.loadmat`` cell array) whose
    items are arrays or lists; None for anything else (an array of numbers is read
    whole)."""
    if isinstance(X, list | tuple):
        items = list(X)
    elif isinstance(X, np.ndarray) and X.dtype == object:
        if not (X.ndim == 1 or (X.ndim == 2 and 1 in X.shape)):
            return None
        items = list(X.ravel())
        if not all(isinstance(item, np.ndarray | list | tuple) for item in items):
            return None
    else:
        return None
    return items or None


def _as_trials(X, name):
    """Windows given one by one (a list of arrays or of nested lists, or a
    ``scipy.io.loadmat`` cell array, see :func:`_trial_items`) as one float32 array; None
    where ``X`` is not such a list or its items are not 2-D (read by
    :func:`_as_array`, whose messages name the shape).

    Raises
    ------
    ValueError
        For windows of several shapes, naming the distinct shapes and the fix
        (:func:`_one_shape_message`); an item whose channels have several lengths; an
        item that is not of real numbers.
    """
    items = _trial_items(X)
    if items is None:
        return None
    trials = []
    for k, item in enumerate(items):
        try:
            trial = np.asarray(item)
        except ValueError as err:  # a nested list whose channels have several lengths
            lengths = sorted({len(ch) for ch in item if hasattr(ch, "__len__")})
            raise ValueError(
                f"'{name}' window {k} is not one (n_chans, n_times) array: its channels "
                f"have several lengths ({', '.join(map(str, lengths))} samples). Give "
                "every channel of a window the same number of samples."
            ) from err
        if trial.ndim != 2:
            return None
        trials.append(trial)
    shapes = {}
    for trial in trials:
        shapes[trial.shape] = shapes.get(trial.shape, 0) + 1
    if len(shapes) > 1:
        raise ValueError(_one_shape_message(name, shapes, n_windows=len(trials)))
    for trial in trials:
        _check_real(trial, name)
    return _stack(trials, name)


def _check_sfreq(own, sfreq, name):
    if own is not None and sfreq is not None and abs(own - float(sfreq)) > 1e-6:
        raise ValueError(
            f"'sfreq'={sfreq} differs from the sampling rate of the '{name}' windows ({own} Hz)."
        )
    return own if own is not None else (None if sfreq is None else float(sfreq))


def _people_in_several_groups(people, groups):
    """The people (subjects) whose windows ``groups`` put in more than one group.

    Parameters
    ----------
    people, groups : array-like, shape (n_windows,)
        The person of each window (what names the subject: a header, a pattern's
        ``subject``, braindecode's ``subject`` column) and the group given for it.

    Returns
    -------
    split : dict
        ``{person: [groups]}``, in order of appearance, for every person of two groups or
        more (empty when the groups keep each person whole).
    """
    seen = {}
    for person, group in zip(np.asarray(people).tolist(), np.asarray(groups).tolist(), strict=True):
        if person is None or (isinstance(person, float) and np.isnan(person)):
            continue
        found = seen.setdefault(person, [])
        if group not in found:
            found.append(group)
    return {person: found for person, found in seen.items() if len(found) > 1}


def _split_people_message(split, who, fix):
    """The warning for :func:`_people_in_several_groups`: the first person and their
    groups, the count, why it matters and ``fix``; ``who`` names where the people come
    from ("the windows' 'subject'")."""
    person, found = next(iter(split.items()))
    shown = ", ".join(repr(g) for g in found[:4]) + (" ..." if len(found) > 4 else "")
    more = (
        f" (and {plural(len(split) - 1, 'other person', 'other people')})" if len(split) > 1 else ""
    )
    return (
        f"The groups put one person in several groups: {person!r} ({who}) is in groups "
        f"{shown}{more}. A split by these groups (GroupKFold, LeaveOneGroupOut) puts the same "
        f"person on both sides, which inflates the score. {fix}"
    )


def _check_groups_keep_people(people, groups, name):
    """Warn once when the ``groups`` given split a subject the windows name (their
    ``subject``) over several groups."""
    if people is None or groups is None or len(people) != len(groups):
        return
    split = _people_in_several_groups(people, groups)
    if split:
        warnings.warn(
            _split_people_message(
                split,
                f"the '{name}' windows' subject",
                "Group by person: leave 'groups' as None (the windows' own subjects), or "
                "pass those subjects as 'groups'.",
            ),
            UserWarning,
            stacklevel=4,
        )


def _check_per_window(values, n, what, name):
    """``values`` as an array of one ``what`` per window, or a ValueError."""
    values = np.asarray(values)
    if values.shape != (n,):
        raise ValueError(
            f"'{name}' must have shape ({n},), one {what} per window, but got {values.shape}."
        )
    return values


def _read_again(windows, y, groups, sfreq, name):
    """Windows read before, with the ``y``, ``groups`` and ``sfreq`` given (checked) in
    place of theirs; the same array ``X``."""
    n = len(windows.X)
    if groups is not None:
        _check_groups_keep_people(windows.groups, groups, name)
    return Windows(
        X=windows.X,
        y=windows.y if y is None else _check_per_window(y, n, "label", "y"),
        sfreq=_check_sfreq(windows.sfreq, sfreq, name),
        groups=windows.groups
        if groups is None
        else _check_per_window(groups, n, "group", "groups"),
        ch_names=windows.ch_names,
        n_items=windows.n_items,
    )


def read_windows(X, y=None, groups=None, sfreq=None, name="X"):
    """Read windows once into :class:`Windows`, checked.

    braindecode windows give what braindecode's indexing gives (``windows[i]``),
    whether they are preloaded or not: each dataset's ``transform``, the windows'
    ``target_transform`` and ``targets_from="channels"`` (whose misc channels are the
    targets, and are left out of ``X``) apply. ``mne.Epochs`` are read in microvolts,
    as braindecode's ``EEGClassifier`` reads them (``get_data(units="uV")``, for every
    channel measured in volts); arrays are taken as given.

    The output array is allocated once its shape is known and filled window by
    window: reading needs the output's memory plus one window.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times) | list of arrays | braindecode \
windows | Subset | SliceDataset | list of window items | mne.Epochs | Windows
        braindecode windows are a ``BaseConcatDataset`` of windows, read at their
        recordings' sampling rate (every recording's: recordings at several rates are
        refused, naming them, their rates and the fix, by
        :func:`~braindecode_pars.io.windowing.windows_sfreq`); a ``Subset`` or a
        skorch ``SliceDataset`` (``idx=0``) of them keeps their metadata; the lists of
        items ``(x, y, inds)`` that scikit-learn's splitters make of windows carry
        their labels but not their sampling rate. Windows given one by one (a list or
        tuple of (n_chans, n_times) arrays or of nested lists, or a
        ``scipy.io.loadmat`` cell array: an object array of one row or column) are
        stacked when they have one shape. A :class:`Windows` (read before) is
        returned with the same array ``X``, not copied or scanned again, and the
        ``y``, ``groups`` and ``sfreq`` given in place of its own: a meta-estimator
        reads once and hands the result to its stages.
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

    Raises
    ------
    ValueError
        For windows that are not 3-D, not real numbers, of different shapes (naming the
        distinct shapes and the fix: one channel set, one length), empty or holding NaN
        or inf; braindecode windows of recordings at several sampling rates; a
        ``sfreq`` that differs from the windows' own; ``y`` or ``groups`` of another
        length than the windows.
    """
    if isinstance(X, Windows):
        return _read_again(X, labels_of(y), groups, sfreq, name)
    y = labels_of(y)
    own_sfreq, own_groups, ch_names, own_y, n_items = None, None, None, None, None
    if isinstance(X, SliceDataset) and X.idx != 0:
        raise ValueError(
            f"'{name}' is a SliceDataset of item {X.idx} of each window; pass "
            f"SliceDataset(windows, idx=0) as '{name}' (and idx=1 as 'y')."
        )
    base, indices = _unwrap(X) if isinstance(X, SliceDataset | Subset) else (X, None)
    if isinstance(base, BaseConcatDataset):
        if len(base) == 0 or (indices is not None and len(indices) == 0):
            raise ValueError(f"'{name}' holds no window.")
        own_sfreq = windows_sfreq(base, indices, name)  # one rate, or refused naming them
        array, labels = _stack_braindecode(base, indices, name)
        info = windows_info(base)
        ch_names = list(info["ch_names"]) if len(info["ch_names"]) == array.shape[1] else None
        if _one_channel_names(_channel_sets(base)) is not None:
            ch_names = None  # one channel of several names: none names them all
        if labels is None:
            own_y = _metadata_column(base, indices, "target")
        else:
            own_y = _label_array(labels)
        own_groups = _metadata_column(base, indices, "subject")
    elif isinstance(base, mne.BaseEpochs):
        array = _read_epochs(base, name)
        own_sfreq, ch_names = float(base.info["sfreq"]), list(base.ch_names)
        own_y = base.events[:, 2]
    elif _is_window_items(base):
        array = _stack([item[0] for item in base], name)
        own_y = _label_array([item[1] for item in base])
        n_items = len(base)
    elif isinstance(base, Dataset):  # any other dataset of items (x, y, ...)
        selected = range(len(base)) if indices is None else indices
        if len(selected) == 0:
            raise ValueError(f"'{name}' holds no window.")
        stack, labels = _Stack(len(selected), name), []
        for position, i in enumerate(selected):
            item = base[int(i)]
            stack.put(position, item[0])
            labels.append(item[1])
        array, own_y = stack.out, _label_array(labels)
    elif (trials := _as_trials(X, name)) is not None:
        array = trials
    else:
        array = _as_array(X, name)
    if array.ndim != 3:
        raise ValueError(
            f"'{name}' items must be windows of shape (n_chans, n_times), but got shape "
            f"{array.shape[1:]}; cut recordings into windows with braindecode's "
            "create_windows_from_events or create_fixed_length_windows."
        )
    if len(array) == 0:
        raise ValueError(f"'{name}' holds no window.")
    if groups is not None:
        _check_groups_keep_people(own_groups, groups, name)
    bad = _count_not_finite(array)
    if bad:
        raise ValueError(
            f"'{name}' holds NaN or infinite values in {bad} window(s) (of {len(array)})."
        )
    return Windows(
        X=array,
        y=own_y if y is None else _check_per_window(y, len(array), "label", "y"),
        sfreq=_check_sfreq(own_sfreq, sfreq, name),
        groups=own_groups
        if groups is None
        else _check_per_window(groups, len(array), "group", "groups"),
        ch_names=ch_names,
        n_items=n_items,
    )
