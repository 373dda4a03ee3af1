"""Internals of io's labelled reading."""

from braindecode_pars.io import _labelled as labelled


def test_the_read_options_are_those_load_recordings_takes():
    assert set(labelled._READ_OPTIONS) >= {"sfreq", "window_seconds", "picks", "on_error"}
