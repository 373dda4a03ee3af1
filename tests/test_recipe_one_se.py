"""PARSProbe(recipe="auto") claims only what holds (issue 76, item 6; issue 87, item 2):
the fixed recipe kept unless a candidate beats it by more than a standard error, then
the simplest of those within one standard error of their best, the encoder block's gain
with its spread over the inner folds, and the folds named as they ran. Each answer is
checked against a loop over the folds by hand."""

import logging

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut, StratifiedGroupKFold

from braindecode_pars import PARSProbe
from braindecode_pars.features.recipe import (
    ProbeRecipe,
    choose_recipe,
    compare_recipes,
    simplicity,
)

from ._learning import SEED, learned
from .test_probe_recipe import DEFAULT, LOGGER, SFREQ, _fixed, _projection_encoder, _subjects

pytestmark = pytest.mark.usefixtures("one_thread")


def _by_hand(recipe, encoder, X, y, groups):
    """The balanced accuracy of the fixed-recipe probe in each leave-one-group-out fold."""
    out = []
    for g in np.unique(groups):
        train, test = groups != g, groups == g
        probe = _fixed(recipe, encoder).fit(X[train], y[train])
        out.append(balanced_accuracy_score(y[test], probe.predict(X[test])))
    return np.array(out)


def _auto_candidates(fixed=DEFAULT):
    """What recipe="auto" compares: the fixed recipe (the incumbent) first, then the
    grid (simplest first) less the fixed recipe."""
    grid = ProbeRecipe().candidates()
    assert sorted(grid, key=simplicity) == grid
    return [fixed, *(r for r in grid if r != fixed)]


def _rule(fold_scores, candidates):
    """The rule written out on scores fold by fold: the challengers are the candidates
    whose mean gain over the incumbent (the first) exceeds its standard error; none: the
    incumbent; else the simplest challenger within one standard error of the best one."""
    gains = fold_scores - fold_scores[0]
    n = fold_scores.shape[1]
    challengers = [
        i for i in range(1, len(candidates))
        if gains[i].mean() > gains[i].std(ddof=1) / np.sqrt(n) + 1e-12
    ]  # fmt: skip
    if not challengers:
        return candidates[0]
    top = max(challengers, key=lambda i: fold_scores[i].mean())
    floor = fold_scores[top].mean() - fold_scores[top].std(ddof=1) / np.sqrt(n)
    within = [i for i in challengers if fold_scores[i].mean() >= floor - 1e-12]
    return candidates[min(within, key=lambda i: (simplicity(candidates[i]), i))]


def _comparison_line(caplog):
    (line,) = [r.getMessage() for r in caplog.records if "inner comparison" in r.getMessage()]
    return line


def test_an_encoder_block_that_helps_by_far_is_kept_and_its_gain_exceeds_its_spread(caplog):
    X, y, groups = _subjects("offset", seed=SEED)  # only the encoder's block sees the offset
    encoder = _projection_encoder()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        probe = PARSProbe(encoder, recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    scores, candidates = probe.recipe_scores_, _auto_candidates()
    assert list(scores.index) == [str(r) for r in candidates]
    folds = np.array([_by_hand(r, encoder, X, y, groups) for r in candidates])
    np.testing.assert_allclose(scores["mean"], folds.mean(axis=1))
    assert probe.recipe_.encoder and probe.recipe_ == _rule(folds, candidates)
    # the gain of the best recipes with and without the block, fold by fold
    means = scores["mean"].to_numpy()
    has = np.array([r.encoder for r in candidates])
    with_ = np.flatnonzero(has)[means[has].argmax()]
    without = np.flatnonzero(~has)[means[~has].argmax()]
    np.testing.assert_allclose(scores["sem"].iloc[with_], folds[with_].std(ddof=1) / 2)
    per_fold = 100 * (folds[with_] - folds[without])
    assert probe.encoder_gain_ == pytest.approx(per_fold.mean())
    assert probe.encoder_gain_std_ == pytest.approx(per_fold.std())
    learned(probe.encoder_gain_, above=30, what="encoder gain (points)")
    # encoder_gain_ > encoder_gain_std_: the gain less its spread over the folds, above 0
    spare = probe.encoder_gain_ - probe.encoder_gain_std_
    learned(spare, above=0, what="encoder gain less its spread (points)")
    line = _comparison_line(caplog)
    assert f"adds {per_fold.mean():+.1f} ± {per_fold.std():.1f} points" in line
    assert "more than one standard error: the inner folds tell recipes with and" in line
    assert f"best recipe: {candidates[means.argmax()]}, " in line
    assert line.endswith(f"fitted recipe {probe.recipe_}.")


def test_a_recipe_that_beats_the_fixed_one_only_within_noise_is_not_fitted():
    """The sleep staging of issue 87: the simplest recipe within one standard error of
    the best (band power, C=0.01) scored 7 points under the fixed recipe. A candidate
    replaces the fixed recipe (the incumbent, first) only when its gain over it, fold by
    fold, exceeds its standard error; then the simplest of those within one standard
    error of their best."""
    recipes = _auto_candidates()
    fixed, simple, best = 0, 1, len(recipes) - 1  # bandpower (C=0.01) is the simplest
    folds = np.full((len(recipes), 8), 0.50)
    folds[fixed] = [0.60, 0.62, 0.58, 0.61, 0.59, 0.60, 0.63, 0.57]
    folds[best] = folds[fixed] + 0.01 + np.array([0.25, -0.25] * 4)  # +1 point, spread 25
    folds[simple] = 0.53 + np.array([0.01, -0.01] * 4)  # 7 points under the fixed recipe
    scores = pd.DataFrame(
        {"mean": folds.mean(1), "sem": folds.std(1, ddof=1) / np.sqrt(8)},
        index=[str(r) for r in recipes],
    )
    assert choose_recipe(scores, recipes)[0] == simple  # the rule without an incumbent
    assert choose_recipe(scores, recipes, folds, incumbent=fixed) == (fixed, best)
    # a gain that exceeds its standard error makes a challenger, the simplest of them fitted
    folds[best] = folds[fixed] + 0.05 + np.array([0.01, -0.01] * 4)
    folds[2] = folds[fixed] + 0.045 + np.array([0.01, -0.01] * 4)
    scores["mean"], scores["sem"] = folds.mean(1), folds.std(1, ddof=1) / np.sqrt(8)
    assert choose_recipe(scores, recipes, folds, incumbent=fixed) == (2, best)
    assert _rule(folds, recipes) == recipes[2]


# -- the folds named as they ran -----------------------------------------------------------
def _features(n_groups, per_group=4, seed=0):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_groups), per_group)
    y = np.tile([0, 1], len(groups) // 2)
    features = {"bandpower": rng.standard_normal((len(y), 3)) + y[:, None]}
    return features, y, groups


@pytest.mark.parametrize(
    "cv, n_groups, expected",
    [
        (None, 4, "4 folds of LeaveOneGroupOut over 4 groups (1 group held out in each)"),
        (5, 23, "5 folds of GroupKFold over 23 groups (4-5 groups held out in each)"),
        (
            StratifiedGroupKFold(3),
            9,
            "3 folds of StratifiedGroupKFold over 9 groups (3 groups held out in each)",
        ),
    ],
)
def test_the_folds_are_named_as_they_ran(cv, n_groups, expected):
    features, y, groups = _features(n_groups)
    candidates = [ProbeRecipe(("bandpower",), C=1.0)]
    scores, folds = compare_recipes(candidates, features, y, groups, cv=cv, return_folds=True)
    splitter = {None: LeaveOneGroupOut(), 5: GroupKFold(5)}.get(cv, cv)
    held_out = [len(np.unique(groups[test])) for _, test in splitter.split(y[:, None], y, groups)]
    assert folds.held_out == tuple(held_out) and folds.n_groups == n_groups
    assert str(folds) == expected
    assert folds.scores.shape == (1, len(held_out)) and all(folds.scored)
    np.testing.assert_allclose(folds.scores.mean(axis=1), scores["mean"])


def test_a_probe_logs_its_group_folds_and_unscored_folds(caplog):
    features, y, groups = _features(23, seed=1)
    X = np.random.default_rng(2).standard_normal((len(y), 2, 100))
    X[:, 0] *= np.where(y == 1, 1.5, 1.0)[:, None]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        probe = PARSProbe(recipe="auto", inner_cv=5, sfreq=SFREQ).fit(X, y, groups)
    assert (
        probe.inner_folds_ == "5 folds of GroupKFold over 23 groups (4-5 groups held out in each)"
    )
    assert _comparison_line(caplog).startswith(
        f"recipe='auto', inner comparison over {probe.inner_folds_}: no encoder"
    )
    # one group holds class 1 alone: leaving it out leaves one class to train on
    caplog.clear()
    y3, groups3 = np.array([1] * 8 + [0] * 16), np.repeat(np.arange(3), 8)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        probe = PARSProbe(recipe="auto", sfreq=SFREQ).fit(X[:24], y3, groups3)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(
        "Nothing could be compared (the inner folds were 3 folds of LeaveOneGroupOut over 3 "
        "groups (1 group held out in each), 2 of them scored (the others left one class to "
        "train on), fewer than the 3 an inner comparison of recipes needs)"
    )
    assert probe.recipe_scores_ is None and probe.inner_folds_ is None
