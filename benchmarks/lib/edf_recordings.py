"""Synthetic EDF recordings for the store benchmark (``bench_store``): 19 EEG channels
of the 10-20 system and an ECG channel at 256 Hz."""

from __future__ import annotations

import shutil

#: The recordings' sampling rate (Hz).
SFREQ = 256.0
#: The 19 EEG channels of the 10-20 system, named as EDF files name them.
CHANNELS = [
    f"EEG {c}" for c in "Fp1 Fp2 F3 F4 F7 F8 T3 T4 C3 C4 T5 T6 P3 P4 O1 O2 Fz Cz Pz".split()
]
N_EEG = len(CHANNELS)


def write_recordings(folder, n, seconds, distinct=5):
    """``n`` EDF files: ``distinct`` synthetic recordings, then copies of them."""
    import mne
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        path = folder / f"rec{i:04d}.edf"
        if i >= distinct:
            shutil.copy(folder / f"rec{i % distinct:04d}.edf", path)
            continue
        rng = np.random.default_rng(i)
        n_times = int(seconds * SFREQ)
        t = np.arange(n_times) / SFREQ
        eeg = 2e-5 * rng.standard_normal((N_EEG, n_times)) + 1e-5 * np.sin(2 * np.pi * 10 * t)
        ecg = 1e-3 * np.sin(2 * np.pi * 1.2 * t)[None]
        info = mne.create_info(CHANNELS + ["ECG ECG"], SFREQ, "eeg")  # EDF: all typed EEG
        raw = mne.io.RawArray(np.vstack([eeg, ecg]), info, verbose="error")
        mne.export.export_raw(path, raw, fmt="edf", overwrite=True, verbose="error")
