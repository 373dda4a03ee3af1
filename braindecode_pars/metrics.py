"""Evaluation metrics of the paper (section 2.5), on scikit-learn's implementations.

The paper computes them with TorchMetrics; the package uses scikit-learn's, the one
metric stack of its users' model selection (the two agree: balanced accuracy is the
macro recall over the classes present, kappa is Cohen's, F1 is macro-averaged).
:func:`make_scorer` gives scikit-learn scorers for ``cross_val_score(..., scoring=)``;
:class:`GroupScorer` scores subjects rather than windows (one vote per subject), and
:func:`group_cross_val_score` cross-validates with it, the groups routed and a scorer's
error a hard stop.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.metrics import (
    balanced_accuracy_score,
    cohen_kappa_score,
    f1_score,
    get_scorer,
    roc_auc_score,
)

from braindecode_pars._util.checks import check_option
from braindecode_pars._util.logs import warn_once


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
_SCORERS = {
    "balanced_accuracy": "balanced_accuracy",
    "kappa": "cohen_kappa",
    "f1_macro": "f1_macro",
    "auroc": "roc_auc",
}


def _labels_of_windows(X):
    """The true labels of windows for a scorer given none: the ``target`` metadata of
    braindecode windows (or of a ``Subset`` or ``SliceDataset`` of them), read without
    their signals, else the labels :func:`~braindecode_pars.io.windows.read_windows`
    reads (lists of window items, ``mne.Epochs``)."""
    from braindecode_pars.io.windows import read_windows, window_metadata

    labels = window_metadata(X, "target")
    if labels is None and not isinstance(X, np.ndarray):
        labels = read_windows(X, name="X").y
    if labels is None:
        raise ValueError(
            "'y_true' is None and 'X' carries no labels a scorer can read: pass 'y', one "
            "label per window, or braindecode windows (or a SliceDataset of them) whose "
            "metadata holds a 'target' column."
        )
    return labels


class GroupsNotRoutedError(ValueError):
    """:class:`GroupScorer` called without the groups of the windows it scores.

    A ``ValueError``, as scikit-learn's own routing error (``UnsetMetadataPassedError``):
    ``except ValueError`` and ``except Exception`` catch it. Under scikit-learn's
    cross-validation it follows ``error_score``: with the default (``np.nan``) the fold
    scores ``nan`` and a "Scoring failed" warning carries this message; with
    ``error_score="raise"`` it stops the call (:func:`group_cross_val_score` passes
    it).
    """


def _warn_one_label(y_true, what):
    """Warn that the ``what`` scored (windows, groups) hold one label only: their balanced
    accuracy is then 0 or 1, the accuracy of one class; name the splitter that keeps
    every label in every test fold."""
    labels = np.unique(np.asarray(y_true))
    if len(labels) != 1:
        return
    warn_once(
        f"The {what} scored hold one label only: their balanced accuracy is "
        "0 or 1, the accuracy of that label alone. With a label of the subject (patient "
        "against control), leaving one subject out (LeaveOneGroupOut) puts one label in "
        "every test fold: split with scikit-learn's StratifiedGroupKFold, which keeps "
        "every label in every test fold and each subject in one.",
        UserWarning,
        stacklevel=3,
    )


class _WindowsScorer:
    """A scikit-learn scorer whose true labels default to those the windows carry: in
    ``cross_val_score(clf, SliceDataset(windows), scoring=...)`` without ``y``,
    scikit-learn calls the scorer without labels."""

    def __init__(self, name, scorer):
        self.name, self.scorer = name, scorer

    def __call__(self, estimator, X, y_true=None, **kwargs):
        from braindecode_pars.io.windows import labels_of

        y_true = _labels_of_windows(X) if y_true is None else labels_of(y_true)
        if self.name in ("balanced_accuracy", "auroc"):
            _warn_one_label(y_true, "windows")
        return self.scorer(estimator, X, y_true, **kwargs)

    def get_metadata_routing(self):
        return self.scorer.get_metadata_routing()

    def __repr__(self):
        return f"make_scorer({self.name!r})"


def make_scorer(name):
    """scikit-learn scorer from one of 'balanced_accuracy', 'kappa', 'f1_macro', 'auroc'.

    It scores the estimator's own labels (no coding to ``0..n_classes-1``), so a label
    of the test fold that the training part lacked counts as a miss, never as another
    class. Called without true labels (``cross_val_score`` without ``y``), it reads those
    the windows carry: the ``target`` metadata of braindecode windows or of a skorch
    ``SliceDataset`` of them.
    """
    check_option("name", name, tuple(_SCORERS))
    if name == "kappa":
        from sklearn.metrics import make_scorer as sk_make_scorer

        return _WindowsScorer(name, sk_make_scorer(cohen_kappa_score))
    return _WindowsScorer(name, get_scorer(_SCORERS[name]))


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


class GroupScorer:
    """A scorer of subjects, not windows: each group's windows vote for one label.

    For a question whose unit is the subject (patient against control), what counts
    is one decision per subject. Each group's label is decided from its windows,
    ``vote="mean_proba"``: the class of highest mean probability (``predict_proba``);
    ``vote="majority"``: the class predicted most often (``predict``; ties go to the
    class first in ``classes_``); the metric is then computed over groups, each
    group's true label being its windows' label (the same for all of them: a mixed
    group is refused).

    Used as ``scoring=`` with the groups routed to it by scikit-learn's metadata
    routing, and ``error_score="raise"`` so that a scorer's error stops the call rather
    than scoring ``nan``::

        with sklearn.config_context(enable_metadata_routing=True):
            cross_val_score(clf, X, y, cv=StratifiedGroupKFold(5), scoring=GroupScorer(),
                            params={"groups": subjects}, error_score="raise")

    or, the three in one call, :func:`group_cross_val_score`::

        group_cross_val_score(clf, X, y, groups=subjects, cv=StratifiedGroupKFold(5))

    (each test fold must hold subjects of each class: ``StratifiedGroupKFold``, not
    ``LeaveOneGroupOut``, whose single held-out subject gives a score of one label, which
    the scorer warns of; under routing the splitter gets ``groups`` from ``params`` too,
    and the estimator must say whether its ``fit`` takes them:
    ``clf.set_fit_request(groups=True)``, which the package's estimators ask by
    default). Called directly: ``GroupScorer()(clf, X, y, groups=subjects)``.

    Without the groups (metadata routing off, or no ``params={"groups": ...}``) of
    windows that do not carry a ``subject``, it raises :class:`GroupsNotRoutedError`, a
    ``ValueError``: scikit-learn's cross-validation scores the fold ``nan`` with a
    warning that carries its message (``error_score=np.nan``, the default), or stops
    with it (``error_score="raise"``).

    Parameters
    ----------
    metric : {"balanced_accuracy", "accuracy"}
        The score over groups.
    vote : {"mean_proba", "majority"}
    """

    def __init__(self, metric="balanced_accuracy", vote="mean_proba"):
        check_option("metric", metric, ("balanced_accuracy", "accuracy"))
        check_option("vote", vote, ("mean_proba", "majority"))
        self.metric = metric
        self.vote = vote

    def __repr__(self):
        return f"GroupScorer(metric={self.metric!r}, vote={self.vote!r})"

    def __call__(self, estimator, X, y_true=None, groups=None, sample_weight=None):
        """The score of ``estimator`` over the groups of ``X``; ``y_true`` and ``groups``
        default to the ``target`` and ``subject`` metadata of braindecode windows (and of
        a ``Subset`` or skorch ``SliceDataset`` of them)."""
        from braindecode_pars.io.windows import labels_of, window_metadata

        y_true = _labels_of_windows(X) if y_true is None else labels_of(y_true)
        if groups is None:
            groups = window_metadata(X, "subject")
        if groups is None:
            from sklearn import get_config

            routing = get_config()["enable_metadata_routing"]
            raise GroupsNotRoutedError(
                "GroupScorer needs 'groups', one per window, and got none: route them "
                "(sklearn.set_config(enable_metadata_routing=True) and params={'groups': g} "
                "in cross_val_score"
                + ("; metadata routing is off now" if not routing else "")
                + "), pass groups= when calling the scorer, or score braindecode windows "
                "whose metadata holds a 'subject' column. "
                "braindecode_pars.metrics.group_cross_val_score(clf, X, y, groups=g, cv=...) "
                "routes them and passes error_score='raise', so that an error of the scorer "
                "stops the cross-validation (cross_val_score's default, error_score=nan, "
                "scores the fold nan with this message as a warning)."
            )
        y_true, groups = np.asarray(y_true), np.asarray(groups)
        if groups.shape != y_true.shape:
            raise ValueError(
                f"'groups' must give one group per window: {len(y_true)} labels, "
                f"{len(groups)} groups."
            )
        classes = np.asarray(estimator.classes_)
        if self.vote == "mean_proba":
            decisions = np.asarray(estimator.predict_proba(X))
        else:
            predicted = np.asarray(estimator.predict(X))
            decisions = (predicted[:, None] == classes[None, :]).astype(float)
        truth, decided = [], []
        for group in np.unique(groups):
            rows = groups == group
            labels = np.unique(y_true[rows])
            if len(labels) != 1:
                raise ValueError(
                    f"Group {group!r} holds windows of {len(labels)} labels "
                    f"({labels.tolist()}): a group score needs one label per group (a trait "
                    "of the subject, as patient against control)."
                )
            truth.append(labels[0])
            decided.append(classes[decisions[rows].mean(axis=0).argmax()])
        if self.metric == "accuracy":
            return float(np.mean(np.asarray(truth) == np.asarray(decided)))
        _warn_one_label(truth, "groups")
        return float(balanced_accuracy_score(truth, decided))

    def get_metadata_routing(self):
        """The scorer asks for ``groups`` (scikit-learn's metadata routing)."""
        from sklearn.utils.metadata_routing import MetadataRequest

        request = MetadataRequest(owner=type(self).__name__)
        request.score.add_request(param="groups", alias=True)
        return request


def group_cross_val_score(
    estimator, X, y=None, *, groups=None, cv, scoring=None, n_jobs=None, verbose=0,
    error_score="raise",
):  # fmt: skip
    """scikit-learn's ``cross_val_score`` over groups (subjects), the three settings it
    takes for that in one call.

    Inside ``sklearn.config_context(enable_metadata_routing=True)`` it calls
    ``cross_val_score(estimator, X, y, cv=cv, scoring=scoring,
    params={"groups": groups}, error_score=error_score)``: the splitter, the
    estimator's ``fit`` (where it asks for them, as the package's estimators do) and
    the scorer get the groups, and an error of the scorer (a
    :class:`GroupsNotRoutedError`, a mixed group) stops the call with its message
    rather than scoring ``nan``.

    Parameters
    ----------
    estimator : estimator
        Any scikit-learn classifier. One whose ``fit`` takes ``groups`` must ask for
        them (``set_fit_request(groups=True)``; scikit-learn names it otherwise).
    X : array-like | braindecode windows | skorch SliceDataset
    y : array-like | None
        None: the labels the windows carry (the scorer reads them).
    groups : array-like | None
        The group (subject) of every window; None: the ``subject`` metadata of
        braindecode windows (or of a ``SliceDataset`` of them).
    cv : splitter | iterable of (train, test)
        A splitter that keeps each group on one side: ``StratifiedGroupKFold`` for a
        label of each subject (every label in every test fold), ``GroupKFold``,
        ``LeaveOneGroupOut`` for a label within subjects. An int (scikit-learn's
        ``KFold``, which splits groups) is refused.
    scoring : scorer | str | None
        None: :class:`GroupScorer` (one decision per group).
    n_jobs, verbose
        As ``cross_val_score``'s.
    error_score : "raise" | float
        ``"raise"`` (the default here; ``cross_val_score``'s is ``nan``): a fold whose
        fit or score fails stops the call.

    Returns
    -------
    scores : ndarray, shape (n_splits,)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.model_selection import StratifiedGroupKFold
    >>> subjects = np.repeat(np.arange(6), 5)
    >>> y = np.where(subjects % 2, "patient", "control")
    >>> X = (subjects % 2 + np.random.default_rng(0).normal(0, 1, 30))[:, None]
    >>> scores = group_cross_val_score(
    ...     LogisticRegression(), X, y, groups=subjects, cv=StratifiedGroupKFold(3))
    >>> scores.shape
    (3,)
    """
    import sklearn
    from sklearn.model_selection import cross_val_score

    if cv is None or isinstance(cv, numbers.Integral):
        raise ValueError(
            "Invalid value for the 'cv' parameter. Allowed values are a splitter that keeps "
            "each group on one side (StratifiedGroupKFold, GroupKFold, LeaveOneGroupOut) or "
            f"an iterable of (train, test) indices, but got {cv!r} instead (an int or None "
            "is scikit-learn's KFold, which splits the groups)."
        )
    if groups is None:
        from braindecode_pars.io.windows import window_metadata

        groups = window_metadata(X, "subject")
        if groups is None:
            raise ValueError(
                "'groups' is None and 'X' carries no groups: pass 'groups', one per "
                "window, or braindecode windows (or a SliceDataset of them) whose "
                "metadata holds a 'subject' column."
            )
    with sklearn.config_context(enable_metadata_routing=True):
        return cross_val_score(
            estimator, X, y, cv=cv, scoring=GroupScorer() if scoring is None else scoring,
            params={"groups": groups}, n_jobs=n_jobs, verbose=verbose,
            error_score=error_score,
        )  # fmt: skip
