"""Pretraining corpora: the paper's (YSYW and TUEG, appendix A.3) and the shipped encoder's."""

from __future__ import annotations

import logging
from pathlib import Path

from braindecode.datasets import BaseConcatDataset
from braindecode.preprocessing import preprocess

from .eegmat import EEGMAT_TRAIN_SUBJECTS, eegmat_preprocessors, read_eegmat
from .sleep_edf import read_sleep_edf_mat
from .tuh import load_tueg, tuh_subjects
from .windowing import windows_of
from .ysyw import load_ysyw_pretraining, ysyw_subject_split

logger = logging.getLogger(__name__)


def pretraining_corpus(
    ysyw_path=None,
    tueg_path=None,
    tuab_path=None,
    tusz_path=None,
    ysyw_random_state=0,
    window_seconds=30.0,
    max_files=None,
    n_jobs=1,
):
    """Windows of every pretraining source, with no fine-tuning test patient in them.

    - YSYW: both sets of patients, except the annotated patients that
      :func:`ysyw_subject_split` (with ``ysyw_random_state``) puts in validation or
      test (paper: "hold out some patients with annotations for validation and
      testing");
    - TUEG: every recording, except those of the TUAB and TUSZ patients ("we discard
      all TUAB/TUSZ patients from the pretraining").

    Combine the result with :class:`SingleChannelWindows` (one random channel of a
    random crop per example) or write it once with :func:`write_window_store`.

    Returns
    -------
    windows : braindecode BaseConcatDataset
        Description columns ``source`` ("ysyw" or "tueg") and ``subject`` or ``record``.
    """
    parts = []
    if ysyw_path is not None:
        split = ysyw_subject_split(ysyw_path, random_state=ysyw_random_state)
        held_out = split["valid"] + split["test"]
        ysyw = load_ysyw_pretraining(
            ysyw_path, exclude_records=held_out, window_seconds=window_seconds, n_jobs=n_jobs
        )
        ysyw.set_description({"source": ["ysyw"] * len(ysyw.datasets)})
        parts.append(ysyw)
        logger.info(
            "YSYW: %d recordings; %d annotated patients held out.",
            len(ysyw.datasets),
            len(held_out),
        )
    if tueg_path is not None:
        excluded = []
        for path in (tuab_path, tusz_path):
            if path is not None:
                excluded += tuh_subjects(path)
        if not excluded:
            logger.warning("No TUAB or TUSZ path given: TUEG keeps every patient.")
        tueg = load_tueg(
            tueg_path,
            exclude_subjects=excluded,
            window_seconds=window_seconds,
            max_files=max_files,
            n_jobs=n_jobs,
        )
        tueg.set_description({"source": ["tueg"] * len(tueg.datasets)})
        parts.append(tueg)
    if not parts:
        raise ValueError("Give at least one of 'ysyw_path' and 'tueg_path'.")
    return BaseConcatDataset([ds for part in parts for ds in part.datasets])


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
    data_path = Path(data_path)
    eegmat = read_eegmat(data_path / "eegmat", EEGMAT_TRAIN_SUBJECTS)
    eegmat.set_description({"dataset": ["eegmat"] * len(eegmat.datasets)})
    preprocess(eegmat, eegmat_preprocessors(sfreq), n_jobs=n_jobs)
    sleep = read_sleep_edf_mat(data_path / "sleep-edf-atm")
    sleep.set_description({"dataset": ["sleep-edf"] * len(sleep.datasets)})
    preprocess(sleep, eegmat_preprocessors(sfreq), n_jobs=n_jobs)  # EEGMAT's 0.3-45 Hz, resampled
    eegmat_stride = window_seconds / 8 if stride_seconds is None else stride_seconds
    parts = [
        windows_of(eegmat, None, sfreq, window_seconds, eegmat_stride),
        windows_of(sleep, None, sfreq, window_seconds, stride_seconds),
    ]
    return BaseConcatDataset([ds for part in parts for ds in part.datasets])
