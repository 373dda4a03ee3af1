"""Faults of ``braindecode-pars pretrain``, tried: a scheduler's SIGTERM and SIGKILL at a
random epoch, a full disk during a checkpoint; then the same command again.

Each trial pretrains a tiny encoder on a small store (built once, from the bundled EEG)
for ``--epochs`` epochs with a state every epoch (``checkpoint_minutes`` 0) and one
DataLoader worker, in a process of its own. Once the saved state reaches a random epoch
(at least 2) the trial sends the signal, and records:

- the epoch and steps saved when the process ended, and its exit status;
- the steps lost: the optimiser steps the process had taken when it ended (read from its
  log line) minus those of the saved state (0 after SIGTERM; after SIGKILL at most the
  checkpoint interval, here one epoch);
- the processes left: the run's process or its workers still alive 10 s later;
- whether the rerun of the same command finished with exactly the steps of an
  uninterrupted run (AdamW's own step count in the final state).

The whole-job trials do the same with two DataLoader workers (``--workers 2``) and the
signal sent to every process of the run at once, as ``kill -- -PGID`` sends it (the run
started as the leader of a process group of its own; SLURM signals every process of a
job at its time limit): SIGTERM and SIGKILL. They also record whether the process group
is empty (``os.killpg(pgid, 0)`` finds no process) within 10 s of the run's end.

The torchrun trials launch the same command under torchrun with two CPU processes, as
docs/cluster.rst launches it (``--signals-to-handle`` naming SIGUSR1, ``stop_signal``
USR1 in ``--config``), for :data:`TORCHRUN_EPOCHS` epochs of one step per process, and
send SIGUSR1 to the launcher alone (what SLURM's ``--signal=B:USR1@...`` reaches
through the batch script) a random 1-4 s after the first state is saved. (Under
DistributedDataParallel a state is saved only on the epochs the run reports, the first
and then every 200 steps, so the signal waits on a clock, not on a saved epoch.)
torchrun forwards it to both processes, which agree on a step within seconds; rank 0
saves it. They also record the seconds from the signal to the launcher's end (torchrun
SIGKILLs the processes 30 s after forwarding), how many processes torchrun forwarded
it to, whether it had to SIGKILL one, and whether every process group seen (the
launcher's and each process's own: torchrun starts each in a session of its own) is
empty within 10 s of the end.

The stress trials (issue 75) send SIGTERM to every process of a 2-process torchrun job
at once (the launcher and both trainers, as a scheduler's time limit signals a job), at a
moment chosen at random among four, under a CPU load (``--stress-load`` processes
spinning beside it): before a training step (the signal arrives mid-step), at an epoch's
end, before a validation batch, and before a state is written. The job runs
``benchmarks.lib.stop_trigger``, the ``pretrain`` command with a hook on rank 0 that sends
the signal at the N-th occurrence of the moment. Each trial records the seconds from the
signal to the launcher's end (within torchrun's 30-s grace, and whether it SIGKILLed a
process), the state saved, whether the same command run again finished with the steps of
an uninterrupted run, and whether its encoder is bit for bit that of the same command
never stopped (run once). ``--stress-only`` runs these trials alone and replaces their
section of ``--out``, leaving the others as they are.

The full-disk trial reruns a stopped run under ``RLIMIT_FSIZE`` smaller than a
checkpoint: the run must stop with a message naming the checkpoint, leave the saved
state as it was, and a rerun without the limit must finish with the exact step count.

Usage: ``python -m benchmarks.bench_faults_pretrain --trials 3 --group-trials 5
--torchrun-trials 3 --out benchmarks/results/faults_pretrain.md``; the stress row alone:
``python -m benchmarks.bench_faults_pretrain --stress-only --stress-trials 20``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.lib.process_groups import group_empty, send

#: The smallest encoder (the tests' tiny one).
TINY = {"emb_dim": 16, "depth": 1, "n_heads": 2, "ff_dim": 16}
EPOCHS = 30
BATCH = 8
#: The epochs of a torchrun trial: each process has 1 step an epoch (half the windows,
#: fewer than a batch; about 30 ms on a 2-core CPU), signalled 1-4 s after its first
#: state, and the processes agree on a stop about every 5 s (or on the next reported
#: epoch, every 200 steps): a run long enough to stop well before its end.
TORCHRUN_EPOCHS = 800
#: torchrun with two CPU processes, forwarding SIGUSR1 as docs/cluster.rst launches it.
TORCHRUN = [
    sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
    "--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1",
]  # fmt: skip


def build_store(folder):
    """A store of the bundled EEG (PhysioNet-MI subject 1, run 1, 5-s windows)."""
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
    from braindecode_pars.store.write import write_window_store

    windows = load_physionet_mi_continuous(runs=[1], window_seconds=5, stride_seconds=5)
    write_window_store(windows, folder)
    return Path(folder)


#: The run's settings that only ``--config`` sets, beside the encoder's: 4 patches, no
#: validation, a state every epoch, no compilation, SIGUSR1 a stop signal.
RUN_SETTINGS = {
    "n_patches": 4, "valid_fraction": 0, "checkpoint_minutes": 0, "compile": False,
    "stop_signal": ["USR1"],
}  # fmt: skip


def command(store, out, config, workers=1, epochs=EPOCHS, launch=(sys.executable,)):
    """The ``pretrain`` command of a trial (``config``: :func:`tiny_config`'s file;
    ``launch``: what runs the module, :data:`TORCHRUN` for a torchrun trial)."""
    return [
        *launch, "-m", "braindecode_pars.cli", "pretrain", "--store", str(store),
        "--out", str(out), "--config", str(config), "--device", "cpu", "--threads", "1",
        "--epochs", str(epochs), "--batch-size", str(BATCH), "--workers", str(workers),
    ]  # fmt: skip


#: The repository, first on the command's path: the package of this checkout runs.
ROOT = Path(__file__).resolve().parents[1]


def _env(env=None):
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def tiny_config(folder):
    """The ``--config`` file of a trial: the tiny encoder and :data:`RUN_SETTINGS`."""
    path = Path(folder) / "tiny.json"
    path.write_text(json.dumps({**TINY, **RUN_SETTINGS}))
    return path


def saved(out):
    """``(epoch, steps into the next epoch, optimiser steps)`` of the run's saved state
    (of a live run too: a state replaced between reading its pointer and its files is
    read again from the new pointer)."""
    pointer = Path(out) / "state.json"
    if not pointer.is_file():
        return None
    for attempt in range(50):
        state = json.loads(pointer.read_text())
        try:
            optimizer = torch.load(Path(out) / state["state"] / "optimizer.pt", weights_only=True)
            break
        except FileNotFoundError:  # the run wrote a newer state and removed this one
            if attempt == 49:
                raise
            time.sleep(0.02)
    steps = int(next(iter(optimizer["state"].values()))["step"]) if optimizer["state"] else 0
    return state["epoch"], state.get("steps", 0), steps


def _children(pid):
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _descendants(pid):
    """The processes below ``pid`` (children, their children, ...), as they are now."""
    found, todo = [], _children(pid)
    while todo:
        found.append(todo.pop())
        todo.extend(_children(found[-1]))
    return found


def _pgid(pid):
    """The process group of ``pid`` (None once it has ended)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _message(err):
    """The command's own last message in ``err`` (a line of ``braindecode-pars``; under
    torchrun the launcher's traceback follows it), else the last line."""
    lines = err.strip().splitlines()
    own = [line for line in lines if line.startswith("braindecode-pars")]
    return (own or lines or [""])[-1]


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run(cmd, env=None, limit_bytes=None, timeout=600):
    """The command to its end: ``(exit status, stderr)``."""
    preexec = None
    if limit_bytes is not None:

        def preexec():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    done = subprocess.run(
        cmd, capture_output=True, text=True, env=_env(env), preexec_fn=preexec, timeout=timeout
    )
    return done.returncode, done.stderr


def interrupt(
    cmd, out, sig, at_epoch, env=None, timeout=600, group=False, launcher=False, delay=0.0
):
    """Start ``cmd``, send ``sig`` ``delay`` seconds after its saved state reaches
    ``at_epoch``; ``group``:
    to every process of the run at once (``kill -- -PGID``; the run started as the leader
    of a process group of its own); ``launcher``: ``cmd`` is torchrun, started as the
    leader of a process group of its own, and the signal goes to it alone.

    Returns
    -------
    trial : dict
        ``code`` (exit status), ``epoch`` and ``steps`` saved after the end, ``lost``
        (steps taken minus steps saved: the steps at the signal are read from the
        process's own count, AdamW's, which its last saved state gives after SIGTERM; after
        SIGKILL the log's last step), ``left`` (processes of the run alive 10 s after),
        ``workers`` (its child processes seen while it ran; under ``launcher`` every
        process below it), ``group_empty`` (None unless ``group`` or ``launcher``: then
        whether every process group seen is empty), ``seconds`` (from the signal to the
        end), ``forwarded`` (processes torchrun said it sent the signal to) and
        ``forced`` (whether torchrun SIGKILLed one after its grace).
    """
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(env),
        start_new_session=group or launcher,
    )  # fmt: skip
    start, family, groups = time.monotonic(), set(), {proc.pid}

    def look():
        seen = _descendants(proc.pid) if launcher else _children(proc.pid)
        family.update(seen)
        groups.update(g for g in map(_pgid, seen) if g is not None)

    while time.monotonic() - start < timeout:
        look()
        state = saved(out) if (Path(out) / "state.json").is_file() else None
        if state is not None and state[0] >= at_epoch:
            break
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended before epoch {at_epoch}: {proc.stderr.read()}")
        time.sleep(0.05)
    until = time.monotonic() + delay
    while time.monotonic() < until and proc.poll() is None:
        look()
        time.sleep(0.05)
    look()
    before = saved(out)
    sent = time.monotonic()
    send(proc, sig, group)
    _, err = proc.communicate(timeout=timeout)
    seconds = time.monotonic() - sent
    time.sleep(10 if sig == signal.SIGKILL and not group else 0)
    for _ in range(100):
        left = [p for p in {proc.pid, *family} if alive(p)]
        if not left:
            break
        time.sleep(0.1)
    empty = group_empty(proc.pid) if group else None
    if launcher:  # torchrun's own group and each process's session
        empty = all([group_empty(g) for g in sorted(groups)])
    after = saved(out)
    return {
        "code": proc.returncode,
        "message": _message(err),
        "signalled_at": before,
        "epoch": after[0],
        "steps": after[1],
        "optimizer_steps": after[2],
        # after SIGTERM nothing is lost when the saved state is at or past the state seen
        # when the signal was sent plus the steps the process took since; a SIGKILL loses
        # what was done since the last state (at most one epoch here)
        "lost_at_most": 0 if sig != signal.SIGKILL else None,
        "left": left,
        "workers": len(family),
        "group_empty": empty,
        "seconds": seconds,
        "forwarded": err.count(f"closing signal {signal.Signals(sig).name}"),
        "forced": "forcefully exiting" in err,
        "stderr": err[-4000:] if launcher else "",
    }


def trial(root, store, sig, at_epoch, seed=0, workers=1, group=False, torchrun=False, delay=0.0):
    """One trial: interrupt (``group``: every process of the run at once; ``torchrun``:
    the command under torchrun with two CPU processes, for :data:`TORCHRUN_EPOCHS`
    epochs, signalled through the launcher; ``delay``: seconds after the state of
    ``at_epoch``), then rerun; its figures."""
    kind = "torchrun-" if torchrun else "group-" if group else ""
    name = f"{kind}{signal.Signals(sig).name}-{at_epoch}-{seed}"
    out = Path(root) / f"run-{name}"
    epochs = TORCHRUN_EPOCHS if torchrun else EPOCHS
    launch = TORCHRUN if torchrun else (sys.executable,)
    cmd = command(store, out, tiny_config(root), workers=workers, epochs=epochs, launch=launch)
    result = interrupt(cmd, out, sig, at_epoch, group=group, launcher=torchrun, delay=delay)
    code, err = run(cmd)
    final = saved(out)
    result.update(
        signal=signal.Signals(sig).name,
        group=group,
        torchrun=torchrun,
        epochs=epochs,
        n_workers=workers,
        at_epoch=at_epoch,
        delay=delay,
        rerun_code=code,
        rerun_error=err[-2000:] if code else "",
        final_epoch=final[0],
        final_steps=final[2],
        steps_per_epoch=_steps_per_epoch(out),
    )
    return result


def _steps_per_epoch(out):
    history = json.loads((Path(out) / json.loads((Path(out) / "state.json").read_text())["state"]
                          / "history.json").read_text())  # fmt: skip
    return max(row["train_batch_count"] for row in history)


#: The stress trials' run: 2 steps of 2 windows per process and epoch (a fourth of the
#: windows held out for validation), validated and saved on the reported epochs (the first,
#: then every 100), a state every reported epoch, for STRESS_EPOCHS epochs.
STRESS_SETTINGS = {"n_patches": 4, "valid_fraction": 0.25, "checkpoint_minutes": 0,
                   "compile": False}  # fmt: skip
STRESS_EPOCHS, STRESS_BATCH = 150, 2
#: The moments of a stress trial and the occurrences each is drawn from (validation and
#: state writes come on the reported epochs only: the first and the 101st).
STRESS_MOMENTS = {"step": (2, 150), "epoch-end": (1, 75), "validation": (1, 2),
                  "checkpoint": (1, 2)}  # fmt: skip
#: torchrun with two CPU processes (it handles SIGTERM itself).
TORCHRUN_2 = [sys.executable, "-m", "torch.distributed.run", "--standalone",
              "--nproc_per_node", "2"]  # fmt: skip


def stress_command(store, out, root, module=("-m", "braindecode_pars.cli"), trigger=()):
    config = Path(root) / "stress.json"
    config.write_text(json.dumps({**TINY, **STRESS_SETTINGS}))
    return [
        *TORCHRUN_2, *module, *trigger, "pretrain", "--store", str(store), "--out", str(out),
        "--config", str(config), "--device", "cpu", "--threads", "1",
        "--epochs", str(STRESS_EPOCHS), "--batch-size", str(STRESS_BATCH), "--workers", "0",
    ]  # fmt: skip


def _encoder(path):
    from braindecode_pars.hub.folders import load_encoder

    return load_encoder(path).state_dict()


def stress_trial(root, store, moment, at, reference, seed=0):
    """One stress trial: the job signalled at occurrence ``at`` of ``moment``
    (:data:`STRESS_MOMENTS`), then the same command again; its figures (``reference``: the
    encoder of the command never stopped)."""
    out = Path(root) / f"run-stress-{moment}-{at}-{seed}"
    stamp = Path(root) / f"stamp-{moment}-{at}-{seed}"
    trigger = ("-m", "benchmarks.lib.stop_trigger", moment, str(at))
    cmd = stress_command(store, out, root, module=(), trigger=trigger)
    env = _env({**os.environ, "STOP_TRIGGER_STAMP": str(stamp)})
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)  # fmt: skip
    _, err = proc.communicate(timeout=600)
    ended = time.time()
    signalled = stamp.is_file()
    seconds = ended - float(stamp.read_text()) if signalled else None
    state = saved(out)
    code, rerun_err = run(stress_command(store, out, root))
    final = saved(out)
    same = None
    if code == 0 and (out / "encoder.pt").is_file():
        mine = _encoder(out / "encoder.pt")
        same = mine.keys() == reference.keys() and all(
            torch.equal(mine[k], reference[k]) for k in mine
        )
    return {
        "moment": moment, "at": at, "code": proc.returncode, "signalled": signalled,
        "seconds": seconds, "forced": "forcefully exiting" in err,
        "killed": "Signals.SIGKILL" in err or "exitcode  : -9" in err,
        "saved": state, "group_empty": group_empty(proc.pid), "rerun_code": code,
        "rerun_error": rerun_err[-2000:] if code else "", "final_steps": final[2],
        "steps_per_epoch": _steps_per_epoch(out), "same_weights": same,
        "message": _message(err), "stderr": err[-3000:] if not signalled or code else "",
    }  # fmt: skip


def stress_trials(root, store, n, load, rng, moments=None):
    """``n`` stress trials (the ``moments`` in turn, default all of
    :data:`STRESS_MOMENTS`, each at a random occurrence) beside ``load`` processes
    spinning on the CPU; the rows, and the reference run's seconds."""
    start = time.monotonic()
    code, err = run(stress_command(store, Path(root) / "run-stress-whole", root))
    if code:
        raise RuntimeError(f"the uninterrupted stress run failed: {err[-3000:]}")
    reference_seconds = time.monotonic() - start
    reference = _encoder(Path(root) / "run-stress-whole" / "encoder.pt")
    spin = [sys.executable, "-c", "while True: pass"]
    burners = [subprocess.Popen(spin) for _ in range(load)]
    rows = []
    try:
        moments = list(moments or STRESS_MOMENTS)
        for i in range(n):
            moment = moments[i % len(moments)]
            at = rng.randint(*STRESS_MOMENTS[moment])
            rows.append(stress_trial(root, store, moment, at, reference, seed=i))
            print(rows[-1], flush=True)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    return rows, reference_seconds


def stress_section(rows, load, reference_seconds, commit=None):
    """The lines of the stress trials' section of the result file (``commit``: the one
    the trials ran at, default this checkout's)."""
    from benchmarks.lib.measure import cpu_model, git_commit

    total = STRESS_EPOCHS * rows[0]["steps_per_epoch"] if rows else 0
    within = sum(
        r["signalled"] and r["seconds"] < 30 and not (r["forced"] or r["killed"]) for r in rows
    )
    resumed = sum(r["rerun_code"] == 0 and r["final_steps"] == total for r in rows)
    same = sum(bool(r["same_weights"]) for r in rows)
    cells = [
        "| "
        + " | ".join(
            map(
                str,
                [
                    r["moment"],
                    r["at"],
                    r["code"],
                    f"{r['saved'][0]} + {r['saved'][1]}" if r["saved"] else "none",
                    f"{r['seconds']:.1f}" if r["seconds"] is not None else "not signalled",
                    "yes" if r["forced"] or r["killed"] else "no",
                    "yes" if r["group_empty"] else "NO",
                    f"{r['final_steps']} / {total}",
                    "yes" if r["same_weights"] else "NO",
                ],
            )
        )
        + " |"  # fmt: skip
        for r in rows
    ]
    return [
        "## SIGTERM to a whole torchrun job at a chosen moment, under load (stress)",
        "",
        f"`python -m benchmarks.bench_faults_pretrain --stress-only --stress-trials "
        f"{len(rows)} --stress-load {load}` at commit `{commit or git_commit()}`, "
        f"{datetime.date.today()}, {cpu_model()} "
        f"(load average {os.getloadavg()[0]:.2f} at the end): `pretrain` under "
        f"`torchrun --standalone --nproc_per_node 2` (gloo, one thread each), {STRESS_EPOCHS} "
        f"epochs of {rows[0]['steps_per_epoch'] if rows else '?'} steps of {STRESS_BATCH} "
        "windows per process, validated and saved on the reported epochs; SIGTERM sent to "
        "the launcher and both trainers at once by rank 0 itself "
        "(`benchmarks/lib/stop_trigger.py`) at the N-th occurrence of the moment given, "
        f"beside {load} process(es) spinning on the CPU; then the same command again. "
        f"The command never stopped took {reference_seconds:.0f} s. Stop: seconds from "
        "the signal to the launcher's end (torchrun SIGKILLs 30 s after forwarding); same "
        "weights: the rerun's `encoder.pt` bit for bit that of the command never stopped.",
        "",
        "| moment | N | exit | saved: epoch + steps | stop (s) | SIGKILLed | group empty | "
        "rerun: steps / uninterrupted | same weights |",
        "|---|---|---|---|---|---|---|---|---|",
        *cells,
        "",
        f"Trials: {len(rows)}; saved within torchrun's grace, none SIGKILLed: {within} of "
        f"{len(rows)}; reruns that finished with the steps of an uninterrupted run: "
        f"{resumed} of {len(rows)}; encoders equal to the run never stopped: {same} of "
        f"{len(rows)}.",
        "",
    ]


def replace_section(path, lines):
    """Put the stress section ``lines`` into the result file ``path``, in place of the one
    there (or at its end)."""
    path = Path(path)
    text = path.read_text().splitlines() if path.is_file() else []
    head = lines[0]
    if head in text:
        start = text.index(head)
        rest = [i for i in range(start + 1, len(text)) if text[i].startswith("## ")]
        text = text[:start] + text[rest[0] if rest else len(text) :]
    path.write_text("\n".join([*text, *([""] if text and text[-1] else []), *lines]))


def full_disk(root, store):
    """Stop a run at epoch 2, rerun it under a file-size limit smaller than a checkpoint,
    then without; its figures."""
    out = Path(root) / "run-full-disk"
    # no DataLoader worker: RLIMIT_FSIZE also limits the shared-memory files through which
    # workers hand batches over, which a full disk does not
    cmd = command(store, out, tiny_config(root), workers=0)
    interrupt(cmd, out, signal.SIGTERM, 2)
    before = saved(out)
    pointer = (out / "state.json").read_text()
    limit = (out / "config.json").stat().st_size + 4096
    smallest = min((out / "encoder_last.pt").stat().st_size, (out / "state.json").stat().st_size)
    assert limit < (out / "encoder_last.pt").stat().st_size, (limit, smallest)
    code, err = run(cmd, limit_bytes=limit)
    kept = (out / "state.json").read_text() == pointer and saved(out) == before
    rerun_code, rerun_err = run(cmd)
    final = saved(out)
    return {
        "code": code,
        "message": err.strip().splitlines()[-1] if err.strip() else "",
        "state_kept": kept,
        "saved_before": before,
        "rerun_code": rerun_code,
        "rerun_error": rerun_err[-2000:] if rerun_code else "",
        "final_steps": final[2],
        "steps_per_epoch": _steps_per_epoch(out),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="trials per signal")
    parser.add_argument("--group-trials", type=int, default=5,
        help="trials per signal (SIGTERM, SIGKILL) to the whole job, --workers 2")  # fmt: skip
    parser.add_argument("--torchrun-trials", type=int, default=3,
        help="trials of SIGUSR1 to torchrun launching two CPU processes")  # fmt: skip
    parser.add_argument("--stress-trials", type=int, default=0,
        help="trials of SIGTERM to a whole torchrun job at a chosen moment, under load",
    )  # fmt: skip
    parser.add_argument("--stress-load", type=int, default=1,
        help="processes spinning on the CPU during the stress trials")  # fmt: skip
    parser.add_argument("--stress-only", action="store_true",
        help="run the stress trials alone, replacing their section of --out")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="benchmarks/results/faults_pretrain.md")
    parser.add_argument("--records",
        help="also write the trials' rows here as JSON (benchmarks/tests/records/: "
        "what test_fault_records.py runs the report code on)")  # fmt: skip
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    load, start = os.getloadavg()[0], time.monotonic()
    rows = []
    if args.stress_only:
        with tempfile.TemporaryDirectory() as root:
            store = build_store(Path(root) / "store")
            stress, seconds = stress_trials(root, store, args.stress_trials, args.stress_load, rng)
        replace_section(args.out, stress_section(stress, args.stress_load, seconds))
        if args.records:
            stress = {"rows": stress, "load": args.stress_load, "reference_seconds": seconds}
            _write_records(args, argv, root, stress=stress)
        return
    with tempfile.TemporaryDirectory() as root:
        store = build_store(Path(root) / "store")
        for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGKILL):
            for i in range(args.trials):
                rows.append(trial(root, store, sig, rng.randint(2, EPOCHS - 2), seed=i))
                print(rows[-1], flush=True)
        for sig in (signal.SIGTERM, signal.SIGKILL):  # the whole job, --workers 2
            for i in range(args.group_trials):
                at = rng.randint(2, EPOCHS - 2)
                rows.append(trial(root, store, sig, at, seed=i, workers=2, group=True))
                print(rows[-1], flush=True)
        for i in range(args.torchrun_trials):  # SIGUSR1 through torchrun, 2 processes
            delay = round(rng.uniform(1, 4), 1)  # after the first state (epoch 1)
            rows.append(trial(root, store, signal.SIGUSR1, 1, seed=i, torchrun=True, delay=delay))
            print(rows[-1], flush=True)
        disk = full_disk(root, store)
        print(disk, flush=True)
        stress = None
        if args.stress_trials:
            stress = stress_trials(root, store, args.stress_trials, args.stress_load, rng)
    seconds = time.monotonic() - start
    write_table(rows, disk, args, seconds, load)
    if stress is not None:
        replace_section(args.out, stress_section(stress[0], args.stress_load, stress[1]))
    if args.records:
        if stress is not None:
            stress = {"rows": stress[0], "load": args.stress_load, "reference_seconds": stress[1]}
        _write_records(args, argv, root, load=load, seconds=seconds, rows=rows, disk=disk,
                       stress=stress)  # fmt: skip


def _write_records(args, argv, root, **records):
    """``--records``: the trials' rows as JSON (:mod:`benchmarks.lib.fault_records`), with
    the options that :func:`write_table` reports."""
    from benchmarks.lib.fault_records import write_records

    options = {k: v for k, v in vars(args).items() if k not in ("out", "records")}
    write_records(args.records, "benchmarks.bench_faults_pretrain", argv,
                  {"args": options, **records}, folders=[root])  # fmt: skip


def _row(r):
    """A table row of trial ``r`` (:func:`trial`)."""
    signalled = r["signalled_at"][0]
    if r["signal"] == "SIGKILL":  # the state seen at the signal, or a later one, is kept
        kept = r["epoch"] >= signalled
        lost = "< 1 epoch (the last state's)" if kept else "MORE (an older state)"
    else:  # the state saved is the step reached: AdamW's count is its epochs and steps
        at_step = r["optimizer_steps"] == r["epoch"] * r["steps_per_epoch"] + r["steps"]
        at_step = at_step and r["epoch"] >= signalled
        lost = "0 (stopped at a step boundary)" if at_step else "NOT the step reached"
    at = f"{r['at_epoch']} + {r['delay']:.1f} s" if r["torchrun"] else r["at_epoch"]
    cells = [r["signal"], at, r["code"], f"{r['epoch']} + {r['steps']}", lost]
    if r["torchrun"]:
        cells += [f"{r['seconds']:.1f}", r["forwarded"], "yes" if r["forced"] else "no"]
    cells.append(len(r["left"]))
    if r["group"] or r["torchrun"]:
        cells += [r["workers"], "yes" if r["group_empty"] else "NO"]
    cells.append(f"{r['final_steps']} / {r['epochs'] * r['steps_per_epoch']}")
    return "| " + " | ".join(map(str, cells)) + " |"


def write_table(rows, disk, args, seconds, load):
    from benchmarks.lib.measure import cpu_model

    total = EPOCHS * rows[0]["steps_per_epoch"]
    main_rows = [r for r in rows if not (r["group"] or r["torchrun"])]
    group_rows = [r for r in rows if r["group"]]
    torchrun_rows = [r for r in rows if r["torchrun"]]
    lines = [
        "# Faults of `braindecode-pars pretrain`: signals, kills, a full disk",
        "",
        f"{datetime.date.today()}, {cpu_model()} (load average {load:.2f} before), Python "
        f"{sys.version.split()[0]}, torch {torch.__version__}; written by `python -m "
        f"benchmarks.bench_faults_pretrain --trials {args.trials} --group-trials "
        f"{args.group_trials} --torchrun-trials {args.torchrun_trials} --seed {args.seed}` "
        f"in {seconds:.0f} s: a tiny encoder, "
        f"{EPOCHS} epochs of {rows[0]['steps_per_epoch']} steps (batch 8, a state every "
        "epoch), signalled once the saved state reached the epoch given, then the same "
        "command again.",
        "",
        "## The signal to the run's process (one DataLoader worker)",
        "",
        "| signal | signalled at (saved epoch) | exit | saved: epoch + steps | "
        "steps lost | processes left | rerun: steps / uninterrupted |",
        "|---|---|---|---|---|---|---|",
        *(_row(r) for r in main_rows),
    ]
    if group_rows:
        empty = sum(bool(r["group_empty"]) for r in group_rows)
        resumed = sum(r["final_steps"] == total and r["rerun_code"] == 0 for r in group_rows)
        lines += [
            "",
            "## The signal to the whole job at once (`--workers 2`)",
            "",
            "Every process of the run (the trainer and its two DataLoader workers) signalled "
            "at the same moment, as `kill -- -PGID` sends it (the run started as the leader "
            "of a process group, `start_new_session`, signalled by `os.killpg`): what a "
            "scheduler does at a job's time limit. Workers: the run's child processes seen "
            "while it ran; group empty: no process of the group left (`os.killpg(pgid, 0)` "
            "finds none) within 10 s of the run's end. An exit status of 0: the run ended "
            "before the signal reached it.",
            "",
            "| signal | signalled at (saved epoch) | exit | saved: epoch + steps | "
            "steps lost | processes left | workers | group empty | "
            "rerun: steps / uninterrupted |",
            "|---|---|---|---|---|---|---|---|---|",
            *(_row(r) for r in group_rows),
            "",
            f"Trials: {len(group_rows)}; reruns that finished with the steps of an "
            f"uninterrupted run: {resumed} of {len(group_rows)}; processes left: "
            f"{sum(len(r['left']) for r in group_rows)}; groups empty: {empty} of "
            f"{len(group_rows)}.",
        ]
    if torchrun_rows:
        per_epoch = torchrun_rows[0]["steps_per_epoch"]
        resumed = sum(
            r["final_steps"] == r["epochs"] * per_epoch and r["rerun_code"] == 0
            for r in torchrun_rows
        )
        saved_at_step = sum(
            r["optimizer_steps"] == r["epoch"] * per_epoch + r["steps"] for r in torchrun_rows
        )
        lines += [
            "",
            "## SIGUSR1 under torchrun (2 CPU processes)",
            "",
            "The same command under `torchrun --standalone --nproc_per_node 2 "
            '--signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1` with `"stop_signal": '
            f'["USR1"]` in `--config`, as docs/cluster.rst launches it: {TORCHRUN_EPOCHS} '
            f"epochs of {per_epoch} step(s) per process (each process has half the windows), "
            "SIGUSR1 sent to the launcher alone (what SLURM's `--signal=B:USR1@...` reaches "
            "through the batch script) the seconds given after the first state (epoch 1: "
            "under DistributedDataParallel a state is saved only on the epochs the run "
            "reports, the first and every 200 steps), then the same command again. Exit: "
            "torchrun's (1: it re-raises the signal it handled as a `SignalException`); "
            "saved: the state rank 0 saved when the processes stopped; stop: seconds from "
            "the signal to the "
            "launcher's end (the processes agree on a step about every 5 s; torchrun "
            "SIGKILLs them 30 s after forwarding); forwarded: processes torchrun sent the "
            "signal to; SIGKILLed: whether torchrun had to; processes: every process below "
            "the launcher seen while it ran (the two trainers and their DataLoader "
            "workers); groups empty: no process left in any process group seen (torchrun's "
            "and each trainer's own session) within 10 s of the end.",
            "",
            "| signal | signalled at (saved epoch + s) | exit | saved: epoch + steps | "
            "steps lost | stop (s) | forwarded | SIGKILLed | processes left | processes | "
            "groups empty | rerun: steps / uninterrupted |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *(_row(r) for r in torchrun_rows),
            "",
            f"Trials: {len(torchrun_rows)}; states saved at the step reached (AdamW's count "
            f"equal to the epochs and steps saved): {saved_at_step} of {len(torchrun_rows)}; "
            f"reruns that finished with the steps of an uninterrupted run: {resumed} of "
            f"{len(torchrun_rows)}; processes left: "
            f"{sum(len(r['left']) for r in torchrun_rows)}; groups empty: "
            f"{sum(bool(r['group_empty']) for r in torchrun_rows)} of {len(torchrun_rows)}.",
        ]
    lines += [
        "",
        "## A full disk",
        "",
        f"Full disk (`RLIMIT_FSIZE` below one checkpoint, on the rerun of a run stopped at "
        f"epoch {disk['saved_before'][0]}): exit {disk['code']}, the saved state "
        f"{'kept' if disk['state_kept'] else 'CHANGED'}; the rerun without the limit: exit "
        f"{disk['rerun_code']}, {disk['final_steps']} / {total} steps. Its message:",
        "",
        f"> {disk['message']}",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))


if __name__ == "__main__":
    main()
