"""Faults of ``braindecode-pars pretrain`` in a process of its own (the harness of
benchmarks/bench_faults_pretrain.py, one trial each): SIGTERM and SIGKILL at epoch 2 or
later, then the same command again; a full disk during a checkpoint; the whole job
signalled at once; SIGUSR1 to torchrun with two CPU processes."""

import signal

import pytest

from benchmarks import bench_faults_pretrain

# each trial starts the command line twice (about 10 s each); the harness run for real is
# make test-faults's (CI tests it on recorded trials: test_fault_records.py)
pytestmark = [pytest.mark.slow, pytest.mark.faults]


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


@pytest.mark.serial  # torchrun, its two processes and their DataLoader workers
def test_sigusr1_to_torchrun_saves_the_step_reached_and_the_rerun_continues(harness):
    """SIGUSR1 to torchrun launched as docs/cluster.rst says (two CPU processes,
    ``--signals-to-handle`` naming it): torchrun forwards it to both processes, they
    agree on a step and rank 0 saves it well within torchrun's 30-s grace, no process
    of the job is left, and the same command finishes with the steps of a run never
    stopped."""
    bench, root, store = harness
    r = bench.trial(root, store, signal.SIGUSR1, at_epoch=1, torchrun=True, delay=2.0)
    assert r["forwarded"] == 2 and not r["forced"]  # both got it; none was SIGKILLed
    assert r["seconds"] < 30
    assert r["code"] != 0  # torchrun re-raises the signal it handled
    assert "stopped by SIGUSR1" in r["message"] and "same command" in r["message"]
    # a new state, at the step the processes agreed on, before the run's end
    assert r["optimizer_steps"] > r["signalled_at"][2]
    assert r["optimizer_steps"] == r["epoch"] * r["steps_per_epoch"] + r["steps"]
    assert r["epoch"] < bench.TORCHRUN_EPOCHS
    assert r["workers"] >= 4  # the two processes and their DataLoader workers were there
    assert r["left"] == [] and r["group_empty"]
    assert r["rerun_code"] == 0, r["rerun_error"]
    assert r["final_epoch"] == bench.TORCHRUN_EPOCHS
    assert r["final_steps"] == bench.TORCHRUN_EPOCHS * r["steps_per_epoch"]  # none lost or twice


@pytest.mark.serial  # a torchrun job of two processes, signalled whole, three times run
def test_a_stress_trial_saves_in_the_grace_and_the_rerun_ends_as_the_run_never_stopped(
    harness, tmp_path
):
    """One stress trial (SIGTERM to the launcher and both processes at once, at a state
    write) and its section of the result file: saved within torchrun's grace, nothing
    SIGKILLed, the rerun finished with the encoder of the command never stopped."""
    import random

    bench, root, store = harness
    rows, seconds = bench.stress_trials(root, store, 1, 0, random.Random(0), moments=["checkpoint"])
    (r,) = rows
    assert r["signalled"] and r["seconds"] < 30 and not (r["forced"] or r["killed"]), r["stderr"]
    assert r["code"] != 0 and r["saved"] is not None  # torchrun's SignalException
    assert r["rerun_code"] == 0, r["rerun_error"]
    assert r["final_steps"] == bench.STRESS_EPOCHS * r["steps_per_epoch"]
    assert r["same_weights"]
    out = tmp_path / "faults.md"
    out.write_text("# Faults\n\n## Another section\n\nkept\n")
    bench.replace_section(out, bench.stress_section(rows, 0, seconds))
    bench.replace_section(out, bench.stress_section(rows, 0, seconds))  # replaced, not added
    text = out.read_text()
    assert text.count("## SIGTERM to a whole torchrun job") == 1 and "kept" in text
    assert "none SIGKILLed: 1 of 1" in text and "never stopped: 1 of 1" in text
