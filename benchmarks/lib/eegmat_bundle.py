"""EEGMAT bundles read by the lab: the file the package bundles, and the bundles of
other subjects that ``braindecode_pars.datasets.bundled.write_eegmat_bundle`` writes
(``bench_finetuning_outer``, ``bench_token_readout``)."""

from __future__ import annotations

from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset, RawDataset

from braindecode_pars.datasets import bundled_data_path

#: The bundled EEGMAT file's name, in the folder ``bundled_data_path()`` finds.
EEGMAT_BUNDLE = "eegmat_100hz.npz"


def bundled_eegmat_file():
    """Path of the bundled EEGMAT file."""
    return bundled_data_path() / EEGMAT_BUNDLE


def read_eegmat_bundle(path, subjects):
    """The recordings of ``subjects`` in the EEGMAT bundle ``path`` (as
    ``write_eegmat_bundle`` writes it) as a braindecode dataset of raws (microvolts, the
    bundle's rate), as the package reads its own bundle.

    Raises
    ------
    ValueError
        If a subject of ``subjects`` is not in the bundle.
    """
    with np.load(Path(path)) as f:
        ch_names = [str(c) for c in f["ch_names"]]
        sfreq = float(f["sfreq"])
        meta = f["meta"]
        wanted = set(np.atleast_1d(subjects).tolist())
        held = sorted({int(m[0]) for m in meta})
        missing = sorted(wanted - set(held))
        if missing:
            raise ValueError(f"Subjects {missing} are not in {path}; it holds {held}.")
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
