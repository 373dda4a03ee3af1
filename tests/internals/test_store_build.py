"""Building a window store: worker processes, resuming a stopped build, float16, and the
counts of recordings read, skipped and written."""

import filecmp
import functools
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import mne
import numpy as np
import pytest
from braindecode.datasets import BaseConcatDataset, RawDataset

from braindecode_pars.io.recordings import load_recordings
from braindecode_pars.io.windowing import RecordingStream, fixed_length_windower
from braindecode_pars.store import _build as store_build
from braindecode_pars.store import read_window_store, write_window_store
from braindecode_pars.store._build import float16_scale
from braindecode_pars.store.errors import (
    StoreBuildStopped,
    StoreDataLostError,
    StoreMismatchError,
)

STORE_FILES = ["data.f32", "index.npz", "info.json", "recordings.json"]


def save_recordings(folder, n, seconds=40.0, sfreq=250.0, scale=1e-5):
    """``n`` FIF recordings of 3 EEG channels (random, ``scale`` volts) and an ECG."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        rng = np.random.default_rng(i)
        data = scale * rng.standard_normal((4, int(seconds * sfreq)))
        info = mne.create_info(["C3", "C4", "Cz", "ECG"], sfreq, ["eeg"] * 3 + ["ecg"])
        raw = mne.io.RawArray(data, info, verbose="error")
        raw.save(folder / f"r{i:02d}_raw.fif", verbose="error")
    return str(folder / "*.fif")


def same_store(a, b):
    """Whether two store folders hold the same files with the same bytes."""
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    return all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


OPTIONS = dict(sfreq=100.0, window_seconds=5.0, stride_seconds=2.5)


@pytest.mark.serial
@pytest.mark.slow  # starting worker processes, which import torch
def test_two_jobs_write_the_same_bytes_as_one(tmp_path, monkeypatch):
    pattern = save_recordings(tmp_path / "rec", 5)
    stream = load_recordings(pattern, lazy=True, **OPTIONS)
    write_window_store(stream, tmp_path / "one", jobs=1)
    write_window_store(stream, tmp_path / "two", jobs=2)  # this process helps at the start
    assert sorted(os.listdir(tmp_path / "one")) == STORE_FILES
    assert same_store(tmp_path / "one", tmp_path / "two")
    monkeypatch.setattr(store_build, "PARENT_HELPS", False)  # the workers prepare all
    units, _, _, parallel = store_build._units(stream)
    results = list(store_build._results(units, 1, 2, parallel, "<f4", "raise"))
    assert [position for position, _ in results] == [1, 2, 3, 4]  # in order, from 1
    pids = {prepared["pid"] for _, prepared in results}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    write_window_store(stream, tmp_path / "workers", jobs=2)
    assert same_store(tmp_path / "one", tmp_path / "workers")
    recordings, index, info = read_window_store(tmp_path / "two")
    assert info["n_recordings"] == 5 and len(index) == 5 * 15
    # the data is the recording preprocessed, in microvolts, not a copy of another one
    raw = mne.io.read_raw_fif(tmp_path / "rec" / "r03_raw.fif", verbose="error", preload=True)
    raw.pick(["C3", "C4", "Cz"]).filter(0.3, 45.0, verbose="error").resample(100.0)
    np.testing.assert_allclose(recordings[3], raw.get_data() * 1e6, rtol=1e-4, atol=1e-3)


def slow_reader(seed, delay=0.0):
    """A recording that takes ``delay`` seconds to read (a build to stop partway)."""
    time.sleep(delay)
    rng = np.random.default_rng(seed)
    info = mne.create_info(["C3", "C4"], 100.0, "eeg")
    raw = mne.io.RawArray(rng.standard_normal((2, 3000)), info, verbose="error")
    return RawDataset(raw, {"seed": seed})


def slow_stream(n=8, delay=0.0):
    readers = [functools.partial(slow_reader, seed, delay) for seed in range(n)]
    return RecordingStream(readers, fixed_length_windower(None, 100.0, 5.0))


@pytest.mark.serial
@pytest.mark.slow  # a Python process that imports torch, killed
def test_a_build_killed_partway_resumes_to_the_same_bytes(tmp_path):
    write_window_store(slow_stream(), tmp_path / "whole", settings={"n": 8})
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_store_build import slow_stream
        from braindecode_pars.store import write_window_store
        write_window_store(slow_stream(delay=0.4), {str(tmp_path / "killed")!r},
                           settings={{"n": 8}})
        """
    )
    process = subprocess.Popen([sys.executable, "-c", script])
    journal = tmp_path / "killed" / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if journal.exists() and journal.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert not (tmp_path / "killed" / "index.npz").exists()  # stopped before its end
    done = journal.read_bytes().count(b"\n")
    assert 3 <= done < 8
    with pytest.raises(StoreMismatchError, match=r"n: saved 8, now 9.*overwrite=True"):
        write_window_store(slow_stream(), tmp_path / "killed", settings={"n": 9})
    read = []
    stream = slow_stream()
    stream._parts = [(tuple(_recorded(r, read) for r in stream._parts[0][0]),
                      *stream._parts[0][1:])]  # fmt: skip
    write_window_store(stream, tmp_path / "killed", settings={"n": 8})
    assert sorted(read) == list(range(done, 8))  # the stored recordings are not read again
    assert same_store(tmp_path / "whole", tmp_path / "killed")
    # the same command again: the store is complete, nothing is read
    write_window_store(stream, tmp_path / "killed", settings={"n": 8})
    assert sorted(read) == list(range(done, 8))


def _recorded(reader, read):
    def read_and_note():
        read.append(reader.args[0])
        return reader()

    return read_and_note


class Stop(Exception):
    pass


def stop_reader():
    raise Stop


def test_data_and_a_journal_line_cut_by_a_stop_are_dropped_on_resume(tmp_path):
    write_window_store(slow_stream(4), tmp_path / "whole", settings={"n": 4})
    folder = tmp_path / "cut"
    stopping = slow_stream(4)
    readers, windower, description = stopping._parts[0]
    stopping._parts = [(readers[:2] + (stop_reader,) + readers[3:], windower, description)]
    with pytest.raises(ValueError, match="Cannot store 'Recording 2' \\(Stop"):
        write_window_store(stopping, folder, settings={"n": 4})
    assert (folder / "journal.jsonl").read_bytes().count(b"\n") == 2
    with open(folder / "data.part", "ab") as f:  # a third one's data, not committed
        f.write(b"\x01" * 1000)
    with open(folder / "journal.jsonl", "ab") as f:  # its line, cut
        f.write(b'{"unit": 2, "recor')
    build = json.loads((folder / "build.json").read_text())
    assert build["dtype"] == "<f4" and build["settings"] == {"n": 4}
    with pytest.raises(StoreMismatchError, match="source"):  # other recordings
        write_window_store(slow_stream(5), folder, settings={"n": 4})
    with pytest.raises(StoreMismatchError, match="dtype"):
        write_window_store(slow_stream(4), folder, settings={"n": 4}, dtype="float16")
    write_window_store(slow_stream(4), folder, settings={"n": 4})
    assert same_store(tmp_path / "whole", folder)


def test_unreadable_recordings_are_skipped_listed_and_counted(tmp_path, caplog):
    pattern = save_recordings(tmp_path / "rec", 3)
    (tmp_path / "rec" / "r99_raw.fif").write_bytes(b"not a recording")  # unreadable header
    data = (tmp_path / "rec" / "r01_raw.fif").read_bytes()
    (tmp_path / "rec" / "r01_raw.fif").write_bytes(data[: len(data) // 2])  # truncated data
    with pytest.raises(ValueError, match="r99_raw.fif"):
        load_recordings(pattern, lazy=True, **OPTIONS)
    stream = load_recordings(pattern, lazy=True, on_error="skip", **OPTIONS)
    with pytest.raises(ValueError, match=r"Cannot store '.*r01_raw.fif'.*--on-error skip"):
        write_window_store(stream, tmp_path / "raise", on_error="raise")
    with caplog.at_level(logging.WARNING):
        write_window_store(stream, tmp_path / "store", on_error="skip")
    _, _, info = read_window_store(tmp_path / "store")
    assert info["n_recordings"] == 2 and info["n_recordings_read"] == 2
    assert info["n_recordings_skipped"] == 2
    skipped = {s["recording"]: s["reason"] for s in info["skipped"]}
    assert set(map(os.path.basename, skipped)) == {"r01_raw.fif", "r99_raw.fif"}
    assert any("r01_raw.fif" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("scale", [1e-6, 1.0, 3e3])
def test_float16_keeps_eleven_bits_in_any_unit_and_halves_the_bytes(tmp_path, scale):
    rng = np.random.default_rng(0)
    signal_ = scale * rng.standard_normal((3, 20_000))  # volts, microvolts, digital units
    signal_[1, 123] = 40 * scale  # an artefact sets the recording's scale
    info = mne.create_info(3, 100.0, "eeg")
    raw = mne.io.RawArray(signal_, info, verbose="error")
    windows = fixed_length_windower(None, 100.0, 5.0)(BaseConcatDataset([RawDataset(raw, {})]))
    write_window_store(windows, tmp_path / "f32")
    write_window_store(windows, tmp_path / "f16", dtype="float16")
    recordings, index, info16 = read_window_store(tmp_path / "f16")
    assert info16["dtype"] == "<f2" and recordings[0].dtype == np.float16
    s = info16["scales"][0]
    assert s == float16_scale(signal_.astype(np.float32)) and np.log2(s) == round(np.log2(s))
    assert 2**13 <= np.abs(signal_).max() * s < 2**14
    back = recordings[0].astype(np.float64) / s
    reference = signal_.astype(np.float32).astype(np.float64)
    # float16's 11 significant bits: relative error <= 2**-11 where no subnormal
    big = np.abs(reference) * s > 2**-14
    assert np.all(np.abs(back - reference)[big] <= 2**-11 * np.abs(reference)[big])
    assert np.abs(back - reference).max() <= 2**-11 * np.abs(reference).max()
    assert info16["clipped_samples"] == 0
    size16 = os.path.getsize(tmp_path / "f16" / "data.f16")
    size32 = os.path.getsize(tmp_path / "f32" / "data.f32")
    assert size16 <= 0.55 * size32 and size16 == size32 // 2
    np.testing.assert_array_equal(index, read_window_store(tmp_path / "f32")[1])


def test_float16_clips_and_counts_what_it_cannot_hold(tmp_path):
    signal_ = np.ones((2, 1000))
    signal_[0, 10], signal_[1, 20] = np.inf, -np.inf

    raw = mne.io.RawArray(signal_, mne.create_info(2, 100.0, "eeg"), verbose="error")
    windows = fixed_length_windower(None, 100.0, 5.0)(BaseConcatDataset([RawDataset(raw, {})]))
    write_window_store(windows, tmp_path / "f16", dtype="float16")
    recordings, _, info = read_window_store(tmp_path / "f16")
    assert info["clipped_samples"] == 2
    assert recordings[0][0, 10] == np.finfo(np.float16).max
    assert recordings[0][1, 20] == -np.finfo(np.float16).max
    assert info["scales"][0] == 2.0**13  # the largest finite value, 1, is scaled to 2**13


def test_the_store_command_resumes_refuses_other_settings_and_counts(tmp_path, capsys):
    from braindecode_pars import cli

    pattern = save_recordings(tmp_path / "rec", 3)
    data = (tmp_path / "rec" / "r01_raw.fif").read_bytes()
    (tmp_path / "rec" / "r01_raw.fif").write_bytes(data[: len(data) // 2])  # truncated data
    out = str(tmp_path / "store")
    store = ["store", "--out", out, "--recordings", pattern, "--sfreq", "100"]
    store += ["--window-seconds", "5", "--stride-seconds", "2.5", "--dtype", "float16"]
    with pytest.raises(SystemExit, match=r"Cannot store '.*r01_raw.fif'.*the same command resumes"):
        cli.main(store)
    with pytest.raises(SystemExit, match="--jobs must be at least 1, but got 0"):
        cli.main([*store, "--jobs", "0"])
    with pytest.raises(
        SystemExit,
        match=r"unfinished build with other settings: --sfreq: saved "
        r"100.0, now 50.0\. Run it with its settings to resume it, --overwrite",
    ):
        cli.main([*store, "--sfreq", "50"])
    assert cli.main([*store, "--on-error", "skip", "--jobs", "1"]) == 0
    assert "30 windows of 2 recordings written to" in capsys.readouterr().out
    recordings, _, info = read_window_store(out)
    assert info["dtype"] == "<f2" and info["n_recordings_read"] == 2
    assert [os.path.basename(s["recording"]) for s in info["skipped"]] == ["r01_raw.fif"]
    assert info["build"]["settings"]["sfreq"] == 100.0
    assert cli.main(store) == 0  # complete with these settings: nothing to do
    with pytest.raises(SystemExit, match="holds a store made with other settings; pass --overw"):
        cli.main([*store, "--l-freq", "1"])


def test_exclude_adds_to_the_automatic_exclusions_unless_cleared():
    from braindecode_pars import cli
    from braindecode_pars.cli.store import _exclusions

    def parsed(*flags):
        return _exclusions(cli.build_parser().parse_args(["store", "--out", "o", *flags]).exclude)

    assert parsed() == "auto"
    assert parsed("--exclude", "X1", "X2") == ["auto", "X1", "X2"]
    assert parsed("--exclude", "none", "X1") == ["X1"]
    assert parsed("--exclude", "none") == []
    store = " ".join(cli._subparser(cli.build_parser(), "store").format_help().split())
    assert "to leave out besides the automatic exclusions" in store
    assert "'none' turns the automatic ones off" in store


def test_exclude_names_and_auto_leave_out_both(tmp_path, caplog):
    folder = tmp_path / "rec"
    folder.mkdir()
    for i in range(3):  # two files with the auxiliary channels X1, X2
        names = ["Fp1", "Cz", "A2", *(["X1", "X2"] if i < 2 else []), "ECG"]
        types = ["eeg"] * (len(names) - 1) + ["ecg"]
        raw = mne.io.RawArray(
            np.random.default_rng(i).standard_normal((len(names), 1500)) * 1e-5,
            mne.create_info(names, 100.0, types),
            verbose="error",
        )
        raw.save(folder / f"s{i}_raw.fif", verbose="error")
    with caplog.at_level(logging.DEBUG, logger="braindecode_pars.io.recordings"):
        windows = load_recordings(folder, window_seconds=5.0, subject_from="file")
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned[0].startswith(
        "Kept as EEG, though their names are not sites of the 10-05 montage: X1, X2 in 2 "
        "recordings (s0_raw.fif, s1_raw.fif). If they are not scalp EEG, leave them out "
        "with exclude=['auto', 'X1', 'X2'] (the command's --exclude X1 X2)."
    )
    assert "2 recordings with 4 channels (s0_raw.fif, s1_raw.fif); 1 recording with 2" in warned[1]
    assert "picks=['Fp1', 'Cz'] (the command's --channels Fp1 Cz)" in warned[1]
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len(info) == 1 and "left out (exclude='auto', recordings): A2 (3)." in info[0]
    assert "Not picked (picks='eeg', recordings): ECG (3)." in info[0]
    assert [len(ds.raw.ch_names) for ds in windows.datasets] == [4, 4, 2]  # A2 left out
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="braindecode_pars.io.recordings"):
        windows = load_recordings(folder, window_seconds=5.0, exclude=["auto", "X1", "X2"])
    assert {tuple(ds.raw.ch_names) for ds in windows.datasets} == {("Fp1", "Cz")}
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_windows_of_several_channel_sets_are_refused_naming_recordings_channels_and_picks(
    tmp_path,
):
    from braindecode_pars.io.windows import read_windows

    folder = tmp_path / "rec"
    folder.mkdir()
    for i in range(4):  # three with 3 channels, one with the auxiliary X1 and X2 too
        names = ["Fp1", "Cz", "O1", *(["X1", "X2"] if i == 3 else [])]
        raw = mne.io.RawArray(
            np.random.default_rng(i).standard_normal((len(names), 1500)) * 1e-5,
            mne.create_info(names, 100.0, "eeg"),
            verbose="error",
        )
        raw.save(folder / f"s{i}_raw.fif", verbose="error")
    windows = load_recordings(folder, window_seconds=5.0)
    with pytest.raises(ValueError) as error:
        read_windows(windows)
    assert str(error.value) == (
        "'X' windows come from recordings with 2 channel sets, which do not stack into one "
        "(n_windows, n_chans, n_times) array: 3 with 3 channels, those shared (s0_raw.fif, "
        "s1_raw.fif, s2_raw.fif); 1 with 5 channels, those shared and X1, X2 (s3_raw.fif). "
        "Keep the 3 channels they share in every recording: picks=['Fp1', 'Cz', 'O1'] (of "
        "load_recordings and load_labelled_recordings; the store command's --channels takes "
        "the same names; braindecode's Preprocessor('pick', picks=...) before windowing)."
    )
    fixed = load_recordings(folder, window_seconds=5.0, picks=["Fp1", "Cz", "O1"])
    assert read_windows(fixed).X.shape == (12, 3, 500)


def test_the_card_reads_people_recordings_and_preprocessing_from_the_store(tmp_path):
    """Three EDF files of two people in one folder, their patient codes in the headers,
    stored with --subject-from header: the exported encoder's card counts 2 people and
    the 3 recordings, names neither, and gives the preprocessing the store recorded (it
    said "people: 1" and "not recorded")."""
    from braindecode_pars import cli
    from tests._helpers import tiny_config

    folder = tmp_path / "edf"
    folder.mkdir()
    for i, patient in enumerate(["P01", "P01", "P02"]):
        raw = mne.io.RawArray(
            np.random.default_rng(i).standard_normal((3, 250 * 40)) * 1e-5,
            mne.create_info(["Fp1", "Cz", "O1"], 250.0, "eeg"),
            verbose="error",
        )
        raw.info["subject_info"] = {"his_id": patient}
        mne.export.export_raw(folder / f"rec{i}.edf", raw, fmt="edf", verbose="error")
    store = ["store", "--recordings", str(folder), "--out", str(tmp_path / "store")]
    store += ["--window-seconds", "10", "--stride-seconds", "10", "--notch-freq", "50"]
    store += ["--subject-from", "header"]
    assert cli.main(store) == 0
    run = ["pretrain", "--store", str(tmp_path / "store"), "--out", str(tmp_path / "run")]
    run += ["--steps", "2", "--batch-size", "4", "--device", "cpu"]
    assert cli.main([*run, *tiny_config(tmp_path, n_patches=10)]) == 0
    assert cli.main(["export", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "e")]) == 0
    card = (tmp_path / "e" / "README.md").read_text()
    assert "- people: 2 (counted by the subject of 3 recordings)" in card
    assert "- recordings: 3" in card
    assert not {"P01", "P02", "rec0", "rec1", "rec2"} & set(re.findall(r"\w+", card))
    assert (
        "- preprocessing: _band_pass(l_freq=0.3, h_freq=45.0); notch(freqs=50.0); "
        "resample(sfreq=100.0); _volts_to_microvolts(); 10-s windows every 10 s; stored as "
        "float32"
    ) in card


def ramp_store(folder, dtype, seed=0):
    """Four recordings at 10 Hz, each 16 windows of 300 samples; every window a ramp of
    random slope and offset in volts (tens of microvolts), as ``ramp_dataset`` makes."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, 300)
    recordings = []
    for _ in range(4):
        ramps = [(rng.random() * 4 + 0.5) * t + rng.standard_normal() for _ in range(16)]
        data = 1e-5 * (np.concatenate(ramps) + 0.01 * rng.standard_normal(16 * 300))
        raw = mne.io.RawArray(data[None], mne.create_info(1, 10.0, "eeg"), verbose="error")
        recordings.append(RawDataset(raw, {}))
    windows = fixed_length_windower(None, 10.0, 30.0)(BaseConcatDataset(recordings))
    return write_window_store(windows, folder, dtype=dtype)


@pytest.mark.slow  # three short pretraining runs
def test_pretraining_on_a_float16_store_reaches_float32_skill_within_the_noise(tmp_path):
    import torch

    from braindecode_pars.pretraining._views import SingleChannelWindows
    from braindecode_pars.pretraining.net import PretrainNet
    from tests._learning import SEED, learned
    from tests.conftest import TINY
    from tests.ramp_fixtures import ramp_pars

    def skill(store, seed):
        view = SingleChannelWindows.from_store(store, max_shift=0)
        torch.manual_seed(seed)
        net = PretrainNet(
            ramp_pars(**TINY), max_epochs=12, batch_size=16, lr=3e-3, progress_bar=False,
            valid_fraction=0.25,
        )  # fmt: skip
        net.fit(view)
        return net.history[-1, "valid_skill"]

    half = ramp_store(tmp_path / "f16", "float16", seed=SEED)
    full = ramp_store(tmp_path / "f32", "float32", seed=SEED)
    assert os.path.getsize(half / "data.f16") <= 0.55 * os.path.getsize(full / "data.f32")
    same_seed = skill(full, SEED), skill(half, SEED)
    other_seed = skill(full, SEED + 1)
    noise = abs(same_seed[0] - other_seed)  # what another seed moves float32's skill by
    learned(same_seed[0], above=0.5, what="float32 skill")  # both learned
    learned(same_seed[1], above=0.5, what="float16 skill")
    # abs(float16 - float32) <= max(0.02, noise): their difference less that is <= 0
    off = abs(same_seed[1] - same_seed[0]) - max(0.02, noise)
    learned(off, below=np.nextafter(0, 1), what="float16 off float32, less the seed noise")


def test_progress_in_a_log_file_is_short_lines_with_an_eta(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(store_build, "PROGRESS_SECONDS", 0.0)  # a line at every recording
    with caplog.at_level(logging.INFO, logger="braindecode_pars.store._build"):
        write_window_store(slow_stream(4), tmp_path / "store")  # stderr: pytest's, no terminal
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("store: ")]
    assert len(lines) == 4 and all("\r" not in m and len(m) < 120 for m in lines)
    assert lines[0].startswith("store: 1 of 4 recordings (25 %), ")
    assert lines[0].endswith(" left") and "recordings/s, about " in lines[0]
    assert lines[-1].startswith("store: 4 of 4 recordings (100 %)")
    assert lines[-1].endswith("about 0 s left")
    assert store_build._eta(3725) == "about 1 h 02 min left"
    assert store_build._eta(float("inf")) == "unknown time left"


def nan_reader(seed):
    """A recording holding 3 NaN samples."""
    ds = slow_reader(seed)
    ds.raw._data[1, 10:13] = np.nan
    return ds


def type_error_reader():
    raise TypeError("corrupt header: an int where a str was expected")


def stream_with(n, replaced):
    """``slow_stream(n)`` with the readers of ``replaced`` ({position: reader}) replaced."""
    stream = slow_stream(n)
    readers, windower, description = stream._parts[0]
    readers = tuple(replaced.get(i, r) for i, r in enumerate(readers))
    stream._parts = [(readers, windower, description)]
    return stream


@pytest.mark.parametrize(
    "reader, reason",
    [
        pytest.param(
            functools.partial(nan_reader, 1), r"holds 3 NaN samples \(of 6000\)", id="NaN"
        ),
        pytest.param(type_error_reader, "TypeError: corrupt header", id="TypeError"),
    ],
)
def test_a_nan_or_a_type_error_is_named_and_skipped_or_refused(tmp_path, reader, reason):
    stream = stream_with(3, {1: reader})
    with pytest.raises(ValueError, match=rf"Cannot store 'Recording 1' \(.*{reason}"):
        write_window_store(stream, tmp_path / "raise")
    assert (tmp_path / "raise" / "journal.jsonl").read_bytes().count(b"\n") == 1  # kept
    write_window_store(stream, tmp_path / "skip", on_error="skip")
    recordings, _, info = read_window_store(tmp_path / "skip")
    assert info["n_recordings"] == 2 and not any(np.isnan(r).any() for r in recordings)
    [skipped] = info["skipped"]
    assert skipped["recording"] == "Recording 1" and re.search(reason, skipped["reason"])
    with pytest.raises(TypeError, match="Item 0 of 'windows' must be braindecode windows"):
        write_window_store([np.zeros(3)], tmp_path / "items", on_error="skip")


def test_a_data_file_shorter_than_its_journal_or_index_is_refused(tmp_path):
    folder = tmp_path / "cut"
    with pytest.raises(ValueError, match="Cannot store 'Recording 2'"):
        write_window_store(stream_with(4, {2: stop_reader}), folder, settings={"n": 4})
    size = (folder / "data.part").stat().st_size
    assert size == 2 * 2 * 3000 * 4
    with open(folder / "data.part", "r+b") as f:
        f.truncate(size - 4)
    match = rf"journal names {size} bytes of recordings but data.part holds {size - 4}"
    with pytest.raises(StoreDataLostError, match=match):
        write_window_store(slow_stream(4), folder, settings={"n": 4})
    assert (folder / "data.part").stat().st_size == size - 4  # not padded with zeros
    (folder / "data.part").unlink()
    with pytest.raises(StoreDataLostError, match="data.part holds 0"):
        write_window_store(slow_stream(4), folder, settings={"n": 4})
    write_window_store(slow_stream(4), folder, settings={"n": 4}, overwrite=True)
    write_window_store(slow_stream(4), tmp_path / "whole", settings={"n": 4})
    assert same_store(tmp_path / "whole", folder)
    with open(folder / "data.f32", "ab") as f:  # a complete store whose data is not its index's
        f.write(b"\0" * 8)
    with pytest.raises(StoreDataLostError, match="damaged: its index describes"):
        read_window_store(folder)
    with pytest.raises(StoreDataLostError, match="damaged"):
        write_window_store(slow_stream(4), folder, settings={"n": 4})


def memory_windows(seeds, stop_after=None):
    """Windows in memory, one recording at a time; raises ``Stop`` after ``stop_after``."""
    windower = fixed_length_windower(None, 100.0, 5.0)
    for i, seed in enumerate(seeds):
        if i == stop_after:
            raise Stop
        yield windower(BaseConcatDataset([slow_reader(seed)]))


def test_windows_in_memory_resume_only_into_the_build_of_the_same_windows(tmp_path):
    write_window_store(memory_windows(range(4)), tmp_path / "whole")
    folder = tmp_path / "stopped"
    with pytest.raises(Stop):
        write_window_store(memory_windows(range(4), stop_after=2), folder)
    assert (folder / "journal.jsonl").read_bytes().count(b"\n") == 2
    with pytest.raises(StoreMismatchError, match="other windows: item 1 of 'windows' differs"):
        write_window_store(memory_windows([0, 5, 2, 3]), folder)  # recording 1 is another
    assert (folder / "journal.jsonl").read_bytes().count(b"\n") == 2  # nothing written
    whole = BaseConcatDataset(list(memory_windows(range(4))))  # all at once: the same units
    write_window_store(whole, folder)
    assert same_store(tmp_path / "whole", folder)


def test_a_stop_signal_ends_the_build_at_a_recording_end_and_it_resumes(tmp_path):
    def signalling_reader():
        os.kill(os.getpid(), signal.SIGUSR1)  # as a scheduler would, during a recording
        return slow_reader(2)

    write_window_store(slow_stream(5), tmp_path / "whole", settings={"n": 5})
    folder = tmp_path / "stopped"
    before = signal.getsignal(signal.SIGUSR1)
    stream = stream_with(5, {2: signalling_reader})
    with pytest.raises(StoreBuildStopped, match="stopped on SIGUSR1 after 3 of 5"):
        write_window_store(stream, folder, settings={"n": 5}, stop_signals=["SIGTERM", "USR1"])
    assert signal.getsignal(signal.SIGUSR1) == before  # the handler is given back
    assert (folder / "journal.jsonl").read_bytes().count(b"\n") == 3  # that recording stored
    assert not (folder / ".lock").exists()
    write_window_store(slow_stream(5), folder, settings={"n": 5})
    assert same_store(tmp_path / "whole", folder)
    for given in ("SIGINT", "KILL", "SIGNOPE", 0):
        with pytest.raises(ValueError, match=rf"'stop_signals' .* but got {given!r} instead"):
            write_window_store(slow_stream(5), folder, stop_signals=[given])


def test_a_build_into_a_locked_folder_is_refused_before_any_work(tmp_path):
    from braindecode_pars._jobs.lock import FolderLockedError, folder_lock

    with folder_lock(tmp_path / "out", "pretraining"):
        with pytest.raises(FolderLockedError, match=rf"in use by process {os.getpid()} \(pre"):
            write_window_store(slow_stream(2), tmp_path / "out")
        assert os.listdir(tmp_path / "out") == [".lock"]


def dying_reader(parent, seed):
    """A recording whose reading kills a worker process (as the out-of-memory killer)."""
    if os.getpid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)
    return slow_reader(seed)


@pytest.mark.serial
@pytest.mark.parametrize("on_error", ["skip", "raise"])
def test_a_dead_worker_is_named_and_its_recording_skipped_or_refused(tmp_path, on_error):
    stream = stream_with(6, {3: functools.partial(dying_reader, os.getpid(), 3)})
    store_build.PARENT_HELPS, helps = False, store_build.PARENT_HELPS
    try:
        if on_error == "raise":
            with pytest.raises(ValueError, match="Cannot store 'Recording 3': its worker process"):
                write_window_store(stream, tmp_path / "store", jobs=2)
            return
        write_window_store(stream, tmp_path / "store", jobs=2, on_error="skip")
    finally:
        store_build.PARENT_HELPS = helps
    _, _, info = read_window_store(tmp_path / "store")
    assert [s["recording"] for s in info["skipped"]] == ["Recording 3"]
    assert "worker process died" in info["skipped"][0]["reason"]
    assert info["n_recordings"] == 5
    write_window_store(stream_with(6, {3: stop_reader}), tmp_path / "one", on_error="skip")
    for name in ("data.f32", "index.npz"):
        assert filecmp.cmp(tmp_path / "store" / name, tmp_path / "one" / name, shallow=False)
