"""read_windows against braindecode's own indexing, in microvolts for MNE objects, with the
memory of its output; window_scale and _check_scale on windows built for them."""

import tracemalloc
import warnings

import mne
import numpy as np
import pytest
from braindecode.datasets import RawDataset
from skorch.helper import SliceDataset
from torch.utils.data import Subset

from braindecode_pars.io.windowing import _fixed_windows
from braindecode_pars.io.windows import (
    _SCALE_WARNING_FACTOR,
    Windows,
    _check_scale,
    labels_of,
    read_windows,
    window_scale,
)

SFREQ, N_EEG, N_TIMES, WINDOW = 100.0, 3, 1000, 200


def recording(subject, n_misc=0):
    """A recording whose every sample tells its channel, time and subject (in volts), with
    ``n_misc`` misc channels holding a target per sample (the second one negated)."""
    t = np.arange(N_TIMES)
    eeg = 1e-6 * (t[None, :] + 1e4 * np.arange(N_EEG)[:, None] + 1e5 * subject)
    misc = [(-1) ** m * (t // WINDOW + 10 * subject).astype(float) for m in range(n_misc)]
    names = [f"EEG{c}" for c in range(N_EEG)] + [f"target{m}" for m in range(n_misc)]
    info = mne.create_info(names, SFREQ, ["eeg"] * N_EEG + ["misc"] * n_misc)
    return mne.io.RawArray(np.vstack([eeg, *misc]), info, verbose="error")


def make_windows(tmp_path, preload, targets_from="metadata", n_misc=0, mne_epochs=False):
    """braindecode windows of two recordings (5 windows each); ``preload=False`` reads the
    recordings from FIF files (MNE reads their samples at each window)."""
    datasets = []
    for subject in (0, 1):
        raw = recording(subject, n_misc)
        if not preload:
            file = tmp_path / f"s{subject}_raw.fif"
            raw.save(file, overwrite=True, verbose="error")
            raw = mne.io.read_raw_fif(file, preload=False, verbose="error")
        description = {"subject": subject, "label": 7 + subject}
        datasets.append(RawDataset(raw, description, target_name="label"))
    return _fixed_windows(
        datasets, WINDOW, preload=preload, targets_from=targets_from, use_mne_epochs=mne_epochs
    )


def braindecode_items(windows, indices=None):
    """X and labels as braindecode's indexing gives them (the reference)."""
    indices = range(len(windows)) if indices is None else indices
    items = [windows[int(i)] for i in indices]
    return np.stack([np.asarray(item[0]) for item in items]), [item[1] for item in items]


def double_plus_one(x):
    return 2 * x + 1


def plus_100(y):
    return y + 100


SOURCES = [
    pytest.param(True, False, id="raw-preloaded"),
    pytest.param(False, False, id="raw-on-disk"),
    pytest.param(True, True, id="epochs-preloaded"),
    pytest.param(False, True, id="epochs-on-disk"),
]


@pytest.mark.filterwarnings("ignore:The provided mne.Epochs object does not meet")
@pytest.mark.parametrize("preload, mne_epochs", SOURCES)
@pytest.mark.parametrize(
    "transform, target_transform",
    [
        pytest.param(None, None, id="as-is"),
        pytest.param(double_plus_one, None, id="transform"),
        pytest.param(None, plus_100, id="target_transform"),
        pytest.param(double_plus_one, plus_100, id="both"),
    ],
)
def test_read_windows_gives_braindecode_items(
    tmp_path, preload, mne_epochs, transform, target_transform
):
    windows = make_windows(tmp_path, preload, mne_epochs=mne_epochs)
    for ds in windows.datasets:
        ds.transform = transform
    windows.target_transform = target_transform
    X, labels = braindecode_items(windows)
    data = read_windows(windows)
    np.testing.assert_array_equal(data.X, X)
    np.testing.assert_array_equal(data.y, labels)
    # known answers: window k of subject s starts at sample 200 * (k % 5)
    start = np.array([WINDOW * (k % 5) for k in range(10)])[:, None, None]
    subject = np.repeat([0, 1], 5)[:, None, None]
    t = start + np.arange(WINDOW) + 1e4 * np.arange(N_EEG)[:, None] + 1e5 * subject
    expected = (1e-6 * t).astype(np.float32)
    if transform is not None:
        expected = 2 * expected + 1
    np.testing.assert_allclose(data.X, expected, rtol=1e-6)
    assert data.y.tolist() == [7 + s + (100 if target_transform else 0) for s in subject.ravel()]
    assert data.groups.tolist() == subject.ravel().tolist()
    # a selection reads the same items, its labels too
    chosen = [8, 1, 3]
    X_chosen, labels_chosen = braindecode_items(windows, chosen)
    for selection in (Subset(windows, chosen), SliceDataset(windows, indices=chosen)):
        data = read_windows(selection)
        np.testing.assert_array_equal(data.X, X_chosen)
        np.testing.assert_array_equal(data.y, labels_chosen)
    y = SliceDataset(windows, idx=1, indices=chosen)
    np.testing.assert_array_equal(labels_of(y), labels_chosen)


@pytest.mark.parametrize("preload", [True, False], ids=["raw-preloaded", "raw-on-disk"])
@pytest.mark.parametrize("n_misc", [1, 2])
def test_targets_from_channels_are_the_items_labels_and_leave_x(tmp_path, preload, n_misc):
    windows = make_windows(tmp_path, preload, targets_from="channels", n_misc=n_misc)
    X, labels = braindecode_items(windows)
    data = read_windows(windows)
    assert data.X.shape == (10, N_EEG, WINDOW)  # the misc channels are not in X
    np.testing.assert_array_equal(data.X, X)
    # known answer: the last sample of window k of subject s holds k + 10 s (negated in
    # the second misc channel)
    k = np.tile(np.arange(5), 2) + 10 * np.repeat([0, 1], 5)
    if n_misc == 1:
        assert data.y.shape == (10,)
        np.testing.assert_array_equal(data.y, np.asarray(labels).ravel())
        np.testing.assert_array_equal(data.y, k)
    else:
        assert data.y.shape == (10, 2)
        np.testing.assert_array_equal(data.y, np.stack(labels))
        np.testing.assert_array_equal(data.y, np.stack([k, -k], axis=1))
    np.testing.assert_array_equal(labels_of(SliceDataset(windows, idx=1)), data.y)


def test_windows_of_different_shapes_are_refused_naming_them():
    items = [(np.zeros((2, 10)), 0), (np.zeros((2, 10)), 1), (np.zeros((3, 10)), 0)]
    with pytest.raises(ValueError, match=r"must all have one shape .* \[\(2, 10\), \(3, 10\)\]"):
        read_windows(items)


def test_epochs_are_read_in_microvolts_as_braindecode_reads_them():
    rng = np.random.default_rng(0)
    volts = 1e-5 * rng.standard_normal((4, 3, 50))
    epochs = mne.EpochsArray(volts, mne.create_info(3, SFREQ, "eeg"), verbose="error")
    data = read_windows(epochs)
    np.testing.assert_array_equal(data.X, epochs.get_data(units="uV").astype(np.float32))
    np.testing.assert_allclose(data.X, 1e6 * volts, rtol=1e-6)
    # channels of other types: those measured in volts in microvolts, the others as they are
    info = mne.create_info(["a", "b", "m"], SFREQ, ["eeg", "eog", "misc"])
    mixed = mne.EpochsArray(volts, info, verbose="error")
    X = read_windows(mixed).X
    np.testing.assert_allclose(X[:, :2], 1e6 * volts[:, :2], rtol=1e-6)
    np.testing.assert_allclose(X[:, 2], volts[:, 2], rtol=1e-6)


def test_epochs_on_disk_are_read_in_microvolts(tmp_path):
    raw = recording(0)
    events = mne.make_fixed_length_events(raw, duration=WINDOW / SFREQ)
    lazy = mne.Epochs(raw, events, tmin=0, tmax=(WINDOW - 1) / SFREQ, baseline=None,
                      preload=False, verbose="error")  # fmt: skip
    preloaded = lazy.copy().load_data()
    expected = 1e6 * preloaded.get_data()
    for epochs in (lazy, preloaded):
        np.testing.assert_allclose(read_windows(epochs).X, expected, rtol=1e-6)
    assert not lazy.preload  # the caller's epochs are left as they were


def test_arrays_are_taken_as_given():
    X = np.full((2, 3, 10), 1e-5)
    np.testing.assert_array_equal(read_windows(X, sfreq=SFREQ).X, X.astype(np.float32))


def test_a_windows_instance_is_returned_without_copy_and_with_overrides(tmp_path):
    first = read_windows(make_windows(tmp_path, preload=True))
    again = read_windows(first)
    assert np.shares_memory(again.X, first.X) and again.X is first.X
    assert again.sfreq == SFREQ and again.y.tolist() == first.y.tolist()
    assert again.ch_names == first.ch_names == ["EEG0", "EEG1", "EEG2"]
    y, groups = np.arange(10), np.arange(10) % 3
    given = read_windows(first, y=y, groups=groups, sfreq=SFREQ)
    assert given.X is first.X
    np.testing.assert_array_equal(given.y, y)
    np.testing.assert_array_equal(given.groups, groups)
    assert first.y.tolist() == [7] * 5 + [8] * 5  # the windows read first are left alone
    # an array read without a rate takes the one given
    bare = read_windows(np.zeros((2, 3, 10), dtype=np.float32), sfreq=None)
    assert bare.sfreq is None and read_windows(bare, sfreq=50).sfreq == 50.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        pytest.param(
            dict(y=np.arange(3)),
            r"'y' must have shape \(10,\), one label per window, but got "
            r"\(3,\)",
            id="y",
        ),
        pytest.param(
            dict(groups=np.arange(11)),
            r"'groups' must have shape \(10,\), one group per window, but got \(11,\)",
            id="groups",
        ),
        pytest.param(
            dict(sfreq=250.0),
            r"'sfreq'=250.0 differs from the sampling rate of the 'X' windows \(100.0 Hz\)",
            id="sfreq",
        ),
    ],
)
def test_overrides_of_a_windows_instance_are_checked(tmp_path, kwargs, match):
    first = read_windows(make_windows(tmp_path, preload=True))
    with pytest.raises(ValueError, match=match):
        read_windows(first, **kwargs)


def test_reading_preloaded_windows_allocates_about_the_output_once():
    """The output array is allocated once and filled: no list of copies stacked after
    (twice the output at peak), no copy of a whole recording."""
    n_chans, n_times, per_recording = 8, 500, 25
    datasets = []
    rng = np.random.default_rng(0)
    for subject in range(8):
        data = 1e-5 * rng.standard_normal((n_chans, n_times * per_recording))
        raw = mne.io.RawArray(data, mne.create_info(n_chans, SFREQ, "eeg"), verbose="error")
        datasets.append(RawDataset(raw, {"subject": subject}))
    windows = _fixed_windows(datasets, n_times)
    read_windows(windows)  # warm caches (metadata, imports)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        data = read_windows(windows)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert data.X.shape == (200, n_chans, n_times)
    assert data.X.nbytes <= peak < 1.3 * data.X.nbytes


def scaled_windows(stds, n_chans=2, n_times=100):
    """Windows of +-std alternating samples: window i has standard deviation stds[i]."""
    sign = np.where(np.arange(n_times) % 2, 1.0, -1.0)
    return np.asarray(stds, dtype=float)[:, None, None] * np.ones((1, n_chans, 1)) * sign


def test_window_scale_is_the_median_of_the_windows_standard_deviations():
    assert window_scale(scaled_windows([1.0, 3.0, 100.0])) == pytest.approx(3.0)
    assert window_scale(scaled_windows([2.0, 4.0])) == pytest.approx(3.0)
    assert window_scale(np.zeros((3, 2, 10))) == 0.0
    X = np.random.default_rng(0).standard_normal((600, 2, 50)).astype(np.float32)
    reference = np.median([np.std(w.astype(np.float64)) for w in X])
    assert window_scale(X) == pytest.approx(reference, rel=1e-6)
    with pytest.raises(ValueError, match=r"'X' must be windows of shape .* but got an array of "
                       r"shape \(3, 10\)"):  # fmt: skip
        window_scale(np.zeros((3, 10)))


@pytest.mark.parametrize(
    "factor, warns",
    [
        pytest.param(1e6, True, id="volts-fitted-microvolts-predicted"),
        pytest.param(1e-6, True, id="microvolts-fitted-volts-predicted"),
        pytest.param(150.0, True, id="150"),
        pytest.param(50.0, False, id="50"),
        pytest.param(1 / 50, False, id="1/50"),
        pytest.param(1.0, False, id="same"),
    ],
)
def test_check_scale_warns_at_a_change_of_unit(factor, warns):
    fitted = scaled_windows([10.0, 20.0, 30.0])
    X = factor * fitted
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = _check_scale(window_scale(fitted), X, "PARSProbe")
    assert got == pytest.approx(factor)
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    if not warns:
        assert messages == []
        return
    assert len(messages) == 1
    assert messages[0].startswith(
        f"PARSProbe: the windows at predict are about {factor:.3g} times the amplitude of "
        "those fitted ("
    )
    assert "are they in another unit (volts vs microvolts)?" in messages[0]
    assert _SCALE_WARNING_FACTOR == 100.0


def test_check_scale_says_nothing_of_flat_windows():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _check_scale(0.0, scaled_windows([1.0]), "X") is None
        assert _check_scale(1.0, np.zeros((2, 2, 10)), "X") is None


def test_windows_instances_keep_their_fields():
    windows = Windows(X=np.zeros((2, 3, 4), np.float32), y=None, sfreq=10.0)
    assert len(windows) == 2 and windows.shape == (3, 4) and windows.groups is None
