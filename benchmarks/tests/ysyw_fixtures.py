"""Small records laid out as the PhysioNet/CinC Challenge 2018 (YSYW) lays them out.

Real EEG (the bundled PhysioNet-MI subject S001, run 3: its F3, F4, C3, C4, O1 and O2
under the challenge's derivation names), resampled to 200 Hz, written as a WFDB header
and .mat signal file, with an ``arousal`` annotation file holding 30-s sleep stages, an
``undefined`` epoch and one arousal.
"""

import os
import shutil
import tempfile
from pathlib import Path

import mne
import numpy as np
import wfdb
import wfdb.io.convert.matlab as wfdb_matlab

from benchmarks.tests.bundled import bundled_s001_run
from braindecode_pars.datasets.ysyw import YSYW_CHANNELS

_SOURCE = ("F3", "F4", "C3", "C4", "O1", "O2")


def write_record(folder, name, stages, arousal=True):
    """One record of len(stages) 30-s epochs; stages None: no annotation file (test set)."""
    raw = mne.io.read_raw_edf(bundled_s001_run(3), preload=True, verbose="error")
    mne.datasets.eegbci.standardize(raw)
    raw.resample(200.0, verbose="error")
    n = len(stages or ["W"] * 4) * 6000 + 200  # a second past the last epoch
    signal = raw.get_data(picks=list(_SOURCE))[:, :n].T * 1e6  # microvolts, (n, 6)
    folder = Path(folder) / name
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp())
    cwd = os.getcwd()
    try:  # WFDB's .mat writer works in the current folder
        os.chdir(work)
        wfdb.wrsamp(
            name,
            fs=200,
            units=["uV"] * 6,
            sig_name=list(YSYW_CHANNELS),
            p_signal=signal,
            fmt=["16"] * 6,
        )
        wfdb_matlab.wfdb_to_mat(name)
        stem = name.replace("-", "_") + "m"
        header = (work / f"{stem}.hea").read_text().replace(stem, name)
        (folder / f"{name}.hea").write_text(header)
        shutil.copy(work / f"{stem}.mat", folder / f"{name}.mat")
    finally:
        os.chdir(cwd)
        shutil.rmtree(work)
    if stages is not None:
        samples = [1 + 6000 * i for i in range(len(stages))]  # wfdb drops a note at sample 0
        notes = list(stages)
        if arousal:
            samples += [6500, 7500]
            notes += ["(arousal_rera", "arousal_rera)"]
        order = np.argsort(samples, kind="stable")
        wfdb.wrann(
            name,
            "arousal",
            sample=np.array(samples)[order],
            symbol=['"'] * len(samples),
            aux_note=[notes[i] for i in order],
            write_dir=str(folder),
        )
    return folder


def make_ysyw(root):
    """training/: five annotated records; test/: two without annotations."""
    root = Path(root)
    stages = {
        "tr03-0005": ["W", "N1", "N2", "undefined"],
        "tr03-0029": ["N2", "N3", "N3", "R"],
        "tr04-0014": ["W", "W", "R", "N1"],
        "tr05-1034": ["N2", "N2", "N3", "W"],
        "tr07-0168": ["R", "N1", "W", "N2"],
    }
    for name, st in stages.items():
        write_record(root / "training", name, st)
    for name in ("te03-0001", "te05-0047"):
        write_record(root / "test", name, None)
    return root, stages
