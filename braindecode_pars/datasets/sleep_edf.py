"""Single-channel Sleep-EDF (sleep-cassette) segments exported by PhysioNet's ATM.

Each ``SC4ssnE0-PSG_edfm.mat`` holds one int16 variable ``val`` of shape
(1, n_samples): one EEG channel (Pz-Oz) of a night at 100 Hz, in the exporter's
digital units (no physical scaling is stored, which the encoder's scale-invariant
normalisation does not need; :data:`SLEEP_EDF_ATM_UV_PER_UNIT` converts them to
microvolts for an encoder that reads amplitude). The segments are the evening hours around sleep
onset, mostly wake, and carry no stage labels: they serve pretraining.

Cite Kemp et al., IEEE TBME 47(9):1185-1194, 2000, and Goldberger et al. 2000
(Sleep-EDF Database Expanded, Open Data Commons Attribution License v1.0).
"""

from __future__ import annotations

import re
from pathlib import Path

import mne
import numpy as np
import scipy.io
from braindecode.datasets import BaseConcatDataset, RawDataset

from braindecode_pars._util.checks import check_range

#: Sampling rate of the sleep-cassette EEG.
_SLEEP_EDF_SFREQ = 100.0
#: Microvolts per digital unit of the ATM export, approximately: the sleep-cassette EDF
#: headers map their 12-bit range (-2048 to 2047) to about -197 to 197 µV on Pz-Oz, and
#: the export keeps the digital values without that scaling. With it, the median
#: standard deviation of a 10-s window of these nights is 8-12 µV, that of EEGMAT's
#: resting scalp EEG 9-14 µV (``tests/test_datasets_sources.py`` checks the order of
#: magnitude on the shared files).
SLEEP_EDF_ATM_UV_PER_UNIT = 394.0 / 4095.0
_NAME = re.compile(r"SC4(\d\d)(\d)E0-PSG_edfm\.mat$")


def read_sleep_edf_mat(path, channel="Pz-Oz", sfreq=_SLEEP_EDF_SFREQ, uv_per_unit=None):
    """Read Sleep-EDF ``*_edfm.mat`` segments as a braindecode dataset of raw recordings.

    Parameters
    ----------
    path : str | Path | list of them
        A folder of ``SC4ssnE0-PSG_edfm.mat`` files, or the files themselves.
    channel : str
        Name given to the single channel.
    sfreq : float
        Its sampling rate (the files do not store one).
    uv_per_unit : float | None
        Microvolts per digital unit (:data:`SLEEP_EDF_ATM_UV_PER_UNIT`): the values are
        multiplied by it. None keeps the files' digital units.

    Returns
    -------
    dataset : braindecode BaseConcatDataset
        One single-channel recording per file (values in the file's digital units, or
        in microvolts with ``uv_per_unit``), description columns ``subject``,
        ``night`` and ``file``.
    """
    if uv_per_unit is not None:
        check_range("uv_per_unit", uv_per_unit, 0, np.inf, low_open=True)
    paths = path if isinstance(path, list | tuple) else [path]
    files = []
    for p in map(Path, paths):
        files += sorted(p.glob("*_edfm.mat")) if p.is_dir() else [p]
    if not files:
        raise FileNotFoundError(f"No Sleep-EDF '*_edfm.mat' file under {paths}.")
    datasets = []
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(f"Sleep-EDF file '{file}' does not exist.")
        mat = scipy.io.loadmat(file)
        if "val" not in mat:
            raise ValueError(f"'{file}' holds no variable 'val'; variables: {sorted(mat)}.")
        val = np.asarray(mat["val"], dtype=np.float64)
        if val.ndim != 2 or val.shape[0] != 1:
            raise ValueError(f"'val' of '{file}' must have shape (1, n_samples), got {val.shape}.")
        if uv_per_unit is not None:
            val = val * uv_per_unit
        info = mne.create_info([channel], sfreq, ch_types="eeg")
        raw = mne.io.RawArray(val, info, verbose="error")
        match = _NAME.search(file.name)
        description = {
            "subject": int(match.group(1)) if match else -1,
            "night": int(match.group(2)) if match else -1,
            "file": file.name,
        }
        datasets.append(RawDataset(raw, description))
    return BaseConcatDataset(datasets)
