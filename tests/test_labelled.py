"""load_labelled_recordings on EDF and FIF files laid out as a user's study: the labels
and subjects from the file names, a table of files, BIDS's participants.tsv or a
function, checked window by window against what was written."""

import re

import mne
import numpy as np
import pandas as pd
import pytest

from braindecode_pars.io import load_labelled_recordings

SFREQ = 100.0
WINDOW = 5.0
#: (subject, task, seconds, frequency in Hz, amplitude in microvolts) of each file
RECORDINGS = [
    ("01", "rest", 20.0, 6.0, 20.0),
    ("01", "arith", 25.0, 11.0, 30.0),
    ("02", "rest", 30.0, 17.0, 40.0),
    ("02", "arith", 15.0, 23.0, 50.0),
]


def _raw(seconds, freq, amplitude_uv):
    """Two channels of a sine of ``freq`` Hz, ``amplitude_uv`` microvolts, in volts."""
    t = np.arange(int(seconds * SFREQ)) / SFREQ
    sine = amplitude_uv * 1e-6 * np.sin(2 * np.pi * freq * t)
    info = mne.create_info(["Fz", "Cz"], SFREQ, "eeg")
    return mne.io.RawArray(np.vstack([sine, 0.5 * sine]), info, verbose="error")


def _write(raw, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".fif":
        raw.save(path, verbose="error")
    else:
        mne.export.export_raw(path, raw, fmt="edf", verbose="error")
    return path


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """``study/sub-XX/eeg/sub-XX_task-T_run-1.edf`` (one FIF among them) and what each holds."""
    root = tmp_path_factory.mktemp("study")
    written = {}
    for subject, task, seconds, freq, amplitude in RECORDINGS:
        ext = ".fif" if (subject, task) == ("02", "arith") else ".edf"
        name = f"sub-{subject}_task-{task}_run-1" + ("_raw" if ext == ".fif" else "") + ext
        path = _write(_raw(seconds, freq, amplitude), root / f"sub-{subject}" / "eeg" / name)
        written[path.name] = dict(
            subject=subject, task=task, n=int(seconds // WINDOW), freq=freq, amplitude=amplitude
        )
    return root, written


def _check_windows(windows, written, order, label_of, subject_of):
    """Each file's windows, in ``order``: their count, label, subject, frequency and
    amplitude (microvolts) as written."""
    assert windows.sfreq == SFREQ
    assert windows.ch_names == ["Fz", "Cz"]
    n = [written[name]["n"] for name in order]
    assert windows.X.shape == (sum(n), 2, int(WINDOW * SFREQ))
    assert windows.X.dtype == np.float32
    freqs = np.fft.rfftfreq(windows.X.shape[-1], 1 / SFREQ)
    start = 0
    for name, count in zip(order, n, strict=True):
        part = slice(start, start + count)
        start += count
        info = written[name]
        assert windows.y[part].tolist() == [label_of(info)] * count, name
        assert windows.groups[part].tolist() == [subject_of(info)] * count, name
        X = windows.X[part].astype(np.float64)
        spectrum = np.abs(np.fft.rfft(X[:, 0], axis=-1)).mean(0)
        assert freqs[spectrum.argmax()] == pytest.approx(info["freq"], abs=0.2), name
        # the middle windows in microvolts, as written (band-pass 0.3-45 Hz keeps the sine)
        middle = X[1:-1] if count > 2 else X
        amplitude = np.sqrt(2) * middle[:, 0].std(axis=-1)
        np.testing.assert_allclose(amplitude, info["amplitude"], rtol=0.05, err_msg=name)
        np.testing.assert_allclose(middle[:, 1], 0.5 * middle[:, 0], rtol=1e-3, atol=0.05)


def test_labels_and_subjects_from_the_file_names(study):
    root, written = study
    windows = load_labelled_recordings(
        root, r"sub-(?P<subject>\d+)_task-(?P<label>[a-z]+)_", window_seconds=WINDOW
    )
    order = sorted(written, key=lambda name: str(next(root.rglob(name))))  # the files' order
    _check_windows(windows, written, order, lambda i: i["task"], lambda i: i["subject"])


def test_labels_from_a_table_of_files_and_subjects_from_a_folder(study, tmp_path):
    root, written = study
    rows = [
        dict(file=f"sub-{i['subject']}/eeg/{name}", diagnosis=f"d{i['task']}")
        for name, i in written.items()
    ]
    pd.DataFrame(rows[::-1]).to_csv(tmp_path / "labels.csv", index=False)
    windows = load_labelled_recordings(
        sorted(root.rglob("*_run-1*")), r"sub-(?P<patient>\d+)/", tmp_path / "labels.csv",
        label="diagnosis", subject="patient", window_seconds=WINDOW,
    )  # fmt: skip
    order = [p.name for p in sorted(root.rglob("*_run-1*"))]
    _check_windows(windows, written, order, lambda i: f"d{i['task']}", lambda i: i["subject"])


def test_labels_of_subjects_from_a_bids_participants_tsv(study, tmp_path):
    root, written = study
    participants = tmp_path / "participants.tsv"
    participants.write_text(
        "participant_id\tage\tgroup\nsub-02\t41\tcontrol\nsub-01\tn/a\tpatient\nsub-03\t50\tcontrol\n"
    )
    windows = load_labelled_recordings(
        root, r"(?P<participant_id>sub-\d+)_", participants, label="group",
        subject="participant_id", window_seconds=WINDOW,
    )  # fmt: skip
    order = sorted(written, key=lambda name: str(next(root.rglob(name))))
    group = {"01": "patient", "02": "control"}
    _check_windows(
        windows, written, order, lambda i: group[i["subject"]], lambda i: f"sub-{i['subject']}"
    )


def test_labels_from_a_function_and_a_dataframe_without_groups(study):
    root, written = study
    table = pd.DataFrame({"file": list(written), "y": [3, 1, 4, 1]})
    windows = load_labelled_recordings(
        root, table=table, label="y", subject=None, window_seconds=WINDOW
    )
    assert windows.groups is None
    order = sorted(written, key=lambda name: str(next(root.rglob(name))))
    y_of = dict(zip(table.file, table.y, strict=True))
    expected = np.concatenate([[y_of[name]] * written[name]["n"] for name in order])
    assert windows.y.tolist() == expected.tolist()
    assert np.issubdtype(windows.y.dtype, np.integer)  # the table's own type

    def fields(path):
        subject, task = path.name.split("_")[:2]
        return {"label": task == "task-arith", "subject": subject}

    windows = load_labelled_recordings(root, fields, window_seconds=WINDOW)
    _check_windows(
        windows, written, order, lambda i: i["task"] == "arith", lambda i: f"sub-{i['subject']}"
    )


@pytest.fixture
def no_reading(monkeypatch):
    """Fail if any recording is read."""

    def refuse(*args, **kwargs):
        raise AssertionError("a recording was read before the labels were checked")

    monkeypatch.setattr(mne.io, "read_raw", refuse)  # every recording is read through it


def test_files_without_a_label_are_refused_before_any_recording_is_read(study, no_reading):
    root, written = study
    with pytest.raises(
        ValueError, match=r"'pattern' .* does not match the name of the file '.*sub-01_task-arith"
    ):
        load_labelled_recordings(root, r"sub-(?P<subject>\d+)_task-(?P<label>rest)_")
    with pytest.raises(ValueError, match="'pattern' 'sub-01' has no named group"):
        load_labelled_recordings(root, "sub-01")
    with pytest.raises(
        ValueError, match=r"'label'='label' is not a field of the file .*\['subject'\]"
    ):
        load_labelled_recordings(root, r"sub-(?P<subject>\d+)_")
    with pytest.raises(ValueError, match="or pass subject=None"):
        load_labelled_recordings(root, r"task-(?P<label>[a-z]+)_")
    table = pd.DataFrame({"file": list(written)[:3], "label": [0, 1, 0]})
    missing = list(written)[3]
    with pytest.raises(
        ValueError, match=f"{re.escape(missing)}' \\(file=.*\\) matches no row of 'table'"
    ):
        load_labelled_recordings(root, table=table, subject=None)
    twice = pd.DataFrame({"participant_id": ["sub-01", "sub-01", "sub-02"], "label": [0, 1, 0]})
    with pytest.raises(ValueError, match=r"matches 2 rows \(rows \[0, 1\]\) of 'table'"):
        load_labelled_recordings(root, r"(?P<participant_id>sub-\d+)_", twice, subject=None)
    with pytest.raises(ValueError, match="'table' has no column 'file'"):
        load_labelled_recordings(root, r"(?P<x>sub-\d+)_", twice, subject=None)
    with pytest.raises(ValueError, match="Give 'pattern'"):
        load_labelled_recordings(root)
    with pytest.raises(TypeError, match="'pattern' must be a regular expression"):
        load_labelled_recordings(root, 3)
    with pytest.raises(FileNotFoundError, match="No recording matches"):
        load_labelled_recordings(root / "nothing_here", r"(?P<label>x)")


def test_a_read_option_load_recordings_does_not_take_is_refused_before_files_are_sought(
    no_reading,
):
    # the folder does not exist: the keyword is refused before any file is looked for
    with pytest.raises(TypeError, match=r"got 'window_second', which load_recordings"):
        load_labelled_recordings("nowhere", r"(?P<label>x)", window_second=10)
    with pytest.raises(TypeError, match=r"got 'lazy'.*'sfreq', 'window_seconds'"):
        load_labelled_recordings("nowhere", r"(?P<label>x)", lazy=True)
