"""The development tasks: fixed, disjoint splits, and data that match them."""

import csv

import numpy as np
import pytest

from benchmarks.lib.dev_tasks import (
    DEV_TASKS,
    MI_SELECTION_BLOCKS,
    MI_TEST_BLOCKS,
    load_task,
    run_block,
)
from braindecode_pars.datasets.eegmat import (
    EEGMAT_POOL_SUBJECTS,
    EEGMAT_SELECTION_SUBJECTS,
    EEGMAT_TEST_SUBJECTS,
)

EEGMAT_PARTS = [
    set(EEGMAT_POOL_SUBJECTS),
    set(EEGMAT_SELECTION_SUBJECTS),
    set(EEGMAT_TEST_SUBJECTS),
]


def test_eegmat_subjects_fall_in_exactly_one_of_pool_selection_and_test():
    parts = EEGMAT_PARTS
    assert [len(p) for p in parts] == [12, 12, 12]
    assert set.union(*parts) == set(range(36))
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert not set(MI_SELECTION_BLOCKS) & set(MI_TEST_BLOCKS)


def test_every_eegmat_part_holds_bad_counters(eegmat):
    with open(eegmat / "subject-info.csv", newline="") as f:  # PhysioNet's own table
        rows = list(csv.DictReader(f))
    bad = {int(r["Subject"].replace("Subject", "")) for r in rows if r["Count quality"] == "0"}
    assert [len(p & bad) for p in EEGMAT_PARTS] == [3, 3, 4]


@pytest.mark.parametrize(
    "name, n_windows, classes",
    [
        ("mi-imagery-lr", (30, 15), {0, 1}),
        ("mi-executed-lr", (30, 15), {0, 1}),
        ("mi-imagery-4", (60, 30), {0, 1, 2, 3}),
        ("mi-executed-ff", (30, 15), {2, 3}),
        ("eegmat-arithmetic", None, {0, 1}),
    ],
)
def test_each_part_holds_its_units_and_every_class(name, n_windows, classes, request):
    task = DEV_TASKS[name]
    # PhysioNet-MI S001 is bundled; the EEGMAT task reads the shared files (or skips)
    eegmat = request.getfixturevalue("eegmat") if name.startswith("eegmat") else None
    for i, part in enumerate(("selection", "test")):
        data = task.load(part, eegmat_path=eegmat)
        units = task.selection if part == "selection" else task.test
        assert set(np.unique(data.groups)) == set(units)
        assert set(np.unique(data.y)) == classes
        assert data.X.shape[0] == len(data.y) == len(data.groups)
        assert data.X.shape[-1] == int(task.window_seconds * data.sfreq)
        if n_windows is not None:
            assert len(data.y) == n_windows[i]


def test_eegmat_tasks_ask_for_the_files():
    with pytest.raises(
        ValueError, match="'eegmat_path' is needed for the task 'eegmat-arithmetic'"
    ):
        DEV_TASKS["eegmat-arithmetic"].load("test")


def test_the_benchmarks_read_a_part_with_the_one_loader():
    """``load_task`` reads the labelled pool and the scored units of a
    part with ``DevTask.load_units``: its scored windows are those ``DevTask.load``
    gives for the part, window for window."""
    X, y, units, pool, scored, sfreq = load_task("mi-imagery-lr", "test")
    assert pool == tuple(MI_SELECTION_BLOCKS) and tuple(scored) == tuple(MI_TEST_BLOCKS)
    assert set(np.unique(units)) == set(MI_SELECTION_BLOCKS) | set(MI_TEST_BLOCKS)
    part = DEV_TASKS["mi-imagery-lr"].load("test")
    scored_windows = np.isin(units, MI_TEST_BLOCKS)
    np.testing.assert_array_equal(X[scored_windows], part.X)
    np.testing.assert_array_equal(y[scored_windows], part.y)
    assert X.dtype == np.float32 and sfreq == part.sfreq == 100.0


def test_a_runs_block_is_the_one_the_loader_writes():
    """The lab's block of a run (which selects a part's runs) is the ``block`` that
    ``load_physionet_mi`` writes in the description of the run's recording."""
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi

    runs = [3, 6, 7, 10, 11, 14]
    windows = load_physionet_mi(runs=runs, sfreq=100.0)
    written = dict(zip(windows.description["run"], windows.description["block"], strict=True))
    assert {run: run_block(run) for run in runs} == {int(r): int(b) for r, b in written.items()}
    assert [run_block(run) for run in runs] == [1, 1, 2, 2, 3, 3]
