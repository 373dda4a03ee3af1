"""EEGMAT recordings bundled with the package for the main job, preprocessed and compact.

20 of EEGMAT's 36 subjects (the 12 test subjects and 8 of the training subjects, the
pool of labelled subjects the main job draws from), both sessions, the 19 EEG
channels band-passed 0.3-45 Hz and resampled to 100 Hz (as
:func:`~braindecode_pars.datasets.eegmat.load_eegmat` does), stored in microvolts as
float16 in one compressed ``.npz`` file. :func:`load_bundled_eegmat` returns them as
braindecode windows, in microvolts as :func:`load_eegmat` gives them;
:func:`write_eegmat_bundle` makes the file from PhysioNet's EDF files.

Data: PhysioNet EEGMAT 1.0.0, Open Data Commons Attribution License v1.0. Zyma I.,
Tukaev S., Seleznov I., Kiyono K., Popov A., Chernykh M., Shpenkov O.
Electroencephalograms during Mental Arithmetic Task Performance. Data 4(1):14, 2019;
Goldberger A.L. et al. PhysioBank, PhysioToolkit, and PhysioNet. Circulation
101(23):e215-e220, 2000.
"""

from __future__ import annotations

from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset, RawDataset

from .bundled import bundled_data_path
from .eegmat import (
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
    _eegmat_preprocessors,
    read_eegmat,
)
from .windowing import windows_of

#: The labelled pool of the main job: the first 8 training subjects.
BUNDLED_POOL_SUBJECTS = EEGMAT_TRAIN_SUBJECTS[:8]
BUNDLED_SUBJECTS = tuple(sorted(EEGMAT_TEST_SUBJECTS + BUNDLED_POOL_SUBJECTS))
_FILE = "eegmat_100hz.npz"


def _bundled_eegmat_file():
    """Path of the bundled file, in the folder :func:`.bundled.bundled_data_path` finds."""
    return bundled_data_path() / _FILE


def write_eegmat_bundle(eegmat_path, out=None, subjects=BUNDLED_SUBJECTS, sfreq=100.0):
    """Preprocess EEGMAT EDF files and write them as the compact bundled file."""
    dataset = read_eegmat(eegmat_path, subjects)
    from braindecode.preprocessing import preprocess

    preprocess(dataset, _eegmat_preprocessors(sfreq))
    arrays, meta = {}, []
    for ds in dataset.datasets:
        d = ds.description
        key = f"s{int(d['subject']):02d}_{int(d['session'])}"
        arrays[key] = (ds.raw.get_data() * 1e6).astype(np.float16)  # microvolts
        meta.append((int(d["subject"]), int(d["session"]), int(d["count_quality"])))
    first = dataset.datasets[0].raw
    out = Path(out) if out is not None else _bundled_eegmat_file()
    np.savez_compressed(
        out,
        ch_names=np.array(first.ch_names),
        sfreq=np.array(sfreq),
        meta=np.array(meta, dtype=np.int64),
        **arrays,
    )
    return out


def _read_bundled_eegmat(subjects=None, path=None):
    """The bundled recordings as a braindecode dataset of raws (microvolts, 100 Hz)."""
    path = _bundled_eegmat_file() if path is None else Path(path)
    with np.load(path) as f:
        ch_names = [str(c) for c in f["ch_names"]]
        sfreq = float(f["sfreq"])
        meta = f["meta"]
        wanted = set(BUNDLED_SUBJECTS if subjects is None else np.atleast_1d(subjects).tolist())
        missing = sorted(wanted - {int(m[0]) for m in meta})
        if missing:
            raise ValueError(
                f"Subjects {missing} are not bundled; the bundle holds {list(BUNDLED_SUBJECTS)} "
                "(use load_eegmat on PhysioNet's files for the others)."
            )
        datasets = []
        for subject, session, quality in meta:
            if int(subject) not in wanted:
                continue
            data = f[f"s{int(subject):02d}_{int(session)}"].astype(np.float64)  # microvolts
            info = mne.create_info(ch_names, sfreq, ch_types="eeg")
            raw = mne.io.RawArray(data, info, verbose="error")
            raw.set_montage("colin27_1020", on_missing="ignore", verbose="error")
            description = {
                "subject": int(subject),
                "session": int(session),
                "target": int(session) - 1,
                "count_quality": int(quality),
            }
            datasets.append(RawDataset(raw, description, target_name="target"))
    return BaseConcatDataset(datasets)


def load_bundled_eegmat(subjects=None, window_seconds=10.0, stride_seconds=None):
    """Bundled EEGMAT rest vs mental arithmetic as braindecode windows (100 Hz).

    Returns windows in microvolts with ``target`` (0 rest, 1 arithmetic) and metadata
    columns ``subject`` and ``count_quality``, as :func:`load_eegmat` does on the full
    data.
    """
    dataset = _read_bundled_eegmat(subjects)
    sfreq = dataset.datasets[0].raw.info["sfreq"]
    return windows_of(dataset, None, sfreq, window_seconds, stride_seconds)
