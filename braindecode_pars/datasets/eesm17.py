"""EESM17 wearable ear-EEG sleep staging (OpenNeuro ds004348, BIDS; paper A.3).

Read through mne-bids from a local copy of the BIDS dataset: the 12 ear-EEG channels,
resampled to 200 Hz (the encoder's rate), 0.3-75 Hz band-pass, 50 Hz notch,
microvolts; 30-s windows labelled from the sleep-stage events of each recording's
``events.tsv`` (W, N1, N2, N3, REM), other events ("invalid") left out. The paper
evaluates leave-one-subject-out (:func:`_leave_one_subject_out`).

The channel names and the stage spellings of the events are parameters with
defaults for the Aarhus ear-EEG electrode naming (E, then L or R for the ear, then
the electrode: A, B, C, T, E, I) and the usual stage spellings; a dataset that spells
them otherwise passes its own. Nothing is downloaded here (the dataset is on
OpenNeuro: ``openneuro-py download --dataset ds004348``).
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import mne
import numpy as np
import torch
from braindecode.augmentation import Transform
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import preprocess

from braindecode_pars._util.checks import check_range
from braindecode_pars.datasets._cache import _cached_windows
from braindecode_pars.io.windowing import (
    RecordingStream,
    event_windower,
    event_windows,
    microvolt_preprocessors,
)

logger = logging.getLogger(__name__)

#: The 12 ear-EEG electrodes, 6 per ear (Aarhus naming).
EESM17_EAR_CHANNELS = (
    "ELA",
    "ELB",
    "ELC",
    "ELT",
    "ELE",
    "ELI",
    "ERA",
    "ERB",
    "ERC",
    "ERT",
    "ERE",
    "ERI",
)
#: Sleep-stage event names -> the paper's five classes (W 0, N1 1, N2 2, N3 3, REM 4).
EESM17_STAGES = {
    "W": 0,
    "Wake": 0,
    "wake": 0,
    "Sleep stage W": 0,
    "N1": 1,
    "NREM1": 1,
    "Sleep stage 1": 1,
    "Sleep stage N1": 1,
    "N2": 2,
    "NREM2": 2,
    "Sleep stage 2": 2,
    "Sleep stage N2": 2,
    "N3": 3,
    "NREM3": 3,
    "Sleep stage 3": 3,
    "Sleep stage N3": 3,
    "R": 4,
    "REM": 4,
    "Sleep stage R": 4,
}


def fetch_eesm17(path, subjects=None):
    """Download OpenNeuro ds004348 into ``path`` (needs the internet and ``openneuro-py``).

    Returns ``path``, the BIDS root for :func:`load_eesm17`.
    """
    try:
        import openneuro
    except ImportError as err:
        raise ImportError(
            "Downloading EESM17 needs the 'openneuro-py' package: pip install openneuro-py"
        ) from err
    include = None if subjects is None else [f"sub-{s}" for s in subjects]
    openneuro.download(dataset="ds004348", target_dir=str(path), include=include)
    return Path(path)


def _eesm17_preprocessors(sfreq=200.0, l_freq=0.3, h_freq=75.0, notch_freq=50.0):
    """Microvolts, resample, 0.3-75 Hz band-pass, 50 Hz notch (paper A.3)."""
    return microvolt_preprocessors(sfreq, l_freq, h_freq, notch_freq)


def _pick(raw, channels, fname):
    by_upper = {ch.upper(): ch for ch in raw.ch_names}
    missing = [c for c in channels if c.upper() not in by_upper]
    if missing:
        raise ValueError(f"'{fname}' lacks the channels {missing}.")
    raw.pick([by_upper[c.upper()] for c in channels])
    raw.rename_channels({by_upper[c.upper()]: c for c in channels})
    raw.set_channel_types(dict.fromkeys(channels, "eeg"))
    return raw


def _read_one(path, channels):
    """One BIDS recording as a braindecode RawDataset: the ear channels, loaded."""
    from mne_bids import read_raw_bids

    raw = read_raw_bids(path, verbose="error")
    _pick(raw.load_data(), channels, path.fpath)
    description = dict(subject=path.subject, session=path.session or "", path=str(path.fpath))
    return RawDataset(raw, description=description)


def load_eesm17(
    bids_root,
    subjects=None,
    channels=EESM17_EAR_CHANNELS,
    stages=None,
    sfreq=200.0,
    window_seconds=30.0,
    n_jobs=1,
    cache_dir=None,
):
    """EESM17 sleep-stage windows from a BIDS dataset, through mne-bids.

    Parameters
    ----------
    bids_root : str | Path
        The BIDS dataset's root folder.
    subjects : list of str | None
        BIDS subject labels (``"001"``); all by default.
    channels : tuple of str
        The ear-EEG channels, matched without regard to case.
    stages : dict of str -> int | None
        Event names to classes; :data:`EESM17_STAGES` by default. Events not named
        (``invalid``) are left out.
    sfreq, window_seconds : float
        Resampling rate and window length (paper: 30 s).
    n_jobs : int
        Parallel jobs of the preprocessing (without ``cache_dir``).
    cache_dir : str | Path | None
        As for :func:`~braindecode_pars.datasets.load_tuab`: None holds every recording
        in memory; a folder is where each recording's windows are written once and
        read back lazily.

    Returns
    -------
    windows : braindecode BaseConcatDataset
        Description columns ``subject`` and ``session``.
    """
    from mne_bids import find_matching_paths

    bids_root = Path(bids_root)
    if not (bids_root / "dataset_description.json").is_file():
        raise FileNotFoundError(
            f"'{bids_root}' is not a BIDS dataset (dataset_description.json is missing)."
        )
    stages = EESM17_STAGES if stages is None else stages
    paths = find_matching_paths(
        bids_root,
        subjects=subjects,
        datatypes="eeg",
        suffixes="eeg",
        extensions=[".edf", ".bdf", ".set", ".vhdr", ".fif"],
    )
    if not paths:
        raise FileNotFoundError(f"No EEG recording under '{bids_root}' for subjects {subjects}.")
    if cache_dir is not None:
        stream = RecordingStream(
            [functools.partial(_read_one, path, channels) for path in paths],
            event_windower(_eesm17_preprocessors(sfreq), stages, window_seconds),
        )
        settings = {
            "reader": "load_eesm17",
            "files": [str(Path(path.fpath).resolve()) for path in paths],
            "channels": list(channels),
            "stages": stages,
            "sfreq": sfreq,
            "window_seconds": window_seconds,
        }
        return _cached_windows(stream, cache_dir, settings)
    ds = BaseConcatDataset([_read_one(path, channels) for path in paths])
    with mne.use_log_level("error"):
        preprocess(ds, _eesm17_preprocessors(sfreq), n_jobs=n_jobs)
    return event_windows(ds, stages, window_seconds)


def _leave_one_subject_out(windows):
    """Yield ``(subject, train, test)`` for every subject: the paper's EESM17 folds."""
    subjects = sorted(set(windows.description["subject"]))
    if len(subjects) < 2:
        raise ValueError(f"Leave-one-subject-out needs two subjects, but got {subjects}.")
    for subject in subjects:
        role = np.where(windows.description["subject"] == subject, "test", "train")
        split = windows.split(
            {name: np.flatnonzero(role == name).tolist() for name in ("train", "test")}
        )
        yield subject, split["train"], split["test"]


def _channel_noise(X, y, std, channel_probability, random_state=None):
    """Add Gaussian noise to randomly chosen channels, scaled to each channel's spread."""
    rng = np.random.default_rng(random_state)
    B, C, _ = X.shape
    chosen = torch.as_tensor(rng.random((B, C)) < channel_probability, device=X.device)
    scale = X.std(dim=-1, keepdim=True) * std
    noise = torch.as_tensor(rng.standard_normal(X.shape), dtype=X.dtype, device=X.device)
    return X + noise * scale * chosen[..., None], y


class ChannelNoise(Transform):
    """Gaussian noise on randomly selected channels (the paper's EESM17 fine-tuning).

    Each channel of an augmented window is chosen with ``channel_probability`` and
    gets white noise of ``std`` times its own standard deviation in that window, so
    that the augmentation is independent of the signal's unit (paper A.3: "we also
    add Gaussian noise to randomly selected channels during fine-tuning").

    Parameters
    ----------
    probability : float
        Probability that a window is augmented at all.
    std : float
        Noise level relative to each channel's standard deviation.
    channel_probability : float
        Probability that a channel of an augmented window gets noise.
    random_state : int | numpy.random.Generator | None
    """

    operation = staticmethod(_channel_noise)

    def __init__(self, probability=0.5, std=1.0, channel_probability=0.25, random_state=None):
        super().__init__(probability=probability, random_state=random_state)
        self.std = check_range("std", std, 0, float("inf"))
        self.channel_probability = check_range("channel_probability", channel_probability, 0, 1)

    def get_augmentation_params(self, *batch):
        return {
            "std": self.std,
            "channel_probability": self.channel_probability,
            "random_state": self.rng,
        }
