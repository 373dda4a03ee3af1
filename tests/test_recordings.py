"""load_recordings on files MNE writes in several formats; shared_corpus on ../shared/data."""

import importlib.util
import logging
from pathlib import Path

import mne
import numpy as np
import pytest

from braindecode_pars.datasets import (
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
    find_recordings,
    load_recordings,
    recording_preprocessors,
    shared_corpus,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
HAS_PYBV = importlib.util.find_spec("pybv") is not None


def make_raw(seconds=65.0, sfreq=250.0, n_eeg=3, eog=False, seed=0):
    """White noise plus a 10 Hz rhythm, in volts (tens of microvolts)."""
    rng = np.random.default_rng(seed)
    n_times = int(seconds * sfreq)
    t = np.arange(n_times) / sfreq
    data = 1e-5 * (rng.standard_normal((n_eeg, n_times)) + 2 * np.sin(2 * np.pi * 10 * t))
    names, types = [f"EEG{c}" for c in range(n_eeg)], ["eeg"] * n_eeg
    if eog:
        data = np.vstack([data, 1e-4 * rng.standard_normal(n_times)])
        names, types = names + ["EOG"], types + ["eog"]
    info = mne.create_info(names, sfreq, ch_types=types)
    return mne.io.RawArray(data, info, verbose="error")


def write(raw, path, fmt):
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "fif":
        raw.save(path, verbose="error")
    else:
        mne.export.export_raw(path, raw, fmt=fmt, verbose="error")
    return path


FORMATS = [
    pytest.param("edf", "rec.edf", id="edf"),
    pytest.param("fif", "rec_raw.fif", id="fif"),
    pytest.param(
        "brainvision",
        "rec.vhdr",
        id="brainvision",
        marks=pytest.mark.skipif(not HAS_PYBV, reason="BrainVision export needs pybv"),
    ),
]


@pytest.mark.parametrize("fmt, name", FORMATS)
def test_windows_come_out_at_the_requested_rate_and_length(tmp_path, fmt, name):
    raw = make_raw()
    write(raw, tmp_path / name, fmt)
    windows = load_recordings(str(tmp_path / "*"), sfreq=100.0, window_seconds=10.0)
    assert len(windows.datasets) == 1  # BrainVision's .vmrk and .eeg are not recordings
    assert len(windows) == 6  # 65 s: six whole 10-s windows, the rest dropped
    X, _, _ = windows[1]
    assert X.shape == (3, 1000)
    assert windows.datasets[0].raw.info["sfreq"] == 100
    assert windows.description.file.tolist() == [str(tmp_path / name)]
    # the same preprocessing done by hand on the source: band-pass 0.3-45 Hz, resample
    expected = raw.copy().filter(0.3, 45.0, verbose="error").resample(100.0, verbose="error")
    scale = np.abs(expected.get_data()).max()
    np.testing.assert_allclose(X, expected.get_data()[:, 1000:2000], atol=1e-3 * scale)


def test_a_folder_skips_short_recordings_with_a_warning_and_keeps_eeg(tmp_path, caplog):
    write(make_raw(eog=True), tmp_path / "long_raw.fif", "fif")
    write(make_raw(seconds=5.0, seed=1), tmp_path / "sub" / "short.edf", "edf")
    (tmp_path / "notes.txt").write_text("not a recording")
    with caplog.at_level(logging.WARNING, logger="braindecode_pars.datasets.recordings"):
        windows = load_recordings(tmp_path, sfreq=100.0, window_seconds=30.0, stride_seconds=5.0)
    assert len(windows.datasets) == 1 and windows.description.file[0].endswith("long_raw.fif")
    assert len(windows) == 8  # starts 0, 5, ..., 35 s in 65 s
    assert windows[0][0].shape == (3, 3000)  # the EOG channel is left out
    assert any(
        "Skipping" in r.message and "short.edf" in r.message and "shorter than one 30-s window"
        for r in caplog.records
    )
    with pytest.raises(ValueError, match=r"No recording is at least window_seconds=100"):
        load_recordings(tmp_path, window_seconds=100.0)


def test_upsampled_recordings_and_notch(tmp_path):
    write(make_raw(sfreq=80.0), tmp_path / "slow_raw.fif", "fif")
    # 75 Hz low-pass lies above the 40 Hz Nyquist frequency of the file: left out
    windows = load_recordings(tmp_path, sfreq=200.0, window_seconds=10.0, notch_freq=50.0)
    assert windows[0][0].shape == (3, 2000) and len(windows) == 6
    steps = recording_preprocessors(sfreq=250.0, notch_freq=[50.0, 100.0])
    assert [s.fn if isinstance(s.fn, str) else s.fn.__name__ for s in steps] == [
        "pick",
        "load_data",
        "band_pass",
        "notch",
        "resample",
    ]
    assert steps[2].kwargs == {"l_freq": 0.3, "h_freq": 75.0}


def test_no_match_raises_naming_the_pattern(tmp_path):
    pattern = str(tmp_path / "**" / "*.bdf")
    with pytest.raises(FileNotFoundError, match=r"No recording matches '.*\*\*/\*\.bdf'"):
        load_recordings(pattern)
    with pytest.raises(FileNotFoundError, match="No recording matches"):
        find_recordings([tmp_path])  # an empty folder
    with pytest.raises(FileNotFoundError, match="No recording matches '.*missing.edf'"):
        find_recordings(tmp_path / "missing.edf")


def test_find_recordings_lists_each_file_once(tmp_path):
    a = write(make_raw(seconds=2.0), tmp_path / "a.edf", "edf")
    b = write(make_raw(seconds=2.0), tmp_path / "b_raw.fif", "fif")
    files = find_recordings([tmp_path, str(tmp_path / "*.edf"), a])
    assert files == [a, b]
    with pytest.raises(ValueError, match=r"has channels picks='eog'"):
        load_recordings(tmp_path, picks="eog")


def test_shared_corpus_leaves_out_the_eegmat_test_subjects():
    windows = shared_corpus(DATA, sfreq=100.0, window_seconds=30.0)
    description = windows.description
    eegmat = description[description.dataset == "eegmat"]
    sleep = description[description.dataset == "sleep-edf"]
    assert sorted(set(eegmat.subject.astype(int))) == list(EEGMAT_TRAIN_SUBJECTS)
    assert not set(eegmat.subject.astype(int)) & set(EEGMAT_TEST_SUBJECTS)
    assert len(eegmat) == 48 and len(sleep) == 9
    assert {(ds.raw.info["sfreq"], len(ds.raw.ch_names)) for ds in windows.datasets} == {
        (100.0, 19),
        (100.0, 1),
    }
    lengths = {np.asarray(windows[i][0]).shape[1] for i in (0, len(windows) - 1)}
    assert lengths == {3000}
    n_sleep = sum(len(ds) for ds in windows.datasets[48:])
    assert n_sleep == 9 * 333  # 10,000 s a night, non-overlapping 30-s windows


def test_pretrain_and_store_commands_read_recordings(tmp_path):
    """``braindecode-pars pretrain --recordings GLOB`` and ``store --recordings GLOB``."""
    import json

    from braindecode_pars.cli import main
    from braindecode_pars.datasets import SingleChannelWindows

    for i in range(2):
        write(make_raw(seconds=40.0, seed=i), tmp_path / "data" / f"s{i}.edf", "edf")
    pattern = str(tmp_path / "data" / "*.edf")
    store = ["store", "--recordings", pattern, "--out", str(tmp_path / "store")]
    assert main([*store, "--window-seconds", "10", "--stride-seconds", "10"]) == 0
    view = SingleChannelWindows.from_store(tmp_path / "store")
    assert view.sfreq == 100 and view.n_times == 1000 and len(view) == 2 * 4  # 4 x 10 s each
    small = ["--emb-dim", "16", "--depth", "1", "--n-heads", "2", "--ff-dim", "16"]
    args = ["pretrain", "--recordings", pattern, "--out", str(tmp_path / "run"), "--steps", "4"]
    assert main([*args, *small, "--n-patches", "10", "--batch-size", "4", "--device", "cpu"]) == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["sfreq"] == 100 and config["lr"] == 1e-3 and config["n_times"] == 1000
    assert (tmp_path / "run" / "encoder.pt").is_file()
