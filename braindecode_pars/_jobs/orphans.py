"""No process outlives its parent: Linux's ``PR_SET_PDEATHSIG`` for worker processes.

A worker (a DataLoader's, a pool's) whose parent is killed (SIGKILL, the OOM killer) is
left running, holding its memory, unless it asks the kernel to end it with its parent;
where the kernel cannot (outside Linux, or where that fails) a watchdog thread can look
at the parent instead. This module imports nothing heavy, nor anything of the package,
so that a worker may call it first.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

logger = logging.getLogger(__name__)

#: ``prctl``'s option that sets the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1
#: Seconds between two looks of a watchdog at its process's parent.
WATCH_SECONDS = 1.0


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
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0:
            return True
        logger.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())
    except (OSError, AttributeError) as err:
        logger.debug("No prctl (%s): no death signal.", err)
    return False


def die_with_parent(worker_id=None, parent=None, ignore=(), watchdog=False):
    """A DataLoader ``worker_init_fn`` (``functools.partial`` of it with ``parent``), or a
    process pool's initializer: the worker ignores the signals of ``ignore`` (its parent
    stops at a step boundary, or a recording's end, on them, then ends it) and gets
    SIGKILL when its parent dies; a worker whose parent ``parent`` (a process id) died
    before the call ends at once.

    Parameters
    ----------
    worker_id : int | None
        Given by the DataLoader; unused.
    parent : int | None
        The parent's process id, read in the parent (None: not checked, e.g. under a
        forkserver, whose child the worker is).
    ignore : tuple of signal.Signals
        Signals this worker ignores.
    watchdog : bool
        Also start a thread that ends this process once its parent is no longer the
        one it had (every :data:`WATCH_SECONDS`): where the kernel cannot end it
        (outside Linux, or if ``prctl`` failed). Under a forkserver the parent is the
        forkserver, which ends with the process that started it.
    """
    for sig in ignore:
        signal.signal(sig, signal.SIG_IGN)
    set_death_signal(signal.SIGKILL)
    ppid = os.getppid()
    if parent is not None and ppid != parent:  # the parent ended before prctl
        os._exit(1)
    if watchdog:
        thread = threading.Thread(
            target=_watch_parent, args=(ppid,), daemon=True, name="parent-watchdog"
        )
        thread.start()


def _watch_parent(ppid):
    """End this process as soon as its parent is no longer ``ppid`` (it ended)."""
    while os.getppid() == ppid:
        time.sleep(WATCH_SECONDS)
    os._exit(1)
