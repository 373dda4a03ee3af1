"""PhysioNet EEG Motor Movement/Imagery (PhysioNet-MI) as braindecode datasets.

Reads MNE's ``eegbci`` cache layout (``<path>/MNE-eegbci-data/files/eegmmidb/1.0.0/
S001/S001R04.edf``), so the bundled subject S001 and a full local copy of the 109
subjects are read by the same call. Preprocessing follows the paper (appendix A.3):
resample 160 -> 200 Hz, 0.3 Hz high-pass, 60 Hz notch, average reference, 4-s windows.
"""

from __future__ import annotations

import logging
from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import Preprocessor, preprocess

from braindecode_pars._util.checks import check_int
from braindecode_pars.datasets.bundled import bundled_data_path
from braindecode_pars.io.windowing import event_windows, microvolt_preprocessors, windows_of

logger = logging.getLogger(__name__)

#: Class codes of the paper's 4-class task.
PHYSIONET_MI_CLASSES = {"left_fist": 0, "right_fist": 1, "both_fists": 2, "both_feet": 3}
#: The imagery runs: imagined left vs right fist (4, 8, 12) and imagined both fists vs
#: both feet (6, 10, 14).
_IMAGERY_RUNS = (4, 6, 8, 10, 12, 14)
#: Eyes-open and eyes-closed baselines, and the executed (not imagined) movements:
#: recordings of the same subject that hold no imagery trial.
_NON_IMAGERY_RUNS = (1, 2, 3, 5, 7, 9, 11, 13)

_EVENT_NAMES = {
    "left_right": {"T0": "rest", "T1": "left_fist", "T2": "right_fist"},
    "fists_feet": {"T0": "rest", "T1": "both_fists", "T2": "both_feet"},
    "baseline": {"T0": "rest"},
}


def physionet_mi_run_path(path, subject, run):
    """Where MNE's eegbci loader keeps run ``run`` of ``subject`` under ``path``.

    Parameters
    ----------
    path : str | Path
        The folder MNE's ``eegbci.load_data`` was given (it holds ``MNE-eegbci-data``);
        :func:`~braindecode_pars.datasets.bundled_data_path` for the bundled runs.
    subject, run : int
        PhysioNet-MI's numbers (subjects 1-109, runs 1-14).

    Returns
    -------
    edf : Path
        ``<path>/MNE-eegbci-data/files/eegmmidb/1.0.0/SNNN/SNNNRMM.edf``, whether or not
        it exists.
    """
    return (
        Path(path)
        / "MNE-eegbci-data"
        / "files"
        / "eegmmidb"
        / "1.0.0"
        / f"S{subject:03d}"
        / f"S{subject:03d}R{run:02d}.edf"
    )


def _run_kind(run):
    """'baseline' (runs 1-2), 'left_right' (3, 4, 7, 8, 11, 12) or 'fists_feet' (the rest)."""
    if run < 3:
        return "baseline"
    return "left_right" if (run - 3) % 4 < 2 else "fists_feet"


#: The paper's subject split of PhysioNet-MI (appendix A.3).
PHYSIONET_MI_SPLIT = {
    "train": tuple(range(1, 71)),
    "valid": tuple(range(71, 90)),
    "test": tuple(range(90, 110)),
}


def _physionet_mi_subject_split(subject):
    """'train' (subjects 1-70), 'valid' (71-89) or 'test' (90-109), as the paper splits."""
    check_int("subject", subject, 1)
    for name, subjects in PHYSIONET_MI_SPLIT.items():
        if subject in subjects:
            return name
    raise ValueError(f"'subject' must lie in 1..109, but got {subject}.")


def _run_block(run):
    """Repetition of the task sequence a run belongs to: 0 for runs 1-2, 1-3 for runs 3-14.

    Runs 3-6, 7-10 and 11-14 each hold one run of every task, so a block holds
    trials of all four imagery classes: leaving one block out keeps every class in
    every test fold.
    """
    return 0 if run < 3 else (run - 3) // 4 + 1


def _check_runs(name, values, allowed):
    values = [check_int(name, v, 1) for v in np.atleast_1d(values).tolist()]
    bad = sorted(set(values) - set(allowed))
    if bad:
        raise ValueError(f"'{name}' must lie in {min(allowed)}..{max(allowed)}, but got {bad}.")
    return values


def _read_physionet_mi(subjects=(1,), runs=_IMAGERY_RUNS, path=None, download=False):
    """Read PhysioNet-MI runs as a braindecode dataset of raw recordings, unprocessed.

    Annotations are renamed by run: in runs 4/8/12 (and the executed 3/7/11) ``T1``
    is ``left_fist`` and ``T2`` ``right_fist``; in runs 6/10/14 (and 5/9/13) ``T1`` is
    ``both_fists`` and ``T2`` ``both_feet``; ``T0`` is ``rest``. Channel names are
    standardised (``Fc5.`` -> ``FC5``) and the standard 10-05 montage is set.

    ``subjects``, ``path`` and ``download`` are :func:`load_physionet_mi`'s; ``runs``
    may be any of 1 to 14 (the baselines too). Returns one
    :class:`~braindecode.datasets.RawDataset` per run, with ``subject``,
    ``run`` and ``block`` (see :func:`_run_block`) in its description, in a
    ``BaseConcatDataset``.
    """
    subjects = _check_runs("subjects", subjects, range(1, 110))
    runs = _check_runs("runs", runs, range(1, 15))
    path = bundled_data_path() if path is None else Path(path)
    datasets = []
    for subject in subjects:
        for run in runs:
            fname = physionet_mi_run_path(path, subject, run)
            if not fname.is_file():
                if not download:
                    raise FileNotFoundError(
                        f"PhysioNet-MI subject {subject} run {run} is not at '{fname}'. "
                        "Pass download=True to fetch it (needs the internet), or 'path' "
                        "pointing at a folder in MNE's eegbci layout."
                    )
                mne.datasets.eegbci.load_data(subject, [run], path=path, update_path=False)
            raw = mne.io.read_raw_edf(fname, preload=False, verbose="error")
            mne.datasets.eegbci.standardize(raw)
            raw.set_montage("standard_1005", on_missing="ignore", verbose="error")
            names = _EVENT_NAMES[_run_kind(run)]
            raw.annotations.rename(
                {k: v for k, v in names.items() if k in set(raw.annotations.description)}
            )
            description = {"subject": subject, "run": run, "block": _run_block(run)}
            datasets.append(RawDataset(raw, description=description))
    return BaseConcatDataset(datasets)


def _physionet_mi_preprocessors(sfreq=200.0, l_freq=0.3, notch_freq=60.0):
    """The paper's PhysioNet-MI preprocessing as braindecode Preprocessors.

    Scale volts to microvolts, resample to ``sfreq`` (paper: 160 -> 200 Hz),
    high-pass at ``l_freq`` (0.3 Hz), notch at ``notch_freq`` (60 Hz), average
    reference. At a rate whose Nyquist frequency is at or below ``notch_freq``
    (100 Hz, say) there is no notch: resampling's low-pass has removed the line.
    """
    return [
        Preprocessor("pick", picks="eeg", apply_on_array=False),
        *microvolt_preprocessors(sfreq, l_freq, None, notch_freq),
        Preprocessor(
            "set_eeg_reference", ref_channels="average", apply_on_array=False, verbose="error"
        ),
    ]


def load_physionet_mi(
    subjects=(1,),
    runs=_IMAGERY_RUNS,
    path=None,
    window_seconds=4.0,
    sfreq=200.0,
    download=False,
    n_jobs=1,
):
    """The paper's 4-class PhysioNet-MI task as braindecode windows.

    One ``window_seconds`` window from the onset of every imagery trial, labelled
    left fist (0), right fist (1), both fists (2) or both feet (3)
    (:data:`PHYSIONET_MI_CLASSES`); rest periods are left out. Preprocessing:
    :func:`_physionet_mi_preprocessors`.

    Parameters
    ----------
    subjects : int | list of int
        Subjects, 1 to 109.
    runs : int | list of int
        Runs, 3 to 14 (imagery or executed-movement runs).
    path : str | Path | None
        Folder holding ``MNE-eegbci-data`` (MNE's layout). Default: the bundled data
        (subject 1 only), where :func:`~braindecode_pars.datasets.bundled_data_path`
        finds it.
    download : bool
        If a file is missing, fetch it with ``mne.datasets.eegbci.load_data`` into
        ``path`` (needs the internet); otherwise a missing file is an error.
    window_seconds : float
        Window length. Paper: 4 s.
    sfreq : float
        Sampling rate after resampling. Paper: 200 Hz.
    n_jobs : int
        Parallel preprocessing jobs.

    Returns
    -------
    windows : braindecode.datasets.BaseConcatDataset
        Windows of shape (64, window_seconds * sfreq); ``windows.get_metadata()``
        holds ``target``, ``subject``, ``run`` and ``block`` per window.
    """
    runs = _check_runs("runs", runs, range(3, 15))
    ds = _read_physionet_mi(subjects, runs, path=path, download=download)
    with mne.use_log_level("error"):
        preprocess(ds, _physionet_mi_preprocessors(sfreq), n_jobs=n_jobs)
    return event_windows(ds, PHYSIONET_MI_CLASSES, window_seconds)  # one window per trial


def load_physionet_mi_continuous(
    subjects=(1,),
    runs=_NON_IMAGERY_RUNS,
    path=None,
    window_seconds=30.0,
    stride_seconds=5.0,
    sfreq=200.0,
    download=False,
    n_jobs=1,
):
    """Preprocessed PhysioNet-MI recordings cut into fixed-length windows, for pretraining.

    By default the runs that hold no imagery trial (baselines and executed
    movements), so that pretraining never sees a trial of the 4-class task.

    Returns
    -------
    windows : braindecode.datasets.BaseConcatDataset
        Windows of shape (64, window_seconds * sfreq), overlapping by
        ``window_seconds - stride_seconds``.
    """
    ds = _read_physionet_mi(subjects, runs, path=path, download=download)
    with mne.use_log_level("error"):
        preprocessors = _physionet_mi_preprocessors(sfreq)
        return windows_of(ds, preprocessors, sfreq, window_seconds, stride_seconds, n_jobs)
