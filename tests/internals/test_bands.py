"""Frequency bands (_util/bands.py): one convention for the probe's bands and the
classifier's band_power, and the band-pass filters, against scipy written out."""

import numpy as np
import pytest
from scipy.signal import butter, firwin, sosfiltfilt

from braindecode_pars._util.bands import (
    check_band_pairs,
    check_named_bands,
    cut_at_nyquist,
    fir_band_pass,
    iir_band_pass,
)
from braindecode_pars._util.checks import InvalidParameterError
from braindecode_pars.features import BandPowerFeatures
from braindecode_pars.features.blocks import BAND_PRESETS
from braindecode_pars.models.spatial_front import BandLogVariance


def test_one_nyquist_rule_cuts_a_band_ending_above_it_and_refuses_one_starting_there():
    # the probe's named bands and the classifier's pairs: the same edges at 60 Hz
    named = check_named_bands("bands", [("beta", 13, 30), ("high", 25, 40)], BAND_PRESETS, 60)
    assert named == [("beta", 13.0, 30.0), ("high", 25.0, 30.0)]
    pairs = BandLogVariance(2, [(13, 30), (25, 40)], sfreq=60).bands
    assert pairs == [edges[1:] for edges in named]
    with pytest.raises(InvalidParameterError) as probe_error:
        check_named_bands("bands", {"gamma": (30, 45)}, BAND_PRESETS, 60)
    with pytest.raises(InvalidParameterError) as model_error:
        BandLogVariance(2, [(30, 45)], sfreq=60, name="band_power")
    for error, name, band in (
        (probe_error, "'bands'", "entry 'gamma' (30-45 Hz)"),
        (model_error, "'band_power'", "band 30-45 Hz"),
    ):
        message = str(error.value)  # the parameter, the band and the rate
        assert message.startswith(f"{name} {band} starts at or above the Nyquist frequency")
        assert "(30 Hz)" in message and "60 Hz" in message
    # a preset's band there is left out instead: the presets fit any rate
    default = check_named_bands("bands", None, BAND_PRESETS, 60)
    assert [b[0] for b in default] == ["delta", "theta", "alpha", "beta_low", "beta_high"]
    assert default[-1] == ("beta_high", 20.0, 30.0)
    sleep = check_named_bands("bands", "sleep", BAND_PRESETS, 100)
    assert sleep == list(BAND_PRESETS["sleep"])  # all below 50 Hz: as they are
    assert cut_at_nyquist("x", [(1.0, 4.0)], np.inf) == [(1.0, 4.0)]  # no rate: no cut


def test_one_edge_rule_for_both_parsers():
    assert check_band_pairs("band_power", (0, 4)) == [(0.0, 4.0)]  # 0 <= low, both
    assert check_named_bands("bands", {"slow": (0, 4)}, BAND_PRESETS)[0] == ("slow", 0.0, 4.0)
    for bad in ((4, 4), (8, float("nan")), (True, 4), (-1, 4), [], [(8, 12), (12, 30, 40)]):
        with pytest.raises(InvalidParameterError, match="'band_power' must be None, a band"):
            check_band_pairs("band_power", bad)
    for bad in ([("x", 4, 4)], [("x", -1, 4)]):
        with pytest.raises(InvalidParameterError, match="'bands' entry 'x' must have 0 <= low"):
            check_named_bands("bands", bad, BAND_PRESETS)
    with pytest.raises(InvalidParameterError, match="'bands' must be a dict name"):
        check_named_bands("bands", [("x", 1, float("inf"))], BAND_PRESETS)
    with pytest.raises(InvalidParameterError, match=r"preset's name \('default', 'sleep'\)"):
        check_named_bands("bands", "spindles", BAND_PRESETS)


def test_the_probe_reads_a_band_above_nyquist_cut_as_the_classifier_does():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 2, 600))
    cut = BandPowerFeatures(sfreq=60, bands=[("high", 20, 45)]).fit(X)
    within = BandPowerFeatures(sfreq=60, bands=[("high", 20, 30)]).fit(X)
    assert cut.bands_ == within.bands_ == [("high", 20.0, 30.0)]
    np.testing.assert_array_equal(cut.transform(X), within.transform(X))


def test_the_fir_band_pass_is_scipys_firwin_designed_below_nyquist():
    np.testing.assert_allclose(  # the taps the classifier read before the one module
        fir_band_pass((8, 30), 100), firwin(51, [8, 30], pass_zero=False, fs=100), rtol=1e-6
    )
    np.testing.assert_allclose(  # a band reaching the Nyquist frequency: up to 0.99 of it
        fir_band_pass((40, 50), 100), firwin(51, [40, 49.5], pass_zero=False, fs=100), rtol=1e-6
    )
    np.testing.assert_allclose(fir_band_pass((0, 4), 100), firwin(51, 4, fs=100), rtol=1e-6)


def test_the_iir_band_pass_is_close_to_scipys_zero_phase_butterworth():
    """MNE's ``filter_data`` against scipy's ``butter`` + ``sosfiltfilt`` written out:
    the same filter, padded otherwise at the ends (MNE pads by the filter's ringing
    length, scipy by a few samples), so equal inside and close at the ends."""
    rng = np.random.default_rng(0)
    sfreq, band = 100.0, (8.0, 30.0)
    X = rng.standard_normal((3, 4, 400))
    got = iir_band_pass(X, sfreq, band)
    sos = butter(4, band, btype="bandpass", fs=sfreq, output="sos")
    expected = sosfiltfilt(sos, X, axis=-1)
    scale = np.abs(expected).max()
    inner = slice(100, -100)  # 1 s from each end
    assert np.abs(got - expected)[..., inner].max() < 1e-4 * scale
    assert np.abs(got - expected).max() < 0.05 * scale
    # and it is a band-pass: 20 Hz through, 2 and 45 Hz out
    t = np.arange(800) / sfreq
    for f, gain in ((20, 1.0), (2, 0.0), (45, 0.0)):
        out = iir_band_pass(np.sin(2 * np.pi * f * t), sfreq, band)[200:-200]
        assert abs(np.sqrt(2) * out.std() - gain) < 0.01, f
    # a band reaching the Nyquist frequency: designed up to 0.99 of it (the same
    # sections as scipy's; a pole that near Nyquist rings for about 4 s, hence 40 s)
    long = rng.standard_normal((2, 4000))
    sos = butter(4, [40, 49.5], btype="bandpass", fs=sfreq, output="sos")
    expected = sosfiltfilt(sos, long, axis=-1)
    top = iir_band_pass(long, sfreq, (40.0, 50.0))
    assert np.abs(top - expected)[:, 1000:-1000].max() < 1e-4 * np.abs(expected).max()
    assert iir_band_pass(X, sfreq, None) is X


def test_a_band_starting_where_no_band_pass_fits_is_refused_naming_it():
    """A band starting in the last 1 % below the Nyquist frequency is no band a filter
    can be designed for (filters reach 0.99 of it): refused naming the parameter, the
    band and the rate, before scipy or MNE see it (scipy raised in its own words, MNE
    turned it into a band-stop)."""
    with pytest.raises(InvalidParameterError, match=r"'band_power' band 49.6-60 Hz starts "
                       r"within 1% below the Nyquist frequency \(50 Hz\)"):  # fmt: skip
        BandLogVariance(2, [(49.6, 60)], sfreq=100, name="band_power")
    assert cut_at_nyquist("bands", [("x", 49.6, 60)], 100, drop=True) == []
    assert cut_at_nyquist("bands", [("x", 49.4, 60)], 100) == [("x", 49.4, 50.0)]
