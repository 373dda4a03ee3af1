"""Small EDF files laid out as the TUH corpora lay them out, holding real EEG.

The signal is the bundled PhysioNet-MI baseline (subject S001, run 1), its channels
given TUH's names (10-10 T7/T8/P7/P8 are the 10-20 T3/T4/T5/T6; FT7/FT8 stand in for
the ear electrodes A1/A2), resampled to TUH's usual 250 Hz and written with MNE's
EDF export, with two non-EEG channels that the readers must leave out.
"""

from pathlib import Path

import mne
import numpy as np

from benchmarks.tests.bundled import bundled_s001_run

_SOURCE = {
    "FP1": "Fp1",
    "FP2": "Fp2",
    "F3": "F3",
    "F4": "F4",
    "F7": "F7",
    "F8": "F8",
    "FZ": "Fz",
    "C3": "C3",
    "C4": "C4",
    "CZ": "Cz",
    "P3": "P3",
    "P4": "P4",
    "PZ": "Pz",
    "O1": "O1",
    "O2": "O2",
    "T3": "T7",
    "T4": "T8",
    "T5": "P7",
    "T6": "P8",
    "A1": "FT7",
    "A2": "FT8",
}


def _source_raw():
    raw = mne.io.read_raw_edf(bundled_s001_run(1), preload=True, verbose="error")
    mne.datasets.eegbci.standardize(raw)
    return raw.resample(250.0, verbose="error")


def write_tuh_edf(fname, reference="REF", seconds=60.0, offset=0.0):
    """One recording with TUH channel names (``EEG FP1-REF`` or ``EEG FP1-LE``)."""
    source = _source_raw()
    start = int(offset * 250)
    stop = start + int(seconds * 250)
    data = source.get_data(picks=list(_SOURCE.values()))[:, start:stop]
    extra = np.random.default_rng(0).normal(scale=1e-4, size=(2, data.shape[1]))
    names = [f"EEG {k}-{reference}" for k in _SOURCE] + ["EEG EKG1-REF", "EMG-REF"]
    info = mne.create_info(names, 250.0, ["eeg"] * len(_SOURCE) + ["ecg", "emg"])
    raw = mne.io.RawArray(np.vstack([data, extra]), info, verbose="error")
    fname = Path(fname)
    fname.parent.mkdir(parents=True, exist_ok=True)
    mne.export.export_raw(fname, raw, fmt="edf", overwrite=True, verbose="error")
    return fname


def write_csv_bi(fname, seizures, duration=60.0):
    """A TUSZ term-based annotation: seizure intervals, background elsewhere."""
    lines = [
        "# version = csv_v1.0.0",
        f"# bname = {Path(fname).stem}",
        f"# duration = {duration:.2f} secs",
        "#",
        "channel,start_time,stop_time,label,confidence",
    ]
    edges = [0.0]
    for start, stop in seizures:
        edges += [start, stop]
    edges.append(duration)
    for i in range(len(edges) - 1):
        if edges[i + 1] > edges[i]:
            label = "seiz" if i % 2 == 1 else "bckg"
            lines.append(f"TERM,{edges[i]:.4f},{edges[i + 1]:.4f},{label},1.0000")
    Path(fname).write_text("\n".join(lines) + "\n")


def make_tuab(root):
    """tuh_eeg_abnormal/v3.0.1/edf/{train,eval}/{normal,abnormal}/01_tcp_ar/*.edf"""
    edf = Path(root) / "tuh_eeg_abnormal" / "v3.0.1" / "edf"
    files = {
        ("train", "normal"): ["aaaaaaaa_s001_t000", "aaaaaaab_s002_t001"],
        ("train", "abnormal"): ["aaaaaaac_s001_t000", "aaaaaaad_s004_t000"],
        ("eval", "normal"): ["aaaaaaae_s001_t000"],
        ("eval", "abnormal"): ["aaaaaaaf_s003_t002"],
    }
    for (split, label), names in files.items():
        for name in names:
            write_tuh_edf(edf / split / label / "01_tcp_ar" / f"{name}.edf")
    return edf


def make_tusz(root):
    """tuh_eeg_seizure/v2.0.3/edf/{train,dev,eval}/<subject>/<session>/<montage>/*.edf"""
    edf = Path(root) / "tuh_eeg_seizure" / "v2.0.3" / "edf"
    recordings = [
        ("train", "aaaaaaac", "s001_2002", "02_tcp_le", [(35.0, 50.0)]),
        ("train", "aaaaaaag", "s002_2004", "01_tcp_ar", []),
        ("dev", "aaaaaaah", "s001_2010", "01_tcp_ar", [(5.0, 12.0), (58.0, 60.0)]),
        ("eval", "aaaaaaai", "s001_2015", "01_tcp_ar", [(20.0, 31.0)]),
    ]
    for split, subject, session, montage, seizures in recordings:
        name = f"{subject}_{session.split('_')[0]}_t000"
        folder = edf / split / subject / session / montage
        write_tuh_edf(folder / f"{name}.edf", reference="LE" if "le" in montage else "REF")
        write_csv_bi(folder / f"{name}.csv_bi", seizures)
    return edf


def make_tueg(root, subjects=("aaaaaaaa", "aaaaaaac", "aaaaaaax")):
    """tuh_eeg/v2.0.0/edf/000/<subject>/s001_2015_12_30/01_tcp_ar/<subject>_s001_t000.edf"""
    edf = Path(root) / "tuh_eeg" / "v2.0.0" / "edf"
    for subject in subjects:
        folder = edf / "000" / subject / "s001_2015_12_30" / "01_tcp_ar"
        write_tuh_edf(folder / f"{subject}_s001_t000.edf")
    return edf
