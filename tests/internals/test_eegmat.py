"""The EEGMAT and Sleep-EDF readers on the real files of ../shared/data (also in CI; the
tests that read them are skipped where that folder is absent), and on files written here."""

import csv

import mne
import numpy as np
import pytest
import scipy.io
from braindecode.preprocessing import preprocess

from braindecode_pars.datasets.eegmat import (
    EEGMAT_CHANNELS,
    EEGMAT_CLASSES,
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
    _eegmat_preprocessors,
    _read_eegmat,
    load_eegmat,
)
from braindecode_pars.datasets.sleep_edf import read_sleep_edf_mat
from braindecode_pars.io.windows import read_windows


@pytest.fixture(scope="module")
def sleep(shared_data):
    """The Sleep-EDF ``*_edfm.mat`` segments in the shared data."""
    return shared_data / "sleep-edf-atm"


def csv_count_quality(eegmat):
    """subject -> count quality, read straight from PhysioNet's subject-info.csv."""
    with open(eegmat / "subject-info.csv", newline="") as f:
        return {int(r["Subject"][7:]): int(r["Count quality"]) for r in csv.DictReader(f)}


@pytest.fixture(scope="module")
def windows(eegmat):
    """Subjects 0 and 1 (full-length recordings), 4 and 31 (shorter rest recordings)."""
    return load_eegmat(eegmat, subjects=[0, 1, 4, 31])


def test_read_eegmat_gives_19_named_channels_in_volts_and_the_csv_count_quality(eegmat):
    dataset = _read_eegmat(eegmat, subjects=range(36))  # headers only: nothing is loaded
    description = dataset.description
    assert len(dataset.datasets) == 72
    assert description.subject.tolist() == [s for s in range(36) for _ in (1, 2)]
    assert (description.target == description.session - 1).all()  # 0 rest, 1 arithmetic
    quality = csv_count_quality(eegmat)
    assert description.count_quality.tolist() == [quality[s] for s in description.subject]
    assert sum(quality.values()) == 26 and len(quality) == 36  # 26 good, 10 bad counters
    raw = dataset.datasets[0].raw
    assert tuple(raw.ch_names) == EEGMAT_CHANNELS
    assert set(raw.get_channel_types()) == {"eeg"}
    assert raw.info["sfreq"] == 500
    assert not np.isnan(np.stack([ch["loc"][:3] for ch in raw.info["chs"]])).any()  # montage
    std = raw.get_data(tmin=0, tmax=10).std(axis=1)
    assert np.all((std > 1e-6) & (std < 1e-4))  # volts


def test_train_and_test_subjects_split_all_36():
    assert len(EEGMAT_TEST_SUBJECTS) == 12 and len(EEGMAT_TRAIN_SUBJECTS) == 24
    assert sorted(EEGMAT_TEST_SUBJECTS + EEGMAT_TRAIN_SUBJECTS) == list(range(36))
    assert EEGMAT_CLASSES == {"rest": 0, "arithmetic": 1}


def test_the_test_subjects_hold_four_bad_counters(eegmat):
    quality = csv_count_quality(eegmat)
    assert sum(1 - quality[s] for s in EEGMAT_TEST_SUBJECTS) == 4  # bad counters in test


def test_load_eegmat_gives_10_s_windows_at_100_hz(windows, eegmat):
    X, y, _ = windows[0]
    assert X.shape == (19, 1000)
    assert 1 < np.std(X) < 1e3  # microvolts, not volts
    assert windows.datasets[0].raw.info["sfreq"] == 100
    assert windows.datasets[0].raw.info["lowpass"] == pytest.approx(45)
    metadata = windows.get_metadata()
    counts = metadata.groupby(["subject", "target"]).size().to_dict()
    # 182-s rest, 62-s arithmetic; Subject04's rest is 170 s, Subject31's 80 s
    assert counts == {
        (0, 0): 18, (0, 1): 6, (1, 0): 18, (1, 1): 6,
        (4, 0): 17, (4, 1): 6, (31, 0): 8, (31, 1): 6,
    }  # fmt: skip
    # the windows' own targets (what a classifier reads) match the metadata
    targets = np.asarray([windows[i][1] for i in range(len(windows))])
    np.testing.assert_array_equal(targets, metadata.target.to_numpy())
    assert {"subject", "count_quality"} <= set(metadata.columns)
    assert set(metadata.count_quality[metadata.subject == 1]) == {csv_count_quality(eegmat)[1]}


def test_load_eegmat_prints_nothing(capfd, eegmat):
    load_eegmat(eegmat, subjects=[2], window_seconds=30.0)
    out, err = capfd.readouterr()
    assert "Reading" not in out + err


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        pytest.param(
            dict(subjects=[0, 36]),
            ValueError,
            r"EEGMAT 'subjects' must lie in 0..35, but got \[36\]",
            id="subject-36",
        ),
        pytest.param(
            dict(subjects=-1),
            ValueError,
            r"EEGMAT 'subjects' must lie in 0..35, but got \[-1\]",
            id="subject-minus-1",
        ),
        pytest.param(
            dict(subjects=["1"]),
            TypeError,
            r"EEGMAT 'subjects' must be ints in 0..35, but got str \('1'\)",
            id="subject-str",
        ),
        pytest.param(
            dict(subjects=[]),
            ValueError,
            "EEGMAT 'subjects' must name at least one subject",
            id="no-subject",
        ),
        pytest.param(
            dict(subjects=0, sessions=(1, 3)),
            ValueError,
            r"EEGMAT 'sessions' must be 1 \(rest\) and/or 2 \(arithmetic\), but got \[3\]",
            id="session-3",
        ),
    ],
)
def test_bad_subjects_and_sessions_are_refused(kwargs, error, match, tmp_path):
    with pytest.raises(error, match=match):  # refused before any file is looked for
        _read_eegmat(tmp_path, **kwargs)


def test_one_session_and_a_missing_file(tmp_path, eegmat):
    rest = _read_eegmat(eegmat, subjects=3, sessions=1)
    assert rest.description.session.tolist() == [1]
    with pytest.raises(FileNotFoundError, match=r"EEGMAT file '.*Subject00_1.edf' is missing"):
        _read_eegmat(tmp_path, subjects=0)
    with pytest.raises(ValueError, match=r"'window_seconds' must lie in \(0, inf\]"):
        load_eegmat(eegmat, subjects=0, window_seconds=0)


def test_read_sleep_edf_mat_reads_one_channel_at_100_hz(sleep):
    file = sleep / "SC4012E0-PSG_edfm.mat"
    dataset = read_sleep_edf_mat(file)
    assert len(dataset.datasets) == 1
    raw = dataset.datasets[0].raw
    assert raw.ch_names == ["Pz-Oz"] and raw.info["sfreq"] == 100
    assert raw.n_times == 1_000_000
    np.testing.assert_array_equal(raw.get_data()[0], scipy.io.loadmat(file)["val"][0])
    description = dataset.description.iloc[0]
    assert (description.subject, description.night) == (1, 2)
    assert description.file == "SC4012E0-PSG_edfm.mat"


def test_read_sleep_edf_mat_folder_and_errors(tmp_path, sleep):
    names = sorted(p.name for p in sleep.glob("*_edfm.mat"))
    with pytest.raises(FileNotFoundError, match="No Sleep-EDF"):
        read_sleep_edf_mat(tmp_path)
    scipy.io.savemat(tmp_path / "other.mat", {"data": np.zeros((1, 10))})
    with pytest.raises(ValueError, match=r"holds no variable 'val'; variables: \[.*'data'"):
        read_sleep_edf_mat(tmp_path / "other.mat")
    scipy.io.savemat(tmp_path / "SC4991E0-PSG_edfm.mat", {"val": np.zeros((2, 10))})
    with pytest.raises(ValueError, match=r"'val' of .* must have shape \(1, n_samples\)"):
        read_sleep_edf_mat(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_sleep_edf_mat(tmp_path / "missing.mat")
    assert len(names) == 9


def write_eegmat_files(path, subject=0, seconds=(40.0, 20.0), sfreq=200.0, amplitude=2e-5):
    """``SubjectNN_1.edf`` and ``_2.edf`` as PhysioNet names them: two EEG channels and an
    ECG channel of a 10 Hz sine of ``amplitude`` volts, in EDF (which stores microvolts)."""
    for session, length in zip((1, 2), seconds, strict=True):
        t = np.arange(int(length * sfreq)) / sfreq
        data = amplitude * np.sin(2 * np.pi * 10 * t) * np.ones((3, 1))
        info = mne.create_info(["EEG Fp1", "EEG Cz", "ECG ECG"], sfreq, ["eeg", "eeg", "ecg"])
        raw = mne.io.RawArray(data, info, verbose="error")
        file = path / f"Subject{subject:02d}_{session}.edf"
        mne.export.export_raw(file, raw, fmt="edf", verbose="error")


def test_load_eegmat_gives_microvolts_of_a_signal_written_in_volts(tmp_path):
    write_eegmat_files(tmp_path, amplitude=2e-5)  # a 20 uV sine
    windows = load_eegmat(tmp_path, subjects=[0], sfreq=100.0, window_seconds=10.0)
    X = read_windows(windows).X
    assert X.shape == (4 + 2, 2, 1000)  # 40-s rest and 20-s arithmetic recordings
    # a sine of amplitude a has standard deviation a / sqrt(2); 10 Hz is in the pass band
    np.testing.assert_allclose(X.std(axis=-1), 20 / np.sqrt(2), rtol=0.02)
    # the same recordings through the same preprocessing in volts, times 1e6
    volts = _read_eegmat(tmp_path, subjects=[0])
    preprocess(volts, _eegmat_preprocessors(100.0))
    reference = [ds.raw.get_data()[:, i * 1000 : (i + 1) * 1000] for ds in volts.datasets
                 for i in range(ds.raw.n_times // 1000)]  # fmt: skip
    np.testing.assert_allclose(X, 1e6 * np.stack(reference), rtol=1e-5, atol=1e-4)


def test_the_bundle_holds_what_load_eegmat_gives_in_microvolts(tmp_path):
    from braindecode_pars.datasets.bundled import _read_bundled_eegmat, write_eegmat_bundle

    write_eegmat_files(tmp_path, amplitude=2e-5)
    out = write_eegmat_bundle(tmp_path, tmp_path / "bundle.npz", subjects=[0])
    bundled = _read_bundled_eegmat(subjects=[0], path=out)
    loaded = load_eegmat(tmp_path, subjects=[0], sfreq=100.0, window_seconds=10.0)
    for a, b in zip(bundled.datasets, loaded.datasets, strict=True):
        assert a.description["session"] == b.description["session"]
        # float16 in the file: three significant digits
        np.testing.assert_allclose(a.raw.get_data(), b.raw.get_data(), rtol=2e-3, atol=0.02)
    assert 10 < np.abs(bundled.datasets[0].raw.get_data()).max() < 30  # a 20 uV sine


def test_the_repository_bundle_is_what_the_writer_makes_of_the_real_recordings(
    shared_data, tmp_path
):
    """The bundled file's windows of two test subjects equal the bundle the writer makes
    from EEGMAT's EDF files: benchmarks that read other subjects from the EDF files
    (``bench_finetuning_outer.py``) see them preprocessed as the bundle's."""
    from braindecode_pars.datasets.bundled import _read_bundled_eegmat, write_eegmat_bundle

    subjects = (13, 35)
    out = write_eegmat_bundle(shared_data / "eegmat", tmp_path / "b.npz", subjects=subjects)
    for a, b in zip(_read_bundled_eegmat(subjects).datasets,
                    _read_bundled_eegmat(subjects, path=out).datasets, strict=True):  # fmt: skip
        assert a.description["subject"] == b.description["subject"]
        np.testing.assert_array_equal(a.raw.get_data(), b.raw.get_data())
