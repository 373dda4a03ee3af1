"""What :class:`~braindecode_pars.PARSClassifier` checks and resolves before training.

Every parameter is checked before any work, with errors that name the parameter,
what is allowed and what was given; the "auto" settings, the pretraining budget,
crop lengths and the validation split are resolved here, in one place.
"""

from __future__ import annotations

import copy
import logging
import math
import numbers
import os
from pathlib import Path

import numpy as np
from sklearn.model_selection import GroupShuffleSplit

from ._checks import check_device, check_int, check_option, check_range
from .datasets.adapters import read_windows
from .hub import PRETRAINED_ENCODERS, load_encoder
from .models import PRETEXT_MODELS
from .models.encoder import PatchEncoder, encoder_size
from .training.finetune import AUGMENTATION_PRESETS
from .training.seeding import fit_seed

logger = logging.getLogger(__name__)

#: Values of ``PARSClassifier(finetune=...)``.
FINETUNE_STRATEGIES = ("auto", "probe", "full", "frozen", "lp-ft")


class EstimatorSettings:
    """Mixin of :class:`~braindecode_pars.PARSClassifier`: parameter checks and the
    settings resolved from them."""

    # -- checks --------------------------------------------------------------------------
    def _check_params(self):
        """Every parameter, before any work."""
        check_option("pretrain", self.pretrain, tuple(PRETEXT_MODELS))
        if self.train_split is not None:
            raise ValueError(
                f"'train_split'={self.train_split!r} is not used: PARSClassifier makes its "
                "validation split from 'groups' (see 'min_valid_groups'), or takes "
                "'X_valid' and 'y_valid' in fit; leave 'train_split' as None."
            )
        check_range("mask_ratio", self.mask_ratio, 0, 1, high_open=True)
        for name in ("n_patches", "max_epochs", "batch_size", "pretrain_batch_size"):
            check_int(name, getattr(self, name), 1)
        if self.pretrain_epochs is not None:
            check_int("pretrain_epochs", self.pretrain_epochs, 0)
        check_int("pretrain_steps", self.pretrain_steps, 1)
        check_range("pretrain_lr", self.pretrain_lr, 0, math.inf, low_open=True)
        if self.pretrain_valid_fraction is not None:
            check_range(
                "pretrain_valid_fraction", self.pretrain_valid_fraction, 0, 1, high_open=True
            )
        check_option("pretrain_preset", self.pretrain_preset, (None, "paper"))
        check_option("finetune", self.finetune, FINETUNE_STRATEGIES)
        check_range("probe_C", self.probe_C, 0, math.inf, low_open=True)
        check_option("probe_align", self.probe_align, (None, "groups"))
        if self.finetune == "lp-ft" and self.max_epochs < 2:
            raise ValueError(
                f"finetune='lp-ft' trains the head over the frozen encoder for half of "
                "'max_epochs' and then every "
                f"weight, so 'max_epochs' must be >= 2, but got {self.max_epochs}."
            )
        check_range("encoder_lr_scale", self.encoder_lr_scale, 0, math.inf, low_open=True)
        check_option("amplitude", self.amplitude, (False, True))
        if self.min_valid_groups is not None:
            value = self.min_valid_groups
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(
                    "'min_valid_groups' must be None (no validation split from groups) or "
                    f"an int >= 2, but got {type(value).__name__} ({value!r})."
                )
            check_int("min_valid_groups", value, 2)
        check_range("pos_mask_ratio", self.pos_mask_ratio, 0, 1, low_open=True)
        check_range("patch_seconds", self.patch_seconds, 0, math.inf, low_open=True)
        check_range("lr", self.lr, 0, math.inf, low_open=True)
        check_range("valid_fraction", self.valid_fraction, 0, 1, low_open=True, high_open=True)
        check_range("spatial_drop_prob", self.spatial_drop_prob, 0, 1, high_open=True)
        check_option("verbose", self.verbose, (0, 1, 2, False, True))
        crop = self.crop_seconds
        is_number = isinstance(crop, numbers.Real) and not isinstance(crop, bool)
        if not (crop is None or is_number):
            raise ValueError(
                "Invalid value for the 'crop_seconds' parameter. Allowed values are "
                f"a positive number of seconds and None, but got {crop!r} instead."
            )
        if is_number:
            check_range("crop_seconds", crop, 0, math.inf, low_open=True)
        check_int("n_eval_crops", self.n_eval_crops, 1)
        if isinstance(self.augmentation, str):
            check_option("augmentation", self.augmentation, AUGMENTATION_PRESETS)
        if self.pretrain_window_seconds is not None:
            check_range(
                "pretrain_window_seconds", self.pretrain_window_seconds, 0, math.inf, low_open=True
            )
        fit_seed(self.random_state if self.random_state is not None else 0)  # type check
        self._check_device_param()
        if self.pretrained_encoder is not None and self.encoder is not None:
            raise ValueError(
                f"'encoder'={self.encoder!r} sets the size of a new encoder, but "
                "'pretrained_encoder' brings its own: leave 'encoder' as None."
            )
        if self.probe_align is not None and self._finetune_strategy() != "probe":
            raise ValueError(
                f"probe_align={self.probe_align!r} aligns the probe's features, but "
                f"finetune={self.finetune!r} trains the neural head "
                f"({self._finetune_strategy()!r}); leave 'probe_align' as None, or set "
                "finetune='probe'."
            )
        if self._finetune_strategy() == "probe":
            given = {
                "crop_seconds": self.crop_seconds,
                "augmentation": self.augmentation or None,
                "amplitude": self.amplitude or None,
            }
            given = {name: value for name, value in given.items() if value is not None}
            if given:
                why = "" if self.finetune == "probe" else " ('auto' with a pretrained encoder)"
                raise ValueError(
                    f"{', '.join(f'{k}={v!r}' for k, v in given.items())}: these train the "
                    f"neural head, but finetune={self.finetune!r} fits the probe{why}, a "
                    "logistic regression over whole windows that uses none of them (band "
                    "power gives it the amplitude). Leave them at their defaults, or set "
                    "finetune='frozen', 'full' or 'lp-ft'."
                )
        size = encoder_size("small" if self.encoder is None else self.encoder)
        n_masked = int(round(self.pos_mask_ratio * self.n_patches))
        if self.pretrain == "pars" and self._pretrains() and n_masked < 2:
            raise ValueError(
                f"pos_mask_ratio={self.pos_mask_ratio} of n_patches={self.n_patches} masks "
                f"{n_masked} patch(es); PARS needs at least 2."
            )
        return size

    def _check_device_param(self):
        check_device("device", self.device)

    def _read(self, X, y=None, groups=None, name="X", fitted=False):
        """``X`` read once (:func:`read_windows`), its sampling rate required."""
        data = read_windows(X, y, groups, sfreq=None if fitted else self.sfreq, name=name)
        if fitted:
            if data.sfreq is not None and abs(data.sfreq - self.sfreq_) > 1e-6:
                raise ValueError(
                    f"'{name}' windows are sampled at {data.sfreq} Hz, but the classifier was "
                    f"fitted at {self.sfreq_} Hz."
                )
            data.sfreq = self.sfreq_
        if data.sfreq is None:
            raise ValueError(
                f"The windows of '{name}' (a {type(X).__name__}) do not carry their sampling "
                "rate (arrays and the lists of items (x, y, inds) scikit-learn makes of "
                "braindecode windows do not): set 'sfreq', or pass the braindecode windows, "
                "skorch.helper.SliceDataset(windows) or mne.Epochs, which carry it."
            )
        if fitted and data.shape != (self.n_chans_, self.n_times_):
            raise ValueError(
                f"'{name}' windows have shape {data.shape}, but the classifier was fitted on "
                f"{(self.n_chans_, self.n_times_)}."
            )
        return data

    @staticmethod
    def _labels(y, name="y", at_least=2):
        """Labels checked: (classes, y)."""
        if y is None:
            raise ValueError(
                f"Labels are missing: pass '{name}', or windows that carry their targets."
            )
        missing = np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in y])
        if missing.any():
            raise ValueError(f"Labels are missing for {int(missing.sum())} window(s) in '{name}'.")
        classes = np.unique(y)
        if len(classes) < at_least:
            raise ValueError(
                f"Classification needs at least two classes, but '{name}' holds only "
                f"{classes.tolist()}."
            )
        return classes

    def _load_pretrained(self):
        """The encoder named by ``pretrained_encoder`` (a copy), or None."""
        value = self.pretrained_encoder
        if value is None:
            return None
        if isinstance(value, PatchEncoder):
            return copy.deepcopy(value)  # never train the caller's own object
        if not isinstance(value, str | os.PathLike):
            raise TypeError(
                "'pretrained_encoder' must be the path of a saved encoder, a PatchEncoder "
                f"or None, but got {type(value).__name__} ({value!r})."
            )
        if isinstance(value, str) and value in PRETRAINED_ENCODERS:
            return load_encoder(value)
        path = Path(value)
        if not path.exists():
            raise FileNotFoundError(
                f"'pretrained_encoder': there is no file or folder at '{path}', and it is "
                f"not the name of a shipped encoder ({', '.join(PRETRAINED_ENCODERS)})."
            )
        try:
            return load_encoder(path)
        except Exception as err:  # torch.load's errors say nothing of what was expected
            why = f"{type(err).__name__}: {err}"
            if "is not an encoder saved by" in str(err):  # load_encoder's own check
                why = "it holds no 'config' and 'state_dict'"
            raise ValueError(
                f"'pretrained_encoder': '{path}' is not an encoder saved by "
                f"braindecode_pars.save_encoder ({why})."
            ) from err

    def _check_pretrained(self, encoder, sfreq):
        if abs(encoder.sfreq - sfreq) > 1e-6:
            raise ValueError(
                f"The pretrained encoder works at sfreq={encoder.sfreq} Hz but the data is "
                f"at {sfreq} Hz; resample the windows to {encoder.sfreq} Hz first: "
                "braindecode_pars.datasets.resample_windows(X, sfreq="
                f"{sfreq}, new_sfreq={encoder.sfreq}) (arrays, braindecode windows or "
                "mne.Epochs; MNE's resampling)."
            )
        if abs(encoder.patch_seconds - self.patch_seconds) > 1e-9:
            raise ValueError(
                f"The pretrained encoder cuts {encoder.patch_seconds}-s patches but "
                f"'patch_seconds'={self.patch_seconds}."
            )

    # -- resolved settings ---------------------------------------------------------------
    def _pretrains(self):
        """Whether ``fit`` pretrains (no encoder given, a non-zero budget)."""
        return self.pretrained_encoder is None and self.pretrain_epochs != 0

    def _pretraining_settings(self):
        """lr, batch size, epochs (None: from steps), steps and crop length (s) in force."""
        if self.pretrain_preset == "paper":
            epochs = 1000 if self.pretrain_epochs is None else self.pretrain_epochs
            return dict(lr=1e-4, batch_size=512, epochs=epochs, steps=None, window=30.0)
        return dict(
            lr=self.pretrain_lr,
            batch_size=self.pretrain_batch_size,
            epochs=self.pretrain_epochs,
            steps=self.pretrain_steps,
            window=self.pretrain_window_seconds,
        )

    def _finetune_strategy(self):
        """The strategy in force: ``finetune``, with "auto" resolved."""
        if self.finetune != "auto":
            return self.finetune
        pretrained = self.pretrained_encoder is not None or self._pretrains()
        return "probe" if pretrained else "full"

    def _crop_samples(self, n_times, sfreq, patch):
        """Samples per fine-tuning crop (``n_times``: whole windows)."""
        if self.crop_seconds is None:
            return n_times
        n_fit = int(round(self.crop_seconds * sfreq))
        if not patch <= n_fit <= n_times:
            raise ValueError(
                f"'crop_seconds' must be between one patch ({self.patch_seconds} s) and "
                f"the window ({n_times / sfreq:g} s), but got {self.crop_seconds}."
            )
        return n_fit

    def _pretraining_crop(self, sfreq, patch, lengths):
        """Samples per pretraining crop, checked against the shortest windows of each
        source (``lengths``: name -> samples)."""
        window = self._pretraining_settings()["window"]
        n_crop = min(lengths["X"], int(round(10.0 * sfreq)))
        why = "10 s or the 'X' windows if shorter, as 'pretrain_window_seconds' is None"
        if window is not None:
            n_crop = int(round(window * sfreq))
            why = f"'pretrain_window_seconds'={self.pretrain_window_seconds}"
            if n_crop < patch:
                raise ValueError(
                    f"{why} gives pretraining windows of {n_crop} samples, shorter than one "
                    f"patch ({patch} samples)."
                )
        for name, n in lengths.items():
            if n_crop > n:
                raise ValueError(
                    f"'{name}' holds windows of {n} samples, shorter than the pretraining "
                    f"windows ({n_crop} samples: {why})."
                )
        return n_crop

    def _split(self, codes, groups):
        """Training and validation indices (None: no split) and the rule that applied."""
        n = len(codes)
        n_groups = 0 if groups is None else len(np.unique(groups))
        if self.min_valid_groups is None or n_groups < self.min_valid_groups:
            if self.min_valid_groups is None:
                why = "min_valid_groups=None"
            elif groups is None:
                why = "no groups"
            else:
                why = f"{n_groups} group(s) < min_valid_groups={self.min_valid_groups}"
            logger.info(
                "%s: no validation split; training on every window for %d epochs and "
                "keeping the last.",
                why,
                self.max_epochs,
            )
            return np.arange(n), None, "none"
        n_valid = max(1, int(round(self.valid_fraction * n_groups)))
        rng = np.random.default_rng(self.seed_)
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

    def _read_unlabeled(self, X_unlabeled, sfreq):
        """The windows of ``X_unlabeled`` (one source or a list of them) as arrays."""
        if X_unlabeled is None:
            return []
        one = not isinstance(X_unlabeled, list | tuple) or (
            len(X_unlabeled) > 0 and isinstance(X_unlabeled[0], tuple)
        )
        arrays = []
        for source in [X_unlabeled] if one else X_unlabeled:
            array = np.asarray(source) if isinstance(source, np.ndarray) else None
            if array is not None and not np.issubdtype(array.dtype, np.number):
                raise ValueError(
                    "'X_unlabeled' arrays must be numeric, of shape (n_windows, n_chans, "
                    f"n_times), but got shape {array.shape} and dtype {array.dtype}."
                )
            arrays.append(read_windows(source, sfreq=sfreq, name="X_unlabeled").X)
        return arrays
