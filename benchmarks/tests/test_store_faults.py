"""Faults, tested (``benchmarks/bench_faults.py``'s harness on a handful of trials):
``store --jobs 2`` stopped by SIGTERM and killed by SIGKILL at seeded random points (its
process, or every process of the job at once), killed at points of its finish, a full
disk, and a second build into a folder: each resumes to the bytes of a build never
stopped, and no process is left."""

import signal

import pytest

from benchmarks import bench_faults

# processes of --jobs 2, each ~6 s; the harness run for real is make test-faults's (CI
# tests it on recorded trials: test_fault_records.py)
pytestmark = [pytest.mark.serial, pytest.mark.slow, pytest.mark.faults]


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    """Two trials per signal on five recordings: (recordings, reference, rows)."""
    return bench_faults.store_faults(tmp_path_factory.mktemp("faults"), trials=2, recordings=5)


def test_stopped_and_killed_builds_leave_no_process_and_resume_to_the_same_bytes(trials):
    _, _, rows = trials
    assert [r["signal"] for r in rows] == ["SIGTERM"] * 2 + ["SIGKILL"] * 2
    for row in rows:
        assert row["equal"], row
        assert row["left"] == 0, row
    assert any(r["workers"] == 2 for r in rows)  # the --jobs 2 workers were there to end
    assert any(r["signal"] == "SIGTERM" and r["status"] == 143 for r in rows)  # mid-build
    for row in rows:
        if row["signal"] == "SIGKILL":
            assert row["status"] == -9
        elif row["status"] != 0:  # unless it ended before the signal: stopped, saying so
            assert row["status"] == 128 + 15, row["output"]
            assert "stopped by SIGTERM after" in row["output"]
            assert "Run the same command to resume" in row["output"]


def test_a_full_disk_is_refused_with_a_message_and_the_build_resumes(trials, tmp_path):
    pattern, reference, _ = trials
    status, output, kept, equal = bench_faults.full_disk(pattern, reference, tmp_path / "disk")
    assert status == 1, output
    assert "Cannot write the store in" in output and "File too large" in output
    assert "make room and call again with the same settings" in output
    assert kept == 2  # the recordings committed before the failed write
    assert equal


def test_a_second_build_into_a_folder_is_refused_and_the_first_ends_clean(trials, tmp_path):
    pattern, reference, _ = trials
    pid, message, status, equal = bench_faults.second_build(pattern, reference, tmp_path / "two")
    assert message is not None and f"is in use by process {pid} (a store build)" in message
    assert status == 0 and equal


@pytest.mark.parametrize("name", ["SIGTERM", "SIGKILL"])
def test_the_whole_job_signalled_at_once_leaves_no_process_and_resumes(trials, tmp_path, name):
    """The signal to every process of ``store --jobs 2`` at the same moment (``kill --
    -PGID``, as a scheduler at a time limit): the group ends whole, the same command
    resumes to the bytes of a build never stopped."""
    pattern, reference, _ = trials
    sig = getattr(signal, name)
    row = bench_faults.store_trial(
        pattern, reference, tmp_path / "out", sig, point=1, delay=0.0, group=True
    )
    assert row["workers"] == 2  # the command's workers were signalled too
    assert row["left"] == 0 and row["group_empty"], row
    assert row["equal"]
    assert 1 <= row["committed"] < 5  # mid-build
    if sig == signal.SIGKILL:
        assert row["status"] == -9
    else:  # its workers leave the stop signal to it: it stops at a recording's end
        assert row["status"] == 128 + 15, row["output"]
        assert "stopped by SIGTERM after" in row["output"]


def test_a_build_killed_during_and_after_its_finish_steps_is_whole_or_resumes(trials, tmp_path):
    """The harness's kills at points of the finish: killed while ``info.json`` is written
    (a temporary file left, no index: refused as incomplete) and once ``index.npz`` is
    written (whole, its build files still there); both resume to the same bytes."""
    from braindecode_pars.store.write import FINISH_STEPS

    pattern, reference, _ = trials
    points = bench_faults.finish_points()
    assert [step for when, step in points if when == "after"] == list(FINISH_STEPS)
    rows = bench_faults.finish_kills(
        pattern, reference, tmp_path, points=[("during", "info.json"), ("after", "index.npz")]
    )
    during, after = rows
    assert during["status"] == after["status"] == -9
    assert during["left"] == "refused" and len(during["temporary"]) == 1
    assert after["left"] == "whole" and after["temporary"] == []
    for row in rows:
        assert row["group_empty"] and row["equal"], row["output"]
