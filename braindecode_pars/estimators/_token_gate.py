"""``PARSFineTuner(token_gate="auto")``: whether the encoder's token enters the model,
decided on held-out labelled windows inside ``fit``.

A scalar gate trained by Adam opens by about the learning rate a step whatever its
gradient, so how far it opens follows the number of steps, not what the token adds.
``"auto"`` therefore does not let training decide: it fits the model twice on part of
the training windows, once with the gate trainable (``token_gate=True``) and once with
the token path removed (``token_gate="closed"``, the front end alone), scores both on
the rest, and keeps the token path only when the held-out windows say it helps
(:func:`gate_evidence`); ``fit`` then trains on all its windows with the choice.
"""

from __future__ import annotations

import contextlib
import copy
import logging

import numpy as np
from scipy.stats import binomtest
from sklearn.base import clone
from sklearn.metrics import balanced_accuracy_score

from braindecode_pars._util.logs import PACKAGE_LOGGER, plural
from braindecode_pars._util.seeding import isolated_random_state
from braindecode_pars.estimators._validation import group_split

logger = logging.getLogger(__name__)


#: Values of ``PARSFineTuner(token_gate=...)`` (``"auto"``: :func:`choose_token_gate`).
TOKEN_GATES = ("auto", True, False, "closed")

#: The share of the training windows (or groups) held out to decide ``"auto"``.
HELD_OUT_SHARE = 1 / 3

#: The one-sided level of the sign test that opens the gate (:func:`gate_evidence`).
EVIDENCE_LEVEL = 0.05


def inner_split(codes, groups, seed):
    """Inner training and held-out indices for the decision, and how they were cut.

    With two groups or more (subjects, sessions, blocks), about a third of the groups
    (at least one) are held out whole, drawn as the validation split draws them (a draw
    whose two parts hold every class preferred). Otherwise, or when no draw holds every
    class on both sides, a contiguous block of time per class: the last third (at least
    one window) of each class's windows in the order given.

    Parameters
    ----------
    codes : ndarray of int, shape (n_windows,)
        The class code of each training window.
    groups : ndarray, shape (n_windows,) | None
        The group of each window.
    seed : int
        The draw of the held-out groups.

    Returns
    -------
    split : (ndarray, ndarray, str) | None
        Inner training indices, held-out indices and ``"groups"`` or ``"time blocks"``;
        None when a class has fewer than two windows (no held-out window of each class
        can be spared).
    """
    classes = np.unique(codes)
    if groups is not None and len(np.unique(groups)) >= 2:
        train, held, _ = group_split(codes, groups, 2, HELD_OUT_SHARE, seed)
        if len(np.unique(codes[held])) == len(classes) == len(np.unique(codes[train])):
            return train, held, "groups"
    held = []
    for c in classes:
        members = np.flatnonzero(codes == c)
        if len(members) < 2:
            return None
        n_held = max(1, int(len(members) * HELD_OUT_SHARE))
        held.append(members[-n_held:])
    held = np.sort(np.concatenate(held))
    return np.setdiff1d(np.arange(len(codes)), held), held, "time blocks"


def gate_evidence(y, pred_open, pred_closed, level=EVIDENCE_LEVEL):
    """Whether held-out windows show that the token path helps.

    The open model must score a higher balanced accuracy than the closed one, and the
    windows that only it classifies right must outnumber those that only the closed one
    does beyond chance: a one-sided exact sign test (McNemar's) on the windows where the
    two disagree, at ``level``. Ties, and gains a few windows could make by chance, keep
    the gate closed.

    Parameters
    ----------
    y, pred_open, pred_closed : array-like, shape (n_held_out,)
        The held-out labels and the two models' predictions.
    level : float
        The sign test's level.

    Returns
    -------
    open : bool
    evidence : dict
        ``open`` and ``closed`` (held-out balanced accuracies), ``only_open`` and
        ``only_closed`` (windows only that model got right), ``p`` (the sign test's
        one-sided p-value) and ``n_held_out``.
    """
    y, pred_open, pred_closed = map(np.asarray, (y, pred_open, pred_closed))
    right_open, right_closed = pred_open == y, pred_closed == y
    only_open = int(np.sum(right_open & ~right_closed))
    only_closed = int(np.sum(~right_open & right_closed))
    n = only_open + only_closed
    p = binomtest(only_open, n, 0.5, alternative="greater").pvalue if n else 1.0
    evidence = dict(
        open=float(balanced_accuracy_score(y, pred_open)),
        closed=float(balanced_accuracy_score(y, pred_closed)),
        only_open=only_open,
        only_closed=only_closed,
        p=float(p),
        n_held_out=len(y),
    )
    return bool(evidence["open"] > evidence["closed"] and p <= level), evidence


@contextlib.contextmanager
def _quiet_inner_fits():
    """The package's INFO messages left out for the duration (the inner fits' own
    lines: which encoder, the first epoch's time), its warnings kept."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def _stopping_on_training(callbacks):
    """Copies of the user's early stopping on a training score (skorch's ``EarlyStopping``
    monitoring ``train_*``), which bounds the inner fits as it bounds the fit (with
    ``max_epochs`` set high and such a stop, an inner fit without it would not end); the
    other callbacks are left out (the inner fits hold out no validation windows, and
    must not checkpoint or interrupt). None when there is none."""
    from skorch.callbacks import EarlyStopping

    kept = []
    for item in callbacks or ():
        callback = item[1] if isinstance(item, tuple) else item
        monitor = getattr(callback, "monitor", "")
        if isinstance(callback, EarlyStopping) and str(monitor).startswith("train"):
            kept.append(copy.deepcopy(item))
    return kept or None


def choose_token_gate(net, X, y, groups, codes, encoder):
    """``"auto"``'s decision: True (the gate trainable) or ``"closed"``, and its evidence.

    Two copies of ``net`` (``token_gate=True`` and ``"closed"``, the same seed, no
    validation split, none of ``callbacks`` but an early stop on a training score,
    silent) are fitted on the inner training
    part of :func:`inner_split` and score the held-out part; :func:`gate_evidence`
    decides.
    The inner fits say nothing at INFO (one line says what was decided).

    Parameters
    ----------
    net : PARSFineTuner
        The fine-tuner being fitted (after its ``seed_`` and ``sfreq_`` are set).
    X : ndarray, shape (n_windows, n_chans, n_times)
        The training windows at the module's rate (``net.sfreq_``), before alignment.
    y, groups : ndarray, shape (n_windows,) | None
        Their labels and groups.
    codes : ndarray of int, shape (n_windows,)
        Their class codes.
    encoder : PatchEncoder | None
        The encoder ``fit`` loaded (copied by each inner fit), or None (a new one).

    Returns
    -------
    choice : True | "closed"
    evidence : dict | None
        :func:`gate_evidence`'s, plus ``held_out`` (how the held-out part was cut); None
        when no window could be held out.
    """
    split = inner_split(codes, groups, net.seed_)
    if split is None:
        logger.info(
            "token_gate='auto': too few windows of a class to hold any out; the token "
            "path stays closed (the front end alone)."
        )
        return "closed", None
    train, held, how = split
    predictions = {}
    for gate in (True, "closed"):
        inner = clone(net).set_params(
            token_gate=gate, encoder=encoder, sfreq=net.sfreq_, min_valid_groups=None,
            checkpoint_dir=None, verbose=0, random_state=net.seed_,
            callbacks=_stopping_on_training(net.callbacks),
        )  # fmt: skip
        part = None if groups is None else groups[train]
        # the global generators as they were (a loader's iterator draws its seed there)
        with _quiet_inner_fits(), isolated_random_state(net.seed_, net.device):
            inner.fit(X[train], y[train], groups=part)
            held_groups = None if groups is None else groups[held]
            predictions[gate] = inner.predict(X[held], groups=held_groups)
    opened, evidence = gate_evidence(y[held], predictions[True], predictions["closed"])
    evidence["held_out"] = how
    logger.info(
        "token_gate='auto': the token path %s: on %s held out (%s) the gate trained from 0 "
        "scored %.3f and the front end alone %.3f; %d window(s) right only with the token, "
        "%d only without (sign test p = %.3g, opens at <= %g).",
        "opens" if opened else "stays closed", plural(len(held), "window"), how,
        evidence["open"], evidence["closed"], evidence["only_open"], evidence["only_closed"],
        evidence["p"], EVIDENCE_LEVEL,
    )  # fmt: skip
    return (True if opened else "closed"), evidence
