"""Evaluation metrics of the paper (section 2.5), on scikit-learn's implementations.

The paper computes them with TorchMetrics; the package uses scikit-learn's, the one
metric stack of its users' model selection (the two agree: balanced accuracy is the
macro recall over the classes present, kappa is Cohen's, F1 is macro-averaged).
:func:`make_scorer` gives scikit-learn scorers for ``cross_val_score(..., scoring=)``.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import (
    balanced_accuracy_score,
    cohen_kappa_score,
    f1_score,
    get_scorer,
    roc_auc_score,
)

from ._checks import check_option


def balanced_accuracy(y_true, y_pred, n_classes=None):
    """Mean recall over the classes present in ``y_true`` (macro recall).

    ``n_classes`` is accepted for symmetry with :func:`scores` and not needed.
    """
    return float(balanced_accuracy_score(y_true, y_pred))


def cohen_kappa(y_true, y_pred, n_classes=None):
    """Cohen's kappa."""
    return float(cohen_kappa_score(y_true, y_pred))


def f1_macro(y_true, y_pred, n_classes=None):
    """F1 score averaged over the classes (those of ``range(n_classes)`` when given)."""
    labels = None if n_classes is None else np.arange(n_classes)
    return float(f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0))


def auroc(y_true, proba):
    """Area under the ROC curve for two classes; ``proba`` is (n, 2) or P(class 1)."""
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim == 2:
        if proba.shape[1] != 2:
            raise ValueError(f"auroc needs two classes, but 'proba' has {proba.shape[1]} columns.")
        proba = proba[:, 1]
    return float(roc_auc_score(np.asarray(y_true), proba))


#: Names :func:`make_scorer` accepts, and scikit-learn's scorer of each.
SCORERS = {
    "balanced_accuracy": "balanced_accuracy",
    "kappa": "cohen_kappa",
    "f1_macro": "f1_macro",
    "auroc": "roc_auc",
}


def make_scorer(name):
    """scikit-learn scorer from one of 'balanced_accuracy', 'kappa', 'f1_macro', 'auroc'.

    It scores the estimator's own labels (no coding to ``0..n_classes-1``), so a label
    of the test fold that the training part lacked counts as a miss, never as another
    class.
    """
    check_option("name", name, tuple(SCORERS))
    if name == "kappa":
        from sklearn.metrics import make_scorer as sk_make_scorer

        return sk_make_scorer(cohen_kappa_score)
    return get_scorer(SCORERS[name])


def scores(y_true, proba, n_classes):
    """Every metric of the paper for coded labels and class probabilities (n, n_classes)."""
    y_pred = np.asarray(proba).argmax(axis=1)
    out = {
        "balanced_accuracy": balanced_accuracy(y_true, y_pred),
        "kappa": cohen_kappa(y_true, y_pred),
        "f1_macro": f1_macro(y_true, y_pred, n_classes),
    }
    if n_classes == 2:
        out["auroc"] = auroc(y_true, proba)
    return out
