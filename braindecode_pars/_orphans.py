"""No process outlives its parent: Linux's ``PR_SET_PDEATHSIG`` for worker processes.

A worker (a DataLoader's, a pool's) whose parent is killed (SIGKILL, the OOM killer) is
left running, holding its memory, unless it asks the kernel to end it with its parent.
This module imports nothing heavy, so that a worker may call it first.
"""

from __future__ import annotations

import os
import signal
import sys

#: ``prctl``'s option that sets the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1


def set_death_signal(sig=signal.SIGKILL):
    """Ask Linux to send ``sig`` to this process when the thread that started it ends.

    Returns
    -------
    set : bool
        Whether it was set (False off Linux, or where libc has no ``prctl``).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(worker_id=None, parent=None, ignore=()):
    """A DataLoader ``worker_init_fn`` (``functools.partial`` of it with ``parent``): the
    worker ignores the signals of ``ignore`` (its parent stops at a step boundary on
    them, then ends it) and gets SIGKILL when its parent dies; a worker whose parent
    ``parent`` (a process id) died before the call ends at once.

    Parameters
    ----------
    worker_id : int | None
        Given by the DataLoader; unused.
    parent : int | None
        The parent's process id, read in the parent.
    ignore : tuple of signal.Signals
        Signals this worker ignores.
    """
    for sig in ignore:
        signal.signal(sig, signal.SIG_IGN)
    set_death_signal(signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)
