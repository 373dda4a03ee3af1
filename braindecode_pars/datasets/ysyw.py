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

At the paper's scale (994 annotated and 989 other records, about 0.26 GB each in
memory) the records are read one at a time: ``load_ysyw(cache_dir=...)`` writes the
preprocessed windows to disk and reads them back lazily, and
``_load_ysyw_pretraining(lazy=True)`` gives a stream for :func:`write_window_store`.
The patient split is written once to a JSON file (:func:`ysyw_split`) that the
recipe and the pretraining corpus both read.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

import mne
import numpy as np
import wfdb
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import preprocess

from braindecode_pars._util.atomic import write_atomic
from braindecode_pars._util.checks import check_option, check_range
from braindecode_pars.datasets._cache import _cached_windows
from braindecode_pars.io.windowing import (
    RecordingStream,
    event_windower,
    event_windows,
    fixed_length_windower,
    microvolt_preprocessors,
    windows_of,
)

logger = logging.getLogger(__name__)

#: The six EEG derivations of the challenge's polysomnograms (paper A.3).
YSYW_CHANNELS = ("F3-M2", "F4-M1", "C3-M2", "C4-M1", "O1-M2", "O2-M1")
#: The five stages; epochs scored otherwise ("undefined") are left out.
SLEEP_STAGES = {"W": 0, "N1": 1, "N2": 2, "N3": 3, "R": 4}
_EPOCH_SECONDS = 30.0
#: Name of the split file :func:`ysyw_split` writes in the data folder by default.
_YSYW_SPLIT_FILE = "splits.json"


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


def _read_ysyw_record(record_dir, channels=YSYW_CHANNELS):
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
    signal = record.p_signal  # (n_samples, n_chans) float64: one copy, scaled in place
    record.p_signal = None
    signal *= np.array([scale.get(u, 1.0) for u in record.units])[None, :]
    info = mne.create_info(list(channels), record.fs, "eeg")
    raw = mne.io.RawArray(np.ascontiguousarray(signal.T), info, verbose="error")
    del signal
    if name.with_suffix(".arousal").is_file():
        ann = wfdb.rdann(str(name), "arousal")
        notes = np.asarray(ann.aux_note)
        stage = np.array([not (n.startswith("(") or n.endswith(")")) for n in notes], bool)
        epoch = int(round(_EPOCH_SECONDS * record.fs))
        complete = ann.sample + epoch <= record.sig_len  # an epoch cut by the end is left out
        keep = stage & complete
        onsets = ann.sample[keep] / record.fs
        raw.set_annotations(mne.Annotations(onsets, _EPOCH_SECONDS, notes[keep]))
    return raw


def _records(path, split):
    folder = Path(path) / split
    if not folder.is_dir():
        raise FileNotFoundError(f"The YSYW {split} folder '{folder}' does not exist.")
    records = sorted(p for p in folder.iterdir() if (p / f"{p.name}.hea").is_file())
    if not records:
        raise FileNotFoundError(f"No WFDB record under '{folder}'.")
    return records


def _ysyw_preprocessors(l_freq=0.3, h_freq=75.0, notch_freq=60.0):
    """Microvolts, 0.3-75 Hz FIR band-pass (MNE's firwin), 60 Hz notch (paper A.3)."""
    return microvolt_preprocessors(None, l_freq, h_freq, notch_freq)


def _read_one(record_dir, split):
    """One record as a braindecode RawDataset (for a RecordingStream)."""
    raw = _read_ysyw_record(record_dir)
    return RawDataset(raw, description=dict(record=record_dir.name, split=split))


def _read(path, split, records, n_jobs):
    datasets = [_read_one(record_dir, split) for record_dir in records]
    ds = BaseConcatDataset(datasets)
    with mne.use_log_level("error"):
        preprocess(ds, _ysyw_preprocessors(), n_jobs=n_jobs)
    return ds


def load_ysyw(path, records=None, n_jobs=1, cache_dir=None):
    """Annotated YSYW records as 30-s sleep-stage windows (paper A.3).

    Targets: W 0, N1 1, N2 2, N3 3, R 4 (:data:`SLEEP_STAGES`); epochs scored
    otherwise are left out. The description holds ``record`` (the patient).

    Parameters
    ----------
    path : str | Path
        The folder holding ``training/``.
    records : list of str | None
        Record names to read (e.g. from :func:`ysyw_split`); all by default.
    n_jobs : int
        Parallel jobs of the preprocessing (without ``cache_dir``).
    cache_dir : str | Path | None
        None: every record is read and held in memory (float64, about 0.26 GB a
        record). A folder: the records are read, preprocessed, windowed and written
        there one at a time (float32), and the windows read back lazily from disk; a
        later call with the same records reads the folder as it is (see
        :func:`~braindecode_pars.datasets._cache._cached_windows`).

    Returns
    -------
    windows : braindecode BaseConcatDataset
    """
    available = _records(path, "training")
    if records is not None:
        wanted = set(records)
        unknown = wanted - {r.name for r in available}
        if unknown:
            raise ValueError(f"Records {sorted(unknown)[:5]} are not under '{path}/training'.")
        available = [r for r in available if r.name in wanted]
        if not available:
            raise ValueError("'records' names no record: give at least one, or None for all.")
    if cache_dir is None:
        ds = _read(path, "training", available, n_jobs)
        return event_windows(ds, SLEEP_STAGES, _EPOCH_SECONDS)
    stream = RecordingStream(
        [functools.partial(_read_one, r, "training") for r in available],
        event_windower(_ysyw_preprocessors(), SLEEP_STAGES, _EPOCH_SECONDS),
    )
    settings = {
        "reader": "load_ysyw",
        "path": str(Path(path).resolve()),
        "records": [r.name for r in available],
    }
    return _cached_windows(stream, cache_dir, settings)


def _load_ysyw_pretraining(
    path,
    splits=("training", "test"),
    exclude_records=(),
    window_seconds=30.0,
    n_jobs=1,
    lazy=False,
):
    """YSYW records as unlabelled windows for pretraining, without excluded patients.

    Paper A.3: both sets of patients go into pretraining, except the annotated
    patients held out for validation and testing; pass them as ``exclude_records``
    (``pretraining_corpus`` takes them from the split file of :func:`ysyw_split`).

    Parameters
    ----------
    lazy : bool
        As for :func:`~braindecode_pars.datasets.load_tueg`: False windows every record
        now, in memory; True gives a stream that reads them one at a time, for
        :func:`write_window_store`.
    """
    for split in splits:
        check_option("splits", split, ("training", "test"))
    excluded = set(exclude_records)
    chosen = {
        split: [r for r in _records(path, split) if r.name not in excluded] for split in splits
    }
    if not any(chosen.values()):
        raise ValueError(f"Every YSYW record under '{path}' is excluded.")
    if lazy:
        readers = [
            functools.partial(_read_one, r, split) for split in splits for r in chosen[split]
        ]
        windower = fixed_length_windower(_ysyw_preprocessors(), None, window_seconds)
        return RecordingStream(readers, windower)
    datasets = []
    for split in splits:
        if chosen[split]:
            datasets += _read(path, split, chosen[split], n_jobs).datasets
    sfreq = datasets[0].raw.info["sfreq"]
    return windows_of(BaseConcatDataset(datasets), None, sfreq, window_seconds)


def _ysyw_subject_split(path, fractions=(0.6, 0.2, 0.2), random_state=0):
    """The paper's random 60/20/20 split of the annotated patients into train/valid/test.

    This draws the split from the records in the folder; :func:`ysyw_split` writes it
    to a file once, so that a later change of the folder's content cannot move a
    patient from one part to another.

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


def _read_split_file(split_file):
    try:
        content = json.loads(Path(split_file).read_text())
        parts = {part: list(content["records"][part]) for part in ("train", "valid", "test")}
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"'{split_file}' is not a YSYW split file (JSON with 'records': train, valid "
            f"and test lists): {err}"
        ) from err
    names = [name for records in parts.values() for name in records]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"The split file '{split_file}' puts {twice[:5]} in two parts.")
    return content, parts


def ysyw_split(path, split_file=None, random_state=0, fractions=(0.6, 0.2, 0.2)):
    """The patient split that the recipe and the pretraining corpus share, from one file.

    The first call draws the split (:func:`_ysyw_subject_split`) and writes it to
    ``split_file``; every later call reads that file. ``load_recipe("ysyw")`` scores
    on its ``test`` patients and ``pretraining_corpus`` leaves its ``valid`` and
    ``test`` patients out of pretraining: both call this function with the same
    defaults, so that they read the same file, and a change of the folder's content
    (a record added or missing) cannot move a patient into pretraining.

    Parameters
    ----------
    path : str | Path
        The YSYW folder (``training/`` and ``test/``).
    split_file : str | Path | None
        The JSON split file; None: ``splits.json`` in ``path``. A file written by
        hand (``{"records": {"train": [...], "valid": [...], "test": [...]}}``) is
        read as it is.
    random_state : int
        Seed of the split when it is drawn; a file drawn with another seed is refused.
    fractions : tuple of float
        Train, valid and test shares when the split is drawn.

    Returns
    -------
    split : dict of str -> list of str
        Record names of ``train``, ``valid`` and ``test``.

    Raises
    ------
    ValueError
        When the file was drawn with another ``random_state`` or ``fractions``, or
        when an annotated record of the folder is in no part of it.
    """
    split_file = Path(path) / _YSYW_SPLIT_FILE if split_file is None else Path(split_file)
    if not split_file.is_file():
        parts = _ysyw_subject_split(path, fractions, random_state)
        content = {
            "dataset": "ysyw",
            "random_state": random_state,
            "fractions": list(fractions),
            "records": parts,
        }
        try:
            write_atomic(split_file, json.dumps(content, indent=1))
        except OSError as err:
            raise OSError(
                f"Cannot write the YSYW split file '{split_file}' ({err}); pass "
                "'split_file' (a writable path) to load_recipe and pretraining_corpus alike."
            ) from err
        logger.info("Wrote the YSYW patient split to %s.", split_file)
        return parts
    content, parts = _read_split_file(split_file)
    for name, value in (("random_state", random_state), ("fractions", list(fractions))):
        if name in content and content[name] != value:
            raise ValueError(
                f"'{name}'={value} differs from the split file '{split_file}', drawn with "
                f"{name}={content[name]}; pass {name}={content[name]}, or another "
                "'split_file' to draw a new split."
            )
    unassigned = sorted({r.name for r in _records(path, "training")} - set(sum(parts.values(), [])))
    if unassigned:
        raise ValueError(
            f"The annotated records {unassigned[:5]} ({len(unassigned)} in all) are in no part "
            f"of the split file '{split_file}'; pass another 'split_file' to draw a new split "
            "over the folder as it is now."
        )
    return parts
