import mne
import numpy as np
import pytest
import scipy.signal
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows
from sklearn.base import clone
from sklearn.model_selection import LeaveOneGroupOut, cross_val_score
from sklearn.utils import estimator_checks
from sklearn.utils._tags import get_tags

from braindecode_pars.floor import (
    DEFAULT_BANDS,
    BandPowerClassifier,
    BandPowerFeatures,
    band_power_pipeline,
)

SFREQ = 100.0


def sine(freq, amplitude=1.0, seconds=10.0, phase=0.0):
    t = np.arange(int(seconds * SFREQ)) / SFREQ
    return amplitude * np.sin(2 * np.pi * freq * t + phase)


def alpha_data(n_subjects=4, n_per_class=25, n_chans=4, seconds=5.0, seed=0):
    """Two classes that differ only in the power of a 10 Hz rhythm, on white noise.

    Each subject has its own gain (0.8-1.25) and each window a random alpha phase.
    """
    rng = np.random.default_rng(seed)
    X, y, groups = [], [], []
    for subject in range(n_subjects):
        gain = rng.uniform(0.8, 1.25)
        for label in (0, 1):
            phase = rng.uniform(0, 2 * np.pi, (n_per_class, n_chans, 1))
            t = np.arange(int(seconds * SFREQ)) / SFREQ
            alpha = (0.5 + 1.0 * label) * np.sin(2 * np.pi * 10 * t + phase)
            noise = rng.standard_normal((n_per_class, n_chans, len(t)))
            X.append(gain * (noise + alpha))
            y += [label] * n_per_class
            groups += [subject] * n_per_class
    return np.concatenate(X), np.asarray(y), np.asarray(groups)


def welch_band_power(x, bands=DEFAULT_BANDS, nperseg=200):
    """Reference: scipy's Welch (Hamming, half overlap), mean over each band's bins."""
    freqs, psd = scipy.signal.welch(
        x, fs=SFREQ, window="hamming", nperseg=nperseg, noverlap=nperseg // 2
    )
    return np.array([psd[(freqs >= lo) & (freqs < hi)].mean() for _, lo, hi in bands])


@pytest.mark.parametrize(
    "freq, band",
    [
        pytest.param(2.0, 0, id="2Hz-delta"),
        pytest.param(6.0, 1, id="6Hz-theta"),
        pytest.param(10.0, 2, id="10Hz-alpha"),
        pytest.param(16.0, 3, id="16Hz-beta_low"),
        pytest.param(25.0, 4, id="25Hz-beta_high"),
        pytest.param(38.0, 5, id="38Hz-gamma"),
    ],
)
def test_a_sinusoid_puts_its_power_in_its_band(freq, band):
    amplitude = 2.0
    # a little white noise gives every band some power, so that all six compare well
    x = sine(freq, amplitude) + 0.01 * np.random.default_rng(0).standard_normal(1000)
    features = BandPowerFeatures(sfreq=SFREQ).fit_transform(x[None, None, :])
    assert features.shape == (1, 6)
    assert int(features[0].argmax()) == band
    # equals an independent Welch estimate (scipy), band by band
    np.testing.assert_allclose(features[0], np.log10(welch_band_power(x)), rtol=1e-9)
    # Parseval: the band's mean PSD x its width in bins x 0.5 Hz is the sine's power A^2/2
    _, lo, hi = DEFAULT_BANDS[band]
    n_bins = np.count_nonzero((np.arange(0, 50.5, 0.5) >= lo) & (np.arange(0, 50.5, 0.5) < hi))
    assert 10 ** features[0, band] * n_bins * 0.5 == pytest.approx(amplitude**2 / 2, rel=0.01)


def test_volts_and_microvolts_differ_by_a_constant_log_offset():
    rng = np.random.default_rng(0)
    X_volts = 1e-5 * rng.standard_normal((5, 3, 600))
    features = BandPowerFeatures(sfreq=SFREQ)
    in_volts = features.fit_transform(X_volts)
    in_microvolts = features.fit_transform(X_volts * 1e6)
    np.testing.assert_allclose(in_microvolts - in_volts, 12.0, rtol=1e-9)  # log10(1e6 ** 2)
    powers = BandPowerFeatures(sfreq=SFREQ, log=False).fit_transform(X_volts)
    np.testing.assert_allclose(np.log10(powers), in_volts, rtol=1e-12)


def test_feature_layout_custom_bands_and_names():
    x = np.stack([sine(10.0), sine(30.0)])[None]  # (1 window, 2 channels, 1000 samples)
    bands = {"low": (5.0, 15.0), "high": (25.0, 35.0)}
    features = BandPowerFeatures(sfreq=SFREQ, bands=bands, n_per_seg=100).fit(x)
    out = features.transform(x)
    assert out.shape == (1, 4) and features.n_features_out_ == 4
    assert out[0, 0] > out[0, 1] and out[0, 3] > out[0, 2]  # channel-major, then band
    assert features.get_feature_names_out().tolist() == [
        "ch0_low",
        "ch0_high",
        "ch1_low",
        "ch1_high",
    ]


def test_classifier_beats_chance_on_alpha_power_and_not_on_shuffled_labels():
    X, y, groups = alpha_data()
    clf = BandPowerClassifier(sfreq=SFREQ, random_state=0)
    scores = cross_val_score(
        clf, X, y, groups=groups, cv=LeaveOneGroupOut(), scoring="balanced_accuracy"
    )
    assert scores.shape == (4,)
    assert scores.mean() > 0.9
    shuffled = np.random.default_rng(1).permutation(y)
    chance = cross_val_score(
        clf, X, shuffled, groups=groups, cv=LeaveOneGroupOut(), scoring="balanced_accuracy"
    )
    assert 0.3 < chance.mean() < 0.7


def test_pipeline_and_classifier_agree():
    X, y, _ = alpha_data(n_subjects=2, n_per_class=10)
    clf = BandPowerClassifier(sfreq=SFREQ, C=0.5, random_state=0).fit(X, y)
    pipe = band_power_pipeline(sfreq=SFREQ, C=0.5, random_state=0).fit(X, y)
    np.testing.assert_allclose(clf.predict_proba(X), pipe.predict_proba(X))
    np.testing.assert_allclose(clf.decision_function(X), pipe.decision_function(X))
    assert clf.pipeline_[-1].class_weight == "balanced" and clf.pipeline_[-1].max_iter == 1000
    assert clf.classes_.tolist() == [0, 1]


def _windows(X, y, target_name="target"):
    """braindecode windows of one recording per window, the label in the description."""
    info = mne.create_info([f"EEG{c}" for c in range(X.shape[1])], SFREQ, ch_types="eeg")
    recordings = [
        RawDataset(
            mne.io.RawArray(x, info, verbose="error"),
            {"target": int(label)},
            target_name=target_name,
        )
        for x, label in zip(X, y, strict=True)
    ]
    return create_fixed_length_windows(
        BaseConcatDataset(recordings),
        window_size_samples=X.shape[2],
        window_stride_samples=X.shape[2],
        on_last_window="drop",
    )


# without target_name, braindecode's windows return -1 as target but the metadata holds
# the description's 'target': the labels are read from the metadata, as PARSClassifier does
@pytest.mark.parametrize("target_name", ["target", None], ids=["target_name", "description"])
def test_braindecode_windows_give_labels_and_sampling_rate(target_name):
    X, y, _ = alpha_data(n_subjects=2, n_per_class=10)
    windows = _windows(X, y, target_name)
    clf = BandPowerClassifier(random_state=0).fit(windows)  # no sfreq, no y
    assert clf.sfreq_ == SFREQ and clf.classes_.tolist() == [0, 1]
    from_arrays = BandPowerClassifier(sfreq=SFREQ, random_state=0).fit(X, y)
    np.testing.assert_allclose(
        clf.predict_proba(windows), from_arrays.predict_proba(X), rtol=1e-4, atol=1e-6
    )
    assert clf.score(windows) == pytest.approx(from_arrays.score(X, y))
    names = BandPowerFeatures().fit(windows).get_feature_names_out()
    assert names[:2].tolist() == ["EEG0_delta", "EEG0_theta"]
    with pytest.raises(ValueError, match=r"'sfreq'=200 differs from the windows' sampling rate"):
        BandPowerClassifier(sfreq=200).fit(windows)


X_OK = np.zeros((4, 2, 500))
Y_OK = np.array([0, 1, 0, 1])


@pytest.mark.parametrize(
    "estimator, X, y, error, match",
    [
        pytest.param(
            BandPowerClassifier(sfreq=SFREQ),
            np.zeros((4, 500)),
            Y_OK,
            ValueError,
            r"'X' must be braindecode windows or an array of shape \(n_windows, n_chans, "
            r"n_times\), but got an array of shape \(4, 500\)",
            id="two-dimensional-X",
        ),
        pytest.param(
            BandPowerClassifier(),
            X_OK,
            Y_OK,
            ValueError,
            "Array input needs the sampling rate: set 'sfreq'",
            id="no-sfreq",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=60),
            X_OK,
            Y_OK,
            ValueError,
            r"'bands' entry 'gamma' \(30-45 Hz\) ends above the Nyquist frequency 30 Hz",
            id="band-above-nyquist",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=SFREQ, bands=[("alpha", 13, 8)]),
            X_OK,
            Y_OK,
            ValueError,
            "'bands' entry 'alpha' must have 0 <= low < high",
            id="band-reversed",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=SFREQ, bands=[(8, 13)]),
            X_OK,
            Y_OK,
            ValueError,
            r"'bands' must be a dict name -> \(low, high\)",
            id="band-without-name",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=SFREQ, n_per_seg=20),
            X_OK,
            Y_OK,
            ValueError,
            r"Band 'delta' \(0.5-4 Hz\) holds no frequency bin at the resolution "
            r"sfreq / n_per_seg = 5 Hz; raise 'n_per_seg'",
            id="segments-too-short-for-delta",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=SFREQ, n_per_seg=600),
            X_OK,
            Y_OK,
            ValueError,
            r"'n_per_seg'=600 exceeds the window length \(500 samples\)",
            id="segments-longer-than-windows",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=SFREQ),
            X_OK,
            None,
            ValueError,
            "'y' is required with array input",
            id="no-labels",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=SFREQ, C=0),
            X_OK,
            Y_OK,
            ValueError,
            r"'C' must lie in \(0, inf\]",
            id="bad-C",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=-1),
            X_OK,
            Y_OK,
            ValueError,
            r"'sfreq' must lie in \(0, inf\]",
            id="bad-sfreq",
        ),
        pytest.param(
            BandPowerClassifier(sfreq=SFREQ),
            np.full((4, 2, 500), np.nan),
            Y_OK,
            ValueError,
            "'X' holds NaN or infinite values",
            id="nan",
        ),
    ],
)
def test_bad_input_is_refused_with_the_parameter_named(estimator, X, y, error, match):
    with pytest.raises(error, match=match):
        estimator.fit(X, y)


def test_transform_checks_the_channels_seen_in_fit():
    rng = np.random.default_rng(0)
    features = BandPowerFeatures(sfreq=SFREQ).fit(rng.standard_normal((3, 2, 500)))
    with pytest.raises(ValueError, match="'X' has 3 channels, but the transformer was fitted on 2"):
        features.transform(rng.standard_normal((3, 3, 500)))


def test_clone_before_and_after_fit():
    X, y, _ = alpha_data(n_subjects=2, n_per_class=10)
    clf = BandPowerClassifier(sfreq=SFREQ, bands={"alpha": (8, 13)}, C=2.0, random_state=0)
    fresh = clone(clf)
    assert fresh.get_params() == clf.get_params()
    clf.fit(X, y)
    refit = clone(clf)
    assert not hasattr(refit, "pipeline_")
    np.testing.assert_array_equal(refit.fit(X, y).predict(X), clf.predict(X))
    assert get_tags(clf).input_tags.three_d_array and not get_tags(clf).input_tags.two_d_array


@pytest.mark.parametrize(
    "check",
    [
        estimator_checks.check_no_attributes_set_in_init,
        estimator_checks.check_get_params_invariance,
        estimator_checks.check_set_params,
        estimator_checks.check_parameters_default_constructible,
    ],
    ids=lambda c: c.__name__,
)
@pytest.mark.parametrize("estimator", [BandPowerClassifier(), BandPowerFeatures()], ids=repr)
def test_scikit_learn_parameter_checks(check, estimator):
    check(type(estimator).__name__, estimator)
