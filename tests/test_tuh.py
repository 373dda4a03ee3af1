import numpy as np
import pytest
from braindecode.datasets import BaseConcatDataset

from braindecode_pars.datasets import tuh

from .tuh_fixtures import write_tuh_edf


def test_channels_are_picked_renamed_and_ordered_from_either_reference(tmp_path):
    for reference in ("REF", "LE"):
        fname = write_tuh_edf(tmp_path / f"x_{reference}.edf", reference=reference, seconds=10)
        raw = tuh.read_tuh_edf(fname, tuh.TUH_CHANNELS_21)
        assert tuple(raw.ch_names) == tuh.TUH_CHANNELS_21  # EKG and EMG left out
    raw19 = tuh.read_tuh_edf(fname, tuh.TUH_CHANNELS_19)
    assert tuple(raw19.ch_names) == tuh.TUH_CHANNELS_19
    with pytest.raises(ValueError, match=r"lacks the channels \['Oz'\]"):
        tuh.read_tuh_edf(fname, tuh.TUH_CHANNELS_19 + ("Oz",))


def test_tuab_windows_labels_and_preprocessing(tuh_corpora):
    windows = tuh.load_tuab(tuh_corpora["tuab"])
    desc = windows.description
    assert len(desc) == 6 and set(desc.split) == {"train", "eval"}
    assert len(windows) == 6 * 2  # two 30-s windows per 60-s recording
    X, y, _ = windows[0]
    assert X.shape == (21, 6000)  # 21 channels, 30 s at 200 Hz
    raw = windows.datasets[0].raw
    assert raw.info["sfreq"] == 200 and raw.info["highpass"] == pytest.approx(0.3)
    assert raw.info["lowpass"] == pytest.approx(75)
    md = windows.get_metadata()
    # every window carries its recording's label: abnormal folders are 1
    for path, target in zip(md.path, md.target, strict=True):
        assert target == (1 if "/abnormal/" in path else 0)


def test_tuab_patient_split_keeps_patients_apart(tuh_corpora):
    windows = tuh.load_tuab(tuh_corpora["tuab"])
    split = tuh.tuh_subject_split(windows, valid_fraction=0.25, random_state=0)
    subjects = {k: set(v.description.subject) for k, v in split.items()}
    assert subjects["test"] == {"aaaaaaae", "aaaaaaaf"}  # the official eval set
    assert len(subjects["valid"]) == 1 and len(subjects["train"]) == 3
    assert not (subjects["train"] & subjects["valid"])


def test_tusz_windows_are_labelled_from_the_annotations(tuh_corpora):
    windows = tuh.load_tusz(tuh_corpora["tusz"])
    md = windows.get_metadata()
    assert windows[0][0].shape == (19, 6000)
    labels = {
        subject: grp.sort_values("i_start_in_trial").target.tolist()
        for subject, grp in md.groupby("subject")
    }
    assert labels == {
        "aaaaaaac": [0, 1],  # seizure 35-50 s: second window
        "aaaaaaag": [0, 0],  # no seizure
        "aaaaaaah": [1, 1],  # 5-12 s and 58-60 s
        "aaaaaaai": [1, 1],  # 20-31 s crosses the boundary
    }
    assert [windows[i][1] for i in range(len(windows))] == md.target.tolist()
    assert set(windows.description.split) == {"train", "dev", "eval"}


def test_tusz_minimum_overlap_and_missing_annotation(tuh_corpora, tmp_path):
    windows = tuh.load_tusz(tuh_corpora["tusz"], splits=("eval",), min_overlap_seconds=5.0)
    assert windows.get_metadata().target.tolist() == [1, 0]  # only 1 s of seizure after 30 s
    folder = tmp_path / "edf" / "train" / "x" / "s001_2000" / "01_tcp_ar"
    write_tuh_edf(folder / "x_s001_t000.edf", seconds=10)
    with pytest.raises(FileNotFoundError, match="has no annotation file"):
        tuh.load_tusz(tmp_path / "edf", splits=("train",))


def test_missing_folders_and_bad_splits_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="TUAB train/normal folder"):
        tuh.load_tuab(tmp_path)
    with pytest.raises(ValueError, match="'splits' parameter"):
        tuh.load_tusz(tmp_path, splits=("test",))


def _same_windows(a, b):
    """The same recordings, windows, labels and (to float32) samples."""
    assert a.description.path.tolist() == b.description.path.tolist()
    assert a.get_metadata().target.tolist() == b.get_metadata().target.tolist()
    assert len(a) == len(b)
    for i in (0, len(a) // 2, len(a) - 1):
        np.testing.assert_allclose(a[i][0], b[i][0], rtol=1e-6)


@pytest.mark.parametrize("loader, corpus", [(tuh.load_tuab, "tuab"), (tuh.load_tusz, "tusz")])
def test_cached_windows_equal_those_in_memory_and_are_read_lazily(
    tuh_corpora, tmp_path, loader, corpus
):
    memory = loader(tuh_corpora[corpus])
    cached = loader(tuh_corpora[corpus], cache_dir=tmp_path / "cache")
    assert not any(ds.raw.preload for ds in cached.datasets)
    _same_windows(cached, memory)
    split = tuh.tuh_subject_split(cached, random_state=0)  # the recipe's split works on them
    assert set(split["test"].description.split) == {"eval"}
    again = loader(tuh_corpora[corpus], cache_dir=tmp_path / "cache")  # read as it is
    _same_windows(again, memory)
    with pytest.raises(FileExistsError, match=r"they differ in \['window_seconds'\]"):
        loader(tuh_corpora[corpus], window_seconds=10.0, cache_dir=tmp_path / "cache")


def test_tueg_stream_reads_one_recording_at_a_time_as_the_reader_does(tuh_corpora):
    memory = tuh.load_tueg(tuh_corpora["tueg"], exclude_subjects=["aaaaaaac"])
    stream = tuh.load_tueg(tuh_corpora["tueg"], exclude_subjects=["aaaaaaac"], lazy=True)
    assert len(stream) == 2
    streamed = BaseConcatDataset([ds for windows in stream for ds in windows.datasets])
    assert streamed.description.subject.tolist() == ["aaaaaaaa", "aaaaaaax"]
    assert len(streamed) == len(memory)
    for i in (0, len(memory) - 1):
        np.testing.assert_array_equal(streamed[i][0], memory[i][0])
