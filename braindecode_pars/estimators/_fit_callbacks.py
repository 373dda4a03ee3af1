"""The fine-tuner's skorch callbacks: the time estimate after the first epoch, the
epoch table, the restoring of the best epoch, and the list a fit adds to skorch's."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

from skorch.callbacks import (
    Callback,
    Checkpoint,
    EpochScoring,
    Freezer,
    PrintLog,
    Unfreezer,
)

from braindecode_pars._util.logs import plural, shows_bars
from braindecode_pars._util.progress import ANSI, duration
from braindecode_pars.estimators._learning_rates import FineTuneWarmupCosine
from braindecode_pars.estimators._validation import VALID_MONITORS, _valid_balanced_accuracy

logger = logging.getLogger(__name__)


class BestState(Callback):
    """Keep, in memory, the module's parameters of the epoch with the best ``monitor``
    (skorch's ``valid_loss_best`` by default) and load them when training ends.

    skorch's ``Checkpoint(load_best=True)`` does the same through files; this one
    writes nothing, so a fit leaves no file behind. The copy is on the CPU.
    """

    def __init__(self, monitor="valid_loss_best"):
        self.monitor = monitor

    def initialize(self):
        self.state_ = None
        self.epoch_ = None
        return self

    def on_epoch_end(self, net, **kwargs):
        if net.history[-1, self.monitor]:
            self.state_ = {
                k: v.detach().to("cpu", copy=True) for k, v in net.module_.state_dict().items()
            }
            self.epoch_ = len(net.history)

    def on_train_end(self, net, **kwargs):
        if self.state_ is not None:
            net.module_.load_state_dict(self.state_)
            logger.debug("Loaded the parameters of epoch %d (best %s).", self.epoch_, self.monitor)


class EpochTable(PrintLog):
    """skorch's epoch table, its best values in colour only on a terminal.

    skorch's ``PrintLog`` colours each new best value with ANSI escape codes whatever
    its output is; written to a file (``> fit.log``, a job's log) they show as
    ``\x1b[36m`` noise. This table writes them only when its sink is ``print`` and
    standard output shows colours (a terminal or a notebook, as the pretraining
    table decides for stderr: :func:`~braindecode_pars._util.logs.shows_bars`).
    """

    def _sink(self, text, verbose):
        if self.sink is not print or not shows_bars(sys.stdout):
            text = ANSI.sub("", text)
        super()._sink(text, verbose)


#: A fit projected (after its first epoch) to take longer than this, in seconds, is
#: warned of (:class:`TimeEstimate`), whatever ``verbose`` is.
LONG_FIT_SECONDS = 300.0


def _seconds(seconds):
    """12.9, 1234, 0.0041: one decimal from a second up, two significant digits
    below, so a fast epoch never reads as "0.0 s"."""
    return f"{seconds:.1f}" if seconds >= 1 else f"{seconds:.2g}"


class TimeEstimate(Callback):
    """Say, after the first epoch of a fit, how long it took and what all
    ``max_epochs`` will take at that pace: "The first epoch took 12.9 s; 200 epochs:
    about 43 min on cpu.". A ``logging.INFO`` line, shown by ``verbose=1``; a
    ``UserWarning`` with the ways to shorten it when the fit is projected to take more
    than :data:`LONG_FIT_SECONDS` (``verbose=0``, the default, shows warnings only)."""

    def on_train_begin(self, net, **kwargs):
        self.first_epoch_ = len(net.history)

    def on_epoch_end(self, net, **kwargs):
        if len(net.history) != getattr(self, "first_epoch_", 0) + 1:
            return
        seconds = float(net.history[-1, "dur"])
        total = net.max_epochs
        note = ""
        if getattr(net, "strategy", None) == "lp-ft":
            note = " (the first half trains the head alone; the second, every weight, slower)"
        said = (
            f"The first epoch took {_seconds(seconds)} s; {plural(total, 'epoch')}: about "
            f"{duration(seconds * total)} on {net.device}{note}."
        )
        if seconds * total <= LONG_FIT_SECONDS:
            logger.info(said)
            return
        warnings.warn(
            f"{type(net).__name__}: {said} To shorten it: fewer epochs (max_epochs), "
            "stopping on a validation split (min_valid_groups, and skorch's EarlyStopping "
            "in 'callbacks'), or a GPU (device='cuda').",
            UserWarning,
            stacklevel=2,
        )


def best_epoch(checkpoint_dir=None, monitor="valid_loss_best"):
    """The callback that restores the best epoch by ``monitor`` (a history key that is
    True at each new best: by default the lowest validation loss) at the end of
    training: :class:`BestState` (in memory, no file), or, with ``checkpoint_dir``,
    skorch's ``Checkpoint`` writing ``<checkpoint_dir>/finetune/best_params.pt``."""
    if checkpoint_dir is None:
        return BestState(monitor)
    return Checkpoint(
        monitor=monitor,
        dirname=str(Path(checkpoint_dir) / "finetune"),
        f_params="best_params.pt",
        f_optimizer=None,
        f_criterion=None,
        f_history=None,
        load_best=True,
        sink=logger.debug,
    )


def finetune_callbacks(
    strategy, max_epochs, validation, valid_monitor, checkpoint_dir, lr_schedule="constant"
):
    """``PARSFineTuner``'s callbacks beside skorch's defaults: the time estimate after
    the first epoch (:class:`TimeEstimate`); with a validation set, its balanced
    accuracy per epoch (``valid_bal_acc``) and the restoring of the best epoch by
    ``valid_monitor``; the freezing (and, for lp-ft, the thawing after half of
    ``max_epochs``) of the encoder; the warm-up and cosine of ``lr_schedule``."""
    callbacks = [("time_estimate", TimeEstimate())]
    if lr_schedule == "warmup-cosine":
        callbacks.append(("lr_schedule", FineTuneWarmupCosine()))
    if validation:
        scoring = EpochScoring(
            _valid_balanced_accuracy, name="valid_bal_acc", lower_is_better=False,
            use_caching=False,
        )  # fmt: skip
        callbacks.append(("valid_bal_acc", scoring))
        monitor = VALID_MONITORS[valid_monitor]
        callbacks.append(("best_epoch", best_epoch(checkpoint_dir, monitor)))
    if strategy in ("frozen", "lp-ft"):
        callbacks.append(("freeze_encoder", Freezer("encoder.*")))
    if strategy == "lp-ft":
        at = max(1, max_epochs // 2) + 1
        callbacks.append(("unfreeze_encoder", Unfreezer("encoder.*", at=at)))
    return callbacks
