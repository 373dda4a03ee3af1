"""The fine-tuner's dataset: windows with integer class codes, and the class code of
each item of such a dataset or of its crops."""

from __future__ import annotations

import numpy as np
import torch

from braindecode_pars.estimators._crops import FixedCrops, RandomCrops


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
