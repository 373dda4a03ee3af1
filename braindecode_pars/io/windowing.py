"""The paper's preprocessing, and cutting preprocessed recordings into windows.

Units: the recipes and loaders of the package give microvolts, the unit braindecode's
``EEGClassifier`` reads ``mne.Epochs`` in (:func:`microvolt_preprocessors` scales
first; :func:`~braindecode_pars.io.load_recordings`,
:func:`~braindecode_pars.datasets.load_eegmat` and ``load_bundled_eegmat`` end with
:func:`microvolt_step`). Band power and covariances are absolute, so one unit
throughout matters to the probe and the floors (the encoder alone would not mind).

Shared by the readers of recordings (:mod:`.recordings`, :mod:`.eegmat`, the
bundled EEGMAT of :mod:`.bundled`), the shipped encoder's corpus (:mod:`.corpus`) and the
paper's datasets (:mod:`.physionet_mi`, :mod:`.tuh`, :mod:`.ysyw`, :mod:`.eesm17`).
"""

from __future__ import annotations

import functools
import logging

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset
from braindecode.preprocessing import (
    Preprocessor,
    create_fixed_length_windows,
    create_windows_from_events,
    preprocess,
)

from braindecode_pars._util.checks import check_range
from braindecode_pars._util.logs import plural

logger = logging.getLogger(__name__)


def windows_info(windows):
    """The ``mne.Info`` of braindecode windows (their first recording): their channels.
    Their sampling rate is :func:`windows_sfreq`'s, read from every recording."""
    first = windows.datasets[0]
    return first.raw.info if getattr(first, "raw", None) is not None else first.windows.info


def _short_name(ds, k):
    """A recording in a message: its description's file (its name), path or subject, else
    its position."""
    description = getattr(ds, "description", None)
    for key in ("file", "path", "subject", "record"):
        if description is not None and key in description:
            value = str(description[key])
            return value.replace("\\", "/").rsplit("/", 1)[-1] if key != "subject" else value
    return f"recording {k}"


def _dataset_sfreq(ds):
    """The sampling rate of one braindecode dataset (of its Raw or its windows' Epochs),
    or None for a dataset of neither."""
    for attribute in ("raw", "windows"):
        signal = getattr(ds, attribute, None)
        if signal is not None:
            return float(signal.info["sfreq"])
    return None


def _window_lengths(ds):
    """The distinct numbers of samples of the windows of one braindecode dataset (its
    ``crop_inds``, or its windows' Epochs), sorted; empty where it has neither."""
    crops = getattr(ds, "crop_inds", None)
    if crops is not None and len(crops):
        crops = np.asarray(crops, dtype=np.int64)
        return sorted(set((crops[:, 2] - crops[:, 1]).tolist()))
    windows = getattr(ds, "windows", None)
    return [len(windows.times)] if windows is not None else []


def _recordings_of(windows, indices):
    """Positions of the recordings of braindecode ``windows`` that the windows at
    ``indices`` come from (all of them for None)."""
    if indices is None:
        return list(range(len(windows.datasets)))
    ends = np.asarray(windows.cumulative_sizes, dtype=np.int64)
    return np.unique(np.searchsorted(ends, np.asarray(indices), side="right")).tolist()


def recording_rates(windows, indices=None):
    """The sampling rates of braindecode ``windows``' recordings.

    Parameters
    ----------
    windows : BaseConcatDataset
        braindecode windows (or recordings).
    indices : array-like of int | None
        Windows whose recordings count (a ``Subset``'s); None: every recording.

    Returns
    -------
    rates : dict
        ``{rate in Hz: [position of each recording at that rate]}``, rates sorted
        (rates equal to 1e-6 Hz are one).
    """
    rates = {}
    for k in _recordings_of(windows, indices):
        rate = _dataset_sfreq(windows.datasets[k])
        if rate is not None:
            rates.setdefault(round(rate, 6), []).append(k)
    return dict(sorted(rates.items()))


def windows_sfreq(windows, indices=None, name="X"):
    """The one sampling rate of braindecode ``windows``, read from every recording.

    Every recording of a ``BaseConcatDataset`` carries its own rate (its Raw's or its
    Epochs' ``info["sfreq"]``); windows are read at one rate only where all of them
    have it. Recordings at several rates are refused: windows cut by a number of
    samples (``window_size_samples``) last different durations at different rates, and
    windows of one duration have different numbers of samples, so reading them all at
    one rate would misread the frequencies of some.

    Parameters
    ----------
    windows : BaseConcatDataset
        braindecode windows.
    indices : array-like of int | None
        The windows read (a ``Subset``'s indices): only their recordings count. None:
        every recording.
    name : str
        The parameter's name in the error message.

    Returns
    -------
    sfreq : float
        The recordings' rate in Hz.

    Raises
    ------
    ValueError
        For recordings at several rates, naming the rates, the recordings at each, their
        windows' lengths in samples and seconds, and the fix: resample the recordings
        to one rate before cutting windows (braindecode's ``Preprocessor("resample",
        sfreq=...)``), or, where the windows last the same at every rate,
        :func:`~braindecode_pars.io.resample_windows`.
    """
    rates = recording_rates(windows, indices)
    if not rates:
        return float(windows_info(windows)["sfreq"])
    if len(rates) == 1:
        return float(next(iter(rates)))
    raise ValueError(_rates_message(windows, rates, name))


def _rates_message(windows, rates, name):
    """Why windows of recordings at several ``rates`` (``{rate: [positions]}``) are not
    read at one rate, and the fix (:func:`windows_sfreq`)."""
    parts, durations = [], set()
    for rate, positions in rates.items():
        names = [_short_name(windows.datasets[k], k) for k in positions]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        lengths = sorted({n for k in positions for n in _window_lengths(windows.datasets[k])})
        durations.update(round(n / rate, 3) for n in lengths)
        if lengths:
            said = " or ".join(f"{n} samples ({n / rate:g} s)" for n in lengths[:3])
            lengths = f", windows of {said}"
        else:
            lengths = ""
        parts.append(f"{rate:g} Hz: {plural(len(positions), 'recording')} ({shown}){lengths}")
    top = max(rates)
    fix = (
        "Bring the recordings to one rate before cutting windows: braindecode's "
        f"preprocess(recordings, [Preprocessor('resample', sfreq={top:g})]), then "
        "create_windows_from_events or create_fixed_length_windows, whose "
        "window_size_samples then counts samples at that one rate (load_recordings and "
        "load_labelled_recordings resample to their 'sfreq' before windowing)."
    )
    if len(durations) == 1:
        fix += (
            f" As the windows last {next(iter(durations)):g} s at every rate, "
            f"braindecode_pars.io.resample_windows({name}, None, {top:g}) also brings these "
            f"windows to {top:g} Hz."
        )
    elif durations:
        fix += (
            " Windows cut by a number of samples last different durations at different "
            f"rates (here {' and '.join(f'{d:g}' for d in sorted(durations))} s): resampling "
            "the windows would not give them one length."
        )
    return (
        f"'{name}' windows come from recordings at {len(rates)} sampling rates, but "
        f"windows are read at one rate: {'; '.join(parts)}. {fix}"
    )


def _band_pass(raw, l_freq, h_freq):
    """Band-pass; a low-pass at or above the recording's Nyquist frequency is left out.

    Such a recording holds nothing above ``h_freq`` anyway (it is upsampled later).
    """
    if h_freq is not None and h_freq >= raw.info["sfreq"] / 2:
        h_freq = None
    if l_freq is not None or h_freq is not None:
        raw.filter(l_freq=l_freq, h_freq=h_freq, verbose="error")
    return raw


def notch(raw, freqs):
    """Notch ``freqs`` that lie below the recording's Nyquist frequency."""
    freqs = [f for f in np.atleast_1d(freqs).tolist() if f < raw.info["sfreq"] / 2]
    if freqs:
        raw.notch_filter(freqs=freqs, verbose="error")
    return raw


def recording_preprocessors(sfreq=100.0, l_freq=0.3, h_freq=None, notch_freq=None, picks="eeg"):
    """The paper's preprocessing (appendix A.3) as braindecode preprocessors.

    Pick the EEG channels, load, band-pass ``l_freq`` to ``h_freq``, notch
    ``notch_freq``, resample to ``sfreq``; MNE prints nothing. The values keep the
    recordings' unit (volts, as MNE reads EEG): the loaders append
    :func:`microvolt_step`.

    Parameters
    ----------
    sfreq : float
        Sampling rate after resampling.
    l_freq : float | None
        High-pass edge in Hz (0.3 Hz, the paper's).
    h_freq : float | None
        Low-pass edge in Hz; None takes 75 Hz (the paper's) or 45 % of ``sfreq`` when
        that is lower. Left out for a recording whose Nyquist frequency lies below it.
    notch_freq : float | list of float | None
        Power-line frequency (50 or 60 Hz) to notch, or None.
    picks : str | list
        Channels to keep (MNE's ``picks``).

    Returns
    -------
    preprocessors : list of braindecode Preprocessor
    """
    check_range("sfreq", sfreq, 0, float("inf"), low_open=True)
    h_freq = min(75.0, 0.45 * sfreq) if h_freq is None else h_freq
    steps = [
        Preprocessor("pick", picks=picks, apply_on_array=False),
        Preprocessor("load_data", apply_on_array=False, verbose="error"),
        Preprocessor(_band_pass, l_freq=l_freq, h_freq=h_freq, apply_on_array=False),
    ]
    if notch_freq is not None:
        steps.append(Preprocessor(notch, freqs=notch_freq, apply_on_array=False))
    steps.append(Preprocessor("resample", sfreq=sfreq, apply_on_array=False, verbose="error"))
    return steps


def _volts_to_microvolts(data):
    """Scale EEG from volts (MNE's unit) to microvolts."""
    return data * 1e6


def microvolt_step():
    """The preprocessor that scales recordings from volts (MNE's unit) to microvolts."""
    return Preprocessor(_volts_to_microvolts, apply_on_array=True)


def microvolt_preprocessors(sfreq=None, l_freq=0.3, h_freq=75.0, notch_freq=None):
    """The paper's preprocessing of its datasets (appendix A.3) as braindecode Preprocessors.

    Scale volts to microvolts, resample to ``sfreq``, band-pass ``l_freq`` to
    ``h_freq`` (MNE's ``filter``), notch ``notch_freq``; MNE prints nothing.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate after resampling; None keeps the recordings' rate.
    l_freq, h_freq : float | None
        Band-pass edges in Hz (paper: 0.3-75 Hz); None leaves that side open.
    notch_freq : float | None
        Power-line frequency (50 or 60 Hz) to notch, or None. Left out at an ``sfreq``
        whose Nyquist frequency is at or below it: resampling's low-pass has removed
        the line.

    Returns
    -------
    preprocessors : list of braindecode Preprocessor
    """
    steps = [microvolt_step()]
    if sfreq is not None:
        steps.append(Preprocessor("resample", sfreq=sfreq, apply_on_array=False))
    steps.append(
        Preprocessor("filter", l_freq=l_freq, h_freq=h_freq, apply_on_array=False, verbose="error")
    )
    if notch_freq is not None and (sfreq is None or notch_freq < sfreq / 2):
        steps.append(
            Preprocessor("notch_filter", freqs=[notch_freq], apply_on_array=False, verbose="error")
        )
    return steps


def event_windows(recordings, mapping, window_seconds):
    """Windows of ``window_seconds`` from the onset of every event named in ``mapping``.

    One per event for events shorter than two windows (PhysioNet-MI's 4.1-s trials in
    4-s windows, scored 30-s sleep epochs in 30-s windows).

    Parameters
    ----------
    recordings : braindecode BaseConcatDataset
        Preprocessed recordings whose annotations hold the events (trials, scored
        sleep epochs).
    mapping : dict of str -> int
        Annotation names to classes; other annotations ("rest", "undefined") give no
        window.
    """
    size = int(round(window_seconds * recordings.datasets[0].raw.info["sfreq"]))
    return create_windows_from_events(
        recordings,
        trial_start_offset_samples=0,
        trial_stop_offset_samples=0,
        window_size_samples=size,
        window_stride_samples=size,
        on_last_window="drop",
        mapping=mapping,
        on_missing="ignore",
        preload=True,
    )


def _window_size(window_seconds, stride_seconds, sfreq):
    """Window length and stride in samples, the arguments checked."""
    check_range("window_seconds", window_seconds, 0, float("inf"), low_open=True)
    if stride_seconds is not None:
        check_range("stride_seconds", stride_seconds, 0, float("inf"), low_open=True)
    size = int(round(window_seconds * sfreq))
    stride = size if stride_seconds is None else max(1, int(round(stride_seconds * sfreq)))
    return size, stride


def _long_enough(datasets, size, window_seconds):
    """The recordings of at least ``size`` samples; a warning names each one left out."""
    kept = []
    for ds in datasets:
        if ds.raw.n_times >= size:
            kept.append(ds)
        else:
            logger.warning(
                "Skipping %s: %d samples, shorter than one %g-s window (%d samples).",
                ds.description.to_dict(),
                ds.raw.n_times,
                window_seconds,
                size,
            )
    return kept


def _fixed_windows(datasets, size, stride=None, preload=True, **options):
    """Windows of ``size`` samples every ``stride`` samples (None: ``size``, no overlap) of
    ``datasets`` (recordings), loaded in memory unless ``preload=False``; the last window
    of a recording is dropped where it would not fit. ``options`` go to braindecode's
    ``create_fixed_length_windows``."""
    return create_fixed_length_windows(
        BaseConcatDataset(datasets),
        window_size_samples=size,
        window_stride_samples=size if stride is None else stride,
        on_last_window="drop",
        preload=preload,
        **options,
    )


def windows_of(dataset, preprocessors, sfreq, window_seconds, stride_seconds=None, n_jobs=1):
    """Preprocess raw recordings and cut them into windows, skipping too-short ones.

    A recording shorter than one window (after preprocessing) is left out with a
    logged warning; if none is long enough, ``ValueError``. Every recording is held
    in memory; :class:`RecordingStream` with :func:`fixed_length_windower` does the
    same one recording at a time.
    """
    size, stride = _window_size(window_seconds, stride_seconds, sfreq)
    if preprocessors:
        preprocess(dataset, preprocessors, n_jobs=n_jobs)
    kept = _long_enough(dataset.datasets, size, window_seconds)
    if not kept:
        raise ValueError(
            f"No recording is at least window_seconds={window_seconds} s long "
            f"({size} samples at {sfreq} Hz)."
        )
    return _fixed_windows(kept, size, stride)


def _fixed_length(recording, preprocessors, sfreq, window_seconds, stride_seconds):
    if preprocessors:
        with mne.use_log_level("error"):
            preprocess(recording, preprocessors)
    sfreq = recording.datasets[0].raw.info["sfreq"] if sfreq is None else sfreq
    size, stride = _window_size(window_seconds, stride_seconds, sfreq)
    kept = _long_enough(recording.datasets, size, window_seconds)
    if not kept:
        return None
    return _fixed_windows(kept, size, stride)


def fixed_length_windower(preprocessors, sfreq, window_seconds, stride_seconds=None):
    """The windower of :class:`RecordingStream` that :func:`windows_of` applies to all at once.

    Preprocess one recording, then cut it into fixed-length windows; a recording
    shorter than one window is skipped with a logged warning. ``sfreq`` is the rate
    after preprocessing; None: each recording's own.
    """
    _window_size(window_seconds, stride_seconds, 1.0 if sfreq is None else sfreq)  # checks
    return functools.partial(
        _fixed_length,
        preprocessors=preprocessors,
        sfreq=sfreq,
        window_seconds=window_seconds,
        stride_seconds=stride_seconds,
    )


def _event_windows(recording, preprocessors, mapping, window_seconds):
    with mne.use_log_level("error"):
        preprocess(recording, preprocessors)
    return event_windows(recording, mapping, window_seconds)


def event_windower(preprocessors, mapping, window_seconds):
    """The windower of :class:`RecordingStream` that :func:`event_windows` applies after
    preprocessing (labelled windows of scored events)."""
    return functools.partial(
        _event_windows, preprocessors=preprocessors, mapping=mapping, window_seconds=window_seconds
    )


class RecordingStream:
    """Recordings read, preprocessed and cut into windows one at a time, as it is iterated.

    Iterating yields the windows of one recording at a time (a braindecode
    ``BaseConcatDataset`` with one windows dataset); the recording is read only then,
    so a consumer that keeps nothing of it, such as :func:`write_window_store`, holds
    one recording in memory whatever the number of recordings. The stream can be
    iterated again (every recording is then read again). The readers
    (:func:`load_recordings`, ``load_tueg``, ``_load_ysyw_pretraining`` and
    ``pretraining_corpus`` with ``lazy=True``) build it; streams add up with ``+``.

    Parameters
    ----------
    readers : list of callable
        One per recording: called without arguments, returns the recording as a
        braindecode ``RawDataset`` (with its description), or None to skip it.
    windower : callable
        Turns one recording (a ``BaseConcatDataset`` of one ``RawDataset``) into its
        windows, or None to skip it (e.g. :func:`fixed_length_windower`).
    description : dict | None
        Description columns set on every recording (e.g. ``{"source": "tueg"}``).

    Examples
    --------
    >>> stream = load_recordings("my_study/**/*.edf", lazy=True)  # doctest: +SKIP
    >>> write_window_store(stream, "store/")  # doctest: +SKIP
    """

    def __init__(self, readers, windower, description=None, skipped=()):
        self._parts = [(tuple(readers), windower, dict(description or {}))]
        #: ``(recording, reason)`` of the recordings the reader left out before the
        #: stream (unreadable headers), which a store's info lists with its own.
        self.skipped = list(skipped)

    def __len__(self):
        """The number of recordings (some may yield no window)."""
        return sum(len(readers) for readers, _, _ in self._parts)

    def __add__(self, other):
        if not isinstance(other, RecordingStream):
            return NotImplemented
        stream = RecordingStream((), None, skipped=self.skipped + other.skipped)
        stream._parts = [part for part in self._parts + other._parts if part[0]]
        return stream

    def with_description(self, description):
        """The same stream, with ``description`` (a dict of columns) set on every recording."""
        stream = RecordingStream((), None, skipped=self.skipped)
        stream._parts = [(r, w, {**d, **description}) for r, w, d in self._parts]
        return stream

    def tasks(self):
        """Every recording as a ``(read, windower, description)`` triple, in order, whose
        windows are ``RecordingStream.task_windows(*task)``: what worker processes take
        (picklable when the readers and the windower are)."""
        return [(read, w, d) for readers, w, d in self._parts for read in readers]

    def __iter__(self):
        for readers, windower, description in self._parts:
            for read in readers:
                windows = self.task_windows(read, windower, description)
                if windows is not None:
                    yield windows
                del windows  # let the recording go before the next one is read

    @staticmethod
    def task_windows(read, windower, description):
        """The windows of one of :meth:`tasks` (its ``read``, ``windower`` and
        ``description``), None when it has none: what a worker process computes."""
        recording = read()
        if recording is None:
            return None
        if description:
            recording.set_description(description, overwrite=True)
        windows = windower(BaseConcatDataset([recording]))
        return windows if windows is not None and len(windows.datasets) else None

    def __repr__(self):
        return f"RecordingStream({len(self)} recordings, read one at a time)"
