"""What the pretraining loop does between two steps, made cheaper for issue 89 (the
loop at its step's pace) without changing what it does: the batches of a view read in
the training process without a DataLoader, an epoch's batches cut from its order
without a ``BatchSampler``, the crop bounds computed once, the callbacks that do
nothing on a notification not called. Each is checked against the way it was done
before, bit for bit."""

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback
from torch.utils.data import BatchSampler, DataLoader, Subset

from braindecode_pars._util.seeding import (
    CROPS,
    _Batch,
    _EpochBatches,
    _EpochOrder,
    derived_seed,
)
from braindecode_pars.models.pretext.pars import PARS
from braindecode_pars.pretraining._views import SingleChannelWindows, _BatchedView, _HostBatches
from braindecode_pars.pretraining.net import PretrainNet

pytestmark = pytest.mark.usefixtures("one_thread")


def _reference_batches(order, batch_size, seed, rank, epoch, start, keyed):
    """The batches as ``_EpochBatches`` made them before: a ``BatchSampler`` over the
    order, the ones before ``start`` skipped."""
    out = []
    for place, batch in enumerate(BatchSampler(order, batch_size, drop_last=True)):
        if place < start:
            continue
        if keyed:
            key = (seed, CROPS, rank, epoch, place)
            batch = (list(batch), derived_seed(*key))
        out.append(batch)
    return out


@pytest.mark.parametrize("n, batch_size", [(27, 8), (24, 8), (7, 8), (5, 1), (40, 13)])
@pytest.mark.parametrize("keyed", [True, False])
def test_an_epochs_batches_are_those_of_a_batch_sampler(n, batch_size, keyed):
    for epoch in (0, 3):
        for start in range(0, n // batch_size + 2):
            order = _EpochOrder(n, seed=11, rank=1)
            batches = _EpochBatches(order, batch_size, seed=11, rank=1, keyed=keyed)
            batches.set_epoch(epoch)
            batches.start = start
            got = list(batches)
            want = _reference_batches(order, batch_size, 11, 1, epoch, start, keyed)
            if keyed:
                assert all(isinstance(b, _Batch) for b in got)
                got = [(b.indices.tolist(), b.seed) for b in got]
            assert got == want
            assert len(batches) == len(want)


def _view():
    data = np.random.default_rng(0).standard_normal((20, 3, 120)).astype(np.float32)
    return SingleChannelWindows(data, n_times=50)


def test_host_batches_are_the_dataloaders_bit_for_bit():
    view = _view()
    subset = Subset(view, list(range(3, 19)))
    order = _EpochOrder(len(subset), seed=5)
    batches = _EpochBatches(order, 4, seed=5, keyed=True)
    loader = DataLoader(_BatchedView(subset), sampler=batches, batch_size=None)
    expected = [(X.clone(), y.clone()) for X, y in loader]
    got = list(_HostBatches(_BatchedView(subset), batches))
    assert len(got) == len(expected) == 4 == len(_HostBatches(_BatchedView(subset), batches))
    for (X, y), (X0, y0) in zip(got, expected, strict=True):
        assert torch.equal(X, X0) and torch.equal(y, y0) and X.shape == (4, 1, 50)


def test_crop_bounds_are_the_formulas_and_follow_a_new_index_or_length():
    view = _view()

    def naive(i):
        rec, start, stop = view.index[i]
        last = view._layout().n_samples[rec] - view.n_times
        low = min(max(0, start - view.max_shift), last)
        high = min(last, max(start, stop - view.n_times) + view.max_shift)
        return int(low), int(max(low, high))

    assert [view.crop_bounds(i) for i in range(len(view))] == [naive(i) for i in range(len(view))]
    view.max_shift = 3  # set after the bounds were computed: computed again
    assert [view.crop_bounds(i) for i in range(len(view))] == [naive(i) for i in range(len(view))]
    assert view.crop_bounds(0) == (0, 70)
    view.n_times = 40  # another crop length: computed again
    assert view.crop_bounds(0) == (0, 80)
    view.index = view.index[::-1].copy()  # another index: computed again
    assert [view.crop_bounds(i) for i in range(len(view))] == [naive(i) for i in range(len(view))]


def _model():
    return PARS(n_times=50, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8, depth=1,
                n_heads=2, ff_dim=8)  # fmt: skip


def test_the_net_reads_a_views_batches_in_process_unless_a_loader_argument_needs_one():
    view = _view()
    net = PretrainNet(_model(), batch_size=4, progress_bar=False).initialize()
    assert isinstance(net.get_iterator(view, training=True), _HostBatches)
    for extra in ({"collate_fn": None}, {"num_workers": 1}, {"timeout": 5}):
        params = {f"iterator_train__{k}": v for k, v in extra.items()}
        net = PretrainNet(_model(), batch_size=4, progress_bar=False, **params).initialize()
        loader = net.get_iterator(view, training=True)
        assert isinstance(loader, DataLoader), extra
        net._train_loader = None  # its workers, if any, end with it


def _fit(**params):
    torch.manual_seed(0)
    net = PretrainNet(_model(), max_epochs=3, batch_size=4, progress_bar=False, **params)
    net.run_seed_ = 1234  # the same run: its draws
    net.fit(_view())
    return net


def test_a_fit_in_process_trains_as_through_a_dataloader_bit_for_bit():
    """``collate_fn=None`` is the DataLoader's own default: the same batches through a
    DataLoader, which the net then uses."""
    fast, loader = _fit(), _fit(iterator_train__collate_fn=None)
    for (name, a), (_, b) in zip(
        fast.module_.state_dict().items(), loader.module_.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert fast.history[:, "train_loss"] == loader.history[:, "train_loss"]
    assert np.isfinite(fast.history[:, "train_loss"]).all()


class _Counting(Callback):
    def __init__(self):
        self.calls = {}

    def _count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1

    def on_batch_begin(self, net, **kwargs):
        self._count("on_batch_begin")

    def on_grad_computed(self, net, named_parameters, **kwargs):
        self._count("on_grad_computed")
        assert sum(1 for _ in named_parameters) > 0


def _set_on_the_instance():
    """A skorch callback whose ``on_batch_end`` is set on the instance, not its class:
    no bound method of the base class, so it is called."""
    callback = Callback()
    callback.batches = 0

    def on_batch_end(net, **kwargs):
        callback.batches += 1

    callback.on_batch_end = on_batch_end
    return callback


def test_every_callback_that_acts_is_notified_and_those_that_do_nothing_are_skipped():
    counting, duck = _Counting(), _set_on_the_instance()
    net = PretrainNet(_model(), max_epochs=2, batch_size=4, progress_bar=False,
                      callbacks=[("counting", counting), ("duck", duck)])  # fmt: skip
    net.fit(_view())
    steps = sum(len([b for b in row["batches"] if "train_loss" in b]) for row in net.history)
    assert steps == 10  # two epochs of five steps
    assert counting.calls["on_batch_begin"] >= steps  # and the validation batches
    assert counting.calls["on_grad_computed"] == steps
    assert duck.batches == counting.calls["on_batch_begin"]
    assert counting in net._acting("on_grad_computed")
    assert duck not in net._acting("on_grad_computed")  # the base's: nothing to do
    assert duck in net._acting("on_batch_end")
    # a callback added after the first fit is notified in the next
    later = _Counting()
    net.callbacks_.append(("later", later))
    net.partial_fit(_view())
    again = sum(len([b for b in row["batches"] if "train_loss" in b]) for row in net.history)
    assert later.calls["on_grad_computed"] == again - steps > 0


def test_a_training_step_puts_every_module_back_in_training_mode():
    """skorch's ``_set_training``, which the net skips where nothing would change: a
    submodule put in evaluation mode between steps trains again at the next step, and
    a module whose class has its own ``train`` is always called."""
    net = PretrainNet(_model(), batch_size=4, progress_bar=False).initialize()
    batch = next(iter(net.get_iterator(_view(), training=True)))
    net.train_step(batch)
    assert all(m.training for m in net.module_.modules())
    net.module_.encoder.blocks.eval()
    net.train_step(batch)
    assert all(m.training for m in net.module_.modules())
    net._set_training(False)
    assert not any(m.training for m in net.module_.modules())

    calls = []

    class Own(torch.nn.Linear):
        def train(self, mode=True):
            calls.append(mode)
            return super().train(mode)

    net.module_.extra = Own(2, 2)
    net._set_training(True)
    net._set_training(True)
    assert calls == [True, True] and all(m.training for m in net.module_.modules())


def test_the_history_indexes_rows_as_a_list_and_everything_else_as_skorch(tmp_path, monkeypatch):
    """``_RunHistory``: ``history[i]`` is the row skorch's ``History`` gives, without
    copying the list of epochs first (which made every step's ``record_batch`` grow
    with the run); columns, slices and batches are skorch's; a history loaded from a
    file (a resumed run's) is one too."""
    from skorch.history import History

    from braindecode_pars.pretraining.steps import _RunHistory

    net = _fit()
    assert type(net.history) is _RunHistory
    plain = History(list(net.history))
    for i in (0, 1, 2, -1, -3):
        assert net.history[i] is plain[i]
    for i in (3, -4):
        with pytest.raises(IndexError):
            net.history[i]
    assert net.history[:, "train_loss"] == plain[:, "train_loss"]
    assert net.history[-1, "batches", :, "train_loss"] == plain[-1, "batches", :, "train_loss"]
    assert net.history[1:, "epoch"] == [2, 3]

    copies = []
    to_list = History.to_list
    monkeypatch.setattr(History, "to_list", lambda self: copies.append(1) or to_list(self))
    net.history.new_batch()
    net.history.record_batch("seen", 1.0)
    assert net.history[-1]["batches"][-1]["seen"] == 1.0 and not copies

    net.save_params(f_history=tmp_path / "history.json")
    again = PretrainNet(_model(), batch_size=4, progress_bar=False).initialize()
    again.load_params(f_history=tmp_path / "history.json")
    assert type(again.history) is _RunHistory and len(again.history) == 3


def test_callbacks_replaced_by_a_list_of_the_same_length_are_the_ones_notified():
    first = _Counting()
    net = PretrainNet(_model(), max_epochs=1, batch_size=4, progress_bar=False,
                      callbacks=[("counting", first)])  # fmt: skip
    net.fit(_view())
    assert first.calls["on_grad_computed"] > 0
    second = _Counting()
    net.callbacks_ = [(name, second if cb is first else cb) for name, cb in net.callbacks_]
    net.notify("on_grad_computed", named_parameters=iter([1]))
    assert second.calls == {"on_grad_computed": 1} and first.calls["on_grad_computed"] == 5


def test_the_log_keeps_a_steps_own_output_and_copies_it_only_under_cuda_graphs():
    """Without CUDA graphs a logged loss is the step's own tensor, detached (a step's
    outputs are new tensors that no later step writes); under them a copy, since the
    next replay rewrites the graph's output memory. A bf16 value is kept in float32
    either way."""
    from braindecode_pars.pretraining.steps import _kept

    loss = (torch.randn(3, requires_grad=True) ** 2).mean()
    kept = _kept(loss, copy=False)
    assert not kept.requires_grad and kept.data_ptr() == loss.data_ptr()
    copied = _kept(loss)
    assert copied.data_ptr() != loss.data_ptr() and torch.equal(copied, kept)
    half = torch.tensor(1.5, dtype=torch.bfloat16)
    assert _kept(half, copy=False).dtype == torch.float32 == _kept(half).dtype
    # a fit records, in its history, exactly the loss each step returned
    returned = []
    original = PretrainNet.train_step

    def train_step(self, batch, **fit_params):
        step = original(self, batch, **fit_params)
        returned.append(step["loss"].item())
        return step

    net = PretrainNet(_model(), max_epochs=3, batch_size=8, train_split=None, verbose=0)
    net.train_step = train_step.__get__(net)
    net.fit(_view())  # 20 windows: 2 steps an epoch
    logged = [b["train_loss"] for row in net.history for b in row["batches"]]
    assert logged == returned and len(logged) == 6
