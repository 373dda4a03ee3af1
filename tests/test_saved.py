"""A braindecode dataset, in memory or saved with its ``save``, stored through the command
line: the store's windows are those braindecode cuts from the same raws."""

import mne
import numpy as np
import pytest
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import Preprocessor, create_fixed_length_windows, preprocess

from braindecode_pars.cli import main
from braindecode_pars.io.saved import braindecode_windows, load_saved_windows
from braindecode_pars.store import read_window_store

SFREQ = 128.0  # a headset's rate, not the encoder's: stored as it is

pytestmark = pytest.mark.usefixtures("one_thread")


def to_microvolts(data):
    return data * 1e6


@pytest.fixture(scope="module")
def preprocessed():
    """Three recordings of 3 EEG channels and one ECG (31, 25 and 8 s at 128 Hz), in
    volts, through braindecode's preprocess: EEG picked, high-pass, microvolts."""
    rng = np.random.default_rng(0)
    datasets = []
    for subject, seconds in ((1, 31), (2, 25), (3, 8)):
        info = mne.create_info(["Fz", "Cz", "Pz", "ECG"], SFREQ, ["eeg"] * 3 + ["ecg"])
        raw = mne.io.RawArray(
            1e-5 * rng.standard_normal((4, int(seconds * SFREQ))), info, verbose="error"
        )
        datasets.append(RawDataset(raw, description={"subject": subject}))
    dataset = BaseConcatDataset(datasets)
    preprocess(
        dataset,
        [
            Preprocessor("pick_types", eeg=True),
            Preprocessor("filter", l_freq=1.0, h_freq=None, verbose="error"),
            Preprocessor(to_microvolts),
        ],
    )
    return dataset


@pytest.fixture(scope="module")
def saved(preprocessed, tmp_path_factory):
    folder = tmp_path_factory.mktemp("saved") / "dataset"
    folder.mkdir()
    preprocessed.save(str(folder), overwrite=True)
    return folder


def assert_store_holds(store, expected):
    """The store's windows are ``expected``'s, in order, to float32 precision."""
    recordings, index, info = read_window_store(store)
    assert info["sfreq"] == SFREQ
    assert len(index) == len(expected)
    for i, (rec, start, stop) in enumerate(index):
        np.testing.assert_allclose(recordings[rec][:, start:stop], expected[i][0], rtol=1e-5)


def test_store_takes_a_saved_braindecode_dataset(preprocessed, saved, tmp_path, capsys):
    store = tmp_path / "store"
    flags = ["--window-seconds", "4", "--stride-seconds", "2"]
    assert main(["store", "--braindecode-dataset", str(saved), "--out", str(store), *flags]) == 0
    expected = create_fixed_length_windows(
        preprocessed, window_size_samples=512, window_stride_samples=256, on_last_window="drop"
    )  # braindecode's own windows of the raws in memory
    assert len(expected) == 14 + 11 + 3
    assert_store_holds(store, expected)
    recordings, _, info = read_window_store(store)
    assert [r["ch_names"] for r in info["recordings"]] == [["Fz", "Cz", "Pz"]] * 3
    assert [r["description"]["subject"] for r in info["recordings"]] == [1, 2, 3]
    assert "28 windows of 3 recordings" in capsys.readouterr().out


def test_store_windows_default_to_the_shipped_encoders_10_s(saved, tmp_path, caplog):
    """Without --window-seconds: 10-s windows every 5 s; the 8-s recording is left out,
    with a warning that names it."""
    store = tmp_path / "store"
    assert main(["store", "--braindecode-dataset", str(saved), "--out", str(store)]) == 0
    _, index, info = read_window_store(store)
    assert set(index[:, 2] - index[:, 1]) == {int(10 * SFREQ)}
    assert len(index) == 5 + 4 and len(info["recordings"]) == 2
    assert "shorter than one 10-s window" in caplog.text


@pytest.mark.parametrize(
    "extra, match",
    [
        pytest.param(["--recordings", "x.edf"], "give it alone, but got --recordings", id="two"),
        pytest.param(
            ["--window-seconds", "40"], "No recording of 'dataset' is at least", id="long"
        ),
    ],
)
def test_store_refuses_a_saved_dataset_with_another_source_or_too_long_windows(
    saved, tmp_path, extra, match
):
    command = ["store", "--braindecode-dataset", str(saved), "--out", str(tmp_path / "s")]
    with pytest.raises(SystemExit, match=match):
        main([*command, *extra])
    assert not (tmp_path / "s" / "index.npz").exists()


def test_a_folder_that_is_not_a_saved_dataset_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a braindecode dataset saved with"):
        load_saved_windows(tmp_path)
    with pytest.raises(SystemExit, match="--braindecode-dataset: '.*' is not a braindecode"):
        main(["store", "--braindecode-dataset", str(tmp_path), "--out", str(tmp_path / "s")])


def test_windows_pass_through_and_mixed_or_other_input_is_refused(preprocessed):
    windows = create_fixed_length_windows(
        preprocessed, window_size_samples=256, window_stride_samples=256, on_last_window="drop"
    )
    assert braindecode_windows(windows) is windows
    mixed = BaseConcatDataset([windows.datasets[0], preprocessed.datasets[1]])
    with pytest.raises(ValueError, match="either raws .* or windows, not both"):
        braindecode_windows(mixed)
    with pytest.raises(TypeError, match="'dataset' must be a braindecode BaseConcatDataset"):
        braindecode_windows([preprocessed])
