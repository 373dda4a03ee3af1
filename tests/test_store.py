import numpy as np
import pytest
import torch

from braindecode_pars.datasets import (
    SingleChannelWindows,
    load_physionet_mi_continuous,
    read_window_store,
    write_window_store,
)


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


def test_view_from_store_draws_the_same_crops_as_the_in_memory_view(windows, tmp_path):
    write_window_store(windows, tmp_path / "store")
    memory = SingleChannelWindows(windows, max_shift=300)
    mapped = SingleChannelWindows.from_store(tmp_path / "store", max_shift=300)
    assert len(mapped) == len(memory) and mapped.n_times == 2000 and mapped.sfreq == 200
    assert [mapped.crop_bounds(i) for i in range(len(mapped))] == [
        memory.crop_bounds(i) for i in range(len(memory))
    ]
    torch.manual_seed(4)
    a = memory.__getitems__(list(range(10)))
    torch.manual_seed(4)
    b = mapped.__getitems__(list(range(10)))
    for (xa, _), (xb, _) in zip(a, b, strict=True):
        torch.testing.assert_close(xa, xb)


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
