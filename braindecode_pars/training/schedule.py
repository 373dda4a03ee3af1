"""Learning-rate schedule of the paper: linear warm-up, then cosine annealing."""

from __future__ import annotations

import math

from skorch.callbacks import Callback

from .._checks import check_range


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
    """Set the learning rate before every training batch from the run's progress.

    Progress is ``(epochs done + batches done / batches per epoch) / max_epochs``,
    read from the net's history, so a resumed run continues the same curve. The
    maximum learning rate is ``net.lr``; the epoch's starting rate is recorded in the
    history as ``lr``.

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
        self.batches_per_epoch_ = None
        self.batch_idx_ = 0
        return self

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        self.batch_idx_ = 0
        if dataset_train is not None:
            self.batches_per_epoch_ = max(1, math.ceil(len(dataset_train) / net.batch_size))
        net.history.record("lr", self._lr(net))

    def on_batch_begin(self, net, training=False, **kwargs):
        if not training:
            return
        lr = self._lr(net)
        for group in net.optimizer_.param_groups:
            group["lr"] = lr
        self.batch_idx_ += 1

    def _lr(self, net):
        epochs_done = len(net.history) - 1  # the current epoch's row already exists
        within = self.batch_idx_ / self.batches_per_epoch_ if self.batches_per_epoch_ else 0.0
        progress = (epochs_done + within) / max(net.max_epochs, 1)
        factor = warmup_cosine_factor(
            progress, self.warmup_fraction, self.start_factor, self.final_factor
        )
        return net.lr * factor
