"""A pretraining corpus from a user's own recordings.

The shipped encoder's corpus is :func:`~braindecode_pars.datasets.corpus.shared_corpus`;
the preprocessing and the windowing are in :mod:`.windowing`.
"""

from __future__ import annotations

import glob
import logging
from pathlib import Path

import mne
from braindecode.datasets import BaseConcatDataset, RawDataset

from .windowing import recording_preprocessors, windows_of

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
