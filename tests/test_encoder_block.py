"""PARSProbe(encoder_block=False): a fixed recipe without the encoder's block, and
PARSClassifier skipping pretraining when its head reads no encoder for the fit."""

import logging

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PARSPretrainer, PARSProbe, load_encoder

from ._learning import SEED, learned
from .test_probe_recipe import SFREQ, _projection_encoder, _subjects

pytestmark = pytest.mark.usefixtures("one_thread")


def test_without_the_block_the_fixed_recipe_is_the_probe_without_an_encoder():
    X, y, groups = _subjects("power")
    without = PARSProbe(_projection_encoder(), encoder_block=False, sfreq=SFREQ).fit(X, y)
    none = PARSProbe(None, sfreq=SFREQ).fit(X, y)
    np.testing.assert_allclose(without.predict_proba(X), none.predict_proba(X))
    assert not without.recipe_.encoder


def test_auto_still_compares_the_encoder_block_it_does_not_fix():
    X, y, groups = _subjects("offset", seed=SEED)  # only the encoder sees the label
    probe = PARSProbe(_projection_encoder(), recipe="auto", encoder_block=False, sfreq=SFREQ)
    probe.fit(X, y, groups=groups)
    learned(probe.encoder_gain_, above=30, what="encoder gain (points)")
    assert probe.recipe_.encoder


@pytest.mark.parametrize(
    ("recipe", "block", "n_groups", "reads"),
    [
        ("fixed", True, 1, True),
        ("fixed", False, 4, False),
        ("auto", False, 2, False),
        ("auto", False, 3, True),
        ("auto", True, 0, True),
    ],
)
def test_encoder_unused(recipe, block, n_groups, reads):
    groups = None if n_groups == 0 else np.repeat(np.arange(n_groups), 4)
    why = PARSProbe(recipe=recipe, encoder_block=block).encoder_unused(groups)
    assert (why is None) is reads
    if not reads:
        assert f"fit has {n_groups} group(s), fewer than the 3" in why


def _count_pretraining(monkeypatch):
    calls = []
    original = PARSPretrainer.fit

    def fit(self, *args, **kwargs):
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PARSPretrainer, "fit", fit)
    return calls


def test_the_classifier_does_not_pretrain_for_a_head_that_reads_no_encoder(monkeypatch, caplog):
    X, y, groups = _subjects("power", sizes=(16, 16))
    calls = _count_pretraining(monkeypatch)
    head = PARSProbe(recipe="auto", encoder_block=False)
    stage = PARSPretrainer(steps=2, emb_dim=16, depth=1, n_heads=2, ff_dim=16, valid_fraction=None)
    clf = PARSClassifier(stage, head, sfreq=SFREQ, random_state=0, verbose=1)
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        clf.fit(X, y, groups=groups)
    assert calls == [] and clf.encoder_ is None and clf.pretrainer_ is None
    assert any("Pretraining skipped" in r.getMessage() for r in caplog.records)
    expected = PARSProbe(None, block_weights=None, sfreq=SFREQ, random_state=0)  # equal say
    expected = expected.fit(X, y).predict_proba(X)
    np.testing.assert_allclose(clf.predict_proba(X), expected)
    with pytest.warns(UserWarning, match="'X_unlabeled' is not used"):
        clf.fit(X, y, groups=groups, X_unlabeled=X)


def test_the_classifier_pretrains_when_auto_has_groups_to_compare(monkeypatch):
    X, y, groups = _subjects("power")  # four groups
    calls = _count_pretraining(monkeypatch)
    head = PARSProbe(recipe="auto", encoder_block=False)
    stage = PARSPretrainer(steps=2, emb_dim=16, depth=1, n_heads=2, ff_dim=16, valid_fraction=None)
    clf = PARSClassifier(stage, head, sfreq=SFREQ, random_state=0, verbose=0)
    clf.fit(X, y, groups=groups)
    assert calls == [1] and clf.encoder_ is not None
    assert clf.head_.recipe_scores_ is not None


def test_the_default_classifier_is_the_probe_over_the_shipped_pars_encoder(monkeypatch):
    """PARSClassifier() reads pars-small-v2 without pretraining; encoder=None is the
    probe without an encoder, PARSProbe()'s default."""
    X, y, groups = _subjects("power")
    calls = _count_pretraining(monkeypatch)
    clf = PARSClassifier(sfreq=SFREQ, random_state=0, verbose=0).fit(X, y, groups=groups)
    assert calls == [] and clf.pretrainer_ is None
    shipped = load_encoder("pars-small-v2")
    for a, b in zip(clf.encoder_.state_dict().values(), shipped.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    expected = PARSProbe("pars-small-v2", block_weights="auto", sfreq=SFREQ, random_state=0)
    expected = expected.fit(X, y, groups=groups)
    np.testing.assert_allclose(clf.predict_proba(X), expected.predict_proba(X))
    with pytest.raises(ValueError, match=r"'encoder' is an encoder used as it is.*PARSPretrainer"):
        clf.fit(X, y, X_unlabeled=X)
    bare = PARSClassifier(encoder=None, sfreq=SFREQ, random_state=0, verbose=0).fit(X, y)
    assert bare.encoder_ is None
    expected = PARSProbe(None, sfreq=SFREQ, random_state=0).fit(X, y).predict_proba(X)
    np.testing.assert_allclose(bare.predict_proba(X), expected)
    with pytest.raises(ValueError, match=r"'encoder' is None \(no encoder\).*PARSPretrainer"):
        bare.fit(X, y, X_unlabeled=X)


@pytest.mark.parametrize("align", [None, "groups"])
@pytest.mark.parametrize("recipe", ["fixed", "auto"])
def test_the_readout_reaches_the_encoder_block_in_every_recipe(recipe, align):
    """PARSProbe(readout=...) gives the encoder's block the readout's width (64 values
    a channel for "mean", 128 for "mean+std") however the probe is fitted."""
    X, y, groups = _subjects("offset")
    for readout in ("mean", "mean+std"):
        probe = PARSProbe(
            _projection_encoder(), readout=readout, recipe=recipe, align=align, sfreq=SFREQ
        ).fit(X, y, groups=groups)
        assert probe.recipe_.encoder
        assert probe.predict_proba(X).shape == (len(y), 2)
        step = probe.extractor_.steps["encoder"]
        assert step.readout == readout
        assert step.transform(X[:3]).shape == (3, 2 * 64 * (1 + (readout == "mean+std")))


def test_the_readout_is_checked_before_any_work():
    X, y, _ = _subjects("power")
    with pytest.raises(ValueError, match="readout.*'mean\\+std'.*'max'"):
        PARSProbe(_projection_encoder(), readout="max", sfreq=SFREQ).fit(X, y)
