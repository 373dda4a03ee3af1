"""Training batches read ahead by a thread (pretraining/_prefetch.py): the loader's own
batches in its order, whatever thread draws them; an error raised where the loop runs;
a loop left early ends the thread; chosen on CUDA without DataLoader workers."""

import threading

import numpy as np
import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler

from braindecode_pars.models.pretext.pars import PARS
from braindecode_pars.pretraining._prefetch import _Prefetched
from braindecode_pars.pretraining._views import SingleChannelWindows, _BatchedView, _HostBatches
from braindecode_pars.pretraining.net import PretrainNet


def _loader(seed):
    data = np.random.default_rng(0).standard_normal((20, 3, 120)).astype(np.float32)
    view = SingleChannelWindows(data, n_times=50)
    torch.manual_seed(seed)  # the sampler's order and the view's generator
    batches = BatchSampler(RandomSampler(view), 4, drop_last=True)
    return view, DataLoader(_BatchedView(view), sampler=batches, batch_size=None)


def _threads():
    return [t for t in threading.enumerate() if t.name == "braindecode-pars-prefetch"]


def test_read_ahead_batches_are_the_loaders_own_in_its_order():
    first, plain = _loader(3)
    first._generator()  # made before the pass, as _Prefetched's prepare makes it
    expected = [X.clone() for X, _ in plain]
    view, loader = _loader(3)
    ahead = _Prefetched(loader, "cpu", prepare=view._generator)
    assert len(ahead) == len(expected) == 5
    got = [X for X, _ in ahead]
    assert len(got) == 5 and all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    assert not _threads()  # the thread ended with the pass


def test_leaving_the_loop_early_ends_the_thread_and_an_error_reaches_the_loop():
    view, loader = _loader(0)
    ahead = _Prefetched(loader, "cpu", depth=1, prepare=view._generator)
    for i, _ in enumerate(ahead):
        if i == 1:
            break  # a stop at a step boundary
    assert not _threads()

    class Broken:
        def __len__(self):
            return 3

        def __iter__(self):
            yield torch.zeros(2, 1, 5), torch.zeros(2)
            raise OSError("the store's disk went away")

    seen = []
    with pytest.raises(OSError, match="the store's disk went away"):
        for X, _ in _Prefetched(Broken(), "cpu"):
            seen.append(X)
    assert len(seen) == 1 and not _threads()


def test_the_net_reads_ahead_where_its_default_or_its_batches_say_so(monkeypatch):
    from braindecode_pars._util import device_defaults

    model = PARS(n_times=50, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8, depth=1,
                 n_heads=2, ff_dim=8)  # fmt: skip
    net = PretrainNet(model, batch_size=4, progress_bar=False)
    view, _ = _loader(0)
    assert net._batches_in_force(view, {}) == "host"  # a CPU: the step and the draw share
    net.device = "cuda"
    assert net._batches_in_force(view, {}) == "host"  # CUDA's until a GPU row decides
    cuda = {**device_defaults._DEVICE_DEFAULTS["cuda"], "batches": "read-ahead"}
    monkeypatch.setitem(device_defaults._DEVICE_DEFAULTS, "cuda", cuda)
    assert net._batches_in_force(view, {}) == "read-ahead"
    assert net._batches_in_force(view, {"num_workers": 2}) == "host"  # workers read ahead
    net.device = "cpu"
    # without workers, the view's batches are read in this process, without a DataLoader
    assert isinstance(net.initialize().get_iterator(view, training=True), _HostBatches)
    asked = PretrainNet(model, batch_size=4, progress_bar=False, batches="read-ahead")
    assert isinstance(asked.initialize().get_iterator(view, training=True), _Prefetched)
    with pytest.raises(ValueError, match=r"'iterator_train__num_workers' must be 0, but got 2"):
        asked._batches_in_force(view, {"num_workers": 2})


def test_a_fit_trains_on_batches_read_ahead(monkeypatch):
    """The read-ahead asked for on a CPU: the loop takes every step of every epoch from it."""
    handed = []
    iterate = _Prefetched.__iter__

    def counting(self):
        for batch in iterate(self):
            handed.append(batch[0].shape)
            yield batch

    monkeypatch.setattr(_Prefetched, "__iter__", counting)
    torch.manual_seed(0)
    model = PARS(n_times=50, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8, depth=1,
                 n_heads=2, ff_dim=8)  # fmt: skip
    net = PretrainNet(model, max_epochs=3, batch_size=4, progress_bar=False,
                      batches="read-ahead")  # fmt: skip
    view, _ = _loader(0)
    net.fit(view)
    assert net.batches_ == "read-ahead"
    assert len(handed) == 3 * 5 and set(handed) == {(4, 1, 50)}
    assert np.isfinite(net.history[:, "train_loss"]).all() and not _threads()


def test_a_pass_that_takes_fewer_batches_draws_no_more_than_it_takes():
    """``take``: the reader draws exactly that many batches, so the view's generator is
    where the loader alone would have left it (the next epochs draw the same crops)."""
    first, plain = _loader(5)
    first._generator()
    for i, _ in enumerate(plain):
        if i == 2:
            break  # three batches read, as run_single_epoch reads the rest of an epoch
    after_plain = first._generator().random()
    view, loader = _loader(5)
    ahead = _Prefetched(loader, "cpu", depth=4, prepare=view._generator, take=lambda: 3)
    for i, _ in enumerate(ahead):
        if i == 2:
            break
    assert view._generator().random() == after_plain


def test_a_reader_inside_a_slow_read_never_runs_beside_the_next_passs(monkeypatch, caplog):
    # the loop leaves its pass while the reader is inside a read longer than the pass
    # waits before warning (every join's timeout cut to a hundredth here): the pass waits
    # for that read, says so, and the next pass's reader starts only after it
    from braindecode_pars.pretraining import _prefetch

    class QuickJoins(threading.Thread):
        def join(self, timeout=None):
            return super().join(None if timeout is None else timeout / 100)

    monkeypatch.setattr(_prefetch.threading, "Thread", QuickJoins)
    active, most = [0], [0]
    release = threading.Event()

    class SlowSecondRead:
        def __len__(self):
            return 3

        def __iter__(self):
            active[0] += 1
            most[0] = max(most[0], active[0])
            try:
                for i in range(3):
                    if i == 1:
                        release.wait(5)  # a slow store read
                    yield torch.full((2, 1, 4), float(i)), torch.zeros(2)
            finally:
                active[0] -= 1

    ahead = _Prefetched(SlowSecondRead(), "cpu")
    timer = threading.Timer(0.5, release.set)  # the read ends after the pass has left
    timer.start()
    with caplog.at_level("WARNING", logger="braindecode_pars"):
        for _ in ahead:
            break  # a stop at a step boundary
    assert "still inside a batch read" in caplog.text
    assert release.is_set() and active[0] == 0 and not _threads()
    assert [X[0, 0, 0].item() for X, _ in ahead] == [0.0, 1.0, 2.0]  # the next pass
    assert most[0] == 1  # never two readers at once
    timer.join()
