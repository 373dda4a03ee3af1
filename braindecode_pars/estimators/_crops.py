"""Training on crops of the windows: the crop length, where the crops start, and the
datasets of random (training) and fixed (validation, prediction) crops."""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from braindecode_pars._util.checks import InvalidParameterError, check_none_or_number, check_range


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
    ``PARSFineTuner.fit``, seeded by its ``random_state``), so each epoch sees other crops of the
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
