"""resample_windows against MNE's own resampling, and read_windows's sampling rates."""

import re

import mne
import numpy as np
import pytest
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows
from skorch.helper import SliceDataset
from torch.utils.data import Subset

from braindecode_pars.datasets.physionet_mi import load_physionet_mi
from braindecode_pars.io.windows import read_windows, resample_windows


@pytest.fixture(scope="module")
def physionet():
    """Real EEG: the bundled PhysioNet-MI subject's run 4, 4-s windows at 200 Hz (64 x 800),
    cut from preprocessed Raw recordings."""
    return load_physionet_mi(runs=[4])


def _info(n_chans, sfreq):
    return mne.create_info(n_chans, sfreq, "eeg")


def _sines(freq, sfreq, n_windows=3, n_chans=2, seconds=10.0, seed=0):
    """Windows of a sine of ``freq`` Hz (random phase and amplitude per channel)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sfreq)) / sfreq
    phase = rng.uniform(0, 2 * np.pi, (n_windows, n_chans, 1))
    amplitude = rng.uniform(1e-6, 1e-4, (n_windows, n_chans, 1))  # volts, as MNE holds EEG
    return amplitude * np.sin(2 * np.pi * freq * t + phase)


def _peak_hz(X, sfreq):
    """The frequency of the largest bin of the mean amplitude spectrum."""
    spectrum = np.abs(np.fft.rfft(X, axis=-1)).mean(axis=(0, 1))
    return np.fft.rfftfreq(X.shape[-1], 1 / sfreq)[np.argmax(spectrum)]


@pytest.mark.parametrize(
    ("freq", "sfreq", "new_sfreq"),
    [
        pytest.param(7.0, 200.0, 100.0, id="200-to-100Hz"),
        pytest.param(11.0, 160.0, 200.0, id="160-to-200Hz"),
        pytest.param(3.0, 100.0, 256.0, id="100-to-256Hz"),
    ],
)
@pytest.mark.parametrize("method", ["fft", "polyphase"])
def test_a_sine_keeps_its_frequency_and_matches_mne_epochs(freq, sfreq, new_sfreq, method):
    X = _sines(freq, sfreq)
    out = resample_windows(X, sfreq, new_sfreq, method=method)
    assert out.shape == (3, 2, int(round(X.shape[-1] * new_sfreq / sfreq)))
    assert out.dtype == np.float64
    assert _peak_hz(out, new_sfreq) == pytest.approx(freq)  # 0.1-Hz bins of 10-s windows
    reference = mne.EpochsArray(X, _info(2, sfreq), verbose="error")
    reference = reference.resample(new_sfreq, method=method, verbose="error").get_data()
    np.testing.assert_allclose(out, reference, rtol=1e-10, atol=1e-12 * np.abs(X).max())
    # away from the edges the samples are the sine's, at the new times
    t = np.arange(out.shape[-1]) / new_sfreq
    basis = np.stack([np.sin(2 * np.pi * freq * t), np.cos(2 * np.pi * freq * t)], -1)
    inner = slice(out.shape[-1] // 10, -out.shape[-1] // 10)
    coef = np.linalg.lstsq(basis[inner], out[0, 0, inner], rcond=None)[0]
    residual = out[0, 0, inner] - basis[inner] @ coef
    assert np.abs(residual).max() < 5e-3 * np.abs(out[0, 0]).max()  # edge ringing decays


def test_float32_windows_stay_float32_and_match_mne_to_float_precision():
    X = _sines(5.0, 200.0).astype(np.float32)
    out = resample_windows(X, 200.0, 100.0)
    assert out.dtype == np.float32
    reference = mne.EpochsArray(X.astype(np.float64), _info(2, 200.0), verbose="error")
    reference = reference.resample(100.0, verbose="error").get_data()
    np.testing.assert_allclose(out, reference, rtol=1e-5, atol=1e-6 * np.abs(X).max())
    same = resample_windows(X, 100.0, 100.0)  # no change: a copy
    np.testing.assert_array_equal(same, X)
    assert same is not X


def test_real_eeg_windows_are_resampled_as_mne_resamples_their_recording(physionet):
    before = read_windows(physionet)
    assert before.sfreq == 200.0 and before.X.shape[1:] == (64, 800)
    out = resample_windows(physionet, None, 100.0)
    assert isinstance(out, BaseConcatDataset)
    after = read_windows(out)
    assert after.sfreq == 100.0 and after.X.shape == (len(before), 64, 400)
    np.testing.assert_array_equal(after.y, before.y)  # labels and metadata follow
    np.testing.assert_array_equal(after.groups, before.groups)
    assert physionet.datasets[0].raw.info["sfreq"] == 200.0  # the input is left as it was
    # MNE's own result: the whole recording resampled, each window at its start time
    raw = physionet.datasets[0].raw
    reference = mne.io.RawArray(raw.get_data(), raw.info, verbose="error")
    reference = reference.resample(100.0, verbose="error").get_data()
    starts = physionet.get_metadata()["i_start_in_trial"].to_numpy()
    assert np.all(starts % 2 == 0)  # 200 -> 100 Hz: every start falls on a new sample
    expected = np.stack([reference[:, s // 2 : s // 2 + 400] for s in starts])
    scale = np.abs(expected).max()
    np.testing.assert_allclose(after.X, expected, rtol=1e-5, atol=1e-6 * scale)
    np.testing.assert_array_equal(out.get_metadata()["i_start_in_trial"], starts // 2)
    # the content is the same EEG: low frequencies agree with the 200-Hz windows
    low = mne.filter.filter_data(before.X.astype(float), 200.0, None, 20.0, verbose="error")
    low_after = mne.filter.filter_data(after.X.astype(float), 100.0, None, 20.0, verbose="error")
    inner = slice(50, 350)
    corr = np.corrcoef(low[:, :, ::2][..., inner].ravel(), low_after[..., inner].ravel())[0, 1]
    assert corr > 0.99


@pytest.mark.filterwarnings("ignore:The provided mne.Epochs object does not meet")
def test_real_eeg_windows_held_as_epochs_and_mne_epochs_match_mne(physionet):
    epochs_windows = BaseConcatDataset([physionet.datasets[0].to_epochs_dataset()])
    X = read_windows(epochs_windows).X.astype(np.float64)
    reference = mne.EpochsArray(X, _info(64, 200.0), verbose="error")
    reference = reference.resample(100.0, verbose="error").get_data()
    scale = np.abs(reference).max()
    out = read_windows(resample_windows(epochs_windows, 200.0, 100.0))
    assert out.sfreq == 100.0
    np.testing.assert_allclose(out.X, reference, rtol=1e-5, atol=1e-6 * scale)
    epochs = mne.EpochsArray(X, _info(64, 200.0), verbose="error")
    resampled = resample_windows(epochs, None, 100.0)
    assert isinstance(resampled, mne.BaseEpochs) and resampled.info["sfreq"] == 100.0
    assert epochs.info["sfreq"] == 200.0
    np.testing.assert_allclose(resampled.get_data(), reference, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(
        resample_windows(X, 200.0, 100.0), reference, rtol=1e-12, atol=1e-12 * scale
    )


def test_subsets_and_slice_datasets_of_windows_keep_their_indices(physionet):
    subset = resample_windows(Subset(physionet, [3, 1]), None, 100.0)
    assert isinstance(subset, Subset) and list(subset.indices) == [3, 1]
    whole = read_windows(resample_windows(physionet, None, 100.0)).X
    np.testing.assert_array_equal(read_windows(subset).X, whole[[3, 1]])
    sliced = resample_windows(SliceDataset(physionet, idx=0), 200.0, 100.0)
    assert isinstance(sliced, SliceDataset) and read_windows(sliced).X.shape[-1] == 400


def test_fixed_length_windows_of_a_raw_stay_inside_the_resampled_recording():
    # 160 -> 100 Hz: starts fall between new samples, and rounding the last window's
    # start (1281 -> 800.625) would push its end one sample past the recording's
    sfreq, n_times, size = 160.0, 1_602, 321
    raw = mne.io.RawArray(_sines(9.0, sfreq, 1, 3, n_times / sfreq)[0], _info(3, sfreq))
    windows = create_fixed_length_windows(
        BaseConcatDataset([RawDataset(raw, description={"subject": 1})]),
        window_size_samples=size, window_stride_samples=107, on_last_window="overlap",
        preload=True,
    )  # fmt: skip
    assert windows.get_metadata()["i_stop_in_trial"].max() == n_times
    out = resample_windows(windows, 160.0, 100.0)
    n_new = out.datasets[0].raw.n_times
    assert n_new == round(n_times * 100 / 160)
    X = read_windows(out).X
    assert X.shape == (len(windows), 3, round(size * 100 / 160))
    stops = out.get_metadata()["i_stop_in_trial"]
    assert stops.max() == n_new  # the last window ends where the recording ends
    reference = raw.copy().resample(100.0, verbose="error").get_data()
    np.testing.assert_allclose(X[-1], reference[:, -X.shape[-1] :], rtol=1e-5, atol=1e-12)
    assert _peak_hz(X, 100.0) == pytest.approx(9.0, abs=0.5)  # 2-s windows: 0.5-Hz bins
    recordings = resample_windows(BaseConcatDataset([RawDataset(raw)]), None, 100.0)
    np.testing.assert_allclose(recordings.datasets[0].raw.get_data(), reference, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            dict(sfreq=200.0, new_sfreq=0),
            r"'new_sfreq' parameter. Allowed values are positive finite numbers "
            r"\(a sampling rate in Hz\), but got 0 instead",
            id="zero-new-rate",
        ),
        pytest.param(
            dict(sfreq=200.0, new_sfreq=-100.0),
            r"'new_sfreq' parameter.*positive finite.*but got -100.0 instead",
            id="negative-new-rate",
        ),
        pytest.param(
            dict(sfreq=200.0, new_sfreq=float("nan")),
            r"'new_sfreq' parameter.*positive finite.*but got nan instead",
            id="nan-new-rate",
        ),
        pytest.param(
            dict(sfreq=200.0, new_sfreq="100"),
            r"'new_sfreq' parameter.*positive finite.*but got '100' instead",
            id="string-new-rate",
        ),
        pytest.param(
            dict(sfreq=-200.0, new_sfreq=100.0),
            r"'sfreq' parameter.*positive finite.*but got -200.0 instead",
            id="negative-rate",
        ),
        pytest.param(
            dict(sfreq=None, new_sfreq=100.0),
            r"'sfreq' parameter.*an array does not carry its rate, but got None instead",
            id="array-without-rate",
        ),
        pytest.param(
            dict(sfreq=200.0, new_sfreq=100.0, method="linear"),
            r"'method' parameter. Allowed values are 'fft' and 'polyphase', but got "
            r"'linear' instead",
            id="method",
        ),
        pytest.param(
            dict(sfreq=200.0, new_sfreq=0.01),
            r"windows of 200 samples at 200.0 Hz hold no sample at new_sfreq=0.01 Hz",
            id="nothing-left",
        ),
    ],
)
def test_bad_rates_and_methods_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        resample_windows(np.zeros((2, 3, 200)), **kwargs)


@pytest.mark.parametrize(
    "shape", [pytest.param((3, 200), id="2d"), pytest.param((1, 2, 3, 200), id="4d")]
)
def test_arrays_that_are_not_windows_are_refused_naming_their_shape(shape):
    message = (
        "'X' parameter. Allowed values are arrays of shape (n_windows, n_chans, n_times), "
        f"braindecode windows and mne.Epochs, but got an array of shape {shape} instead"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        resample_windows(np.zeros(shape), 200.0, 100.0)


def test_a_rate_that_contradicts_the_windows_is_refused(physionet):
    with pytest.raises(ValueError, match=r"'sfreq'=100.0 differs from the sampling rate of"):
        resample_windows(physionet, 100.0, 50.0)
    epochs = mne.EpochsArray(np.zeros((2, 3, 200)), _info(3, 200.0), verbose="error")
    with pytest.raises(ValueError, match=r"\(200.0 Hz\); pass sfreq=None"):
        resample_windows(epochs, 250.0, 100.0)


def test_read_windows_reads_the_rate_of_epochs_and_of_raw_backed_windows(physionet):
    epochs = mne.EpochsArray(np.zeros((2, 3, 250)), _info(3, 250.0), verbose="error")
    data = read_windows(epochs)
    assert data.sfreq == 250.0 and data.X.shape == (2, 3, 250)
    assert read_windows(resample_windows(epochs, None, 125.0)).sfreq == 125.0
    assert type(physionet.datasets[0]).__name__ == "EEGWindowsDataset"  # windows of a Raw
    assert physionet.datasets[0].raw is not None
    assert read_windows(physionet).sfreq == 200.0
    assert read_windows(Subset(physionet, [0, 2])).sfreq == 200.0
    with pytest.raises(ValueError, match=r"'sfreq'=100 differs from the sampling rate"):
        read_windows(physionet, sfreq=100)
