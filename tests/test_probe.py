"""The probe package: encoder features, block scaling, alignment within groups, the one
fitting path and PARSProbe."""

import numpy as np
import pytest
import torch
from pyriemann.estimation import Covariances
from sklearn.base import clone

from braindecode_pars import PARSClassifier, PARSProbe, PatchEncoder
from braindecode_pars.features import band_power_pipeline
from braindecode_pars.features.blocks import EncoderFeatures
from braindecode_pars.features.recipe import ProbeRecipe
from braindecode_pars.features.scaling import (
    AlignCovariances,
    AlignFeatures,
    AlignSignals,
    BlockScaler,
)

from ._helpers import scaled_subjects
from ._learning import SEED, learned


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
    # a constant feature is not counted: the others still hold a total variance of 1
    X[:, 3] = 7.0
    Z = BlockScaler().fit_transform(X)
    assert Z.var(axis=0).sum() == pytest.approx(1.0) and Z.var(axis=0)[3] == 0


def test_encoder_features_equal_a_channel_by_channel_loop():
    encoder = small_encoder()
    X = np.random.default_rng(1).standard_normal((7, 3, 300)).astype(np.float32)
    features = EncoderFeatures(
        encoder, sfreq=100, batch_size=3, readout="mean", patch_stride_seconds=1.0
    ).fit_transform(X)  # non-overlapping patches: the encoder's forward
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


def test_encoder_features_resample_windows_at_another_rate_to_the_encoders():
    import mne

    encoder = small_encoder()  # 100 Hz
    X = np.random.default_rng(4).standard_normal((5, 2, 320)).astype(np.float32)  # 160 Hz
    step = EncoderFeatures(
        encoder, sfreq=160, batch_size=2, readout="mean", patch_stride_seconds=1.0
    )
    features = step.fit_transform(X)
    assert step.resample_ and step.sfreq_ == 160
    # reference: MNE's resampling of each window, then the channel-by-channel loop
    info = mne.create_info(2, 160.0, "eeg")
    at_100 = mne.EpochsArray(X.astype(np.float64), info, verbose=False).resample(100.0)
    X100 = at_100.get_data().astype(np.float32)
    assert X100.shape[-1] == 200
    encoder.eval()
    with torch.no_grad():
        expected = np.concatenate(
            [encoder(torch.as_tensor(X100[:, [c]])).mean(dim=1).numpy() for c in range(2)], 1
        )
    np.testing.assert_allclose(features, expected, rtol=1e-4, atol=1e-5)
    # a window shorter than one patch once resampled is refused, naming the patch
    with pytest.raises(ValueError, match="longer than the window"):
        EncoderFeatures(encoder, sfreq=200).fit(X[..., :150])  # 75 samples at 100 Hz


def test_encoder_features_refuse_bad_input():
    X = np.random.default_rng(3).standard_normal((4, 2, 400))
    with pytest.raises(ValueError, match="does not carry its sampling rate.*set 'sfreq'"):
        EncoderFeatures(small_encoder()).fit(X)
    with pytest.raises(ValueError, match="batch_size"):
        EncoderFeatures(small_encoder(), sfreq=100, batch_size=0).fit(X)
    step = EncoderFeatures(small_encoder(), sfreq=100).fit(X)
    with pytest.raises(ValueError, match="3 channels but the features were fitted on 2"):
        step.transform(np.zeros((2, 3, 400)))


def test_probe_learns_built_data_and_clones():
    X, y = alpha_task(seed=SEED)
    probe = PARSProbe(small_encoder(SEED), block_weights=None, sfreq=100, random_state=SEED)
    fitted = clone(probe).fit(X[:40], y[:40])  # every block, equal say
    assert fitted.recipe_.blocks == ("encoder", "bandpower", "tangentspace")
    learned(fitted.score(X[40:], y[40:]), above=0.9, at_least=True)  # chance 0.5
    # the encoder block alone on a rhythm it never saw pretrained: still a valid model
    alone = PARSProbe(small_encoder(SEED), band_power=False, tangent_space=False, sfreq=100)
    assert alone.fit(X, y).predict(X).shape == (60,)


def test_with_one_block_the_probe_is_the_band_power_floor():
    """One block: the scaling is standardisation, so C means the floor's C."""
    X, y = alpha_task(seed=2)
    probe = PARSProbe(tangent_space=False, C=0.3, sfreq=100).fit(X[:40], y[:40])
    floor = band_power_pipeline(sfreq=100, C=0.3).fit(X[:40], y[:40])
    np.testing.assert_allclose(
        probe.predict_proba(X[40:]), floor.predict_proba(X[40:]), rtol=1e-5, atol=1e-7
    )


def test_the_defaults_fit_at_50_hz_with_the_bands_below_nyquist():
    X, y = alpha_task(n_times=200)
    probe = PARSProbe(sfreq=50).fit(X, y)
    bands = probe.extractor_.steps["bandpower"].bands_
    assert [name for name, _, _ in bands] == ["delta", "theta", "alpha", "beta_low", "beta_high"]
    assert bands[-1][2] == 25.0
    floor = band_power_pipeline(sfreq=50).fit(X, y)
    assert floor.named_steps["bandpowerfeatures"].bands_ == bands


def test_probe_needs_a_block():
    X, y = alpha_task()
    with pytest.raises(ValueError, match="'band_power' and 'tangent_space' are both False"):
        PARSProbe(band_power=False, tangent_space=False, sfreq=100).fit(X, y)
    with pytest.raises(ValueError, match="'blocks' must be a non-empty sequence"):
        ProbeRecipe(())


# -- alignment within groups -------------------------------------------------------------
def _align_features(F, groups):
    return AlignFeatures().fit_transform(F, groups=groups)


def test_align_features_standardises_each_group_on_its_own():
    rng = np.random.default_rng(0)
    F = rng.standard_normal((30, 4)) * [1, 2, 3, 4] + [5, 0, -2, 7]
    groups = np.repeat(["a", "b", "c"], 10)
    F[groups == "b", 2] = 3.0  # constant within a group: centred, not divided by 0
    out = _align_features(F, groups)
    for g in "abc":
        rows = out[groups == g]
        np.testing.assert_allclose(rows.mean(axis=0), 0, atol=1e-12)
        expected_std = [1, 1, 0, 1] if g == "b" else [1, 1, 1, 1]
        np.testing.assert_allclose(rows.std(axis=0), expected_std, atol=1e-12)
    # one group's numbers never reach another's
    moved = F.copy()
    moved[groups == "a"] *= 100
    np.testing.assert_allclose(_align_features(moved, groups)[10:], out[10:])


def test_align_covariances_recentres_each_group_on_the_identity():
    from pyriemann.geometry.mean import mean_riemann

    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 3))
    C = Covariances().fit_transform(rng.standard_normal((12, 3, 200)))
    # the second group is the first one seen through another mixing of the channels
    C2 = A @ C @ A.T
    out = AlignCovariances().fit_transform(np.concatenate([C, C2]), groups=np.repeat([0, 1], 12))
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
    aligner = AlignFeatures().fit(F[train], groups=groups[train])
    a, b, c = (F[groups == g] for g in "abc")
    np.testing.assert_allclose(aligner.reference_[0], (a.mean(0) + b.mean(0)) / 2)
    np.testing.assert_allclose(aligner.reference_[1], (a.var(0) + b.var(0)) / 2)
    out = aligner.transform(F, groups)
    # groups of 8 windows or more: on their own windows alone
    np.testing.assert_allclose(out[train], _align_features(F[train], groups[train]))
    # 3 windows: weight 3/8 on their own mean and variance
    w = 3 / 8
    mean = w * c.mean(0) + (1 - w) * aligner.reference_[0]
    std = np.sqrt(w * c.var(0) + (1 - w) * aligner.reference_[1])
    np.testing.assert_allclose(out[~train], (c - mean) / std)
    # the training groups' shrinkage too: a small training group is shrunk the same way
    np.testing.assert_allclose(AlignFeatures().fit_transform(F, groups=groups)[~train], (
        c - (w * c.mean(0) + (1 - w) * aligner.reference_[0])) / std)  # fmt: skip
    with pytest.raises(ValueError, match=r"ALIGN_MIN_WINDOWS=8.*the largest of 3 windows"):
        AlignFeatures().fit(c, groups=np.zeros(3))


def _spd_power(A, p):
    vals, vecs = np.linalg.eigh(A)
    return (vecs * vals**p) @ vecs.T


def test_small_covariance_groups_are_recentred_on_the_geodesic_to_the_reference():
    from pyriemann.geometry.mean import mean_riemann

    rng = np.random.default_rng(2)
    mix = np.eye(3) + 0.5 * rng.standard_normal((3, 3))
    C = Covariances().fit_transform(rng.standard_normal((21, 3, 300)))
    C[10:20] = mix @ C[10:20] @ mix.T
    groups = np.repeat([0, 1, 2], [10, 10, 1])
    train = groups < 2
    aligner = AlignCovariances().fit(C[train], groups=groups[train])
    reference = aligner.reference_
    # the Riemannian mean of two matrices is the midpoint of their geodesic
    A, B = (mean_riemann(C[groups == g]) for g in (0, 1))
    half = _spd_power(A, 0.5)
    inv_half = _spd_power(A, -0.5)
    midpoint = half @ _spd_power(inv_half @ B @ inv_half, 0.5) @ half
    np.testing.assert_allclose(reference, midpoint, rtol=1e-6)
    out = aligner.transform(C, groups)
    expected = AlignCovariances().fit_transform(C[train], groups=groups[train])
    np.testing.assert_allclose(out[train], expected, rtol=1e-8)
    # one window: re-centred on the point 1/8 of the way from the reference to it
    R_half, R_inv_half = _spd_power(reference, 0.5), _spd_power(reference, -0.5)
    M = R_half @ _spd_power(R_inv_half @ C[20] @ R_inv_half, 1 / 8) @ R_half
    W = _spd_power(M, -0.5)
    np.testing.assert_allclose(out[20], W @ C[20] @ W, rtol=1e-6)


def _whitener(windows):
    """Float64 reference: the inverse square root (scipy) of the mean of the windows'
    covariances, each channel centred in its window."""
    from scipy.linalg import inv, sqrtm

    centred = windows - windows.mean(axis=2, keepdims=True)
    M = np.mean([w @ w.T / windows.shape[2] for w in centred.astype(np.float64)], axis=0)
    return np.real(inv(sqrtm(M)))


def _mean_cov(windows):
    centred = windows.astype(np.float64) - windows.mean(axis=2, keepdims=True)
    return np.mean([w @ w.T for w in centred], axis=0) / windows.shape[2]


def test_align_signals_whitens_each_group_as_scipy_does_and_keeps_the_dtype():
    rng = np.random.default_rng(0)
    mixing = [np.eye(3) + 0.8 * rng.standard_normal((3, 3)) for _ in range(2)]
    X = np.concatenate([mix @ rng.standard_normal((10, 3, 250)) + 5.0 for mix in mixing])
    X = (X * 1e-5).astype(np.float32)  # volts, with an offset each window's centring drops
    groups = np.repeat(["a", "b"], 10)
    out = AlignSignals().fit_transform(X, groups=groups)
    assert out.dtype == np.float32 and out.shape == X.shape
    for g in "ab":
        rows = groups == g
        expected = _whitener(X[rows]) @ X[rows].astype(np.float64)
        np.testing.assert_allclose(out[rows], expected, rtol=2e-4, atol=2e-4)
        np.testing.assert_allclose(_mean_cov(out[rows]), np.eye(3), atol=1e-4)
    # one group's numbers never reach another's
    moved = X.copy()
    moved[:10] *= 7
    np.testing.assert_allclose(AlignSignals().fit_transform(moved, groups=groups)[10:], out[10:])


def test_align_signals_shrinks_small_groups_and_whitens_an_average_reference():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((23, 4, 200)) * [[1.0], [2.0], [3.0], [0.5]]
    groups = np.repeat([0, 1, 2], [10, 10, 3])
    train = groups < 2
    aligner = AlignSignals().fit(X[train], groups=groups[train])
    np.testing.assert_allclose(
        aligner.reference_, (_mean_cov(X[groups == 0]) + _mean_cov(X[groups == 1])) / 2
    )
    out = aligner.transform(X, groups)
    # 3 windows: whitened by w * its own mean covariance + (1 - w) * the reference
    w = 3 / 8
    M = w * _mean_cov(X[~train]) + (1 - w) * aligner.reference_
    np.testing.assert_allclose(out[~train], _spd_power(M, -0.5) @ X[~train], rtol=1e-10)
    # a montage re-referenced to the average has rank 3 of 4: whitened on its subspace,
    # finite, the mean covariance the projector away from the common mode
    avg = X[:10] - X[:10].mean(axis=1, keepdims=True)
    white = AlignSignals().fit_transform(avg, groups=np.zeros(10))
    assert np.isfinite(white).all()
    np.testing.assert_allclose(_mean_cov(white), np.eye(4) - 0.25, atol=1e-3)


def test_align_signals_refuses_what_it_cannot_align():
    X = np.random.default_rng(2).standard_normal((10, 3, 100))
    shape = r"float array \(n_windows, n_chans, n_times\).*\(10, 300\)"
    with pytest.raises(ValueError, match=shape):
        AlignSignals().fit(X.reshape(10, 300))
    aligner = AlignSignals().fit(X)
    with pytest.raises(ValueError, match="'X' has 2 channels, but AlignSignals was fitted on 3"):
        aligner.transform(X[:, :2])
    with pytest.raises(ValueError, match="ALIGN_MIN_WINDOWS=8.*the largest of 4 windows"):
        AlignSignals().fit(X, groups=np.repeat([0, 1, 2], [4, 3, 3]))


def test_aligned_probe_scores_a_subject_at_another_amplitude():
    """Trained on two subjects, scored on a third ten times louder: aligned, each
    subject's classes fall on the same side; unaligned, all of it looks like class 1."""
    X, y, groups = scaled_subjects([1.0, 2.0, 20.0], seed=SEED)
    train, test = groups < 2, groups == 2
    # C = 0.1: what the earlier probe_pipeline's C = 1 was on these 12 band powers
    aligned = PARSProbe(tangent_space=False, C=0.1, align="groups", sfreq=100)
    score = aligned.fit(X[train], y[train], groups[train]).score(X[test], y[test])
    learned(score, above=0.8, what="band power, aligned")
    plain = PARSProbe(tangent_space=False, C=0.1, sfreq=100).fit(X[train], y[train])
    learned(plain.score(X[test], y[test]), below=0.6, what="band power, not aligned")
    # the same through the tangent space alone (the covariances re-centred)
    ts = PARSProbe(band_power=False, align="groups", sfreq=100)
    score = ts.fit(X[train], y[train], groups[train]).score(X[test], y[test])
    learned(score, above=0.9, what="tangent space, aligned")


def test_aligned_probe_clones_pickles_and_checks_its_groups():
    import pickle

    X, y, groups = scaled_subjects([1.0, 3.0], n=16)
    encoder = PatchEncoder(sfreq=100, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    probe = PARSProbe(encoder, align="groups", C=10.0, block_weights=None, sfreq=100)
    assert clone(probe).get_params()["C"] == 10.0
    fitted = clone(probe).fit(X, y, groups)
    assert fitted.recipe_.blocks == ("encoder", "bandpower", "tangentspace")
    # 2 channels x (8 + 8) encoder features (mean and std), 2 x 6 band powers, 3 of the
    # tangent space
    assert fitted.transform(X, groups).shape == (32, 32 + 12 + 3)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X, groups), fitted.predict_proba(X, groups))
    # a few windows on their own: the band powers aligned on statistics shrunk toward the
    # training groups' (3/8 on their own)
    bp = fitted.extractor_.steps["bandpower"]._features(X[:3])
    aligner = fitted.model_.steps["bandpower"][0]
    w = 3 / 8
    mean = w * bp.mean(0) + (1 - w) * aligner.reference_[0]
    std = np.sqrt(w * bp.var(0) + (1 - w) * aligner.reference_[1])
    np.testing.assert_allclose(aligner.transform(bp, np.zeros(3)), (bp - mean) / std)
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
        PARSProbe(align="groups", sfreq=100).fit(X, trait, groups)


# -- PARSProbe, the probe as a classifier ---------------------------------------------------
def _amplitude_task(n=40, seed=0):
    """Two classes that differ only in amplitude: instance normalisation hides them."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    X = rng.standard_normal((n, 2, 300)) * np.where(y == 1, 4.0, 1.0)[:, None, None]
    return X * 1e-5, y


def test_pars_probe_aligns_the_groups_it_is_given_at_predict():
    X, y = _amplitude_task()
    Xt, _ = _amplitude_task(seed=1)
    groups, groups_t = np.repeat([0, 1], 20), np.repeat([5, 6], 20)
    encoder = small_encoder()
    probe = PARSProbe(encoder, C=3.0, align="groups", block_weights=None, sfreq=100)
    probe.fit(X, y, groups)
    # without groups at predict, all of Xt is one group: another alignment
    assert not np.allclose(probe.transform(Xt), probe.transform(Xt, groups_t))
    unaligned = PARSProbe(encoder, C=3.0, block_weights=None, sfreq=100).fit(X, y, groups)
    assert unaligned.align is None  # the default
    np.testing.assert_array_equal(unaligned.transform(Xt), unaligned.transform(Xt, groups_t))
    # features: 2 channels x 2 emb_dim of the encoder (mean and std), 2 x 6 band powers, 3
    # of the tangent space
    for fitted in (probe, unaligned):
        assert fitted.transform(Xt).shape == (40, 2 * 2 * encoder.emb_dim + 2 * 6 + 3)
        assert not hasattr(fitted, "module_") and not hasattr(fitted, "history_")


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
    X, y = alpha_task(seed=SEED)
    encoder = small_encoder(SEED).train()
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    probe = PARSProbe(encoder, sfreq=100, random_state=SEED)
    fitted = clone(probe).fit(X[:40], y[:40])
    learned(fitted.score(X[40:], y[40:]), above=0.9, at_least=True)  # chance 0.5
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
    one = {"patch_stride_seconds": 1.0}  # the patches _tokens_by_hand cuts
    mean = EncoderFeatures(encoder, sfreq=100, readout="mean", **one).fit_transform(X)
    expected = np.concatenate([b[-1].mean(axis=1) for b in by_channel], axis=1)
    np.testing.assert_allclose(mean, expected, rtol=1e-4, atol=1e-5)

    step = EncoderFeatures(encoder, sfreq=100, batch_size=2, **one)  # the default: mean+std
    both = step.fit_transform(X)
    expected = np.concatenate(
        [np.concatenate([b[-1].mean(axis=1), b[-1].std(axis=1)], axis=1) for b in by_channel],
        axis=1,
    )
    assert both.shape == (5, step.n_features_out_) == (5, 2 * 2 * 16)
    np.testing.assert_allclose(both, expected, rtol=1e-4, atol=1e-5)

    step = EncoderFeatures(encoder, sfreq=100, readout="blocks", **one)
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
    one = {"patch_stride_seconds": 1.0}  # the patches _tokens_by_hand cuts
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
    step = EncoderFeatures(encoder, sfreq=100, readout="mean+std", crop_seconds=10, **one)
    np.testing.assert_allclose(
        step.fit_transform(long),
        np.concatenate([tokens.mean(axis=1), tokens.std(axis=1)], axis=1),
        rtol=1e-4,
        atol=1e-5,
    )
    # without crops the positions run to 24 and the features differ
    plain = EncoderFeatures(encoder, sfreq=100, readout="mean+std", **one).fit_transform(long)
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


def test_pars_probe_passes_the_readout_and_crops_on():
    X, y = alpha_task(n_times=1000)
    probe = PARSProbe(
        small_encoder(), readout="blocks", crop_seconds=5, block_weights=None, sfreq=100
    ).fit(X, y)
    step = probe.extractor_.steps["encoder"]
    assert (step.readout, step.crop_seconds, step.crop_size_) == ("blocks", 5, 500)
    assert PARSProbe().readout == EncoderFeatures("pars-small").readout == "mean+std"
