"""Stopping pretraining as a scheduler does: a signal saves the state at a step boundary,
and the rerun continues from that step; a non-finite step never reaches a checkpoint;
one run per folder; a state that cannot be read is refused."""

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback, EarlyStopping

from braindecode_pars._jobs.lock import folder_lock
from braindecode_pars._jobs.signals import check_stop_signals
from braindecode_pars.pretraining import TimeLimit, TrainingStopped
from braindecode_pars.pretraining.checkpoints import CheckpointReadError, StateCheckpoint
from braindecode_pars.pretraining.net import PretrainNet

from ..conftest import TINY, InterruptAt
from ..ramp_fixtures import ramp_dataset, ramp_pars

pytestmark = pytest.mark.usefixtures("one_thread")

EPOCHS = 5  # of 4 steps (64 ramps, batch 16)


def _net(folder, **kwargs):
    torch.manual_seed(0)
    kwargs.setdefault("stop_signals", ("SIGTERM", "SIGUSR1"))
    kwargs.setdefault("max_epochs", EPOCHS)
    kwargs.setdefault("checkpoint_every_minutes", 60)  # saved at the end and when stopped
    return PretrainNet(
        ramp_pars(**TINY),
        batch_size=16,
        lr=3e-3,
        progress_bar=False,
        checkpoint_dir=folder,
        **kwargs,
    )


class SignalAt(Callback):
    """Send ``sig`` to this process after training step ``step`` (1-based) of ``epoch``."""

    def __init__(self, sig, epoch, step):
        self.sig, self.epoch, self.step = sig, epoch, step

    def on_batch_end(self, net, training=False, **kwargs):
        if not training:
            return
        row = net.history[-1]
        done = len([b for b in row["batches"] if "train_loss" in b])
        if len(net.history) == self.epoch and done == self.step:
            os.kill(os.getpid(), self.sig)


def _steps(net):
    """Optimiser steps taken: AdamW's own count."""
    return int(next(iter(net.optimizer_.state.values()))["step"])


def _batch_lrs(net):
    return [b["event_lr"] for row in net.history for b in row["batches"] if "event_lr" in b]


@pytest.mark.parametrize(
    "sig, step, steps_saved",
    [
        pytest.param(signal.SIGUSR1, 2, 2, id="SIGUSR1-within-an-epoch"),
        pytest.param(signal.SIGTERM, 4, 0, id="SIGTERM-at-an-epochs-end"),
    ],
)
def test_a_stop_signal_saves_the_step_reached_and_the_rerun_continues_from_it(
    tmp_path, sig, step, steps_saved
):
    data = ramp_dataset()
    full = _net(tmp_path / "full").fit(data)
    stopped = _net(tmp_path / "run", callbacks=[("signal", SignalAt(sig, 3, step))])
    with pytest.raises(TrainingStopped, match=f"stopped by {sig.name}") as info:
        stopped.fit(data)
    assert (info.value.reason, info.value.signal) == ("signal", sig)
    assert info.value.exit_code == 128 + sig
    epochs = 3 if steps_saved == 0 else 2
    assert (info.value.epochs, info.value.steps) == (epochs, steps_saved)
    pointer = json.loads((tmp_path / "run" / "state.json").read_text())
    assert (pointer["epoch"], pointer["steps"]) == (epochs, steps_saved)
    assert _steps(stopped) == 4 * epochs + steps_saved  # not one step more
    assert signal.getsignal(sig) is signal.SIG_DFL  # the handler is given back

    resumed = _net(tmp_path / "run").fit(data)
    assert len(resumed.history) == EPOCHS
    assert _steps(resumed) == _steps(full) == 4 * EPOCHS  # no step lost, none run twice
    # the learning rate of every step after the stop is the uninterrupted run's
    lrs = _batch_lrs(resumed)
    assert lrs[-(4 * EPOCHS - 4 * epochs - steps_saved) :] == pytest.approx(
        _batch_lrs(full)[4 * epochs + steps_saved :]
    )
    assert (tmp_path / "run" / "encoder_last.pt").is_file()
    # the same run: every weight bit for bit that of the run never stopped
    _assert_same_weights(resumed, full)


def _assert_same_weights(net, other):
    a, b = net.pretext_.state_dict(), other.pretext_.state_dict()
    assert a.keys() == b.keys()
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    assert not differ, f"{len(differ)} of {len(a)} tensors differ, e.g. {differ[:3]}"


def _view(n_recordings=4, seconds=60, seed=0):
    """A SingleChannelWindows view of ``n_recordings`` 4-channel recordings at 10 Hz in
    60-s windows every 10 s (crops of 300 samples, shifted by up to 150): with a fourth
    of the recordings held out, 2 steps of 16 per epoch."""
    from braindecode_pars.pretraining import SingleChannelWindows

    rng = np.random.default_rng(seed)
    t = np.arange(seconds * 10 * 3) / 10
    windows = []
    for _ in range(n_recordings):
        rec = (rng.uniform(0.5, 2, (4, 1)) * np.sin(2 * np.pi * rng.uniform(0.2, 2, (4, 1)) * t)
               + 0.1 * rng.standard_normal((4, len(t))))  # fmt: skip
        windows.append(np.stack([rec[:, s : s + 600] for s in range(0, len(t) - 600, 100)]))
    assert len(windows[0]) == 12
    return SingleChannelWindows(np.concatenate(windows).astype(np.float32), n_times=300)


@pytest.mark.parametrize("workers", [0, 2], ids=["no-workers", "2-workers"])
@pytest.mark.parametrize("epoch, step", [(2, 1), (3, 2)], ids=["within-an-epoch", "at-its-end"])
def test_a_view_stopped_at_a_step_and_resumed_ends_with_the_weights_never_stopped(
    tmp_path, workers, epoch, step
):
    """Random crops and channels, shuffled windows, the model's own draws: a run stopped
    by a signal at a step and resumed (the crops of the resumed epoch's rest and of the
    epochs after drawn by DataLoader workers, or not) ends with the weights of the run
    never stopped, bit for bit, and the same losses at every step."""
    view = _view()
    kwargs = dict(iterator_train__num_workers=workers, valid_fraction=0.25)
    if workers:
        kwargs["iterator_train__multiprocessing_context"] = "fork"
    full = _net(tmp_path / "full", **kwargs).fit(view)
    stopped = _net(
        tmp_path / "run", callbacks=[("signal", SignalAt(signal.SIGUSR1, epoch, step))], **kwargs
    )
    with pytest.raises(TrainingStopped):
        stopped.fit(view)
    assert _steps(stopped) == 2 * (epoch - 1) + step
    resumed = _net(tmp_path / "run", **kwargs).fit(view)
    _assert_same_weights(resumed, full)

    def losses(net, first_epoch):  # of every batch (training, validation) from that epoch
        rows = net.history[first_epoch - 1 :]
        return [b[k] for row in rows for b in row["batches"] for k in b if k.endswith("_loss")]

    # the rows of the epochs after the stop: every training and validation loss the same
    assert len(losses(full, epoch + 1)) == (5 - epoch) * 2 + 1  # validated at the last
    assert losses(resumed, epoch + 1) == losses(full, epoch + 1)


def _stopped_at_epoch_2(tmp_path):
    """A run stopped by a signal at epoch 2, step 2: its data, ``state.json`` and what
    that file holds."""
    data = ramp_dataset()
    stopped = _net(tmp_path / "run", callbacks=[("signal", SignalAt(signal.SIGUSR1, 2, 2))])
    with pytest.raises(TrainingStopped):
        stopped.fit(data)
    pointer_file = tmp_path / "run" / "state.json"
    return data, pointer_file, json.loads(pointer_file.read_text())


def test_a_state_saved_without_a_seed_resumes_and_says_it_is_not_bit_exact(tmp_path, caplog):
    """A state written by an earlier version (no ``seed`` in ``state.json``) still
    resumes, and a note says the continuation draws anew."""
    data, pointer_file, pointer = _stopped_at_epoch_2(tmp_path)
    assert isinstance(pointer.pop("seed"), int)
    pointer_file.write_text(json.dumps(pointer))
    with caplog.at_level("INFO", logger="braindecode_pars"):
        resumed = _net(tmp_path / "run").fit(data)
    assert _steps(resumed) == 4 * EPOCHS
    assert "holds no run seed" in caplog.text and "not bit for bit" in caplog.text


def test_a_state_saved_on_other_threads_resumes_and_says_it_is_not_bit_exact(tmp_path, caplog):
    """``state.json`` holds torch's thread count of the sitting that saved it; a sitting
    on a CPU that resumes it on another count (whose sums round otherwise) says so and
    how to keep the count; on the same count it says nothing."""
    data, pointer_file, pointer = _stopped_at_epoch_2(tmp_path)
    assert pointer["threads"] == torch.get_num_threads() == 1  # the one_thread fixture's
    again = _net(tmp_path / "run", callbacks=[("signal", SignalAt(signal.SIGUSR1, 4, 1))])
    with caplog.at_level("WARNING", logger="braindecode_pars"), pytest.raises(TrainingStopped):
        again.fit(data)
    assert "torch threads" not in caplog.text
    pointer = json.loads(pointer_file.read_text())
    pointer["threads"] = 2  # as if saved by a sitting on 2 threads
    pointer_file.write_text(json.dumps(pointer))
    caplog.clear()
    with caplog.at_level("WARNING", logger="braindecode_pars"):
        resumed = _net(tmp_path / "run").fit(data)
    assert _steps(resumed) == 4 * EPOCHS
    assert "on 1 torch threads, where the state was saved on 2" in caplog.text
    assert "not end bit for bit" in caplog.text and "--threads 2" in caplog.text


def test_a_time_limit_and_early_stopping_end_fit_normally_with_their_reason(tmp_path):
    data = ramp_dataset()
    timed = _net(tmp_path / "timed", callbacks=[("time_limit", TimeLimit(0))]).fit(data)
    assert len(timed.history) == 1  # 0 minutes: the first epoch, then the stop
    assert (timed.stopped_.reason, timed.stopped_.epochs) == ("time", 1)
    assert timed.stopped_.signal is None and timed.stopped_.exit_code == 0
    assert json.loads((tmp_path / "timed" / "state.json").read_text())["epoch"] == 1
    # skorch's EarlyStopping stops with a bare KeyboardInterrupt: taken for its reason
    stop = EarlyStopping(monitor="train_loss", patience=1, threshold=10.0)  # never 10x better
    early = _net(tmp_path / "early", eval_every_steps=1, callbacks=[("early", stop)]).fit(data)
    assert len(early.history) == 2 and not early.interrupted_
    assert early.stopped_.reason == "early_stop"
    assert "train_loss did not improve in the last 1 epoch" in str(early.stopped_)
    assert json.loads((tmp_path / "early" / "state.json").read_text())["epoch"] == 2
    # the stop travels with the net that holds it
    assert pickle.loads(pickle.dumps(early.stopped_)).reason == "early_stop"
    assert pickle.loads(pickle.dumps(timed)).stopped_.epochs == 1
    finished = _net(tmp_path / "finished", max_epochs=1).fit(data)
    assert finished.stopped_ is None and not finished.interrupted_


def test_ctrl_c_stays_a_keyboard_interrupt_and_a_stop_is_not_one(tmp_path):
    assert not issubclass(TrainingStopped, KeyboardInterrupt)
    net = _net(tmp_path, callbacks=[("interrupt", InterruptAt(2))])
    with pytest.raises(KeyboardInterrupt, match="interrupted after 2 epoch") as info:
        net.fit(ramp_dataset())
    assert not isinstance(info.value, TrainingStopped)
    assert net.interrupted_ and net.stopped_ is None
    assert json.loads((tmp_path / "state.json").read_text())["epoch"] == 2  # saved
    with pytest.raises(ValueError, match=r"'reason' .* 'signal', 'time', 'early_stop'"):
        TrainingStopped("ctrl-c", 1)
    with pytest.raises(ValueError, match="'signal' is given with reason='signal'"):
        TrainingStopped("time", 1, signal=signal.SIGTERM)


def test_ctrl_c_is_not_a_stop_signal_and_unknown_signals_are_refused():
    assert check_stop_signals("s", "usr1") == (signal.SIGUSR1,)
    assert check_stop_signals("s", ["TERM", signal.SIGTERM]) == (signal.SIGTERM,)
    assert check_stop_signals("s", None) == ()
    for bad in ("SIGINT", "SIGKILL", "NOPE"):
        with pytest.raises(ValueError, match=rf"'stop_signals' .* but got '{bad}' instead"):
            check_stop_signals("stop_signals", bad)
    net = _net(None, stop_signals="SIGINT")
    with pytest.raises(ValueError, match="SIGINT stays Ctrl-C's"):
        net.fit(ramp_dataset())


class PoisonAfter(torch.utils.data.Dataset):
    """Ramps whose windows read NaN once ``clean`` items have been read."""

    def __init__(self, clean):
        self.data, self.clean, self.reads = ramp_dataset(), clean, 0

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        self.reads += 1
        x, y = self.data[i]
        return (x * float("nan") if self.reads > self.clean else x), y


def test_a_nan_in_the_data_never_reaches_a_checkpoint(tmp_path):
    net = _net(tmp_path, checkpoint_every_minutes=0)  # a state every epoch
    with pytest.raises(FloatingPointError, match="non-finite training loss nan at epoch 3"):
        net.fit(PoisonAfter(clean=2 * 64 + 5))  # epoch 3's second batch is NaN
    pointer = json.loads((tmp_path / "state.json").read_text())
    assert pointer["epoch"] == 2  # the last finite state stays
    params = torch.load(tmp_path / pointer["state"] / "params.pt", weights_only=True)
    assert all(torch.isfinite(v).all() for v in params.values())


def test_a_state_is_on_the_disk_before_the_pointer_names_it(tmp_path, monkeypatch):
    """A power cut never leaves ``state.json`` naming files or a folder the disk lacks: the
    state's files and folder are flushed, then the pointer, then the run's folder."""
    import stat

    net = _net(tmp_path, max_epochs=1).fit(ramp_dataset())  # initialised, one epoch
    events = []
    real_fsync = os.fsync

    def fsync(fd):
        info = os.fstat(fd)
        folders = {p.stat().st_ino: p.name for p in [tmp_path, *tmp_path.glob("state-*")]}
        if stat.S_ISDIR(info.st_mode):
            events.append(("folder", folders[info.st_ino]))
        else:
            events.append(("file", f"{info.st_size > 0}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    StateCheckpoint(tmp_path).write(net)
    state = StateCheckpoint.current(tmp_path).name
    assert events == [
        *[("file", "True")] * 3,  # params.pt, optimizer.pt, history.json
        ("folder", state),
        ("file", "True"),  # state.json, before its rename
        ("folder", tmp_path.name),  # after it
    ]


def test_a_truncated_state_is_refused_with_a_clear_message(tmp_path):
    _net(tmp_path, max_epochs=1).fit(ramp_dataset())
    params = StateCheckpoint.current(tmp_path) / "params.pt"
    params.write_bytes(params.read_bytes()[: params.stat().st_size // 2])
    with pytest.raises(CheckpointReadError, match="cannot be read .* truncated or corrupt"):
        _net(tmp_path, max_epochs=1).fit(ramp_dataset())


def _light(name):
    """Python code that imports ``braindecode_pars._jobs.<name>`` from its file, without
    the package (whose imports take seconds on a busy machine)."""
    path = Path(__file__).resolve().parents[2] / "braindecode_pars" / "_jobs" / f"{name}.py"
    return (
        "import importlib.util as u; "
        f"s = u.spec_from_file_location('m', {str(path)!r}); m = u.module_from_spec(s); "
        "s.loader.exec_module(m)\n"
    )


HOLD = _light("lock") + textwrap.dedent(
    """
    import sys, time
    with m.folder_lock(sys.argv[1], "a test"):
        print("held", flush=True)
        time.sleep(60)
    """
)


def test_a_second_run_into_one_folder_is_refused_and_a_dead_holder_does_not_block(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        net = _net(tmp_path, max_epochs=1)
        refused = rf"in use by process {holder.pid} \(a test\), so pretraining cannot start"
        with pytest.raises(RuntimeError, match=refused):
            net.fit(ramp_dataset())
        assert not (tmp_path / "state.json").exists()  # refused before any work
    finally:
        holder.kill()
        holder.wait()
    assert (tmp_path / ".lock").read_text().split() == [str(holder.pid), "a", "test"]
    _net(tmp_path, max_epochs=1).fit(ramp_dataset())  # a dead holder's lock does not block
    # one process: the net joins its command's lock of the folder
    with folder_lock(tmp_path, "x"), folder_lock(tmp_path, "y", reentrant=True):
        pass


ORPHAN = _light("orphans") + textwrap.dedent(
    """
    import os, sys, time
    pid = os.fork()
    if pid == 0:
        m.die_with_parent(0, parent=os.getppid())
        print(os.getpid(), flush=True)
        time.sleep(60)
        os._exit(0)
    time.sleep(60)
    """
)


def test_a_worker_ends_when_its_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", ORPHAN], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())  # its death signal is set
    parent.kill()
    parent.wait()
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


_DUMP_SCRIPT = """
import importlib.util, os, signal, sys, time
# the module alone (it imports nothing of the package): a process that starts at once
spec = importlib.util.spec_from_file_location("signals", sys.argv[2])
signals = importlib.util.module_from_spec(spec)
spec.loader.exec_module(signals)
StopSignals = signals.StopSignals
with StopSignals((signal.SIGUSR1,), dump_after=0.3) as stop:
    os.kill(os.getpid(), signal.SIGUSR1)
    time.sleep(float(sys.argv[1]))  # a stop that takes this long
    assert stop.received == signal.SIGUSR1
time.sleep(0.8)  # after the block: a dump armed and not cancelled would come now
print("ended", flush=True)
"""


@pytest.mark.parametrize("stop_seconds, dumped", [(1.0, True), (0.0, False)],
                         ids=["a-stop-that-hangs", "a-stop-that-ends"])  # fmt: skip
def test_a_stop_that_has_not_ended_in_time_writes_every_threads_stack(stop_seconds, dumped):
    """A stop still under way ``dump_after`` seconds after the signal writes every
    thread's stack to stderr (where a launcher's SIGKILL would otherwise leave nothing);
    a block left in time cancels the dump."""
    from braindecode_pars._jobs import signals

    done = subprocess.run(
        [sys.executable, "-c", _DUMP_SCRIPT, str(stop_seconds), signals.__file__],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and "ended" in done.stdout, done.stderr
    assert ("Timeout (0:00:00" in done.stderr) == dumped, done.stderr
    assert ("most recent call first" in done.stderr) == dumped, done.stderr


def test_nested_stop_blocks_share_the_signal_either_received():
    """A command's block around a fit's: a signal before the fit reaches the fit's block,
    one received by the fit's reaches the command's, and while the command's block is
    entered a second signal ends nothing."""
    from braindecode_pars._jobs.signals import StopSignals

    sig = signal.SIGUSR1
    with StopSignals((sig,)) as outer:
        os.kill(os.getpid(), sig)
        with StopSignals((sig,)) as inner:
            assert inner.received == sig  # came before this block
        assert signal.getsignal(sig) == outer._handle
    with StopSignals((sig,)) as outer:
        with StopSignals((sig,)) as inner:
            assert inner.received is None
            os.kill(os.getpid(), sig)
        assert outer.received == sig
        os.kill(os.getpid(), sig)  # again, after the fit: handled, the process lives
    assert signal.getsignal(sig) is signal.SIG_DFL


#: The history's values that depend on the wall clock, not on the run.
_TIMED = ("dur", "monitor_seconds")


def _rows(net):
    """The history without its timings: every epoch's row and its batches' values."""
    rows = []
    for row in net.history:
        kept = {k: v for k, v in row.items() if k not in (*_TIMED, "batches")}
        kept["batches"] = [{k: v for k, v in b.items() if k not in _TIMED} for b in row["batches"]]
        rows.append(kept)
    return rows


@pytest.mark.parametrize(
    "epoch, step",
    [pytest.param(1, 4, id="at-an-epochs-end"), pytest.param(2, 2, id="within-an-epoch")],
)
def test_a_run_stopped_and_resumed_has_the_history_never_stopped(tmp_path, epoch, step):
    """Every epoch reported (``eval_every_steps`` of one epoch), the probe monitor every
    second report: the run never stopped probes epochs 1, 3 and 5. Stopped and resumed,
    the monitor counts the reports from the history, not from the sitting's start
    (which probed the first epoch of the sitting), and every row, its losses, skills
    and probes, is that of the run never stopped: stopped within an epoch, its row
    holds the steps of both sittings (the state saves the first's)."""
    from braindecode_pars.pretraining import ProbeMonitor
    from braindecode_pars.pretraining.monitor import MONITOR_KEYS

    from .test_monitor import labelled_set

    X, y, groups = labelled_set()
    data = ramp_dataset()

    def callbacks(*extra):
        return [("monitor", ProbeMonitor(X, y, groups, sfreq=10.0, every=2)), *extra]

    full = _net(tmp_path / "full", eval_every_steps=4, callbacks=callbacks()).fit(data)
    probed = [row["epoch"] for row in full.history if MONITOR_KEYS["label"] in row]
    assert probed == [1, 3, 5]
    stopped = _net(
        tmp_path / "run", eval_every_steps=4,
        callbacks=callbacks(("signal", SignalAt(signal.SIGUSR1, epoch, step))),
    )  # fmt: skip
    with pytest.raises(TrainingStopped):
        stopped.fit(data)
    state = StateCheckpoint.current(tmp_path / "run")
    assert (state / "epoch_batches.json").is_file() == (step < 4)
    resumed = _net(tmp_path / "run", eval_every_steps=4, callbacks=callbacks()).fit(data)
    _assert_same_weights(resumed, full)
    assert [row["epoch"] for row in resumed.history if MONITOR_KEYS["label"] in row] == probed
    assert [row["train_batch_count"] for row in resumed.history] == [4] * EPOCHS
    assert _rows(resumed) == _rows(full)
