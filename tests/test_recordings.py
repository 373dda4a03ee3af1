"""load_recordings on files MNE writes in several formats and on the EEGMAT files of
../shared/data; shared_corpus on ../shared/data (the tests that read it are skipped where
that folder is absent)."""

import importlib.util
import logging
import shutil
from pathlib import Path

import mne
import numpy as np
import pytest
from braindecode.datasets import BaseConcatDataset

from braindecode_pars.datasets.corpus import shared_corpus
from braindecode_pars.datasets.eegmat import EEGMAT_TEST_SUBJECTS, EEGMAT_TRAIN_SUBJECTS
from braindecode_pars.io.recordings import find_recordings, load_recordings
from braindecode_pars.io.windowing import recording_preprocessors
from braindecode_pars.pretraining import SingleChannelWindows

from ._helpers import tiny_config

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
    # the same preprocessing done by hand on the source (band-pass 0.3-45 Hz, resample),
    # in microvolts: 1e6 times MNE's volts
    expected = raw.copy().filter(0.3, 45.0, verbose="error").resample(100.0, verbose="error")
    expected = 1e6 * expected.get_data()
    assert 5 < np.std(expected) < 50  # tens of microvolts
    scale = np.abs(expected).max()
    np.testing.assert_allclose(X, expected[:, 1000:2000], atol=1e-3 * scale)


def test_a_folder_skips_short_recordings_with_a_warning_and_keeps_eeg(tmp_path, caplog):
    write(make_raw(eog=True), tmp_path / "long_raw.fif", "fif")
    write(make_raw(seconds=5.0, seed=1), tmp_path / "sub" / "short.edf", "edf")
    (tmp_path / "notes.txt").write_text("not a recording")
    with caplog.at_level(logging.WARNING, logger="braindecode_pars.io.recordings"):
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
        "_band_pass",
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
    with pytest.raises(
        ValueError, match=r"without the channels picks='eog' .*Their channels: EEG0, EEG1, EEG2\. "
    ):
        load_recordings(tmp_path, picks="eog")


def test_shared_corpus_leaves_out_the_eegmat_test_subjects(shared_data):
    windows = shared_corpus(shared_data, sfreq=100.0, window_seconds=30.0)
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


def test_the_store_command_reads_recordings_and_pretrain_its_store(tmp_path):
    """``braindecode-pars store --recordings GLOB``, then ``pretrain --store``."""
    import json

    from braindecode_pars.cli import main

    for i in range(2):
        write(make_raw(seconds=40.0, seed=i), tmp_path / "data" / f"s{i}.edf", "edf")
    pattern = str(tmp_path / "data" / "*.edf")
    store = ["store", "--recordings", pattern, "--out", str(tmp_path / "store")]
    assert main([*store, "--window-seconds", "10", "--stride-seconds", "10"]) == 0
    view = SingleChannelWindows.from_store(tmp_path / "store")
    assert view.sfreq == 100 and view.n_times == 1000 and len(view) == 2 * 4  # 4 x 10 s each
    args = ["pretrain", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "run")]
    args += ["--steps", "4", "--batch-size", "4", "--device", "cpu"]
    assert main([*args, *tiny_config(tmp_path, n_patches=10)]) == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["sfreq"] == 100 and config["lr"] == 1e-3 and config["n_times"] == 1000
    assert (tmp_path / "run" / "encoder.pt").is_file()


@pytest.fixture(scope="module")
def eegmat_files(shared_data):
    """Two EEGMAT EDF files of the shared data (the test is skipped without them)."""
    return [shared_data / "eegmat" / f"Subject{s:02d}_2.edf" for s in (0, 1)]


def test_edf_channels_are_eeg_only_and_the_kept_channels_are_logged(tmp_path, caplog, eegmat_files):
    for file in eegmat_files:  # EDF types every channel EEG, 'ECG ECG' included
        shutil.copy(file, tmp_path)
    with caplog.at_level(logging.INFO, logger="braindecode_pars.io.recordings"):
        windows = load_recordings(tmp_path, window_seconds=10.0, subject_from="file")
    names = windows.datasets[0].raw.ch_names
    assert len(names) == 19 and "EEG A2-A1" not in names and "ECG ECG" not in names
    assert {tuple(ds.raw.ch_names) for ds in windows.datasets} == {tuple(names)}
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(logged) == 1  # once: both recordings keep the same channels
    assert logged[0].startswith("Pretraining on 19 channels of the 2 recordings: EEG Fp1, ")
    assert logged[0].endswith("left out (exclude='auto'): EEG A2-A1, ECG ECG.")

    # the same channels, one recording at a time
    view = SingleChannelWindows(load_recordings(tmp_path, window_seconds=10.0, lazy=True))
    expected = SingleChannelWindows(windows)
    for a, b in zip(view.recordings, expected.recordings, strict=True):
        np.testing.assert_array_equal(a, b)

    # channels asked for are kept
    every = load_recordings(tmp_path, window_seconds=10.0, exclude=[])
    assert len(every.datasets[0].raw.ch_names) == 21
    picked = load_recordings(tmp_path, window_seconds=10.0, picks=["EEG Fp1", "ECG ECG"])
    assert picked.datasets[0].raw.ch_names == ["EEG Fp1", "ECG ECG"]
    named = load_recordings(tmp_path, window_seconds=10.0, exclude=["ECG ECG"])
    assert named.datasets[0].raw.ch_names[-1] == "EEG A2-A1"
    assert len(named.datasets[0].raw.ch_names) == 20
    with pytest.raises(ValueError, match=r"'auto' and a list of channel names .*got 'none'"):
        load_recordings(tmp_path, exclude="none")


def test_recordings_with_other_channels_are_summed_up_once_and_detailed_at_debug(
    tmp_path, caplog, eegmat_files, shared_data
):
    shutil.copy(eegmat_files[0], tmp_path)
    muse = sorted((shared_data / "muse-cueing").rglob("*.edf"))[0]  # TP9, AF7, AF8, TP10
    shutil.copy(muse, tmp_path)
    with caplog.at_level(logging.DEBUG, logger="braindecode_pars.io.recordings"):
        windows = load_recordings(tmp_path, window_seconds=10.0, subject_from="file")
    assert sorted(len(ds.raw.ch_names) for ds in windows.datasets) == [4, 19]
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(info) == 1 and "2 recordings, 2 channel sets" in info[0]
    assert "left out (exclude='auto', recordings): EEG A2-A1 (1), ECG ECG (1)" in info[0]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any(muse.name in m and "4 channels: TP9, AF7, AF8, TP10; left out" in m for m in debug)
    assert any("Subject00_2.edf: pretraining on 19 channels" in m for m in debug)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith("The recordings have 2 channel sets: 1 ")
    assert "they share no channel: read the recordings of each set apart" in warned[0]
    assert "picks=" not in warned[0]  # no channel in common: no pick to suggest


@pytest.mark.parametrize("lazy", [False, True], ids=["in memory", "lazy"])
def test_an_unreadable_file_is_named_before_any_work_or_skipped(
    tmp_path, caplog, monkeypatch, lazy, eegmat_files
):
    for file in eegmat_files:
        shutil.copy(file, tmp_path)
    (tmp_path / "zz_broken.edf").write_text("a text file, not an EDF recording\n")
    import braindecode_pars.io.recordings as recordings

    def no_work(*args, **kwargs):
        raise AssertionError("preprocessing started before every file was checked")

    with monkeypatch.context() as patch:
        patch.setattr(recordings, "windows_of", no_work)
        patch.setattr(recordings, "fixed_length_windower", no_work)
        with pytest.raises(
            ValueError,
            match=r"Cannot read the recording '.*zz_broken\.edf' \(ValueError: Bad EDF file "
            r"provided\.\)\. Remove it, or pass on_error='skip'",
        ):
            load_recordings(tmp_path, window_seconds=10.0, lazy=lazy)
    with caplog.at_level(logging.WARNING, logger="braindecode_pars.io.recordings"):
        windows = load_recordings(tmp_path, window_seconds=10.0, on_error="skip", lazy=lazy)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    (summary,) = [m for m in warned if "zz_broken.edf" in m]  # one line for the skipped
    assert summary.startswith("Skipped 1 of 3 recordings: 1 that cannot be read (zz_broken.edf;")
    assert "Bad EDF file" in summary
    if lazy:
        assert len(windows) == 2
        windows = BaseConcatDataset([ds for w in windows for ds in w.datasets])
    assert sorted(Path(f).name for f in windows.description.file) == [
        "Subject00_2.edf",
        "Subject01_2.edf",
    ]
    with pytest.raises(ValueError, match="Allowed values are 'raise' and 'skip', but got 'ignore'"):
        load_recordings(tmp_path, on_error="ignore")


def test_shared_corpus_takes_chosen_eegmat_subjects_and_the_muse_headband(shared_data):
    from braindecode_pars.datasets.eegmat import EEGMAT_POOL_SUBJECTS

    windows = shared_corpus(
        shared_data,
        sfreq=100.0,
        window_seconds=10.0,
        eegmat_subjects=EEGMAT_POOL_SUBJECTS,
        muse=True,
    )
    description = windows.description
    eegmat = description[description.dataset == "eegmat"]
    assert sorted(set(eegmat.subject.astype(int))) == list(EEGMAT_POOL_SUBJECTS)
    muse = [
        ds for ds, name in zip(windows.datasets, description.dataset, strict=True) if name == "muse"
    ]
    assert len(muse) == 129  # every recording of the 65 people
    assert all(ds.raw.ch_names == ["TP9", "AF7", "AF8", "TP10"] for ds in muse)
    assert all(ds.raw.info["sfreq"] == 100.0 for ds in muse)
    with pytest.raises(ValueError, match=r"'eegmat_subjects' holds EEGMAT test subjects \[1\]"):
        shared_corpus(shared_data, eegmat_subjects=(0, 1))
