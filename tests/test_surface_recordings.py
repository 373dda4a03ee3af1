"""Input reading as a new user meets it: one-channel recordings whose channel is named
differently (sleep labs mix derivations: C3-A1, CZ-A1, Fpz-Cz) stack by position and
the log says so; recordings that share no channel are refused with remedies, never with
an empty pick."""

import logging

import mne
import numpy as np
import pytest

from braindecode_pars import PARSProbe
from braindecode_pars.io import load_labelled_recordings, load_recordings, read_windows

#: One derivation per night, as sleep labs record them.
DERIVATIONS = ["C3-A1", "CZ-A1", "Fpz-Cz", "C3-A1", "CZ-A1", "Fpz-Cz"]


def _night(path, channels, label, seed, seconds=120.0, sfreq=100.0):
    """An EDF of white noise in volts; label 1 carries a strong 10 Hz rhythm, label 0 a
    weak one, so that band power tells the labels apart."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sfreq)) / sfreq
    rhythm = (4.0 if label else 0.3) * np.sin(2 * np.pi * 10 * t)
    data = 1e-5 * (rng.standard_normal((len(channels), t.size)) + rhythm)
    raw = mne.io.RawArray(data, mne.create_info(channels, sfreq, "eeg"), verbose="error")
    mne.export.export_raw(path, raw, fmt="edf", verbose="error")
    return path


@pytest.fixture
def nights(tmp_path):
    """Six one-channel nights of three derivations, labels alternating."""
    folder = tmp_path / "nights"
    folder.mkdir()
    for i, name in enumerate(DERIVATIONS):
        _night(folder / f"sub-{i}_label-{i % 2}.edf", [name], i % 2, seed=i)
    return folder


def _messages(caplog, logger):
    return [r.getMessage() for r in caplog.records if r.name == logger]


def test_one_channel_recordings_of_several_names_stack_and_the_log_names_them(nights, caplog):
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        windows = load_labelled_recordings(
            nights, r"sub-(?P<subject>\d+)_label-(?P<label>\d)", window_seconds=10.0
        )
    assert windows.X.shape == (6 * 12, 1, 1000)  # six nights of twelve 10-s windows
    assert windows.ch_names is None  # no one name is the channel of every window
    # each night's windows in file order, each its own signal: the stack is by position
    single = load_recordings(nights / "sub-2_label-0.edf", window_seconds=10.0)
    np.testing.assert_array_equal(windows.X[24:36], read_windows(single).X)
    (stacked,) = [m for m in _messages(caplog, "braindecode_pars.io.windows")]
    assert "one-channel recordings of 3 channel names, stacked by position" in stacked
    assert "C3-A1 (2 recordings), CZ-A1 (2 recordings), Fpz-Cz (2 recordings)" in stacked
    said = " ".join(_messages(caplog, "braindecode_pars.io.recordings"))
    assert "one channel each, under 3 names" in said and "picks=" not in said
    assert "1 channels" not in said and "1 recordings" not in said


def test_the_probe_fits_and_predicts_one_channel_nights_of_two_derivations(tmp_path):
    for folder in ("train", "new"):
        (tmp_path / folder).mkdir()
    for i, name in enumerate(["C3-A1", "Fpz-Cz"] * 2):
        _night(tmp_path / "train" / f"sub-{i}_label-{i // 2}.edf", [name], i // 2, seed=i)
    windows = load_labelled_recordings(
        tmp_path / "train", r"sub-(?P<subject>\d+)_label-(?P<label>\d)", window_seconds=10.0
    )
    probe = PARSProbe().fit(windows)
    assert list(probe.classes_) == ["0", "1"]
    # a new night of each label and of each derivation, unseen: told apart by band power
    for i, (name, label) in enumerate([("Fpz-Cz", 0), ("C3-A1", 1)]):
        _night(tmp_path / "new" / f"sub-9{i}_label-{label}.edf", [name], label, seed=90 + i)
    new = load_labelled_recordings(
        tmp_path / "new", r"sub-(?P<subject>\d+)_label-(?P<label>\d)", window_seconds=10.0
    )
    assert (probe.predict(new) == new.y).mean() == 1.0


def test_braindecode_windows_of_one_channel_nights_stack_too(nights, caplog):
    windows = load_recordings(nights, window_seconds=10.0)  # braindecode windows
    with caplog.at_level(logging.INFO, logger="braindecode_pars.io.windows"):
        read = read_windows(windows, y=np.zeros(len(windows)), sfreq=None)
    assert read.X.shape == (72, 1, 1000) and read.sfreq == 100.0
    assert any("stacked by position" in m for m in _messages(caplog, "braindecode_pars.io.windows"))


def test_recordings_that_share_no_channel_are_refused_without_an_empty_pick(tmp_path, caplog):
    _night(tmp_path / "sub-0_label-0.edf", ["C3", "C4"], 0, seed=0)
    _night(tmp_path / "sub-1_label-1.edf", ["F3", "F4"], 1, seed=1)
    with caplog.at_level(logging.WARNING, logger="braindecode_pars.io.recordings"):
        with pytest.raises(ValueError) as error:
            load_labelled_recordings(tmp_path, r"sub-(?P<subject>\d)_label-(?P<label>\d)")
    message = str(error.value)
    assert "2 channel sets" in message and "1 with 2 channels: C3, C4" in message
    assert "They share no channel, so no pick gives them one set" in message
    assert "Raw.rename_channels" in message
    assert "picks=[]" not in message and "--channels )" not in message
    assert message.startswith("The recordings' headers (read before any preprocessing)")
    assert _messages(caplog, "braindecode_pars.io.recordings") == []  # said once, in the error


def test_recordings_sharing_some_channels_are_told_the_channels_to_pick(tmp_path):
    _night(tmp_path / "sub-0_label-0.edf", ["C3", "C4", "Cz"], 0, seed=0)
    _night(tmp_path / "sub-1_label-1.edf", ["C3", "F4"], 1, seed=1)
    with pytest.raises(ValueError, match=r"Keep the 1 channel they share .*: picks=\['C3'\]"):
        load_labelled_recordings(tmp_path, r"sub-(?P<subject>\d)_label-(?P<label>\d)")
    picked = load_labelled_recordings(
        tmp_path, r"sub-(?P<subject>\d)_label-(?P<label>\d)", picks=["C3"]
    )
    assert picked.X.shape[1] == 1 and picked.ch_names == ["C3"]
