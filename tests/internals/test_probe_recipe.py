"""The probe recipe's private candidates and progress threshold (moved from
tests/test_probe_recipe.py)."""

import logging

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from braindecode_pars import PARSProbe
from braindecode_pars.features.recipe import _RECIPE_BLOCKS, RECIPE_CS, ProbeRecipe

from .._learning import SEED, learned
from ..conftest import SMALL_ENCODER
from ..test_probe_recipe import (
    DEFAULT,
    LOGGER,
    SFREQ,
    BlindEncoder,
    _best,
    _encoder,
    _fixed,
    _projection_encoder,
    _subjects,
)


def test_an_encoder_block_that_adds_nothing_leaves_the_fixed_recipe_in_place(caplog):
    X, y, groups = _subjects("power", seed=SEED)  # band power and the covariances carry it
    with caplog.at_level(logging.INFO, logger=LOGGER):
        blind = PARSProbe(BlindEncoder(sfreq=SFREQ, **SMALL_ENCODER), recipe="auto", sfreq=SFREQ)
        blind.fit(X, y, groups)
    scores = blind.recipe_scores_
    # the fixed recipe (the incumbent) first, then the grid
    assert list(scores.index) == [str(DEFAULT)] + [str(r) for r in ProbeRecipe().candidates()]
    assert len(scores) == 1 + len(_RECIPE_BLOCKS) * len(RECIPE_CS)
    assert set(scores["n_groups"]) == {4}
    # a block of zeros changes no prediction: the same scores with it as without it, and
    # no recipe beats the fixed one by more than a standard error: it is kept
    grid = scores.iloc[1:]
    with_encoder = grid["blocks"].str.contains("encoder")
    np.testing.assert_array_equal(
        grid["mean"][with_encoder].to_numpy(),
        grid["mean"][grid["blocks"].isin(["bandpower", "bandpower+tangentspace"])].to_numpy(),
    )
    fixed, chosen = (scores.loc[str(r), "mean"] for r in (DEFAULT, blind.recipe_))
    # the gain is the best recipe with the encoder block less the best without; the
    # grid's twins tie, so all of it is the incumbent's lead over the grid, which comes
    # from its C (3, not one of the grid's), not from the block: 0 on most draws
    lead = 100 * max(0.0, fixed - grid["mean"].max())
    assert blind.encoder_gain_ == pytest.approx(lead)
    learned(fixed, above=0.8, what="the fixed recipe, inner folds")
    (record,) = [r for r in caplog.records if "inner comparison" in r.getMessage()]
    message = record.getMessage()
    # the incumbent stays unless a recipe beats it beyond a standard error: on some
    # draws (PARS_LEARNING_SEED) band power and the covariances at another C do, which
    # is the rule at work, not the encoder block; those draws check the ranks only
    assert chosen >= fixed
    if blind.recipe_ != DEFAULT:
        assert chosen > fixed and message.endswith(f"fitted recipe {blind.recipe_}.")
    else:
        assert message.startswith(
            "recipe='auto', inner comparison over 4 folds of LeaveOneGroupOut over 4 groups "
            "(1 group held out in each): the encoder block adds "
        )
        # the best with it is the fixed recipe (C=3), the best without at C=0.01: the same
        # mean, not the same folds
        spread = f"{blind.encoder_gain_std_:.1f}"
        assert (
            f"adds {blind.encoder_gain_:+.1f} ± {spread} points of balanced accuracy "
            "(mean ± std over the folds" in message
        )
        assert f"best with: {DEFAULT.blocks[0]}" in message
        if lead == 0:
            assert "within one standard error: the inner folds cannot tell recipes with" in message
        assert message.endswith(f"fitted recipe {blind.recipe_}.")
    # a block of noise to a linear model: no more than chance, one window per group
    noise = PARSProbe(_projection_encoder(), recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    gain = 100 * (_best(noise.recipe_scores_, True) - _best(noise.recipe_scores_, False))
    assert noise.encoder_gain_ == pytest.approx(gain)
    # abs(gain) <= 100 / 16 (the next float up, as learned's 'below' is strict)
    learned(abs(gain), below=np.nextafter(100 / 16, np.inf), what="gain of a noise block")


def test_inner_cv_group_kfold_scores_equal_a_loop_by_hand(caplog, monkeypatch):
    """inner_cv=3 scores each candidate on GroupKFold(3)'s folds, as a loop by hand does,
    and a comparison projected past the threshold (0 s here) logs the first fold's time
    with the projected total, then the whole."""
    from sklearn.model_selection import GroupKFold

    from braindecode_pars.features import recipe as recipe_module

    monkeypatch.setattr(recipe_module, "_PROGRESS_AFTER_SECONDS", 0.0)
    X, y, groups = _subjects("power", sizes=(8,) * 6)
    encoder = _encoder()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        auto = PARSProbe(encoder, recipe="auto", inner_cv=3, sfreq=SFREQ).fit(X, y, groups)
    recipe = ProbeRecipe(("bandpower", "tangentspace"), C=0.01)
    by_hand = []
    for train, test in GroupKFold(3).split(X, y, groups):
        probe = _fixed(recipe, encoder).fit(X[train], y[train], groups=groups[train])
        by_hand.append(balanced_accuracy_score(y[test], probe.predict(X[test])))
    row = auto.recipe_scores_.loc[str(recipe)]
    assert row["n_groups"] == 3
    np.testing.assert_allclose([row["mean"], row["std"]], [np.mean(by_hand), np.std(by_hand)])
    assert "the first of 3 inner folds (GroupKFold, 6 groups) took" in caplog.text
    assert "(an estimate from that fold" in caplog.text
    assert "compared over 3 inner folds in" in caplog.text


def test_a_long_comparison_labels_its_projection_an_estimate_and_re_estimates_halfway(
    caplog, monkeypatch
):
    """Issue 87: a projection of "about 15 s" for a step that took 40 s. The first
    fold's projection says it is an estimate; halfway the elapsed time re-estimates it."""
    from braindecode_pars.features import recipe as recipe_module
    from braindecode_pars.features.recipe import compare_recipes

    monkeypatch.setattr(recipe_module, "_PROGRESS_AFTER_SECONDS", 0.0)
    rng = np.random.default_rng(0)
    groups, y = np.repeat(np.arange(6), 4), np.tile([0, 1], 12)
    features = {"bandpower": rng.standard_normal((24, 3)) + y[:, None]}
    with caplog.at_level(logging.INFO, logger=LOGGER):
        compare_recipes([ProbeRecipe(("bandpower",), C=1.0)], features, y, groups)
    lines = [r.getMessage() for r in caplog.records]
    assert "the first of 6 inner folds (LeaveOneGroupOut, 6 groups) took" in lines[0]
    assert "(an estimate from that fold: the folds differ in size" in lines[0]
    assert lines[1].startswith("Inner comparison: 3 of 6 inner folds in ")
    assert lines[1].endswith("(re-estimated).")
    assert "compared over 6 inner folds in" in lines[2]
