"""PARSClassifier as a skorch net: randomness, disk, validation, interrupts, skorch's API."""

import os

import numpy as np
import pytest
import sklearn
import torch
from braindecode.datasets import create_from_X_y
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from skorch.callbacks import EarlyStopping

from braindecode_pars import PARSClassifier

from .conftest import SMALL_CLASSIFIER, InterruptAt

SFREQ = 50.0
# the neural path (a trained spatial head over the frozen encoder, auto's choice before
# the probe); the default probe has its tests in test_finetune_strategies.py
SMALL = dict(SMALL_CLASSIFIER, sfreq=SFREQ, finetune="frozen")


def _toy(n=48, n_chans=3, T=100, seed=0, n_subjects=6):
    """Two classes: a 5 Hz or a 15 Hz rhythm on the first channel; subjects in turn."""
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    t = np.arange(T) / SFREQ
    X = rng.normal(size=(n, n_chans, T)).astype(np.float32) * 0.5
    X[:, 0] += np.sin(2 * np.pi * np.where(y == 0, 5, 15)[:, None] * t)
    groups = (np.arange(n) // 2) % n_subjects  # each subject holds both classes
    return X, y, groups


def _global_states():
    return np.random.get_state()[1].copy(), torch.get_rng_state().clone()  # noqa: NPY002


def test_fit_leaves_the_global_generators_as_it_found_them():
    X, y, _ = _toy()
    np.random.seed(5)  # noqa: NPY002
    torch.manual_seed(5)
    before = _global_states()
    for random_state in (0, None):
        PARSClassifier(**{**SMALL, "random_state": random_state, "augmentation": "standard"}).fit(
            X, y
        )
        after = _global_states()
        np.testing.assert_array_equal(before[0], after[0])
        assert torch.equal(before[1], after[1])


def test_the_seed_alone_decides_the_fit_whatever_the_global_state():
    X, y, _ = _toy()
    params = {**SMALL, "augmentation": "standard", "crop_seconds": 1.0}
    torch.manual_seed(1)
    np.random.seed(1)  # noqa: NPY002
    a = PARSClassifier(**params).fit(X, y).predict_proba(X)
    torch.manual_seed(2)
    np.random.seed(2)  # noqa: NPY002
    b = PARSClassifier(**params).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    c = PARSClassifier(**{**params, "random_state": 1}).fit(X, y).predict_proba(X)
    assert not np.allclose(a, c)
    # random_state=None: two fits differ (a fresh seed each), and say which seed they drew
    d1 = PARSClassifier(**{**params, "random_state": None}).fit(X, y)
    d2 = PARSClassifier(**{**params, "random_state": None}).fit(X, y)
    assert d1.seed_ != d2.seed_ and not np.allclose(d1.predict_proba(X), d2.predict_proba(X))


def test_fit_writes_no_file_unless_given_a_checkpoint_dir(tmp_path, monkeypatch):
    X, y, groups = _toy()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    saved = []
    original_save = torch.save
    monkeypatch.setattr(torch, "save", lambda *a, **k: saved.append(a[1]) or original_save(*a, **k))
    clf = PARSClassifier(**{**SMALL, "min_valid_groups": 2}).fit(X, y, groups=groups)
    assert clf.validation_ == "groups" and clf.pretrain_history_ is not None
    assert saved == [] and os.listdir(tmp_path) == []
    # asked for: the resumable pretraining state and the best fine-tuning epoch
    run = tmp_path / "run"
    PARSClassifier(**{**SMALL, "min_valid_groups": 2, "checkpoint_dir": run}).fit(
        X, y, groups=groups
    )
    assert (run / "finetune" / "best_params.pt").is_file()
    assert (run / "pretrain" / "config.json").is_file()


def test_one_validation_rule_for_arrays_and_windows():
    X, y, groups = _toy()
    windows = create_from_X_y(X, y, drop_last_window=False, sfreq=SFREQ)
    for ds, subject in zip(windows.datasets, groups, strict=True):
        ds.description["subject"] = int(subject)
        ds.metadata["subject"] = int(subject)  # braindecode keeps description columns here
    arrays = PARSClassifier(**{**SMALL, "min_valid_groups": 2}).fit(X, y, groups=groups)
    from_windows = PARSClassifier(**{**SMALL, "min_valid_groups": 2}).fit(windows)
    assert arrays.validation_ == from_windows.validation_ == "groups"
    np.testing.assert_allclose(arrays.predict_proba(X), from_windows.predict_proba(windows))
    assert "valid_loss" in arrays.history_[-1]
    # fewer groups than min_valid_groups, or none: no split, the last epoch, for both
    for clf in (
        PARSClassifier(**SMALL).fit(X, y, groups=groups),
        PARSClassifier(**SMALL).fit(X, y),
        PARSClassifier(**SMALL).fit(windows),
    ):
        assert clf.validation_ == "none" and "valid_loss" not in clf.history_[-1]
        assert len(clf.history_) == SMALL["max_epochs"]


def test_held_out_groups_are_whole_and_every_window_is_used_once(monkeypatch):
    X, y, groups = _toy(n=60, n_subjects=10)
    clf = PARSClassifier(**{**SMALL, "min_valid_groups": 2, "valid_fraction": 0.3})
    clf.seed_ = 0
    train, valid, rule = clf._split(y, groups)
    assert rule == "groups" and len(np.unique(groups[valid])) == 3
    assert not set(groups[train]) & set(groups[valid])
    assert sorted(np.concatenate([train, valid])) == list(range(60))


def test_groups_reach_fit_through_scikit_learns_metadata_routing():
    X, y, groups = _toy()
    seen = []

    class Recording(PARSClassifier):
        def fit(self, X, y=None, groups=None, **kwargs):
            seen.append(("fit", groups is not None))
            return super().fit(X, y, groups=groups, **kwargs)

        def score(self, X, y=None, sample_weight=None, groups=None):
            seen.append(("score", groups is not None))
            return super().score(X, y, sample_weight=sample_weight, groups=groups)

    with sklearn.config_context(enable_metadata_routing=True):
        clf = Recording(**{**SMALL, "min_valid_groups": 2}).set_fit_request(groups=True)
        scores = cross_val_score(clf, X, y, cv=GroupKFold(2), params={"groups": groups})
    # the scored groups reach score too (the aligned probe aligns each on its own)
    assert seen == [("fit", True), ("score", True)] * 2 and np.all(np.isfinite(scores))


def test_ctrl_c_during_fine_tuning_stops_fit():
    X, y, _ = _toy()
    clf = PARSClassifier(**{**SMALL, "pretrain_epochs": 0, "callbacks": [InterruptAt(2)]})
    with pytest.raises(KeyboardInterrupt):
        clf.fit(X, y)
    assert len(clf.history_) == 2


def test_ctrl_c_during_pretraining_stops_fit(monkeypatch):
    from braindecode_pars.training import PretrainNet

    X, y, _ = _toy()
    original = PretrainNet.get_default_callbacks

    def with_interrupt(self):
        return original(self) + [("interrupt", InterruptAt(1))]

    monkeypatch.setattr(PretrainNet, "get_default_callbacks", with_interrupt)
    finetuned = []
    monkeypatch.setattr(
        PARSClassifier, "initialize_module", lambda self: finetuned.append(1) or self
    )
    with pytest.raises(KeyboardInterrupt):
        PARSClassifier(**{**SMALL, "pretrain_epochs": 5}).fit(X, y)
    assert finetuned == []  # fine-tuning never started


def test_skorch_callbacks_pass_through():
    X, y, _ = _toy()
    stop = EarlyStopping(monitor="train_loss", patience=1, threshold=10.0)  # stops at once
    clf = PARSClassifier(**{**SMALL, "max_epochs": 20, "callbacks": [stop]}).fit(X, y)
    assert len(clf.history_) == 2  # the first epoch, then one without a 10x improvement


def test_save_params_and_load_params_round_trip(tmp_path):
    X, y, _ = _toy()
    a = PARSClassifier(**SMALL).fit(X, y)
    a.save_params(f_params=tmp_path / "params.pt")
    b = PARSClassifier(**{**SMALL, "random_state": 7, "max_epochs": 1}).fit(X, y)
    assert not np.allclose(a.predict_proba(X), b.predict_proba(X))
    b.load_params(f_params=tmp_path / "params.pt")
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-6)


def test_transform_gives_embeddings_a_linear_model_can_read():
    X, y, _ = _toy(96)
    Xt, yt, _ = _toy(64, seed=1)
    params = {**SMALL, "max_epochs": 30, "lr": 3e-3, "finetune": "full", "crop_seconds": 1.0}
    clf = PARSClassifier(**params).fit(X, y)
    Z = clf.transform(Xt)
    assert Z.shape == (64, 16)
    # the pooled token is what the head reads: a logistic regression on it does as well
    pipe = make_pipeline(clone(clf), LogisticRegression()).fit(X, y)
    assert pipe.score(Xt, yt) > 0.85 and clf.score(Xt, yt) > 0.85
    # with crops, the embedding is the mean over the evaluation crops
    from braindecode_pars.training.finetune import CodedWindows, FixedCrops

    crops = FixedCrops(CodedWindows(Xt, np.zeros(64)), clf.n_crop_, clf._eval_starts())
    clf.module_.eval()
    with torch.no_grad():
        per_crop = clf.module_(torch.stack([crops[i][0] for i in range(len(crops))]), True)
    np.testing.assert_allclose(Z, crops.average(per_crop.numpy()), rtol=1e-5, atol=1e-6)


def test_the_default_encoder_is_the_shipped_size_and_the_paper_size_is_one_argument():
    X, y, _ = _toy()
    params = {**SMALL, "encoder": None, "pretrain_epochs": 0, "max_epochs": 1}
    small = PARSClassifier(**params).fit(X, y).encoder_
    assert (small.emb_dim, small.depth, small.n_heads, small.ff_dim) == (64, 4, 4, 128)
    paper = PARSClassifier(**{**params, "encoder": "paper"}).fit(X, y).encoder_
    assert (paper.emb_dim, paper.depth, paper.n_heads, paper.ff_dim) == (512, 8, 8, 512)


def test_in_fit_pretraining_validates_on_whole_groups(monkeypatch):
    """With ``groups``, the pretext skill of fit's own pretraining is measured on whole
    subjects held out of pretraining, not on windows of subjects it trains on."""
    import importlib

    from braindecode_pars.datasets import SingleChannelWindows

    pretrain_module = importlib.import_module("braindecode_pars.training.pretrain")

    # the rule itself: a view with split_groups is split by them
    view = SingleChannelWindows(np.zeros((20, 2, 60), np.float32))
    view.split_groups = np.repeat(list("abcde"), 4)
    valid = pretrain_module.held_out_recordings(view, 0.2)
    held = set(view.split_groups[valid])
    assert len(held) == 1 and len(valid) == 4
    assert not held & set(np.delete(view.split_groups, valid))
    view.split_groups = view.split_groups[:-1]
    with pytest.raises(ValueError, match="'split_groups' has 19 labels"):
        pretrain_module.held_out_recordings(view, 0.2)

    seen = []
    original = pretrain_module.held_out_recordings

    def recording(dataset, fraction, seed=0):
        valid = original(dataset, fraction, seed)
        seen.append((np.asarray(dataset.split_groups), valid))
        return valid

    monkeypatch.setattr(pretrain_module, "held_out_recordings", recording)
    X, y, groups = _toy(n=60, n_subjects=6)
    params = dict(SMALL, finetune="full", pretrain_epochs=1, pretrain_valid_fraction=0.2)
    clf = PARSClassifier(**params).fit(X, y, groups=groups)
    split_groups, valid = seen[0]
    assert valid is not None and len(split_groups) == len(X)
    train = np.delete(split_groups, valid)
    assert set(split_groups[valid]) and not set(split_groups[valid]) & set(train)
    assert set(split_groups) == {f"group {g}" for g in range(6)}
    assert np.isfinite(clf.pretrain_history_[-1, "valid_skill"])
    assert clf.pretrain_history_[-1, "valid_split"] == "groups"
