"""Pieces of fine-tuning: the parameters' check, class weights, the in-memory best epoch,
augmentation, crops."""

from __future__ import annotations

import logging
import math
import numbers
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from braindecode.augmentation import (
    ChannelsDropout,
    FTSurrogate,
    SmoothTimeMask,
)
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import GroupShuffleSplit
from sklearn.utils import check_random_state
from sklearn.utils.class_weight import compute_class_weight
from skorch.callbacks import (
    Callback,
    Checkpoint,
    EpochScoring,
    Freezer,
    LRScheduler,
    PrintLog,
    Unfreezer,
)

from braindecode_pars._util.checks import (
    InvalidParameterError,
    check_device,
    check_int,
    check_none_or_number,
    check_option,
    check_range,
    check_skorch_names,
)
from braindecode_pars._util.logs import plural, shows_bars
from braindecode_pars._util.progress import ANSI, duration
from braindecode_pars._util.seeding import fit_seed
from braindecode_pars.estimators._spatial_init import SPATIAL_INITS
from braindecode_pars.models.multichannel import AMPLITUDES, POOLINGS, READOUTS, check_front_end
from braindecode_pars.models.spatial_front import check_bands
from braindecode_pars.pretraining.schedule import WarmupCosineLR

logger = logging.getLogger(__name__)

#: Values of ``PARSFineTuner(token_gate=...)`` (``"auto"``: ``_token_gate``).
TOKEN_GATES = ("auto", True, False, "closed")


def class_weights(y, n_classes):
    """Cross-entropy weights by class frequency: ``n / (n_classes * count_c)``.

    scikit-learn's ``compute_class_weight("balanced")`` when every class is in
    ``y``; a class absent from ``y`` (held out whole by a validation split) gets
    weight 1: training never sees it, and a validation batch holding only that class
    keeps a finite loss, where weight 0 would give 0 / 0.

    Returns
    -------
    weights : torch.Tensor, shape (n_classes,), float32
    """
    y = np.asarray(y, dtype=np.int64)
    present = np.unique(y)
    weights = np.ones(n_classes)
    balanced = compute_class_weight("balanced", classes=present, y=y)  # n / (n_present c)
    weights[present] = balanced * len(present) / n_classes
    return torch.as_tensor(weights, dtype=torch.float32)


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
    table decides for stderr: :func:`~braindecode_pars.pretraining.callbacks.shows_bars`).
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


#: Values of ``PARSFineTuner(valid_monitor=...)`` and the history key each reads.
VALID_MONITORS = {"loss": "valid_loss_best", "balanced_accuracy": "valid_bal_acc_best"}


def check_validation(min_valid_groups, valid_fraction, valid_monitor):
    """Check ``PARSFineTuner``'s validation parameters (clear errors naming each)."""
    check_option("valid_monitor", valid_monitor, VALID_MONITORS)
    check_range("valid_fraction", valid_fraction, 0, 1, low_open=True, high_open=True)
    allowed = "None (no validation split from groups) and an int >= 2"
    if check_none_or_number("min_valid_groups", min_valid_groups, numbers.Integral, allowed):
        check_int("min_valid_groups", min_valid_groups, 2)


#: Values of ``PARSFineTuner(strategy=...)``.
STRATEGIES = ("full", "frozen", "lp-ft")


def check_strategy(strategy, max_epochs):
    """``strategy`` one of :data:`STRATEGIES`; ``"lp-ft"`` needs two epochs or more."""
    check_option("strategy", strategy, STRATEGIES)
    if strategy == "lp-ft" and max_epochs < 2:
        raise InvalidParameterError(
            "strategy='lp-ft' trains the head over the frozen encoder for half of "
            f"'max_epochs' and then every weight, so 'max_epochs' must be >= 2, but got "
            f"{max_epochs}."
        )


def crop_samples(crop_seconds, sfreq, n_times, patch, patch_seconds):
    """Samples per training crop of ``crop_seconds`` (None: the window, ``n_times``),
    between one patch (``patch`` samples, ``patch_seconds``) and the window."""
    if crop_seconds is None:
        return n_times
    n_fit = int(round(crop_seconds * sfreq))
    if not patch <= n_fit <= n_times:
        raise InvalidParameterError(
            f"'crop_seconds' must be between one patch ({patch_seconds} s) and the "
            f"window ({n_times / sfreq:g} s), but got {crop_seconds}."
        )
    return n_fit


def check_crop_seconds(crop):
    """``crop_seconds`` must be None or a positive number of seconds."""
    allowed = "a positive number of seconds and None"
    if check_none_or_number("crop_seconds", crop, numbers.Real, allowed):
        check_range("crop_seconds", crop, 0, math.inf, low_open=True)


#: The :class:`~braindecode_pars.MultiChannelClassifier` settings that ``PARSFineTuner``
#: takes itself, by the same names, and passes to the module at ``fit``: given also as
#: ``module__<name>`` they are refused (:func:`check_module_settings`).
MODULE_SETTINGS = (
    "amplitude", "pooling", "spatial_filters", "band_power", "token_gate", "readout",
    "patch_stride", "spatial_drop_prob",
)  # fmt: skip

#: The module's arguments that ``fit`` sets from the windows, the classes and the encoder.
FIT_MODULE_ARGS = ("n_outputs", "n_chans", "n_times", "sfreq", "encoder")


def check_module_settings(net):
    """Refuse a setting given twice, once as the fine-tuner's own parameter and once as
    skorch's ``module__<name>`` (one would silently win over the other), and a module
    argument that ``fit`` sets from the data (:data:`FIT_MODULE_ARGS`).

    Raises
    ------
    InvalidParameterError
        Naming both spellings of each setting given twice, and the one to keep.
    """
    name = type(net).__name__
    given = {k[len("module__") :]: v for k, v in vars(net).items() if k.startswith("module__")}
    twice = [k for k in MODULE_SETTINGS if k in given]
    if twice:
        settings = " and ".join(repr(k) for k in twice)
        pairs = ", and ".join(
            f"as {k}={getattr(net, k)!r} and module__{k}={given[k]!r}" for k in twice
        )
        keep = ", ".join(f"{k}={given[k]!r}" for k in twice)
        raise InvalidParameterError(
            f"{name}: {settings} {'is' if len(twice) == 1 else 'are'} given twice, {pairs} "
            f"({name} takes {'it' if len(twice) == 1 else 'them'} itself and passes "
            f"{'it' if len(twice) == 1 else 'them'} to the module: one would silently win). "
            f"Give {'it' if len(twice) == 1 else 'each'} once, as {name}'s own parameter: "
            f"{keep}, say; module__<name> is for the module's other arguments."
        )
    by_fit = [k for k in FIT_MODULE_ARGS if k in given]
    if by_fit:
        names = ", ".join(f"module__{k}" for k in by_fit)
        raise InvalidParameterError(
            f"{name}: {names} cannot be given: fit sets the module's n_outputs (from the "
            "classes), n_chans, n_times and sfreq (from the windows, at the encoder's rate) "
            "and encoder (from 'encoder')."
        )


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


def check_finetuner_params(net):
    """Check a :class:`~braindecode_pars.PARSFineTuner`'s parameters without data (its
    ``check_params``), nested names too, by skorch's own check (skorch runs it in
    ``initialize``): each message names the parameter, the allowed values and what was
    given."""
    check_skorch_names(net)
    check_module_settings(net)
    check_strategy(net.strategy, net.max_epochs)
    if net.train_split is not None:
        raise InvalidParameterError(
            f"'train_split'={net.train_split!r} is not used: PARSFineTuner makes its "
            "validation split from 'groups' (see 'min_valid_groups'), or takes "
            "'X_valid' and 'y_valid' in fit; leave 'train_split' as None."
        )
    for name in ("max_epochs", "batch_size", "n_eval_crops"):
        check_int(name, getattr(net, name), 1)
    check_range("lr", net.lr, 0, math.inf, low_open=True)
    check_range("encoder_lr_scale", net.encoder_lr_scale, 0, math.inf, low_open=True)
    check_range("layer_decay", net.layer_decay, 0, 1, low_open=True)
    check_option("amplitude", net.amplitude, AMPLITUDES)
    check_option("pooling", net.pooling, POOLINGS)
    check_option("readout", net.readout, READOUTS)
    check_option("lr_schedule", net.lr_schedule, LR_SCHEDULES)
    check_lr_schedulers(net)
    check_option("spatial_init", net.spatial_init, SPATIAL_INITS)
    check_option("token_gate", net.token_gate, TOKEN_GATES)
    check_front_end(net.spatial_filters, 1.0, net.patch_stride)
    check_bands("band_power", net.band_power)
    check_range("spatial_drop_prob", net.spatial_drop_prob, 0, 1, high_open=True)
    check_validation(net.min_valid_groups, net.valid_fraction, net.valid_monitor)
    check_crop_seconds(net.crop_seconds)
    check_option("align", net.align, (None, "groups"))
    if isinstance(net.augmentation, str):
        check_option("augmentation", net.augmentation, AUGMENTATION_PRESETS)
    check_device("device", net.device)
    fit_seed(net.random_state if net.random_state is not None else 0)  # type check


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


#: Names ``PARSClassifier(augmentation=...)`` accepts for a preset.
AUGMENTATION_PRESETS = ("standard",)


#: Fewest channels that ``standard_augmentation`` drops channels of: 20 % of them is one
#: channel or more from 5 on; below, a dropped channel is a third or a half of the window
#: (on two channels it hid the label of a relative-amplitude task from the training
#: windows it struck, and fine-tuning memorised instead, :doc:`/benchmarks/finetuning`).
MIN_DROPOUT_CHANNELS = 5


def standard_augmentation(sfreq, probability=0.5, random_state=None, n_chans=None):
    """braindecode augmentations that keep the label of most EEG tasks and ignore the unit.

    Each applied to a batch with ``probability``: ``FTSurrogate`` (random Fourier
    phases: the spectrum kept, the waveform new), ``ChannelsDropout`` (20 % of the
    channels zeroed; only for windows of ``n_chans`` >= ``MIN_DROPOUT_CHANNELS`` (5)
    channels, or ``n_chans`` None) and ``SmoothTimeMask`` (one second masked). None of
    them adds a fixed amount of noise, so volts and microvolts are augmented alike (the
    encoder's instance normalisation ignores the unit too). ``random_state`` seeds
    their draws (None: numpy's global generator, as braindecode does); the fine-tuner's
    DataLoader workers each reseed their copy (:func:`augmented_loader`).
    """
    rng = check_random_state(random_state)  # one stream shared by the three
    dropout = n_chans is None or n_chans >= MIN_DROPOUT_CHANNELS
    return [
        FTSurrogate(probability, random_state=rng),
        *([ChannelsDropout(probability, p_drop=0.2, random_state=rng)] if dropout else []),
        SmoothTimeMask(probability, mask_len_samples=max(1, int(round(sfreq))), random_state=rng),
    ]


class _ReseedTransforms:
    """A DataLoader's ``worker_init_fn`` that reseeds, in each worker, the numpy
    generators of braindecode transforms from torch's seed of that worker.

    braindecode's ``AugmentedDataLoader`` applies its transforms in ``collate_fn``, so
    with DataLoader workers each worker applies its own copy of them, each holding a
    copy of the same ``RandomState`` (:func:`standard_augmentation` seeds one per
    fit): without a reseed every worker, and every epoch's new workers, would draw the
    same augmentations. torch's seed of a worker is the loader's base seed (drawn from
    torch's generator, so the fit's seed decides it) plus the worker's id: every
    worker, and every epoch, draws its own, and a seeded fit draws the same again.
    Each distinct generator gets its own stream (the three transforms of the standard
    augmentation share one, and still do); numpy's global generator, which torch
    already reseeds in each worker, is left alone. ``worker_init_fn``, the user's, runs
    after.
    """

    def __init__(self, transforms, worker_init_fn=None):
        self.transforms = transforms
        self.worker_init_fn = worker_init_fn

    def __call__(self, worker_id):
        seed = torch.initial_seed()  # the loader's base seed + worker_id
        generators = []
        for transform in self.transforms:
            parts = transform.modules() if isinstance(transform, torch.nn.Module) else ()
            for part in parts:
                rng = getattr(part, "rng", None)
                if (
                    isinstance(rng, np.random.RandomState)
                    and rng is not np.random.mtrand._rand
                    and all(rng is not known for known in generators)
                ):
                    generators.append(rng)
        for i, rng in enumerate(generators):
            rng.seed(np.random.SeedSequence([seed, i]).generate_state(4))
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)


def augmented_loader(dataset, transforms, **kwargs):
    """braindecode's ``AugmentedDataLoader`` of ``dataset`` with ``transforms``; with
    DataLoader workers (``num_workers`` > 0) each worker's transforms draw their own
    augmentations (:class:`_ReseedTransforms`), without them the loader is braindecode's
    own."""
    from braindecode.augmentation import AugmentedDataLoader

    if kwargs.get("num_workers", 0):
        kwargs["worker_init_fn"] = _ReseedTransforms(transforms, kwargs.get("worker_init_fn"))
    return AugmentedDataLoader(dataset, transforms=transforms, **kwargs)


def crop_starts(n_times, n_crop, n_crops):
    """Starts of ``n_crops`` crops of ``n_crop`` samples spread evenly over a window.

    The first crop starts at 0 and the last ends at ``n_times``; one crop is centred.
    """
    if n_crop > n_times:
        raise ValueError(f"Crops of {n_crop} samples do not fit windows of {n_times} samples.")
    if n_crops == 1:
        return np.array([(n_times - n_crop) // 2])
    return np.unique(np.round(np.linspace(0, n_times - n_crop, n_crops)).astype(np.int64))


class RandomCrops(torch.utils.data.Dataset):
    """Items ``(x, y)`` of ``dataset`` cut to a random crop of ``n_crop`` samples.

    Every read draws a new start from torch's generator (inside
    ``PARSClassifier.fit``, seeded by its ``random_state``), so each epoch sees other crops of the
    same labelled windows: training on crops, as braindecode's cropped decoding
    does, with the crops drawn rather than enumerated.
    """

    def __init__(self, dataset, n_crop):
        self.dataset = dataset
        self.n_crop = int(n_crop)

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, i):
        x, y = self.dataset[i][:2]
        n_times = x.shape[-1]
        if self.n_crop > n_times:
            raise ValueError(
                f"Crops of {self.n_crop} samples do not fit windows of {n_times} samples."
            )
        start = int(torch.randint(0, n_times - self.n_crop + 1, ()))
        return x[..., start : start + self.n_crop], y


class FixedCrops(torch.utils.data.Dataset):
    """Every window of ``dataset`` as crops at ``starts``: item ``i * len(starts) + j``.

    For validation and prediction with a model trained on crops: the class
    probabilities of a window are the mean over its crops
    (:meth:`average` , as braindecode's ``trial_preds_from_window_preds`` averages
    the predictions of a trial's crops).
    """

    def __init__(self, dataset, n_crop, starts):
        self.dataset = dataset
        self.n_crop = int(n_crop)
        self.starts = np.asarray(starts, dtype=np.int64)

    def __len__(self):
        return len(self.dataset) * len(self.starts)

    def __getitem__(self, i):
        window, j = divmod(int(i), len(self.starts))
        x, y = self.dataset[window][:2]
        start = int(self.starts[j])
        return x[..., start : start + self.n_crop], y

    def average(self, crop_values):
        """(n_windows * n_crops, ...) values of the crops -> (n_windows, ...) means."""
        crop_values = np.asarray(crop_values)
        return crop_values.reshape(
            len(self.dataset), len(self.starts), *crop_values.shape[1:]
        ).mean(1)


class CodedWindows(torch.utils.data.Dataset):
    """Windows (an array, n_windows x n_chans x n_times) with integer class codes:
    items ``(x, code)``; ``indices`` selects windows (None: all)."""

    def __init__(self, X, codes, indices=None):
        self.X = X
        self.codes = np.asarray(codes, dtype=np.int64)
        self.indices = np.arange(len(X)) if indices is None else np.asarray(indices)

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        j = int(self.indices[i])
        return torch.as_tensor(self.X[j]), int(self.codes[j])

    def targets(self):
        """The code of every item."""
        return self.codes[self.indices]


def _item_targets(dataset):
    """The class code of every item of a fine-tuning dataset, crops included (each of a
    window's ``FixedCrops`` is an item); :meth:`CodedWindows.targets` for a dataset of
    whole windows."""
    if isinstance(dataset, FixedCrops):
        return np.repeat(_item_targets(dataset.dataset), len(dataset.starts))
    if isinstance(dataset, RandomCrops):
        return _item_targets(dataset.dataset)
    return dataset.targets()


def _valid_balanced_accuracy(net, dataset, y=None):
    """Balanced accuracy of the items of ``dataset`` (each crop is an item)."""
    from braindecode import (
        EEGClassifier,  # the net's own prediction, without PARSClassifier's reading of X
    )

    proba = EEGClassifier.predict_proba(net, dataset)
    return balanced_accuracy_score(_item_targets(dataset), proba.argmax(axis=1))


def group_split(codes, groups, min_valid_groups, valid_fraction, seed):
    """Training and validation indices of coded labels, and the rule that applied.

    With ``min_valid_groups`` set and at least that many distinct ``groups``, about
    ``valid_fraction`` of the groups are held out (a draw whose two parts hold every
    class is preferred); else no split.

    Returns
    -------
    train : ndarray
    valid : ndarray | None
    rule : {"groups", "none"}
    """
    n = len(codes)
    n_groups = 0 if groups is None else len(np.unique(groups))
    if min_valid_groups is None or n_groups < min_valid_groups:
        return np.arange(n), None, "none"
    n_valid = max(1, int(round(valid_fraction * n_groups)))
    rng = np.random.default_rng(seed)
    n_classes = len(np.unique(codes))
    for _ in range(100):  # prefer a draw whose two parts hold every class
        splitter = GroupShuffleSplit(1, test_size=n_valid, random_state=rng.integers(2**31))
        train, valid = next(splitter.split(codes, codes, groups))
        if len(np.unique(codes[valid])) == n_classes == len(np.unique(codes[train])):
            break
    else:
        logger.warning(
            "No draw of %d held-out group(s) in 100 holds every class on both sides; "
            "keeping the last draw.",
            n_valid,
        )
    return train, valid, "groups"
