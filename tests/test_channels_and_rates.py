"""Data as users bring it: channels matched by name at predict, one sampling rate per
window (recordings at several rates refused, or brought to one by resample_windows), a
recording's native rate read from the channels kept, and the package's own message for
trials of unequal length."""

import logging
import warnings

import mne
import numpy as np
import pandas as pd
import pytest
import scipy.io
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows, create_windows_from_events
from sklearn.metrics import balanced_accuracy_score
from torch.utils.data import Subset

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSProbe
from braindecode_pars.io import load_recordings, resample_windows
from braindecode_pars.io.estimator_inputs import WindowsArray
from braindecode_pars.io.windows import read_windows

from ._learning import SEED, learned

pytestmark = pytest.mark.usefixtures("one_thread")

SFREQ = 100.0
FIT_ORDER = ["C3", "Cz", "C4"]


def motor_task(n=60, seed=0):
    """Windows of C3, Cz and C4 (4 s at 100 Hz, in volts): class 1 carries a 10-Hz
    rhythm on C3 only, over unit noise of 10 microvolts everywhere.

    Returns
    -------
    X : ndarray, shape (n, 3, 400), channels in :data:`FIT_ORDER`
    y : ndarray of int, shape (n,)
    """
    rng = np.random.default_rng(seed)
    y = np.tile([0, 1], n // 2)
    t = np.arange(400) / SFREQ
    X = 1e-5 * rng.standard_normal((n, 3, 400))
    phase = rng.uniform(0, 2 * np.pi, (n, 1))
    X[:, 0] += 2e-5 * y[:, None] * np.sin(2 * np.pi * 10 * t + phase)
    return X, y


def epochs_of(X, y, names):
    """``mne.EpochsArray`` of ``X`` whose channels are named ``names``, events ``y``."""
    info = mne.create_info(list(names), SFREQ, ch_types="eeg")
    events = np.column_stack([np.arange(len(y)) * 400, np.zeros(len(y), int), y])
    return mne.EpochsArray(X, info, events=events, verbose="error")


def listed_as(X, y, names):
    """The same signals as ``X`` (channels in :data:`FIT_ORDER`) listed as ``names``."""
    order = [FIT_ORDER.index(ch) for ch in names]
    return epochs_of(X[:, order], y, names)


def reorder_lines(caplog):
    return [r for r in caplog.records if "in another order than at fit" in r.getMessage()]


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: PARSProbe(random_state=SEED), id="probe"),
        pytest.param(lambda: PARSClassifier(encoder=None, verbose=0), id="classifier"),
        pytest.param(
            lambda: PARSClassifier(random_state=SEED, verbose=0), id="classifier-shipped-encoder"
        ),
    ],
)
def test_channels_listed_in_another_order_predict_as_in_fit_order(make, caplog):
    X, y = motor_task(seed=SEED)
    estimator = make().fit(epochs_of(X[:40], y[:40], FIT_ORDER))
    assert estimator.ch_names_ == FIT_ORDER
    test_in_order = epochs_of(X[40:], y[40:], FIT_ORDER)
    swapped = listed_as(X[40:], y[40:], ["C4", "Cz", "C3"])
    in_order = balanced_accuracy_score(y[40:], estimator.predict(test_in_order))
    # C3 carries the class: a probe reading C4 for it is at chance
    learned(in_order, above=0.9, at_least=True, what="channels in fit order")
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        reordered = balanced_accuracy_score(y[40:], estimator.predict(swapped))
    assert reordered == in_order
    assert len(reorder_lines(caplog)) == 1  # said once, naming both orders
    assert "[C4, Cz, C3], fitted on [C3, Cz, C4]" in reorder_lines(caplog)[0].getMessage()
    np.testing.assert_array_equal(
        estimator.predict_proba(swapped), estimator.predict_proba(test_in_order)
    )
    assert estimator.score(swapped) == estimator.score(test_in_order)
    np.testing.assert_array_equal(estimator.transform(swapped), estimator.transform(test_in_order))


def test_other_channel_names_are_refused_naming_both_lists():
    X, y = motor_task()
    probe = PARSProbe(random_state=0).fit(epochs_of(X[:40], y[:40], FIT_ORDER))
    other = epochs_of(X[40:], y[40:], ["C3", "Cz", "Pz"])
    for method in (probe.predict, probe.predict_proba, probe.transform, probe.score):
        with pytest.raises(
            ValueError,
            match=r"'X' windows have the channels \[C3, Cz, Pz\], but PARSProbe was fitted "
            r"on \[C3, Cz, C4\] \(missing: \[C4\]; not fitted on: \[Pz\]\)\. .*"
            r"inst\.pick\(\['C3', 'Cz', 'C4'\]\).*Preprocessor\('pick'",
        ):
            method(other)
    fewer = epochs_of(X[40:, :2], y[40:], ["C3", "Cz"])  # another count: named, too
    with pytest.raises(ValueError, match=r"\[C3, Cz\], but PARSProbe was fitted on \[C3, Cz, C4\]"):
        probe.predict(fewer)
    upper = epochs_of(X[40:], y[40:], ["C3", "CZ", "C4"])
    with pytest.raises(ValueError, match="differ in case only"):
        probe.predict(upper)


def test_names_given_at_fit_only_or_at_predict_only_are_said_and_taken_by_position():
    X, y = motor_task()
    named = PARSProbe(random_state=0).fit(epochs_of(X[:40], y[:40], FIT_ORDER))
    microvolts = 1e6 * X[40:]  # what mne.Epochs are read as
    with pytest.warns(UserWarning, match=r"fitted on the channels \[C3, Cz, C4\], but these "
                      r"'X' windows do not name theirs .* taken by position"):  # fmt: skip
        from_array = named.predict_proba(microvolts)
    np.testing.assert_allclose(
        from_array, named.predict_proba(epochs_of(X[40:], y[40:], FIT_ORDER)), rtol=1e-6
    )
    unnamed = PARSProbe(sfreq=SFREQ, random_state=0).fit(1e6 * X[:40], y[:40])
    assert unnamed.ch_names_ is None
    with pytest.warns(UserWarning, match=r"fitted on windows without channel names .*"
                      r"\[C4, Cz, C3\], cannot be matched by name"):  # fmt: skip
        unnamed.predict(listed_as(X[40:], y[40:], ["C4", "Cz", "C3"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # arrays at fit and at predict: nothing said
        unnamed.predict(microvolts)


def raw_dataset(names, sfreq=SFREQ, seconds=20.0, subject="S1", seed=0):
    """A braindecode ``RawDataset`` of noise in volts (channels ``names``)."""
    rng = np.random.default_rng(seed)
    info = mne.create_info(list(names), sfreq, ch_types="eeg")
    raw = mne.io.RawArray(1e-5 * rng.standard_normal((len(names), int(sfreq * seconds))), info,
                          verbose="error")  # fmt: skip
    return RawDataset(raw, pd.Series({"subject": subject}))


def fixed_windows(datasets, size=400):
    return create_fixed_length_windows(
        BaseConcatDataset(datasets), window_size_samples=size, window_stride_samples=size,
        on_last_window="drop",
    )  # fmt: skip


def test_braindecode_windows_of_another_channel_order_are_reordered():
    fit_windows = fixed_windows([raw_dataset(FIT_ORDER, seed=s, subject=f"S{s}") for s in range(3)])
    probe = WindowsArray().fit(fit_windows)
    assert probe.ch_names_ == FIT_ORDER
    swapped = raw_dataset(FIT_ORDER, seed=7)
    swapped.raw.reorder_channels(["Cz", "C4", "C3"])
    windows = fixed_windows([swapped])
    assert read_windows(windows).ch_names == ["Cz", "C4", "C3"]
    in_fit_order = read_windows(fixed_windows([raw_dataset(FIT_ORDER, seed=7)])).X
    np.testing.assert_array_equal(probe.transform(windows), in_fit_order)
    other = fixed_windows([raw_dataset(["C3", "Cz", "Fz"], seed=7)])
    with pytest.raises(ValueError, match=r"\[C3, Cz, Fz\], but WindowsArray was fitted on"):
        probe.transform(other)


@pytest.mark.parametrize("as_is", [True, False], ids=["read-from-the-raw", "items"])
def test_recordings_listing_one_channel_set_in_two_orders_are_read_in_the_first_order(
    as_is, caplog
):
    first, second = raw_dataset(FIT_ORDER, seed=1), raw_dataset(FIT_ORDER, seed=2)
    expected = read_windows(fixed_windows([first, second]))
    second.raw.reorder_channels(["C4", "C3", "Cz"])
    windows = fixed_windows([first, second])
    if not as_is:  # a transform: every window read through braindecode's indexing
        for ds in windows.datasets:
            ds.transform = lambda x: 2 * x
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        data = read_windows(windows)
    assert data.ch_names == FIT_ORDER
    np.testing.assert_array_equal(data.X, expected.X * (1 if as_is else 2))
    said = [r.getMessage() for r in caplog.records if "orders" in r.getMessage()]
    assert said == [
        "'X': the recordings list the same 3 channels in 2 orders; every recording's are "
        "read in the order of the first (C3, Cz, C4)."
    ]


def test_the_fine_tuner_keeps_the_channel_names_and_reorders_at_predict():
    X, y = motor_task(n=40)
    tuner = PARSFineTuner(encoder=None, max_epochs=1, batch_size=20, verbose=0,
                          random_state=0)  # fmt: skip
    tuner.fit(epochs_of(X, y, FIT_ORDER))
    assert tuner.ch_names_ == FIT_ORDER
    np.testing.assert_allclose(
        tuner.predict_proba(listed_as(X, y, ["C4", "C3", "Cz"])),
        tuner.predict_proba(epochs_of(X, y, FIT_ORDER)),
        rtol=1e-5,
        atol=1e-6,
    )
    with pytest.raises(ValueError, match=r"but PARSFineTuner was fitted on \[C3, Cz, C4\]"):
        tuner.predict(epochs_of(X, y, ["C3", "Cz", "Oz"]))


# -- one sampling rate per window ------------------------------------------------------------
def two_rates():
    """Two recordings of C3, Cz, C4: 'S160' at 160 Hz and 'S128' at 128 Hz, 20 s each,
    with an event every 5 s (labels 0 and 1)."""
    datasets = []
    for sfreq, subject in ((160.0, "S160"), (128.0, "S128")):
        ds = raw_dataset(FIT_ORDER, sfreq=sfreq, subject=subject, seed=int(sfreq))
        onsets = np.arange(4) * 5.0
        ds.raw.set_annotations(mne.Annotations(onsets, 4.0, ["left", "right"] * 2))
        datasets.append(ds)
    return datasets


def test_windows_of_one_sample_count_at_two_rates_are_refused_naming_both():
    windows = create_windows_from_events(
        BaseConcatDataset(two_rates()), trial_start_offset_samples=0, trial_stop_offset_samples=0,
        window_size_samples=400, window_stride_samples=400, mapping={"left": 0, "right": 1},
    )  # fmt: skip
    match = (
        r"'X' windows come from recordings at 2 sampling rates, but windows are read at one "
        r"rate: 128 Hz: 1 recording \(S128\), windows of 400 samples \(3.125 s\); 160 Hz: 1 "
        r"recording \(S160\), windows of 400 samples \(2.5 s\)\. .*Preprocessor\('resample', "
        r"sfreq=160\)"
    )
    with pytest.raises(ValueError, match=match):
        read_windows(windows)
    with pytest.raises(ValueError, match=match):
        PARSProbe().fit(windows)
    with pytest.raises(ValueError, match=r"different durations .* \(here 2.5 and 3.125 s\)"):
        read_windows(windows)
    # the windows of one recording are read at its own rate, not the first one's
    only_128 = Subset(windows, np.flatnonzero(windows.get_metadata()["subject"] == "S128"))
    assert read_windows(only_128).sfreq == 128.0


def test_one_window_per_trial_at_two_rates_is_refused_then_resampled_to_one_rate():
    datasets = two_rates()
    windows = create_windows_from_events(
        BaseConcatDataset(datasets),
        trial_start_offset_samples=0,
        trial_stop_offset_samples=0,
        mapping={"left": 0, "right": 1},
    )  # fmt: skip (one 4-s window per trial: 640 samples at 160 Hz, 512 at 128 Hz)
    with pytest.raises(
        ValueError,
        match=r"windows of 512 samples \(4 s\); 160 Hz: 1 recording \(S160\), windows of 640 "
        r"samples \(4 s\).* last 4 s at every rate, braindecode_pars\.io\.resample_windows\(X, "
        r"None, 160\)",
    ):
        read_windows(windows)
    with pytest.warns(UserWarning, match="upsampling from 128 Hz to 160 Hz"):
        at_160 = resample_windows(windows, None, 160.0)
    data = read_windows(at_160)
    assert data.sfreq == 160.0 and data.X.shape == (8, 3, 640)
    # the 128-Hz recording's windows are MNE's resampling of it, cut at the new rate
    raw = datasets[1].raw.copy().resample(160.0, verbose="error")
    expected = np.stack([raw.get_data()[:, start : start + 640] for start in (0, 800, 1600, 2400)])
    np.testing.assert_allclose(data.X[4:], expected, rtol=1e-5, atol=1e-12)
    with pytest.raises(ValueError, match=r"'sfreq'=128 differs .* \(128.0 and 160.0 Hz\)"):
        resample_windows(windows, 128, 160.0)


# -- the native rate of the channels kept ------------------------------------------------------
def write_edf(path, rates, seconds=40, seed=0):
    """An EDF of ``rates`` (``{label: Hz}``, each signal at its own rate), noise of
    tens of microvolts (edfio writes a rate per signal)."""
    edfio = pytest.importorskip("edfio")
    rng = np.random.default_rng(seed)
    signals = [
        edfio.EdfSignal(
            20 * rng.standard_normal(int(rate * seconds)),
            sampling_frequency=rate,
            label=label,
            physical_dimension="uV",
        )  # fmt: skip
        for label, rate in rates.items()
    ]
    edfio.Edf(signals).write(path)
    return path


def test_native_sfreq_is_the_rate_of_the_channels_kept(tmp_path, caplog):
    write_edf(tmp_path / "slow.edf", {"C3": 50, "C4": 50, "ECG": 500})
    write_edf(tmp_path / "fast.edf", {"C3": 200, "C4": 200}, seed=1)
    assert mne.io.read_raw(tmp_path / "slow.edf", verbose="error").info["sfreq"] == 500
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        windows = load_recordings(str(tmp_path / "*.edf"), sfreq=100.0, window_seconds=10.0)
    native = dict(zip(windows.description["file"].map(lambda f: f.rsplit("/", 1)[-1]),
                      windows.description["native_sfreq"], strict=True))  # fmt: skip
    assert native == {"fast.edf": 200.0, "slow.edf": 50.0}
    assert windows.datasets[0].raw.ch_names == ["C3", "C4"]  # the ECG left out
    said = [r for r in caplog.records if r.levelno == logging.WARNING and "rates" in r.getMessage()]
    assert len(said) == 1
    assert "50 Hz: 1 recording (slow.edf); 200 Hz: 1 recording (fast.edf)" in said[0].getMessage()
    assert "upsampled from 50 Hz hold nothing above 25 Hz" in said[0].getMessage()


# -- trials of unequal length -------------------------------------------------------------------
def unequal_trials(seed=0):
    """20 trials of 4 channels of 200 to 300 samples."""
    rng = np.random.default_rng(seed)
    lengths = np.linspace(200, 300, 20).astype(int)
    return [rng.standard_normal((4, n)) for n in lengths], np.tile([0, 1], 10)


def cell_array(trials, tmp_path):
    """``trials`` written as a MATLAB cell array and read back by scipy.io.loadmat."""
    cell = np.empty((1, len(trials)), dtype=object)
    for k, trial in enumerate(trials):
        cell[0, k] = trial
    scipy.io.savemat(tmp_path / "trials.mat", {"trials": cell})
    return scipy.io.loadmat(tmp_path / "trials.mat")["trials"]


@pytest.mark.parametrize("form", ["list of arrays", "loadmat cell array", "nested lists"])
def test_trials_of_unequal_length_get_the_package_message(form, tmp_path):
    trials, y = unequal_trials()
    if form == "list of arrays":
        X = trials
    elif form == "nested lists":
        X = [trial.tolist() for trial in trials]
    else:
        X = cell_array(trials, tmp_path)
        assert X.dtype == object and X.shape == (1, 20)
    match = (
        r"'X' windows must all have one shape \(n_chans, n_times\), but got 20 shapes over "
        r"20 windows: \[\(4, 200\), \(4, 205\), .*and 12 more\]\. .*one length \(200 to 300 "
        r"samples here\): crop them to the shortest .*x\[:, :200\].*pad .*"
        r"create_windows_from_events"
    )
    with pytest.raises(ValueError, match=match):
        PARSProbe(sfreq=SFREQ).fit(X, y)
    # cropped to one length, every form reads as the array numpy stacks
    same = [trial[:, :200] for trial in trials]
    forms = [same, cell_array(same, tmp_path), [t.tolist() for t in same]]
    for given in forms:
        np.testing.assert_array_equal(
            read_windows(given, sfreq=SFREQ).X, np.stack(same).astype(np.float32)
        )


def test_trials_of_several_channel_counts_and_ragged_channels_are_named():
    trials, _ = unequal_trials()
    mixed = [trials[0][:, :200], trials[0][:3, :200]]
    with pytest.raises(ValueError, match=r"\[\(3, 200\), \(4, 200\)\].*same channels"):
        read_windows(mixed, sfreq=SFREQ)
    ragged = [[[0.0] * 200, [0.0] * 210]]
    with pytest.raises(ValueError, match=r"'X' window 0 is not one \(n_chans, n_times\) array: "
                       r"its channels have several lengths \(200, 210 samples\)"):  # fmt: skip
        read_windows(ragged, sfreq=SFREQ)
