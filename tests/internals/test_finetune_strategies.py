"""Fine-tuning strategies, the amplitude path, group-wise epoch selection (PARSFineTuner),
the pretraining defaults (PARSPretrainer), and the heads PARSClassifier composes."""

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer, PARSProbe, PatchEncoder
from braindecode_pars.estimators._validation import group_split
from braindecode_pars.models.multichannel import MultiChannelClassifier

from .._learning import SEED, learned
from ..conftest import SMALL_ENCODER

pytestmark = pytest.mark.usefixtures("one_thread")
#: A 16-feature, one-block encoder (conftest.SMALL_ENCODER): fits in a fraction of a second.
TINY = SMALL_ENCODER
SMALL = dict(sfreq=100, verbose=0, random_state=SEED)
#: A tiny pretrainer's settings (PARS's pair task on 6 patches, half of them masked).
PRETRAIN = dict(TINY, n_patches=6, pos_mask_ratio=0.5, **SMALL)


def _amplitude_task(n=48, seed=0):
    """Two classes that differ only in amplitude: instance normalisation hides them."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = rng.standard_normal((n, 2, 300)).astype(np.float32)
    X *= np.where(y == 1, 4.0, 1.0)[:, None, None]
    return X * 1e-5, y  # volts, as MNE gives them


def _encoder():
    torch.manual_seed(SEED)
    return PatchEncoder(sfreq=100, **TINY)


@pytest.mark.parametrize("strategy, changes", [("full", True), ("frozen", False), ("lp-ft", True)])
def test_strategies_train_the_encoder_or_leave_it(strategy, changes):
    X, y = _amplitude_task()
    encoder = _encoder()
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    # the token path in the model (token_gate="auto" may leave it, and the encoder, out)
    clf = PARSFineTuner(
        encoder=encoder, strategy=strategy, max_epochs=4, lr=1e-3, token_gate=True, **SMALL
    )
    clf.fit(X, y)
    after = clf.encoder_.state_dict()
    moved = any(not torch.equal(before[k], after[k]) for k in before)
    assert moved is changes
    # skorch's Freezer leaves the encoder frozen; lp-ft's Unfreezer thaws it
    assert all(p.requires_grad is changes for p in clf.encoder_.parameters())
    assert len(clf.history_) == 4  # lp-ft: 2 epochs of the head, then 2 of everything
    for k in before:  # the caller's encoder is never trained
        assert torch.equal(before[k], encoder.state_dict()[k])


def test_the_amplitude_path_sees_what_normalisation_removes_in_any_unit():
    X, y = _amplitude_task(n=64, seed=SEED)
    Xt, yt = _amplitude_task(n=64, seed=SEED + 1)
    # the model's amplitude path, without the default augmentation's random draws
    params = dict(max_epochs=30, batch_size=16, lr=3e-3, augmentation=None, **SMALL)
    blind = PARSFineTuner(encoder=_encoder(), amplitude=False, **params).fit(X, y)
    seeing = PARSFineTuner(encoder=_encoder(), amplitude=True, **params).fit(X, y)
    learned(seeing.score(Xt, yt), above=0.9, what="with the amplitude path")
    # the encoder alone sees unit-variance noise
    learned(blind.score(Xt, yt), below=0.75, what="without the amplitude path")
    in_uv = PARSFineTuner(encoder=_encoder(), amplitude=True, **params).fit(X * 1e6, y)
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
        n_heads=2,
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
    # a channel zeroed by augmentation (ChannelsDropout) stands at the batch mean of its
    # channel instead of log(tiny); the cumulative mean is the mean of the batch means
    dropped = batches[0].clone()
    dropped[:2, 1] = 0
    mean_before = model.amplitude_norm.running_mean.clone()
    model(dropped)
    assert model.amplitude_norm.running_mean[1] > mean_before[1] - 1  # not pulled to -87
    expected_1 = torch.cat([log_std[:, 1], dropped[:, 1].std(dim=-1)[2:].log()])
    fill = dropped[2:, 1].std(dim=-1).log().mean()
    expected_1 = torch.cat([expected_1, fill.repeat(2)])
    torch.testing.assert_close(model.amplitude_norm.running_mean[1], expected_1.mean())


def test_groups_hold_out_whole_subjects_or_keep_the_last_epoch():
    X, y = _amplitude_task(n=48)
    params = dict(encoder=_encoder(), max_epochs=3, **SMALL)
    four = np.repeat([10, 11, 12, 13], 12)
    default = PARSFineTuner(**params).fit(X, y, groups=four)  # min_valid_groups=None
    assert "valid_loss" not in default.history_[-1] and len(default.history_) == 3
    assert default.validation_ == "none"
    # None never splits, however many groups; an int splits from that many on
    many = np.arange(48)  # one window per group
    assert group_split(y, many, None, 0.2, 0)[1:] == (None, "none")
    assert group_split(y, many, 48, 0.2, 0)[2] == "groups"
    assert group_split(y, many, 49, 0.2, 0)[1:] == (None, "none")
    train_idx, valid_idx, rule = group_split(y, four, 3, 0.25, 0)
    assert set(four[valid_idx]).isdisjoint(four[train_idx]) and len(set(four[valid_idx])) == 1
    clf = PARSFineTuner(valid_fraction=0.25, min_valid_groups=3, **params).fit(X, y, groups=four)
    assert "valid_loss" in clf.history_[-1] and clf.validation_ == rule == "groups"
    two = np.repeat([10, 11], 24)
    clf = PARSFineTuner(min_valid_groups=3, **params).fit(X, y, groups=two)
    assert "valid_loss" not in clf.history_[-1] and len(clf.history_) == 3
    with pytest.raises(ValueError, match=r"'groups' must have shape \(48,\)"):
        PARSFineTuner(**params).fit(X, y, groups=two[:10])


def test_default_pretraining_learns_on_a_few_hundred_windows():
    rng = np.random.default_rng(SEED)
    t = np.linspace(0, 1, 300)
    # a ramp gives every patch's position away: a pretext task with a known answer
    X = (rng.uniform(0.5, 4, (200, 2, 1)) * t + rng.standard_normal((200, 2, 1))).astype(np.float32)
    pretrainer = PARSPretrainer(steps=300, **PRETRAIN).fit(X)
    history = pretrainer.history_
    learned(history[-1, "valid_skill"], above=0.5)  # 0 = predicting no shift
    assert max(history[:, "lr"]) == pytest.approx(1e-3, rel=0.05)  # the default lr
    steps = sum(row["train_batch_count"] for row in history)
    assert 300 <= steps < 300 + len(history)


def test_the_paper_preset_is_one_argument_away(monkeypatch):
    import importlib

    run = importlib.import_module("braindecode_pars.pretraining._run")
    seen = {}

    class Stop(Exception):
        pass

    def fake_net(model, **kwargs):
        seen.update(kwargs, n_times=model.n_times)
        raise Stop

    monkeypatch.setattr(run, "PretrainNet", fake_net)
    X = np.random.default_rng(0).standard_normal((40, 2, 3000)).astype(np.float32)
    with pytest.raises(Stop):
        PARSPretrainer(preset="paper", **PRETRAIN).fit(X)
    assert (seen["lr"], seen["batch_size"], seen["max_epochs"]) == (1e-4, 512, 1000)
    assert seen["n_times"] == 3000  # 30-s crops
    with pytest.raises(Stop):
        PARSPretrainer(**PRETRAIN).fit(X)
    assert (seen["lr"], seen["batch_size"], seen["n_times"]) == (1e-3, 64, 1000)
    with pytest.raises(ValueError, match="Allowed values are 'full', 'frozen' and 'lp-ft'"):
        PARSFineTuner(strategy="linear", **SMALL).fit(X, np.repeat([0, 1], 20))
    with pytest.raises(TypeError, match=r"'head' must be None or a classifier .*\('linear'\)"):
        PARSClassifier(_encoder(), head="linear", **SMALL).fit(X, np.repeat([0, 1], 20))


def test_the_default_head_is_the_probe_and_leaves_the_encoder_as_it_was():
    X, y = _amplitude_task()
    encoder = _encoder()
    pretrained = PARSClassifier(encoder, **SMALL).fit(X, y)
    assert pretrained.head is None and type(pretrained.head_) is PARSProbe  # as given
    assert pretrained.pretrainer_ is None  # an encoder given is used as it is
    for k, v in encoder.state_dict().items():  # the probe leaves the encoder as it was
        assert torch.equal(v, pretrained.encoder_.state_dict()[k])
    # training from scratch: a random encoder (no pretraining), every weight trained
    scratch = PARSClassifier(PARSPretrainer(max_epochs=0, **TINY), PARSFineTuner(max_epochs=2))
    scratch.set_params(**SMALL).fit(X, y)
    assert scratch.head_.strategy == "full" and scratch.pretrain_history_ is None
    assert PARSClassifier().head is None and PARSFineTuner().strategy == "full"


def test_the_probe_sees_amplitude_that_the_frozen_head_cannot():
    X, y = _amplitude_task(n=64, seed=SEED)
    Xt, yt = _amplitude_task(n=64, seed=SEED + 1)
    encoder = _encoder()
    probe = PARSClassifier(encoder, PARSProbe(), **SMALL).fit(X, y)
    # log band power carries the 4-fold amplitude
    learned(probe.score(Xt, yt), above=0.95, what="the probe")
    head = PARSClassifier(encoder, PARSFineTuner(strategy="frozen", max_epochs=10), **SMALL)
    # the encoder sees unit-variance noise
    learned(head.fit(X, y).score(Xt, yt), below=0.75, what="the frozen head")


def test_the_probe_pretrains_first_without_an_encoder():
    X, y = _amplitude_task(n=32)
    pretrainer = PARSPretrainer(max_epochs=2, batch_size=16, **PRETRAIN)
    clf = PARSClassifier(pretrainer, **SMALL).fit(X, y)
    assert type(clf.head_) is PARSProbe and len(clf.pretrain_history_) == 2
    assert clf.predict(X).shape == (32,)
    assert clf.encoder_ is clf.pretrainer_.encoder_ and clf.head_.encoder is clf.encoder_


def test_settings_a_head_does_not_have_are_refused_at_once():
    X, y = _amplitude_task(n=8)
    clf = PARSClassifier(_encoder(), PARSProbe(), **SMALL)
    for name in ("augmentation", "amplitude", "max_epochs"):
        with pytest.raises(ValueError, match=rf"Invalid parameter '{name}' for estimator PARSP"):
            clf.set_params(**{f"head__{name}": 1})
    with pytest.raises(TypeError, match="max_epochs"):
        PARSProbe(max_epochs=1)


def test_a_validation_set_for_the_probe_is_refused_before_the_windows_are_read(monkeypatch):
    import braindecode_pars.estimators.classifier as classifier

    def no_reading(*args, **kwargs):
        raise AssertionError("the windows were read before the parameters were checked")

    monkeypatch.setattr(classifier, "read_input", no_reading)
    X, y = _amplitude_task(n=8)
    with pytest.raises(TypeError, match=r"'X_valid', which no stage's fit takes \(PARSProbe\)"):
        PARSClassifier(_encoder(), **SMALL).fit(X, y, X_valid=X, y_valid=y)


def _learning_rates(clf):
    """Each parameter's name -> the learning rate of its optimizer group."""
    names = {id(p): n for n, p in clf.module_.named_parameters()}
    rates = {}
    for group in clf.optimizer_.param_groups:
        for p in group["params"]:
            assert names[id(p)] not in rates, "a parameter in two groups"
            rates[names[id(p)]] = group["lr"]
    assert set(rates) == set(names.values()), "a parameter in no group"
    return rates


def test_layer_decay_and_encoder_lr_scale_give_each_encoder_block_its_rate():
    X, y = _amplitude_task(n=16)
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=100, **dict(TINY, depth=3))
    params = dict(encoder=encoder, lr=1e-3, max_epochs=1, lr_schedule="constant", **SMALL)
    rates = _learning_rates(
        PARSFineTuner(encoder_lr_scale=0.5, layer_decay=0.1, **params).fit(X, y)
    )
    for name, rate in rates.items():
        parts = name.split(".")
        if parts[0] != "encoder":
            expected = 1e-3  # the head
        elif parts[1] == "norm":
            expected = 5e-4  # after the last block
        elif parts[1] == "blocks":
            expected = 5e-4 * 0.1 ** (3 - int(parts[2]))  # block 2 (the last): 5e-5
        else:
            expected = 5e-4 * 0.1**4  # tokenizer, position-mask token
        assert rate == pytest.approx(expected, rel=1e-9), name
    assert set(_learning_rates(PARSFineTuner(**params).fit(X, y)).values()) == {1e-3}
    with pytest.raises(ValueError, match=r"'layer_decay' must lie in \(0, 1\], but got 1.5"):
        PARSFineTuner(layer_decay=1.5, **SMALL).fit(X, y)


def test_the_epoch_of_best_validation_balanced_accuracy_is_restored():
    from sklearn.metrics import balanced_accuracy_score

    X, y = _amplitude_task(n=64)
    Xv, yv = _amplitude_task(n=32, seed=1)
    yv = 1 - yv  # the more it learns the task, the worse on these: an early best epoch
    clf = PARSFineTuner(
        encoder=_encoder(), amplitude=True, valid_monitor="balanced_accuracy", max_epochs=8,
        lr=3e-3, **SMALL,
    ).fit(X, y, X_valid=Xv, y_valid=yv)  # fmt: skip
    scores = np.asarray(clf.history_[:, "valid_bal_acc"])
    best = int(scores.argmax())
    assert scores[-1] < scores[best], "the test needs a best epoch before the last"
    assert balanced_accuracy_score(yv, clf.predict(Xv)) == pytest.approx(scores[best])
    with pytest.raises(ValueError, match="'valid_monitor'.*'loss' and 'balanced_accuracy'"):
        PARSFineTuner(valid_monitor="accuracy", **SMALL).fit(X, y)


def _subjects_task(n_subjects, per_subject=16, seed=0):
    """Two classes across subjects: the frequency of an oscillation in noise (8 or 20 Hz,
    random phase), each subject with its own gain per channel and noise level."""
    rng = np.random.default_rng(seed)
    t = np.arange(300) / 100
    X, y, groups = [], [], []
    for subject in range(n_subjects):
        gain = rng.uniform(0.3, 3.0, (2, 1))
        noise = rng.uniform(0.2, 0.5)
        for i in range(per_subject):
            freq = (8.0, 20.0)[i % 2] + rng.uniform(-1, 1)
            phase = rng.uniform(0, 2 * np.pi, (2, 1))
            x = np.sin(2 * np.pi * freq * t + phase) + noise * rng.standard_normal((2, 300))
            X.append(gain * x)
            y.append(i % 2)
            groups.append(subject)
    return np.asarray(X, np.float32) * 1e-5, np.asarray(y), np.asarray(groups)


def test_the_defaults_learn_across_subjects_and_a_group_split_holds_whole_subjects_out():
    X, y, groups = _subjects_task(8, seed=SEED)
    Xt, yt, _ = _subjects_task(4, seed=SEED + 1)  # four new subjects
    clf = PARSFineTuner(encoder=_encoder(), **SMALL)
    assert clf.augmentation is None and clf.min_valid_groups is None
    clf.fit(X, y, groups=groups)
    assert clf.validation_ == "none" and len(clf.history_) == clf.max_epochs
    learned(clf.score(Xt, yt), above=0.75)  # chance: 0.5
    train, valid, rule = group_split(y, groups, 4, 0.25, seed=0)
    assert rule == "groups" and len(np.unique(groups[valid])) == 2  # 2 of 8 subjects
    assert set(groups[train]).isdisjoint(groups[valid])
    assert len(train) + len(valid) == len(y)
    for subject in np.unique(groups[valid]):  # every window of a held-out subject
        assert np.all(np.isin(np.flatnonzero(groups == subject), valid))
    split = PARSFineTuner(encoder=_encoder(), min_valid_groups=4, valid_fraction=0.25, **SMALL)
    assert split.set_params(max_epochs=2).fit(X, y, groups=groups).validation_ == "groups"


def test_align_groups_fits_and_predicts_as_on_windows_aligned_beforehand():
    from braindecode_pars.features.scaling import AlignSignals

    X, y, groups = _subjects_task(4)
    Xt, yt, gt = _subjects_task(2, seed=1)
    params = dict(encoder=_encoder(), max_epochs=3, **SMALL)
    aligned = PARSFineTuner(align="groups", **params).fit(X, y, groups=groups)
    aligner = AlignSignals().fit(X, groups=groups)
    by_hand = PARSFineTuner(**params).fit(aligner.transform(X, groups), y)
    expected = by_hand.predict_proba(aligner.transform(Xt, gt))
    np.testing.assert_allclose(aligned.predict_proba(Xt, groups=gt), expected, atol=1e-5)
    np.testing.assert_allclose(aligned.fit_transform(X, y, groups=groups), (
        aligned.transform(X, groups)), atol=1e-6)  # fmt: skip
    # without groups at predict, the windows given are one group: another alignment
    assert not np.allclose(aligned.predict_proba(Xt), expected, atol=1e-3)
    # PARSClassifier hands a fine-tuning head the groups of predict
    head = PARSFineTuner(align="groups", max_epochs=3, **SMALL)
    clf = PARSClassifier(params["encoder"], head, sfreq=100, verbose=0)
    clf.fit(X, y, groups=groups)
    np.testing.assert_allclose(clf.predict_proba(Xt, groups=gt), expected, atol=1e-5)
    with pytest.warns(UserWarning, match="fit has no groups"):
        PARSFineTuner(align="groups", **params).set_params(max_epochs=1).fit(X, y)
    with pytest.raises(ValueError, match="'align'.*Allowed values are None and 'groups'"):
        PARSFineTuner(align="subject", **SMALL).fit(X, y)


def test_aligned_fine_tuning_learns_across_subjects_mixed_differently():
    """Aligned on each subject's own windows, fine-tuning still learns the class (the
    frequency of an oscillation) and scores new subjects, whose channels are mixed
    anew, above chance."""
    X, y, groups = _subjects_task(8, seed=SEED)
    rng = np.random.default_rng(SEED + 3)
    Xt, yt, gt = _subjects_task(4, seed=SEED + 1)
    for subject in range(4):  # new subjects: their channels mixed anew
        rows = gt == subject
        mixing = np.eye(2) + 0.4 * rng.standard_normal((2, 2))
        Xt[rows] = np.einsum("ij,njt->nit", mixing, Xt[rows])
    clf = PARSFineTuner(encoder=_encoder(), align="groups", **SMALL).fit(X, y, groups=groups)
    learned(clf.score(Xt, yt, groups=gt), above=0.75)  # chance: 0.5


def test_aligned_fine_tuning_reads_the_subjects_of_braindecode_windows():
    from braindecode.datasets import create_from_X_y

    def windows_of(X, y, groups):
        windows = create_from_X_y(X, y, drop_last_window=False, sfreq=100)
        for ds, subject in zip(windows.datasets, groups, strict=True):
            ds.description["subject"] = int(subject)
            ds.metadata["subject"] = int(subject)
        return windows

    X, y, groups = _subjects_task(3, per_subject=8)
    Xt, yt, gt = _subjects_task(2, per_subject=8, seed=1)
    params = dict(encoder=_encoder(), align="groups", max_epochs=2, **SMALL)
    arrays = PARSFineTuner(**params).fit(X, y, groups=groups)
    windows = PARSFineTuner(**params).fit(windows_of(X, y, groups))
    expected = arrays.predict_proba(Xt, groups=gt)
    np.testing.assert_allclose(windows.predict_proba(windows_of(Xt, yt, gt)), expected, atol=1e-5)
    np.testing.assert_allclose(arrays.predict_proba(windows_of(Xt, yt, gt)), expected, atol=1e-5)


def test_the_warmup_cosine_schedule_sets_each_steps_rate():
    X, y = _amplitude_task(n=16)
    clf = PARSFineTuner(
        encoder=_encoder(), lr=1e-3, lr_schedule="warmup-cosine", max_epochs=10, batch_size=4,
        augmentation=None, **SMALL,
    ).fit(X, y)  # fmt: skip
    rates = [b["event_lr"] for epoch in clf.history for b in epoch["batches"]]
    assert len(rates) == 40
    steps = np.arange(40) / 40  # progress of each step, as WarmupCosineLR counts it
    warm = 0.1 + 0.9 * np.minimum(steps / 0.1, 1)
    cosine = 0.5 * (1 + np.cos(np.pi * np.clip((steps - 0.1) / 0.9, 0, 1)))
    expected = 1e-3 * np.where(steps < 0.1, warm, cosine)
    np.testing.assert_allclose(rates, expected, rtol=1e-6)
    # each group keeps its share (the encoder's), and a partial_fit runs the curve again
    scaled = PARSFineTuner(
        encoder=_encoder(), lr=1e-3, lr_schedule="warmup-cosine", max_epochs=3, batch_size=5,
        encoder_lr_scale=0.1, augmentation=None, **SMALL,
    ).fit(X, y)  # fmt: skip
    rates = [b["event_lr"] for epoch in scaled.history for b in epoch["batches"]]
    assert len(rates) == 12 and rates[-1] > 0  # 16 windows: 4 batches, the last of 1, counted
    scaled.partial_fit(X, y)
    again = [b["event_lr"] for epoch in scaled.history[3:] for b in epoch["batches"]]
    np.testing.assert_allclose(again, rates, rtol=1e-6)
    groups = {round(g["lr"] / g["lr_scale"], 12) for g in scaled.optimizer_.param_groups}
    assert len(groups) == 1  # one curve ...
    assert {g["lr_scale"] for g in scaled.optimizer_.param_groups} == {0.1, 1.0}  # ... scaled
    constant = PARSFineTuner(
        encoder=_encoder(), lr=1e-3, lr_schedule="constant", max_epochs=2, batch_size=4, **SMALL
    )
    constant.fit(X, y)
    assert {g["lr"] for g in constant.optimizer_.param_groups} == {1e-3}
    assert "event_lr" not in constant.history[-1, "batches", -1]
    with pytest.raises(ValueError, match=r"'lr_schedule'.*'constant' and 'warmup-cosine'"):
        PARSFineTuner(lr_schedule="cosine").fit(X, y)
