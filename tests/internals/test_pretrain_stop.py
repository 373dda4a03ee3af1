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
