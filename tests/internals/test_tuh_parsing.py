"""TUH's file names, seizure labels and subjects, read by the private helpers of
``datasets.tuh``."""

import numpy as np
import pytest

from braindecode_pars.datasets import tuh

from ..tuh_fixtures import write_csv_bi


def test_file_names_give_subject_session_segment():
    assert tuh._parse_tuh_file_name("a/b/aaaaaaav_s004_t002.edf") == ("aaaaaaav", 4, 2)
    with pytest.raises(ValueError, match="not named as TUH files are"):
        tuh._parse_tuh_file_name("recording.edf")


def test_csv_bi_parsing_and_window_labels(tmp_path):
    write_csv_bi(tmp_path / "a.csv_bi", [(35.0, 50.0), (58.0, 60.0)])
    np.testing.assert_allclose(tuh._read_csv_bi(tmp_path / "a.csv_bi"), [[35, 50], [58, 60]])
    intervals = np.array([[35.0, 50.0]])
    np.testing.assert_array_equal(tuh._seizure_labels([0, 30], [30, 60], intervals), [0, 1])
    np.testing.assert_array_equal(tuh._seizure_labels([0, 30], [30, 60], intervals, 20.0), [0, 0])
    np.testing.assert_array_equal(tuh._seizure_labels([0], [30], np.zeros((0, 2))), [0])


def test_tueg_leaves_out_fine_tuning_patients(tuh_corpora):
    excluded = tuh._tuh_subjects(tuh_corpora["tuab"]) + tuh._tuh_subjects(tuh_corpora["tusz"])
    windows = tuh.load_tueg(tuh_corpora["tueg"], exclude_subjects=excluded)
    assert set(windows.description.subject) == {"aaaaaaax"}  # a and c are TUAB/TUSZ patients
    assert windows[0][0].shape == (19, 6000)
    with pytest.raises(ValueError, match="belongs to an excluded subject"):
        tuh.load_tueg(tuh_corpora["tueg"], exclude_subjects=["aaaaaaaa", "aaaaaaac", "aaaaaaax"])
