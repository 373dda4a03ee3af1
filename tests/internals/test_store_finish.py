"""A store build killed at each point of its finish (``store.write._finish``): the store it
leaves is whole (it reads back as a build never stopped) or resumable (the same call ends
it), and the same call always ends with the bytes of a build never stopped."""

import filecmp
import multiprocessing
import os
import signal
from pathlib import Path

import mne
import numpy as np
import pandas as pd
import pytest
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows

from braindecode_pars.store import read_window_store, write_window_store
from braindecode_pars.store import write as store_write
from braindecode_pars.store.write import FINISH_STEPS

#: The settings of every build here (a complete store of the same settings is returned as
#: it is, its build files removed).
SETTINGS = {"test": "finish"}

#: Every point of the finish: ``("during", step)`` kills the build once the step's file is
#: written, before it takes its name (a write killed midway: a temporary file is left;
#: for the data, nothing of the finish is done yet); ``("after", step)`` once the step is
#: on the disk.
POINTS = [
    point
    for step in FINISH_STEPS
    for point in (("during", step), ("after", step))
    if point[0] == "after" or step in ("data", "recordings.json", "info.json", "index.npz")
]
#: The points after which the store is complete: its index is written.
COMPLETE = FINISH_STEPS[FINISH_STEPS.index("index.npz") :]


@pytest.fixture(scope="module")
def windows():
    """Three recordings of 3 EEG channels (1, 2 and 3 minutes at 100 Hz) in 5-s windows."""
    parts = []
    for i, minutes in enumerate((1, 2, 3)):
        data = 1e-5 * np.random.default_rng(i).standard_normal((3, minutes * 6000))
        info = mne.create_info(["C3", "C4", "Cz"], 100.0, "eeg")
        raw = mne.io.RawArray(data, info, verbose="error")
        parts.append(RawDataset(raw, pd.Series({"subject": i})))
    return create_fixed_length_windows(
        BaseConcatDataset(parts),
        window_size_samples=500,
        window_stride_samples=500,
        on_last_window="drop",
    )


@pytest.fixture(scope="module")
def reference(windows, tmp_path_factory):
    """A build never stopped."""
    folder = tmp_path_factory.mktemp("finish") / "reference"
    write_window_store(windows, folder, settings=SETTINGS)
    return folder


def same_store(a, b):
    """Whether folders ``a`` and ``b`` hold the same files (hidden ones too) with the same
    bytes."""
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(
        filecmp.cmp(Path(a) / n, Path(b) / n, shallow=False) for n in names
    )


def reads_as(folder, reference):
    """Whether the store at ``folder`` reads back as ``reference``: the same recordings,
    index, info and descriptions."""
    recordings, index, info = read_window_store(folder)
    expected, expected_index, expected_info = read_window_store(reference)
    return (
        np.array_equal(index, expected_index)
        and info == expected_info
        and len(recordings) == len(expected)
        and all(np.array_equal(a, b) for a, b in zip(recordings, expected, strict=True))
    )


def _killed_build(windows, folder, when, step):
    """In a process of its own: the build, killed (SIGKILL) at ``(when, step)``."""

    def kill():
        os.kill(os.getpid(), signal.SIGKILL)

    if when == "after":

        def finish_step(path, name):
            if name == step:
                kill()

        store_write._finish_step = finish_step
    else:
        target = "data.f32" if step == "data" else step
        real_replace = os.replace

        def replace(source, destination):
            if Path(destination) == Path(folder) / target:
                kill()
            return real_replace(source, destination)

        os.replace = replace  # this process's only: the rename that ends the step's write
    write_window_store(windows, folder, settings=SETTINGS)


@pytest.mark.parametrize(("when", "step"), POINTS, ids=[f"{w}-{s}" for w, s in POINTS])
def test_a_build_killed_at_each_point_of_its_finish_is_whole_or_resumes_to_the_same_bytes(
    windows, reference, tmp_path, when, step
):
    folder = tmp_path / "killed"
    process = multiprocessing.get_context("fork").Process(
        target=_killed_build, args=(windows, folder, when, step)
    )
    process.start()
    process.join(timeout=120)
    assert process.exitcode == -signal.SIGKILL  # killed at that point, not before or after
    complete = when == "after" and step in COMPLETE
    if complete:  # whole: it reads back as the build never stopped
        assert reads_as(folder, reference)
    else:  # not a store yet, and refused as such (never read back wrong)
        with pytest.raises(FileNotFoundError, match="index.npz is missing"):
            read_window_store(folder)
    # a killed write leaves its temporary file
    temporary = [n for n in os.listdir(folder) if n.startswith(".") and n.endswith(".tmp")]
    assert bool(temporary) == (when == "during" and step != "data"), temporary
    write_window_store(windows, folder, settings=SETTINGS)  # the same call
    assert same_store(folder, reference)
    assert reads_as(folder, reference)


def test_the_finish_steps_are_each_reached_in_their_order(windows, tmp_path, monkeypatch):
    """The points above are all the finish's: each step is reported once, in its order,
    and the last leaves the store's files alone."""
    steps = []
    monkeypatch.setattr(store_write, "_finish_step", lambda path, step: steps.append(step))
    write_window_store(windows, tmp_path / "store", settings=SETTINGS)
    assert tuple(steps) == FINISH_STEPS
    assert sorted(os.listdir(tmp_path / "store")) == [
        "data.f32", "index.npz", "info.json", "recordings.json",
    ]  # fmt: skip
