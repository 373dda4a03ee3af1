"""What a user reads at the defaults: the model card says what was held out for
validation and names only the datasets it knows; counts agree with their nouns; a
finished run run again says it is finished."""

import logging

import mne
import numpy as np
import pytest

from braindecode_pars import PatchEncoder
from braindecode_pars.hub.folders import model_card
from braindecode_pars.io import load_labelled_recordings, load_recordings
from braindecode_pars.store import write_window_store

from .conftest import TINY
from .ramp_fixtures import ramp_run

ENCODER = PatchEncoder(sfreq=100, **TINY)
RUN = {"model": "pars", "valid_fraction": 0.1, "max_epochs": 75, "data.n_windows": 1000}


def _card_lines(run_config, history=(), status=None):
    card = model_card(ENCODER, run_config=run_config, history=list(history), status=status)
    return card.splitlines()


def _line(lines, start):
    (found,) = [line for line in lines if line.startswith(start)]
    return found


@pytest.mark.parametrize(
    "split, said",
    [
        pytest.param(
            "recordings",
            "whole recordings, drawn at random until their windows made at least 10 % of the "
            "windows and at most twice that (`valid_fraction` 0.1)",
            id="recordings",
        ),
        pytest.param("groups", "whole groups of recordings, drawn at random", id="groups"),
        pytest.param(
            "windows",
            "10 % of the windows, drawn within the recordings (too few recordings to hold out "
            "whole ones)",
            id="windows",
        ),
        pytest.param(None, "whether as whole recordings or as windows", id="not recorded"),
    ],
)
def test_the_card_says_what_was_held_out_for_validation(split, said):
    history = [{"epoch": 1, "valid_skill": 0.5, "valid_loss": 1.0, "valid_split": split}]
    held_out = _line(_card_lines(RUN, history), "- held out for validation: ")
    assert said in held_out
    if split in ("recordings", "groups"):  # not the fraction of the windows, as if exact
        assert "10 % of the windows" not in held_out.split("until")[0]


def test_the_card_names_the_datasets_it_knows_and_leaves_out_a_nameless_line():
    unnamed = dict(RUN, **{"data.datasets": "?: 2 recordings of 1 people, 0.06 channel-hours"})
    assert not any(line.startswith("- datasets") for line in _card_lines(unnamed))
    mixed = dict(
        RUN,
        **{"data.datasets": "eegmat: 48 recordings of 24 people; ?: 3 recordings of 2 people"},
    )
    assert _line(_card_lines(mixed), "- datasets: ") == (
        "- datasets: eegmat: 48 recordings of 24 people; of no named dataset: 3 recordings "
        "of 2 people"
    )


def test_the_card_of_a_one_epoch_run_says_epoch():
    lines = _card_lines(dict(RUN, max_epochs=1), status={"epoch": 1, "max_epochs": 1,
                                                          "finished": True})  # fmt: skip
    assert _line(lines, "- status: ") == "- status: **finished**, 1 of 1 epoch"


def _edf(path, channels, seed, seconds=20.0):
    rng = np.random.default_rng(seed)
    data = 1e-5 * rng.standard_normal((len(channels), int(seconds * 100)))
    raw = mne.io.RawArray(data, mne.create_info(channels, 100.0, "eeg"), verbose="error")
    mne.export.export_raw(path, raw, fmt="edf", verbose="error")
    return path


def test_one_recording_one_channel_one_subject_read_in_the_singular(tmp_path, caplog):
    _edf(tmp_path / "sub-1_label-a.edf", ["Cz"], 0)
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        load_labelled_recordings(
            tmp_path, r"sub-(?P<subject>\d)_label-(?P<label>\w)", window_seconds=10.0
        )
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Reading 1 channel of the recording: Cz;") for m in said)
    assert "Read 2 windows from 1 recording: labels a (2); 1 subject." in said


class Stop(Exception):
    """A build stopped after its first recording."""


def _one_at_a_time(files, stop_after=None):
    for i, file in enumerate(files):
        if i == stop_after:
            raise Stop
        yield load_recordings(file, window_seconds=5.0)


def test_a_store_build_resumed_after_one_recording_says_recording(tmp_path, caplog):
    files = [_edf(tmp_path / f"r{i}.edf", ["C3", "C4"], i) for i in range(3)]
    with pytest.raises(Stop):
        write_window_store(_one_at_a_time(files, stop_after=1), tmp_path / "store")
    with caplog.at_level(logging.INFO, logger="braindecode_pars.store"):
        write_window_store(_one_at_a_time(files), tmp_path / "store")
    said = [r.getMessage() for r in caplog.records]
    assert any(m.endswith("store after 1 recording.") for m in said), said


@pytest.mark.filterwarnings("ignore:Pretraining ended with a pretext skill")
def test_a_finished_run_run_again_says_it_is_finished_and_trains_nothing(tmp_path, caplog):
    first = ramp_run(tmp_path / "run", max_epochs=1, valid_fraction=None)
    with caplog.at_level(logging.INFO, logger="braindecode_pars.pretraining"):
        again = ramp_run(tmp_path / "run", max_epochs=1, valid_fraction=None)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert f"The run in {tmp_path / 'run'} is finished already (1 of 1 epoch)" in said
    assert "nothing to train" in said and "Resuming pretraining" not in said
    assert len(again.history) == len(first.history) == 1  # no epoch trained again
