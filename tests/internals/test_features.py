"""The cache of the probe's features (EncoderFeatures(memory=...), PARSProbe(memory=...)):
a grid over the probe's C computes every block once per fold, and the cached features
are the computed ones."""

import joblib
import numpy as np
import pytest
import torch
from pyriemann.estimation import Covariances
from pyriemann.tangentspace import TangentSpace
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.preprocessing import StandardScaler

from braindecode_pars import PARSClassifier, PARSProbe, PatchEncoder
from braindecode_pars.features._cache import encoder_digest, windows_digest
from braindecode_pars.features.blocks import BandPowerFeatures, EncoderFeatures, WindowCovariances
from braindecode_pars.features.recipe import _LOGISTIC_MAX_ITER

from .._helpers import TINY_ENCODER
from .._learning import SEED, learned
from ..test_probe import alpha_task, small_encoder

pytestmark = pytest.mark.usefixtures("one_thread")

SFREQ = 100.0


def _data(n_subjects=4, n=6, seed=0):
    """Windows of 2 channels x 2 s, class 1 with twice the amplitude on channel 0."""
    rng = np.random.default_rng(seed)
    y = np.tile(np.repeat([0, 1], n // 2), n_subjects)
    X = rng.standard_normal((len(y), 2, 200)).astype(np.float32)
    X[:, 0] *= 1 + y[:, None]
    return X, y, np.repeat(np.arange(n_subjects), n)


@pytest.fixture
def encoded(monkeypatch):
    """The single-channel windows each forward pass of any PatchEncoder receives."""
    seen = []
    forward = PatchEncoder.forward

    def counted(self, X, *args, **kwargs):
        seen.append(len(X))
        return forward(self, X, *args, **kwargs)

    monkeypatch.setattr(PatchEncoder, "forward", counted)
    return seen


@pytest.fixture
def computed(monkeypatch):
    """The windows each classical block computes features of, by block."""
    seen = {"bandpower": [], "covariances": []}
    for name, cls in (("bandpower", BandPowerFeatures), ("covariances", WindowCovariances)):
        features = cls._features

        def counted(self, X, features=features, name=name):
            seen[name].append(len(X))
            return features(self, X)

        monkeypatch.setattr(cls, "_features", counted)
    return seen


def _encoder():
    torch.manual_seed(SEED)
    return PatchEncoder(sfreq=SFREQ, **TINY_ENCODER)


@pytest.mark.parametrize("n_folds", [2, 3])
@pytest.mark.parametrize("cached", [False, True], ids=["no-memory", "memory"])
def test_a_grid_over_c_runs_the_encoder_once_per_fold(tmp_path, encoded, computed, cached, n_folds):
    X, y, groups = _data(n_subjects=6, seed=SEED)
    memory = joblib.Memory(tmp_path, verbose=0) if cached else None
    head = PARSProbe(memory=memory, block_weights=None)  # every block, so every fold encodes
    clf = PARSClassifier(encoder=_encoder(), head=head, sfreq=SFREQ, verbose=0)
    search = GridSearchCV(clf, {"head__C": [0.1, 1.0, 10.0]}, cv=GroupKFold(n_folds))
    search.fit(X, y, groups=groups)
    # every single-channel window through the encoder: each fold encodes its training
    # and its test windows (X once), the refit X once more; with 2 folds, the training
    # windows of one fold are the test windows of the other, read back from the cache
    one_pass = len(X) * X.shape[1]
    once_per_fold = (n_folds + 1) * one_pass if n_folds > 2 else 2 * one_pass
    every_time = (3 * n_folds + 1) * one_pass  # once per candidate and fold
    assert sum(encoded) == (once_per_fold if cached else every_time)
    # the classical blocks alike, each window once per set (not per channel)
    for block in ("bandpower", "covariances"):
        assert sum(computed[block]) * X.shape[1] == sum(encoded), block
    learned(search.best_score_, above=0.9)  # class 1 has twice the amplitude of class 0


def test_cached_features_equal_the_computed_ones(tmp_path, encoded):
    X, _, _ = _data(n_subjects=2)
    plain = EncoderFeatures(_encoder(), sfreq=SFREQ).fit_transform(X)
    cached = EncoderFeatures(_encoder(), sfreq=SFREQ, memory=str(tmp_path))
    first = cached.fit_transform(X)
    n = sum(encoded)
    again = cached.transform(X.copy())  # the same values in another array: read back
    assert sum(encoded) == n
    np.testing.assert_array_equal(first, plain)
    np.testing.assert_array_equal(again, plain)
    # other windows, another encoder or another readout: computed, not read back
    other = X.copy()
    other[0, 0, 0] += 1.0
    changed = cached.transform(other)
    assert sum(encoded) == n + X.shape[1] * len(X)
    assert not np.array_equal(changed[0], plain[0])
    np.testing.assert_array_equal(changed[1:], plain[1:])
    torch.manual_seed(1)
    new = PatchEncoder(sfreq=SFREQ, **TINY_ENCODER)
    by_new = EncoderFeatures(new, sfreq=SFREQ, memory=str(tmp_path)).fit_transform(X)
    assert not np.allclose(by_new, plain)
    mean = EncoderFeatures(_encoder(), sfreq=SFREQ, memory=str(tmp_path), readout="mean")
    np.testing.assert_allclose(mean.fit_transform(X), plain[:, _mean_columns(plain, X)])


def _mean_columns(features, X):
    """The columns of "mean+std" features that are the means: each channel's first half."""
    per_chan = features.shape[1] // X.shape[1]
    return np.concatenate(
        [np.arange(c * per_chan, c * per_chan + per_chan // 2) for c in range(X.shape[1])]
    )


def test_the_keys_tell_encoders_and_windows_apart():
    a, b = _encoder(), _encoder()
    assert encoder_digest(a) == encoder_digest(b)  # the same weights and configuration
    with torch.no_grad():
        b.norm.weight[0] += 1e-6
    assert encoder_digest(a) != encoder_digest(b)
    X = np.zeros((3, 2, 100), dtype=np.float32)
    assert windows_digest(X) == windows_digest(X.copy())
    assert windows_digest(X) != windows_digest(X.reshape(3, 1, 200))  # same bytes, other shape
    assert windows_digest(X) != windows_digest(X.astype(np.float64))
    Y = X.copy()
    Y[2, 1, 99] = 1e-30
    assert windows_digest(X) != windows_digest(Y)


def test_a_bad_memory_is_refused_naming_it():
    X, y, _ = _data(n_subjects=1)
    with pytest.raises(ValueError, match="'memory' should be None, a string or have the same"):
        PARSProbe(_encoder(), memory=3, sfreq=SFREQ).fit(X, y)


def test_probe_scales_each_block_as_documented_and_equals_a_hand_computation():
    """z_j = (x_j - mean_j) / std_j * sqrt(P / (B p_b)): each block of total variance
    P / B, the whole of total variance P, into a class-balanced logistic regression."""
    X, y = alpha_task(seed=4)
    encoder = small_encoder(5)
    train, test = np.arange(40), np.arange(40, 60)
    probe = PARSProbe(encoder, C=10.0, block_weights=None, sfreq=100, random_state=0)
    probe.fit(X[train], y[train])

    enc = EncoderFeatures(encoder, sfreq=100).fit_transform(X)
    bp = BandPowerFeatures(sfreq=100).fit_transform(X)
    covs = Covariances(estimator="oas").fit_transform(X)
    ts = TangentSpace(metric="riemann").fit(covs[train])
    blocks = [(enc[train], enc[test]), (bp[train], bp[test])]
    blocks.append((ts.transform(covs[train]), ts.transform(covs[test])))
    P, B = sum(tr.shape[1] for tr, _ in blocks), len(blocks)
    assert P == 3 * 2 * 16 + 3 * 6 + 6
    tr, te = [], []
    for F_tr, F_te in blocks:
        scaler = StandardScaler().fit(F_tr)
        factor = np.sqrt(P / (B * F_tr.shape[1]))
        tr.append(scaler.transform(F_tr) * factor)
        te.append(scaler.transform(F_te) * factor)
    np.testing.assert_allclose(probe.transform(X[test]), np.hstack(te), rtol=1e-4, atol=1e-5)
    seen = probe.transform(X[train])
    widths = np.cumsum([0] + [t.shape[1] for t in tr])
    for a, b in zip(widths[:-1], widths[1:], strict=True):  # each block: P / B
        assert seen[:, a:b].var(axis=0).sum() == pytest.approx(P / B, rel=1e-6)
    model = LogisticRegression(
        C=10.0, class_weight="balanced", max_iter=_LOGISTIC_MAX_ITER, random_state=0
    ).fit(np.hstack(tr), y[train])
    np.testing.assert_allclose(
        probe.predict_proba(X[test]), model.predict_proba(np.hstack(te)), rtol=1e-4, atol=1e-6
    )
