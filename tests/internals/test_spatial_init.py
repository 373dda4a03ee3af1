"""Where the fine-tuner's spatial filters start (estimators/_spatial_init.py): common
spatial patterns (MNE's CSP) from the training windows of each fit."""

import numpy as np
import pytest
import torch
from scipy.linalg import eigh

from braindecode_pars import PARSFineTuner, PatchEncoder
from braindecode_pars.estimators._spatial_init import csp_filters

from .._learning import SEED, learned
from ..conftest import SMALL_ENCODER

pytestmark = pytest.mark.usefixtures("one_thread")


def _mixed_sources(n_per_class, n_classes, seed=0, n_chans=5, n_times=300):
    """Windows of ``n_chans`` channels mixing as many sources by a known matrix; in class
    c, source c has 4 times the variance of the others: CSP's known answer is the row of
    the unmixing matrix that isolates it. The mixing is orthogonal, so that the
    shrinkage towards the identity (in channel space) leaves the answer where it is."""
    rng = np.random.default_rng(seed)
    mixing = np.linalg.qr(rng.standard_normal((n_chans, n_chans)))[0]
    X, y = [], []
    for c in range(n_classes):
        scale = np.ones(n_chans)
        scale[c] = 2.0
        sources = rng.standard_normal((n_per_class, n_chans, n_times)) * scale[:, None]
        X.append(np.einsum("cs,nst->nct", mixing, sources))
        y += [c] * n_per_class
    return np.concatenate(X), np.asarray(y), np.linalg.inv(mixing)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_csp_recovers_the_unmixing_row_of_each_class_source(n_classes):
    X, y, unmixing = _mixed_sources(40, n_classes, seed=SEED)
    filters = csp_filters(X, y, n_filters=n_classes)
    np.testing.assert_allclose(np.linalg.norm(filters, axis=1), 1.0)
    truth = unmixing[:n_classes] / np.linalg.norm(unmixing[:n_classes], axis=1, keepdims=True)
    cosines = np.abs(truth @ filters.T)  # each class's source found by one filter
    learned(cosines.max(axis=1).min(), above=0.98, what="cosine, worst class")


def _naive_two_class_csp(X, y, shrinkage=0.1):
    """Two-class CSP written out in float64: each window centred, its covariance
    divided by its trace; each class's mean shrunk towards its mean eigenvalue times
    the identity; the generalised eigenvectors of (C_0, C_0 + C_1), the largest
    eigenvalue's first, then the smallest's, the second largest's..."""
    covs = []
    for c in (0, 1):
        per_window = []
        for x in X[y == c]:
            x = x - x.mean(-1, keepdims=True)
            C = x @ x.T / x.shape[-1]
            per_window.append(C / np.trace(C))
        C = np.mean(per_window, axis=0)
        n = len(C)
        covs.append((1 - shrinkage) * C + shrinkage * np.trace(C) / n * np.eye(n))
    _, vectors = eigh(covs[0], covs[0] + covs[1])  # eigenvalues ascending
    order = [i for pair in zip(range(n - 1, -1, -1), range(n), strict=True) for i in pair][:n]
    filters = vectors[:, order].T
    return filters / np.linalg.norm(filters, axis=1, keepdims=True)


def test_two_class_csp_spans_the_directions_of_the_eigenproblem_written_out():
    rng = np.random.default_rng(0)
    n_chans = 8
    mixing = rng.standard_normal((n_chans, n_chans))  # not orthogonal: any mixing
    sources = rng.standard_normal((30, n_chans, 250))
    y = np.arange(30) % 2
    sources[y == 0, 0] *= 3
    sources[y == 1, 1] *= 3
    gains = rng.uniform(0.2, 5.0, 30)[:, None, None]  # windows of other amplitudes
    X = np.einsum("cs,nst->nct", mixing, sources) * gains + 7.0  # and an offset
    filters = csp_filters(X.astype(np.float32), y, n_chans)
    assert filters.shape == (n_chans, n_chans) and filters.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(filters, axis=1), 1.0)
    expected = _naive_two_class_csp(X.astype(np.float32).astype(np.float64), y)
    cosines = np.abs(np.sum(filters * expected, axis=1))  # a filter's sign is arbitrary
    np.testing.assert_allclose(cosines[:4], 1.0, atol=1e-6)  # the top two of each class
    np.testing.assert_allclose(cosines, 1.0, atol=1e-4)


def test_csp_in_a_band_finds_the_rhythm_planted_in_one_source():
    """Eight sources mixed by a known well-conditioned matrix; source 0 carries a 10 Hz
    rhythm, strong in class 0 and weak in class 1, over white noise in every source: the
    first filter in 8-13 Hz (class 0's largest variance ratio) is the unmixing row of
    source 0, the second one is not."""
    rng = np.random.default_rng(SEED + 1)
    n_chans, n, sfreq = 8, 40, 100.0

    def orthogonal():
        return np.linalg.qr(rng.standard_normal((n_chans, n_chans)))[0]

    mixing = orthogonal() @ np.diag(rng.uniform(0.8, 1.25, n_chans)) @ orthogonal()
    y = np.arange(n) % 2
    sources = rng.standard_normal((n, n_chans, 400))
    t = np.arange(400) / sfreq
    phases = rng.uniform(0, 2 * np.pi, (n, 1))
    sources[:, 0] += np.where(y == 0, 3.0, 0.5)[:, None] * np.sin(2 * np.pi * 10 * t + phases)
    X = np.einsum("cs,nst->nct", mixing, sources)
    filters = csp_filters(X, y, 2, sfreq=sfreq, band=(8, 13))
    unmixing = np.linalg.inv(mixing)[0]
    cosines = np.abs(filters @ unmixing) / np.linalg.norm(unmixing)
    learned(cosines[0], above=0.97, what="cosine, the planted source's filter")
    assert cosines[1] < 0.5


def test_csp_refuses_more_filters_than_channels_and_one_class():
    X, y, _ = _mixed_sources(10, 2)
    message = r"'spatial_filters'=6 .* at most the number of channels \(5\)"
    with pytest.raises(ValueError, match=message):
        csp_filters(X, y, 6)
    with pytest.raises(ValueError, match="at least two classes"):
        csp_filters(X, np.zeros(len(X), dtype=int), 2)


def test_fit_starts_the_filters_at_the_csp_of_its_own_training_windows():
    X, y, _ = _mixed_sources(12, 2, n_times=200)
    X = X.astype(np.float32) * 1e-5
    encoder = PatchEncoder(sfreq=100, **SMALL_ENCODER)
    clf = PARSFineTuner(
        encoder=encoder, spatial_filters=2, band_power=(8, 30), sfreq=100, max_epochs=1,
        lr=1e-12, augmentation=None, random_state=0,
    ).fit(X, y)  # fmt: skip
    module = clf.module_
    expected = csp_filters(X, y, 2, sfreq=100, band=(8, 30))
    got = module.spatial_filter.weight.detach().numpy()
    np.testing.assert_allclose(np.abs(np.sum(got * expected, axis=1)), 1.0, atol=1e-4)
    with torch.no_grad():  # the band statistics: fixed from the same windows
        feats = module.band_log_variance.log_variance(module.virtual_channels(torch.as_tensor(X)))
    np.testing.assert_allclose(module.band_log_variance.mean.numpy(), feats.mean(0), atol=1e-4)
    identity = PARSFineTuner(
        encoder=encoder, spatial_filters=2, spatial_init="identity", sfreq=100, max_epochs=1,
        lr=1e-12, augmentation=None, random_state=0,
    ).fit(X, y)  # fmt: skip
    np.testing.assert_allclose(
        identity.module_.spatial_filter.weight.detach().numpy(), np.eye(5)[:2], atol=1e-6
    )
