"""The fine-tuner's cross-entropy class weights, by class frequency."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils.class_weight import compute_class_weight


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
