"""The pretraining loop's steps never wait for the device: the log holds device tensors
and is read on the report cadence, its values those of a naive per-batch reading; under
CUDA graphs (compile mode "reduce-overhead") a step boundary is marked before every
step, the logged losses are copies, and the draws differ at every replay."""

import contextlib
import math

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback
from torch._dynamo.utils import counters
from torch.utils._python_dispatch import TorchDispatchMode

from braindecode_pars.pretraining.net import PretrainNet

from ..conftest import TINY
from ..ramp_fixtures import ramp_dataset, ramp_pars


class HostRead(AssertionError):
    """A value read from a tensor inside a training step."""


class _RefuseHostReads(TorchDispatchMode):
    """Raise on ``aten._local_scalar_dense``: ``item()``, ``float()``, ``int()``,
    ``bool()`` and a tensor in an ``if`` all read a value through it (on a GPU, a wait)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default:
            raise HostRead("a tensor's value was read inside a training step")
        return func(*args, **(kwargs or {}))


def _refuse(name):
    def method(self, *args, **kwargs):
        raise HostRead(f"Tensor.{name}() inside a training step")

    return method


class NoHostReads(Callback):
    """Every batch, from its ``on_batch_begin`` to the end of every other callback's
    ``on_batch_end`` (it comes after them), refuses any read of a tensor's value on
    the host: ``item`` and the like, ``tolist``, ``numpy``, ``cpu``. Steps counts the
    batches it guarded."""

    def initialize(self):
        self.steps_ = 0
        self.stack_ = None
        return self

    def on_batch_begin(self, net, **kwargs):
        self.stack_ = contextlib.ExitStack()
        for name in ("tolist", "numpy", "cpu"):
            saved = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, _refuse(name))
            self.stack_.callback(setattr, torch.Tensor, name, saved)
        self.stack_.enter_context(_RefuseHostReads())

    def on_batch_end(self, net, **kwargs):
        self.stack_.close()
        self.steps_ += 1


class Naive(Callback):
    """The naive log: every batch's loss and trivial loss read at once with ``item()``,
    and the batch size, before anything can change them."""

    def initialize(self):
        self.rows_ = []
        return self

    def on_batch_end(self, net, batch=None, training=None, loss=None, y_pred=None, **kw):
        self.rows_.append(
            (training, loss.item(), y_pred["trivial_loss"].item(), len(batch[0]), len(net.history))
        )


class Overwrite(Callback):
    """After every step, writes NaN into the step's loss and trivial loss, as a CUDA
    graph's next replay rewrites its outputs' memory."""

    def on_batch_end(self, net, loss=None, y_pred=None, **kwargs):
        loss.detach().fill_(math.nan)
        y_pred["trivial_loss"].detach().fill_(math.nan)


def _reads(monkeypatch):
    """Count the calls of ``PretrainNet.read_log`` that read something: epochs."""
    counted = []
    original = PretrainNet.read_log

    def read_log(self, *args, **kwargs):
        if any(
            isinstance(v, torch.Tensor)
            for row in self.history
            for where in [*row.get("batches", []), row]
            for v in where.values()
        ):
            counted.append(len(self.history))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PretrainNet, "read_log", read_log)
    return counted


def test_no_step_reads_the_device_and_the_log_is_read_on_the_report_cadence(monkeypatch):
    torch.manual_seed(0)
    reads = _reads(monkeypatch)
    # 36 training windows in batches of 16: 2 full steps an epoch (the short last batch
    # left out); 20 validation windows in batches of 16 and 4; a report every 2 epochs
    net = PretrainNet(
        ramp_pars(**TINY), max_epochs=7, batch_size=16, lr=3e-3, progress_bar=False,
        valid_fraction=0.35, eval_every_steps=4, device="cpu",
        callbacks=[("guard", NoHostReads()), ("naive", Naive())],
    )  # fmt: skip
    net.fit(ramp_dataset(56))
    guard = dict(net.callbacks_)["guard"]
    naive = dict(net.callbacks_)["naive"].rows_
    reported = [1, 2, 4, 6, 7]  # the first, every second, the last
    n_valid_steps = 2 * len(reported)  # two validation batches each report
    assert guard.steps_ == 7 * 2 + n_valid_steps  # every step and its callbacks guarded
    assert reads == reported  # the log read once per reported epoch, never per step
    assert [len(r) for r in net.history[:, "batches"]] == [
        2 + 2 * (e in reported) for e in range(1, 8)
    ]

    # the values logged are those of the naive reading, batch by batch and per epoch
    for epoch, row in enumerate(net.history, start=1):
        for prefix, training in (("train", True), ("valid", False)):
            ref = [r for r in naive if r[0] is training and r[4] == epoch]
            got = [b for b in row["batches"] if f"{prefix}_loss" in b]
            assert len(got) == len(ref)
            if not ref:
                assert f"{prefix}_loss" not in row
                continue
            for b, (_, loss, trivial, size, _) in zip(got, ref, strict=True):
                assert isinstance(b[f"{prefix}_loss"], float)
                assert b[f"{prefix}_loss"] == pytest.approx(loss, rel=1e-6)
                assert b[f"{prefix}_trivial"] == pytest.approx(trivial, rel=1e-6)
                assert b[f"{prefix}_batch_size"] == size
                if training:
                    assert b["train_skill"] == pytest.approx(1 - loss / trivial, rel=1e-5)
            n = np.array([r[3] for r in ref], dtype=float)
            loss = np.dot(n, [r[1] for r in ref]) / n.sum()
            trivial = np.dot(n, [r[2] for r in ref]) / n.sum()
            assert row[f"{prefix}_loss"] == pytest.approx(loss, rel=1e-6)
            assert row[f"{prefix}_trivial"] == pytest.approx(trivial, rel=1e-6)
            assert row[f"{prefix}_skill"] == pytest.approx(1 - loss / trivial, rel=1e-5)
    sizes = [b["train_batch_size"] for b in net.history[0, "batches"] if "train_loss" in b]
    assert sizes == [16, 16]  # full training batches only
    sizes = [b["valid_batch_size"] for b in net.history[0, "batches"] if "valid_loss" in b]
    assert sizes == [16, 4]  # the weighting is exercised

    # the "best" flags: the running minimum of each epoch's loss
    losses = net.history[:, "train_loss"]
    best = [loss < min(losses[:i], default=math.inf) for i, loss in enumerate(losses)]
    assert net.history[:, "train_loss_best"] == best
    assert losses[-1] < losses[0]  # and it trains


def test_an_interrupted_run_keeps_the_epochs_ended_since_the_last_report():
    from ..conftest import InterruptAt

    torch.manual_seed(0)
    net = PretrainNet(
        ramp_pars(**TINY), max_epochs=9, batch_size=16, progress_bar=False,
        eval_every_steps=100, device="cpu", callbacks=[("stop", InterruptAt(5))],
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        net.fit(ramp_dataset(32))
    # epochs 2 to 5 ended unreported (every 50 epochs), yet each has its values
    assert len(net.history) == 5
    for row in net.history:
        assert isinstance(row["train_loss"], float) and isinstance(row["train_skill"], float)
        assert all(isinstance(b["train_loss"], float) for b in row["batches"])


def test_cuda_graph_mode_marks_every_step_keeps_copies_and_draws_anew(monkeypatch):
    """The path of compile mode "reduce-overhead", on a CPU: torch.compile with the
    aot_eager backend (which ignores the mode; CUDA graphs need a GPU), the step
    boundary marked before every step, the log's values copied before the step's
    outputs are rewritten (here by a callback, as a graph's next replay would), and the
    patches and masks drawn anew at every step."""
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))

    class Draws(Callback):
        def initialize(self):
            self.draws_ = []
            return self

        def on_batch_end(self, net, y_pred=None, **kwargs):
            self.draws_.append((y_pred["starts"].clone(), y_pred["pos_mask"].clone()))

    torch.manual_seed(0)
    net = PretrainNet(
        ramp_pars(**TINY), max_epochs=3, batch_size=16, progress_bar=False, device="cpu",
        compile=True, compile__backend="aot_eager", compile__mode="reduce-overhead",
        callbacks=[("naive", Naive()), ("draws", Draws()), ("overwrite", Overwrite())],
    )  # fmt: skip
    net.fit(ramp_dataset(32))
    assert net.cuda_graphs_ and hasattr(net.module_, "_orig_mod")
    assert len(marks) == 6  # 3 epochs of 2 steps, no validation
    naive = dict(net.callbacks_)["naive"].rows_
    logged = [b for row in net.history for b in row["batches"]]
    for b, (_, loss, trivial, _, _) in zip(logged, naive, strict=True):
        assert math.isfinite(b["train_loss"]) and b["train_loss"] == pytest.approx(loss)
        assert b["train_trivial"] == pytest.approx(trivial)
    draws = dict(net.callbacks_)["draws"].draws_
    for i in range(len(draws)):
        for j in range(i):
            assert not torch.equal(draws[i][0], draws[j][0])
            assert not torch.equal(draws[i][1], draws[j][1])

    # without the mode no boundary is marked, and the loss logged is still a copy
    marks.clear()
    plain = PretrainNet(ramp_pars(**TINY), max_epochs=1, batch_size=16, progress_bar=False)
    plain.fit(ramp_dataset(32))
    assert not plain.cuda_graphs_ and marks == []


def test_compile_modes_are_checked_and_reach_the_net(monkeypatch, tmp_path):
    from braindecode_pars import PARSPretrainer
    from braindecode_pars.pretraining.config import COMPILE_MODES

    with pytest.raises(ValueError, match="compile_mode.*'reduce-overhead'.*'fast'"):
        PARSPretrainer(compile_mode="fast").check_params()
    net = PretrainNet(ramp_pars(**TINY), compile=True, compile__mode="fast")
    with pytest.raises(ValueError, match="compile__mode.*'fast'"):
        net.initialize()

    given = {}

    def record(*args, **kwargs):
        given.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(PretrainNet, "fit", lambda self, X: record(**{
        "mode": self.get_params_for("compile").get("mode"), "compile": self.compile,
    }))  # fmt: skip
    X = np.random.default_rng(0).standard_normal((20, 2, 300)).astype(np.float32)
    with pytest.raises(SystemExit):
        PARSPretrainer(
            **TINY, n_patches=12, steps=2, batch_size=8, sfreq=10.0, compile=True,
            compile_mode="max-autotune-no-cudagraphs", verbose=0,
        ).fit(X)  # fmt: skip
    assert given == {"mode": "max-autotune-no-cudagraphs", "compile": True}

    from braindecode_pars.cli import main

    from .._helpers import tiny_config
    from ._stubs import stop_before_pretraining

    seen = stop_before_pretraining(monkeypatch)
    with pytest.raises(SystemExit):
        main(["pretrain", "--out", str(tmp_path / "run"), "--device", "cpu",
              *tiny_config(tmp_path, compile_mode="reduce-overhead")])  # fmt: skip
    assert seen["compile_mode"] == "reduce-overhead"
    with pytest.raises(SystemExit, match=r"--config: .*'compile_mode'.*'fast'") as refused:
        main(["pretrain", "--out", str(tmp_path / "run"),
              *tiny_config(tmp_path, compile_mode="fast")])  # fmt: skip
    assert all(repr(mode) in str(refused.value) for mode in COMPILE_MODES)  # the library's


def test_under_ddp_the_log_averages_losses_and_sums_counts(monkeypatch):
    """Under DistributedDataParallel the log is reduced over the processes: each batch's
    losses become their mean over the processes, the pairs the pair decoder could not
    compute exactly their total (one all-reduce), its largest logit gap the largest. Two
    processes, the other one's all-reduce contribution given (no process group is
    started)."""
    from skorch.history import History

    from braindecode_pars.pretraining import distributed
    from braindecode_pars.pretraining.callbacks import _UNRESOLVED

    mine = {"train_loss": 0.5, "train_trivial": 2.0, f"train_{_UNRESOLVED}": 3.0,
            "train_pair_gap": 47.0}  # fmt: skip
    other = {"train_loss": 0.75, "train_trivial": 1.0, f"train_{_UNRESOLVED}": 5.0,
             "train_pair_gap": 52.0}  # fmt: skip
    calls = []

    def all_reduce(tensor, op=None):  # this process's values with the other one's
        calls.append(op)
        theirs = torch.tensor([other[k] for k in (*mine, *mine)])
        if op == torch.distributed.ReduceOp.MAX:
            tensor.copy_(torch.maximum(tensor, theirs))
        else:
            tensor.add_(theirs)

    monkeypatch.setattr(distributed, "_is_distributed", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *a, **k: 2)
    monkeypatch.setattr(torch.distributed, "all_reduce", all_reduce)
    net = PretrainNet(ramp_pars(**TINY), progress_bar=False)
    net.history = History()
    net.start_log()
    net.history.new_epoch()
    for _ in range(2):  # two batches of the same values: the order of the places kept
        net.history.new_batch()
        net.history.record_batch("train_batch_size", 16)
        for key, value in mine.items():
            net.history.record_batch(key, torch.tensor(value))
    net.end_epoch_log()
    net.read_log()
    # one all-reduce, and one for the largest logit gap
    assert calls == [torch.distributed.ReduceOp.SUM, torch.distributed.ReduceOp.MAX]
    for batch in net.history[-1, "batches"]:
        assert batch["train_loss"] == 0.625 and batch["train_trivial"] == 1.5  # means
        assert batch[f"train_{_UNRESOLVED}"] == 8.0  # the total
        assert batch["train_pair_gap"] == 52.0  # the largest
        assert batch["train_batch_size"] == 16
    assert net.history[-1, "train_loss"] == 0.625

    calls.clear()  # a process that stopped alone reads its own values
    net.history.new_epoch()
    net.history.new_batch()
    net.history.record_batch(f"train_{_UNRESOLVED}", torch.tensor(3.0))
    net.read_log(reduce=False)
    assert calls == [] and net.history[-1, "batches"][0][f"train_{_UNRESOLVED}"] == 3.0


@pytest.mark.parametrize(
    "stop, reduce",
    [
        pytest.param("signal", True, id="a-stop-signal-all-processes-agreed-on"),
        pytest.param("time", False, id="a-time-limit-at-a-read-epoch"),
        pytest.param("ctrl-c", False, id="ctrl-c-of-one-process"),
    ],
)
def test_a_stop_reads_the_log_averaged_where_every_process_stopped_at_one_step(
    monkeypatch, stop, reduce
):
    """Under DistributedDataParallel a stop signal stops every process at the step they
    agreed on: the losses not yet read (the steps of the epoch stopped within, the
    epochs not reported) are averaged over them, as at a report, so that the saved
    history is the run's, not rank 0's; after Ctrl-C, which reaches one process, each
    reads its own."""
    import signal

    from skorch import NeuralNet

    from braindecode_pars.pretraining import TrainingStopped

    error = {
        "signal": TrainingStopped("signal", 1, 2, signal=signal.SIGTERM),
        "time": TrainingStopped("time", 1),
        "ctrl-c": KeyboardInterrupt(),
    }[stop]

    def fit_loop(self, X, y=None, **fit_params):
        raise error

    monkeypatch.setattr(NeuralNet, "fit_loop", fit_loop)
    net = PretrainNet(ramp_pars(**TINY), progress_bar=False)
    asked = []
    net.read_log = lambda reduce=True: asked.append(reduce)
    with contextlib.suppress(KeyboardInterrupt):
        net.fit_loop(None)
    assert asked == [reduce]


def test_training_batches_come_in_pinned_memory_on_cuda():
    """Pinned, a batch's non-blocking copy to the GPU waits for nothing (a copy from
    pageable memory makes the driver wait for the stream); on a CPU nothing to pin."""
    for device, pinned in (("cuda", True), ("cpu", False)):
        net = PretrainNet(ramp_pars(**TINY), device=device, iterator_train__num_workers=2)
        params = net.get_params_for("iterator_train")
        assert params["pin_memory"] is pinned and params["persistent_workers"] is True
    given = PretrainNet(ramp_pars(**TINY), device="cuda", iterator_train__pin_memory=False)
    assert given.get_params_for("iterator_train")["pin_memory"] is False  # told otherwise


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class SyncDebugError(Callback):
    """``torch.cuda.set_sync_debug_mode("error")`` from each training batch's
    ``on_batch_begin`` to the end of every other callback's ``on_batch_end``, after the
    first ``after`` steps (which allocate, compile, record the CUDA graphs)."""

    def __init__(self, after=3):
        self.after = after

    def initialize(self):
        self.steps_ = 0
        return self

    def on_batch_begin(self, net, training=None, **kwargs):
        if training and self.steps_ >= self.after:
            torch.cuda.set_sync_debug_mode("error")

    def on_batch_end(self, net, training=None, **kwargs):
        torch.cuda.set_sync_debug_mode("default")
        self.steps_ += bool(training)


class PinnedBatches(Callback):
    """Whether each training batch reaches the step in pinned memory, and where."""

    def initialize(self):
        self.pinned_, self.pointers_ = [], []
        return self

    def on_batch_begin(self, net, batch=None, training=None, **kwargs):
        if training:
            self.pinned_.append(batch[0].is_pinned())
            self.pointers_.append(batch[0].data_ptr())


@needs_cuda
@pytest.mark.parametrize("workers", [0, 2])
def test_on_a_gpu_every_training_batch_reaches_the_step_in_pinned_memory(workers, monkeypatch):
    """So that its non-blocking copy to the GPU waits for nothing: the batches of a
    single-channel view (drawn into pinned memory without workers, and then handed to
    the step as drawn, not copied again; pinned by the DataLoader with workers) and of a
    plain dataset (pinned by the DataLoader)."""
    from braindecode_pars.pretraining._views import SingleChannelWindows, _BatchedView

    drawn = []
    read = _BatchedView.__getitem__

    def recording_read(self, indices):
        X, y = read(self, indices)
        drawn.append(X.data_ptr())
        return X, y

    monkeypatch.setattr(_BatchedView, "__getitem__", recording_read)

    view = SingleChannelWindows(np.random.default_rng(0).standard_normal((40, 2, 400)), n_times=300)
    view.sfreq = 10.0
    for dataset in (view, ramp_dataset(40)):
        net = PretrainNet(
            ramp_pars(**TINY), max_epochs=2, batch_size=16, progress_bar=False, device="cuda",
            iterator_train__num_workers=workers, callbacks=[("pinned", PinnedBatches())],
        )  # fmt: skip
        drawn.clear()
        net.fit(dataset)
        pinned = dict(net.callbacks_)["pinned"].pinned_
        assert len(pinned) >= 4 and all(pinned), (type(dataset).__name__, pinned)
        if dataset is view and not workers:  # the batches drawn are the batches trained on
            assert dict(net.callbacks_)["pinned"].pointers_ == drawn


@needs_cuda
@pytest.mark.parametrize("compiled", [False, True])
def test_on_a_gpu_no_training_step_synchronises(compiled):
    torch.manual_seed(0)
    net = PretrainNet(
        ramp_pars(**TINY), max_epochs=4, batch_size=16, progress_bar=False, device="cuda",
        amp=True, compile=compiled, valid_fraction=0.2, eval_every_steps=6,
        callbacks=[("sync", SyncDebugError(after=4)), ("naive", Naive())],
    )  # fmt: skip
    try:
        net.fit(ramp_dataset(50))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    # every step counted (40 training windows: 2 full steps an epoch); from the fifth on,
    # none waited
    assert dict(net.callbacks_)["sync"].steps_ == 4 * 2
    naive = [r for r in dict(net.callbacks_)["naive"].rows_ if r[0]]
    logged = [b["train_loss"] for row in net.history for b in row["batches"] if "train_loss" in b]
    np.testing.assert_allclose(logged, [r[1] for r in naive], rtol=1e-6)


@needs_cuda
def test_on_a_gpu_cuda_graphs_replay_fresh_draws_and_the_log_keeps_copies():
    """Compile mode "reduce-overhead" on a GPU, validated every epoch: the training steps
    draw anew at every replay, the validation steps evaluate the same draws every epoch
    (made outside the graph and passed in), no step waits, the log keeps copies of the
    graphs' outputs, and the fit compiles one graph for the training steps and one for
    the validation steps (a recompilation at most), none of them skipped by CUDA graphs,
    with no graph break."""

    class Draws(Callback):
        def initialize(self):
            self.train_, self.valid_ = [], []
            return self

        def on_batch_end(self, net, training=None, y_pred=None, **kwargs):
            (self.train_ if training else self.valid_).append(y_pred["starts"].clone())

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    net = PretrainNet(
        ramp_pars(**TINY), max_epochs=6, batch_size=16, lr=3e-3, progress_bar=False,
        device="cuda", amp=True, compile=True, compile__mode="reduce-overhead",
        valid_fraction=0.2, eval_every_steps=1,
        callbacks=[("sync", SyncDebugError(after=3)), ("naive", Naive()), ("draws", Draws())],
    )  # fmt: skip
    try:
        net.fit(ramp_dataset(40))  # 32 training windows (2 steps of 16), 8 validation ones
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert dict(net.callbacks_)["sync"].steps_ == 12
    draws, valid = dict(net.callbacks_)["draws"].train_, dict(net.callbacks_)["draws"].valid_
    assert len(draws) == 12
    for i in range(len(draws)):
        assert all(not torch.equal(draws[i], draws[j]) for j in range(i))
    assert len(valid) == 6 and all(torch.equal(v, valid[0]) for v in valid)

    rows = dict(net.callbacks_)["naive"].rows_
    logged = [b["train_loss"] for row in net.history for b in row["batches"] if "train_loss" in b]
    np.testing.assert_allclose(logged, [r[1] for r in rows if r[0]], rtol=1e-6)
    # one validation batch per epoch: its loss is the epoch's, read after the later steps
    np.testing.assert_allclose(
        net.history[:, "valid_loss"], [r[1] for r in rows if not r[0]], rtol=1e-6
    )
    assert net.history[-1, "train_loss"] < net.history[0, "train_loss"]
    assert len(set(net.history[:, "valid_loss"])) > 1  # the same draws, new weights

    breaks = dict(counters["graph_break"])
    assert breaks == {}, list(breaks)
    assert counters["stats"]["unique_graphs"] <= 3, dict(counters["stats"])
    assert counters["inductor"]["cudagraph_skips"] == 0, dict(counters["inductor"])
