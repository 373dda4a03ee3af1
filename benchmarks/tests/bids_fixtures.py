"""A small BIDS sleep dataset written with mne-bids, holding real EEG.

Twelve channels of the bundled PhysioNet-MI subject S001 (run 3) under the ear-EEG
names, resampled to 250 Hz, with 30-s sleep-stage events (and an ``invalid`` one)
written by mne-bids into each recording's events.tsv.
"""

from pathlib import Path

import mne
import numpy as np
from mne_bids import BIDSPath, write_raw_bids

from benchmarks.tests.bundled import bundled_s001_run
from braindecode_pars.datasets.eesm17 import EESM17_EAR_CHANNELS

_SOURCE = ("FT7", "FC5", "C5", "T7", "TP7", "CP5", "FT8", "FC6", "C6", "T8", "TP8", "CP6")


def make_eesm17(root, subjects=("001", "002", "003")):
    raw0 = mne.io.read_raw_edf(bundled_s001_run(3), preload=True, verbose="error")
    mne.datasets.eegbci.standardize(raw0)
    raw0.resample(250.0, verbose="error")
    data = raw0.get_data(picks=list(_SOURCE))[:, : 4 * 30 * 250]
    stages = {
        "001": ["W", "N1", "N2", "invalid"],
        "002": ["N2", "N3", "REM", "W"],
        "003": ["N3", "N3", "N2", "N1"],
    }
    for i, subject in enumerate(subjects):
        names = [c.lower() if i == 2 else c for c in EESM17_EAR_CHANNELS]  # case may differ
        info = mne.create_info(names + ["EOG"], 250.0, ["eeg"] * 12 + ["eog"])
        eog = np.random.default_rng(i).normal(scale=1e-5, size=(1, data.shape[1]))
        raw = mne.io.RawArray(
            np.vstack([np.roll(data, 2500 * i, axis=1), eog]), info, verbose="error"
        )
        raw.info["line_freq"] = 50
        raw.set_annotations(mne.Annotations(np.arange(4) * 30.0, 30.0, stages[subject]))
        path = BIDSPath(
            subject=subject, session="001", task="sleep", datatype="eeg", root=Path(root)
        )
        write_raw_bids(raw, path, allow_preload=True, format="EDF", overwrite=True, verbose="error")
    return Path(root), stages
