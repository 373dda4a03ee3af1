"""A sleep lab's first day (issue 90), on data built here: the bands sleep needs (a
preset with the spindles' sigma band, which scores above the default bands on built
spindles), recordings of mixed native rates said before they cost (by the loaders,
``resample_windows`` and ``fit``), 30-s epochs (``fit`` says what the encoder reads) and
continued pretraining that says so."""

import logging
import warnings

import mne
import numpy as np
import pytest
from sklearn.model_selection import LeaveOneGroupOut, cross_val_score

from braindecode_pars import PARSClassifier, PARSPretrainer, PARSProbe
from braindecode_pars.features import DEFAULT_BANDS, BandPowerFeatures, band_power_pipeline
from braindecode_pars.features.blocks import BAND_PRESETS
from braindecode_pars.io import load_recordings, resample_windows

from ._helpers import saved_small_encoder
from ._learning import SEED, learned
from .conftest import SMALL_PRETRAINER

#: The start of fit's warning on bands empty in some windows only.
EMPTY_BANDS = r"hold no power in bands where the other windows do"


def pink(rng, n, n_times, sfreq, slope=1.0):
    """``n`` one-channel windows of 1/f^slope noise, (n, 1, n_times), unit std."""
    spectrum = rng.standard_normal((n, n_times // 2 + 1)) + 1j * rng.standard_normal(
        (n, n_times // 2 + 1)
    )
    freqs = np.fft.rfftfreq(n_times, 1 / sfreq)
    freqs[0] = freqs[1]
    x = np.fft.irfft(spectrum / freqs ** (slope / 2), n=n_times)
    return (x / x.std(axis=1, keepdims=True))[:, None, :]


def spindle_task(seed=0, n_groups=6, per_group=60, amplitude=0.6, sfreq=100.0):
    """Spindle detection in 2-s windows of one channel: half the windows of each group
    (an excerpt: its own 1/f slope and amplitude) hold a 12-14 Hz burst of 0.5-2 s with
    a sine-squared envelope. Returns X (float32), y, groups."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(2 * sfreq)) / sfreq
    X, y, groups = [], [], []
    for group in range(n_groups):
        x = pink(rng, per_group, len(t), sfreq, slope=rng.uniform(0.8, 1.6))
        x *= rng.uniform(0.5, 2.0)
        labels = np.repeat([0, 1], per_group // 2)
        for i in np.flatnonzero(labels):
            length = rng.uniform(0.5, 2.0)
            start = rng.uniform(0, 2.0 - length)
            inside = (t >= start) & (t < start + length)
            envelope = np.where(inside, np.sin(np.pi * (t - start) / length) ** 2, 0.0)
            phase = rng.uniform(0, 2 * np.pi)
            burst = np.sin(2 * np.pi * rng.uniform(12, 14) * t + phase)
            x[i, 0] += amplitude * x[i, 0].std() * envelope * burst
        X.append(x)
        y.append(labels)
        groups.append(np.full(per_group, group))
    return np.concatenate(X).astype(np.float32), np.concatenate(y), np.concatenate(groups)


def loso(estimator, X, y, groups):
    return cross_val_score(
        estimator, X, y, groups=groups, cv=LeaveOneGroupOut(), scoring="balanced_accuracy"
    ).mean()


# -- 1. The bands --------------------------------------------------------------------


def test_the_default_bands_and_the_presets_are_importable_and_named():
    assert BAND_PRESETS["default"] == DEFAULT_BANDS
    assert [name for name, _, _ in DEFAULT_BANDS] == [
        "delta", "theta", "alpha", "beta_low", "beta_high", "gamma",
    ]  # fmt: skip
    assert ("sigma", 11.0, 16.0) in BAND_PRESETS["sleep"]
    X = np.random.default_rng(0).standard_normal((4, 1, 200))
    sleep = BandPowerFeatures(sfreq=100, bands="sleep").fit(X)
    assert sleep.bands_ == list(BAND_PRESETS["sleep"])
    # a preset is cut at the Nyquist frequency, as the default bands are
    low = BandPowerFeatures(sfreq=50, bands="sleep").fit(X)
    assert low.bands_[-1] == ("beta", 16.0, 25.0) and len(low.bands_) == 5
    assert BandPowerFeatures(sfreq=100, bands="default").fit(X).bands_ == list(DEFAULT_BANDS)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PARSProbe(bands="spindles"),
        lambda: band_power_pipeline(sfreq=100, bands="spindles"),
        lambda: PARSClassifier(encoder=None, head=PARSProbe(bands="spindles")),
    ],
    ids=["probe", "floor", "classifier"],
)
def test_an_unknown_preset_is_refused_naming_bands_and_the_presets(make):
    # windows that reading would refuse (2-D): the bands are refused first
    with pytest.raises(ValueError) as info:
        make().fit(np.zeros((4, 200)), [0, 1, 0, 1])
    said = str(info.value)
    assert "'bands'" in said and "'default', 'sleep'" in said and "'spindles'" in said


def test_the_sleep_preset_scores_above_the_default_bands_on_spindles():
    X, y, groups = spindle_task(seed=SEED)
    floor = loso(band_power_pipeline(sfreq=100), X, y, groups)
    floor_sleep = loso(band_power_pipeline(sfreq=100, bands="sleep"), X, y, groups)
    probe = loso(PARSProbe(sfreq=100), X, y, groups)
    probe_sleep = loso(PARSProbe(sfreq=100, bands="sleep"), X, y, groups)
    # the task can be learned with either set
    learned(floor, above=0.6, what="band-power floor, default bands")
    learned(probe, above=0.6, what="probe, default bands")
    learned(floor_sleep - floor, above=0.03, what="band-power floor, the sleep preset's gain")
    learned(probe_sleep - probe, above=0.03, what="probe, the sleep preset's gain")


# -- 2. Mixed native rates -----------------------------------------------------------


def mixed_windows(seed=0, n_native=30, n_upsampled=10):
    """4-s windows at 100 Hz: ``n_native`` recorded at 100 Hz, then ``n_upsampled``
    recorded at 50 Hz and upsampled (MNE's FFT resampling)."""
    rng = np.random.default_rng(seed)
    native = pink(rng, n_native, 400, 100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        upsampled = resample_windows(pink(rng, n_upsampled, 200, 50.0), 50.0, 100.0)
    return np.concatenate([native, upsampled]).astype(np.float32)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PARSProbe(sfreq=100),
        lambda: band_power_pipeline(sfreq=100),
        lambda: PARSClassifier(encoder=None, sfreq=100, verbose=0),
    ],
    ids=["probe", "floor", "classifier"],
)
def test_windows_upsampled_from_50_hz_beside_others_make_fit_warn_once(make):
    X = mixed_windows()
    y = np.arange(len(X)) % 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make().fit(X, y)
    said = [str(w.message) for w in caught if "hold no power" in str(w.message)]
    assert len(said) == 1, said
    (message,) = said
    assert message.startswith("10 of 40 windows (windows 30, 31, 32, 33, 34, ...)")
    assert "gamma (30-45 Hz, 10 windows)" in message
    assert "beta_low" not in message and "alpha" not in message  # the bands they hold
    assert "lowest native Nyquist frequency" in message and "'bands'" in message


def test_windows_of_one_native_rate_do_not_warn():
    rng = np.random.default_rng(1)
    y = np.arange(40) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        all_upsampled = resample_windows(pink(rng, 40, 200, 50.0), 50.0, 100.0)
    for X in (pink(rng, 40, 400, 100.0), all_upsampled):
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=EMPTY_BANDS)
            PARSProbe(sfreq=100).fit(X.astype(np.float32), y)
            band_power_pipeline(sfreq=100).fit(X, y)
    # bands that end below the lowest native Nyquist frequency: nothing to say
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=EMPTY_BANDS)
        PARSProbe(sfreq=100, bands={"delta": (0.5, 4), "sigma": (11, 16)}).fit(mixed_windows(), y)


def test_resample_windows_says_when_it_upsamples():
    X = np.random.default_rng(0).standard_normal((3, 1, 200))
    with pytest.warns(UserWarning, match=r"upsampling from 50 Hz to 100 Hz: the windows hold "):
        resample_windows(X, 50.0, 100.0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="resample_windows: upsampling")
        resample_windows(X, 200.0, 100.0)  # downsampling: nothing to say


def write_recording(path, sfreq, seconds=25.0, seed=0):
    """One EEG channel of white noise plus a 10 Hz rhythm, in volts, saved as FIF."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sfreq)) / sfreq
    data = 1e-5 * (rng.standard_normal((1, len(t))) + 2 * np.sin(2 * np.pi * 10 * t))
    raw = mne.io.RawArray(data, mne.create_info(["Cz"], sfreq, "eeg"), verbose="error")
    raw.save(path, verbose="error")


def test_the_loaders_keep_native_rates_and_say_mixed_rates_before_reading(tmp_path, caplog):
    write_recording(tmp_path / "a_raw.fif", 50.0)
    write_recording(tmp_path / "b_raw.fif", 100.0, seed=1)
    write_recording(tmp_path / "c_raw.fif", 200.0, seed=2)
    logger = "braindecode_pars.io.recordings"
    with caplog.at_level(logging.WARNING, logger=logger):
        windows = load_recordings(tmp_path, sfreq=100.0, window_seconds=10.0)
    assert windows.description["native_sfreq"].tolist() == [50.0, 100.0, 200.0]
    (said,) = [r.getMessage() for r in caplog.records if "rates" in r.getMessage()]
    assert "recorded at 3 rates (50 Hz: 1 recording (a_raw.fif)" in said
    assert "upsampled from 50 Hz hold nothing above 25 Hz" in said
    assert "h_freq=22" in said
    # the windows of the recording at 50 Hz are those fit names
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        X = np.stack([windows[i][0] for i in range(len(windows))])
        band_power_pipeline(sfreq=100).fit(X, np.arange(len(X)) % 2)
    (message,) = [str(w.message) for w in caught if "hold no power" in str(w.message)]
    assert message.startswith("2 of 6 windows (windows 0, 1)")
    # band-limited below the lowest native Nyquist frequency, or of one rate: no warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=logger):
        load_recordings(tmp_path, sfreq=100.0, window_seconds=10.0, h_freq=22.0)
        load_recordings(tmp_path / "b_raw.fif", sfreq=100.0, window_seconds=10.0)
    assert not [r for r in caplog.records if "rates" in r.getMessage()]


# -- 3. 30-s epochs ------------------------------------------------------------------


def test_30_s_windows_into_the_default_classifier_log_what_the_encoder_reads(caplog):
    X = pink(np.random.default_rng(0), 6, 3000, 100.0).astype(np.float32)
    y = np.arange(6) % 2
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        PARSClassifier(sfreq=100).fit(X, y)
    (said,) = [
        r.getMessage() for r in caplog.records if "longer than the 10-s crops" in r.getMessage()
    ]
    assert "the windows are 30 s long" in said
    assert "59 patches of 1 s every 0.5 s at positions 0 to 29 s" in said
    assert "crop_seconds=10 reads each window as 3 consecutive crops of 10 s" in said
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        PARSClassifier(head=PARSProbe("pars-small-v2", crop_seconds=10.0), sfreq=100).fit(X, y)
        PARSClassifier(sfreq=100).fit(X[..., :1000], y)  # 10-s windows: nothing to say
    said = [r.getMessage() for r in caplog.records]
    (said,) = [m for m in said if "the windows are" in m]
    assert "crop_seconds=10: the encoder reads each as 3 consecutive crops of 10 s" in said


# -- 4. Continued pretraining --------------------------------------------------------


def test_init_encoder_makes_the_first_line_name_the_encoder_it_continues(tmp_path, caplog):
    X = pink(np.random.default_rng(0), 16, 1000, 100.0).astype(np.float32)
    path = str(saved_small_encoder(tmp_path / "mine.pt", 100.0))
    settings = dict(SMALL_PRETRAINER, max_epochs=1, sfreq=100, random_state=0)
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        PARSPretrainer(init_encoder=path, **settings).fit(X)
    first = caplog.records[0].getMessage()
    assert first.startswith(f"Continuing the pretraining of {path!r} with PARS: its 16 x 1 ")
    assert "start from its weights" in first and "at a peak learning rate of 0.001" in first
    assert "warmed up over the first 10 % of the steps" in first
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        PARSPretrainer(**settings).fit(X)
    first = caplog.records[0].getMessage()
    assert first.startswith("Pretraining PARS with a 16 x 1 encoder") and path not in first
