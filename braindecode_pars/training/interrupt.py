"""Ctrl-C stops a skorch fit instead of being swallowed; a time limit stops it cleanly."""

from __future__ import annotations

import time

import torch
from skorch.callbacks import Callback, EarlyStopping

from . import distributed
from .stop import TrainingStopped


class TimeLimit(Callback):
    """End training after the epoch in which ``minutes`` of training have passed.

    Meant for runs done in sittings (a cluster job's wall-clock limit, a laptop
    session): with a checkpoint folder the epochs done are saved (the callback runs
    after the net's own checkpoints), ``fit`` returns normally with ``stopped_`` set,
    and fitting again with the same folder resumes. Under DistributedDataParallel
    rank 0's clock decides for every process, so all stop at the same epoch; it is
    asked (a broadcast, which waits for the device) only at the end of the epochs the
    net reports (:class:`~braindecode_pars.training.PretrainNet`'s
    ``eval_every_steps``), so that no step waits for it. ``minutes=0`` stops after the
    first epoch (the first reported one under DistributedDataParallel).

    Parameters
    ----------
    minutes : float
        Training time after which no new epoch starts.
    """

    def __init__(self, minutes):
        self.minutes = minutes

    def initialize(self):
        if not isinstance(self.minutes, int | float) or self.minutes < 0:
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
            raise KeyboardInterrupt  # skorch's way to end training (as EarlyStopping)


def _collective_device(net):
    device = torch.device(net.device)
    return device if device.type == "cuda" else torch.device("cpu")


class _PropagateInterrupt:
    """Mixin for a skorch ``NeuralNet``: a ``KeyboardInterrupt`` during training ends
    ``fit`` / ``partial_fit`` with that exception.

    skorch catches the interrupt, runs ``on_train_end`` (so callbacks can save what
    they hold) and returns a net that looks fitted. With this mixin the callbacks
    still run, then the interrupt reaches the caller, so a half-trained model is
    never returned as if it were finished (a stop signal's
    :class:`~braindecode_pars.training.stop.TrainingStopped` reaches it as raised).
    skorch's ``EarlyStopping``, which also
    stops training with a ``KeyboardInterrupt``, still ends ``fit`` normally. An epoch
    stopped within (its row holds no ``train_loss`` once the log is read) is dropped
    from the history before the callbacks' ``on_train_end``: the history holds the
    epochs completed.
    """

    def fit_loop(self, X, y=None, **fit_params):
        self.interrupted_ = False
        self.stop_error_ = None
        try:
            return super().fit_loop(X, y, **fit_params)
        except KeyboardInterrupt as err:
            if isinstance(err, TrainingStopped):  # a stop signal: raised again as is
                self.stop_error_ = err
            read_log = getattr(self, "read_log", None)
            if read_log is not None:  # the epochs ended since the last report get their
                read_log(reduce=False)  # losses (this process's: others may be elsewhere)
            self.interrupted_ = not self._stopped_early()
            if self.history and "train_loss" not in self.history[-1]:
                self.history.pop()
            raise

    def _stopped_early(self):
        """Whether skorch's ``EarlyStopping`` or a :class:`TimeLimit` ended training (they
        raise ``KeyboardInterrupt`` to do so): that stop is a normal end of ``fit``."""
        return any(
            (isinstance(cb, EarlyStopping) and getattr(cb, "misses_", 0) >= cb.patience)
            or (isinstance(cb, TimeLimit) and cb.stopped_)
            for _, cb in getattr(self, "callbacks_", [])
        )

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        super().partial_fit(X, y, classes, **fit_params)
        if getattr(self, "interrupted_", False):
            if getattr(self, "stop_error_", None) is not None:
                raise self.stop_error_
            raise KeyboardInterrupt(
                f"{type(self).__name__} was interrupted after {len(self.history)} epoch(s)."
            )
        return self
