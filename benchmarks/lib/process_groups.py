"""What the fault benchmarks (``bench_faults``, ``bench_faults_pretrain``) ask of a
process group they killed: whether it is empty."""

from __future__ import annotations

import os
import time


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
