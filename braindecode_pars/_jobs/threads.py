"""torch's CPU threads for a fit: the idle cores, unless the user chose.

torch starts with a thread per core. When other processes hold some of the cores,
those threads wait on each other, and a fit runs many times slower (24 times, measured
on two cores shared with one other torch process). The command line has set its threads
from the idle cores since its first version; :func:`fit_threads` gives the estimators
(``PARSPretrainer``, ``PARSFineTuner``, ``PARSClassifier``, ``PARSProbe``) and the demo
the same rule, for the duration of a fit:

- a thread count the user chose is kept: ``torch.set_num_threads(n)`` called after
  importing the package (torch's count differs from the one it had then), or
  ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` set in the environment;
- otherwise the fit runs on ``min(torch's threads, idle_cores())`` threads, logging a
  warning when that is fewer (the machine is busy), and torch's count is restored
  after the fit.

:func:`idle_cores` reads how busy the cores are now (Linux's ``/proc/stat`` over a
tenth of a second, this process's own use left out), or the 1-minute load average
where there is no ``/proc/stat``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time

import torch

logger = logging.getLogger(__name__)

#: The environment variables that fix torch's threads; set, they are the user's choice.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: torch's thread count when the package was imported: another count later is the
#: user's ``torch.set_num_threads``.
_IMPORT_THREADS = torch.get_num_threads()
#: Fits under way in this process (the outermost chooses; a nested fit keeps its count).
_active = threading.local()


def usable_cores():
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _cpu_times():
    """(busy, total) jiffies of all cores, from the first line of ``/proc/stat``."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def busy_cores(interval=0.1):
    """How many cores other processes keep busy now.

    Parameters
    ----------
    interval : float
        Seconds over which ``/proc/stat`` is read; this process's own CPU time over
        them is left out.

    Returns
    -------
    busy : float
        Busy cores, from 0 to ``os.cpu_count()``; the 1-minute load average where
        ``/proc/stat`` cannot be read.
    """
    try:
        busy0, total0 = _cpu_times()
        own0, wall0 = sum(os.times()[:2]), time.monotonic()
        time.sleep(interval)
        busy1, total1 = _cpu_times()
        own1, wall1 = sum(os.times()[:2]), time.monotonic()
    except (OSError, ValueError, IndexError):
        try:
            return float(os.getloadavg()[0])
        except OSError:  # no load average on this system
            return 0.0
    if total1 <= total0:
        return 0.0
    cores = os.cpu_count() or 1
    busy = cores * (busy1 - busy0) / (total1 - total0)
    own = (own1 - own0) / max(wall1 - wall0, 1e-9)
    return max(0.0, busy - own)


def idle_cores(interval=0.1):
    """The usable cores not busy now, at least 1 (:func:`usable_cores` minus
    :func:`busy_cores`, rounded)."""
    return max(1, int(usable_cores() - busy_cores(interval) + 0.5))


def user_chose_threads():
    """Whether torch's thread count is the user's: set in the environment
    (:data:`THREAD_VARIABLES`) or by ``torch.set_num_threads`` since the import."""
    if any(os.environ.get(name) for name in THREAD_VARIABLES):
        return True
    return torch.get_num_threads() != _IMPORT_THREADS


def chosen_threads(what="fit"):
    """The threads a fit runs on by the module's rule, logging when the machine is busy.

    Parameters
    ----------
    what : str
        What runs, for the log line ("PARSProbe.fit").

    Returns
    -------
    n_threads : int
        torch's count when the user chose it, else ``min(torch's count, idle cores)``.
    """
    current = torch.get_num_threads()
    if user_chose_threads():
        return current
    idle = idle_cores()
    if idle < current:
        logger.warning(
            "The machine is busy: %d of %d cores idle. %s runs on %d torch threads instead "
            "of %d (torch.set_num_threads(n) after importing braindecode_pars, or "
            "OMP_NUM_THREADS, sets them yourself).",
            idle, usable_cores(), what, idle, current,
        )  # fmt: skip
        return idle
    return current


@contextlib.contextmanager
def fit_threads(what="fit"):
    """Run the block on :func:`chosen_threads`, restoring torch's count after it; a block
    inside another keeps the outer one's threads."""
    depth = getattr(_active, "depth", 0)
    if depth:
        _active.depth = depth + 1
        try:
            yield torch.get_num_threads()
        finally:
            _active.depth = depth
        return
    before = torch.get_num_threads()
    n_threads = chosen_threads(what)
    torch.set_num_threads(n_threads)
    _active.depth = 1
    try:
        yield n_threads
    finally:
        _active.depth = 0
        torch.set_num_threads(before)


def with_fit_threads(method):
    """Decorate an estimator's ``fit`` (or the demo) to run under :func:`fit_threads`."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        owner = type(args[0]).__name__ if args and hasattr(args[0], "fit") else None
        what = f"{owner}.{method.__name__}" if owner else method.__name__
        with fit_threads(what):
            return method(*args, **kwargs)

    return wrapper
