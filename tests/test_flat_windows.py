"""Flat windows and channels (a disconnected amplifier, a zero-padded end, a constant
offset, float noise around one): every estimator reading band power or covariances fits
and predicts finite probabilities on them, and ``fit`` says once how many windows were
flat."""

import warnings

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from braindecode_pars import PARSClassifier, PARSProbe
from braindecode_pars.features import band_power_pipeline, riemann_pipeline

from ._learning import SEED, learned

pytestmark = pytest.mark.usefixtures("one_thread")

SFREQ = 100.0
FLAT = "Flat windows: "


def alpha_windows(n=40, n_chans=4, n_times=400, seed=0):
    """Class 1: a stronger 10 Hz rhythm on channel 0, unit noise on every channel;
    float32, as windows usually come."""
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    t = np.arange(n_times) / SFREQ
    alpha = np.sin(2 * np.pi * 10 * t + rng.uniform(0, 2 * np.pi, (n, 1, 1)))
    X = rng.standard_normal((n, n_chans, n_times))
    X[:, :1] += (0.6 + 0.5 * y[:, None, None]) * alpha
    return X.astype(np.float32), y


def flat_warnings(record):
    return [w for w in record if issubclass(w.category, UserWarning) and FLAT in str(w.message)]


def fit_recording(estimator, X, y):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        estimator.fit(X, y)
    return flat_warnings(record)


ESTIMATORS = {
    "probe": lambda: PARSProbe(sfreq=SFREQ, random_state=0),
    "band power floor": lambda: band_power_pipeline(sfreq=SFREQ),
    "riemannian floor": lambda: riemann_pipeline(sfreq=SFREQ),
}


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_a_window_of_zeros_among_40_fits_and_predicts_finite_probabilities_with_one_warning(
    make, caplog
):
    X, y = alpha_windows()
    X[7] = 0.0  # a disconnected amplifier
    with caplog.at_level("INFO", logger="braindecode_pars.features.blocks"):
        said = fit_recording(estimator := make(), X, y)
    assert len(said) == 1
    message = str(said[0].message)
    assert message.startswith("Flat windows: 1 flat in every channel, 0 more flat in some")
    assert "(channel 0 in 1 window, channel 1 in 1 window," in message
    assert "FLAT_RATIO=1e-06" in message
    assert "Flat windows (in every channel or in some): 7." in caplog.text
    proba = estimator.predict_proba(X)
    assert np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1.0)
    # fitted without it, the window of zeros is read at predict: finite, no warning
    fitted = make().fit(np.delete(X, 7, axis=0), np.delete(y, 7))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        proba = fitted.predict_proba(X[5:10])
    assert np.isfinite(proba).all() and not flat_warnings(record)


def _noise(shape):
    return np.random.default_rng(1).standard_normal(shape)


@pytest.mark.parametrize(
    "spoil, said",
    [
        pytest.param(lambda X: X.__setitem__((3, 1), 0.0), "0 flat", id="one flat channel"),
        pytest.param(lambda X: X.__setitem__(3, 2.5), "1 flat", id="a constant offset"),
        pytest.param(
            lambda X: X.__setitem__(3, 5.0 + 1e-12 * _noise(X[3].shape)),
            "1 flat",
            id="float noise around an offset",
        ),
        pytest.param(
            lambda X: X.__setitem__(3, 1e-12 * _noise(X[3].shape)), "1 flat", id="float noise"
        ),
    ],
)
def test_flat_channels_constant_offsets_and_float_noise_give_finite_probabilities(spoil, said):
    X, y = alpha_windows()
    X = X.astype(np.float64)  # float noise of 1e-12 beside 5.0 needs float64
    spoil(X)
    probe = PARSProbe(sfreq=SFREQ, random_state=0)
    warned = fit_recording(probe, X, y)
    assert len(warned) == 1
    assert str(warned[0].message).startswith(f"Flat windows: {said} in every channel")
    for rows in (X, X[3:4]):
        assert np.isfinite(probe.predict_proba(rows)).all()
        assert np.isfinite(probe.transform(rows)).all()


def test_the_flat_channel_is_named_and_the_threshold_lies_between_quiet_and_flat(caplog):
    X, y = alpha_windows(n_chans=3)
    X = X.astype(np.float64)
    X[2, 2] *= 1e-2  # 100 times quieter (variance 1e-4 of the others): not flat
    assert not fit_recording(PARSProbe(sfreq=SFREQ), X, y)
    X[2, 2] *= 1e-2  # 10,000 times quieter (variance 1e-8): flat
    X[5, 2] = 0.0
    epochs = _epochs(X, ["C3", "Cz", "C4"])
    with caplog.at_level("INFO", logger="braindecode_pars.features.blocks"):
        said = fit_recording(PARSProbe(), epochs, y)
    assert len(said) == 1
    assert str(said[0].message).startswith(
        "Flat windows: 0 flat in every channel, 2 more flat in some (C4 in 2 windows)."
    )
    assert "Flat windows (in every channel or in some): 2, 5." in caplog.text


def _epochs(X, ch_names):
    import mne

    info = mne.create_info(ch_names, SFREQ, "eeg")
    return mne.EpochsArray(X, info, verbose=False)


def test_the_band_power_floor_still_learns_beside_a_window_of_zeros():
    """One window of zeros among 40 took the floor to chance (0.50 at every seed) while
    ``log10(0)`` read -307.7; read as missing, the held-out balanced accuracy over seeds
    0-9 was 0.911 mean, 0.808 worst (0.935 and 0.867 without the window of zeros)."""
    X, y = alpha_windows(seed=SEED)
    X[0] = 0.0
    X_test, y_test = alpha_windows(n=400, seed=SEED + 100)
    floor = band_power_pipeline(sfreq=SFREQ).fit(X, y)
    learned(balanced_accuracy_score(y_test, floor.predict(X_test)), above=0.7)


def test_windows_without_flat_channels_get_the_probabilities_they_got_without_the_rule():
    """Fitted on windows without flat channels, the features of such windows are the
    blocks' own (no ridge is added): predicting them beside a flat window changes
    nothing for them (but float rounding: the windows go through in other batches)."""
    X, y = alpha_windows()
    probe = PARSProbe(sfreq=SFREQ, random_state=0).fit(X, y)
    alone = probe.predict_proba(X[10:20])
    beside = X[9:20].copy()
    beside[0] = 0.0
    np.testing.assert_allclose(probe.predict_proba(beside)[1:], alone, rtol=1e-12, atol=1e-15)


def test_the_default_classifier_fits_and_predicts_a_window_of_zeros():
    X, y = alpha_windows()
    X[7] = 0.0
    classifier = PARSClassifier(sfreq=SFREQ)
    assert len(fit_recording(classifier, X, y)) == 1
    proba = classifier.predict_proba(X)
    assert np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1.0)


def test_the_probe_over_the_shipped_encoder_reads_flat_windows_into_finite_features():
    from braindecode_pars.estimators.classifier import DEFAULT_ENCODER

    X, y = alpha_windows()
    X = X.astype(np.float64)
    X[7] = 0.0
    X[8] = 3.0 + 1e-12 * _noise(X[8].shape)
    X[9, 2] = 0.0
    probe = PARSProbe(encoder=DEFAULT_ENCODER, sfreq=SFREQ, block_weights=None, random_state=0)
    assert len(fit_recording(probe, X, y)) == 1
    assert probe.recipe_.blocks == ("encoder", "bandpower", "tangentspace")
    features = probe.extractor_.transform(X[6:10])
    assert all(np.isfinite(block).all() for block in features.values())
    assert np.isfinite(probe.predict_proba(X)).all()


def test_a_cross_validation_shows_the_warning_once_not_once_a_fold():
    from sklearn.model_selection import cross_val_score

    X, y = alpha_windows(n=30, n_chans=5)
    X[[0, 1, 2]] = 0.0  # in the training windows of 4 folds of 5, the same text
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("default")
        scores = cross_val_score(PARSProbe(sfreq=SFREQ), X, y, cv=5)
    assert np.isfinite(scores).all()
    said = flat_warnings(record)
    assert len(said) == 1
    assert str(said[0].message).startswith("Flat windows: 3 flat in every channel, 0 more")
