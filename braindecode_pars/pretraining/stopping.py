"""How a fit ends before its last epoch, and how a run continues: one module.

A fit of :class:`~braindecode_pars.pretraining.PretrainNet` (or of the fine-tuner, which
shares :class:`StopHandling`) ends early in one of four ways:

- **Ctrl-C** (SIGINT): a ``KeyboardInterrupt``, as Python raises it. The callbacks end
  the training (the checkpoints save the epochs done), then ``fit`` raises it again:
  a half-trained model is never returned as if finished. ``KeyboardInterrupt`` means
  Ctrl-C only.
- **A stop signal** (``stop_signals``: SIGTERM, a SLURM ``--signal``; by default,
  ``"auto"``, SIGTERM when the net has a ``checkpoint_dir`` to save into and none
  otherwise, :func:`resolve_stop_signals`): a :class:`TrainingStopped` with
  ``reason="signal"``. The signal only sets a flag
  (:class:`~braindecode_pars._jobs.signals.StopSignals`); the net looks at it between
  two steps, saves its state there (the weights after the last step, and the steps done
  of the epoch) and ``fit`` raises. Fitting again with the same ``checkpoint_dir``
  continues from that step. Under DistributedDataParallel the processes agree on the
  stop about every :data:`_AGREE_SECONDS` seconds (:class:`_StopAgreement`).
- **A time limit** (:class:`TimeLimit`): a :class:`TrainingStopped` with
  ``reason="time"``, raised at an epoch's end; ``fit`` returns normally, the state
  saved, and ``stopped_`` holds it.
- **Early stopping** (skorch's ``EarlyStopping``, which raises a bare
  ``KeyboardInterrupt``): taken for a :class:`TrainingStopped` with
  ``reason="early_stop"`` where it is raised; ``fit`` returns normally with
  ``stopped_`` set.

A fit is also one sitting of its run (:class:`_Sittings`): it holds the
``checkpoint_dir`` (one writer per folder,
:func:`~braindecode_pars._jobs.lock.folder_lock`), resumes from the folder's state (the
run's settings checked, :mod:`~braindecode_pars.pretraining.resume`) to the step where
the last sitting stopped, and stops before the next step when a stop signal came (or at
an epoch's end, :class:`_StopAtSignal`).

DataLoader worker processes ignore the stop signals (their parent stops at a step
boundary, then ends them) and end when their parent dies, whatever kills it
(:class:`~braindecode_pars._jobs.workers.WorkerStart`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import time
from pathlib import Path

import torch
from skorch.callbacks import Callback, EarlyStopping

from braindecode_pars._jobs.lock import folder_lock
from braindecode_pars._jobs.signals import DUMP_AFTER_SECONDS, StopSignals, check_stop_signals
from braindecode_pars._util.atomic import write_atomic
from braindecode_pars.pretraining import distributed
from braindecode_pars.pretraining.checkpoints import StateCheckpoint
from braindecode_pars.pretraining.resume import _check_resume, _log_launch_change, _log_resumed

logger = logging.getLogger(__name__)

__all__ = ["TimeLimit", "TrainingStopped"]

#: Why a fit stopped before its last epoch, as :attr:`TrainingStopped.reason` says
#: (Ctrl-C is not one: it stays a ``KeyboardInterrupt``).
_STOP_REASONS = ("signal", "time", "early_stop")

#: Seconds between two agreements of the processes of a DistributedDataParallel run on
#: a stop signal (:class:`_StopAgreement`): the processes stop about this long after
#: the signal (plus the step under way), then rank 0 saves; well within the 30 s that
#: torchrun, and SLURM's default ``KillWait``, grant before SIGKILL.
_AGREE_SECONDS = 5.0

#: The clock of :class:`_StopAgreement` (a test puts a fake one here).
_clock = time.monotonic


def resolve_stop_signals(value, checkpoint_dir, name="stop_signals"):
    """The signals a fit stops on: ``value`` checked, ``"auto"`` resolved.

    Parameters
    ----------
    value : "auto" | str | int | sequence | None
        ``"auto"``: SIGTERM when ``checkpoint_dir`` is set (a stop then saves the state
        there and a rerun continues), none otherwise (a SIGTERM keeps its default
        action and ends the process, as a joblib, Dask or Ray worker, or a notebook's
        kernel, expects). Otherwise signal names or numbers, or None: as
        :func:`~braindecode_pars._jobs.signals.check_stop_signals` reads them.
    checkpoint_dir : str | Path | None
        Where the fit saves its state.
    name : str
        The parameter's name, for the message.

    Returns
    -------
    signals : tuple of signal.Signals

    Raises
    ------
    ValueError
        Naming ``name``, the values allowed (``"auto"`` among them) and the one given.
    """
    if isinstance(value, str) and value == "auto":
        return (signal.SIGTERM,) if checkpoint_dir is not None else ()
    try:
        return check_stop_signals(name, value)
    except ValueError as err:
        text = str(err)
        allowed = "Allowed values are "
        auto = "'auto' (SIGTERM with a checkpoint folder, none without), "
        if allowed in text:
            raise ValueError(text.replace(allowed, allowed + auto, 1)) from None
        raise


class TrainingStopped(Exception):
    """A fit stopped before its last epoch, on purpose, its state saved where it has a
    ``checkpoint_dir``.

    Raised out of ``fit`` for a stop signal (``reason="signal"``): a script that wants
    its scheduler to see the signal's exit status ends with ``sys.exit(err.exit_code)``.
    A time limit (``"time"``) and early stopping (``"early_stop"``) end ``fit``
    normally; the net's ``stopped_`` holds the exception. Not a ``KeyboardInterrupt``,
    which is Ctrl-C's alone.

    Parameters
    ----------
    reason : {"signal", "time", "early_stop"}
        What stopped the fit (:data:`_STOP_REASONS`).
    epochs : int
        Epochs complete in the saved state.
    steps : int
        Steps of the next epoch done too (0: it stopped between two epochs).
    folder : str | Path | None
        Where the state is saved (None: the net had no ``checkpoint_dir``).
    signal : signal.Signals | int | None
        The signal received (``reason="signal"`` only).
    detail : str | None
        What the stop was about (early stopping: the score and its patience).

    Attributes
    ----------
    exit_code : int
        ``128 + signal`` for a stop signal, the status a shell gives a process that this
        signal ended (143 for SIGTERM, 138 for SIGUSR1 on Linux); 0 otherwise.
    """

    def __init__(self, reason, epochs, steps=0, folder=None, signal=None, detail=None):
        if reason not in _STOP_REASONS:
            raise ValueError(
                "Invalid value for the 'reason' parameter. Allowed values are "
                f"{', '.join(map(repr, _STOP_REASONS))}, but got {reason!r} instead."
            )
        if (reason == "signal") != (signal is not None):
            raise ValueError(
                f"'signal' is given with reason='signal' and only then, but got "
                f"reason={reason!r} and signal={signal!r}."
            )
        self.reason = reason
        self.signal = None if signal is None else _signal_of(signal)
        self.epochs = int(epochs)
        self.steps = int(steps)
        self.folder = folder
        self.detail = detail
        self.exit_code = 128 + int(self.signal) if self.signal is not None else 0
        super().__init__(self._message())

    def _message(self):
        where = f"after {self.epochs} epoch(s)"
        if self.steps:
            where += f" and {self.steps} step(s) of epoch {self.epochs + 1}"
        if self.folder is None:
            saved = "nothing is saved (no checkpoint_dir)"
        else:
            saved = f"its state is saved in '{self.folder}': fit again with it to continue"
        if self.reason == "signal":
            return f"Pretraining stopped by {self.signal.name} {where}; {saved}."
        if self.reason == "time":
            return f"Training stopped at its time limit {where}; {saved}."
        detail = f" ({self.detail})" if self.detail else ""
        return f"Training stopped early {where}{detail}."

    def __reduce__(self):  # pickled with the net that holds it (stopped_)
        args = (self.reason, self.epochs, self.steps, self.folder, self.signal, self.detail)
        return type(self), args


def _signal_of(value):
    return signal.Signals(value)


class TimeLimit(Callback):
    """End training after the epoch in which ``minutes`` of training have passed.

    Meant for runs done in sittings (a cluster job's wall-clock limit, a laptop
    session): with a checkpoint folder the epochs done are saved (the callback runs
    after the net's own checkpoints), ``fit`` returns normally with ``stopped_`` set
    (a :class:`TrainingStopped` whose ``reason`` is ``"time"``), and fitting again with
    the same folder resumes. Under DistributedDataParallel rank 0's clock decides for
    every process, so all stop at the same epoch; it is asked (a broadcast, which waits
    for the device) only at the end of the epochs the net reports
    (:class:`~braindecode_pars.pretraining.PretrainNet`'s ``eval_every_steps``), so that
    no step waits for it. ``minutes=0`` stops after the first epoch (the first reported
    one under DistributedDataParallel).

    Parameters
    ----------
    minutes : float
        Training time after which no new epoch starts.

    Attributes
    ----------
    stopped_ : bool
        Whether it ended the last fit.
    """

    def __init__(self, minutes):
        self.minutes = minutes

    def initialize(self):
        if (
            isinstance(self.minutes, bool)
            or not isinstance(self.minutes, int | float)
            or self.minutes < 0
        ):
            raise ValueError(
                f"'minutes' must be a number of minutes >= 0, but got {self.minutes!r}."
            )
        self.stopped_ = False
        return self

    def on_train_begin(self, net, **kwargs):
        self.start_ = time.monotonic()
        self.stopped_ = False

    def on_epoch_end(self, net, **kwargs):
        over = torch.tensor(float(time.monotonic() - self.start_ >= 60.0 * self.minutes))
        if distributed._is_distributed():
            if not getattr(net, "reports_epoch_", True):
                return  # the same epochs on every process: a function of the epoch
            over = over.to(_collective_device(net))
            torch.distributed.broadcast(over, src=0)
        if over.item():
            self.stopped_ = True
            raise TrainingStopped(
                "time", len(net.history), folder=getattr(net, "checkpoint_dir", None)
            )


def _collective_device(net):
    device = torch.device(net.device)
    return device if device.type == "cuda" else torch.device("cpu")


def _early_stop(net, callback):
    """A :class:`TrainingStopped` (``"early_stop"``) when ``callback`` is skorch's
    ``EarlyStopping`` and has run out of patience (its way to stop is a bare
    ``KeyboardInterrupt``), else None."""
    if not isinstance(callback, EarlyStopping):
        return None
    if getattr(callback, "misses_", 0) < callback.patience:
        return None
    detail = f"{callback.monitor} did not improve in the last {callback.patience} epoch(s)"
    return TrainingStopped(
        "early_stop",
        len(net.history),
        folder=getattr(net, "checkpoint_dir", None),
        detail=detail,
    )


class StopHandling:
    """Mixin for a skorch ``NeuralNet``: how a fit that stops early ends (see the module).

    skorch ends training on a ``KeyboardInterrupt`` (the callbacks' ``on_train_end``
    run, so that they save what they hold) and returns a net that looks fitted. Here:

    - Ctrl-C: the callbacks run, then the interrupt reaches the caller, so a
      half-trained model is never returned as if it were finished (``interrupted_``);
    - a :class:`TrainingStopped`: the callbacks run, then ``fit`` raises it for a stop
      signal and returns for a time limit or early stopping; ``stopped_`` holds it
      (None: the fit ran to its end, or Ctrl-C ended it);
    - skorch's ``EarlyStopping``, which stops with a bare ``KeyboardInterrupt``, is
      told from Ctrl-C where it raises (:meth:`notify` of ``on_epoch_end``).

    An epoch stopped within (its row holds no ``train_loss`` once the log is read) is
    dropped from the history before the callbacks' ``on_train_end``: the history holds
    the epochs completed. Its batches' values (``stopped_batches_``) are saved with the
    state of a stop within the epoch, and the resumed epoch's row starts with them, so
    that it is the row of the run never stopped.
    """

    def notify(self, method_name, **cb_kwargs):
        """skorch's; at an epoch's end, each callback in turn, so that the one that
        stops training is known: skorch's ``EarlyStopping`` (a ``KeyboardInterrupt``)
        becomes a :class:`TrainingStopped` (``"early_stop"``) there."""
        if method_name != "on_epoch_end":
            return super().notify(method_name, **cb_kwargs)
        self.on_epoch_end(self, **cb_kwargs)
        for _, callback in self.callbacks_:
            try:
                callback.on_epoch_end(self, **cb_kwargs)
            except KeyboardInterrupt:
                stop = _early_stop(self, callback)
                if stop is None:
                    raise
                raise stop from None
        return None

    def fit_loop(self, X, y=None, **fit_params):
        self.interrupted_ = False
        self.stopped_ = None
        try:
            return super().fit_loop(X, y, **fit_params)
        except (KeyboardInterrupt, TrainingStopped) as err:
            read_log = getattr(self, "read_log", None)
            if read_log is not None:  # the epochs ended since the last report get their
                # losses: under DistributedDataParallel averaged over the processes where
                # all stopped at the step they agreed on (a stop signal), else this
                # process's own (after Ctrl-C the others may be elsewhere)
                read_log(reduce=isinstance(err, TrainingStopped) and err.reason == "signal")
            self.stopped_batches_ = None
            if self.history and "train_loss" not in self.history[-1]:
                # a stop within the epoch: its steps' values go with the state, so that
                # the resumed epoch's row holds them (StateCheckpoint)
                self.stopped_batches_ = [dict(b) for b in self.history[-1].get("batches", [])]
                self.history.pop()
            if isinstance(err, TrainingStopped):
                self.stopped_ = err
                return self  # skorch's partial_fit ends the training (on_train_end)
            self.interrupted_ = True
            raise  # caught by skorch's partial_fit, which ends the training; raised again

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        super().partial_fit(X, y, classes, **fit_params)
        stopped = getattr(self, "stopped_", None)
        if stopped is not None and stopped.reason == "signal":
            raise stopped
        if getattr(self, "interrupted_", False):
            raise KeyboardInterrupt(
                f"{type(self).__name__} was interrupted after {len(self.history)} epoch(s)."
            )
        return self


class _Sittings:
    """The net's fit as a sitting of its run: the folder held, the stop signals handled,
    the run resumed from its state (see the module)."""

    def fit(self, X, y=None, **fit_params):
        """Pretrain for ``max_epochs``, resuming from ``checkpoint_dir`` when it holds a run.

        With a ``checkpoint_dir``, rank 0 holds the folder for the whole fit (a lock,
        :func:`~braindecode_pars._jobs.lock.folder_lock`): a second fit into it, from
        another process, is refused before any work with a ``RuntimeError`` that names
        the process holding it. A signal of ``stop_signals`` saves the state at the next
        step boundary and raises :class:`TrainingStopped` (``reason="signal"``); a fit
        that has not ended
        :data:`~braindecode_pars._jobs.signals.DUMP_AFTER_SECONDS` after the signal writes
        every thread's stack to stderr (each process its own), so that a stop that hangs
        says where.
        """
        signals = resolve_stop_signals(self.stop_signals, self.checkpoint_dir)
        stop = StopSignals(
            signals,
            message="Received %s: stopping at the next step boundary, after saving the state.",
            dump_after=DUMP_AFTER_SECONDS,  # a stop that hangs says where, before a SIGKILL
        )
        with self._folder_held(), stop as self.stop_:
            self.stop_agreement_ = _StopAgreement()
            try:
                return self._fit(X, y, **fit_params)
            finally:
                self.stop_ = None

    def _folder_held(self):
        """The lock of ``checkpoint_dir`` (rank 0's), or nothing to hold."""
        if self.checkpoint_dir is None or distributed.rank() != 0:
            return contextlib.nullcontext()
        return folder_lock(self.checkpoint_dir, "pretraining", reentrant=True)

    def _fit(self, X, y=None, **fit_params):
        """The sitting, its folder held: resume from the folder's state (the run's
        settings checked), record the run, then fit the epochs left."""
        if not (self.warm_start and self.initialized_):
            self.initialize()
        done = 0
        self.resume_point_, self.stopped_steps_ = None, 0
        if not self.warm_start:  # a new run draws its seed; a resumed one reads it
            self.run_seed_ = None
        if self.checkpoint_dir is not None:
            config = _check_resume(self, self.checkpoint_dir, X)
            if StateCheckpoint.current(self.checkpoint_dir) is not None and not self.warm_start:
                done = StateCheckpoint.load(self, self.checkpoint_dir)
                _log_launch_change(self, self.checkpoint_dir)
                steps = (self.resume_point_ or (0,))[0]
                _log_resumed(self, self.checkpoint_dir, done, steps)  # or: finished already
            if self.run_info:
                config.update(self.run_info, run_info=sorted(self.run_info))
            if distributed.rank() == 0:
                folder = Path(self.checkpoint_dir)
                folder.mkdir(parents=True, exist_ok=True)
                write_atomic(folder / "config.json", json.dumps(config, indent=1))
        epochs = self.max_epochs - done
        if epochs > 0:
            self.partial_fit(X, y, epochs=epochs, **fit_params)
        return self

    def _resumed_batches(self, steps):
        """The saved values of the ``steps`` steps of this epoch a stopped sitting did
        (its state's, once, for the first epoch after a resume), or none when the state
        holds no such list or another number of them (a resume on other processes)."""
        batches = getattr(self, "resumed_batches_", None)
        self.resumed_batches_ = None
        if not steps or not isinstance(batches, list) or len(batches) != steps:
            return []
        return batches

    def _resumed_steps(self, per_epoch):
        """Steps of this epoch a stopped sitting already did (its state's ``steps``; once,
        for the first epoch after a resume): this epoch runs the rest. A state saved with
        another number of steps per epoch (other processes) continues from the same
        fraction of the epoch."""
        point = getattr(self, "resume_point_", None)
        self.resume_point_ = None
        if not point or not point[0]:
            return 0
        steps, saved_per_epoch = point
        if saved_per_epoch and saved_per_epoch != per_epoch:
            steps = round(steps * per_epoch / saved_per_epoch)
        return min(max(int(steps), 0), per_epoch - 1)

    def _stop_between_steps(self, batch_count):
        """Before the next training step (``batch_count`` of this sitting's steps of the
        epoch done): raise :class:`TrainingStopped` when a stop signal came. Alone, the
        flag is a Python variable, looked at before every step; under
        DistributedDataParallel the processes agree through one all-reduce on a cadence
        of about :data:`_AGREE_SECONDS` seconds (:class:`_StopAgreement`), so all stop
        after the same step, within seconds of the signal."""
        stop = getattr(self, "stop_", None)
        if stop is None or not stop.signals:
            return
        done = self.epoch_step_offset_ + batch_count
        if self.distributed_:
            step = (len(self.history) - 1) * self.epoch_steps_ + done
            agreement = getattr(self, "stop_agreement_", None)
            if agreement is None:
                agreement = self.stop_agreement_ = _StopAgreement()
            if not agreement.due(step):
                return
            sig, elapsed = _agree(self, stop, agreement.elapsed())
            agreement.agreed(step, elapsed)
        else:
            sig = stop.received
        if sig:
            self.stopped_steps_ = done
            raise TrainingStopped(
                "signal", len(self.history) - 1, done, self.checkpoint_dir, signal=sig
            )


class _StopAgreement:
    """When the processes of a DistributedDataParallel run next agree on a stop signal:
    a cadence in seconds, not in steps.

    The first step boundary of a sitting agrees; then every ``max(1, round(seconds /
    step time))`` steps, the step time measured between the last two agreements (the
    largest of the processes', carried by the agreement's own all-reduce: every
    process computes the same cadence, so all join the same all-reduces). The all-reduce
    waits for the steps before it, so the time between two agreements is what the steps
    took, on a GPU as on a CPU, epoch ends (validation, checkpoints) included. The
    cadence at most doubles from one agreement to the next, so a first measure that is
    short (a cached batch) cannot stretch it at once; a long one (the first step's
    compilation) shortens it at once. A run of 10 ms steps thus agrees every 500 steps
    after about 10 all-reduces, one of 1 s steps every 5.

    Parameters
    ----------
    seconds : float
        The time aimed at between two agreements (:data:`_AGREE_SECONDS`).

    Attributes
    ----------
    every : int
        Steps between the last agreement and the next.
    agreements : int
        Agreements so far (all-reduces of this cadence).
    """

    def __init__(self, seconds=_AGREE_SECONDS):
        self.seconds = float(seconds)
        self.every = 1
        self.agreements = 0
        self.next_step = None
        self.last = None  # (step, time) of the last agreement

    def due(self, step):
        """Whether the processes agree before step ``step + 1`` (``step`` steps of the
        run done)."""
        return self.next_step is None or step >= self.next_step

    def elapsed(self):
        """Seconds since the last agreement, as this process measures them (0 before the
        first)."""
        return 0.0 if self.last is None else max(_clock() - self.last[1], 0.0)

    def agreed(self, step, elapsed):
        """The processes agreed after ``step`` steps, ``elapsed`` seconds (the largest
        over the processes) after the last agreement: set the next one."""
        self.agreements += 1
        if self.last is not None and step > self.last[0]:
            steps = step - self.last[0]
            fit = round(self.seconds * steps / elapsed) if elapsed > 0 else 2 * self.every
            self.every = min(max(1, fit), 2 * self.every)
        self.next_step = step + self.every
        self.last = (step, _clock())


def _agree(net, stop, elapsed=0.0):
    """The stop signal received by any process of a DistributedDataParallel run (None if
    none), and the largest of their ``elapsed``: one all-reduce that every process must
    join at the same step; this process's own signal and ``elapsed`` when not
    distributed. ``stop`` is the fit's
    :class:`~braindecode_pars._jobs.signals.StopSignals`."""
    received = stop.received
    if not distributed._is_distributed():
        return received, float(elapsed)
    flag = torch.tensor([float(received or 0), float(elapsed)], device=_collective_device(net))
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    agreed, elapsed = flag.tolist()  # the one read of the device, on this cadence only
    return (signal.Signals(int(agreed)) if agreed else None), elapsed


class _StopAtSignal(Callback):
    """At the end of an epoch that is not the run's last, raise :class:`TrainingStopped`
    when a stop signal came (under DistributedDataParallel, asked of every process on
    the epochs the net reports, as :class:`TimeLimit` does). It comes after the
    checkpoints; the state is saved when training ends."""

    def on_epoch_end(self, net, **kwargs):
        stop = getattr(net, "stop_", None)
        if stop is None or not stop.signals or len(net.history) >= net.max_epochs:
            return
        if net.distributed_ and not getattr(net, "reports_epoch_", True):
            return
        sig = _agree(net, stop)[0] if net.distributed_ else stop.received
        if sig:
            net.stopped_steps_ = 0
            raise TrainingStopped("signal", len(net.history), 0, net.checkpoint_dir, signal=sig)
