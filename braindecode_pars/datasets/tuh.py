"""Temple University Hospital EEG corpora: TUEG (pretraining), TUAB and TUSZ (paper A.3).

The readers walk the folder layouts the corpora are published in:

- TUEG v2: ``tuh_eeg/v2.0.0/edf/000/aaaaaaaa/s001_2015_12_30/01_tcp_ar/aaaaaaaa_s001_t000.edf``
- TUAB v3.0.1: ``tuh_eeg_abnormal/v3.0.1/edf/{train,eval}/{normal,abnormal}/01_tcp_ar/
  aaaaaaav_s004_t000.edf``
- TUSZ v2.0.3: ``tuh_eeg_seizure/v2.0.3/edf/{train,dev,eval}/aaaaaaac/s001_2002/02_tcp_le/
  aaaaaaac_s001_t000.edf``, each with its ``.csv_bi`` term-based seizure annotation.

The subject is the first token of the file name. Channels are the paper's common
10-20 set, read from TUH's names (``EEG FP1-REF``, ``EEG FP1-LE``) whatever the
reference montage; preprocessing is the paper's: microvolts, 200 Hz, 0.3-75 Hz
band-pass, 60 Hz notch. Nothing is downloaded: the corpora are distributed on
request by their authors (https://isip.piconepress.com/projects/nedc/html/tuh_eeg/).

TUEG holds about 70,000 recordings: ``load_tueg(lazy=True)`` gives a stream that
reads, preprocesses and windows one at a time, for :func:`write_window_store`;
``load_tuab`` and ``load_tusz`` take a ``cache_dir`` where each recording's windows
are written once (float32) and read back lazily.
"""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path

import mne
import numpy as np
import pandas as pd
from braindecode.datasets import BaseConcatDataset, RawDataset

from braindecode_pars._util.checks import check_option, check_range
from braindecode_pars.datasets._cache import _cached_windows
from braindecode_pars.io.windowing import (
    RecordingStream,
    fixed_length_windower,
    microvolt_preprocessors,
    windows_of,
)

logger = logging.getLogger(__name__)

#: The 19 common 10-20 channels (paper A.3: TUEG and TUSZ).
TUH_CHANNELS_19 = (
    "Fp1",
    "Fp2",
    "F3",
    "F4",
    "F7",
    "F8",
    "FZ",
    "C3",
    "C4",
    "CZ",
    "P3",
    "P4",
    "PZ",
    "O1",
    "O2",
    "T3",
    "T4",
    "T5",
    "T6",
)
#: The 21 channels of TUAB (paper A.3): the 19 and the ear electrodes.
TUH_CHANNELS_21 = TUH_CHANNELS_19 + ("A1", "A2")

_TUH_NAME = re.compile(r"^EEG\s+(?P<name>[A-Z0-9]+)-(REF|LE)$", re.IGNORECASE)
_FILE = re.compile(r"^(?P<subject>[a-z0-9]+)_s(?P<session>\d+)_t(?P<segment>\d+)\.edf$")


def _paper_name(tuh_name):
    """'EEG FP1-REF' -> 'Fp1', 'EEG FZ-LE' -> 'FZ' (the paper's spelling); else None."""
    match = _TUH_NAME.match(tuh_name.strip())
    if match is None:
        return None
    name = match.group("name").upper()
    return {"FP1": "Fp1", "FP2": "Fp2"}.get(name, name)


def read_tuh_edf(fname, channels=TUH_CHANNELS_19, preload=False):
    """Read one TUH EDF file and keep ``channels``, renamed and in that order.

    Raises
    ------
    ValueError
        If a channel is missing, naming the file and the missing channels.
    """
    raw = mne.io.read_raw_edf(fname, preload=preload, verbose="error")
    names = {}
    for ch in raw.ch_names:
        name = _paper_name(ch)
        if name in channels and name not in names.values():
            names[ch] = name
    missing = [c for c in channels if c not in names.values()]
    if missing:
        raise ValueError(f"'{fname}' lacks the channels {missing}.")
    raw.pick(list(names)).rename_channels(names)
    raw.reorder_channels(list(channels))
    raw.set_channel_types(dict.fromkeys(channels, "eeg"))
    return raw


def _parse_tuh_file_name(fname):
    """subject, session and segment from ``aaaaaaav_s004_t000.edf``."""
    match = _FILE.match(Path(fname).name)
    if match is None:
        raise ValueError(f"'{fname}' is not named as TUH files are (subject_sNNN_tNNN.edf).")
    return match.group("subject"), int(match.group("session")), int(match.group("segment"))


def _recording(fname, channels, target_name=None, **description):
    """One TUH file as a braindecode RawDataset described by subject, session, segment."""
    subject, session, segment = _parse_tuh_file_name(fname)
    description = dict(
        subject=subject, session=session, segment=segment, **description, path=str(fname)
    )
    return RawDataset(
        read_tuh_edf(fname, channels), description=description, target_name=target_name
    )


def _tuh_preprocessors(sfreq=200.0, l_freq=0.3, h_freq=75.0, notch_freq=60.0):
    """The paper's TUH preprocessing: microvolts, resample, band-pass, notch."""
    return microvolt_preprocessors(sfreq, l_freq, h_freq, notch_freq)


def _edf_files(root, what):
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"The {what} folder '{root}' does not exist.")
    files = sorted(root.rglob("*.edf"))
    if not files:
        raise FileNotFoundError(f"No .edf file under '{root}' ({what}).")
    return files


def _windows(datasets, channels, window_seconds, sfreq, n_jobs):
    ds = BaseConcatDataset(datasets)
    with mne.use_log_level("error"):
        return windows_of(ds, _tuh_preprocessors(sfreq), sfreq, window_seconds, n_jobs=n_jobs)


def _stream(readers, window_seconds, sfreq, windower=None):
    """The recordings of ``readers`` read, preprocessed and windowed one at a time."""
    windower = windower or fixed_length_windower(_tuh_preprocessors(sfreq), sfreq, window_seconds)
    return RecordingStream(readers, windower)


def load_tuab(
    path,
    splits=("train", "eval"),
    window_seconds=30.0,
    sfreq=200.0,
    max_files=None,
    n_jobs=1,
    cache_dir=None,
):
    """TUAB v3.0.1: abnormal-EEG detection windows (paper A.3).

    21 channels, 200 Hz, 0.3-75 Hz band-pass, 60 Hz notch, non-overlapping
    ``window_seconds`` windows; every window of a recording carries the recording's
    label (0 normal, 1 abnormal). The description holds ``subject``, ``session``,
    ``segment``, ``split`` (the official train/eval) and ``pathological``; use
    :func:`tuh_subject_split` for the paper's 80/20 train/valid split by patient.

    Parameters
    ----------
    path : str | Path
        The folder holding ``train/`` and ``eval/`` (``.../v3.0.1/edf``).
    splits : tuple of {"train", "eval"}
    window_seconds, sfreq : float
        Paper: 30 s (the fine-tuning windows) and 200 Hz.
    max_files : int | None
        Read at most this many files per split and label (for quick runs).
    n_jobs : int
        Parallel jobs of the preprocessing (without ``cache_dir``).
    cache_dir : str | Path | None
        None: every recording is read and held in memory. A folder: the recordings
        are read, preprocessed, windowed and written there one at a time (float32),
        and the windows read back lazily from disk; a later call with the same
        settings reads the folder as it is.
    """
    for split in splits:
        check_option("splits", split, ("train", "eval"))
    readers = []
    for split in splits:
        for label, pathological in (("normal", 0), ("abnormal", 1)):
            folder = Path(path) / split / label
            files = _edf_files(folder, f"TUAB {split}/{label}")[:max_files]
            readers += [
                functools.partial(
                    _recording,
                    f,
                    TUH_CHANNELS_21,
                    "pathological",
                    split=split,
                    pathological=pathological,
                )
                for f in files
            ]
    if cache_dir is not None:
        settings = {
            "reader": "load_tuab",
            "files": [str(Path(r.args[0]).resolve()) for r in readers],
            "window_seconds": window_seconds,
            "sfreq": sfreq,
        }
        return _cached_windows(_stream(readers, window_seconds, sfreq), cache_dir, settings)
    return _windows([read() for read in readers], TUH_CHANNELS_21, window_seconds, sfreq, n_jobs)


def _read_csv_bi(fname):
    """Seizure intervals of a TUSZ ``.csv_bi`` file: (n, 2) start and stop, in seconds."""
    table = pd.read_csv(fname, comment="#", skipinitialspace=True)
    expected = {"channel", "start_time", "stop_time", "label"}
    if not expected <= set(table.columns):
        raise ValueError(f"'{fname}' lacks the columns {sorted(expected - set(table.columns))}.")
    seiz = table[table["label"].str.lower() == "seiz"]
    return seiz[["start_time", "stop_time"]].to_numpy(dtype=float).reshape(-1, 2)


def _seizure_labels(starts, stops, intervals, min_overlap_seconds=0.0):
    """1 for windows [start, stop) (seconds) overlapping a seizure by more than the minimum."""
    starts, stops = np.asarray(starts, float)[:, None], np.asarray(stops, float)[:, None]
    if len(intervals) == 0:
        return np.zeros(len(starts), dtype=np.int64)
    overlap = np.minimum(stops, intervals[:, 1]) - np.maximum(starts, intervals[:, 0])
    return (overlap.max(axis=1) > min_overlap_seconds).astype(np.int64)


def load_tusz(
    path,
    splits=("train", "dev", "eval"),
    window_seconds=30.0,
    sfreq=200.0,
    min_overlap_seconds=0.0,
    max_files=None,
    n_jobs=1,
    cache_dir=None,
):
    """TUSZ v2.0.3: seizure-detection windows labelled from the ``.csv_bi`` files.

    19 channels, preprocessed and cut into windows as :func:`load_tuab` does. A window
    is labelled 1 (seizure) when it overlaps a ``seiz`` interval of the term-based
    annotation by more than ``min_overlap_seconds`` (the paper does not say; any
    overlap by default), else 0.
    The description holds ``subject``, ``session``, ``segment`` and ``split``
    (official train/dev/eval; the paper's test set is eval).

    Parameters
    ----------
    path : str | Path
        The folder holding ``train/``, ``dev/`` and ``eval/`` (``.../v2.0.3/edf``).
    cache_dir : str | Path | None
        As for :func:`load_tuab`: a folder where each recording's labelled windows
        are written once and read back lazily.
    """
    for split in splits:
        check_option("splits", split, ("train", "dev", "eval"))
    check_range("min_overlap_seconds", min_overlap_seconds, 0, window_seconds, high_open=True)
    files = []
    for split in splits:
        for fname in _edf_files(Path(path) / split, f"TUSZ {split}")[:max_files]:
            annotation = fname.with_suffix(".csv_bi")
            if not annotation.is_file():
                raise FileNotFoundError(f"'{fname}' has no annotation file '{annotation}'.")
            files.append((fname, split))
    readers = [functools.partial(_recording, f, TUH_CHANNELS_19, split=split) for f, split in files]
    if cache_dir is not None:
        windower = functools.partial(
            _seizure_windows,
            windower=fixed_length_windower(_tuh_preprocessors(sfreq), sfreq, window_seconds),
            min_overlap_seconds=min_overlap_seconds,
        )
        settings = {
            "reader": "load_tusz",
            "files": [str(f.resolve()) for f, _ in files],
            "window_seconds": window_seconds,
            "sfreq": sfreq,
            "min_overlap_seconds": min_overlap_seconds,
        }
        stream = _stream(readers, window_seconds, sfreq, windower)
        return _cached_windows(stream, cache_dir, settings)
    windows = _windows([read() for read in readers], TUH_CHANNELS_19, window_seconds, sfreq, n_jobs)
    _label_seizures(windows, min_overlap_seconds)
    return windows


def _label_seizures(windows, min_overlap_seconds):
    """Set every window's target from its recording's ``.csv_bi`` (description ``path``)."""
    for ds in windows.datasets:
        seiz = _read_csv_bi(Path(ds.description["path"]).with_suffix(".csv_bi"))
        fs = ds.raw.info["sfreq"]
        starts = ds.metadata["i_start_in_trial"].to_numpy() / fs
        stops = ds.metadata["i_stop_in_trial"].to_numpy() / fs
        labels = _seizure_labels(starts, stops, seiz, min_overlap_seconds)
        ds.metadata["target"] = labels
        ds.y = labels.tolist()
    return windows


def _seizure_windows(recording, windower, min_overlap_seconds):
    """The windower of a TUSZ stream: windows of one recording, labelled."""
    windows = windower(recording)
    return None if windows is None else _label_seizures(windows, min_overlap_seconds)


def _tuh_subjects(path):
    """Subjects (file-name prefixes) of every EDF file under ``path``."""
    return sorted({_parse_tuh_file_name(f)[0] for f in _edf_files(path, "TUH")})


def load_tueg(
    path,
    exclude_subjects=(),
    channels=TUH_CHANNELS_19,
    window_seconds=30.0,
    sfreq=200.0,
    max_files=None,
    n_jobs=1,
    lazy=False,
):
    """TUEG recordings for pretraining, without the patients of the fine-tuning sets.

    Paper A.3: "we discard all TUAB/TUSZ patients from the pretraining"; pass
    ``exclude_subjects=_tuh_subjects(tuab_path) + _tuh_subjects(tusz_path)``.
    19 channels, 200 Hz, 0.3-75 Hz band-pass, 60 Hz notch, ``window_seconds``
    windows (the single-channel view draws crops and channels from them).

    Parameters
    ----------
    lazy : bool
        False: every recording is read and windowed now, in memory. True: a
        :class:`~braindecode_pars.io.windowing.RecordingStream` that reads,
        preprocesses and windows one recording at a time as it is iterated, for
        :func:`write_window_store` (the way to a store of all of TUEG).
    """
    excluded = set(exclude_subjects)
    files, skipped = [], 0
    for fname in _edf_files(path, "TUEG"):
        if _parse_tuh_file_name(fname)[0] in excluded:
            skipped += 1
            continue
        if max_files is not None and len(files) >= max_files:
            break
        files.append(fname)
    logger.info("TUEG: %d recordings, %d left out as fine-tuning patients.", len(files), skipped)
    if not files:
        raise ValueError(f"Every TUEG recording under '{path}' belongs to an excluded subject.")
    if lazy:
        readers = [functools.partial(_recording, f, channels) for f in files]
        return _stream(readers, window_seconds, sfreq)
    datasets = [_recording(f, channels) for f in files]
    return _windows(datasets, channels, window_seconds, sfreq, n_jobs)


def tuh_subject_split(windows, valid_fraction=0.2, random_state=0):
    """The paper's split: official test set, the rest 80/20 train/valid by patient.

    Returns
    -------
    split : dict of str -> braindecode BaseConcatDataset
        ``train``, ``valid`` and ``test`` (the ``eval`` recordings); no patient is in
        two of them.
    """
    check_range("valid_fraction", valid_fraction, 0, 1, low_open=True, high_open=True)
    description = windows.description
    test = description["split"] == "eval"
    train_subjects = np.array(sorted(set(description.loc[~test, "subject"])))
    overlap = set(train_subjects) & set(description.loc[test, "subject"])
    if overlap:
        raise ValueError(f"Subjects {sorted(overlap)[:5]} are in both the training and eval sets.")
    rng = np.random.default_rng(random_state)
    n_valid = max(1, int(round(valid_fraction * len(train_subjects))))
    valid_subjects = set(rng.choice(train_subjects, size=n_valid, replace=False))
    role = np.where(
        test, "test", np.where(description["subject"].isin(valid_subjects), "valid", "train")
    )
    by = {name: np.flatnonzero(role == name).tolist() for name in ("train", "valid", "test")}
    return dict(windows.split({name: rows for name, rows in by.items() if rows}))
