"""Faults of ``braindecode-pars pretrain`` in a process of its own (the harness of
benchmarks/bench_faults_pretrain.py, one trial each): SIGTERM and SIGKILL at epoch 2 or
later, then the same command again; a full disk during a checkpoint."""

import signal

import pytest

from benchmarks import bench_faults_pretrain

pytestmark = pytest.mark.slow  # each trial starts the command line twice (about 10 s each)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    bench = bench_faults_pretrain
    root = tmp_path_factory.mktemp("faults")
    return bench, root, bench.build_store(root / "store")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1], ids=["SIGTERM", "SIGUSR1"])
def test_a_stop_signal_loses_no_step_and_the_rerun_continues(harness, sig):
    bench, root, store = harness
    r = bench.trial(root, store, sig, at_epoch=2)
    assert r["code"] == 128 + sig, r["message"]
    assert f"stopped by {sig.name}" in r["message"] and "same command" in r["message"]
    # the state saved is the step reached: its optimiser count is epochs and steps done
    assert r["epoch"] >= 2
    assert r["optimizer_steps"] == r["epoch"] * r["steps_per_epoch"] + r["steps"]
    assert r["left"] == []
    assert r["rerun_code"] == 0, r["rerun_error"]
    assert r["final_epoch"] == bench.EPOCHS
    assert r["final_steps"] == bench.EPOCHS * r["steps_per_epoch"]  # none lost, none twice


def test_sigkill_keeps_the_last_state_and_leaves_no_worker(harness):
    bench, root, store = harness
    r = bench.trial(root, store, signal.SIGKILL, at_epoch=2)
    assert r["code"] == -signal.SIGKILL
    assert r["epoch"] >= r["signalled_at"][0] >= 2  # at most the interval (an epoch) lost
    assert r["left"] == []  # its DataLoader worker ended with it
    assert r["rerun_code"] == 0, r["rerun_error"]
    assert r["final_steps"] == bench.EPOCHS * r["steps_per_epoch"]


def test_a_full_disk_during_a_checkpoint_is_refused_and_loses_nothing(harness):
    bench, root, store = harness
    r = bench.full_disk(root, store)
    assert r["code"] == 1
    assert "Could not write the checkpoint" in r["message"] and "stays" in r["message"]
    assert r["state_kept"]
    assert r["rerun_code"] == 0, r["rerun_error"]
    assert r["final_steps"] == bench.EPOCHS * r["steps_per_epoch"]


@pytest.mark.serial  # the run and its two DataLoader workers, signalled together
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_whole_job_signalled_at_once_leaves_no_process_and_the_rerun_continues(harness, sig):
    """The signal to every process of ``pretrain --workers 2`` at the same moment (``kill
    -- -PGID``, as a scheduler at a time limit): nothing of the job is left, and the same
    command finishes with the steps of a run never stopped."""
    bench, root, store = harness
    r = bench.trial(root, store, sig, at_epoch=2, workers=2, group=True)
    assert r["workers"] >= 2  # its DataLoader workers were there to signal
    assert r["left"] == [] and r["group_empty"]
    if sig == signal.SIGKILL:
        assert r["code"] == -signal.SIGKILL
        assert r["epoch"] >= r["signalled_at"][0] >= 2  # at most the interval lost
    else:  # the workers leave SIGTERM to the trainer, which saves the step it reached
        assert r["code"] == 128 + sig, r["message"]
        assert f"stopped by {sig.name}" in r["message"]
        assert r["optimizer_steps"] == r["epoch"] * r["steps_per_epoch"] + r["steps"]
    assert r["rerun_code"] == 0, r["rerun_error"]
    assert r["final_steps"] == bench.EPOCHS * r["steps_per_epoch"]  # none lost, none twice
