"""You Snooze You Win (PhysioNet/CinC Challenge 2018): clinical sleep staging (paper A.3).

Records are read as PhysioNet distributes them:
``training/tr03-0005/tr03-0005.{hea,mat,arousal}`` (994 annotated patients) and
``test/te03-0001/te03-0001.{hea,mat}`` (989 without labels, used for pretraining).
Signals come from the WFDB header and ``.mat`` signal file, sleep stages from the
``arousal`` WFDB annotation file, whose ``aux_note`` holds a stage (``W``, ``N1``,
``N2``, ``N3``, ``R``) at the start of each 30-s epoch and arousals in parentheses.
Preprocessing is the paper's: the six EEG channels, microvolts, 0.3-75 Hz FIR
band-pass and 60 Hz notch (the records are at 200 Hz already). Nothing is
downloaded here; braindecode's ``SleepPhysionetChallenge2018`` fetches the corpus.
"""

from __future__ import annotations

import logging
from pathlib import Path

import mne
import numpy as np
import wfdb
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import preprocess

from .._checks import check_option, check_range
from .windowing import event_windows, microvolt_preprocessors, windows_of

logger = logging.getLogger(__name__)

#: The six EEG derivations of the challenge's polysomnograms (paper A.3).
YSYW_CHANNELS = ("F3-M2", "F4-M1", "C3-M2", "C4-M1", "O1-M2", "O2-M1")
#: The five stages; epochs scored otherwise ("undefined") are left out.
SLEEP_STAGES = {"W": 0, "N1": 1, "N2": 2, "N3": 3, "R": 4}
EPOCH_SECONDS = 30.0


def fetch_ysyw(subjects, path=None):
    """Download challenge records from PhysioNet (needs the internet), return the folder.

    Delegates to braindecode's ``fetch_pc18_data``, which keeps PhysioNet's layout
    (``training/tr03-0005/...``), so that the returned folder is the ``path`` of
    :func:`load_ysyw`. ``subjects`` are braindecode's indices: 0-988 for the test
    set, 989-1982 for the annotated training set.

    Returns
    -------
    path : Path
        The folder holding ``training/`` and ``test/``.
    """
    from braindecode.datasets.sleep_physio_challe_18 import fetch_pc18_data

    files = fetch_pc18_data(list(subjects), path=path)
    if not files:
        raise ValueError(f"No record was fetched for subjects {list(subjects)}.")
    return Path(files[0][0]).parents[2]  # .../<set>/<record>/<record>.mat -> the root


def read_ysyw_record(record_dir, channels=YSYW_CHANNELS):
    """One challenge record as an MNE Raw (volts) with its sleep stages as annotations.

    Parameters
    ----------
    record_dir : str | Path
        The record's folder (``.../training/tr03-0005``).
    channels : tuple of str
        Signals to keep, in this order.

    Returns
    -------
    raw : mne.io.RawArray
        Annotated with one 30-s annotation per complete scored epoch (``W`` ... ``R``,
        or the file's other stage words such as ``undefined``); arousals, and an
        epoch cut short by the end of the recording, are left out.
    """
    record_dir = Path(record_dir)
    name = record_dir / record_dir.name
    if not name.with_suffix(".hea").is_file():
        raise FileNotFoundError(f"No WFDB header '{name.with_suffix('.hea')}'.")
    header = wfdb.rdheader(str(name))
    missing = [c for c in channels if c not in header.sig_name]
    if missing:
        raise ValueError(f"Record '{record_dir.name}' lacks the signals {missing}.")
    picks = [header.sig_name.index(c) for c in channels]
    record = wfdb.rdrecord(str(name), channels=picks)
    scale = {"uV": 1e-6, "mV": 1e-3, "V": 1.0}
    units = np.array([scale.get(u, 1.0) for u in record.units])[:, None]
    info = mne.create_info(list(channels), record.fs, "eeg")
    raw = mne.io.RawArray(record.p_signal.T * units, info, verbose="error")
    if name.with_suffix(".arousal").is_file():
        ann = wfdb.rdann(str(name), "arousal")
        notes = np.asarray(ann.aux_note)
        stage = np.array([not (n.startswith("(") or n.endswith(")")) for n in notes], bool)
        epoch = int(round(EPOCH_SECONDS * record.fs))
        complete = ann.sample + epoch <= record.sig_len  # an epoch cut by the end is left out
        keep = stage & complete
        onsets = ann.sample[keep] / record.fs
        raw.set_annotations(mne.Annotations(onsets, EPOCH_SECONDS, notes[keep]))
    return raw


def _records(path, split):
    folder = Path(path) / split
    if not folder.is_dir():
        raise FileNotFoundError(f"The YSYW {split} folder '{folder}' does not exist.")
    records = sorted(p for p in folder.iterdir() if (p / f"{p.name}.hea").is_file())
    if not records:
        raise FileNotFoundError(f"No WFDB record under '{folder}'.")
    return records


def ysyw_preprocessors(l_freq=0.3, h_freq=75.0, notch_freq=60.0):
    """Microvolts, 0.3-75 Hz FIR band-pass (MNE's firwin), 60 Hz notch (paper A.3)."""
    return microvolt_preprocessors(None, l_freq, h_freq, notch_freq)


def _read(path, split, records, n_jobs):
    datasets = []
    for record_dir in records:
        raw = read_ysyw_record(record_dir)
        datasets.append(RawDataset(raw, description=dict(record=record_dir.name, split=split)))
    ds = BaseConcatDataset(datasets)
    with mne.use_log_level("error"):
        preprocess(ds, ysyw_preprocessors(), n_jobs=n_jobs)
    return ds


def load_ysyw(path, records=None, n_jobs=1):
    """Annotated YSYW records as 30-s sleep-stage windows (paper A.3).

    Targets: W 0, N1 1, N2 2, N3 3, R 4 (:data:`SLEEP_STAGES`); epochs scored
    otherwise are left out. The description holds ``record`` (the patient).

    Parameters
    ----------
    path : str | Path
        The folder holding ``training/``.
    records : list of str | None
        Record names to read (e.g. from :func:`ysyw_subject_split`); all by default.
    """
    available = _records(path, "training")
    if records is not None:
        wanted = set(records)
        unknown = wanted - {r.name for r in available}
        if unknown:
            raise ValueError(f"Records {sorted(unknown)[:5]} are not under '{path}/training'.")
        available = [r for r in available if r.name in wanted]
    ds = _read(path, "training", available, n_jobs)
    return event_windows(ds, SLEEP_STAGES, EPOCH_SECONDS)


def load_ysyw_pretraining(
    path, splits=("training", "test"), exclude_records=(), window_seconds=30.0, n_jobs=1
):
    """YSYW records as unlabelled windows for pretraining, without excluded patients.

    Paper A.3: both sets of patients go into pretraining, except the annotated
    patients held out for validation and testing; pass them as ``exclude_records``.
    """
    for split in splits:
        check_option("splits", split, ("training", "test"))
    excluded = set(exclude_records)
    datasets = []
    for split in splits:
        records = [r for r in _records(path, split) if r.name not in excluded]
        if records:
            datasets += _read(path, split, records, n_jobs).datasets
    if not datasets:
        raise ValueError(f"Every YSYW record under '{path}' is excluded.")
    sfreq = datasets[0].raw.info["sfreq"]
    return windows_of(BaseConcatDataset(datasets), None, sfreq, window_seconds)


def ysyw_subject_split(path, fractions=(0.6, 0.2, 0.2), random_state=0):
    """The paper's random 60/20/20 split of the annotated patients into train/valid/test.

    Returns
    -------
    split : dict of str -> list of str
        Record names per part; every record is in exactly one.
    """
    if len(fractions) != 3 or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"'fractions' must be three numbers summing to 1, but got {fractions}.")
    for f in fractions:
        check_range("fractions", f, 0, 1)
    names = np.array([r.name for r in _records(path, "training")])
    order = np.random.default_rng(random_state).permutation(len(names))
    n_train = int(round(fractions[0] * len(names)))
    n_valid = int(round(fractions[1] * len(names)))
    parts = np.split(names[order], [n_train, n_train + n_valid])
    return {k: sorted(v.tolist()) for k, v in zip(("train", "valid", "test"), parts, strict=True)}
