"""The whole job signalled at once, as a scheduler signals it at a time limit: SIGTERM to
every process of ``braindecode-pars store --jobs 2`` and of ``braindecode-pars pretrain
--workers 2`` at the same moment, as ``kill -- -PGID`` sends it. Nothing of the job is left
running, and the same command continues: the store ends with the bytes of a build never
stopped, the pretraining from the step it saved."""

import filecmp
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import mne
import numpy as np
import pytest
import torch

from benchmarks.lib.process_groups import group_empty
from braindecode_pars import cli
from braindecode_pars.hub import run_status

from ._helpers import tiny_config

pytestmark = [pytest.mark.serial, pytest.mark.slow]  # a job of three processes, signalled

#: The command line of this checkout.
CLI = [sys.executable, "-m", "braindecode_pars.cli"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
#: Seconds a signalled job's processes are given to end, once its command has ended.
GRACE = 10.0


def start_job(command, log):
    """``command`` as a scheduler starts a job: the leader of a process group of its own
    (its group id is its pid), its output in the file ``log``."""
    with open(log, "wb") as f:
        return subprocess.Popen(
            command, env=ENV, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )


def descendants(pid):
    """The ids of the processes ``pid`` started, and theirs."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def running(pid):
    """Whether process ``pid`` runs (exists and has not ended: a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def signal_the_job(process, ready, sig=signal.SIGTERM, timeout=120):
    """Once ``ready()`` is true, send ``sig`` to every process of the job at once (``kill
    -- -PGID``); wait for its command to end. Its processes when signalled, then its exit
    status."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, "the job ended before it was signalled"
        assert time.monotonic() < deadline, "the job was not ready in time"
        time.sleep(0.02)
    children = descendants(process.pid)
    os.killpg(process.pid, sig)  # the group's id is its leader's pid
    process.wait(timeout=timeout)
    return children, process.returncode


def assert_nothing_left(process, children):
    assert group_empty(process.pid, GRACE), "a process of the job's group is left"
    assert [pid for pid in children if running(pid)] == []


def save_recordings(folder, n, minutes=15, sfreq=250.0):
    """``n`` FIF recordings of 3 EEG channels and an ECG; their glob."""
    folder.mkdir(parents=True)
    for i in range(n):
        data = 1e-5 * np.random.default_rng(i).standard_normal((4, int(minutes * 60 * sfreq)))
        info = mne.create_info(["C3", "C4", "Cz", "ECG"], sfreq, ["eeg"] * 3 + ["ecg"])
        raw = mne.io.RawArray(data, info, verbose="error")
        raw.save(folder / f"r{i:02d}_raw.fif", verbose="error")
    return str(folder / "*.fif")


def test_sigterm_to_every_process_of_a_store_build_leaves_none_and_the_build_resumes(tmp_path):
    pattern = save_recordings(tmp_path / "recordings", 5, minutes=10)
    store = ["store", "--recordings", pattern, "--sfreq", "100", "--window-seconds", "5",
             "--stride-seconds", "5"]  # fmt: skip
    cli.main([*store, "--out", str(tmp_path / "clean"), "--jobs", "1"])  # never stopped
    out = tmp_path / "stopped"
    command = [*CLI, *store, "--out", str(out), "--jobs", "2"]
    journal = out / "journal.jsonl"

    def committed():
        return journal.read_bytes().count(b"\n") if journal.exists() else 0

    process = start_job(command, tmp_path / "stopped.log")
    children, status = signal_the_job(process, lambda: committed() >= 1)
    output = (tmp_path / "stopped.log").read_text()
    assert len(children) >= 2  # its --jobs 2 workers were signalled with it
    # the workers leave SIGTERM to the build, which stops once a recording is committed
    assert status == 128 + signal.SIGTERM, output
    assert "stopped by SIGTERM after" in output and "Run the same command to resume" in output
    assert_nothing_left(process, children)
    done = committed()
    assert 1 <= done < 5 and not (out / "index.npz").exists()
    again = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Resuming the store build in {out} after {done} recording" in again.stderr
    names = sorted(os.listdir(tmp_path / "clean"))
    assert names == ["data.f32", "index.npz", "info.json", "recordings.json"]
    assert sorted(os.listdir(out)) == names  # no build file left
    for name in names:
        assert filecmp.cmp(tmp_path / "clean" / name, out / name, shallow=False), name


def test_sigterm_to_every_process_of_a_pretraining_run_leaves_none_and_the_run_resumes(
    tmp_path,
):
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
    from braindecode_pars.store import write_window_store

    store = tmp_path / "store"
    windows = load_physionet_mi_continuous(runs=[1], window_seconds=5, stride_seconds=5)
    write_window_store(windows, store)
    epochs, run_dir = 30, tmp_path / "run"
    config = tiny_config(tmp_path, n_patches=4, valid_fraction=0, checkpoint_minutes=0,
                         compile=False)  # fmt: skip
    command = [*CLI, "pretrain", "--store", str(store), "--out", str(run_dir), *config,
               "--device", "cpu", "--threads", "1", "--epochs", str(epochs),
               "--batch-size", "8", "--workers", "2"]  # fmt: skip

    def saved_epoch():
        pointer = run_dir / "state.json"
        return json.loads(pointer.read_text())["epoch"] if pointer.is_file() else 0

    process = start_job(command, tmp_path / "stopped.log")
    children, status = signal_the_job(process, lambda: saved_epoch() >= 2)
    output = (tmp_path / "stopped.log").read_text()
    assert len(children) >= 2  # its two DataLoader workers were signalled with it
    # the workers leave SIGTERM to the trainer, which saves the step it reached
    assert status == 128 + signal.SIGTERM, output[-3000:]
    assert "stopped by SIGTERM" in output and "same command" in output
    assert_nothing_left(process, children)
    stopped = run_status(run_dir)
    assert 2 <= stopped["epoch"] < epochs and not stopped["finished"]
    again = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Resuming pretraining from {run_dir} after {stopped['epoch']} epochs" in again.stderr
    final = run_status(run_dir)
    assert final["finished"] and final["epoch"] == epochs
    # as the docs promise: the same run; its encoder bit for bit that of the run never
    # stopped (the same command into another folder)
    whole = [*command[: command.index("--out") + 1], str(tmp_path / "whole"),
             *command[command.index("--out") + 2 :]]  # fmt: skip
    never = subprocess.run(whole, env=ENV, capture_output=True, text=True, timeout=300)
    assert never.returncode == 0, never.stderr[-3000:]
    assert_same_encoder(run_dir / "encoder.pt", tmp_path / "whole" / "encoder.pt")


def assert_same_encoder(path, other):
    """The encoders saved at ``path`` and ``other`` hold the same weights, bit for bit."""
    from braindecode_pars.hub.folders import load_encoder

    a, b = load_encoder(path).state_dict(), load_encoder(other).state_dict()
    assert a.keys() == b.keys()
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    assert not differ, f"{len(differ)} of {len(a)} tensors differ, e.g. {differ[:3]}"
