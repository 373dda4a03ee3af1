"""Pretraining corpora: the paper's (YSYW and TUEG, appendix A.3) and the shipped encoder's,
and the data that ``braindecode-pars store`` assembles (:func:`_recording_windows`: your
recordings or the shared corpus), plain functions for scripts too."""

from __future__ import annotations

import logging
from pathlib import Path

from braindecode.datasets import BaseConcatDataset
from braindecode.preprocessing import Preprocessor, preprocess

from braindecode_pars._util.checks import check_option
from braindecode_pars.datasets.eegmat import (
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
    _eegmat_preprocessors,
    _read_eegmat,
)
from braindecode_pars.datasets.sleep_edf import SLEEP_EDF_ATM_UV_PER_UNIT, read_sleep_edf_mat
from braindecode_pars.datasets.tuh import _tuh_subjects, load_tueg
from braindecode_pars.datasets.ysyw import _load_ysyw_pretraining, ysyw_split
from braindecode_pars.io.recordings import load_recordings
from braindecode_pars.io.windowing import windows_of

logger = logging.getLogger(__name__)


def _times(data, factor):
    """``data * factor`` (a preprocessor's function: picklable, for ``n_jobs``)."""
    return data * factor


def _with_source(windows, source, lazy):
    """``windows`` with the description column ``source``: a
    :class:`~braindecode_pars.io.windowing.RecordingStream` (``lazy``) tags each
    recording as it is read, an in-memory corpus every one of its datasets now."""
    if lazy:
        return windows.with_description({"source": source})
    windows.set_description({"source": [source] * len(windows.datasets)})
    return windows


def pretraining_corpus(
    ysyw_path=None,
    tueg_path=None,
    tuab_path=None,
    tusz_path=None,
    ysyw_random_state=0,
    window_seconds=30.0,
    max_files=None,
    n_jobs=1,
    allow_test_patients=False,
    ysyw_split_file=None,
    lazy=False,
):
    """Windows of every pretraining source, with no fine-tuning test patient in them.

    - YSYW: both sets of patients, except the annotated patients that the split
      file puts in validation or test (paper: "hold out some patients with
      annotations for validation and testing"). The split file is the one
      ``load_recipe("ysyw")`` scores with (:func:`~braindecode_pars.datasets.ysyw.ysyw_split`:
      written once, by whichever runs first, and read by both);
    - TUEG: every recording, except those of the TUAB and TUSZ patients ("we discard
      all TUAB/TUSZ patients from the pretraining"). Without both ``tuab_path`` and
      ``tusz_path`` their patients cannot be left out, and the call is refused
      unless ``allow_test_patients=True``.

    Combine the result with :class:`SingleChannelWindows` (one random channel of a
    random crop per example) or write it with :func:`write_window_store`; at the
    paper's scale, ``lazy=True`` and a store::

        write_window_store(pretraining_corpus(..., lazy=True), "store/")

    Parameters
    ----------
    ysyw_path, tueg_path : str | Path | None
        The YSYW folder (``training/`` and ``test/``) and the TUEG ``edf`` folder.
    tuab_path, tusz_path : str | Path | None
        The TUAB and TUSZ ``edf`` folders, whose patients are left out of TUEG.
    ysyw_random_state : int
        Seed of the YSYW patient split, when its split file is written.
    window_seconds : float
        Window length.
    max_files : int | None
        Read at most this many TUEG files (for quick runs).
    n_jobs : int
        Parallel jobs of the preprocessing (without ``lazy``).
    allow_test_patients : bool
        Build a TUEG corpus without ``tuab_path`` or ``tusz_path``, keeping their
        patients (test patients of the TUAB and TUSZ tasks) in pretraining; a
        warning says so. Scores on TUAB or TUSZ of an encoder pretrained on it are
        not the paper's protocol.
    ysyw_split_file : str | Path | None
        The YSYW split file; None: ``splits.json`` in ``ysyw_path``. Give the same
        file to ``load_recipe("ysyw", split_file=...)``.
    lazy : bool
        False: every recording is read and windowed now, in memory. True: a
        :class:`~braindecode_pars.io.windowing.RecordingStream` that reads,
        preprocesses and windows one recording at a time as it is iterated, for
        :func:`write_window_store`.

    Returns
    -------
    windows : braindecode BaseConcatDataset | RecordingStream
        Description columns ``source`` ("ysyw" or "tueg") and ``subject`` or ``record``.

    Raises
    ------
    ValueError
        With ``tueg_path`` but without ``tuab_path`` or ``tusz_path``, unless
        ``allow_test_patients=True``.
    """
    if ysyw_path is None and tueg_path is None:
        raise ValueError("Give at least one of 'ysyw_path' and 'tueg_path'.")
    missing = [name for name, p in (("tuab_path", tuab_path), ("tusz_path", tusz_path)) if not p]
    if tueg_path is not None and missing:
        if not allow_test_patients:
            raise ValueError(
                f"{' and '.join(repr(m) for m in missing)} missing: pretraining_corpus "
                "leaves the TUAB and TUSZ patients out of TUEG, so that no test patient of "
                "theirs is pretrained on, and needs both folders for that. Pass "
                "'tuab_path' and 'tusz_path', or allow_test_patients=True to pretrain on "
                "every TUEG patient."
            )
        logger.warning(
            "%s not given: TUEG keeps the patients of %s, test patients included "
            "(allow_test_patients=True).",
            " and ".join(missing),
            " and ".join(m[:4].upper() for m in missing),
        )
    parts = []
    if ysyw_path is not None:
        split = ysyw_split(ysyw_path, ysyw_split_file, random_state=ysyw_random_state)
        held_out = split["valid"] + split["test"]
        ysyw = _load_ysyw_pretraining(
            ysyw_path,
            exclude_records=held_out,
            window_seconds=window_seconds,
            n_jobs=n_jobs,
            lazy=lazy,
        )
        parts.append(_with_source(ysyw, "ysyw", lazy))
        logger.info(
            "YSYW: %d recordings; %d annotated patients held out.",
            len(ysyw) if lazy else len(ysyw.datasets),
            len(held_out),
        )
    if tueg_path is not None:
        excluded = []
        for path in (tuab_path, tusz_path):
            if path is not None:
                excluded += _tuh_subjects(path)
        tueg = load_tueg(
            tueg_path,
            exclude_subjects=excluded,
            window_seconds=window_seconds,
            max_files=max_files,
            n_jobs=n_jobs,
            lazy=lazy,
        )
        parts.append(_with_source(tueg, "tueg", lazy))
    if lazy:
        return sum(parts[1:], parts[0])
    return BaseConcatDataset([ds for part in parts for ds in part.datasets])


def shared_corpus(
    data_path,
    sfreq=100.0,
    window_seconds=30.0,
    stride_seconds=None,
    n_jobs=1,
    eegmat_subjects=EEGMAT_TRAIN_SUBJECTS,
    muse=False,
    unit=None,
):
    """The corpus of the shipped encoder: EEGMAT's 24 training subjects + Sleep-EDF.

    The 12 EEGMAT test subjects
    (:data:`~braindecode_pars.datasets.eegmat.EEGMAT_TEST_SUBJECTS`) and
    PhysioNet-MI are left out: the benchmarks test on them. ``eegmat_subjects``
    narrows EEGMAT further (a selection encoder takes the pool subjects,
    :data:`~braindecode_pars.datasets.eegmat.EEGMAT_POOL_SUBJECTS`), and
    ``muse=True`` adds the Muse headband recordings of ``muse-cueing/`` (65 people, 4
    channels, a consumer device; BSD-3 licence).

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
    eegmat_subjects : sequence of int
        The EEGMAT subjects to take; test subjects are refused.
    muse : bool
        Add ``muse-cueing/**/*.edf`` (read with
        :func:`~braindecode_pars.io.load_recordings`: resampled, 0.3-45 Hz,
        non-overlapping windows), description ``dataset`` ``"muse"``.
    unit : {None, "uV"}
        None: each part in its reader's unit (EEGMAT in volts, Sleep-EDF in its digital
        units, Muse in microvolts), which the encoder's default normalisation
        (``"window"``, scale-invariant) does not read. ``"uV"``: every part in
        microvolts (Sleep-EDF through
        :data:`~braindecode_pars.datasets.sleep_edf.SLEEP_EDF_ATM_UV_PER_UNIT`), the
        corpus of an encoder that reads amplitude (``normalization="window+scale"``
        or ``"fixed"`` with ``unit="uV"``).

    Returns
    -------
    windows : braindecode BaseConcatDataset
        EEGMAT's 19-channel windows then Sleep-EDF's single-channel ones (and Muse's),
        0.3-45 Hz, in the units ``unit`` says; description column ``dataset``
        (``"eegmat"``, ``"sleep-edf"``, ``"muse"``) besides each reader's own.
    """
    check_option("unit", unit, (None, "uV"))
    data_path = Path(data_path)
    scored = sorted(set(eegmat_subjects) & set(EEGMAT_TEST_SUBJECTS))
    if scored:
        raise ValueError(
            f"'eegmat_subjects' holds EEGMAT test subjects {scored}, which the benchmarks "
            "score; a pretraining corpus must leave them out."
        )
    eegmat = _read_eegmat(data_path / "eegmat", tuple(eegmat_subjects))
    eegmat.set_description({"dataset": ["eegmat"] * len(eegmat.datasets)})
    to_uv = [Preprocessor(_times, factor=1e6, apply_on_array=True)] if unit == "uV" else []
    preprocess(eegmat, _eegmat_preprocessors(sfreq) + to_uv, n_jobs=n_jobs)  # volts (MNE's)
    per_unit = SLEEP_EDF_ATM_UV_PER_UNIT if unit == "uV" else None
    sleep = read_sleep_edf_mat(data_path / "sleep-edf-atm", uv_per_unit=per_unit)
    sleep.set_description({"dataset": ["sleep-edf"] * len(sleep.datasets)})
    preprocess(sleep, _eegmat_preprocessors(sfreq), n_jobs=n_jobs)  # EEGMAT's 0.3-45 Hz, resampled
    eegmat_stride = window_seconds / 8 if stride_seconds is None else stride_seconds
    parts = [
        windows_of(eegmat, None, sfreq, window_seconds, eegmat_stride),
        windows_of(sleep, None, sfreq, window_seconds, stride_seconds),
    ]
    if muse:
        headband = load_recordings(
            str(data_path / "muse-cueing" / "**" / "*.edf"),
            sfreq=sfreq,
            window_seconds=window_seconds,
            stride_seconds=stride_seconds,
            l_freq=0.3,
            h_freq=45.0,
            n_jobs=n_jobs,
            subject_from="file",  # people are counted by their folders
        )
        headband.set_description({"dataset": ["muse"] * len(headband.datasets)})
        parts.append(headband)
    return BaseConcatDataset([ds for part in parts for ds in part.datasets])


# -- what the store command assembles ----------------------------------------------------
def _recording_windows(
    recordings=None,
    shared_data=None,
    *,
    sfreq=None,
    window_seconds=10.0,
    stride_seconds=5.0,
    l_freq=0.3,
    h_freq=None,
    notch_freq=None,
    exclude="auto",
    picks="eeg",
    on_error="raise",
    eegmat_subjects=None,
    muse=False,
    lazy=False,
    subject_from=None,
):
    """Windows of your recordings or of the shared corpus, or None when neither is given.

    Parameters
    ----------
    recordings : sequence of str | None
        Folders or globs of files MNE reads, as
        :func:`~braindecode_pars.io.load_recordings` takes them. Taken before
        ``shared_data`` when both are given.
    shared_data : str | Path | None
        The folder of the shipped encoder's corpus (``eegmat/``, ``sleep-edf-atm/``),
        read with :func:`~braindecode_pars.datasets.shared_corpus`.
    sfreq : float | None
        Rate the recordings are resampled to; None: 100 Hz.
    window_seconds : float
        Window length.
    stride_seconds : float | None
        Stride of ``recordings``' windows (the shared corpus takes its own).
    l_freq, h_freq, notch_freq : float | None
        High-pass, low-pass (None: ``min(75, 0.45 sfreq)``) and power-line notch of
        ``recordings``.
    exclude : "auto" | list of str
        Channels of ``recordings`` left out; "auto": those named like ECG, EOG, EMG,
        respiration or reference derivations; a list: its names, and the automatic
        ones when it holds "auto"; ``[]`` keeps every EEG channel.
    picks : str | list of str
        Channels of ``recordings`` to keep (MNE's ``picks``): ``"eeg"``, or names.
    on_error : {"raise", "skip"}
        A file of ``recordings`` that cannot be read: stop naming it, or skip it with
        a warning.
    eegmat_subjects : sequence of int | None
        The EEGMAT subjects of ``shared_data``; None: the 24 training subjects
        (:data:`~braindecode_pars.datasets.eegmat.EEGMAT_TRAIN_SUBJECTS`).
    muse : bool
        Add the Muse headband recordings of ``shared_data``.
    lazy : bool
        Return ``recordings`` as a stream that reads one recording at a time (to write
        a store without holding the corpus in memory).
    subject_from : None | str | re.Pattern | callable
        The subject of each file of ``recordings``, as
        :func:`~braindecode_pars.io.load_recordings` takes it (default: each recording
        its own subject; a header's patient code only with ``"header"``).

    Returns
    -------
    windows : braindecode.datasets.BaseConcatDataset | RecordingStream | None
        The windows, or None when neither ``recordings`` nor ``shared_data`` is given.
    """
    rate = sfreq or 100.0
    if recordings:
        return load_recordings(
            recordings,
            sfreq=rate,
            window_seconds=window_seconds,
            stride_seconds=stride_seconds,
            l_freq=l_freq,
            h_freq=h_freq,
            notch_freq=notch_freq,
            exclude=exclude,
            picks=picks,
            on_error=on_error,
            lazy=lazy,
            subject_from=subject_from,
        )
    if shared_data:
        return shared_corpus(
            shared_data,
            sfreq=rate,
            window_seconds=window_seconds,
            eegmat_subjects=EEGMAT_TRAIN_SUBJECTS if eegmat_subjects is None else eegmat_subjects,
            muse=muse,
        )
    return None
