"""The one definition of a pretraining run's settings and of its plan.

As :class:`~braindecode_pars.models.encoder_config.PatchEncoderConfig` is for the encoder,
:class:`PretrainConfig` names every setting of the pretext task and of its optimisation;
:class:`~braindecode_pars.PARSPretrainer` and ``braindecode-pars pretrain`` each build
one (from their parameters, from their flags), :data:`PAPER` is the paper's
optimisation, and :meth:`PretrainConfig.max_epochs_for` is the one planner that turns
a step budget into epochs over the windows that train.
"""

from __future__ import annotations

import dataclasses
import math

from braindecode_pars._util.checks import (
    check_int,
    check_option,
    check_position_masking,
    check_range,
    fewest_patches,
)
from braindecode_pars.pretraining._split import training_windows
from braindecode_pars.pretraining.schedule import _epochs_for_steps

#: The length of the package's pretraining crops, in seconds: the estimator's when the
#: windows are at least this long (``window_seconds=None``), the command line's default.
DEFAULT_CROP_SECONDS = 10.0

#: PARS's patches per second of crop by default: the density of the default
#: configuration (40 one-second patches per 10-s crop), which the patch-density rule kept
#: (:ref:`patch-density`). Every default reads it:
#: ``PretrainConfig``'s ``n_patches``, and the estimators' ``n_patches=None``, which
#: scales with the crop.
PATCHES_PER_SECOND = 4.0


#: The pretext tasks, by the name ``method`` takes.
_METHODS = ("pars", "mae", "mp3", "droppos")
#: ``torch.compile``'s modes, an infrastructure setting beside these (the estimator's
#: ``compile_mode``, the command line's ``--compile-mode``, the net's ``compile__mode``);
#: those that replay the step as CUDA graphs.
COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Every setting of a pretraining run but the encoder's and the infrastructure's.

    The defaults are the package's for a CPU and a corpus of thousands of windows (the
    small encoder, 3,000 steps of batch 64 at a rate of 1e-3); :data:`PAPER` holds the
    paper's (section 2.5), for its 1.5-million-window corpus.

    Parameters
    ----------
    method : {"pars", "mae", "mp3", "droppos"}
        The pretext task.
    n_patches, pos_mask_ratio
        PARS's patches per crop and share of them without a position (paper: 40, 0.8);
        ``pos_mask_ratio`` is also DropPos's ``gamma_pos``. The default ``n_patches`` is
        :data:`PATCHES_PER_SECOND` in a crop of :data:`DEFAULT_CROP_SECONDS` (40).
    mask_ratio : float
        Share of patches removed (MAE, DropPos) or hidden from keys and values (MP3).
    decoder_heads : int
        Attention heads of PARS's pair decoder.
    sampling : {"random", "disjoint", "fixed"}
        PARS's patch starts (see :class:`~braindecode_pars.PARS`).
    window_seconds : float | None
        Length of the pretraining crops; None: the caller's default.
    max_epochs : int | None
        Epochs; None: as many as ``steps`` take (:meth:`max_epochs_for`).
    steps : int
        The budget in optimiser steps (of one process) when ``max_epochs`` is None.
    batch_size, lr, weight_decay
        Windows per step (per process), the maximum learning rate (warm-up, then
        cosine) and AdamW's weight decay.
    valid_fraction : float | None
        Share held out to measure the pretext skill; None or 0: none.
    """

    method: str = "pars"
    n_patches: int = int(round(PATCHES_PER_SECOND * DEFAULT_CROP_SECONDS))
    pos_mask_ratio: float = 0.8
    mask_ratio: float = 0.75
    decoder_heads: int = 8
    sampling: str = "random"
    window_seconds: float | None = None
    max_epochs: int | None = None
    steps: int = 3000
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    valid_fraction: float | None = 0.1

    def __post_init__(self):
        check_option("method", self.method, _METHODS)
        check_int("n_patches", self.n_patches, 1)
        check_range("pos_mask_ratio", self.pos_mask_ratio, 0, 1, low_open=True)
        check_range("mask_ratio", self.mask_ratio, 0, 1, high_open=True)
        check_int("decoder_heads", self.decoder_heads, 1)
        if self.method == "pars" and self.max_epochs != 0:  # 0: no pretext model is built
            check_position_masking(self.n_patches, self.pos_mask_ratio)
        check_option("sampling", self.sampling, ("random", "disjoint", "fixed"))
        if self.window_seconds is not None:
            check_range("window_seconds", self.window_seconds, 0, math.inf, low_open=True)
        if self.max_epochs is not None:
            check_int("max_epochs", self.max_epochs, 0)
        check_int("steps", self.steps, 1)
        check_int("batch_size", self.batch_size, 1)
        check_range("lr", self.lr, 0, math.inf, low_open=True)
        check_range("weight_decay", self.weight_decay, 0, math.inf)
        if self.valid_fraction is not None:
            check_range("valid_fraction", self.valid_fraction, 0, 1, high_open=True)

    @classmethod
    def fields(cls):
        """The names of the settings, in order."""
        return tuple(field.name for field in dataclasses.fields(cls))

    @classmethod
    def of(cls, source, **changes):
        """The settings of ``source`` (anything with them as attributes: an estimator,
        a namespace of flags; a missing one takes its default), with ``changes``."""
        values = {k: getattr(source, k) for k in cls.fields() if hasattr(source, k)}
        return cls(**{**values, **changes})

    def replace(self, **changes):
        """A copy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def with_paper_optimisation(self, world_size=1):
        """These settings with :data:`PAPER`'s optimisation in place of theirs: its rate,
        epochs and crop length, and its batch of 512 as the global one, shared by the
        ``world_size`` processes."""
        return self.replace(
            lr=PAPER.lr, batch_size=max(1, PAPER.batch_size // world_size),
            max_epochs=PAPER.max_epochs, window_seconds=PAPER.window_seconds,
        )  # fmt: skip

    def with_patches_for(self, crop_seconds, patches_per_second=PATCHES_PER_SECOND):
        """A copy with PARS's ``n_patches`` scaled with a crop of ``crop_seconds``:
        ``round(patches_per_second * crop_seconds)``, and never fewer than PARS takes at
        ``pos_mask_ratio`` (2 position-masked patches).

        Examples
        --------
        >>> config = PretrainConfig()
        >>> [config.with_patches_for(s).n_patches for s in (10.0, 4.0, 0.2)]
        [40, 16, 2]
        """
        check_range("crop_seconds", crop_seconds, 0, math.inf, low_open=True)
        n_patches = int(round(patches_per_second * crop_seconds))
        return self.replace(n_patches=max(fewest_patches(self.pos_mask_ratio), n_patches))

    def pretext_kwargs(self):
        """The keyword arguments of the pretext model ``method`` builds."""
        if self.method == "pars":
            return dict(
                n_patches=self.n_patches, pos_mask_ratio=self.pos_mask_ratio,
                decoder_heads=self.decoder_heads, sampling=self.sampling,
            )  # fmt: skip
        if self.method == "droppos":
            return dict(mask_ratio=self.mask_ratio, pos_mask_ratio=self.pos_mask_ratio)
        return dict(mask_ratio=self.mask_ratio)

    def run_kwargs(self, max_epochs):
        """The keyword arguments of :func:`~braindecode_pars.pretraining.run_pretraining` that
        these settings give (the optimisation, the held-out share, the pretext model's),
        for a run of ``max_epochs`` (:meth:`max_epochs_for`)."""
        return dict(
            max_epochs=max_epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=self.weight_decay,
            valid_fraction=self.valid_fraction or None,
            **self.pretext_kwargs(),
        )

    def max_epochs_for(self, view, world_size=1):
        """The epochs of the run on ``view``: ``max_epochs``, or as many as make at least
        ``steps`` optimiser steps of one process over the windows that train once
        ``valid_fraction`` is held out (whole recordings or groups where it can), an
        epoch more at most."""
        if self.max_epochs is not None:
            return self.max_epochs
        n_train = training_windows(view, self.valid_fraction or None)
        return _epochs_for_steps(self.steps, n_train, self.batch_size, world_size=world_size)


#: The settings of the pretext task and its optimisation that the command line sets
#: only by name in its ``--config`` file (its flags set the method, the crops and the
#: budget).
CONFIG_FILE_SETTINGS = (
    "n_patches",
    "pos_mask_ratio",
    "mask_ratio",
    "decoder_heads",
    "sampling",
    "lr",
    "weight_decay",
    "valid_fraction",
)

#: The paper's optimisation (section 2.5): AdamW at 1e-4 (weight decay 1e-4), batch 512,
#: 1000 epochs of 30-s crops, for its corpus of 1.5 million windows; it learns nothing
#: in a few thousand steps. Its 40 patches per 30-s crop are the density of the
#: estimators' ``n_patches=None`` under ``preset="paper"``.
PAPER = PretrainConfig(n_patches=40, lr=1e-4, batch_size=512, max_epochs=1000, window_seconds=30.0)
