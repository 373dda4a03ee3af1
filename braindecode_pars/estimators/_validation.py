"""The fine-tuner's validation: its parameters' check, the split that holds whole
groups out, and the balanced accuracy scored on the validation items."""

from __future__ import annotations

import logging
import numbers

import numpy as np
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import GroupShuffleSplit

from braindecode_pars._util.checks import check_int, check_none_or_number, check_option, check_range
from braindecode_pars.estimators._coded_windows import _item_targets

logger = logging.getLogger(__name__)

#: Values of ``PARSFineTuner(valid_monitor=...)`` and the history key each reads.
VALID_MONITORS = {"loss": "valid_loss_best", "balanced_accuracy": "valid_bal_acc_best"}


def check_validation(min_valid_groups, valid_fraction, valid_monitor):
    """Check ``PARSFineTuner``'s validation parameters (clear errors naming each)."""
    check_option("valid_monitor", valid_monitor, VALID_MONITORS)
    check_range("valid_fraction", valid_fraction, 0, 1, low_open=True, high_open=True)
    allowed = "None (no validation split from groups) and an int >= 2"
    if check_none_or_number("min_valid_groups", min_valid_groups, numbers.Integral, allowed):
        check_int("min_valid_groups", min_valid_groups, 2)


def _valid_balanced_accuracy(net, dataset, y=None):
    """Balanced accuracy of the items of ``dataset`` (each crop is an item)."""
    from braindecode import (
        EEGClassifier,  # the net's own prediction, without PARSClassifier's reading of X
    )

    proba = EEGClassifier.predict_proba(net, dataset)
    return balanced_accuracy_score(_item_targets(dataset), proba.argmax(axis=1))


def group_split(codes, groups, min_valid_groups, valid_fraction, seed):
    """Training and validation indices of coded labels, and the rule that applied.

    With ``min_valid_groups`` set and at least that many distinct ``groups``, about
    ``valid_fraction`` of the groups are held out (a draw whose two parts hold every
    class is preferred); else no split.

    Returns
    -------
    train : ndarray
    valid : ndarray | None
    rule : {"groups", "none"}
    """
    n = len(codes)
    n_groups = 0 if groups is None else len(np.unique(groups))
    if min_valid_groups is None or n_groups < min_valid_groups:
        return np.arange(n), None, "none"
    n_valid = max(1, int(round(valid_fraction * n_groups)))
    rng = np.random.default_rng(seed)
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
