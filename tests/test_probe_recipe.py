"""PARSProbe(recipe="auto"): the probe's recipe chosen on the user's own labels by an
inner leave-one-group-out comparison (issue 39, item 5; the one-standard-error rule of
issue 76 is tested in test_recipe_one_se.py).

Each test holds a known answer: the recipe that must win on data built so that one
block alone carries the label, the inner scores of a loop written by hand, the
predictions of the fixed-recipe probe, the log line, and the parameter's contract.
"""

import dataclasses
import logging
import math
import pickle

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.metrics import balanced_accuracy_score, log_loss

from braindecode_pars import PARSClassifier, PARSProbe, PatchEncoder
from braindecode_pars.features.recipe import ProbeRecipe

from ._learning import SEED, learned
from .conftest import SMALL_ENCODER

SFREQ = 50.0
LOGGER = "braindecode_pars"
pytestmark = pytest.mark.usefixtures("one_thread")
#: What PARSProbe() fits when nothing is compared.
DEFAULT = ProbeRecipe(("encoder", "bandpower", "tangentspace"), C=3.0)


class ProjectionEncoder(PatchEncoder):
    """A stand-in encoder whose tokens are fixed linear projections of the window: its
    mean over time, then random projections. It sees a channel's offset, which log
    band power (above 0.5 Hz, each Welch segment detrended) and the covariances
    (centred) do not; a channel's amplitude only spreads its features, which a linear
    model cannot use (to it, they are noise)."""

    def forward(self, X, **kwargs):
        n_times = X.shape[-1]
        generator = torch.Generator().manual_seed(0)
        weights = torch.randn(n_times, self.emb_dim, generator=generator) / n_times**0.5
        weights[:, 0] = 1 / n_times
        return (X @ weights).expand(-1, 2, self.emb_dim)


class BlindEncoder(PatchEncoder):
    """A stand-in encoder that sees nothing: every token is zero."""

    def forward(self, X, **kwargs):
        return torch.zeros(len(X), 2, self.emb_dim)


def _projection_encoder():
    return ProjectionEncoder(sfreq=SFREQ, **{**SMALL_ENCODER, "emb_dim": 64})


def _encoder():
    torch.manual_seed(0)
    return PatchEncoder(sfreq=SFREQ, **SMALL_ENCODER)


def _subjects(carrier, sizes=(16, 16, 16, 16), seed=0):
    """Windows of 2 channels x 2 s of noise, the subjects in turn, both classes in each.
    ``carrier`` "power": class 1 has 1.3 times the amplitude on channel 0 (band power
    and the covariances see it); "offset": channel 0 is offset by +0.3 in class 1 and
    -0.3 in class 0 (the same power: only a block that sees the mean sees it)."""
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.tile([0, 1], n // 2) for n in sizes])
    groups = np.repeat(np.arange(len(sizes)), sizes)
    X = rng.standard_normal((len(y), 2, 100))
    if carrier == "power":
        X[:, 0] *= np.where(y == 1, 1.3, 1.0)[:, None]
    else:
        X[:, 0] += np.where(y == 1, 0.3, -0.3)[:, None]
    return X, y, groups


def _fixed(recipe, encoder, **params):
    """The fixed-recipe PARSProbe of ``recipe``."""
    return PARSProbe(
        encoder if recipe.encoder else None,
        band_power="bandpower" in recipe.blocks,
        tangent_space="tangentspace" in recipe.blocks,
        C=recipe.C,
        sfreq=SFREQ,
        **{"block_weights": None, **params},  # the fixed recipe, every block's equal say
    )


# -- (a) the recipe that carries the label wins ------------------------------------------
def _best(scores, encoder):
    """The best mean score of the recipes with (or without) the encoder's block."""
    return scores["mean"][scores["blocks"].str.contains("encoder") == encoder].max()


def test_an_encoder_block_that_carries_the_label_is_kept():
    # only the encoder's block sees the offset
    X, y, groups = _subjects("offset", seed=SEED)
    seen = PARSProbe(_projection_encoder(), recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    assert seen.recipe_.encoder
    learned(seen.encoder_gain_, above=30, what="encoder gain (points)")
    # band power, covariances: near chance
    learned(_best(seen.recipe_scores_, False), below=0.7, what="best without the encoder")
    X_new, y_new, _ = _subjects("offset", seed=SEED + 1)
    learned(seen.score(X_new, y_new), above=0.8, what="new windows")


# -- (b) the inner scores are a leave-one-group-out loop ----------------------------------
@pytest.mark.parametrize(
    "align, sizes",
    [(None, (16, 16, 16, 16)), ("groups", (16, 16, 12, 6))],  # a group under ALIGN_MIN_WINDOWS
)
def test_inner_scores_equal_a_leave_one_group_out_loop_by_hand(align, sizes):
    X, y, groups = _subjects("power", sizes=sizes)
    encoder = _encoder()
    auto = PARSProbe(encoder, recipe="auto", align=align, sfreq=SFREQ).fit(X, y, groups)
    candidates = (
        dataclasses.replace(DEFAULT, C=1.0),
        ProbeRecipe(("bandpower", "tangentspace"), C=0.01),
    )
    for recipe in candidates:  # two of the compared recipes (C in RECIPE_CS)
        by_hand, losses = [], []
        for g in np.unique(groups):
            train, test = groups != g, groups == g
            probe = _fixed(recipe, encoder, align=align)
            probe.fit(X[train], y[train], groups=groups[train])
            proba = probe.predict_proba(X[test])  # the held-out group, aligned on itself
            by_hand.append(balanced_accuracy_score(y[test], probe.classes_[proba.argmax(1)]))
            losses.append(log_loss(y[test], proba, labels=probe.classes_))
        row = auto.recipe_scores_.loc[str(recipe)]
        assert row["n_groups"] == 4
        np.testing.assert_allclose(
            row[["mean", "std", "log_loss"]].to_numpy(float),
            [np.mean(by_hand), np.std(by_hand), np.mean(losses)],
            rtol=1e-9,
        )


# -- (c) the winner is the fixed-recipe probe fitted on every label ------------------------
@pytest.mark.parametrize("align", [None, "groups"])
def test_the_fitted_winner_predicts_as_the_fixed_recipe_probe(align):
    X, y, groups = _subjects("power")
    encoder = _projection_encoder()
    auto = PARSProbe(encoder, recipe="auto", align=align, sfreq=SFREQ, random_state=0)
    auto.fit(X, y, groups)
    assert auto.recipe_ != DEFAULT  # another recipe than the fallback was fitted
    fixed = _fixed(auto.recipe_, encoder, align=align, random_state=0).fit(X, y, groups)
    X_new = _subjects("power", sizes=(16,), seed=1)[0]
    np.testing.assert_array_equal(auto.predict_proba(X_new), fixed.predict_proba(X_new))
    np.testing.assert_array_equal(auto.transform(X_new), fixed.transform(X_new))


# -- (d) too few groups: the fixed recipe, said so ----------------------------------------
@pytest.mark.parametrize("n_groups", [0, 2])
def test_fewer_than_three_groups_fit_the_fixed_recipe_and_say_so(caplog, n_groups):
    X, y, groups = _subjects("power", sizes=(16, 16))
    groups = None if n_groups == 0 else groups
    encoder = _encoder()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        auto = PARSProbe(encoder, recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    (record,) = caplog.records
    message = record.getMessage()
    assert record.levelno == logging.INFO and message.startswith("Nothing could be compared")
    want = "fit has no groups" if n_groups == 0 else "fit has 2 groups"
    assert f"({want}, fewer than the 3 " in message
    assert f"fitted the fixed recipe {DEFAULT} " in message
    assert ("Pass 'groups'" in message) == (n_groups == 0)
    assert auto.recipe_ == DEFAULT and auto.recipe_scores_ is None
    assert math.isnan(auto.encoder_gain_)
    plain = PARSProbe(encoder, block_weights=None, sfreq=SFREQ).fit(X, y, groups)
    np.testing.assert_array_equal(auto.predict_proba(X), plain.predict_proba(X))
    # the fixed recipe is the parameters'
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        PARSProbe(recipe="auto", tangent_space=False, C=3.0, sfreq=SFREQ).fit(X, y, groups)
    assert "fitted the fixed recipe bandpower (C=3) " in caplog.records[0].getMessage()


def test_without_an_encoder_the_classical_recipes_are_compared(caplog):
    X, y, groups = _subjects("power")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        auto = PARSProbe(recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    # the fixed recipe (the incumbent) first, then the grid without the encoder's block
    assert list(auto.recipe_scores_.index) == [
        str(r) for r in (ProbeRecipe(), *ProbeRecipe().candidates(encoder=False))
    ]
    assert math.isnan(auto.encoder_gain_) and not auto.recipe_.encoder
    (record,) = caplog.records
    assert "no encoder, so no encoder block to compare" in record.getMessage()


def test_the_classifier_passes_its_groups_to_the_head_and_logs_the_comparison(caplog):
    X, y, groups = _subjects("offset")
    head = PARSProbe(recipe="auto")
    clf = PARSClassifier(_projection_encoder(), head, sfreq=SFREQ, verbose=1)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        clf.fit(X, y, groups=groups)
    assert clf.head_.recipe_.encoder and clf.head_.recipe_scores_["n_groups"].max() == 4
    lines = [r.getMessage() for r in caplog.records if "inner comparison" in r.getMessage()]
    assert len(lines) == 1 and "the encoder block adds +" in lines[0]


# -- (e) the parameter's contract ---------------------------------------------------------
def test_recipe_clones_pickles_and_refuses_bad_values_before_any_work():
    probe = PARSProbe(recipe="auto")
    assert probe.get_params()["recipe"] == "auto" and clone(probe).recipe == "auto"
    assert PARSProbe().recipe == "fixed"  # the default: the recipe of the parameters
    assert probe.set_params(recipe="fixed").recipe == "fixed"
    X, y, groups = _subjects("power")
    fitted = PARSProbe(_encoder(), recipe="auto", sfreq=SFREQ).fit(X, y, groups)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))
    assert again.recipe_ == fitted.recipe_ and again.recipe_scores_.equals(fitted.recipe_scores_)
    fresh = clone(fitted)
    assert not hasattr(fresh, "recipe_") and fresh.get_params()["recipe"] == "auto"
    message = (
        r"Invalid value for the 'recipe' parameter\. Allowed values are 'fixed' and 'auto', "
        r"but got 'best' instead\."
    )
    with pytest.raises(ValueError, match=message):
        PARSProbe(recipe="best").fit(None)  # before reading X
    with pytest.raises(ValueError, match=message):
        PARSClassifier(_encoder(), PARSProbe(recipe="best"), sfreq=SFREQ).fit(None)
    missing = groups.astype(object)
    missing[3] = None
    with pytest.raises(ValueError, match=r"'groups' has 1 missing value\(s\).*recipe='auto'"):
        PARSProbe(recipe="auto", sfreq=SFREQ).fit(X, y, missing)
    fixed = PARSProbe(recipe="fixed", block_weights=None, sfreq=SFREQ).fit(X, y, groups)
    assert fixed.recipe_ == ProbeRecipe(("bandpower", "tangentspace"), C=3.0)  # groups or not
    assert fixed.recipe_scores_ is None and math.isnan(fixed.encoder_gain_)


# -- (e) the inner folds: leave-one-group-out or GroupKFold, with progress -----------------


@pytest.mark.parametrize(
    "inner_cv, n_groups, expected",
    [
        pytest.param("auto", 20, "LeaveOneGroupOut", id="auto-20"),
        pytest.param("auto", 21, "GroupKFold(5)", id="auto-21"),
        pytest.param(4, 10, "GroupKFold(4)", id="int"),
        pytest.param(4, 3, "LeaveOneGroupOut", id="int-at-least-the-groups"),
    ],
)
def test_inner_cv_auto_leaves_one_group_out_up_to_20_groups(inner_cv, n_groups, expected):
    from braindecode_pars.features.recipe import inner_splitter

    splitter = inner_splitter(inner_cv, n_groups)
    name = type(splitter).__name__
    if name == "GroupKFold":
        name += f"({splitter.n_splits})"
    assert name == expected


def test_inner_cv_takes_a_splitter_and_refuses_bad_values_before_any_work():
    from sklearn.model_selection import GroupKFold

    from braindecode_pars.features.recipe import inner_splitter

    splitter = GroupKFold(2)
    assert inner_splitter(splitter, 40) is splitter
    assert clone(PARSProbe(inner_cv=splitter)).get_params()["inner_cv"].n_splits == 2
    cases = [
        (1, ValueError, r"'inner_cv' parameter: an int must be at least 2 .* got 1"),
        ("loo", ValueError, r"'inner_cv' parameter\. Allowed values are 'auto'"),
        (2.5, TypeError, r"'inner_cv' must be 'auto', an int of at least 2 or a .* float"),
    ]
    for value, error, match in cases:
        with pytest.raises(error, match=match):
            PARSProbe(recipe="auto", inner_cv=value).fit(None)  # before reading X
