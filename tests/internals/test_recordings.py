"""Internals of io: which channel names are not EEG (moved from tests/test_recordings.py)."""

import pytest

from braindecode_pars.io.recordings import _non_eeg_channels


@pytest.mark.parametrize(
    "name, left_out",
    [
        pytest.param("EEG Fp1", False, id="scalp site"),
        pytest.param("EEG Fp1-REF", False, id="scalp site against REF"),
        pytest.param("C3-M2", False, id="scalp site against a mastoid"),
        pytest.param("TP9", False, id="mastoid-adjacent site"),
        pytest.param("EEG0", False, id="numbered EEG"),
        pytest.param("EEG A2-A1", True, id="reference derivation"),
        pytest.param("A1", True, id="ear electrode"),
        pytest.param("M2", True, id="mastoid"),
        pytest.param("REF", True, id="reference"),
        pytest.param("ECG ECG", True, id="ECG"),
        pytest.param("EEG EKG1-REF", True, id="EKG in TUH's naming"),
        pytest.param("EMG Chin", True, id="EMG"),
        pytest.param("EOG LOC-A2", True, id="EOG"),
        pytest.param("Resp oro-nasal", True, id="respiration"),
        pytest.param("SpO2", True, id="oximetry"),
    ],
)
def test_channel_names_that_are_not_eeg(name, left_out):
    assert _non_eeg_channels([name]) == ([name] if left_out else [])
