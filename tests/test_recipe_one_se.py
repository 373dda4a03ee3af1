"""PARSProbe(recipe="auto") claims only what holds (issue 76, item 6): the simplest
recipe within one standard error of the best, the encoder block's gain with its spread
over the inner folds, a line that says when the folds cannot tell recipes apart, and the
folds named as they ran. Each answer is checked against a loop over the folds by hand."""

import logging

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut, StratifiedGroupKFold

from braindecode_pars import PARSProbe
from braindecode_pars.features.recipe import ProbeRecipe, compare_recipes, simplicity

from .test_probe_recipe import LOGGER, SFREQ, _fixed, _projection_encoder, _subjects

pytestmark = pytest.mark.usefixtures("one_thread")


def _by_hand(recipe, encoder, X, y, groups):
    """The balanced accuracy of the fixed-recipe probe in each leave-one-group-out fold."""
    out = []
    for g in np.unique(groups):
        train, test = groups != g, groups == g
        probe = _fixed(recipe, encoder).fit(X[train], y[train])
        out.append(balanced_accuracy_score(y[test], probe.predict(X[test])))
    return np.array(out)


def _one_se(scores, candidates):
    """The rule written out: the first candidate (they come simplest first) whose mean
    reaches the best mean minus the best's standard error."""
    assert sorted(candidates, key=simplicity) == candidates
    best = scores["mean"].to_numpy().argmax()
    floor = scores["mean"].iloc[best] - scores["sem"].iloc[best]
    return next(r for r, m in zip(candidates, scores["mean"], strict=True) if m >= floor - 1e-12)


def _comparison_line(caplog):
    (line,) = [r.getMessage() for r in caplog.records if "inner comparison" in r.getMessage()]
    return line


def test_an_encoder_block_that_helps_by_far_is_chosen_and_its_gain_exceeds_its_spread(caplog):
    X, y, groups = _subjects("offset")  # only the encoder's block sees the offset
    encoder = _projection_encoder()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        probe = PARSProbe(encoder, recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    scores, candidates = probe.recipe_scores_, ProbeRecipe().candidates()
    assert probe.recipe_.encoder and probe.recipe_ == _one_se(scores, candidates)
    # the gain of the best recipes with and without the block, fold by fold
    means = scores["mean"]
    with_ = candidates[means[[r.encoder for r in candidates]].to_numpy().argmax() + 4]
    without = candidates[means[[not r.encoder for r in candidates]].to_numpy().argmax()]
    a, b = _by_hand(with_, encoder, X, y, groups), _by_hand(without, encoder, X, y, groups)
    np.testing.assert_allclose(scores.loc[str(with_), "sem"], a.std(ddof=1) / 2, rtol=1e-9)
    per_fold = 100 * (a - b)
    assert probe.encoder_gain_ == pytest.approx(per_fold.mean())
    assert probe.encoder_gain_std_ == pytest.approx(per_fold.std())
    assert probe.encoder_gain_ > 30 and probe.encoder_gain_ > probe.encoder_gain_std_
    line = _comparison_line(caplog)
    assert f"adds {per_fold.mean():+.1f} ± {per_fold.std():.1f} points" in line
    assert "more than one standard error: the inner folds tell recipes with and" in line
    assert f"best recipe: {candidates[means.to_numpy().argmax()]}, " in line
    assert line.endswith(f"fitted recipe {probe.recipe_}.")


def test_recipes_the_folds_cannot_tell_apart_give_the_simplest_and_say_so(caplog):
    """Band power carries the label (1.15 times the amplitude), the encoder's block a
    trace of it (an offset of 0.05): the best recipe holds the encoder's block by 2
    points over 6 subjects, with 9 points of spread. The rule fits a recipe without it,
    and the line says that the folds cannot tell them apart."""
    rng = np.random.default_rng(0)
    y, groups = np.tile([0, 1], 24), np.repeat(np.arange(6), 8)
    X = rng.standard_normal((48, 2, 100))
    X[:, 0] *= np.where(y == 1, 1.15, 1.0)[:, None]
    X[:, 0] += np.where(y == 1, 0.05, -0.05)[:, None]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        probe = PARSProbe(_projection_encoder(), recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    scores, candidates = probe.recipe_scores_, ProbeRecipe().candidates()
    best = candidates[scores["mean"].to_numpy().argmax()]
    assert best.encoder  # what the best mean alone would have fitted
    assert probe.recipe_ == _one_se(scores, candidates) and not probe.recipe_.encoder
    assert scores.loc[str(probe.recipe_), "mean"] < scores["mean"].max()
    sem = probe.encoder_gain_std_ / np.sqrt(6 - 1)
    assert abs(probe.encoder_gain_) <= sem and abs(probe.encoder_gain_) < probe.encoder_gain_std_
    line = _comparison_line(caplog)
    assert "within one standard error: the inner folds cannot tell recipes with and" in line
    assert f"best recipe: {best}, " in line
    assert "the inner folds cannot tell it from the " in line
    assert f"the simplest of these: {probe.recipe_} " in line
    assert line.endswith(f"fitted recipe {probe.recipe_}.")


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
