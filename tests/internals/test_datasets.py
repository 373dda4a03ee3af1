import shutil

import numpy as np
import pytest
import torch

from braindecode_pars.datasets.bundled import bundled_data_path
from braindecode_pars.datasets.physionet_mi import (
    PHYSIONET_MI_CLASSES,
    _read_physionet_mi,
    load_physionet_mi,
    load_physionet_mi_continuous,
    physionet_mi_run_path,
)
from braindecode_pars.pretraining._views import SingleChannelWindows


@pytest.fixture(scope="module")
def mi_windows():
    return load_physionet_mi()


def test_bundled_subject_gives_the_four_class_task(mi_windows):
    md = mi_windows.get_metadata()
    assert len(mi_windows) == 90  # 15 imagery trials in each of the six imagery runs
    X, y, _ = mi_windows[0]
    assert X.shape == (64, 800)  # 64 channels, 4 s at 200 Hz
    # left/right-fist runs hold classes 0 and 1 only; fists/feet runs 2 and 3 only
    assert set(md.loc[md.run.isin([4, 8, 12]), "target"]) == {0, 1}
    assert set(md.loc[md.run.isin([6, 10, 14]), "target"]) == {2, 3}
    assert sorted(md.block.unique()) == [1, 2, 3]
    assert {"subject", "run", "block"} <= set(md.columns)


def test_preprocessing_is_the_papers(mi_windows):
    raw = mi_windows.datasets[0].raw
    assert raw.info["sfreq"] == 200
    assert raw.info["highpass"] == pytest.approx(0.3)
    assert "FC5" in raw.ch_names and "Fc5." not in raw.ch_names
    data = raw.get_data()
    assert np.abs(data.mean(axis=0)).max() < 1e-3 * np.abs(data).max()  # average reference
    assert 1 < np.std(data) < 1e4  # microvolts, not volts
    # the 60 Hz line is notched out: far less power than at its neighbours
    freqs = np.fft.rfftfreq(data.shape[1], 1 / 200)
    power = (np.abs(np.fft.rfft(data, axis=1)) ** 2).mean(0)
    near = (np.abs(freqs - 60) > 2) & (np.abs(freqs - 60) < 6)
    assert power[np.abs(freqs - 60) < 0.3].mean() < 0.1 * power[near].mean()


def test_a_rate_below_twice_the_line_frequency_skips_the_notch():
    from braindecode_pars.datasets.physionet_mi import _physionet_mi_preprocessors

    def names(sfreq):
        return [p.fn if isinstance(p.fn, str) else p.fn.__name__
                for p in _physionet_mi_preprocessors(sfreq)]  # fmt: skip

    assert "notch_filter" in names(200.0) and "notch_filter" not in names(100.0)
    windows = load_physionet_mi(runs=[4], sfreq=100.0)  # failed: 60 Hz above Nyquist
    raw = windows.datasets[0].raw
    assert raw.info["sfreq"] == 100 and windows[0][0].shape == (64, 400)
    # resampling cut the 60 Hz line rather than folding it onto 40 Hz
    data = raw.get_data()
    freqs = np.fft.rfftfreq(data.shape[1], 1 / 100)
    power = (np.abs(np.fft.rfft(data, axis=1)) ** 2).mean(0)
    near = (np.abs(freqs - 40) > 2) & (np.abs(freqs - 40) < 6)
    assert power[np.abs(freqs - 40) < 0.3].mean() < 2 * power[near].mean()


def test_trial_labels_follow_the_annotations_of_each_run():
    ds = _read_physionet_mi(runs=[4, 6])
    lr, ff = (set(d.raw.annotations.description) for d in ds.datasets)
    assert lr == {"rest", "left_fist", "right_fist"}
    assert ff == {"rest", "both_fists", "both_feet"}
    assert PHYSIONET_MI_CLASSES == {
        "left_fist": 0,
        "right_fist": 1,
        "both_fists": 2,
        "both_feet": 3,
    }


def test_the_same_loader_reads_other_subjects_from_mnes_layout(tmp_path):
    for subject in (7, 42):  # files laid out as MNE's eegbci cache holds them
        for run in (4, 6):
            target = physionet_mi_run_path(tmp_path, subject, run)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(physionet_mi_run_path(bundled_data_path(), 1, run), target)
    windows = load_physionet_mi(subjects=[7, 42], runs=[4, 6], path=tmp_path)
    md = windows.get_metadata()
    assert sorted(md.subject.unique()) == [7, 42]
    assert len(windows) == 2 * 30


def test_missing_files_and_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="subject 3 run 4 is not at"):
        _read_physionet_mi(subjects=[3], runs=[4], path=tmp_path)
    with pytest.raises(ValueError, match=r"'subjects' must lie in 1..109, but got \[110\]"):
        _read_physionet_mi(subjects=[110])
    with pytest.raises(ValueError, match=r"'runs' must lie in 3..14, but got \[1\]"):
        load_physionet_mi(runs=[1, 4])


def test_pretraining_windows_hold_no_imagery_run():
    windows = load_physionet_mi_continuous(window_seconds=30, stride_seconds=30)
    runs = set(windows.get_metadata().run)
    assert runs == {1, 2, 3, 5, 7, 9, 11, 13}
    assert windows[0][0].shape == (64, 6000)


def test_single_channel_view_draws_one_channel_and_crops_inside_the_recording():
    # each channel is a ramp with its own offset: a value tells the channel and time
    n_chans, n_samples = 4, 1000
    rec = np.arange(n_samples)[None, :] + 10_000 * np.arange(n_chans)[:, None]
    view = SingleChannelWindows(rec[None].astype(np.float32), n_times=200)
    channels, starts = set(), set()
    for _ in range(300):
        x, _ = view[0]
        assert x.shape == (1, 200)
        channel, start = int(x[0, 0]) // 10_000, int(x[0, 0]) % 10_000
        torch.testing.assert_close(x[0], torch.arange(start, start + 200.0) + channel * 10_000)
        channels.add(channel)
        starts.add(start)
    assert channels == set(range(n_chans))
    assert min(starts) >= 0 and max(starts) <= 800 and len(starts) > 100


def test_single_channel_view_shifts_braindecode_windows_within_their_recording():
    windows = load_physionet_mi_continuous(runs=[1], window_seconds=10, stride_seconds=10)
    view = SingleChannelWindows(windows, max_shift=400)
    assert len(view.recordings) == 1 and view.n_times == 2000
    low, high = view.crop_bounds(2)  # the third window starts at 4000 samples
    assert (low, high) == (3600, 4400)
    assert view.crop_bounds(0) == (0, 400)  # clipped at the recording's start
    last = len(view) - 1
    assert view.crop_bounds(last)[1] == view.recordings[0].shape[1] - 2000


def test_single_channel_view_errors():
    with pytest.raises(ValueError, match=r"shape \(n_windows, n_chans, n_times\)"):
        SingleChannelWindows(np.zeros((3, 100)))
    with pytest.raises(ValueError, match="longer than the shortest"):
        SingleChannelWindows(np.zeros((3, 2, 100)), n_times=200)


def test_paper_subject_split_of_physionet_mi():
    from braindecode_pars.datasets.physionet_mi import (
        PHYSIONET_MI_SPLIT,
        _physionet_mi_subject_split,
    )

    assert [_physionet_mi_subject_split(s) for s in (1, 70, 71, 89, 90, 109)] == [
        "train",
        "train",
        "valid",
        "valid",
        "test",
        "test",
    ]
    assert sum(len(v) for v in PHYSIONET_MI_SPLIT.values()) == 109
    with pytest.raises(ValueError, match="'subject' must lie in 1..109, but got 110"):
        _physionet_mi_subject_split(110)


def test_bundled_eegmat_gives_the_stored_microvolts():
    from braindecode_pars.datasets.bundled import (
        _bundled_eegmat_file,
        _read_bundled_eegmat,
        load_bundled_eegmat,
    )
    from braindecode_pars.io.windows import read_windows

    with np.load(_bundled_eegmat_file()) as f:
        rest = f["s00_1"].astype(np.float64)  # subject 0 at rest, microvolts in float16
    dataset = _read_bundled_eegmat(subjects=[0])
    assert dataset.description.session.tolist() == [1, 2]
    np.testing.assert_array_equal(dataset.datasets[0].raw.get_data(), rest)
    X = read_windows(load_bundled_eegmat(subjects=[0])).X
    assert 1 < np.std(X) < 1e3  # microvolts, not volts
    np.testing.assert_array_equal(X[1], rest[:, 1000:2000].astype(np.float32))


def _naive_draws(view, indices, rng):
    """The crops of ``indices``, one item at a time (the view's draws: two uniforms per
    item, the crop start within crop_bounds, the channel)."""
    u, v = rng.random(len(indices)), rng.random(len(indices))
    out = []
    for k, i in enumerate(indices):
        rec = view.index[i, 0]
        low, high = view.crop_bounds(i)
        start = low + int(u[k] * (high - low + 1))
        channel = int(v[k] * view.recordings[rec].shape[0])
        out.append(view.recordings[rec][channel, start : start + view.n_times])
    return np.stack(out)[:, None]


def test_a_batch_is_drawn_at_once_as_the_items_are_one_by_one():
    from torch.utils.data import Subset

    from braindecode_pars.pretraining._views import _BatchedView

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((3, 500), dtype=np.float32) for _ in range(4)]
    arrays += [rng.standard_normal((5, 700), dtype=np.float32)]
    view = SingleChannelWindows([np.stack(arrays[:4]), arrays[4][None]], n_times=300)
    indices = np.array([4, 0, 2, 2, 1, 4])
    X = view._draw(indices, np.random.default_rng(7)).numpy()
    np.testing.assert_array_equal(X, _naive_draws(view, indices, np.random.default_rng(7)))
    # a Subset's batch: its positions mapped to the view's windows; the draws the
    # per-item access makes from the same generator state
    subset = Subset(view, [1, 2, 4])
    torch.manual_seed(3)
    view._rng = None
    batch, y = _BatchedView(subset)[[2, 0, 1]]
    torch.manual_seed(3)
    view._rng = None
    items = view.__getitems__([4, 1, 2])
    torch.testing.assert_close(batch, torch.stack([x for x, _ in items]))
    assert batch.shape == (3, 1, 300) and y.shape == (3,)
    assert _BatchedView.reads(subset) and not _BatchedView.reads(list(range(3)))


def test_pretraining_reads_whole_batches_of_the_view():
    from braindecode_pars import PARS
    from braindecode_pars.pretraining._views import _BatchedView
    from braindecode_pars.pretraining.net import PretrainNet

    view = SingleChannelWindows(np.random.default_rng(0).standard_normal((20, 2, 300)), n_times=200)
    view.sfreq = 10.0
    model = PARS(n_times=200, sfreq=10.0, n_patches=6, emb_dim=16, depth=1, n_heads=2, ff_dim=16)
    net = PretrainNet(model, max_epochs=1, batch_size=8, progress_bar=False).initialize()
    loader = net.get_iterator(view, training=True)
    assert isinstance(loader.dataset, _BatchedView) and loader.batch_size is None
    sizes = [len(X) for X, _ in loader]
    assert sizes == [8, 8]  # 20 windows: full batches only, the short last one left out


def test_on_cuda_the_training_batches_are_drawn_into_the_memory_the_loader_pins():
    """A pinning DataLoader with no workers gets its batches drawn into pinned memory (it
    keeps them as they are: the crops are copied once, not twice); with workers (which
    write into shared memory), on a CPU, or told not to pin, in ordinary memory. The
    pinned draws themselves run on a GPU (test_training_steps.py)."""
    from braindecode_pars import PARS
    from braindecode_pars.pretraining.net import PretrainNet

    view = SingleChannelWindows(np.random.default_rng(0).standard_normal((20, 2, 300)), n_times=200)
    view.sfreq = 10.0

    def loader(**params):
        model = PARS(n_times=200, sfreq=10.0, n_patches=6, emb_dim=16, depth=1, n_heads=2,
                     ff_dim=16)  # fmt: skip
        net = PretrainNet(model, max_epochs=1, batch_size=8, progress_bar=False, **params)
        return net.get_iterator(view, training=True)  # (not initialized: there may be no GPU)

    cuda = loader(device="cuda")
    assert cuda.pin_memory and cuda.dataset.pinned
    workers = loader(device="cuda", iterator_train__num_workers=2)
    assert workers.pin_memory and not workers.dataset.pinned
    assert not loader(device="cuda", iterator_train__pin_memory=False).dataset.pinned
    cpu = loader(device="cpu")
    assert not cpu.pin_memory and not cpu.dataset.pinned
    # the same draws whichever memory they go to (a CPU: no pinned memory to ask for)
    for batch in ([3, 1, 1], [0]):
        view._rng, view._rng_seed = None, None
        torch.manual_seed(5)
        X, y = cpu.dataset[batch]
        view._rng = None
        torch.manual_seed(5)
        Y = view._draw(np.asarray(batch), view._generator())
        assert torch.equal(X, Y) and not X.is_pinned() and y.shape == (len(batch),)
