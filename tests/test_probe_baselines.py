"""The classical floors (probe/baselines.py): band power, the Riemannian tangent space,
and LabelledPipeline over windows."""

import pickle

import mne
import numpy as np
import pytest
import scipy.signal
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, LeaveOneGroupOut, cross_val_score
from sklearn.utils import estimator_checks, get_tags
from skorch.helper import SliceDataset
from torch.utils.data import Subset

from braindecode_pars.datasets.physionet_mi import load_physionet_mi
from braindecode_pars.features import band_power_pipeline, riemann_pipeline
from braindecode_pars.features.blocks import DEFAULT_BANDS, BandPowerFeatures
from braindecode_pars.io.estimator_inputs import LabelledPipeline
from braindecode_pars.io.windows import read_windows

from ._helpers import slice_cv_scores
from ._learning import SEED, learned

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
    np.testing.assert_array_equal(clone(features).fit_transform(x), out)  # read once
    assert out[0, 0] > out[0, 1] and out[0, 3] > out[0, 2]  # channel-major, then band
    assert features.get_feature_names_out().tolist() == [
        "ch0_low",
        "ch0_high",
        "ch1_low",
        "ch1_high",
    ]


def test_pipeline_beats_chance_on_alpha_power_and_not_on_shuffled_labels():
    X, y, groups = alpha_data(seed=SEED)
    floor = band_power_pipeline(sfreq=SFREQ, random_state=SEED)
    scores = cross_val_score(
        floor, X, y, groups=groups, cv=LeaveOneGroupOut(), scoring="balanced_accuracy"
    )
    assert scores.shape == (4,)
    learned(scores.mean(), above=0.9, what="alpha power")
    shuffled = np.random.default_rng(SEED + 1).permutation(y)
    chance = cross_val_score(
        floor, X, shuffled, groups=groups, cv=LeaveOneGroupOut(), scoring="balanced_accuracy"
    )
    learned(chance.mean(), above=0.3, what="shuffled labels, from below")
    learned(chance.mean(), below=0.7, what="shuffled labels")


def test_pipeline_steps_and_logistic_regression_settings():
    X, y, _ = alpha_data(n_subjects=2, n_per_class=10)
    floor = band_power_pipeline(sfreq=SFREQ, n_per_seg=100, C=0.5, random_state=0)
    assert isinstance(floor, LabelledPipeline)
    assert list(floor.named_steps) == ["bandpowerfeatures", "standardscaler", "logisticregression"]
    params = floor.get_params()
    assert params["bandpowerfeatures__sfreq"] == SFREQ
    assert params["bandpowerfeatures__n_per_seg"] == 100
    assert params["logisticregression__C"] == 0.5
    assert params["logisticregression__class_weight"] == "balanced"
    assert params["logisticregression__max_iter"] == 1000
    assert params["logisticregression__random_state"] == 0
    floor.fit(X, y)
    assert floor.classes_.tolist() == [0, 1]
    assert floor.decision_function(X).shape == (len(X),)
    np.testing.assert_allclose(floor.predict_proba(X).sum(axis=1), 1.0)
    assert floor.named_steps["bandpowerfeatures"].sfreq_ == SFREQ
    assert get_tags(floor).input_tags.three_d_array
    assert not get_tags(floor).input_tags.two_d_array


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
    floor = band_power_pipeline(random_state=0).fit(windows)  # no sfreq, no y
    assert floor.named_steps["bandpowerfeatures"].sfreq_ == SFREQ
    assert floor.classes_.tolist() == [0, 1]
    from_arrays = band_power_pipeline(sfreq=SFREQ, random_state=0).fit(X, y)
    # the windows are read in float32, the arrays in float64
    np.testing.assert_allclose(
        floor.predict_proba(windows), from_arrays.predict_proba(X), rtol=1e-4, atol=1e-6
    )
    assert floor.score(windows) == pytest.approx(from_arrays.score(X, y))
    names = BandPowerFeatures().fit(windows).get_feature_names_out()
    assert names[:2].tolist() == ["EEG0_delta", "EEG0_theta"]
    with pytest.raises(
        ValueError, match=r"'sfreq'=200 differs from the sampling rate of the 'X' windows"
    ):
        band_power_pipeline(sfreq=200).fit(windows)


def test_predictions_on_arrays_equal_those_on_the_same_windows():
    X, y, _ = alpha_data(n_subjects=2, n_per_class=10)
    windows = _windows(X, y)
    floor = band_power_pipeline(sfreq=SFREQ, random_state=0).fit(X, y)
    np.testing.assert_array_equal(floor.predict(windows), floor.predict(X))
    np.testing.assert_array_equal(floor.predict(SliceDataset(windows)), floor.predict(X))
    np.testing.assert_allclose(
        floor.predict_proba(windows), floor.predict_proba(X), rtol=1e-4, atol=1e-6
    )
    # a Subset keeps the windows' sampling rate and selects their windows
    subset = Subset(windows, np.arange(0, len(windows), 3))
    np.testing.assert_array_equal(floor.predict(subset), floor.predict(X[::3]))


def test_slice_dataset_of_windows_without_labels():
    X, y, _ = alpha_data(n_subjects=2, n_per_class=10)
    windows = _windows(X, y)
    floor = band_power_pipeline(random_state=0).fit(SliceDataset(windows))  # no y, no sfreq
    assert floor.classes_.tolist() == [0, 1]
    assert floor.score(SliceDataset(windows)) == pytest.approx(floor.score(windows))
    assert floor.score(SliceDataset(windows), SliceDataset(windows, idx=1)) == pytest.approx(
        floor.score(X, y)
    )


def test_cross_validation_over_subjects_with_slice_datasets():
    X, y, groups = alpha_data(n_per_class=10, seed=SEED)
    windows = _windows(X, y)
    scores = slice_cv_scores(band_power_pipeline(), windows, groups)
    assert scores.shape == (4,)
    assert np.isfinite(scores).all()
    learned(scores.mean(), above=0.9)  # the classes differ by their alpha power


def test_cross_validation_on_windows_split_into_item_lists():
    # scikit-learn splits braindecode windows into lists of items (x, y, inds), which
    # carry the labels but not the sampling rate: set 'sfreq'
    X, y, groups = alpha_data(n_per_class=10, seed=SEED)
    windows = _windows(X, y)
    scores = cross_val_score(
        band_power_pipeline(sfreq=SFREQ), windows, groups=groups, cv=LeaveOneGroupOut()
    )
    assert scores.shape == (4,)
    learned(scores.mean(), above=0.9)
    items = [windows[i] for i in range(len(windows))]
    with pytest.raises(ValueError, match=r"'X' is a list of 80 window items .*SliceDataset"):
        band_power_pipeline().fit(items)


def test_grid_search_over_the_logistic_regression():
    X, y, groups = alpha_data(n_subjects=3, n_per_class=10, seed=SEED)
    search = GridSearchCV(
        band_power_pipeline(sfreq=SFREQ),
        {"logisticregression__C": [0.01, 1.0]},
        cv=LeaveOneGroupOut(),
        scoring="balanced_accuracy",
    ).fit(X, y, groups=groups)
    assert search.best_params_["logisticregression__C"] in (0.01, 1.0)
    assert (
        search.best_estimator_.named_steps["logisticregression"].C
        == search.best_params_["logisticregression__C"]
    )
    learned(search.score(X, y), above=0.9)


X_OK = np.zeros((4, 2, 500))
Y_OK = np.array([0, 1, 0, 1])


def bad(case_id, match, X=X_OK, y=Y_OK, error=ValueError, **params):
    """A case of ``band_power_pipeline(**params).fit(X, y)`` raising ``error``."""
    return pytest.param(band_power_pipeline(**params), X, y, error, match, id=case_id)


@pytest.mark.parametrize(
    "estimator, X, y, error, match",
    [
        bad(
            "two-dimensional-X",
            r"'X' must be windows of shape \(n_windows, n_chans, n_times\), but got an "
            r"array of shape \(4, 500\)",
            X=np.zeros((4, 500)),
            sfreq=SFREQ,
        ),
        bad("no-sfreq", "'X' does not carry its sampling rate .*: set 'sfreq'"),
        bad(
            "band-above-nyquist",
            r"'bands' entry 'gamma' \(30-45 Hz\) starts at or above the Nyquist frequency "
            r"\(30 Hz\) of the sampling rate of 60 Hz",
            sfreq=60,
            bands=DEFAULT_BANDS,
        ),
        bad(
            "band-reversed",
            "'bands' entry 'alpha' must have 0 <= low < high",
            sfreq=SFREQ,
            bands=[("alpha", 13, 8)],
        ),
        bad(
            "band-without-name",
            r"'bands' must be a dict name -> \(low, high\)",
            sfreq=SFREQ,
            bands=[(8, 13)],
        ),
        bad(
            "segments-too-short-for-delta",
            r"Band 'delta' \(0.5-4 Hz\) holds no frequency bin at the resolution "
            r"sfreq / n_per_seg = 5 Hz; raise 'n_per_seg'",
            sfreq=SFREQ,
            n_per_seg=20,
        ),
        bad(
            "segments-longer-than-windows",
            r"'n_per_seg'=600 exceeds the window length \(500 samples\)",
            sfreq=SFREQ,
            n_per_seg=600,
        ),
        bad(
            "non-integer-segments",
            r"'n_per_seg' must be an int, but got float \(1.5\)",
            error=TypeError,
            sfreq=SFREQ,
            n_per_seg=1.5,
        ),
        bad("no-labels", "'y' is None and 'X' carries no labels: pass 'y'", y=None, sfreq=SFREQ),
        bad(
            "labels-of-another-length",
            r"'y' must have shape \(4,\), one label per window, but got \(3,\)",
            y=Y_OK[:3],
            sfreq=SFREQ,
        ),
        bad(
            "bad-C",
            r"The 'C' parameter of LogisticRegression must be a float in the range "
            r"\(0.0, inf\]. Got 0 instead",
            sfreq=SFREQ,
            C=0,
        ),
        bad("bad-sfreq", r"'sfreq' must lie in \(0, inf\], but got -1", sfreq=-1),
        bad(  # the parameters are checked before the windows are read
            "bad-sfreq-before-bad-X",
            r"'sfreq' must lie in \(0, inf\], but got -1",
            X=np.zeros((4, 500)),
            sfreq=-1,
        ),
        bad(
            "nan",
            r"'X' holds NaN or infinite values in 4 window\(s\)",
            X=np.full((4, 2, 500), np.nan),
            sfreq=SFREQ,
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


def test_clone_and_pickle_before_and_after_fit():
    X, y, _ = alpha_data(n_subjects=2, n_per_class=10)
    floor = band_power_pipeline(sfreq=SFREQ, bands={"alpha": (8, 13)}, C=2.0, random_state=0)
    fresh = clone(floor)
    assert type(fresh) is LabelledPipeline
    assert fresh.get_params()["logisticregression__C"] == 2.0
    assert fresh.get_params()["bandpowerfeatures__bands"] == {"alpha": (8, 13)}
    floor.fit(X, y)
    refit = clone(floor)
    assert not hasattr(refit.named_steps["logisticregression"], "coef_")
    np.testing.assert_array_equal(refit.fit(X, y).predict(X), floor.predict(X))
    restored = pickle.loads(pickle.dumps(floor))
    assert type(restored) is LabelledPipeline
    np.testing.assert_array_equal(restored.predict_proba(X), floor.predict_proba(X))


PARAMETER_CHECKS = [
    estimator_checks.check_no_attributes_set_in_init,
    estimator_checks.check_get_params_invariance,
    estimator_checks.check_set_params,
]


@pytest.mark.parametrize(
    "check",
    [*PARAMETER_CHECKS, estimator_checks.check_parameters_default_constructible],
    ids=lambda c: c.__name__,
)
def test_scikit_learn_parameter_checks(check):
    check("BandPowerFeatures", BandPowerFeatures())


@pytest.mark.parametrize("check", PARAMETER_CHECKS, ids=lambda c: c.__name__)
def test_scikit_learn_parameter_checks_of_the_pipeline(check):
    check("LabelledPipeline", band_power_pipeline())


def _coupled_channels(n=60, seed=0):
    """Two classes with the same power in every channel and band, told apart only by the
    sign of the coupling of two channels through a shared source."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    source = rng.standard_normal((n, 1, 400))
    X = rng.standard_normal((n, 2, 400))
    X += source * np.where(y[:, None, None] == 1, 1.0, np.array([[1.0], [-1.0]]))
    return X, y


def test_the_riemannian_floor_sees_what_band_power_cannot():
    X, y = _coupled_channels(seed=SEED)
    train, test = np.arange(0, 60, 2), np.arange(1, 60, 2)
    riemann = riemann_pipeline(sfreq=100).fit(X[train], y[train])
    band_power = band_power_pipeline(sfreq=100).fit(X[train], y[train])
    learned(riemann.score(X[test], y[test]), above=0.9, what="Riemannian floor")
    # equal spectra: near chance
    learned(band_power.score(X[test], y[test]), below=0.7, what="band power")


def test_tangent_space_features_equal_the_formula():
    from scipy.linalg import logm, sqrtm

    X, y = _coupled_channels()
    pipe = riemann_pipeline(sfreq=100).fit(X, y)
    covs = pipe[:2].transform(X)  # windowsarray, covariances
    ref = pipe.named_steps["tangentspace"].reference_
    isqrt = np.linalg.inv(sqrtm(ref).real)
    expected = []
    for C in covs:
        S = logm(isqrt @ C @ isqrt).real
        rows, cols = np.triu_indices(2)
        weight = np.where(rows == cols, 1.0, np.sqrt(2.0))
        expected.append(weight * S[rows, cols])
    np.testing.assert_allclose(pipe[:3].transform(X), np.array(expected), rtol=1e-8, atol=1e-10)


def test_the_riemannian_floor_reads_windows_and_their_labels():
    windows = load_physionet_mi()
    data = read_windows(windows)
    by_windows = riemann_pipeline().fit(windows)
    by_arrays = riemann_pipeline(sfreq=data.sfreq).fit(data.X, data.y)
    np.testing.assert_allclose(
        by_windows.predict_proba(windows), by_arrays.predict_proba(data.X), rtol=1e-6
    )
    with pytest.raises(ValueError, match="'X' has 3 channels but the pipeline was fitted on 64"):
        by_arrays.predict(data.X[:, :3])
