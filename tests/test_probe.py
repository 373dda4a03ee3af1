"""The linear probe: encoder features, block scaling, the pipeline."""

import numpy as np
import pytest
import torch
from pyriemann.estimation import Covariances
from pyriemann.tangentspace import TangentSpace
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from braindecode_pars import PARSClassifier, PARSProbe, PatchEncoder
from braindecode_pars.align import (
    AlignedProbe,
    align_covariances,
    align_features,
    covariance_reference,
    feature_reference,
)
from braindecode_pars.floor import BandPowerFeatures
from braindecode_pars.probe import BlockScaler, EncoderFeatures, probe_pipeline
from braindecode_pars.windows_input import LOGISTIC_MAX_ITER

from ._helpers import scaled_subjects


def small_encoder(seed=0, sfreq=100):
    torch.manual_seed(seed)
    return PatchEncoder(sfreq=sfreq, emb_dim=16, depth=1, n_heads=2, ff_dim=32)


def alpha_task(n=60, n_chans=3, n_times=400, seed=0):
    """Class 1: a 10 Hz rhythm on channel 0 twice as strong, unit noise elsewhere."""
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    t = np.arange(n_times) / 100
    alpha = np.sin(2 * np.pi * 10 * t + rng.uniform(0, 2 * np.pi, (n, 1, 1)))
    X = rng.standard_normal((n, n_chans, n_times))
    X[:, :1] += (1 + 2 * y[:, None, None]) * alpha
    return X, y


def test_block_scaler_total_variance_is_one_and_inverts():
    X = np.random.default_rng(0).standard_normal((300, 10)) * np.arange(1, 11) + 5
    scaler = BlockScaler().fit(X)
    Z = scaler.transform(X)
    assert Z.var(axis=0).sum() == pytest.approx(1.0)
    assert Z.var(axis=0) == pytest.approx(np.full(10, 0.1))
    np.testing.assert_allclose(scaler.inverse_transform(Z), X)


def test_encoder_features_equal_a_channel_by_channel_loop():
    encoder = small_encoder()
    X = np.random.default_rng(1).standard_normal((7, 3, 300)).astype(np.float32)
    features = EncoderFeatures(encoder, sfreq=100, batch_size=3, readout="mean").fit_transform(X)
    encoder.eval()
    with torch.no_grad():
        expected = np.concatenate(
            [encoder(torch.as_tensor(X[:, [c]])).mean(dim=1).numpy() for c in range(3)], axis=1
        )
    assert features.shape == (7, 48)
    np.testing.assert_allclose(features, expected, rtol=1e-5, atol=1e-6)


def test_encoder_features_leave_the_given_encoder_alone():
    encoder = small_encoder().train()
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    X = np.random.default_rng(2).standard_normal((4, 2, 200))
    step = EncoderFeatures(encoder, sfreq=100).fit(X)
    assert step.encoder_ is not encoder and encoder.training
    for k, v in encoder.state_dict().items():
        assert torch.equal(v, before[k])


def test_encoder_features_refuse_another_rate_and_bad_input():
    X = np.random.default_rng(3).standard_normal((4, 2, 400))
    with pytest.raises(ValueError, match="resample"):
        EncoderFeatures(small_encoder(), sfreq=200).fit(X)
    with pytest.raises(ValueError, match="'sfreq' is None"):
        EncoderFeatures(small_encoder()).fit(X)
    with pytest.raises(ValueError, match="batch_size"):
        EncoderFeatures(small_encoder(), sfreq=100, batch_size=0).fit(X)
    step = EncoderFeatures(small_encoder(), sfreq=100).fit(X)
    with pytest.raises(ValueError, match="3 channels but the features were fitted on 2"):
        step.transform(np.zeros((2, 3, 400)))


def test_probe_learns_built_data_and_clones():
    X, y = alpha_task()
    probe = probe_pipeline(small_encoder(), sfreq=100, tangent_space=True, random_state=0)
    assert list(probe.named_steps["features"].named_transformers) == [
        "encoder",
        "bandpower",
        "tangentspace",
    ]
    fitted = clone(probe).fit(X[:40], y[:40])
    assert fitted.score(X[40:], y[40:]) >= 0.9  # chance 0.5
    # the encoder block alone on a rhythm it never saw pretrained: still a valid model
    only_encoder = probe_pipeline(small_encoder(), sfreq=100, band_power=False).fit(X, y)
    assert only_encoder.predict(X).shape == (60,)


def test_probe_equals_its_blocks_computed_once():
    """What the development-task benchmark computes (features once per window, scalers
    and regression per fit) is the pipeline's prediction."""
    X, y = alpha_task(seed=4)
    encoder = small_encoder(5)
    train, test = np.arange(40), np.arange(40, 60)
    probe = probe_pipeline(encoder, sfreq=100, tangent_space=True, C=10.0, random_state=0)
    expected = probe.fit(X[train], y[train]).decision_function(X[test])

    enc = EncoderFeatures(encoder, sfreq=100).fit_transform(X)
    bp = BandPowerFeatures(sfreq=100).fit_transform(X)
    covs = Covariances(estimator="oas").fit_transform(X)
    ts = TangentSpace(metric="riemann").fit(covs[train])
    tr, te = [], []
    for F_tr, F_te in ((enc[train], enc[test]), (bp[train], bp[test])):
        scaler = BlockScaler().fit(F_tr)
        tr.append(scaler.transform(F_tr))
        te.append(scaler.transform(F_te))
    T_tr, T_te = ts.transform(covs[train]), ts.transform(covs[test])
    scaler = BlockScaler().fit(T_tr)
    tr.append(scaler.transform(T_tr))
    te.append(scaler.transform(T_te))
    model = LogisticRegression(
        C=10.0, class_weight="balanced", max_iter=LOGISTIC_MAX_ITER, random_state=0
    ).fit(np.hstack(tr), y[train])
    np.testing.assert_allclose(
        model.decision_function(np.hstack(te)), expected, rtol=1e-4, atol=1e-6
    )


def test_probe_needs_a_block():
    with pytest.raises(ValueError, match="'band_power' and 'tangent_space' are both False"):
        probe_pipeline(None, band_power=False)


# -- alignment within groups -------------------------------------------------------------
def test_align_features_standardises_each_group_on_its_own():
    rng = np.random.default_rng(0)
    F = rng.standard_normal((30, 4)) * [1, 2, 3, 4] + [5, 0, -2, 7]
    groups = np.repeat(["a", "b", "c"], 10)
    F[groups == "b", 2] = 3.0  # constant within a group: centred, not divided by 0
    out = align_features(F, groups)
    for g in "abc":
        rows = out[groups == g]
        np.testing.assert_allclose(rows.mean(axis=0), 0, atol=1e-12)
        expected_std = [1, 1, 0, 1] if g == "b" else [1, 1, 1, 1]
        np.testing.assert_allclose(rows.std(axis=0), expected_std, atol=1e-12)
    # one group's numbers never reach another's
    moved = F.copy()
    moved[groups == "a"] *= 100
    np.testing.assert_allclose(align_features(moved, groups)[10:], out[10:])


def test_align_covariances_recentres_each_group_on_the_identity():
    try:
        from pyriemann.geometry.mean import mean_riemann
    except ImportError:  # pyriemann < 0.12
        from pyriemann.utils.mean import mean_riemann

    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 3))
    C = Covariances().fit_transform(rng.standard_normal((12, 3, 200)))
    # the second group is the first one seen through another mixing of the channels
    C2 = A @ C @ A.T
    out = align_covariances(np.concatenate([C, C2]), np.repeat([0, 1], 12))
    for g in (0, 1):
        np.testing.assert_allclose(mean_riemann(out[12 * g : 12 * (g + 1)]), np.eye(3), atol=1e-6)
    # a congruence is undone up to a rotation, which keeps every eigenvalue
    np.testing.assert_allclose(
        np.linalg.eigvalsh(out[:12]), np.linalg.eigvalsh(out[12:]), rtol=1e-6
    )


def test_small_groups_are_shrunk_toward_the_training_groups():
    rng = np.random.default_rng(1)
    F = rng.standard_normal((25, 3)) * [1, 2, 3] + [4, 0, -1]
    groups = np.repeat(["a", "b", "c"], [10, 12, 3])
    train = groups != "c"
    reference = feature_reference(F[train], groups[train])
    a, b, c = (F[groups == g] for g in "abc")
    np.testing.assert_allclose(reference[0], (a.mean(0) + b.mean(0)) / 2)
    np.testing.assert_allclose(reference[1], (a.var(0) + b.var(0)) / 2)
    out = align_features(F, groups, reference)
    # groups of 8 windows or more: as without a reference
    np.testing.assert_allclose(out[train], align_features(F[train], groups[train]))
    # 3 windows: weight 3/8 on their own mean and variance
    w = 3 / 8
    mean = w * c.mean(0) + (1 - w) * reference[0]
    std = np.sqrt(w * c.var(0) + (1 - w) * reference[1])
    np.testing.assert_allclose(out[~train], (c - mean) / std)
    with pytest.raises(ValueError, match=r"'groups' has 1 group\(s\) of fewer than ALIGN_MIN"):
        align_features(F, groups)


def _spd_power(A, p):
    vals, vecs = np.linalg.eigh(A)
    return (vecs * vals**p) @ vecs.T


def test_small_covariance_groups_are_recentred_on_the_geodesic_to_the_reference():
    rng = np.random.default_rng(2)
    mix = np.eye(3) + 0.5 * rng.standard_normal((3, 3))
    C = Covariances().fit_transform(rng.standard_normal((21, 3, 300)))
    C[10:20] = mix @ C[10:20] @ mix.T
    groups = np.repeat([0, 1, 2], [10, 10, 1])
    train = groups < 2
    reference = covariance_reference(C[train], groups[train])
    # the Riemannian mean of two matrices is the midpoint of their geodesic
    try:
        from pyriemann.geometry.mean import mean_riemann
    except ImportError:  # pyriemann < 0.12
        from pyriemann.utils.mean import mean_riemann
    A, B = (mean_riemann(C[groups == g]) for g in (0, 1))
    half = _spd_power(A, 0.5)
    inv_half = _spd_power(A, -0.5)
    midpoint = half @ _spd_power(inv_half @ B @ inv_half, 0.5) @ half
    np.testing.assert_allclose(reference, midpoint, rtol=1e-6)
    out = align_covariances(C, groups, reference)
    np.testing.assert_allclose(out[train], align_covariances(C[train], groups[train]), rtol=1e-8)
    # one window: re-centred on the point 1/8 of the way from the reference to it
    R_half, R_inv_half = _spd_power(reference, 0.5), _spd_power(reference, -0.5)
    M = R_half @ _spd_power(R_inv_half @ C[20] @ R_inv_half, 1 / 8) @ R_half
    W = _spd_power(M, -0.5)
    np.testing.assert_allclose(out[20], W @ C[20] @ W, rtol=1e-6)
    with pytest.raises(ValueError, match="no reference to shrink them toward"):
        align_covariances(C, groups)


def test_aligned_probe_scores_a_subject_at_another_amplitude():
    """Trained on two subjects, scored on a third ten times louder: aligned, each
    subject's classes fall on the same side; unaligned, all of it looks like class 1."""
    X, y, groups = scaled_subjects([1.0, 2.0, 20.0])
    train, test = groups < 2, groups == 2
    aligned = AlignedProbe(None, sfreq=100).fit(X[train], y[train], groups[train])
    assert aligned.score(X[test], y[test]) > 0.9
    plain = probe_pipeline(None, sfreq=100).fit(X[train], y[train])
    assert plain.score(X[test], y[test]) < 0.6
    # the same through the tangent space alone (the covariances re-centred)
    ts = AlignedProbe(None, sfreq=100, band_power=False, tangent_space=True)
    assert ts.fit(X[train], y[train], groups[train]).score(X[test], y[test]) > 0.9


def test_aligned_probe_clones_pickles_and_checks_its_groups():
    import pickle

    X, y, groups = scaled_subjects([1.0, 3.0], n=16)
    encoder = PatchEncoder(sfreq=100, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    probe = AlignedProbe(encoder, sfreq=100, tangent_space=True, C=10.0)
    assert clone(probe).get_params()["C"] == 10.0
    fitted = probe.fit(X, y, groups)
    assert fitted.blocks_ == ["encoder", "bandpower", "tangentspace"]
    # 2 channels x (8 + 8) encoder features (mean and std), 2 x 6 band powers, 3 of the
    # tangent space
    assert fitted.transform(X, groups).shape == (32, 32 + 12 + 3)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X, groups), fitted.predict_proba(X, groups))
    # a few windows on their own: aligned on statistics shrunk toward the training groups'
    raw = [step.transform(X[:5]) for _, step, _ in fitted.feature_steps_]
    aligners = (align_features, align_features, align_covariances)
    manual = np.hstack(
        [
            scaler.transform(align(F, np.zeros(5), ref))
            for align, F, ref, scaler in zip(
                aligners, raw, fitted.references_, fitted.scalers_, strict=True
            )
        ]
    )
    np.testing.assert_allclose(fitted.transform(X[:5]), manual, rtol=1e-10)
    assert fitted.predict(X[:1]).shape == (1,)
    with pytest.raises(ValueError, match=r"ALIGN_MIN_WINDOWS=8.*the largest of 4 windows"):
        clone(probe).fit(X, y, np.arange(32) % 8)  # no group large enough to be a reference
    with pytest.raises(ValueError, match="'groups'"):
        fitted.predict(X, groups[:4])
    missing = groups.astype(float)
    missing[3] = np.nan
    with pytest.raises(ValueError, match=r"'groups' has 1 missing value"):
        fitted.predict(X, missing)
    # scikit-learn's argument order: score(X, y, sample_weight)
    np.testing.assert_allclose(
        fitted.score(X, y, np.ones(32), groups), fitted.score(X, y, groups=groups)
    )
    # a trait task: each subject holds one class, which alignment would erase
    trait = np.repeat([0, 1], 16)
    with pytest.warns(UserWarning, match="single class"):
        AlignedProbe(None, sfreq=100).fit(X, trait, groups)
    with pytest.raises(ValueError, match="needs at least one block"):
        AlignedProbe(None, sfreq=100, band_power=False).fit(X, y, groups)


# -- PARSProbe, the probe as a classifier ---------------------------------------------------
def _amplitude_task(n=40, seed=0):
    """Two classes that differ only in amplitude: instance normalisation hides them."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = rng.standard_normal((n, 2, 300)) * np.where(y == 1, 4.0, 1.0)[:, None, None]
    return X * 1e-5, y


def test_pars_probe_is_the_aligned_probe_or_probe_pipeline_over_the_encoder():
    X, y = _amplitude_task()
    Xt, _ = _amplitude_task(seed=1)
    groups, groups_t = np.repeat([0, 1], 20), np.repeat([5, 6], 20)
    encoder = small_encoder()
    probe = PARSProbe(encoder, C=3.0, align="groups", sfreq=100).fit(X, y, groups)
    reference = AlignedProbe(encoder, sfreq=100, tangent_space=True, C=3.0).fit(X, y, groups)
    np.testing.assert_allclose(
        probe.predict_proba(Xt, groups_t), reference.predict_proba(Xt, groups_t), atol=1e-6
    )
    # without groups at predict, all of Xt is one group: another alignment
    assert not np.allclose(probe.transform(Xt), probe.transform(Xt, groups_t))
    np.testing.assert_allclose(probe.predict_proba(Xt), reference.predict_proba(Xt), atol=1e-6)
    unaligned = PARSProbe(encoder, C=3.0, sfreq=100).fit(X, y, groups)
    assert unaligned.align is None  # the default
    reference = probe_pipeline(encoder, sfreq=100, tangent_space=True, C=3.0).fit(X, y)
    np.testing.assert_allclose(unaligned.predict_proba(Xt), reference.predict_proba(Xt), atol=1e-6)
    # features: 2 channels x 2 emb_dim of the encoder (mean and std), 2 x 6 band powers, 3
    # of the tangent space
    for fitted in (probe, unaligned):
        assert fitted.transform(Xt).shape == (40, 2 * 2 * encoder.emb_dim + 2 * 6 + 3)
        assert not hasattr(fitted, "module_") and not hasattr(fitted, "history_")
    # encoder=None: the classical blocks alone, through the same scaling and model
    floor = PARSProbe(sfreq=100).fit(X, y)
    reference = probe_pipeline(None, sfreq=100, tangent_space=True, C=100.0).fit(X, y)
    np.testing.assert_allclose(floor.predict_proba(Xt), reference.predict_proba(Xt), atol=1e-6)


def test_pars_probe_fit_transform_aligns_as_fit_does():
    X, y = _amplitude_task()
    groups = np.tile([0, 1], 20)
    probe = PARSProbe(small_encoder(), align="groups", sfreq=100)
    features = probe.fit_transform(X, y, groups=groups)
    np.testing.assert_allclose(features, probe.transform(X, groups), atol=1e-10)
    assert not np.allclose(features, probe.transform(X), atol=1e-6)  # one group: another
    with pytest.warns(UserWarning, match="fit has no groups"):
        probe.fit(X, y)
    # through the classifier too: its fit_transform hands the groups to transform
    clf = PARSClassifier(small_encoder(), PARSProbe(align="groups"), sfreq=100, verbose=0)
    np.testing.assert_allclose(clf.fit_transform(X, y, groups=groups), features, atol=1e-10)
    # groups too small are refused, and so is an unknown alignment
    with pytest.raises(ValueError, match="ALIGN_MIN_WINDOWS"):
        probe.fit(X, y, groups=np.arange(40) % 8)
    with pytest.raises(ValueError, match="Allowed values are None and 'groups'"):
        PARSProbe(align="subject", sfreq=100).fit(X, y)


def test_pars_probe_leaves_the_given_encoder_alone_and_clones():
    X, y = alpha_task()
    encoder = small_encoder().train()
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    probe = PARSProbe(encoder, sfreq=100, random_state=0)
    fitted = clone(probe).fit(X[:40], y[:40])
    assert fitted.score(X[40:], y[40:]) >= 0.9  # chance 0.5
    assert encoder.training and clone(probe).get_params()["encoder"] is not encoder
    for k, v in encoder.state_dict().items():
        assert torch.equal(v, before[k])


def _tokens_by_hand(encoder, x):
    """Every block's tokens of single-channel windows x (n, 1, T), by the encoder's
    own steps: normalise, cut 1-patch-stride patches, tokenize, add the sinusoidal
    embedding, each block, the final LayerNorm."""
    encoder.eval()
    with torch.no_grad():
        x = torch.as_tensor(x, dtype=torch.float32)
        x = (x - x.mean(-1, keepdim=True)) / x.std(-1, unbiased=False, keepdim=True)
        M = encoder.patch_size
        n = x.shape[-1] // M
        patches = x[:, 0, : n * M].reshape(len(x), n, M)
        tokens = encoder.tokenizer(patches) + encoder.position_embedding(torch.arange(n) * M)
        out = []
        for block in encoder.blocks:
            tokens = block(tokens)
            out.append(encoder.norm(tokens).numpy())
    return out


def test_encoder_features_readouts_equal_numpy_of_the_tokens():
    torch.manual_seed(3)
    encoder = PatchEncoder(sfreq=100, emb_dim=16, depth=3, n_heads=2, ff_dim=32)
    X = np.random.default_rng(5).standard_normal((5, 2, 430)).astype(np.float32)
    by_channel = [_tokens_by_hand(encoder, X[:, [c]]) for c in range(2)]
    mean = EncoderFeatures(encoder, sfreq=100, readout="mean").fit_transform(X)
    expected = np.concatenate([b[-1].mean(axis=1) for b in by_channel], axis=1)
    np.testing.assert_allclose(mean, expected, rtol=1e-4, atol=1e-5)

    step = EncoderFeatures(encoder, sfreq=100, batch_size=2)  # the default: mean+std
    both = step.fit_transform(X)
    expected = np.concatenate(
        [np.concatenate([b[-1].mean(axis=1), b[-1].std(axis=1)], axis=1) for b in by_channel],
        axis=1,
    )
    assert both.shape == (5, step.n_features_out_) == (5, 2 * 2 * 16)
    np.testing.assert_allclose(both, expected, rtol=1e-4, atol=1e-5)

    step = EncoderFeatures(encoder, sfreq=100, readout="blocks")
    blocks = step.fit_transform(X)
    expected = np.concatenate(
        [np.concatenate([t.mean(axis=1) for t in b], axis=1) for b in by_channel], axis=1
    )
    assert blocks.shape == (5, step.n_features_out_) == (5, 2 * 3 * 16)
    np.testing.assert_allclose(blocks, expected, rtol=1e-4, atol=1e-5)
    # each channel's last block is the default readout
    last = blocks.reshape(5, 2, 3, 16)[:, :, -1].reshape(5, -1)
    np.testing.assert_allclose(last, mean, rtol=1e-5, atol=1e-6)


def test_encoder_features_crops_keep_positions_in_range():
    encoder = small_encoder(6)
    rng = np.random.default_rng(7)
    X = rng.standard_normal((4, 2, 1000)).astype(np.float32)
    for readout in ("mean", "mean+std", "blocks"):
        plain = EncoderFeatures(encoder, sfreq=100, readout=readout).fit_transform(X)
        # a window of exactly one crop, or shorter: the same features
        for crop in (10, 10.0, 20):
            cropped = EncoderFeatures(
                encoder, sfreq=100, readout=readout, crop_seconds=crop
            ).fit_transform(X)
            np.testing.assert_array_equal(cropped, plain)
    # 25.5 s cut into 10 + 10 + 5 s (the last half patch dropped, as without crops):
    # the readout over the tokens of the three crops, each encoded on its own
    long = rng.standard_normal((3, 1, 2550)).astype(np.float32)
    tokens = np.concatenate(
        [_tokens_by_hand(encoder, long[..., s : s + 1000])[-1] for s in (0, 1000, 2000)],
        axis=1,
    )
    assert tokens.shape[1] == 25
    step = EncoderFeatures(encoder, sfreq=100, readout="mean+std", crop_seconds=10)
    np.testing.assert_allclose(
        step.fit_transform(long),
        np.concatenate([tokens.mean(axis=1), tokens.std(axis=1)], axis=1),
        rtol=1e-4,
        atol=1e-5,
    )
    # without crops the positions run to 24 and the features differ
    plain = EncoderFeatures(encoder, sfreq=100, readout="mean+std").fit_transform(long)
    assert not np.allclose(plain, step.transform(long), atol=1e-3)


def test_encoder_features_refuse_bad_readouts_and_crops():
    X = np.random.default_rng(8).standard_normal((3, 2, 400))
    with pytest.raises(ValueError, match="'readout'.*'mean', 'mean\\+std' and 'blocks'"):
        EncoderFeatures(small_encoder(), sfreq=100, readout="max").fit(X)
    with pytest.raises(ValueError, match="'crop_seconds' must lie in"):
        EncoderFeatures(small_encoder(), sfreq=100, crop_seconds=0).fit(X)
    with pytest.raises(TypeError, match="'crop_seconds' must be a number"):
        EncoderFeatures(small_encoder(), sfreq=100, crop_seconds="10").fit(X)
    for crop in (2.5, 0.5):
        with pytest.raises(ValueError, match="'crop_seconds'.*whole number of patches"):
            EncoderFeatures(small_encoder(), sfreq=100, crop_seconds=crop).fit(X)


def test_probe_pipeline_passes_the_readout_on():
    probe = probe_pipeline(small_encoder(), sfreq=100, readout="blocks", crop_seconds=10)
    step = probe.named_steps["features"].named_transformers["encoder"].steps[0][1]
    assert (step.readout, step.crop_seconds) == ("blocks", 10)
    assert (
        probe_pipeline(small_encoder(), sfreq=100)
        .named_steps["features"]
        .named_transformers["encoder"]
        .steps[0][1]
        .readout
        == "mean+std"
    )
