"""The paper's preprocessing, and cutting preprocessed recordings into windows.

Shared by the readers of recordings (:mod:`.recordings`, :mod:`.eegmat`,
:mod:`.bundled_eegmat`), the shipped encoder's corpus (:mod:`.corpus`) and the
paper's datasets (:mod:`.physionet_mi`, :mod:`.tuh`, :mod:`.ysyw`, :mod:`.eesm17`).
"""

from __future__ import annotations

import logging

import numpy as np
from braindecode.datasets import BaseConcatDataset
from braindecode.preprocessing import (
    Preprocessor,
    create_fixed_length_windows,
    create_windows_from_events,
    preprocess,
)

from .._checks import check_range

logger = logging.getLogger(__name__)


def band_pass(raw, l_freq, h_freq):
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
    ``notch_freq``, resample to ``sfreq``; MNE prints nothing.

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
        Preprocessor(band_pass, l_freq=l_freq, h_freq=h_freq, apply_on_array=False),
    ]
    if notch_freq is not None:
        steps.append(Preprocessor(notch, freqs=notch_freq, apply_on_array=False))
    steps.append(Preprocessor("resample", sfreq=sfreq, apply_on_array=False, verbose="error"))
    return steps


def volts_to_microvolts(data):
    """Scale EEG from volts (MNE's unit) to microvolts."""
    return data * 1e6


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
    steps = [Preprocessor(volts_to_microvolts, apply_on_array=True)]
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


def windows_of(dataset, preprocessors, sfreq, window_seconds, stride_seconds=None, n_jobs=1):
    """Preprocess raw recordings and cut them into windows, skipping too-short ones.

    A recording shorter than one window (after preprocessing) is left out with a
    logged warning; if none is long enough, ``ValueError``.
    """
    check_range("window_seconds", window_seconds, 0, float("inf"), low_open=True)
    if stride_seconds is not None:
        check_range("stride_seconds", stride_seconds, 0, float("inf"), low_open=True)
    if preprocessors:
        preprocess(dataset, preprocessors, n_jobs=n_jobs)
    size = int(round(window_seconds * sfreq))
    stride = size if stride_seconds is None else max(1, int(round(stride_seconds * sfreq)))
    kept = []
    for ds in dataset.datasets:
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
    if not kept:
        raise ValueError(
            f"No recording is at least window_seconds={window_seconds} s long "
            f"({size} samples at {sfreq} Hz)."
        )
    return create_fixed_length_windows(
        BaseConcatDataset(kept),
        window_size_samples=size,
        window_stride_samples=stride,
        on_last_window="drop",
        preload=True,
    )
