"""Reading a store in the order of the disk: every window once per epoch, crops equal to
the mapped file's, equal step counts on every DDP rank."""

import json
import math

import mne
import numpy as np
import pandas as pd
import pytest
import torch
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, Subset

from braindecode_pars.pretraining._views import SingleChannelWindows
from braindecode_pars.pretraining.disk_order import (
    DiskOrderBatches,
    _rank_share,
    _shuffled_in_chunks,
)
from braindecode_pars.store.write import write_window_store

N_TIMES = 50


def coded_recording(rec, n_chans, n_samples):
    """Samples that say where they are: recording * 2e6 + channel * 1e5 + sample."""
    data = rec * 2_000_000 + np.arange(n_chans)[:, None] * 100_000 + np.arange(n_samples)
    info = mne.create_info([f"C{c}" for c in range(n_chans)], 100.0, "eeg")
    raw = mne.io.RawArray(data.astype(np.float64), info, verbose="error")
    return RawDataset(raw, pd.Series({"subject": rec}))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Five recordings of 2 to 4 channels and uneven lengths: 37 windows of 100 samples."""
    shapes = [(3, 900), (2, 700), (4, 1000), (3, 500), (2, 600)]
    ds = BaseConcatDataset([coded_recording(r, c, n) for r, (c, n) in enumerate(shapes)])
    windows = create_fixed_length_windows(
        ds, window_size_samples=100, window_stride_samples=100, on_last_window="drop"
    )
    folder = tmp_path_factory.mktemp("store")
    write_window_store(windows, folder, overwrite=True)
    return folder


@pytest.fixture(scope="module")
def view(store):
    return SingleChannelWindows.from_store(store, n_times=N_TIMES)


def decode(X):
    """(recording, channel, start) of each crop, and whether its samples run on by one."""
    first = X[:, 0, 0].double().numpy()
    rec = np.floor(first / 2_000_000).astype(int)
    chan = np.floor((first - rec * 2_000_000) / 100_000).astype(int)
    start = (first - rec * 2_000_000 - chan * 100_000).astype(int)
    steps = torch.diff(X[:, 0].double(), dim=1)
    return rec, chan, start, bool((steps == 1).all())


def test_every_window_is_read_once_an_epoch_as_its_own_crop(view):
    batches = DiskOrderBatches(view, batch_size=4, chunk_windows=3, buffer_chunks=2, seed=1)
    assert len(view) == 37 and len(batches) == 10  # the last batch holds one crop
    for epoch in (0, 1):
        batches.set_epoch(epoch)
        expected = batches.rank_windows()
        assert sorted(expected.tolist()) == list(range(37))
        X = torch.cat([x for x, _ in batches])
        assert X.shape == (37, 1, N_TIMES) and X.dtype == torch.float32
        rec, chan, start, runs_on = decode(X)
        assert runs_on  # every crop is one contiguous slice of one channel
        rows = view.index[expected]
        low, high = view._crop_bounds(expected)
        assert (rec == rows[:, 0]).all()  # the k-th crop is of the k-th window of the order
        assert ((start >= low) & (start <= high)).all()
        n_chans = np.array([view.recordings[r].shape[0] for r in rec])
        assert ((chan >= 0) & (chan < n_chans)).all()


def test_crops_equal_the_mapped_file_in_float32_and_scaled_float16(store, tmp_path):
    """A float16 store holds each recording times a power of two (its scale); the crops
    come back divided by it, as float32."""
    half = tmp_path / "half"
    half.mkdir()
    (half / "recordings.json").write_bytes((store / "recordings.json").read_bytes())
    with np.load(store / "index.npz") as arrays:
        index, shapes = arrays["index"], arrays["recordings"]
    scales = 2.0 ** -np.arange(9, 9 + len(shapes))  # every coded sample below 2**14
    data = np.fromfile(store / "data.f32", dtype="<f4")
    for (offset, n_chans, n_times), scale in zip(shapes, scales, strict=True):
        data[offset : offset + n_chans * n_times] *= scale
    data.astype("<f2").tofile(half / "data.f16")
    np.savez(half / "index.npz", index=index, recordings=shapes, scales=scales)
    info = json.loads((store / "info.json").read_text())
    (half / "info.json").write_text(json.dumps(dict(info, dtype="<f2", data_file="data.f16")))
    for folder, name, dtype, scaled in (
        (store, "data.f32", "<f4", np.ones(len(shapes))),
        (half, "data.f16", "<f2", scales),
    ):
        view = SingleChannelWindows.from_store(folder, n_times=N_TIMES)
        batches = DiskOrderBatches(view, batch_size=8, chunk_windows=4, seed=3)
        flat = np.memmap(folder / name, dtype=dtype, mode="r")
        per_group, _ = batches._groups(len(batches))
        group = batches.rank_windows()[: per_group * 8]  # the first read group's windows
        offsets, recs = batches._plan(group, 0, 0)
        offsets = offsets[:8] // np.dtype(dtype).itemsize
        expected = np.stack(
            [flat[o : o + N_TIMES] / scaled[r] for o, r in zip(offsets, recs, strict=False)]
        ).astype(np.float32)
        X, y = next(iter(batches))
        np.testing.assert_array_equal(X[:, 0].numpy(), expected)
        assert y.shape == (8,) and not y.any()
    # the random read of a view divides by the scales too: the same draws as from the
    # float32 store, within float16's precision (11 significant bits)
    draws = [
        SingleChannelWindows.from_store(folder, n_times=N_TIMES).fixed_draws(range(37)).tensors[0]
        for folder in (store, half)
    ]
    np.testing.assert_allclose(draws[1], draws[0], rtol=2.0**-11)


def test_the_order_follows_the_file_in_chunks_and_changes_every_epoch(view):
    batches = DiskOrderBatches(view, batch_size=4, chunk_windows=3, buffer_chunks=2, seed=0)
    orders = [batches.epoch_order(e) for e in range(4)]
    assert all(not np.array_equal(orders[0], o) for o in orders[1:])
    np.testing.assert_array_equal(orders[2], batches.epoch_order(2))  # seeded
    other = DiskOrderBatches(view, batch_size=4, chunk_windows=3, buffer_chunks=2, seed=5)
    assert not np.array_equal(other.epoch_order(0), orders[0])
    # the windows of every two chunks of the chunks' order (6 windows of the file, 1 in
    # the last chunk) come together, shuffled
    order = _shuffled_in_chunks(37, 3, 2, np.random.default_rng(0))
    assert sorted(order.tolist()) == list(range(37))
    chunks = np.random.default_rng(0).permutation(13)  # the order's first draw
    first = 0
    for pair in (chunks[i : i + 2] for i in range(0, 13, 2)):
        windows = {w for c in pair for w in range(c * 3, min(37, c * 3 + 3))}
        block = order[first : first + len(windows)]
        assert set(block.tolist()) == windows
        first += len(windows)
    assert not np.array_equal(order, np.sort(order))


def test_the_windows_of_a_subset_alone_are_read(view):
    keep = np.arange(0, 37, 2)
    batches = DiskOrderBatches(Subset(view, keep), batch_size=4, seed=0)
    assert sorted(batches.rank_windows().tolist()) == keep.tolist()
    rec, _, _, _ = decode(torch.cat([x for x, _ in batches]))
    np.testing.assert_array_equal(rec, view.index[batches.rank_windows(), 0])


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("uneven", ["pad", "drop"])
def test_every_rank_takes_the_same_number_of_steps(view, world, uneven):
    ranks = [
        DiskOrderBatches(view, batch_size=4, world_size=world, rank=r, uneven=uneven, seed=2)
        for r in range(world)
    ]
    steps = [sum(1 for _ in b) for b in ranks]
    assert steps == [len(ranks[0])] * world  # 37 windows: no rank waits at a collective
    shares = [b.rank_windows() for b in ranks]
    assert len({len(s) for s in shares}) == 1
    seen = np.concatenate(shares)
    if uneven == "pad":  # every window, and the first of the order again to fill
        assert set(seen.tolist()) == set(range(37)) and len(seen) == world * -(-37 // world)
    else:  # no window twice, 37 % world left out
        assert len(set(seen.tolist())) == len(seen) == world * (37 // world)


@pytest.mark.parametrize("world", [2, 3])
def test_torch_samplers_of_the_random_read_give_every_rank_the_same_steps(view, world):
    """What pretraining with the random read does under DDP: DistributedSampler pads
    every rank to ceil(n / world) windows and the batches leave out the short last one."""
    counts = [
        len(list(BatchSampler(DistributedSampler(view, world, r, seed=0), 4, drop_last=True)))
        for r in range(world)
    ]
    per_rank = math.ceil(37 / world)
    assert counts == [per_rank // 4] * world


def test_rank_share_pads_from_the_start_or_cuts():
    order = np.arange(10)
    assert _rank_share(order, 2, 3).tolist() == [8, 9, 0, 1]
    assert _rank_share(order, 2, 3, "drop").tolist() == [6, 7, 8]
    with pytest.raises(ValueError, match="uneven"):
        _rank_share(order, 0, 2, "wrap")


def test_workers_read_the_same_batches_into_shared_memory_and_see_the_epoch(view):
    batches = DiskOrderBatches(view, batch_size=4, chunk_windows=2, buffer_chunks=2, seed=4)
    batches.set_epoch(3)
    alone = sorted(tuple(x[:, 0, 0].tolist()) for x, _ in batches)
    loader = DataLoader(batches, batch_size=None, num_workers=2, persistent_workers=True)
    for epoch in (3, 4):
        batches.set_epoch(epoch)  # after the workers started: they read it at every pass
        got = list(loader)
        assert len(got) == len(batches)
        assert all(x.is_shared() for x, _ in got)
        firsts = sorted(tuple(x[:, 0, 0].tolist()) for x, _ in got)
        assert (firsts == alone) == (epoch == 3)


def test_bad_arguments_are_refused_naming_them(view, store):
    with pytest.raises(TypeError, match="from_store"):
        DiskOrderBatches(SingleChannelWindows(np.zeros((4, 2, 60), np.float32)), batch_size=2)
    with pytest.raises(ValueError, match="'rank' must be below 'world_size' \\(2\\)"):
        DiskOrderBatches(view, batch_size=2, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        DiskOrderBatches(view, batch_size=0)
    with pytest.raises(ValueError, match="none to each of 40"):
        DiskOrderBatches(view, batch_size=2, world_size=40, uneven="drop")


def ramp_store(folder, n_recordings=8, n_chans=2, n_windows=8, T=300, seed=0):
    """Recordings whose every 300-sample window is a ramp of its own slope and offset
    on every channel: PARS learns their patches' positions quickly."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, T)
    datasets = []
    for rec in range(n_recordings):
        slopes = rng.uniform(0.5, 4.5, (n_chans, n_windows, 1))
        offsets = rng.standard_normal((n_chans, n_windows, 1))
        data = slopes * t + offsets + 0.01 * rng.standard_normal((n_chans, n_windows, T))
        info = mne.create_info([f"C{c}" for c in range(n_chans)], 10.0, "eeg")
        raw = mne.io.RawArray(data.reshape(n_chans, -1), info, verbose="error")
        datasets.append(RawDataset(raw, pd.Series({"subject": rec})))
    windows = create_fixed_length_windows(
        BaseConcatDataset(datasets), window_size_samples=T, window_stride_samples=T,
        on_last_window="drop",
    )  # fmt: skip
    write_window_store(windows, folder, overwrite=True)
    return SingleChannelWindows.from_store(folder, max_shift=0)


def test_pretraining_reads_a_store_in_disk_order_and_learns(tmp_path, one_thread):
    from braindecode_pars import PretrainNet
    from tests._learning import SEED, learned
    from tests.ramp_fixtures import ramp_pars

    view = ramp_store(tmp_path / "store", seed=SEED)
    net = PretrainNet(
        ramp_pars(emb_dim=32, depth=1, n_heads=4, ff_dim=32),
        max_epochs=12,
        batch_size=8,
        lr=3e-3,
        progress_bar=False,
        store_read="disk",
    )
    net.fit(view)
    stream = net.train_sampler_
    assert isinstance(stream, DiskOrderBatches) and stream.epoch == 12  # set every epoch
    assert [len(row["batches"]) for row in net.history] == [len(stream)] * 12 == [8] * 12
    losses = net.history[:, "train_loss"]
    assert np.mean(losses[-3:]) < 0.6 * np.mean(losses[:2])
    learned(net.history[-1, "train_skill"], above=0.3, what="training skill")
    with pytest.raises(ValueError, match="store_read"):
        PretrainNet(ramp_pars(), max_epochs=1, batch_size=8, store_read="ssd").fit(view)


def test_the_disk_order_refuses_a_data_loader_out_of_order(tmp_path, one_thread):
    """``in_order=False`` would hand the workers' batches over as they finish, not in the
    turn a resumed run rebuilds: refused before the first step, naming the parameter;
    the random read takes it."""
    from braindecode_pars import PretrainNet
    from tests.ramp_fixtures import ramp_pars

    view = ramp_store(tmp_path / "store")
    kwargs = dict(max_epochs=1, batch_size=8, progress_bar=False, iterator_train__in_order=False)
    net = PretrainNet(
        ramp_pars(emb_dim=16, depth=1, n_heads=2, ff_dim=16), store_read="disk", **kwargs
    )
    with pytest.raises(ValueError, match=r"'iterator_train__in_order' must be True with "
                       r"store_read='disk', but got False.*store_read='random'"):  # fmt: skip
        net.fit(view)
    assert len(net.history) == 0 or "train_loss" not in net.history[-1]
    assert (
        len(
            PretrainNet(
                ramp_pars(emb_dim=16, depth=1, n_heads=2, ff_dim=16), store_read="random", **kwargs
            )
            .fit(view)
            .history
        )
        == 1
    )


def test_the_command_line_pretrains_from_a_store_read_in_disk_order(tmp_path, one_thread):
    from braindecode_pars import cli
    from braindecode_pars.hub.folders import run_state
    from tests._helpers import tiny_config

    ramp_store(tmp_path / "store", n_recordings=4)
    run = tmp_path / "run"
    flags = ["--store", str(tmp_path / "store"), "--out", str(run), "--device", "cpu"]
    flags += ["--batch-size", "8", "--steps", "8", "--read", "disk"]
    config = tiny_config(tmp_path, n_patches=4)
    assert cli.main(["pretrain", *flags, "--window-seconds", "30", *config]) == 0
    history = json.loads((run_state(run) / "history.json").read_text())
    # 32 windows, 4 held out: 28 train in 3 full batches of 8 (the short one left out)
    assert [row["train_batch_count"] for row in history] == [3, 3, 3]
    with pytest.raises(SystemExit):
        cli.main(["pretrain", *flags[:-2], "--read", "ssd"])


class _SharedFlag(torch.utils.data.Dataset):
    """Whether the batch a worker built is in shared memory before the DataLoader sends it."""

    def __init__(self, make):
        self.make = make

    def __len__(self):
        return 1

    def __getitem__(self, i):
        X, _ = self.make()
        return torch.tensor(X.is_shared())


def test_workers_build_their_batches_in_shared_memory_for_both_reads(view):
    from braindecode_pars.pretraining._views import _BatchedView

    batched = _BatchedView(view)
    stream = DiskOrderBatches(view, batch_size=4, seed=0)
    makes = {"random": lambda: batched[[0, 5, 9]], "disk": lambda: next(iter(stream))}
    for name, make in makes.items():
        assert not make()[0].is_shared(), name  # in the training process: plain memory
        loader = DataLoader(_SharedFlag(make), batch_size=None, num_workers=1)
        assert bool(next(iter(loader))), name  # in a worker: shared, no copy on its way


def _rank_share_under_gloo(rank, world, init, store, out):
    """One process of a gloo group: its own torch seed, the order's seed from rank 0."""
    from braindecode_pars.pretraining.net import _new_run_seed

    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.manual_seed(100 + rank)  # every process seeded differently
        view = SingleChannelWindows.from_store(store, n_times=N_TIMES)
        batches = DiskOrderBatches(view, batch_size=4, seed=_new_run_seed(), rank=rank,
                                   world_size=world)  # fmt: skip
        np.save(out / f"rank{rank}.npy", batches.rank_windows(epoch=3))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.serial
@pytest.mark.slow  # three processes that import the package
def test_ranks_of_a_process_group_share_one_order_and_split_it(store, tmp_path):
    world = 3
    init = f"file://{tmp_path / 'rendezvous'}"
    torch.multiprocessing.spawn(
        _rank_share_under_gloo, args=(world, init, store, tmp_path), nprocs=world
    )
    shares = [np.load(tmp_path / f"rank{r}.npy") for r in range(world)]
    assert [len(s) for s in shares] == [13] * world  # ceil(37 / 3)
    seen = np.concatenate(shares)
    assert set(seen.tolist()) == set(range(37))  # one order, split: every window read
    assert len(seen) - len(set(seen.tolist())) == 2  # and two read again to pad


@pytest.mark.parametrize("workers", [0, 2], ids=["no-workers", "2-workers"])
def test_a_pass_from_start_hands_over_the_rest_of_the_whole_pass(view, workers):
    """A resumed epoch (``start``): the batches after the first ``start`` of the whole
    epoch, in the order the DataLoader hands them over (one worker after the other, groups
    of 2 batches, the workers' shares uneven), read alike; the skipped ones not read."""
    batches = DiskOrderBatches(view, batch_size=2, chunk_windows=2, buffer_chunks=2, seed=6)
    batches.set_epoch(2)
    kwargs = dict(num_workers=workers, multiprocessing_context="fork") if workers else {}
    loader = DataLoader(batches, batch_size=None, **kwargs)
    whole = [X for X, _ in loader]
    assert len(whole) == batches.epoch_batches() == 19  # 37 windows, the last batch short
    for start in (1, 2, 3, 5, 18, 19):
        batches.start = start
        rest = [X for X, _ in loader]
        assert len(rest) == len(batches) == 19 - start
        assert all(torch.equal(a, b) for a, b in zip(rest, whole[start:], strict=True)), start
    batches.start = 0
    assert all(torch.equal(a, b) for (a, _), b in zip(loader, whole, strict=True))
    with pytest.raises(ValueError, match="start"):
        batches.start = -1


@pytest.mark.parametrize("workers", [0, 2], ids=["no-workers", "2-workers"])
def test_a_disk_order_run_stopped_within_an_epoch_resumes_to_the_weights_never_stopped(
    tmp_path, workers, one_thread
):
    """``store_read="disk"``: stopped by a signal at step 2 of epoch 2 and resumed, the run
    reads the rest of that epoch (not its first batches again) and ends with the weights
    of the run never stopped, bit for bit."""
    import signal

    from braindecode_pars import PretrainNet
    from braindecode_pars.pretraining import TrainingStopped
    from tests.internals.test_pretrain_stop import SignalAt, _assert_same_weights, _steps
    from tests.ramp_fixtures import ramp_pars

    view = ramp_store(tmp_path / "store")

    def net(folder, **kwargs):
        torch.manual_seed(0)
        loader = dict(iterator_train__num_workers=workers)
        if workers:
            loader["iterator_train__multiprocessing_context"] = "fork"
        return PretrainNet(
            ramp_pars(emb_dim=32, depth=1, n_heads=4, ff_dim=32),
            max_epochs=3, batch_size=8, lr=3e-3, progress_bar=False, store_read="disk",
            checkpoint_dir=folder, checkpoint_every_minutes=60,
            stop_signals=("SIGTERM", "SIGUSR1"), **loader, **kwargs,
        )  # fmt: skip

    full = net(tmp_path / "full").fit(view)
    stopped = net(tmp_path / "run", callbacks=[("signal", SignalAt(signal.SIGUSR1, 2, 2))])
    with pytest.raises(TrainingStopped):
        stopped.fit(view)
    assert _steps(stopped) == 8 + 2
    resumed = net(tmp_path / "run").fit(view)
    assert _steps(resumed) == _steps(full) == 24
    _assert_same_weights(resumed, full)
    # every step of the epochs after the stop: the same loss
    losses = [[b["train_loss"] for b in net.history[-1]["batches"]] for net in (resumed, full)]
    assert losses[0] == losses[1]


def test_a_disk_order_run_resumed_on_other_workers_says_its_batches_change(
    tmp_path, one_thread, caplog
):
    """``state.json`` holds the DataLoader workers; a run read in the order of the disk
    resumed on another number (which hands the batches over in another order) says so
    and how to keep them; read at random, it says nothing."""
    import signal

    from braindecode_pars import PretrainNet
    from braindecode_pars.pretraining import TrainingStopped
    from tests.internals.test_pretrain_stop import SignalAt
    from tests.ramp_fixtures import ramp_pars

    view = ramp_store(tmp_path / "store", n_recordings=4)

    def net(read, callbacks=(), workers=0):
        loader = dict(iterator_train__num_workers=workers)
        if workers:
            loader["iterator_train__multiprocessing_context"] = "fork"
        return PretrainNet(
            ramp_pars(emb_dim=16, depth=1, n_heads=2, ff_dim=16),
            max_epochs=2, batch_size=8, progress_bar=False, store_read=read,
            checkpoint_dir=tmp_path / read, stop_signals=("SIGUSR1",),
            callbacks=list(callbacks), **loader,
        )  # fmt: skip

    for read in ("disk", "random"):
        with pytest.raises(TrainingStopped):
            net(read, [("signal", SignalAt(signal.SIGUSR1, 1, 1))]).fit(view)
        assert json.loads((tmp_path / read / "state.json").read_text())["workers"] == 0
    with caplog.at_level("WARNING", logger="braindecode_pars"):
        net("random", workers=1).fit(view)
    assert "DataLoader workers" not in caplog.text
    with caplog.at_level("WARNING", logger="braindecode_pars"):
        net("disk", workers=1).fit(view)
    assert "on 1 DataLoader workers, where the state was saved on 0" in caplog.text
    assert "--workers 0" in caplog.text
