"""The fine-tuner's learning rates: the encoder's layer-wise share of ``lr``, the
warm-up and cosine schedule, and the refusal of a second scheduler in ``callbacks``."""

from __future__ import annotations

import math

import torch
from skorch.callbacks import LRScheduler

from braindecode_pars._util.checks import InvalidParameterError
from braindecode_pars.pretraining.schedule import WarmupCosineLR


def encoder_param_groups(lr, encoder_lr_scale, layer_decay, depth):
    """skorch ``param_groups`` for the encoder (parameters ``encoder.*``) of a model.

    ``lr * encoder_lr_scale`` for the encoder's last block and final norm, times
    ``layer_decay`` per block below it, and once more for the tokenizer (layer-wise
    learning-rate decay, as BEiT's); none when both factors are 1 (every weight at
    ``lr``). The first pattern that matches a parameter sets its rate.
    """
    if encoder_lr_scale == 1.0 and layer_decay == 1.0:
        return []
    base = lr * encoder_lr_scale
    groups = [("encoder.norm.*", {"lr": base})]
    for i in reversed(range(depth)):
        groups.append((f"encoder.blocks.{i}.*", {"lr": base * layer_decay ** (depth - i)}))
    return groups + [("encoder.*", {"lr": base * layer_decay ** (depth + 1)})]


#: Values of ``PARSFineTuner(lr_schedule=...)``.
LR_SCHEDULES = ("constant", "warmup-cosine")


class FineTuneWarmupCosine(WarmupCosineLR):
    """The warm-up and cosine of ``PARSFineTuner(lr_schedule="warmup-cosine")``: the
    pretraining curve, with three differences a fine-tuning needs. Each parameter group
    keeps its own share of ``lr`` (the encoder's ``encoder_lr_scale`` and
    ``layer_decay``), read once when the group is first set; the run is each call of
    ``fit`` or ``partial_fit`` (its ``max_epochs`` epochs from where it starts, so a
    ``partial_fit`` after a fit warms up and anneals again instead of training at the
    curve's end, rate 0); an epoch's batches include its last, smaller one (the
    fine-tuner's loader does not drop it)."""

    def on_train_begin(self, net, **kwargs):
        self.first_epoch_ = len(net.history)  # rows before this call's first epoch

    def on_epoch_begin(self, net, dataset_train=None, **kwargs):
        self.per_epoch_ = max(1, math.ceil(len(dataset_train) / net.batch_size))
        self.epoch_ = len(net.history) - 1 - getattr(self, "first_epoch_", 0)
        self.batch_ = 0
        self._set(net)
        net.history.record("lr", self._rate(net, 0))

    def _set(self, net):
        lr = self._rate(net, self.batch_)
        for group in net.optimizer_.param_groups:
            rate = group["lr"].item() if isinstance(group["lr"], torch.Tensor) else group["lr"]
            scale = group.setdefault("lr_scale", rate / net.lr if net.lr else 1.0)
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr * scale)
            else:
                group["lr"] = lr * scale
        return lr


def _named_callbacks(callbacks):
    """``(name, callback)`` of each entry of skorch's ``callbacks`` (an instance, a class,
    or a ``(name, callback)`` pair), named as skorch names them."""
    for item in callbacks or []:
        name, callback = item if isinstance(item, tuple | list) else (None, item)
        if name is None:
            name = callback.__name__ if isinstance(callback, type) else type(callback).__name__
        yield name, callback


def check_lr_schedulers(net):
    """Refuse a learning-rate scheduler in ``callbacks`` (the package's
    :class:`~braindecode_pars.pretraining.schedule.WarmupCosineLR`, skorch's
    ``LRScheduler``) beside the fine-tuner's own ``lr_schedule`` (all but
    ``"constant"``): both would set the rate at every batch, the later one overwriting
    the other and the encoder's share of it (``encoder_lr_scale``, ``layer_decay``).

    Raises
    ------
    InvalidParameterError
        Naming the callback, ``lr_schedule`` and the two ways to keep one.
    """
    if net.lr_schedule == "constant":
        return
    schedulers = (WarmupCosineLR, LRScheduler)
    found = [
        name
        for name, callback in _named_callbacks(net.callbacks)
        if isinstance(callback, schedulers)
        or (isinstance(callback, type) and issubclass(callback, schedulers))
    ]
    if found:
        names = ", ".join(repr(n) for n in found)
        raise InvalidParameterError(
            f"{type(net).__name__}: 'callbacks' hold a learning-rate scheduler ({names}) "
            f"beside the fine-tuner's own lr_schedule={net.lr_schedule!r}; both would set "
            "the rate at every batch, the later overwriting the other (and the encoder's "
            "share of it, encoder_lr_scale and layer_decay). Keep one: leave the scheduler "
            f"out of 'callbacks' (lr_schedule={net.lr_schedule!r} warms up and anneals on "
            "its own), or pass lr_schedule='constant' to let the callback alone set the rate."
        )
