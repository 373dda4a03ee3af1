"""A pretraining corpus from a user's own recordings, and the shipped encoder's corpus."""

from __future__ import annotations

import glob
import logging
from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import Preprocessor, create_fixed_length_windows, preprocess

from .._checks import check_range

logger = logging.getLogger(__name__)

#: Extensions of the recordings that :func:`mne.io.read_raw` reads.
RECORDING_EXTENSIONS = (
    ".edf", ".bdf", ".gdf", ".fif", ".fif.gz", ".vhdr", ".set", ".cnt", ".mff", ".nxe",
)  # fmt: skip


def find_recordings(patterns):
    """Files matching a folder, a glob (``'data/**/*.edf'``) or a list of either.

    A folder stands for every recording below it with an extension of
    :data:`RECORDING_EXTENSIONS`; so does a glob, whose matches are filtered the
    same way (``'data/*'`` skips BrainVision's ``.vmrk`` and ``.eeg`` companions).
    A plain file path is taken as it is.

    Parameters
    ----------
    patterns : str | Path | list of them
        Folders, globs or files.

    Returns
    -------
    files : list of Path
        The recordings, sorted within each pattern, each listed once.

    Raises
    ------
    FileNotFoundError
        When a pattern matches no recording; the message names the pattern.
    """
    patterns = [patterns] if isinstance(patterns, str | Path) else list(patterns)
    if not patterns:
        raise FileNotFoundError("No recording pattern given: 'patterns' is empty.")
    files = []
    for pattern in map(str, patterns):
        if Path(pattern).is_dir():
            found = [p for p in sorted(Path(pattern).rglob("*")) if _is_recording(p)]
        elif glob.has_magic(pattern):
            found = [Path(p) for p in sorted(glob.glob(pattern, recursive=True))]
            found = [p for p in found if _is_recording(p)]
        else:
            found = [Path(pattern)] if Path(pattern).is_file() else []
        if not found:
            raise FileNotFoundError(
                f"No recording matches {pattern!r} (extensions: {', '.join(RECORDING_EXTENSIONS)})."
            )
        files += [p for p in found if p not in files]
    return files


def _is_recording(path):
    return path.is_file() and path.name.lower().endswith(RECORDING_EXTENSIONS)


def _band_pass(raw, l_freq, h_freq):
    """Band-pass; a low-pass at or above the recording's Nyquist frequency is left out.

    Such a recording holds nothing above ``h_freq`` anyway (it is upsampled later).
    """
    if h_freq is not None and h_freq >= raw.info["sfreq"] / 2:
        h_freq = None
    if l_freq is not None or h_freq is not None:
        raw.filter(l_freq=l_freq, h_freq=h_freq, verbose="error")
    return raw


def _notch(raw, freqs):
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
        Preprocessor(_band_pass, l_freq=l_freq, h_freq=h_freq, apply_on_array=False),
    ]
    if notch_freq is not None:
        steps.append(Preprocessor(_notch, freqs=notch_freq, apply_on_array=False))
    steps.append(Preprocessor("resample", sfreq=sfreq, apply_on_array=False, verbose="error"))
    return steps


def load_recordings(
    patterns,
    sfreq=100.0,
    window_seconds=30.0,
    stride_seconds=None,
    l_freq=0.3,
    h_freq=None,
    notch_freq=None,
    picks="eeg",
    n_jobs=1,
):
    """Any recordings MNE reads (EDF, BDF, FIF, BrainVision, EEGLAB...) as pretraining windows.

    Each file is read with :func:`mne.io.read_raw`, preprocessed as the paper does
    (:func:`recording_preprocessors`) through braindecode's ``preprocess``, and cut
    into fixed-length windows. Recordings shorter than one window are skipped with
    a warning. Hand the result to
    :class:`~braindecode_pars.datasets.SingleChannelWindows` (one random channel of a
    random crop per example) or write it once with :func:`write_window_store`.

    Parameters
    ----------
    patterns : str | Path | list
        Folders, globs (``'path/**/*.edf'``) or files.
    sfreq : float
        Sampling rate after resampling (the encoder's).
    window_seconds, stride_seconds : float
        Window length and stride (default: the length).
    l_freq, h_freq, notch_freq, picks
        See :func:`recording_preprocessors`.
    n_jobs : int
        Parallel jobs of the preprocessing.

    Returns
    -------
    windows : braindecode BaseConcatDataset
        Description column ``file``; no targets (pretraining windows).

    Examples
    --------
    >>> windows = load_recordings("my_study/**/*.edf", sfreq=100, window_seconds=10)
    ... # doctest: +SKIP
    """
    files = find_recordings(patterns)
    datasets = []
    for file in files:
        raw = mne.io.read_raw(file, preload=False, verbose="error")
        try:
            raw.pick(picks)
        except ValueError:
            logger.warning("Skipping %s: no channel matches picks=%r.", file, picks)
            continue
        datasets.append(RawDataset(raw, {"file": str(file)}))
    if not datasets:
        raise ValueError(f"No recording matching {patterns!r} has channels picks={picks!r}.")
    return windows_of(
        BaseConcatDataset(datasets),
        recording_preprocessors(sfreq, l_freq, h_freq, notch_freq, picks),
        sfreq,
        window_seconds,
        stride_seconds,
        n_jobs,
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


def shared_corpus(data_path, sfreq=100.0, window_seconds=30.0, stride_seconds=None, n_jobs=1):
    """The corpus of the shipped encoder: EEGMAT's 24 training subjects + Sleep-EDF.

    The 12 EEGMAT test subjects
    (:data:`~braindecode_pars.datasets.eegmat.EEGMAT_TEST_SUBJECTS`) and
    PhysioNet-MI are left out: the benchmarks test on them.

    Parameters
    ----------
    data_path : str | Path
        Folder holding ``eegmat/`` (PhysioNet EEGMAT EDF files) and
        ``sleep-edf-atm/`` (the single-channel ``*_edfm.mat`` segments).
    sfreq : float
        Sampling rate of the windows.
    window_seconds : float
        Window length.
    stride_seconds : float | None
        Stride of both parts; None: an eighth of a window for EEGMAT (so that its
        24 subjects weigh about as much as the nine nights) and no overlap for
        Sleep-EDF.
    n_jobs : int
        Parallel jobs of the preprocessing.

    Returns
    -------
    windows : braindecode BaseConcatDataset
        EEGMAT's 19-channel windows (in volts, 0.3-45 Hz) then Sleep-EDF's
        single-channel ones (in the files' digital units, 0.3-45 Hz); description
        column ``dataset`` (``"eegmat"`` or ``"sleep-edf"``) besides each reader's own.
        The units differ: the encoder's instance normalisation is scale-invariant.
    """
    from .eegmat import EEGMAT_TRAIN_SUBJECTS, eegmat_preprocessors, read_eegmat
    from .sleep_edf import read_sleep_edf_mat

    data_path = Path(data_path)
    eegmat = read_eegmat(data_path / "eegmat", EEGMAT_TRAIN_SUBJECTS)
    eegmat.set_description({"dataset": ["eegmat"] * len(eegmat.datasets)})
    preprocess(eegmat, eegmat_preprocessors(sfreq), n_jobs=n_jobs)
    sleep = read_sleep_edf_mat(data_path / "sleep-edf-atm")
    sleep.set_description({"dataset": ["sleep-edf"] * len(sleep.datasets)})
    steps = [
        Preprocessor(_band_pass, l_freq=0.3, h_freq=min(45.0, 0.45 * sfreq), apply_on_array=False)
    ]
    if abs(sfreq - sleep.datasets[0].raw.info["sfreq"]) > 1e-6:
        steps.append(Preprocessor("resample", sfreq=sfreq, apply_on_array=False, verbose="error"))
    preprocess(sleep, steps, n_jobs=n_jobs)
    eegmat_stride = window_seconds / 8 if stride_seconds is None else stride_seconds
    parts = [
        windows_of(eegmat, None, sfreq, window_seconds, eegmat_stride),
        windows_of(sleep, None, sfreq, window_seconds, stride_seconds),
    ]
    return BaseConcatDataset([ds for part in parts for ds in part.datasets])
