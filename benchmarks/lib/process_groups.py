"""What the fault benchmarks (``bench_faults``, ``bench_faults_pretrain``) do to a job they
started in its own process group: signal it, or its whole group, and ask whether the
group is empty."""

from __future__ import annotations

import os
import time


def send(process, sig, group):
    """Send ``sig`` to the ``subprocess.Popen`` ``process``, or to every process of its
    group when ``group`` (``kill -- -PGID``; the group's id is its leader's pid)."""
    if group:
        os.killpg(process.pid, sig)
    else:
        process.send_signal(sig)


def group_empty(pgid, timeout=10.0):
    """Whether the process group ``pgid`` is empty (no process of it left, not even one
    that has ended but is not yet reaped) within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
