"""Every training step has the compiled batch size (issue 70): the short last batch of an
epoch is left out, so a compiled step compiles once and never runs a dynamic-shape graph;
the steps counted for an epoch (the learning-rate curve, the step budgets, resuming) are
the steps taken."""

import math

import mne
import numpy as np
import pandas as pd
import pytest
import torch
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows
from skorch.callbacks import Callback
from torch._dynamo.backends.registry import lookup_backend
from torch._dynamo.utils import counters
from torch.utils.data import BatchSampler, DistributedSampler

from braindecode_pars.pretraining._views import SingleChannelWindows
from braindecode_pars.pretraining.disk_order import DiskOrderBatches
from braindecode_pars.pretraining.net import PretrainNet
from braindecode_pars.pretraining.schedule import _batches_per_epoch, _epochs_for_steps
from braindecode_pars.store.write import write_window_store

from ..conftest import TINY
from ..ramp_fixtures import ramp_dataset, ramp_pars

pytestmark = pytest.mark.usefixtures("one_thread")


class CountingBackend:
    """A torch.compile backend that records the input shapes of every graph it is given
    (a symbolic size, as a dynamic-shape graph has, is recorded as such), then compiles
    it with ``aot_eager`` (no C++ build; the same graph Inductor would get)."""

    def __init__(self):
        self.graphs = []
        self.aot_eager = lookup_backend("aot_eager")

    def __call__(self, gm, example_inputs):
        self.graphs.append(
            [tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in example_inputs]
        )
        return self.aot_eager(gm, example_inputs)


class GraphsPerStep(Callback):
    """The graphs compiled so far after every training step, and the step's batch size."""

    def __init__(self, backend):
        self.backend = backend

    def initialize(self):
        self.after_, self.sizes_ = [], []
        return self

    def on_batch_end(self, net, batch=None, training=False, **kwargs):
        if training:
            self.after_.append(len(self.backend.graphs))
            self.sizes_.append(len(batch[0]))


def _fit_compiled(data, **kwargs):
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    backend = CountingBackend()
    net = PretrainNet(
        ramp_pars(**TINY), max_epochs=2, batch_size=16, lr=3e-3, progress_bar=False,
        device="cpu", compile=True, compile__backend=backend,
        callbacks=[("graphs", GraphsPerStep(backend))], **kwargs,
    )  # fmt: skip
    net.fit(data)
    return net, backend, dict(net.callbacks_)["graphs"]


def _view(n_windows, T=300):
    """A single-channel view of ``n_windows`` two-channel ramps (10 Hz, as ramp_pars)."""
    view = SingleChannelWindows(ramp_dataset(n_windows * 2, T).tensors[0].reshape(-1, 2, T))
    view.sfreq = 10.0
    return view


@pytest.mark.parametrize("source", ["tensors", "view"])
def test_a_compiled_fit_compiles_its_step_once_with_a_short_last_batch(source):
    """40 windows in batches of 16 for 2 epochs: 4 steps of 16 (not 16, 16, 8 twice), and
    no graph compiled after the first step, none of them with a symbolic size. Both
    paths to the batches: skorch's DataLoader of a plain dataset, and a view's batches
    drawn whole (a BatchSampler)."""
    data = ramp_dataset(40) if source == "tensors" else _view(40)
    net, backend, graphs = _fit_compiled(data)
    assert graphs.sizes_ == [16] * 4
    assert net.history[:, "train_batch_count"] == [2, 2] and net.epoch_steps_ == 2
    assert graphs.after_[0] >= 1 and graphs.after_ == [graphs.after_[0]] * 4  # 0 recompiles
    assert counters["stats"]["unique_graphs"] == graphs.after_[0]
    assert dict(counters["graph_break"]) == {}
    for shapes in backend.graphs:  # static: every size a plain int
        assert all(isinstance(d, int) for s in shapes if isinstance(s, tuple) for d in s), shapes


def test_the_steps_of_an_epoch_are_its_full_batches():
    """The one count the schedule, the budgets and resuming read: full batches of each
    process's share, and one step (drawn with replacement) when a share is smaller than
    a batch; a DistributedSampler's share in a BatchSampler that drops the short batch
    takes exactly as many."""
    assert _batches_per_epoch(40, 16) == 2
    assert _batches_per_epoch(32, 16) == 2  # a multiple: nothing left out
    assert _batches_per_epoch(31, 16) == 1
    assert _batches_per_epoch(12, 16) == 1  # one step of 16 drawn with replacement
    assert _batches_per_epoch(37, 4, world_size=3) == 3  # 13 windows each
    assert _epochs_for_steps(10, 40, 16) == 5
    view = _view(37)
    for world in (1, 2, 3):
        for rank in range(world):
            sampler = DistributedSampler(view, world, rank, shuffle=True, seed=0)
            batches = list(BatchSampler(sampler, 4, drop_last=True))
            assert len(batches) == _batches_per_epoch(37, 4, world) == math.ceil(37 / world) // 4
            assert all(len(b) == 4 for b in batches)


def test_a_fit_counts_the_steps_it_takes_and_the_rate_follows_them():
    """40 windows in batches of 16, 3 epochs: 6 steps, each at the rate of its place on
    the curve of 6 steps (the last one ends near zero, as it should)."""
    from braindecode_pars.pretraining.schedule import warmup_cosine_factor

    net = PretrainNet(ramp_pars(**TINY), max_epochs=3, batch_size=16, lr=1e-3, progress_bar=False)
    net.fit(ramp_dataset(40))
    lrs = [b["event_lr"] for row in net.history for b in row["batches"] if "event_lr" in b]
    assert lrs == pytest.approx([1e-3 * warmup_cosine_factor(s / 6) for s in range(6)])


def test_a_training_batch_that_is_not_full_is_refused_naming_the_setting():
    net = PretrainNet(
        ramp_pars(**TINY), max_epochs=1, batch_size=16, progress_bar=False,
        iterator_train__drop_last=False,
    )  # fmt: skip
    with pytest.raises(ValueError, match="'iterator_train__drop_last' must be True.*got False"):
        net.fit(ramp_dataset(40))


def _store(folder, lengths=(900, 700, 1000)):
    """Recordings of 2 channels, windows of 100 samples: 26 windows."""
    datasets = []
    for rec, n in enumerate(lengths):
        info = mne.create_info(["C0", "C1"], 100.0, "eeg")
        data = np.random.default_rng(rec).standard_normal((2, n))
        raw = mne.io.RawArray(data, info, verbose="error")
        datasets.append(RawDataset(raw, pd.Series({"subject": rec})))
    windows = create_fixed_length_windows(
        BaseConcatDataset(datasets), window_size_samples=100, window_stride_samples=100,
        on_last_window="drop",
    )  # fmt: skip
    write_window_store(windows, folder, overwrite=True)
    return SingleChannelWindows.from_store(folder, n_times=50)


def test_disk_order_batches_leave_out_the_short_last_batch_unless_it_is_the_only_one(tmp_path):
    view = _store(tmp_path / "store")
    assert len(view) == 26
    for batch_size, world, expected in ((8, 1, [8, 8, 8]), (8, 2, [8]), (16, 2, [13])):
        for rank in range(world):
            batches = DiskOrderBatches(
                view, batch_size, seed=0, rank=rank, world_size=world, drop_last=True
            )
            sizes = [len(X) for X, _ in batches]
            assert sizes == expected and len(batches) == len(expected)
    kept = DiskOrderBatches(view, 8, seed=0)  # drop_last=False, the default: kept
    assert [len(X) for X, _ in kept] == [8, 8, 8, 2]
