import functools
import gc
import json
import os
import pickle
import weakref

import mne
import numpy as np
import pandas as pd
import pytest
import torch
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows

import braindecode_pars._util.channels as channels
from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
from braindecode_pars.io.recordings import load_recordings
from braindecode_pars.io.windowing import RecordingStream, fixed_length_windower
from braindecode_pars.pretraining._views import SingleChannelWindows
from braindecode_pars.store import read_window_store, store_summary, write_window_store


@pytest.fixture(scope="module")
def windows():
    return load_physionet_mi_continuous(runs=[1, 3], window_seconds=10, stride_seconds=5)


def test_store_round_trip_is_memory_mapped_and_exact(windows, tmp_path):
    write_window_store(windows, tmp_path / "store")
    recordings, index, info = read_window_store(tmp_path / "store")
    assert len(recordings) == 2 and isinstance(recordings[0], np.memmap)
    assert info["sfreq"] == 200 and len(info["recordings"][0]["ch_names"]) == 64
    assert info["recordings"][1]["description"]["run"] == 3
    assert len(index) == len(windows)
    for i in (0, 7, len(windows) - 1):  # every window reads back as braindecode gives it
        rec, start, stop = index[i]
        np.testing.assert_allclose(recordings[rec][:, start:stop], windows[i][0], rtol=1e-6)


def assert_same_draws(a, b, n, seed):
    """Views ``a`` and ``b`` give the same crops of their first ``n`` examples from the
    same torch seed."""
    torch.manual_seed(seed)
    first = a.__getitems__(list(range(n)))
    torch.manual_seed(seed)
    second = b.__getitems__(list(range(n)))
    for (xa, _), (xb, _) in zip(first, second, strict=True):
        torch.testing.assert_close(xa, xb)


def test_view_from_store_draws_the_same_crops_as_the_in_memory_view(windows, tmp_path):
    write_window_store(windows, tmp_path / "store")
    memory = SingleChannelWindows(windows, max_shift=300)
    mapped = SingleChannelWindows.from_store(tmp_path / "store", max_shift=300)
    assert len(mapped) == len(memory) and mapped.n_times == 2000 and mapped.sfreq == 200
    assert [mapped.crop_bounds(i) for i in range(len(mapped))] == [
        memory.crop_bounds(i) for i in range(len(memory))
    ]
    assert_same_draws(memory, mapped, n=10, seed=4)


def test_data_loader_workers_draw_different_crops(windows, tmp_path):
    write_window_store(windows, tmp_path / "store")
    view = SingleChannelWindows.from_store(tmp_path / "store")
    loader = torch.utils.data.DataLoader(
        view, batch_size=4, num_workers=2, sampler=[0, 0, 0, 0] * 2
    )
    first, second = (x for x, _ in loader)
    assert first.shape == (4, 1, 2000)
    assert not torch.equal(first, second)  # two workers, two different streams


def test_store_refuses_to_overwrite_and_lazy_recordings(windows, tmp_path):
    write_window_store(windows, tmp_path / "store")
    with pytest.raises(FileExistsError, match="pass overwrite=True"):
        write_window_store(windows, tmp_path / "store")
    write_window_store(windows, tmp_path / "store", overwrite=True)
    with pytest.raises(FileNotFoundError, match="index.npz is missing"):
        read_window_store(tmp_path / "nothing")
    with pytest.raises(TypeError, match="BaseConcatDataset"):
        write_window_store(np.zeros((2, 3, 4)), tmp_path / "other")


# --- streaming: one recording at a time -------------------------------------------------


def make_raw(seed=0, seconds=12.0, sfreq=100.0, n_eeg=3, extra=True):
    """``n_eeg`` EEG channels (channel c holds c + noise), and an EOG and an ECG channel."""
    rng = np.random.default_rng(seed)
    n = int(seconds * sfreq)
    data = np.arange(n_eeg)[:, None] + 1e-3 * rng.standard_normal((n_eeg, n))
    names, types = [f"C{c}" for c in range(n_eeg)], ["eeg"] * n_eeg
    if extra:
        data = np.vstack([data, 100 + rng.standard_normal((2, n))])
        names, types = names + ["EOG", "ECG"], types + ["eog", "ecg"]
    return mne.io.RawArray(data, mne.create_info(names, sfreq, types), verbose="error")


def fixed_windows(raw, preload=True, seconds=2.0, **kwargs):
    size = int(seconds * raw.info["sfreq"])
    return create_fixed_length_windows(
        BaseConcatDataset([RawDataset(raw, {"name": "r"})]),
        window_size_samples=size,
        window_stride_samples=size,
        on_last_window="drop",
        preload=preload,
        **kwargs,
    )


def test_a_stream_is_written_holding_one_recording_at_a_time(tmp_path):
    alive, counts = [], []  # weak references to every recording; how many live at each read

    def read(seed):
        gc.collect()
        counts.append(sum(ref() is not None for ref in alive))
        raw = make_raw(seed)
        alive.append(weakref.ref(raw))
        return RawDataset(raw, {"seed": seed})

    window = fixed_length_windower(None, 100.0, 2.0)

    def windower(recording):
        windows = window(recording)
        alive.extend(weakref.ref(ds.raw) for ds in windows.datasets)
        return windows

    stream = RecordingStream([functools.partial(read, s) for s in range(4)], windower)
    assert len(stream) == 4
    write_window_store(stream, tmp_path / "store")
    assert counts == [0, 0, 0, 0]  # the previous recording was let go before each read
    gc.collect()
    assert not any(ref() is not None for ref in alive)

    recordings, index, info = read_window_store(tmp_path / "store")
    assert len(recordings) == 4 and len(index) == 4 * 6
    assert [r["description"]["seed"] for r in info["recordings"]] == [0, 1, 2, 3]
    expected = make_raw(2).get_data(picks="eeg").astype(np.float32)  # no preprocessing
    np.testing.assert_array_equal(recordings[2], expected)
    assert not (tmp_path / "store" / "data.tmp").exists()

    counts.clear()  # the in-memory view reads a stream the same way and keeps float32 only
    view = SingleChannelWindows(stream)
    assert counts == [0, 0, 0, 0] and len(view) == 24
    assert all(r.dtype == np.float32 and r.shape == (3, 1200) for r in view.recordings)


def test_stores_from_a_stream_and_from_memory_are_identical(tmp_path):
    for i in range(3):
        make_raw(i, seconds=30.0, sfreq=250.0).save(tmp_path / f"r{i}_raw.fif", verbose="error")
    pattern = str(tmp_path / "*.fif")
    options = dict(sfreq=100.0, window_seconds=5.0, stride_seconds=2.5)
    write_window_store(load_recordings(pattern, **options), tmp_path / "memory")
    write_window_store(load_recordings(pattern, lazy=True, **options), tmp_path / "stream")
    a, index_a, info_a = read_window_store(tmp_path / "memory")
    b, index_b, info_b = read_window_store(tmp_path / "stream")
    np.testing.assert_array_equal(index_a, index_b)
    assert info_a.pop("build")["source"] is None  # a stream records its files, memory cannot
    assert info_b.pop("build")["source"] is not None
    assert info_a == info_b and info_a["recordings"][0]["ch_names"] == ["C0", "C1", "C2"]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_recordings_that_are_not_preloaded_are_written_from_their_files(tmp_path):
    make_raw(0, seconds=40.0).save(tmp_path / "r_raw.fif", verbose="error")
    raw = mne.io.read_raw_fif(tmp_path / "r_raw.fif", preload=False, verbose="error")
    channels._CHUNK_BYTES = 8 * 3 * 333  # chunks of 333 samples of the 3 EEG channels
    try:
        write_window_store(fixed_windows(raw, preload=False), tmp_path / "lazy")
    finally:
        channels._CHUNK_BYTES = 1 << 24
    recordings, index, _ = read_window_store(tmp_path / "lazy")
    expected = raw.get_data(picks="eeg").astype(np.float32)
    np.testing.assert_array_equal(recordings[0], expected)  # EOG and ECG left out
    assert index[:, 1].tolist() == list(range(0, 4000, 200))


def test_a_store_is_one_data_file_and_pickles_without_its_data(tmp_path):
    windows = BaseConcatDataset(
        [ds for s in range(3) for ds in fixed_windows(make_raw(s, seconds=60.0)).datasets]
    )
    write_window_store(windows, tmp_path / "store")
    assert sorted(os.listdir(tmp_path / "store")) == [
        "data.f32",
        "index.npz",
        "info.json",
        "recordings.json",
    ]
    assert os.path.getsize(tmp_path / "store" / "data.f32") == 3 * 3 * 6000 * 4
    view = SingleChannelWindows.from_store(tmp_path / "store")
    blob = pickle.dumps(view)
    assert len(blob) < 20_000  # the index, not the 216 kB of data
    clone = pickle.loads(blob)
    assert all(isinstance(r, np.memmap) for r in clone.recordings)
    assert_same_draws(view, clone, n=20, seed=1)


def test_a_store_of_another_format_is_refused_naming_it(tmp_path):
    folder = tmp_path / "old"
    (folder / "recordings").mkdir(parents=True)
    data = [np.arange(2 * 50, dtype=np.float32).reshape(2, 50), np.ones((3, 40), np.float32)]
    for rec, array in enumerate(data):
        np.save(folder / "recordings" / f"{rec:05d}.npy", array)
    info = {"sfreq": 10.0, "recordings": [{"ch_names": [], "description": {}}] * 2}
    (folder / "info.json").write_text(json.dumps(info))
    np.savez(folder / "index.npz", index=np.array([[0, 0, 20], [1, 10, 30]]))
    with pytest.raises(ValueError, match=r"has format 1, not 2 or 3: write it again"):
        SingleChannelWindows.from_store(folder)


def test_store_errors_name_the_recording_and_the_rates(tmp_path):
    slow, fast = fixed_windows(make_raw(0, sfreq=100.0)), fixed_windows(make_raw(1, sfreq=200.0))
    with pytest.raises(ValueError, match=r"different sampling rates \(100 and 200 Hz"):
        write_window_store(iter([slow, fast]), tmp_path / "a")
    assert not (tmp_path / "a" / "index.npz").exists()
    no_eeg = make_raw(0).pick(["EOG", "ECG"])
    with pytest.raises(ValueError, match=r"Recording 0 \(name=r\) has no EEG channel"):
        write_window_store(fixed_windows(no_eeg), tmp_path / "b")
    with pytest.raises(ValueError, match="holds no window"):
        write_window_store(iter([]), tmp_path / "c")
    with pytest.raises(TypeError, match="Item 1 of 'windows' must be braindecode windows"):
        write_window_store([slow, np.zeros((2, 3, 4))], tmp_path / "d")
    epochs = fixed_windows(make_raw(0), use_mne_epochs=True)
    with pytest.raises(ValueError, match="epochs-based"):
        write_window_store(epochs, tmp_path / "e")


# --- the in-memory view: EEG channels only, whatever the windows ------------------------


def test_view_draws_eeg_channels_only_from_preloaded_lazy_and_epochs_windows(tmp_path):
    raw = make_raw(0, seconds=20.0)
    raw.save(tmp_path / "r_raw.fif", verbose="error")
    on_disk = mne.io.read_raw_fif(tmp_path / "r_raw.fif", preload=False, verbose="error")
    expected = raw.get_data(picks="eeg").astype(np.float32)
    views = {
        "preloaded": SingleChannelWindows(fixed_windows(raw)),
        "lazy": SingleChannelWindows(fixed_windows(on_disk, preload=False)),
        "epochs": SingleChannelWindows(fixed_windows(raw, use_mne_epochs=True)),
    }
    for name, view in views.items():
        assert view.sfreq == 100.0, name
        assert {r.shape[0] for r in view.recordings} == {3}, name  # C0-C2, not EOG or ECG
        torch.manual_seed(0)
        values = torch.cat([x for x, _ in view.__getitems__(list(range(len(view))) * 20)])
        assert values.max() < 3, name  # EEG values are 0, 1, 2; EOG and ECG about 100
    np.testing.assert_array_equal(views["lazy"].recordings[0], expected)
    np.testing.assert_array_equal(views["preloaded"].recordings[0], expected)
    assert len(views["epochs"].recordings) == 10  # epochs: each window stands alone


def test_view_refuses_mixed_rates_and_recordings_without_eeg():
    slow, fast = fixed_windows(make_raw(0, sfreq=100.0)), fixed_windows(make_raw(1, sfreq=200.0))
    with pytest.raises(ValueError, match=r"different sampling rates \(100 and 200 Hz"):
        SingleChannelWindows([slow, fast])
    with pytest.raises(ValueError, match=r"different sampling rates \(100 and 200 Hz"):
        SingleChannelWindows(BaseConcatDataset(slow.datasets + fast.datasets))
    with pytest.raises(ValueError, match=r"\(name=r\) has no EEG channel"):
        SingleChannelWindows(fixed_windows(make_raw(0).pick(["EOG", "ECG"])))
    with pytest.raises(ValueError, match=r"\(name=r\) is a recording, not windows"):
        SingleChannelWindows(BaseConcatDataset([RawDataset(make_raw(0), {"name": "r"})]))


def test_store_summary_counts_each_sample_once_and_people_by_subject_or_folder(tmp_path):
    """Channel-hours of overlapping windows equal those of the recordings; people are
    distinct (dataset, subject) pairs, or the folder of the file without a subject."""
    sfreq = 100.0
    parts = []
    # dataset "a": subject 1 twice (2 channels, 360 s and 180 s), subject 2 once (720 s)
    for subject, seconds in ((1, 360), (1, 180), (2, 720)):
        info = mne.create_info(["C3", "C4"], sfreq, "eeg")
        raw = mne.io.RawArray(np.zeros((2, int(seconds * sfreq))), info, verbose=False)
        parts.append(RawDataset(raw, pd.Series({"subject": subject, "dataset": "a"})))
    # dataset "b": no subject, two files in the folder of one person, one in another's
    for folder, seconds in (("p1", 36), ("p1", 36), ("p2", 72)):
        info = mne.create_info(["Fz", "Cz", "Pz", "Oz"], sfreq, "eeg")
        raw = mne.io.RawArray(np.zeros((4, int(seconds * sfreq))), info, verbose=False)
        description = pd.Series({"file": f"/data/{folder}/run.edf", "dataset": "b"})
        parts.append(RawDataset(raw, description))
    windows = create_fixed_length_windows(
        BaseConcatDataset(parts),
        window_size_samples=1000,
        window_stride_samples=250,  # windows overlap four times over
        on_last_window="drop",
    )
    write_window_store(windows, tmp_path / "store")
    summary = store_summary(tmp_path / "store")
    a, b = summary["datasets"]["a"], summary["datasets"]["b"]
    assert a["channel_hours"] == pytest.approx(2 * (360 + 180 + 720) / 3600, abs=0.01)
    assert b["channel_hours"] == pytest.approx(4 * (36 + 36 + 72) / 3600, abs=0.01)
    assert (a["people"], b["people"], summary["people"]) == (2, 2, 4)
    assert (a["n_recordings"], b["n_recordings"]) == (3, 3)
    assert summary["n_windows"] == len(windows) == a["n_windows"] + b["n_windows"]
    assert summary["hours"] == pytest.approx((1260 + 144) / 3600, abs=0.01)


def test_the_store_is_on_the_disk_before_its_journal_goes(windows, tmp_path, monkeypatch):
    """After a power cut the store is whole or resumable: its data, ``recordings.json``,
    ``info.json`` and ``index.npz`` are flushed (each file, then the folder after its
    rename) before the build's journal is removed."""
    import pathlib
    import stat

    folder = tmp_path / "store"
    events = []
    real_fsync, real_unlink = os.fsync, pathlib.Path.unlink

    def fsync(fd):
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            events.append(("folder", info.st_ino))
        else:  # the name the file has now or, for a temporary one, will have
            names = [p.name for p in folder.iterdir() if p.stat().st_ino == info.st_ino]
            events.append(("file", names[0].split(".")[1] if names[0][0] == "." else names[0]))
        real_fsync(fd)

    def unlink(path, missing_ok=False):
        events.append(("unlink", path.name))
        real_unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(pathlib.Path, "unlink", unlink)
    write_window_store(windows, folder)
    journal = events.index(("unlink", "journal.jsonl"))
    before = events[:journal]
    flushed = [name for kind, name in before if kind == "file"]
    for name in ("recordings", "info", "index"):  # written atomically, flushed
        assert name in flushed, (name, before)
    # the last write (the index) is followed by a flush of the folder, before the journal goes
    last_file = max(i for i, (kind, _) in enumerate(before) if kind == "file")
    assert ("folder", folder.stat().st_ino) in before[last_file:]
    assert sorted(p.name for p in folder.iterdir()) == [
        "data.f32", "index.npz", "info.json", "recordings.json",
    ]  # fmt: skip
