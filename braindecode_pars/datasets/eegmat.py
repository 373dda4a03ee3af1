"""EEG During Mental Arithmetic Tasks (PhysioNet EEGMAT 1.0.0) as braindecode datasets.

36 subjects, each with ``SubjectNN_1.edf`` (resting EEG before the task, 182 s) and
``SubjectNN_2.edf`` (EEG during serial subtraction, 62 s), 19 EEG channels of the
10-20 system at 500 Hz (old names T3/T4/T5/T6), plus ``subject-info.csv`` (age,
gender, number of subtractions, count quality). The recordings are artifact-free
segments, already notch-filtered at 50 Hz by the authors.

Tasks: rest vs mental arithmetic across subjects (leave subjects out), and the
recordings as pretraining EEG. Cite Zyma et al., Data 4(1):14, 2019, and
Goldberger et al., Circulation 101(23):e215-e220, 2000 (Open Data Commons
Attribution License v1.0).
"""

from __future__ import annotations

import csv
import logging
import numbers
from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset, RawDataset

from braindecode_pars._util.checks import check_range
from braindecode_pars.io.windowing import microvolt_step, recording_preprocessors, windows_of

logger = logging.getLogger(__name__)

#: The 19 EEG channels, in the files' order, without their ``EEG `` prefix.
EEGMAT_CHANNELS = (
    "Fp1", "Fp2", "F3", "F4", "F7", "F8", "T3", "T4", "C3", "C4",
    "T5", "T6", "P3", "P4", "O1", "O2", "Fz", "Cz", "Pz",
)  # fmt: skip
#: Class codes of the rest vs mental arithmetic task.
EEGMAT_CLASSES = {"rest": 0, "arithmetic": 1}
#: The 12 subjects the development task's test split, the low-label benchmark and the
#: main job test on. They are never used for pretraining or training (a fixed draw;
#: 4 of them are bad counters, 6 of the other 24). The defaults of PARSClassifier
#: are chosen on the selection split (:data:`EEGMAT_SELECTION_SUBJECTS`); each default
#: and its evidence: :doc:`/benchmarks/defaults`.
EEGMAT_TEST_SUBJECTS = (1, 4, 7, 9, 13, 16, 19, 22, 26, 29, 32, 35)
#: The other 24: the pool of labelled subjects and the pretraining recordings.
EEGMAT_TRAIN_SUBJECTS = tuple(s for s in range(36) if s not in EEGMAT_TEST_SUBJECTS)
#: The EEGMAT subjects whose scores choose defaults (3 bad counters, 9 good): drawn from
#: the other 24 with ``numpy.random.default_rng(2026)``.
EEGMAT_SELECTION_SUBJECTS = (0, 2, 3, 6, 10, 12, 15, 17, 18, 24, 25, 31)
#: The EEGMAT subjects no development split scores: pretraining data of selection
#: encoders (3 bad counters, 9 good).
EEGMAT_POOL_SUBJECTS = tuple(s for s in EEGMAT_TRAIN_SUBJECTS if s not in EEGMAT_SELECTION_SUBJECTS)


def _eegmat_file(path, subject, session):
    """``<path>/SubjectNN_<session>.edf`` (session 1: rest, 2: arithmetic)."""
    return Path(path) / f"Subject{subject:02d}_{session}.edf"


def _read_eegmat_info(path):
    """``subject-info.csv`` as a dict: subject number -> {age, gender, count_quality, ...}."""
    info_file = Path(path) / "subject-info.csv"
    if not info_file.is_file():
        return {}
    out = {}
    with open(info_file, newline="") as f:
        for row in csv.DictReader(f):
            subject = int(row["Subject"].replace("Subject", ""))
            out[subject] = {
                "age": int(row["Age"]),
                "gender": row["Gender"],
                "n_subtractions": float(row["Number of subtractions"]),
                "count_quality": int(row["Count quality"]),
            }
    return out


def _check_subjects(subjects):
    """``subjects`` as a list of ints in 0..35, or a clear error."""
    subjects = np.atleast_1d(np.asarray(subjects, dtype=object)).tolist()
    for s in subjects:
        if isinstance(s, bool) or not isinstance(s, numbers.Integral):
            raise TypeError(
                f"EEGMAT 'subjects' must be ints in 0..35, but got {type(s).__name__} ({s!r})."
            )
    bad = [int(s) for s in subjects if not 0 <= s <= 35]
    if bad:
        raise ValueError(f"EEGMAT 'subjects' must lie in 0..35, but got {bad}.")
    if not subjects:
        raise ValueError("EEGMAT 'subjects' must name at least one subject, but got none.")
    return [int(s) for s in subjects]


def _check_sessions(sessions):
    """``sessions`` as a list of 1 (rest) and/or 2 (arithmetic), or a clear error."""
    sessions = np.atleast_1d(np.asarray(sessions, dtype=object)).tolist()
    bad = [s for s in sessions if isinstance(s, bool) or s not in (1, 2)]
    if bad or not sessions:
        raise ValueError(
            f"EEGMAT 'sessions' must be 1 (rest) and/or 2 (arithmetic), but got {bad or sessions}."
        )
    return [int(s) for s in sessions]


def _read_eegmat(path, subjects=EEGMAT_TRAIN_SUBJECTS, sessions=(1, 2)):
    """Read EEGMAT recordings as a braindecode dataset of raw recordings, unprocessed.

    Parameters
    ----------
    path : str | Path
        Folder of the PhysioNet files (``Subject00_1.edf`` ... and ``subject-info.csv``).
    subjects : int | list of int
        Subjects, 0 to 35.
    sessions : tuple of int
        1 (rest, before the task) and/or 2 (mental arithmetic).

    Returns
    -------
    dataset : braindecode BaseConcatDataset
        One recording per file, in volts (as MNE reads EDF; :func:`load_eegmat` gives
        microvolts), the 19 EEG channels named as in
        :data:`EEGMAT_CHANNELS` with the standard 10-20 montage; description columns
        ``subject``, ``session``, ``target`` (0 rest, 1 arithmetic), ``count_quality``.
    """
    subjects = _check_subjects(subjects)
    sessions = _check_sessions(sessions)
    info = _read_eegmat_info(path)
    datasets = []
    for subject in subjects:
        for session in sessions:
            file = _eegmat_file(path, subject, session)
            if not file.is_file():
                raise FileNotFoundError(
                    f"EEGMAT file '{file}' is missing; the folder must hold PhysioNet's "
                    "SubjectNN_1.edf / SubjectNN_2.edf files."
                )
            raw = mne.io.read_raw_edf(file, preload=False, verbose="error")
            eeg = [ch for ch in raw.ch_names if ch.startswith("EEG ") and "-" not in ch]
            raw.pick(eeg)
            raw.rename_channels({ch: ch[4:] for ch in eeg})
            raw.set_channel_types(dict.fromkeys(raw.ch_names, "eeg"))
            # MNE 1.13 renamed the template montage 'standard_1020' to 'colin27_1020'
            raw.set_montage("colin27_1020", on_missing="ignore", verbose="error")
            description = {
                "subject": subject,
                "session": session,
                "target": session - 1,
                "count_quality": info.get(subject, {}).get("count_quality", -1),
            }
            # target_name makes the windows' targets (``ds[i][1]``) the description's
            datasets.append(RawDataset(raw, description, target_name="target"))
    return BaseConcatDataset(datasets)


def _eegmat_preprocessors(sfreq=100.0, l_freq=0.3, h_freq=None):
    """Load, band-pass and resample (500 Hz -> ``sfreq``), without printing.

    The paper band-passes 0.3-75 Hz at 200 Hz; at the 100 Hz of the shipped small
    encoder the upper edge is 45 Hz, below the new Nyquist frequency (``h_freq=None``
    takes 45 Hz, or 45 % of ``sfreq`` when that is lower). The files are already
    notch-filtered at 50 Hz. Values stay in volts (:func:`load_eegmat` then scales them to
    microvolts). :func:`recording_preprocessors` with these edges.
    """
    check_range("sfreq", sfreq, 0, np.inf, low_open=True)
    h_freq = min(45.0, 0.45 * sfreq) if h_freq is None else h_freq
    return recording_preprocessors(sfreq, l_freq, h_freq)


def load_eegmat(
    path,
    subjects=None,
    sfreq=100.0,
    window_seconds=10.0,
    stride_seconds=None,
    n_jobs=1,
):
    """EEGMAT rest vs mental arithmetic as braindecode windows, preprocessed.

    Parameters
    ----------
    path : str | Path
        Folder of the PhysioNet files.
    subjects : int | list of int | None
        Subjects, 0 to 35; all 36 by default.
    sfreq : float
        Sampling rate after resampling.
    window_seconds : float
        Window length; 10 s by default: 18 rest and 6 arithmetic windows a subject
        (Subject04's rest recording is 170 s long: 17; Subject10's 188 s: 18;
        Subject31's 80 s: 8).
    stride_seconds : float | None
        Window stride; non-overlapping by default.
    n_jobs : int
        Parallel jobs of the preprocessing.

    Returns
    -------
    windows : braindecode BaseConcatDataset
        Windows in microvolts, with ``target`` (0 rest, 1 arithmetic) and metadata
        columns ``subject`` and ``count_quality``.
    """
    subjects = range(36) if subjects is None else subjects
    check_range("window_seconds", window_seconds, 0, np.inf, low_open=True)
    dataset = _read_eegmat(path, subjects)
    preprocessors = [*_eegmat_preprocessors(sfreq), microvolt_step()]
    return windows_of(dataset, preprocessors, sfreq, window_seconds, stride_seconds, n_jobs)
