"""Learning-rate schedule of the paper: linear warm-up, then cosine annealing."""

from __future__ import annotations

import math

import torch
from skorch.callbacks import Callback

from braindecode_pars._util.checks import check_range
from braindecode_pars.pretraining import distributed


def _batches_per_epoch(n_windows, batch_size, world_size=1):
    """Optimiser steps one process takes per epoch over ``n_windows`` training windows.

    Under DistributedDataParallel each of ``world_size`` processes reads
    ``ceil(n_windows / world_size)`` windows (torch's ``DistributedSampler`` pads).
    Every step trains a full batch, so that a compiled step keeps one graph of one
    shape: a short last batch is left out (the windows it would hold train in other
    epochs, the order being reshuffled), and a process with fewer windows than
    ``batch_size`` takes one step of a full batch drawn with replacement
    (:func:`_draws_with_replacement`).
    """
    per_process = math.ceil(n_windows / max(world_size, 1))
    return max(1, per_process // batch_size)


def _draws_with_replacement(n_windows, batch_size, world_size=1):
    """Whether a process has fewer of the ``n_windows`` training windows than
    ``batch_size``: its epoch is then one step of a full batch drawn with replacement
    (:meth:`~braindecode_pars.pretraining.PretrainNet.get_iterator`)."""
    return math.ceil(n_windows / max(world_size, 1)) < batch_size


def _epochs_for_steps(steps, n_windows, batch_size, valid_fraction=None, world_size=1):
    """Epochs that make at least ``steps`` optimiser steps of one process.

    ``valid_fraction`` of the windows is held out (rounded up, as skorch's
    ``ValidSplit`` does) and does not train.
    """
    n_train = n_windows - (math.ceil(valid_fraction * n_windows) if valid_fraction else 0)
    return max(1, math.ceil(steps / _batches_per_epoch(n_train, batch_size, world_size)))


def warmup_cosine_factor(progress, warmup_fraction=0.1, start_factor=0.1, final_factor=0.0):
    """Multiplier of the maximum learning rate at ``progress`` in [0, 1] of the run.

    Linear from ``start_factor`` to 1 over the first ``warmup_fraction`` of the run,
    then a half cosine from 1 down to ``final_factor``. Paper section 2.5: "linear
    warmup from 10% of the maximum learning rate for the first 100 epochs, followed
    by cosine annealing for the remaining 900 epochs" (of 1000).
    """
    if warmup_fraction > 0 and progress < warmup_fraction:
        return start_factor + (1.0 - start_factor) * progress / warmup_fraction
    rest = (progress - warmup_fraction) / max(1.0 - warmup_fraction, 1e-12)
    rest = min(max(rest, 0.0), 1.0)
    return final_factor + (1.0 - final_factor) * 0.5 * (1.0 + math.cos(math.pi * rest))


class WarmupCosineLR(Callback):
    """The paper's learning-rate curve, set before every training batch.

    The rate of a batch is ``net.lr * warmup_cosine_factor(progress)`` with
    ``progress`` the fraction of the run done: ``(epoch + b / n) / max_epochs`` for
    batch ``b`` of the ``n`` batches of ``epoch`` (0-based) that *this process*
    trains on. With the same batches every epoch this is ``step / total_steps``; and
    because progress is counted in epochs, a run resumed with another number of
    processes (other batches per epoch) continues the same curve. The rate of each
    batch is in the history's batches as ``event_lr`` and the epoch's first rate as
    ``lr``.

    Parameters
    ----------
    warmup_fraction : float
        Fraction of the run spent warming up. Paper: 0.1 (100 of 1000 epochs).
    start_factor : float
        Warm-up starts at this fraction of the maximum rate. Paper: 0.1.
    final_factor : float
        The cosine ends at this fraction of the maximum rate.
    """

    def __init__(self, warmup_fraction=0.1, start_factor=0.1, final_factor=0.0):
        self.warmup_fraction = warmup_fraction
        self.start_factor = start_factor
        self.final_factor = final_factor

    def initialize(self):
        check_range("warmup_fraction", self.warmup_fraction, 0, 1, high_open=True)
        check_range("start_factor", self.start_factor, 0, 1)
        check_range("final_factor", self.final_factor, 0, 1)
        return self

    def factor(self, progress):
        """Multiplier of ``net.lr`` at ``progress`` in [0, 1] of the run."""
        return warmup_cosine_factor(
            progress, self.warmup_fraction, self.start_factor, self.final_factor
        )

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        # from the data size, without building an iterator: under DDP that would
        # replace the DistributedSampler the epoch loop reshuffles
        world = distributed.world_size() if getattr(net, "distributed_", False) else 1
        self.per_epoch_ = _batches_per_epoch(len(dataset_train), net.batch_size, world)
        self.epoch_ = len(net.history) - 1  # the row of this epoch is already there
        self.batch_ = getattr(net, "epoch_step_offset_", 0)  # an epoch resumed within
        self._set(net)
        net.history.record("lr", self._rate(net, 0))  # the epoch's: at its first step

    def _rate(self, net, batch):
        """The rate of batch ``batch`` (0-based) of this epoch."""
        progress = (self.epoch_ + min(batch, self.per_epoch_) / self.per_epoch_) / max(
            net.max_epochs, 1
        )
        return net.lr * self.factor(progress)

    def _set(self, net):
        """Set the rate of the coming batch; a tensor rate (under CUDA graphs) is updated
        in place, so that a captured optimiser step reads it. Returns it as a float."""
        lr = self._rate(net, self.batch_)
        for group in net.optimizer_.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr
        return lr

    def on_batch_begin(self, net, training=False, **kwargs):
        if training:  # record the rate this batch trains with
            net.history.record_batch("event_lr", self._set(net))

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.batch_ += 1
