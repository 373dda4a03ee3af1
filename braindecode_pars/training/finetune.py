"""Fine-tuning as the paper does it (section 2.5), through braindecode's EEGClassifier."""

from __future__ import annotations

import logging

import numpy as np
import torch
from braindecode import EEGClassifier
from braindecode.augmentation import (
    AugmentedDataLoader,
    ChannelsDropout,
    FTSurrogate,
    SmoothTimeMask,
)
from sklearn.utils import check_random_state
from skorch.callbacks import Checkpoint, EpochScoring, ProgressBar
from skorch.dataset import ValidSplit
from skorch.helper import predefined_split

from ..metrics import balanced_accuracy

logger = logging.getLogger(__name__)


def class_weights(y, n_classes):
    """Cross-entropy weights by class frequency: ``n / (n_classes * count_c)``.

    A class absent from ``y`` gets weight 1: training never sees it, and a
    validation batch holding only that class (crops of one window share a batch)
    keeps a finite loss, where weight 0 would give 0 / 0.
    """
    counts = np.bincount(np.asarray(y, dtype=np.int64), minlength=n_classes).astype(np.float64)
    weights = np.where(counts > 0, len(y) / (n_classes * np.maximum(counts, 1)), 1.0)
    return torch.as_tensor(weights, dtype=torch.float32)


#: Names ``PARSClassifier(augmentation=...)`` accepts for a preset.
AUGMENTATION_PRESETS = ("standard",)


def standard_augmentation(sfreq, probability=0.5, random_state=None):
    """braindecode augmentations that keep the label of most EEG tasks and ignore the unit.

    Each applied to a batch with ``probability``: ``FTSurrogate`` (random Fourier
    phases: the spectrum kept, the waveform new), ``ChannelsDropout`` (20 % of the
    channels zeroed) and ``SmoothTimeMask`` (one second masked). None of them adds a
    fixed amount of noise, so volts and microvolts are augmented alike (the
    encoder's instance normalisation ignores the unit too). ``random_state`` seeds
    their draws (None: numpy's global generator, as braindecode does).
    """
    rng = check_random_state(random_state)  # one stream shared by the three
    return [
        FTSurrogate(probability, random_state=rng),
        ChannelsDropout(probability, p_drop=0.2, random_state=rng),
        SmoothTimeMask(probability, mask_len_samples=max(1, int(round(sfreq))), random_state=rng),
    ]


def _valid_balanced_accuracy(net, X, y):
    return balanced_accuracy(np.asarray(y), net.predict(X))


def make_finetune_net(
    module,
    module_kwargs,
    y_train,
    n_classes,
    checkpoint_dir,
    valid_dataset=None,
    max_epochs=200,
    batch_size=64,
    lr=1e-4,
    weight_decay=1e-4,
    valid_fraction=0.2,
    random_state=None,
    device="cpu",
    progress_bar=False,
    callbacks=None,
    transforms=None,
    validation=True,
    optimizer_param_groups=None,
):
    """braindecode ``EEGClassifier`` with the paper's fine-tuning settings.

    ``module`` is a model class and ``module_kwargs`` its arguments (given to the net
    as ``module__<name>``, so that skorch builds the model at ``initialize``).

    Cross-entropy weighted by class frequency (:func:`class_weights`), AdamW with the
    pretraining's learning rate and weight decay (1e-4 each), a validation set
    (``valid_dataset``, or a stratified ``valid_fraction`` of the training data), and
    the parameters of the epoch with the lowest validation loss restored at the end
    of training (``Checkpoint(load_best=True)`` in ``checkpoint_dir``).
    The validation balanced accuracy is recorded as ``valid_bal_acc`` each epoch.
    ``transforms`` (braindecode augmentations) are applied to training batches only,
    through braindecode's ``AugmentedDataLoader``. ``validation=False`` trains on
    all of the given data for ``max_epochs`` and keeps the last epoch (no split, no
    best-epoch restore). ``optimizer_param_groups`` is skorch's
    ``optimizer__param_groups`` (e.g. ``[("encoder.*", {"lr": 1e-5})]``).
    """
    scoring = EpochScoring(
        _valid_balanced_accuracy, name="valid_bal_acc", lower_is_better=False, on_train=False
    )
    best = Checkpoint(
        monitor="valid_loss_best",
        dirname=str(checkpoint_dir),
        f_params="best_params.pt",
        f_optimizer=None,
        f_criterion=None,
        f_history=None,
        load_best=True,
        sink=logger.debug,
    )
    cbs = [("valid_bal_acc", scoring), ("best_valid_loss", best)] if validation else []
    if progress_bar:
        cbs.append(("progress_bar", ProgressBar()))
    cbs += list(callbacks or [])
    augment = {}
    if transforms:
        augment = dict(
            iterator_train=AugmentedDataLoader, iterator_train__transforms=list(transforms)
        )
    return EEGClassifier(
        module,
        **{f"module__{k}": v for k, v in module_kwargs.items()},
        criterion=torch.nn.CrossEntropyLoss,
        criterion__weight=class_weights(y_train, n_classes),
        optimizer=torch.optim.AdamW,
        optimizer__weight_decay=weight_decay,
        lr=lr,
        max_epochs=max_epochs,
        batch_size=batch_size,
        train_split=(
            None
            if not validation
            else predefined_split(valid_dataset)
            if valid_dataset is not None
            else ValidSplit(valid_fraction, stratified=True, random_state=random_state)
        ),
        iterator_train__drop_last=False,
        callbacks=cbs,
        classes=list(range(n_classes)),
        device=device,
        verbose=0,
        **({"optimizer__param_groups": optimizer_param_groups} if optimizer_param_groups else {}),
        **augment,
    )


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

    Every read draws a new start from torch's global generator (seeded by
    ``PARSClassifier``'s ``random_state``), so each epoch sees other crops of the
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
