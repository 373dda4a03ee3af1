"""Evaluation metrics of the paper, computed with torchmetrics (paper section 2.5).

Each function takes labels coded ``0..n_classes-1``; :func:`make_scorer` turns one into
a scikit-learn scorer for ``cross_val_score(..., scoring=...)``.
"""

from __future__ import annotations

import numpy as np
import torch
from torchmetrics.functional.classification import (
    binary_auroc,
    multiclass_accuracy,
    multiclass_cohen_kappa,
    multiclass_f1_score,
)

from ._checks import check_option


def _labels(y_true, y_pred, n_classes):
    y_true = torch.as_tensor(np.asarray(y_true), dtype=torch.long)
    y_pred = torch.as_tensor(np.asarray(y_pred), dtype=torch.long)
    if n_classes is None:
        n_classes = int(max(y_true.max(), y_pred.max()).item()) + 1
    return y_true, y_pred, max(int(n_classes), 2)


def balanced_accuracy(y_true, y_pred, n_classes=None):
    """Mean recall over the classes present in ``y_true`` (macro recall)."""
    y_true, y_pred, k = _labels(y_true, y_pred, n_classes)
    present = torch.bincount(y_true, minlength=k) > 0
    recall = multiclass_accuracy(y_pred, y_true, num_classes=k, average=None)
    return float(recall[present].mean())


def cohen_kappa(y_true, y_pred, n_classes=None):
    """Cohen's kappa."""
    y_true, y_pred, k = _labels(y_true, y_pred, n_classes)
    return float(multiclass_cohen_kappa(y_pred, y_true, num_classes=k))


def f1_macro(y_true, y_pred, n_classes=None):
    """F1 score averaged over the classes."""
    y_true, y_pred, k = _labels(y_true, y_pred, n_classes)
    return float(multiclass_f1_score(y_pred, y_true, num_classes=k, average="macro"))


def auroc(y_true, proba):
    """Area under the ROC curve for two classes; ``proba`` is (n, 2) or P(class 1)."""
    proba = np.asarray(proba, dtype=np.float32)
    if proba.ndim == 2:
        if proba.shape[1] != 2:
            raise ValueError(f"auroc needs two classes, but 'proba' has {proba.shape[1]} columns.")
        proba = proba[:, 1]
    target = torch.as_tensor(np.asarray(y_true), dtype=torch.long)
    return float(binary_auroc(torch.from_numpy(proba), target))


_SCORERS = {
    "balanced_accuracy": (balanced_accuracy, "predict"),
    "kappa": (cohen_kappa, "predict"),
    "f1_macro": (f1_macro, "predict"),
    "auroc": (auroc, "predict_proba"),
}


def make_scorer(name):
    """scikit-learn scorer from one of 'balanced_accuracy', 'kappa', 'f1_macro', 'auroc'.

    The estimator's labels are mapped to ``0..n_classes-1`` through its ``classes_``.
    """
    check_option("name", name, tuple(_SCORERS))
    fn, method = _SCORERS[name]

    def score(estimator, X, y):
        classes = estimator.classes_
        y_codes = np.searchsorted(classes, np.asarray(y))
        if method == "predict_proba":
            return fn(y_codes, estimator.predict_proba(X))
        y_pred = np.searchsorted(classes, estimator.predict(X))
        return fn(y_codes, y_pred, n_classes=len(classes))

    score.__name__ = f"{name}_scorer"
    return score


def scores(y_true, proba, n_classes):
    """Every metric of the paper for coded labels and class probabilities (n, n_classes)."""
    y_pred = np.asarray(proba).argmax(axis=1)
    out = {
        "balanced_accuracy": balanced_accuracy(y_true, y_pred, n_classes),
        "kappa": cohen_kappa(y_true, y_pred, n_classes),
        "f1_macro": f1_macro(y_true, y_pred, n_classes),
    }
    if n_classes == 2:
        out["auroc"] = auroc(y_true, proba)
    return out
