"""The crop draw of a single-channel view (issue 70): gathered a block of memory at a time,
bit-identical to the loop it replaced; and drawn on a device from recordings uploaded once,
within the same bounds and with the same uniform distribution."""

import pickle

import mne
import numpy as np
import pandas as pd
import pytest
import torch
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows
from scipy.stats import chisquare

from braindecode_pars.pretraining._views import SingleChannelWindows, _DeviceCrops
from braindecode_pars.store.write import write_window_store

N_TIMES = 40


def old_draw(view, indices, rng):
    """``SingleChannelWindows._draw`` before issue 70, written out: the bounds of every
    item, then a Python loop over the batch that copies one slice per crop."""
    u, v = rng.random(len(indices)), rng.random(len(indices))
    rows = view.index[indices]
    channels = np.array([view.recordings[r].shape[0] for r in rows[:, 0].tolist()])
    lengths = np.array([view.recordings[r].shape[1] for r in rows[:, 0].tolist()])
    last = lengths - view.n_times
    low = np.minimum(np.maximum(0, rows[:, 1] - view.max_shift), last)
    high = np.minimum(last, np.maximum(rows[:, 1], rows[:, 2] - view.n_times) + view.max_shift)
    high = np.maximum(low, high)
    starts = (low + (u * (high - low + 1)).astype(np.int64)).tolist()
    picks = (v * channels).astype(np.int64).tolist()
    out = np.empty((len(indices), 1, view.n_times), np.float32)
    for k, (rec, start, channel) in enumerate(zip(rows[:, 0].tolist(), starts, picks, strict=True)):
        out[k, 0] = view.recordings[rec][channel, start : start + view.n_times]
    if view._scales is not None:
        out /= view._scales[rows[:, 0]][:, None, None]
    return out


def _raws(shapes, seed=0):
    datasets = []
    for rec, (n_chans, n_samples) in enumerate(shapes):
        data = np.random.default_rng(seed + rec).standard_normal((n_chans, n_samples))
        info = mne.create_info([f"C{c}" for c in range(n_chans)], 100.0, "eeg")
        raw = mne.io.RawArray(data * 1e-5 * (rec + 1), info, verbose="error")
        datasets.append(RawDataset(raw, pd.Series({"subject": rec})))
    return create_fixed_length_windows(
        BaseConcatDataset(datasets), window_size_samples=100, window_stride_samples=100,
        on_last_window="drop",
    )  # fmt: skip


SHAPES = [(3, 900), (2, 700), (4, 1000)]  # 26 windows of 100 samples


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    """Views of every layout the draw meets: one array (one block of memory), several
    arrays (several blocks), an array's slice (channels further apart than their
    samples), a Fortran-ordered array (samples not contiguous in time),
    recordings read one by one with crops shifted beyond their windows, and stores of
    float32 and of float16 (scaled) samples."""
    rng = np.random.default_rng(0)
    folder = tmp_path_factory.mktemp("stores")
    write_window_store(_raws(SHAPES), folder / "f32", overwrite=True)
    write_window_store(_raws(SHAPES), folder / "f16", overwrite=True, dtype="float16")
    views = {
        "one array": SingleChannelWindows(rng.standard_normal((30, 3, 90)), n_times=N_TIMES),
        "arrays": SingleChannelWindows(
            [rng.standard_normal((12, 3, 90)), rng.standard_normal((5, 5, 70))], n_times=N_TIMES
        ),
        "sliced": SingleChannelWindows(  # each channel's samples a row of a wider array
            rng.standard_normal((8, 3, 110), dtype=np.float32)[:, :, 10:100], n_times=N_TIMES
        ),
        "fortran": SingleChannelWindows(
            np.asfortranarray(rng.standard_normal((9, 2, 60)), dtype=np.float32), n_times=N_TIMES
        ),
        "recordings": SingleChannelWindows(_raws(SHAPES), n_times=N_TIMES, max_shift=30),
        "store": SingleChannelWindows.from_store(folder / "f32", n_times=N_TIMES),
        "float16 store": SingleChannelWindows.from_store(folder / "f16", n_times=N_TIMES),
    }
    assert views["float16 store"]._scales is not None
    return views


LAYOUTS = ["one array", "arrays", "sliced", "fortran", "recordings", "store", "float16 store"]


@pytest.mark.parametrize("name", LAYOUTS)
def test_the_draw_gives_the_crops_of_the_old_loop_bit_for_bit(views, name):
    view = views[name]
    blocks = set(view._layout().block.tolist())
    expected = {"one array": {0}, "arrays": {0, 1}, "fortran": {-1}, "recordings": {0, 1, 2}}
    assert blocks == expected.get(name, {0})  # the layout each case exercises (a store: one)
    if name == "sliced":
        assert (view._layout().stride == 110).all() and (view._layout().n_samples == 90).all()
    for seed, size in ((0, 1), (1, 7), (2, 256)):
        indices = np.random.default_rng(seed).integers(0, len(view), size)
        rng, reference = np.random.default_rng(seed), np.random.default_rng(seed)
        X = view._draw(indices, rng)
        np.testing.assert_array_equal(X.numpy(), old_draw(view, indices, reference))
        assert rng.random() == reference.random()  # the same draws taken from the generator
    shared = view._draw(indices, np.random.default_rng(2), shared=True)
    assert shared.is_shared() and torch.equal(shared, X)


def test_a_pickled_view_draws_the_same_crops_and_carries_no_layout(views):
    view = views["arrays"]
    view._layout()
    state = pickle.dumps(view)
    again = pickle.loads(state)
    assert "_gather" not in again.__dict__
    indices = np.arange(len(view))
    X = again._draw(indices, np.random.default_rng(5))
    assert torch.equal(X, view._draw(indices, np.random.default_rng(5)))


@pytest.mark.parametrize("name", LAYOUTS)
def test_device_crops_are_slices_of_the_recordings_within_the_bounds(views, name):
    view = views[name]
    crops = _DeviceCrops(view, "cpu")
    indices = np.random.default_rng(0).integers(0, len(view), 500)
    X, starts, channels = crops.draw(indices, torch.Generator().manual_seed(0), positions=True)
    assert X.shape == (500, 1, N_TIMES) and X.dtype == torch.float32
    scales = view._scales
    for k, i in enumerate(indices.tolist()):
        rec = int(view.index[i, 0])
        low, high = view.crop_bounds(i)
        start, channel = int(starts[k]), int(channels[k])
        assert low <= start <= high and 0 <= channel < view.recordings[rec].shape[0]
        crop = np.asarray(view.recordings[rec][channel, start : start + N_TIMES], np.float32)
        if scales is not None:
            crop = crop / scales[rec]
        np.testing.assert_array_equal(X[k, 0].numpy(), crop)
    again = crops.draw(indices, torch.Generator().manual_seed(0))
    assert torch.equal(again, X)  # seeded: the same crops
    assert not torch.equal(crops.draw(indices, torch.Generator().manual_seed(1)), X)


def test_device_crop_starts_and_channels_are_uniform(views):
    """Many draws of two windows in one batch (a chi-square test at a fixed seed): the
    starts of each are uniform over its own bounds, and its channels over its own
    recording's (4 and 2 channels)."""
    view = views["recordings"]
    crops = _DeviceCrops(view, "cpu")
    first = int(np.flatnonzero(view.index[:, 0] == 2)[4])  # inside a 4-channel recording
    second = int(np.flatnonzero(view.index[:, 0] == 1)[0])  # at a 2-channel one's start
    n = 40_000
    indices = np.tile([first, second], n // 2)
    _, starts, channels = crops.draw(indices, torch.Generator().manual_seed(3), positions=True)
    for k, window in enumerate((first, second)):
        low, high = view.crop_bounds(window)
        assert high - low + 1 == (121 if k == 0 else 91)  # 60 + 1 + 2 x 30; 0..90
        mine = starts[k::2].numpy()
        counts = np.bincount(mine - low, minlength=high - low + 1)
        assert len(counts) == high - low + 1 and counts.min() > 0
        assert chisquare(counts).pvalue > 1e-3
        n_chans = view.recordings[view.index[window, 0]].shape[0]
        counts = np.bincount(channels[k::2].numpy(), minlength=n_chans)
        assert len(counts) == n_chans and chisquare(counts).pvalue > 1e-3
    # the test sees a bias: one start in five dropped makes it fail
    biased = np.bincount(starts[0::2].numpy() - view.crop_bounds(first)[0])
    biased[::5] = biased[::5] * 4 // 5
    assert chisquare(biased).pvalue < 1e-6


def test_a_view_larger_than_the_budget_is_refused_naming_it(views):
    view = views["one array"]
    needed = _DeviceCrops.bytes_needed(view)
    assert needed == 4 * 30 * 3 * 90 + 8 * (3 * 30 + 3 * 30)
    _DeviceCrops(view, "cpu", max_bytes=needed)
    with pytest.raises(ValueError, match=f"'max_bytes' must be at least the {needed} bytes"):
        _DeviceCrops(view, "cpu", max_bytes=needed - 1)


def _coded_view():
    """A view whose every sample says where it is: recording r, channel c, sample t holds
    ``1000 r + 100 c + t / 10`` (exact in float32), so a crop names its place."""
    recordings = []
    for r, (n_chans, n_samples) in enumerate([(3, 300), (2, 250), (4, 400)]):
        c, t = np.meshgrid(np.arange(n_chans), np.arange(n_samples), indexing="ij")
        recordings.append((1000 * r + 100 * c + t / 10).astype(np.float32))
    windows = np.concatenate([rec[None, :, :200] for rec in recordings[:1]])
    view = SingleChannelWindows(windows, n_times=N_TIMES)
    view.recordings, view.index = (
        recordings,
        np.array(
            [
                (r, s, s + 100)
                for r, rec in enumerate(recordings)
                for s in range(0, rec.shape[1] - 99, 100)
            ]
        ),
    )
    view.__dict__.pop("_gather", None)
    return view


def test_the_training_loop_draws_its_crops_on_the_device_within_the_bounds(monkeypatch):
    """``PretrainNet(batches="device")``: the training batches come from the device
    draw, full, each crop a slice of its window's recording within the window's crop
    bounds (decoded from the samples' values), the recordings uploaded once per fit."""
    from braindecode_pars.models.pretext.pars import PARS
    from braindecode_pars.pretraining import net as net_module
    from braindecode_pars.pretraining._views import _DeviceBatches
    from braindecode_pars.pretraining.net import PretrainNet

    view = _coded_view()
    uploads = []
    real = net_module._DeviceCrops

    class counting(real):  # noqa: N801
        def __init__(self, *args, **kwargs):
            uploads.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(net_module, "_DeviceCrops", counting)
    torch.manual_seed(0)
    model = PARS(n_times=N_TIMES, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8,
                 depth=1, n_heads=2, ff_dim=8)  # fmt: skip
    net = PretrainNet(model, max_epochs=2, batch_size=4, progress_bar=False,
                      batches="device")  # fmt: skip
    net.initialize()
    batches = net.get_iterator(view, training=True)
    assert isinstance(batches, _DeviceBatches) and len(batches) == len(view) // 4
    for X, y in batches:
        assert X.shape == (4, 1, N_TIMES) and y.shape == (4,)
        rec = (X[:, 0, 0] // 1000).long().numpy()
        chan = ((X[:, 0, 0] % 1000) // 100).long().numpy()
        start = np.rint((X[:, 0, 0] % 100).numpy() * 10).astype(np.int64)
        expected = (
            1000 * rec[:, None] + 100 * chan[:, None] + (start[:, None] + np.arange(N_TIMES)) / 10
        )
        np.testing.assert_allclose(X[:, 0].numpy(), expected, atol=1e-3)  # one slice each
        for r, s in zip(rec.tolist(), start.tolist(), strict=True):  # within some window's bounds
            bounds = [view.crop_bounds(i) for i in range(len(view)) if view.index[i, 0] == r]
            assert any(low <= s <= high for low, high in bounds), (r, s, bounds)
    net.fit(view)
    assert len(net.history) == 2 and len(uploads) == 1  # once, for every epoch
    assert net._crops_kept is None  # the upload goes with the fit


def test_device_crops_are_chosen_by_the_devices_default_and_refused_with_workers(monkeypatch):
    from braindecode_pars._util import device_defaults
    from braindecode_pars.models.pretext.pars import PARS
    from braindecode_pars.pretraining import net as net_module
    from braindecode_pars.pretraining.net import PretrainNet

    data = np.random.default_rng(0).standard_normal((12, 2, 100)).astype(np.float32)
    view = SingleChannelWindows(data, n_times=N_TIMES)
    model = PARS(n_times=N_TIMES, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8,
                 depth=1, n_heads=2, ff_dim=8)  # fmt: skip
    auto = PretrainNet(model, batch_size=4, progress_bar=False)
    assert auto.batches == "auto" and auto.crops_on_device is None
    assert auto._batches_in_force(view, {}) == "host"  # a CPU net draws on the host
    auto.device = "cuda"  # CUDA keeps the host's draw until a GPU row times the device's
    assert device_defaults._DEVICE_DEFAULTS["cuda"]["batches"] == "host"
    assert auto._batches_in_force(view, {}) == "host"
    cpu = {**device_defaults._DEVICE_DEFAULTS["cpu"], "batches": "device"}
    monkeypatch.setitem(device_defaults._DEVICE_DEFAULTS, "cpu", cpu)  # where the table says so
    auto.device = "cpu"
    assert auto._batches_in_force(view, {}) == "device"
    assert auto._batches_in_force(view, {"num_workers": 2}) == "host"  # workers draw on the host
    forced = PretrainNet(model, batch_size=4, progress_bar=False, batches="device")
    assert forced._batches_in_force(view, {}) == "device"
    with pytest.raises(ValueError, match=r"'iterator_train__num_workers' must be 0, but got 2"):
        forced._batches_in_force(view, {"num_workers": 2})
    monkeypatch.setattr(net_module, "_DEVICE_CROPS_BYTES", 1000)  # too large: read ahead
    assert auto._batches_in_force(view, {}) == "read-ahead"
    bad = PretrainNet(model, batch_size=4, progress_bar=False, batches="yes")
    with pytest.raises(
        ValueError,
        match=r"Invalid value for the 'batches' parameter. Allowed values are 'auto', 'host', "
        r"'read-ahead' and 'device', but got 'yes' instead",
    ):
        bad.initialize()  # before any batch


def test_crops_on_device_still_chooses_for_a_release_and_names_batches():
    from braindecode_pars.models.pretext.pars import PARS
    from braindecode_pars.pretraining.net import PretrainNet

    data = np.random.default_rng(0).standard_normal((12, 2, 100)).astype(np.float32)
    view = SingleChannelWindows(data, n_times=N_TIMES)
    model = PARS(n_times=N_TIMES, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8,
                 depth=1, n_heads=2, ff_dim=8)  # fmt: skip
    for old, new in ((True, "device"), (False, "host"), ("auto", "host")):
        with pytest.warns(DeprecationWarning, match=r"'crops_on_device' is deprecated.*batches="):
            net = PretrainNet(model, batch_size=4, progress_bar=False, crops_on_device=old)
        assert net._batches_in_force(view, {}) == new
    with pytest.warns(DeprecationWarning):
        both = PretrainNet(model, batch_size=4, progress_bar=False, crops_on_device=True,
                           batches="host")  # fmt: skip
    with pytest.raises(ValueError, match=r"'crops_on_device' \(deprecated\) and 'batches' were"):
        both.initialize()
    with pytest.warns(DeprecationWarning):
        bad = PretrainNet(model, batch_size=4, progress_bar=False, crops_on_device="yes")
    with pytest.raises(ValueError, match=r"'crops_on_device' parameter.*but got 'yes'"):
        bad.initialize()


def test_device_crops_forced_where_they_cannot_serve_are_refused_naming_why(monkeypatch):
    from braindecode_pars.models.pretext.pars import PARS
    from braindecode_pars.pretraining import net as net_module
    from braindecode_pars.pretraining.net import PretrainNet

    model = PARS(n_times=N_TIMES, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8,
                 depth=1, n_heads=2, ff_dim=8)  # fmt: skip
    net = PretrainNet(model, batch_size=4, progress_bar=False, batches="device").initialize()
    arrays = torch.utils.data.TensorDataset(torch.zeros(8, 1, N_TIMES), torch.zeros(8))
    with pytest.raises(
        ValueError,
        match=r"batches='device' draws the crops of a "
        r"SingleChannelWindows view.*but the training data is a TensorDataset",
    ):
        net.get_iterator(arrays, training=True)  # fmt: skip
    data = np.random.default_rng(0).standard_normal((12, 2, 100)).astype(np.float32)
    monkeypatch.setattr(net_module, "_DEVICE_CROPS_BYTES", 1000)
    with pytest.raises(
        ValueError,
        match=r"batches='device' needs the recordings on the "
        r"device: at most 1000 bytes, but they take \d+",
    ):
        net.get_iterator(SingleChannelWindows(data, n_times=N_TIMES), training=True)  # fmt: skip
