"""A pretraining corpus in one unit for the encoders that read amplitude: Sleep-EDF's
digital units in microvolts, the shared corpus in microvolts, and the corpus statistics
of the ``"window+scale"`` embedding drawn from the windows a run trains on."""

import math
from pathlib import Path

import mne
import numpy as np
import pytest
import scipy.io
import torch
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows

from braindecode_pars.datasets import read_sleep_edf_mat, shared_corpus
from braindecode_pars.datasets.sleep_edf import SLEEP_EDF_ATM_UV_PER_UNIT
from braindecode_pars.models.encoder import log_std_statistics
from braindecode_pars.pretraining import SingleChannelWindows, run_pretraining

pytestmark = pytest.mark.usefixtures("one_thread")

SHARED_SLEEP = Path(__file__).resolve().parents[2] / "shared" / "data" / "sleep-edf-atm"
SFREQ = 100.0


def write_mat(folder, name, values):
    path = Path(folder) / name
    scipy.io.savemat(path, {"val": np.asarray(values, dtype=np.int16)[None, :]})
    return path


def test_digital_units_times_the_gain_are_microvolts(tmp_path):
    counts = np.random.default_rng(0).integers(-300, 300, 2000)
    write_mat(tmp_path, "SC4011E0-PSG_edfm.mat", counts)
    digital = read_sleep_edf_mat(tmp_path).datasets[0].raw.get_data()[0]
    micro = read_sleep_edf_mat(tmp_path, uv_per_unit=SLEEP_EDF_ATM_UV_PER_UNIT)
    np.testing.assert_array_equal(digital, counts)
    np.testing.assert_allclose(micro.datasets[0].raw.get_data()[0], counts * 394.0 / 4095.0)
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="uv_per_unit"):
            read_sleep_edf_mat(tmp_path, uv_per_unit=bad)


@pytest.mark.skipif(not SHARED_SLEEP.is_dir(), reason="needs ../shared/data/sleep-edf-atm")
def test_the_shared_nights_in_microvolts_have_the_amplitude_of_scalp_eeg():
    """With the gain, the median standard deviation of 10-s windows of each night lies
    where resting scalp EEG lies (EEGMAT's are 9-14 µV): 3-30 µV, where the digital
    units are ten times larger."""
    for file in sorted(SHARED_SLEEP.glob("*_edfm.mat"))[:3]:
        x = read_sleep_edf_mat(file, uv_per_unit=SLEEP_EDF_ATM_UV_PER_UNIT)
        values = x.datasets[0].raw.get_data()[0]
        windows = values[: len(values) // 1000 * 1000].reshape(-1, 1000)
        assert 3.0 < np.median(windows.std(axis=1)) < 30.0, file.name


def test_an_unknown_unit_is_refused_before_any_file_is_read(tmp_path):
    with pytest.raises(ValueError, match=r"'unit'.*None and 'uV', but got 'mV'"):
        shared_corpus(tmp_path / "nowhere", unit="mV")


def noise_view(amplitudes, seconds=60.0, window_seconds=4.0):
    """A view of one-channel recordings of white noise, one per amplitude (µV)."""
    rng = np.random.default_rng(0)
    datasets = []
    for a in amplitudes:
        info = mne.create_info(["C3"], SFREQ, "eeg")
        raw = mne.io.RawArray(a * rng.standard_normal((1, int(seconds * SFREQ))), info,
                              verbose="error")  # fmt: skip
        datasets.append(RawDataset(raw, {"subject": 0}))
    n = int(window_seconds * SFREQ)
    windows = create_fixed_length_windows(
        BaseConcatDataset(datasets), window_size_samples=n, window_stride_samples=n,
        on_last_window="drop",
    )  # fmt: skip
    return SingleChannelWindows(windows)


def test_the_views_statistics_are_those_of_its_windows_and_seeded():
    """Half the windows at 10 µV, half at 40 µV: the log std has mean (log 10 + log 40) / 2
    and standard deviation log(4) / 2, within the noise of 400-sample windows."""
    view = noise_view([10.0, 40.0])
    mean, std = view.log_std_statistics()
    assert mean == pytest.approx((math.log(10) + math.log(40)) / 2, abs=0.02)
    assert std == pytest.approx(math.log(4) / 2, abs=0.02)
    assert view.log_std_statistics() == (mean, std)  # the same draw again
    some = view.log_std_statistics(n=6, seed=1)  # fewer windows, another draw: close
    assert some != (mean, std) and abs(some[0] - mean) < 0.5
    with pytest.raises(ValueError, match="'n'"):
        view.log_std_statistics(n=0)


def test_a_window_scale_run_takes_the_statistics_of_its_corpus():
    view = noise_view([10.0, 40.0], seconds=40.0)
    settings = dict(emb_dim=8, depth=1, n_heads=2, ff_dim=8, normalization="window+scale")
    torch.manual_seed(0)
    net = run_pretraining(view, "pars", max_epochs=1, batch_size=8, progress_bar=False,
                          encoder_kwargs=settings, n_patches=3)  # fmt: skip
    mean, std = view.log_std_statistics()
    assert (net.encoder.log_std_mean, net.encoder.log_std_std) == (mean, std)
    X = torch.as_tensor(np.stack([view[i][0] for i in range(len(view))]))
    reference = log_std_statistics(X)  # every window, not a draw of them: close
    assert abs(reference[0] - mean) < 0.05
    given = run_pretraining(view, "pars", max_epochs=1, batch_size=8, progress_bar=False,
                            encoder_kwargs={**settings, "log_std_mean": 1.0, "log_std_std": 2.0},
                            n_patches=3)  # fmt: skip
    assert (given.encoder.log_std_mean, given.encoder.log_std_std) == (1.0, 2.0)
