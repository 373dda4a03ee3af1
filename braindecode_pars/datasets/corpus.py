"""The pretraining corpus of the paper: YSYW and TUEG together (appendix A.3)."""

from __future__ import annotations

import logging

from braindecode.datasets import BaseConcatDataset

from .tuh import load_tueg, tuh_subjects
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
