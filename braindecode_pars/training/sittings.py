"""A pretraining run done in sittings: one folder, stopped at a step, resumed there.

:class:`_Sittings` is :class:`~braindecode_pars.training.PretrainNet`'s mixin that makes a
fit one sitting of a run: ``fit`` holds the ``checkpoint_dir`` (one writer per folder,
:func:`~braindecode_pars._lock.folder_lock`), lets its ``stop_signals`` only set a
flag (:class:`~braindecode_pars.training.stop.StopSignals`), resumes from the folder's
state (the run's settings checked, :mod:`~braindecode_pars.training.resume`) to the
step where the last sitting stopped, and, when a stop signal came, stops before the
next step (or at an epoch's end, :class:`_StopAtSignal`) with
:class:`~braindecode_pars.training.stop.TrainingStopped`, its state saved by the
checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from skorch.callbacks import Callback

from .._lock import folder_lock
from . import distributed
from .checkpoints import StateCheckpoint
from .resume import _check_resume, _log_launch_change
from .stop import StopSignals, TrainingStopped, check_stop_signals

logger = logging.getLogger(__name__)


class _Sittings:
    """The net's fit as a sitting of its run: the folder held, the stop signals handled,
    the run resumed from its state (see the module)."""

    def fit(self, X, y=None, **fit_params):
        """Pretrain for ``max_epochs``, resuming from ``checkpoint_dir`` when it holds a run.

        With a ``checkpoint_dir``, rank 0 holds the folder for the whole fit (a lock,
        :func:`~braindecode_pars._lock.folder_lock`): a second fit into it, from
        another process, is refused before any work with a ``RuntimeError`` that names
        the process holding it. A signal of ``stop_signals`` saves the state at the next
        step boundary and raises :class:`~braindecode_pars.training.stop.TrainingStopped`.
        """
        signals = check_stop_signals("stop_signals", self.stop_signals)
        with self._folder_held(), StopSignals(signals) as self.stop_:
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
        if self.checkpoint_dir is not None:
            config = _check_resume(self, self.checkpoint_dir, X)
            if StateCheckpoint.current(self.checkpoint_dir) is not None and not self.warm_start:
                done = StateCheckpoint.load(self, self.checkpoint_dir)
                _log_launch_change(self, self.checkpoint_dir)
                steps = (self.resume_point_ or (0,))[0]
                logger.info(
                    "Resuming pretraining from %s after %d epochs%s.",
                    self.checkpoint_dir, done,
                    f" and {steps} step(s) of epoch {done + 1}" if steps else "",
                )  # fmt: skip
            if self.run_info:
                config.update(self.run_info, run_info=sorted(self.run_info))
            if distributed.rank() == 0:
                Path(self.checkpoint_dir).mkdir(parents=True, exist_ok=True)
                (Path(self.checkpoint_dir) / "config.json").write_text(json.dumps(config, indent=1))
        epochs = self.max_epochs - done
        if epochs > 0:
            self.partial_fit(X, y, epochs=epochs, **fit_params)
        return self

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
        DistributedDataParallel the processes agree through one all-reduce every
        ``eval_every_steps`` steps of the run (the cadence of the log's reads), so all
        stop after the same step."""
        stop = getattr(self, "stop_", None)
        if stop is None or not stop.signals:
            return
        done = self.epoch_step_offset_ + batch_count
        if self.distributed_:
            step = (len(self.history) - 1) * self.epoch_steps_ + done
            if step % max(int(self.eval_every_steps), 1):
                return
            sig = stop.requested(self, collective=True)
        else:
            sig = stop.received
        if sig:
            self.stopped_steps_ = done
            raise TrainingStopped(sig, len(self.history) - 1, done, self.checkpoint_dir)


class _StopAtSignal(Callback):
    """At the end of an epoch that is not the run's last, raise
    :class:`~braindecode_pars.training.stop.TrainingStopped` when a stop signal came
    (under DistributedDataParallel, asked of every process on the epochs the net
    reports, as :class:`~braindecode_pars.training.TimeLimit` does). It comes after the
    checkpoints; the state is saved when training ends."""

    def on_epoch_end(self, net, **kwargs):
        stop = getattr(net, "stop_", None)
        if stop is None or not stop.signals or len(net.history) >= net.max_epochs:
            return
        if net.distributed_ and not getattr(net, "reports_epoch_", True):
            return
        sig = stop.requested(net, collective=True)
        if sig:
            net.stopped_steps_ = 0
            raise TrainingStopped(sig, len(net.history), 0, net.checkpoint_dir)
