"""``braindecode-pars pretrain`` that signals its own whole job at a chosen moment: the
stress trials of ``bench_faults_pretrain``.

Run under torchrun as ``python -m torch.distributed.run ... -m benchmarks.lib.stop_trigger
PHASE N pretrain ...`` (the arguments after ``N`` are the command line's). On rank 0, the
``N``-th occurrence of ``PHASE`` sends SIGTERM to every process of the job at once (the
launcher and every process below it, as a scheduler's time limit signals a job's
processes), then carries on with what it was doing:

- ``step``: before the ``N``-th training step runs (the signal arrives mid-step);
- ``epoch-end``: at the ``N``-th epoch's end, before its callbacks (validation is over,
  the log is read and the state written after it, on the epochs that report);
- ``validation``: before the ``N``-th validation batch;
- ``checkpoint``: before the ``N``-th state written (rank 0 writes while the other
  process goes on).

Rank 1 runs the command unchanged. Nothing of the library is changed on disk: the hooks
wrap the public methods of :class:`~braindecode_pars.pretraining.PretrainNet` and
:class:`~braindecode_pars.pretraining.StateCheckpoint` in this process.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

PHASES = ("step", "epoch-end", "validation", "checkpoint")


def _children(pid):
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def job_processes():
    """The launcher (this process's parent) and every process below it."""
    launcher = os.getppid()
    found, todo = [launcher], _children(launcher)
    while todo:
        found.append(todo.pop())
        todo.extend(_children(found[-1]))
    return found


def signal_the_job():
    """SIGTERM to every process of the job, at once (this one last); the time it was sent
    (``time.time()``) written to the file ``$STOP_TRIGGER_STAMP`` if that is set."""
    stamp = os.environ.get("STOP_TRIGGER_STAMP")
    if stamp:
        Path(stamp).write_text(repr(time.time()))
    me = os.getpid()
    processes = job_processes()
    for pid in processes:
        if pid != me:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    os.kill(me, signal.SIGTERM)


def _counted(owner, name, at):
    """Wrap method ``name`` of ``owner`` so that its ``at``-th call signals the job first."""
    original = getattr(owner, name)
    calls = [0]

    def wrapped(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == at:
            signal_the_job()
        return original(self, *args, **kwargs)

    setattr(owner, name, wrapped)


def arm(phase, at):
    """Install the hook of ``phase`` (:data:`PHASES`) at its ``at``-th occurrence."""
    from braindecode_pars.pretraining import PretrainNet, StateCheckpoint

    owner, name = {
        "step": (PretrainNet, "train_step"),
        "epoch-end": (PretrainNet, "on_epoch_end"),
        "validation": (PretrainNet, "validation_step"),
        "checkpoint": (StateCheckpoint, "write"),
    }[phase]
    _counted(owner, name, at)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    phase, at, command = argv[0], int(argv[1]), argv[2:]
    if phase not in PHASES:
        raise SystemExit(f"PHASE must be one of {', '.join(PHASES)}, but got {phase!r}.")
    if os.environ.get("RANK", "0") == "0":
        arm(phase, at)
    from braindecode_pars.cli import main as cli

    return cli(command)


if __name__ == "__main__":
    sys.exit(main())
