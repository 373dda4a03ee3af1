"""Validation of a pretraining run on fixed draws: :class:`_FixedValidation`, a mixin of
:class:`~braindecode_pars.pretraining.PretrainNet`.

The windows held out (whole recordings or groups where the data say which, else
windows; see :func:`~braindecode_pars.pretraining._split.held_out_recordings`) are cropped
once, seeded, and every validation pass draws its patches and masks from a generator
reseeded before it (the net's ``valid_generator_``), so that the validation numbers of
different epochs are comparable. The draws are made by the uncompiled pretext model
(:meth:`~braindecode_pars.models.PretextModel.draw`) and handed to the module as
tensors (``draws``): a compiled module that took the generator would break its graph
at every draw.
"""

from __future__ import annotations

import numpy as np
import torch
from skorch.dataset import ValidSplit
from torch.utils.data import Subset, TensorDataset

from braindecode_pars._util.checks import check_int, check_range
from braindecode_pars._util.logs import warn_once
from braindecode_pars.pretraining._split import held_out_recordings
from braindecode_pars.pretraining._views import SingleChannelWindows


class _FixedValidation:
    """Mixin of a skorch ``NeuralNet`` that validates on fixed draws (see the module's
    docstring); it reads the net's ``valid_fraction``, ``max_valid_windows`` and
    ``valid_generator_``."""

    def get_split_datasets(self, X, y=None, **fit_params):
        """The training and validation sets; validation crops are drawn once, seeded."""
        if self.valid_fraction and self.train_split is None:
            check_range("valid_fraction", self.valid_fraction, 0, 1, high_open=True)
            dataset = self.get_dataset(X, y)
            valid_idx = held_out_recordings(dataset, self.valid_fraction)
            by_groups = getattr(dataset, "split_groups", None) is not None
            if valid_idx is None and by_groups:
                warn_once(
                    f"Too few groups to hold out about {self.valid_fraction:g} of the "
                    "pretraining windows as whole groups; the pretext skill is validated "
                    "on windows of the training groups, held out of training but not of "
                    "their groups (more groups, or a larger valid_fraction, hold out "
                    "whole groups).",
                    UserWarning,
                )
            if valid_idx is not None:
                self.valid_split_ = "groups" if by_groups else "recordings"
                train_idx = np.setdiff1d(np.arange(len(dataset)), valid_idx)
                dataset_train, dataset_valid = (
                    Subset(dataset, train_idx),
                    Subset(dataset, valid_idx),
                )
            else:
                self.valid_split_ = "windows"
                split = ValidSplit(self.valid_fraction, stratified=False, random_state=0)
                dataset_train, dataset_valid = split(dataset, None)
        else:
            dataset_train, dataset_valid = super().get_split_datasets(X, y, **fit_params)
        if dataset_valid is not None and not getattr(self, "_valid_fixed", None):
            self._valid_fixed = self._fixed_draws(dataset_valid)
        if dataset_valid is not None:
            dataset_valid = self._valid_fixed
        return dataset_train, dataset_valid

    def _fixed_draws(self, dataset):
        """At most ``max_valid_windows`` items of ``dataset``, each drawn once, seeded."""
        check_int("max_valid_windows", self.max_valid_windows, 1)
        rng = np.random.default_rng(0)
        keep = np.arange(len(dataset))
        if len(keep) > self.max_valid_windows:
            keep = np.sort(rng.choice(keep, self.max_valid_windows, replace=False))
        base, indices = dataset, keep
        if isinstance(dataset, Subset):
            base, indices = dataset.dataset, np.asarray(dataset.indices)[keep]
        if isinstance(base, SingleChannelWindows):
            return base.fixed_draws(indices, seed=0)
        X = torch.stack([torch.as_tensor(base[int(i)][0]) for i in indices])
        return TensorDataset(X, torch.zeros(len(X)))

    def validation_step(self, batch, **fit_params):
        """Evaluate on draws from the validation generator: the same patches and masks
        every pass, made outside the (possibly compiled) module and passed to it as
        tensors."""
        generator = getattr(self, "valid_generator_", None)
        if generator is not None and "draws" not in fit_params:
            X = batch[0] if isinstance(batch, tuple | list) else batch
            fit_params["draws"] = self.pretext_.draw(len(X), self.device, generator)
        self._mark_step()
        return super().validation_step(batch, **fit_params)
