"""PARSClassifier and its stages by design: randomness, disk, validation, interrupts,
skorch's API on the neural head."""

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

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer, PatchEncoder
from braindecode_pars.estimators._validation import group_split
from braindecode_pars.models.encoder_config import ENCODER_SIZES

from .._learning import SEED, learned
from ..conftest import SMALL_ENCODER, InterruptAt

SFREQ = 50.0
pytestmark = pytest.mark.usefixtures("one_thread")
#: A 16-feature, one-block encoder (conftest.SMALL_ENCODER): fits in a fraction of a second.
TINY = SMALL_ENCODER


def small(**params):
    """The neural path: a tiny PARSPretrainer (2 epochs of batch 16) and a frozen
    PARSFineTuner (4 epochs), seeded and quiet; ``params`` by nested names."""
    clf = PARSClassifier(
        PARSPretrainer(**TINY, n_patches=6, max_epochs=2, batch_size=16, verbose=0),
        PARSFineTuner(strategy="frozen", max_epochs=4, batch_size=16, verbose=0),
        sfreq=SFREQ,
        random_state=0,
        verbose=0,
    )
    return clf.set_params(**params)


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
        small(random_state=random_state, head__augmentation="standard").fit(X, y)
        after = _global_states()
        np.testing.assert_array_equal(before[0], after[0])
        assert torch.equal(before[1], after[1])


def test_the_seed_alone_decides_the_fit_whatever_the_global_state():
    X, y, _ = _toy()
    params = dict(head__augmentation="standard", head__crop_seconds=1.0)
    torch.manual_seed(1)
    np.random.seed(1)  # noqa: NPY002
    a = small(**params).fit(X, y).predict_proba(X)
    torch.manual_seed(2)
    np.random.seed(2)  # noqa: NPY002
    b = small(**params).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    c = small(**params, random_state=1).fit(X, y).predict_proba(X)
    assert not np.allclose(a, c)
    # random_state=None: two fits differ (a fresh seed each), and say which seed they drew
    d1 = small(**params, random_state=None).fit(X, y)
    d2 = small(**params, random_state=None).fit(X, y)
    assert d1.head_.seed_ != d2.head_.seed_
    assert not np.allclose(d1.predict_proba(X), d2.predict_proba(X))


def test_fit_writes_no_file_unless_given_a_checkpoint_dir(tmp_path, monkeypatch):
    X, y, groups = _toy()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    saved = []
    original_save = torch.save
    monkeypatch.setattr(torch, "save", lambda *a, **k: saved.append(a[1]) or original_save(*a, **k))
    clf = small(head__min_valid_groups=2).fit(X, y, groups=groups)
    assert clf.head_.validation_ == "groups" and clf.pretrain_history_ is not None
    assert saved == [] and os.listdir(tmp_path) == []
    # asked for: the resumable pretraining state and the best fine-tuning epoch
    run = tmp_path / "run"
    small(head__min_valid_groups=2, encoder__checkpoint_dir=run, head__checkpoint_dir=run).fit(
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
    arrays = small(head__min_valid_groups=2).fit(X, y, groups=groups)
    from_windows = small(head__min_valid_groups=2).fit(windows)
    assert arrays.head_.validation_ == from_windows.head_.validation_ == "groups"
    np.testing.assert_allclose(arrays.predict_proba(X), from_windows.predict_proba(windows))
    assert "valid_loss" in arrays.head_.history_[-1]
    # fewer groups than min_valid_groups, or none: no split, the last epoch, for both
    for clf in (
        small().fit(X, y, groups=groups),
        small().fit(X, y),
        small().fit(windows),
    ):
        assert clf.head_.validation_ == "none" and "valid_loss" not in clf.head_.history_[-1]
        assert len(clf.head_.history_) == 4


def test_held_out_groups_are_whole_and_every_window_is_used_once():
    X, y, groups = _toy(n=60, n_subjects=10)
    train, valid, rule = group_split(y, groups, min_valid_groups=2, valid_fraction=0.3, seed=0)
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
        clf = Recording(**small(head__min_valid_groups=2).get_params(deep=False))
        clf.set_fit_request(groups=True)
        # each stage asks for what it consumes, as scikit-learn's routers require
        clf.encoder.set_fit_request(groups=True)
        clf.head.set_fit_request(groups=True)
        scores = cross_val_score(clf, X, y, cv=GroupKFold(2), params={"groups": groups})
    # the scored groups reach score too (the aligned probe aligns each on its own)
    assert seen == [("fit", True), ("score", True)] * 2 and np.all(np.isfinite(scores))


def test_ctrl_c_during_fine_tuning_stops_fit():
    X, y, _ = _toy()
    encoder = PatchEncoder(sfreq=SFREQ, **TINY)
    head = PARSFineTuner(encoder=encoder, max_epochs=4, sfreq=SFREQ, verbose=0)
    head.set_params(callbacks=[InterruptAt(2)])
    with pytest.raises(KeyboardInterrupt):
        head.fit(X, y)
    assert len(head.history_) == 2 and head.interrupted_


def test_ctrl_c_during_pretraining_stops_fit(monkeypatch):
    from braindecode_pars.pretraining.net import PretrainNet

    X, y, _ = _toy()
    original = PretrainNet.get_default_callbacks

    def with_interrupt(self):
        return original(self) + [("interrupt", InterruptAt(1))]

    monkeypatch.setattr(PretrainNet, "get_default_callbacks", with_interrupt)
    finetuned = []
    monkeypatch.setattr(
        PARSFineTuner, "initialize_module", lambda self: finetuned.append(1) or self
    )
    with pytest.raises(KeyboardInterrupt):
        small(encoder__max_epochs=5).fit(X, y)
    assert finetuned == []  # fine-tuning never started


def test_skorch_callbacks_pass_through():
    X, y, _ = _toy()
    stop = EarlyStopping(monitor="train_loss", patience=1, threshold=10.0)  # stops at once
    clf = small(head__max_epochs=20, head__callbacks=[stop]).fit(X, y)
    assert len(clf.head_.history_) == 2  # the first epoch, then one without a 10x improvement


def test_save_params_and_load_params_round_trip(tmp_path):
    X, y, _ = _toy()
    a = small().fit(X, y)
    a.head_.save_params(f_params=tmp_path / "params.pt")
    b = small(random_state=7, head__max_epochs=1).fit(X, y)
    assert not np.allclose(a.predict_proba(X), b.predict_proba(X))
    b.head_.load_params(f_params=tmp_path / "params.pt")
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-6)


def test_transform_gives_embeddings_a_linear_model_can_read():
    X, y, _ = _toy(96, seed=SEED)
    Xt, yt, _ = _toy(64, seed=SEED + 1)
    params = dict(head__max_epochs=30, head__lr=3e-3, head__strategy="full", random_state=SEED)
    clf = small(**params, head__crop_seconds=1.0).fit(X, y)
    Z = clf.transform(Xt)
    assert Z.shape == (64, 16 + X.shape[1])  # the token and each virtual channel's band power
    # the pooled token is what the head reads: a logistic regression on it does as well
    pipe = make_pipeline(clone(clf), LogisticRegression()).fit(X, y)
    learned(pipe.score(Xt, yt), above=0.85, what="logistic regression on the embeddings")
    learned(clf.score(Xt, yt), above=0.85, what="the classifier")
    # with crops, the embedding is the mean over the evaluation crops
    from braindecode_pars.estimators._coded_windows import CodedWindows
    from braindecode_pars.estimators._crops import FixedCrops

    head = clf.head_
    crops = FixedCrops(CodedWindows(Xt, np.zeros(64)), head.n_crop_, head._eval_starts())
    head.module_.eval()
    with torch.no_grad():
        windows = torch.stack([crops[i][0] for i in range(len(crops))])
        per_crop = head.module_(windows, return_features=True)["features"]
    np.testing.assert_allclose(Z, crops.average(per_crop.numpy()), rtol=1e-5, atol=1e-6)


def test_the_default_encoder_is_the_small_size_and_the_paper_size_is_one_argument():
    X, y, _ = _toy()
    small_encoder = PARSPretrainer(max_epochs=0, sfreq=SFREQ).fit(X).encoder_
    size = (small_encoder.emb_dim, small_encoder.depth, small_encoder.n_heads)
    assert (*size, small_encoder.ff_dim) == (64, 4, 4, 128)
    paper = PARSPretrainer(**ENCODER_SIZES["paper"], max_epochs=0, sfreq=SFREQ).fit(X).encoder_
    assert (paper.emb_dim, paper.depth, paper.n_heads, paper.ff_dim) == (512, 8, 8, 512)
    # the neural head with encoder=None trains a new one of the small size from scratch
    scratch = PARSFineTuner(encoder=None, max_epochs=1, sfreq=SFREQ).fit(X, y).encoder_
    assert (scratch.emb_dim, scratch.depth, scratch.n_heads, scratch.ff_dim) == (64, 4, 4, 128)


def test_in_fit_pretraining_validates_on_whole_groups(monkeypatch):
    """With ``groups``, the pretext skill of fit's own pretraining is measured on whole
    subjects held out of pretraining, not on windows of subjects it trains on."""
    import importlib

    from braindecode_pars.pretraining._views import SingleChannelWindows

    pretrain_module = importlib.import_module("braindecode_pars.pretraining._validation")

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
    params = dict(head__strategy="full", encoder__max_epochs=1, encoder__valid_fraction=0.2)
    clf = small(**params).fit(X, y, groups=groups)
    split_groups, valid = seen[0]
    assert valid is not None and len(split_groups) == len(X)
    train = np.delete(split_groups, valid)
    assert set(split_groups[valid]) and not set(split_groups[valid]) & set(train)
    assert set(split_groups) == {f"group {g}" for g in range(6)}
    assert np.isfinite(clf.pretrain_history_[-1, "valid_skill"])
    assert clf.pretrain_history_[-1, "valid_split"] == "groups"


def test_with_two_workers_each_draws_its_own_augmentations():
    """braindecode's AugmentedDataLoader applies the transforms in each DataLoader worker,
    each holding a copy of the fit's one RandomState: alone, both workers draw the same
    augmentations. The fine-tuner's training loader reseeds each worker's transforms
    from torch's seed of that worker: the workers' batches of the same window differ,
    and a loader made after the same torch seed draws them again."""
    from braindecode.augmentation import AugmentedDataLoader

    from braindecode_pars.estimators._coded_windows import CodedWindows

    X, y, _ = _toy(n=16)
    workers = dict(iterator_train__num_workers=2, iterator_train__multiprocessing_context="fork")
    tuner = PARSFineTuner(
        encoder=PatchEncoder(sfreq=SFREQ, **TINY), max_epochs=1, batch_size=4, sfreq=SFREQ,
        random_state=0, verbose=0, augmentation="standard", **workers,
    ).fit(X, y)  # fmt: skip
    same = CodedWindows(np.repeat(X[:1], 8, axis=0), np.zeros(8, dtype=np.int64))

    def batches(loader):
        torch.manual_seed(1)  # the loader's base seed, so its workers' seeds
        return [b[0] for b in loader]  # workers 0, 1, 0, 1: each batch 2 copies of X[0]

    transforms = tuner._fit_state["transforms"]
    alike = batches(AugmentedDataLoader(
        same, transforms=transforms, batch_size=2, num_workers=2, multiprocessing_context="fork"
    ))  # fmt: skip
    assert torch.equal(alike[0], alike[1]) and torch.equal(alike[2], alike[3])
    tuner.batch_size = 2  # the training loader's batches
    drawn = batches(tuner.get_iterator(same, training=True))
    assert not torch.equal(drawn[0], drawn[1]) and not torch.equal(drawn[2], drawn[3])
    original = torch.as_tensor(X[:1]).expand(2, -1, -1)
    assert sum(not torch.equal(b, original) for b in drawn) >= 2  # augmented, mostly
    again = batches(tuner.get_iterator(same, training=True))
    assert all(torch.equal(a, b) for a, b in zip(drawn, again, strict=True))
