"""Fine-tuning strategies, the amplitude path, group-wise epoch selection, and the
pretraining defaults of PARSClassifier."""

import logging

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PatchEncoder
from braindecode_pars.models.classifier import MultiChannelClassifier

from .conftest import TINY

SMALL = dict(n_patches=6, pos_mask_ratio=0.5, sfreq=100, verbose=0, random_state=0)


def _amplitude_task(n=48, seed=0):
    """Two classes that differ only in amplitude: instance normalisation hides them."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = rng.standard_normal((n, 2, 300)).astype(np.float32)
    X *= np.where(y == 1, 4.0, 1.0)[:, None, None]
    return X * 1e-5, y  # volts, as MNE gives them


def _encoder():
    torch.manual_seed(0)
    return PatchEncoder(sfreq=100, **TINY)


@pytest.mark.parametrize("strategy, changes", [("full", True), ("frozen", False), ("lp-ft", True)])
def test_strategies_train_the_encoder_or_leave_it(strategy, changes):
    X, y = _amplitude_task()
    encoder = _encoder()
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    clf = PARSClassifier(
        pretrained_encoder=encoder, finetune=strategy, max_epochs=4, lr=1e-3, **SMALL
    ).fit(X, y)
    after = clf.encoder_.state_dict()
    moved = any(not torch.equal(before[k], after[k]) for k in before)
    assert moved is changes
    # skorch's Freezer leaves the probe's encoder frozen; lp-ft's Unfreezer thaws it
    assert all(p.requires_grad is changes for p in clf.encoder_.parameters())
    assert len(clf.history_) == 4  # lp-ft: 2 probe epochs, then 2 of everything
    for k in before:  # the caller's encoder is never trained
        assert torch.equal(before[k], encoder.state_dict()[k])


def test_the_amplitude_path_sees_what_normalisation_removes_in_any_unit():
    X, y = _amplitude_task(n=64)
    Xt, yt = _amplitude_task(n=64, seed=1)
    params = dict(pretrain_epochs=0, max_epochs=30, batch_size=16, lr=3e-3, encoder=TINY, **SMALL)
    blind = PARSClassifier(amplitude=False, **params).fit(X, y)
    seeing = PARSClassifier(amplitude=True, **params).fit(X, y)
    assert seeing.score(Xt, yt) > 0.9
    assert blind.score(Xt, yt) < 0.75  # the encoder alone sees unit-variance noise
    in_uv = PARSClassifier(amplitude=True, **params).fit(X * 1e6, y)
    np.testing.assert_allclose(
        in_uv.predict_proba(Xt * 1e6), seeing.predict_proba(Xt), rtol=1e-3, atol=1e-3
    )


def test_the_amplitude_statistics_are_those_of_all_training_batches():
    model = MultiChannelClassifier(
        n_outputs=2,
        n_chans=3,
        n_times=300,
        sfreq=100,
        amplitude=True,
        encoder=_encoder(),
        n_heads=4,
    )
    batches = [torch.randn(4, 3, 300) * s for s in (1e-5, 3e-5, 2e-5)]
    for X in batches:
        model(X)
    log_std = torch.cat([X.std(dim=-1).log() for X in batches])  # (12, 3)
    torch.testing.assert_close(model.amplitude_norm.running_mean, log_std.mean(0))
    model.eval()
    assert model(batches[0][:1]).shape == (1, 2)  # a single window in eval mode
    model.train()
    assert model(batches[0][:1]).shape == (1, 2)  # and in training (no batch statistics)


def test_groups_hold_out_whole_subjects_or_keep_the_last_epoch(monkeypatch):
    X, y = _amplitude_task(n=48)
    params = dict(pretrain_epochs=0, max_epochs=3, encoder=TINY, **SMALL)
    four = np.repeat([10, 11, 12, 13], 12)
    default = PARSClassifier(**params).fit(X, y, groups=four)  # min_valid_groups=None
    assert "valid_loss" not in default.history_[-1] and len(default.history_) == 3
    assert default.validation_ == "none"
    # None never splits, however many groups; an int splits from that many on
    many = np.arange(48)  # one window per group
    assert PARSClassifier(**params)._split(y, many)[1:] == (None, "none")
    clf = PARSClassifier(min_valid_groups=48, **params)
    clf.seed_ = 0
    assert clf._split(y, many)[2] == "groups"
    assert PARSClassifier(min_valid_groups=49, **params)._split(y, many)[1:] == (None, "none")
    clf = PARSClassifier(valid_fraction=0.25, min_valid_groups=3, **params)
    clf.seed_ = 0
    train_idx, valid_idx, rule = clf._split(y, four)
    assert set(four[valid_idx]).isdisjoint(four[train_idx]) and len(set(four[valid_idx])) == 1
    clf.fit(X, y, groups=four)
    assert "valid_loss" in clf.history_[-1] and clf.validation_ == rule == "groups"
    two = np.repeat([10, 11], 24)
    clf = PARSClassifier(min_valid_groups=3, **params).fit(X, y, groups=two)
    assert "valid_loss" not in clf.history_[-1] and len(clf.history_) == 3
    with pytest.raises(ValueError, match=r"'groups' must have shape \(48,\)"):
        PARSClassifier(**params).fit(X, y, groups=two[:10])


def test_default_pretraining_learns_on_a_few_hundred_windows():
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 300)
    # a ramp gives every patch's position away: a pretext task with a known answer
    X = (rng.uniform(0.5, 4, (200, 2, 1)) * t + rng.standard_normal((200, 2, 1))).astype(np.float32)
    y = np.repeat([0, 1], 100)
    clf = PARSClassifier(pretrain_steps=300, max_epochs=1, encoder=TINY, **SMALL).fit(X, y)
    history = clf.pretrain_history_
    assert history[-1, "valid_skill"] > 0.5  # 0 = predicting no shift
    assert max(history[:, "lr"]) == pytest.approx(1e-3, rel=0.05)  # pretrain_lr, not lr
    steps = sum(row["train_batch_count"] for row in history)
    assert 300 <= steps < 300 + len(history)


def test_the_paper_preset_is_one_argument_away(monkeypatch):
    import importlib

    run = importlib.import_module("braindecode_pars.training.run")
    seen = {}

    class Stop(Exception):
        pass

    def fake_net(model, **kwargs):
        seen.update(kwargs, n_times=model.n_times)
        raise Stop

    monkeypatch.setattr(run, "PretrainNet", fake_net)
    X = np.random.default_rng(0).standard_normal((40, 2, 3000)).astype(np.float32)
    y = np.repeat([0, 1], 20)
    with pytest.raises(Stop):
        PARSClassifier(pretrain_preset="paper", encoder=TINY, **SMALL).fit(X, y)
    assert (seen["lr"], seen["batch_size"], seen["max_epochs"]) == (1e-4, 512, 1000)
    assert seen["n_times"] == 3000  # 30-s crops
    with pytest.raises(Stop):
        PARSClassifier(encoder=TINY, **SMALL).fit(X, y)
    assert (seen["lr"], seen["batch_size"], seen["n_times"]) == (1e-3, 64, 1000)
    with pytest.raises(
        ValueError, match="Allowed values are 'auto', 'probe', 'full', 'frozen' and 'lp-ft'"
    ):
        PARSClassifier(finetune="linear", **SMALL).fit(X, y)


def test_auto_strategy_probes_a_pretrained_encoder_and_trains_scratch_fully():
    X, y = _amplitude_task()
    encoder = _encoder()
    pretrained = PARSClassifier(pretrained_encoder=encoder, **SMALL).fit(X, y)
    assert pretrained.finetune == "auto" and pretrained.finetune_ == "probe"
    for k, v in encoder.state_dict().items():  # the probe leaves the encoder as it was
        assert torch.equal(v, pretrained.encoder_.state_dict()[k])
    scratch = PARSClassifier(pretrain_epochs=0, max_epochs=2, encoder=TINY, **SMALL).fit(X, y)
    assert scratch.finetune_ == "full"
    pretrains = PARSClassifier(pretrain_epochs=1, max_epochs=1, **SMALL)
    assert pretrains._finetune_strategy() == "probe"


def test_the_probe_is_the_aligned_probe_or_probe_pipeline_over_the_encoder():
    from braindecode_pars.probe import AlignedProbe, probe_pipeline

    X, y = _amplitude_task(n=40)
    Xt, _ = _amplitude_task(n=40, seed=1)
    groups, groups_t = np.repeat([0, 1], 20), np.repeat([5, 6], 20)
    encoder = _encoder()
    clf = PARSClassifier(
        pretrained_encoder=encoder, probe_C=3.0, probe_align="groups", **SMALL
    ).fit(X, y, groups)
    reference = AlignedProbe(encoder, sfreq=100, tangent_space=True, C=3.0).fit(X, y, groups)
    np.testing.assert_allclose(
        clf.predict_proba(Xt, groups_t), reference.predict_proba(Xt, groups_t), atol=1e-6
    )
    # without groups at predict, all of Xt is one group: another alignment
    assert not np.allclose(clf.transform(Xt), clf.transform(Xt, groups_t))
    np.testing.assert_allclose(clf.predict_proba(Xt), reference.predict_proba(Xt), atol=1e-6)
    unaligned = PARSClassifier(pretrained_encoder=encoder, probe_C=3.0, **SMALL).fit(X, y, groups)
    assert unaligned.probe_align is None  # the default
    reference = probe_pipeline(encoder, sfreq=100, tangent_space=True, C=3.0).fit(X, y)
    np.testing.assert_allclose(unaligned.predict_proba(Xt), reference.predict_proba(Xt), atol=1e-6)
    # features: 2 channels x emb_dim of the encoder, 2 x 6 band powers, 3 of the tangent space
    for fitted in (clf, unaligned):
        assert fitted.transform(Xt).shape == (40, 2 * encoder.emb_dim + 2 * 6 + 3)
        assert fitted.validation_ == "none" and len(fitted.history_) == 0


def test_the_aligned_probe_fit_transform_aligns_as_fit_does(caplog):
    X, y = _amplitude_task(n=40)
    groups = np.tile([0, 1], 20)
    clf = PARSClassifier(pretrained_encoder=_encoder(), probe_align="groups", **SMALL)
    features = clf.fit_transform(X, y, groups=groups)
    np.testing.assert_allclose(features, clf.transform(X, groups), atol=1e-10)
    assert not np.allclose(features, clf.transform(X), atol=1e-6)  # one group: another
    with caplog.at_level(logging.WARNING, logger="braindecode_pars.estimator"):
        clf.fit(X, y)
    assert "fit has no groups" in caplog.text
    # groups too small are refused, and the setting is refused where no probe runs
    with pytest.raises(ValueError, match="ALIGN_MIN_WINDOWS"):
        clf.fit(X, y, groups=np.arange(40) % 8)
    with pytest.raises(ValueError, match="probe_align='groups'.*finetune='full'"):
        PARSClassifier(probe_align="groups", finetune="full", **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="Allowed values are None and 'groups'"):
        PARSClassifier(probe_align="subject", **SMALL).fit(X, y)


def test_the_probe_sees_amplitude_that_the_frozen_head_cannot():
    X, y = _amplitude_task(n=64)
    Xt, yt = _amplitude_task(n=64, seed=1)
    encoder = _encoder()
    probe = PARSClassifier(pretrained_encoder=encoder, **SMALL).fit(X, y)
    assert probe.score(Xt, yt) > 0.95  # log band power carries the 4-fold amplitude
    head = PARSClassifier(pretrained_encoder=encoder, finetune="frozen", max_epochs=10, **SMALL)
    assert head.fit(X, y).score(Xt, yt) < 0.75  # the encoder sees unit-variance noise


def test_the_probe_pretrains_first_without_an_encoder():
    X, y = _amplitude_task(n=32)
    clf = PARSClassifier(encoder=TINY, pretrain_epochs=2, pretrain_batch_size=16, **SMALL)
    clf.fit(X, y)
    assert clf.finetune_ == "probe" and len(clf.pretrain_history_) == 2
    assert clf.predict(X).shape == (32,)


@pytest.mark.parametrize(
    "params, name",
    [
        (dict(crop_seconds=1.0), "crop_seconds=1.0"),
        (dict(augmentation="standard"), "augmentation='standard'"),
        (dict(amplitude=True), "amplitude=True"),
    ],
)
def test_settings_the_probe_does_not_use_are_refused_before_any_work(params, name, monkeypatch):
    import braindecode_pars.estimator_settings as settings

    def no_reading(*args, **kwargs):
        raise AssertionError("the windows were read before the parameters were checked")

    monkeypatch.setattr(settings, "read_windows", no_reading)
    X, y = _amplitude_task(n=8)
    clf = PARSClassifier(pretrained_encoder=_encoder(), **params, **SMALL)
    with pytest.raises(ValueError, match=rf"{name}.*finetune='auto' fits the probe"):
        clf.fit(X, y)
    with pytest.raises(ValueError, match="'X_valid'.*the probe"):
        PARSClassifier(pretrained_encoder=_encoder(), **SMALL).fit(X, y, X_valid=X, y_valid=y)
