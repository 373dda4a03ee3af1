"""What the classical blocks make of flat channels, against independent references:
the covariances against a float64 numpy OAS, the band powers against scipy's Welch, the
reference variances against a numpy median."""

import warnings

import numpy as np
import pytest
import scipy.signal
from pyriemann.estimation import Covariances

from braindecode_pars.features import DEFAULT_BANDS, BandPowerFeatures, ProbeRecipe
from braindecode_pars.features.blocks import (
    FLAT_RATIO,
    WindowCovariances,
    _flat_reference,
    block_features,
)
from braindecode_pars.features.recipe import fit_blocks

SFREQ = 100.0


def oas(x):
    """Reference: the OAS covariance of one window (n_chans, n_times) in float64 (Chen
    et al. 2010, as scikit-learn writes it: its 2/p terms left out)."""
    x = x - x.mean(axis=1, keepdims=True)
    n = x.shape[1]
    S = x @ x.T / n
    p = len(S)
    mu = np.trace(S) / p
    alpha = np.mean(S**2)
    den = (n + 1) * (alpha - mu**2 / p)
    shrinkage = 1.0 if den == 0 else min((alpha + mu**2) / den, 1.0)
    return (1 - shrinkage) * S + shrinkage * mu * np.eye(p)


def reference_variances(X):
    """Reference: each channel's median nonzero variance, at least FLAT_RATIO times the
    median of those medians."""
    var = X.var(axis=2)
    medians = np.array([np.median(v[v > 0]) for v in var.T])
    return np.maximum(medians, FLAT_RATIO * np.median(medians))


def spoiled(seed=0, n=20):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3, 200)) * np.array([1.0, 3.0, 0.5])[:, None]
    X[4] = 0.0  # a window of zeros
    X[6, 1] = 0.0  # one channel of zeros
    X[9, 2] = 7.0  # a constant offset
    X[11] = 2.0 + 1e-12 * rng.standard_normal((3, 200))  # float noise around an offset
    return X


def quiet_fit(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return estimator.fit(X)


def test_the_reference_variances_are_the_channels_median_nonzero_variances():
    X = spoiled()
    np.testing.assert_allclose(_flat_reference(X.var(axis=2)), reference_variances(X), rtol=1e-12)
    # a channel flat in every window is raised to FLAT_RATIO times the others' median
    X[:, 1] = 0.0
    expected = reference_variances(np.delete(X, 1, axis=1))
    reference = _flat_reference(X.var(axis=2))
    np.testing.assert_allclose(reference[[0, 2]], expected, rtol=1e-12)
    assert reference[1] == pytest.approx(FLAT_RATIO * np.median(expected), rel=1e-12)
    assert np.array_equal(_flat_reference(np.zeros((5, 2))), [1.0, 1.0])


def test_covariances_of_flat_channels_equal_a_numpy_oas_without_them_beside_their_variance():
    X = spoiled()
    step = quiet_fit(WindowCovariances(), X)
    covs = step.transform(X)
    r = reference_variances(X)
    np.testing.assert_allclose(step.flat_reference_, r, rtol=1e-12)
    expected = np.array([oas(x) for x in X])
    expected[4] = expected[11] = np.diag(r)  # every channel flat
    for i, flat in ((6, 1), (9, 2)):  # one channel flat: the others' OAS, then its variance
        keep = [c for c in range(3) if c != flat]
        expected[i] = np.diag(r)
        expected[i][np.ix_(keep, keep)] = oas(X[i, keep])
    np.testing.assert_allclose(covs, expected, rtol=1e-10, atol=1e-14)
    assert (np.linalg.eigvalsh(covs) > 0).all()
    # the windows without flat channels: pyriemann's OAS, to the last bit
    fine = [i for i in range(len(X)) if i not in (4, 6, 9, 11)]
    np.testing.assert_array_equal(covs[fine], Covariances("oas").transform(X[fine]))


def test_band_powers_of_flat_channels_are_the_channels_median_elsewhere():
    X = spoiled()
    features = quiet_fit(step := BandPowerFeatures(sfreq=SFREQ), X).transform(X)
    assert np.isfinite(features).all()
    n_bands = len(DEFAULT_BANDS)
    freqs, psd = scipy.signal.welch(X, fs=SFREQ, window="hamming", nperseg=200, noverlap=100)
    power = np.stack(
        [psd[..., (freqs >= lo) & (freqs < hi)].mean(-1) for _, lo, hi in DEFAULT_BANDS], -1
    )
    with np.errstate(divide="ignore"):
        logs = np.log10(power)  # (n_windows, n_chans, n_bands); -inf where flat
    flat = np.zeros(X.shape[:2], dtype=bool)
    flat[[4, 11]] = True
    flat[6, 1] = flat[9, 2] = True
    medians = np.stack([np.median(logs[~flat[:, c], c], axis=0) for c in range(3)])
    np.testing.assert_allclose(step.flat_features_, medians, rtol=1e-9)
    expected = np.where(flat[..., None], medians[None], logs).reshape(len(X), 3 * n_bands)
    np.testing.assert_allclose(features, expected, rtol=1e-9)
    # fit_transform: the same features, computed once
    np.testing.assert_allclose(quiet_fit_transform(BandPowerFeatures(sfreq=SFREQ), X), features)


def quiet_fit_transform(step, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return step.fit_transform(X)


def test_block_features_warn_once_and_the_tangent_space_maps_every_window(caplog):
    X = spoiled(n=24)
    y = np.tile([0, 1], 12)
    with warnings.catch_warnings(record=True) as record, caplog.at_level("INFO"):
        warnings.simplefilter("always")
        features, extractor = block_features(X, ProbeRecipe(), sfreq=SFREQ)
    said = [str(w.message) for w in record if "Flat windows" in str(w.message)]
    assert len(said) == 1
    assert said[0].startswith("Flat windows: 2 flat in every channel, 2 more flat in some")
    assert "Flat windows (in every channel or in some): 4, 6, 9, 11." in caplog.text
    for align in (None, "groups"):
        recipe = ProbeRecipe(align=align)
        groups = np.repeat([0, 1], 12)
        fitted = fit_blocks(recipe, features, y, groups)
        assert np.isfinite(fitted.transform(features, groups)).all()
    assert np.isfinite(extractor.transform(np.zeros((2, 3, 200)))["tangentspace"]).all()


def test_a_bad_covariance_estimator_is_refused_naming_the_allowed_ones():
    X = np.random.default_rng(0).standard_normal((4, 2, 50))
    with pytest.raises(ValueError, match=r"'estimator' parameter.*'oas'.*but got 'shrunk'"):
        WindowCovariances(estimator="shrunk").fit(X)
    with pytest.raises(ValueError, match=r"float array of windows .*shape \(4, 100\)"):
        WindowCovariances().fit(X.reshape(4, 100))
    step = WindowCovariances(estimator="lwf").fit(X)
    with pytest.raises(
        ValueError, match="'X' has 3 channels, but the covariances were fitted on 2"
    ):
        step.transform(np.zeros((1, 3, 50)))
