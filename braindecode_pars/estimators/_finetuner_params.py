"""The fine-tuner's parameters: the values each takes, the module settings it takes
itself, and their check without data."""

from __future__ import annotations

import math

from braindecode_pars._util.checks import (
    InvalidParameterError,
    check_device,
    check_int,
    check_option,
    check_range,
    check_skorch_names,
)
from braindecode_pars._util.seeding import fit_seed
from braindecode_pars.estimators._augmentation import AUGMENTATION_PRESETS
from braindecode_pars.estimators._crops import check_crop_seconds
from braindecode_pars.estimators._learning_rates import LR_SCHEDULES, check_lr_schedulers
from braindecode_pars.estimators._spatial_init import SPATIAL_INITS
from braindecode_pars.estimators._token_gate import TOKEN_GATES
from braindecode_pars.estimators._validation import check_validation
from braindecode_pars.models.multichannel import AMPLITUDES, POOLINGS, READOUTS, check_front_end
from braindecode_pars.models.spatial_front import check_bands

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
