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
  warning when that is fewer (its cores are busy), and torch's count is restored
  after the fit.

:func:`idle_cores` counts the idle cores among those this process may run on, its CPU
affinity (a SLURM job's own cores on a shared node): Linux's per-core ``cpuN`` lines of
``/proc/stat`` over a tenth of a second, this process's own use left out. The other
cores of the host, busy or not, do not count. A measurement is reused for
:data:`REUSE_SECONDS` (a grid search of many short fits measures once every few
seconds, not once a fit). Where the system gives no affinity or no ``/proc/stat``
(macOS, Windows), the 1-minute load average of the host stands in, as the share of it
that falls on this process's cores; without a load average either (Windows), no core
counts as busy. A CPU quota without an affinity (``docker run --cpus``) is not seen.
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
#: Seconds a measurement of the busy cores is reused by :func:`busy_cores`.
REUSE_SECONDS = 5.0
#: torch's thread count when the package was imported: another count later is the
#: user's ``torch.set_num_threads``.
_IMPORT_THREADS = torch.get_num_threads()
#: Fits under way in this process (the outermost chooses; a nested fit keeps its count).
_active = threading.local()
#: The last measurement: (when, by :data:`_clock`; the cores measured; busy cores).
_last = None
#: One measurement at a time; the threads that wait reuse it.
_measuring = threading.Lock()
#: The clock of :data:`_last`.
_clock = time.monotonic


def _new_measuring_lock():
    """A forked child's own lock (another thread may have held the parent's)."""
    global _measuring
    _measuring = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_measuring_lock)


def _affinity():
    """The numbers of the cores this process may run on, or None where the system does
    not tell (macOS, Windows)."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    try:
        return frozenset(os.sched_getaffinity(0))
    except OSError:
        return None


def usable_cores():
    """The cores this process may run on (its CPU affinity where the system tells it,
    else every core)."""
    cores = _affinity()
    return len(cores) if cores else os.cpu_count() or 1


def _read_proc_stat():
    """The ``cpu`` lines of ``/proc/stat``, its first (what follows, the interrupt
    counts, is long on a large host)."""
    lines = []
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            lines.append(line)
    return "".join(lines)


def _core_times(cores):
    """``{core: (busy, total)}`` jiffies of the cores ``cores``, from their ``cpuN`` lines
    of ``/proc/stat`` (the aggregate ``cpu`` line, the whole host's, is not read).

    Raises
    ------
    ValueError
        When none of ``cores`` has a line.
    """
    times = {}
    for line in _read_proc_stat().splitlines():
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit()) or int(name[3:]) not in cores:
            continue
        # user nice system idle iowait irq softirq steal (guest time is in user and nice)
        fields = [int(v) for v in rest.split()[:8]]
        idle = fields[3] + fields[4]
        times[int(name[3:])] = (sum(fields) - idle, sum(fields))
    if not times:
        raise ValueError(f"/proc/stat has no line of cores {sorted(cores)}")
    return times


def _own_seconds():
    """CPU seconds this process has used (user and system)."""
    return sum(os.times()[:2])


def _load_share(n_cores):
    """The busy cores of ``n_cores`` of the host's, from its 1-minute load average spread
    evenly over its cores; 0 where there is none."""
    try:
        load = float(os.getloadavg()[0])
    except (OSError, AttributeError):  # no load average on this system
        return 0.0
    return min(float(n_cores), load * n_cores / (os.cpu_count() or n_cores))


def _measure(cores, interval):
    """Busy cores among ``cores`` (None: unknown) by other processes, measured now."""
    n_cores = len(cores) if cores else os.cpu_count() or 1
    if not cores:
        return _load_share(n_cores)
    try:
        before = _core_times(cores)
        own0, wall0 = _own_seconds(), time.monotonic()
        time.sleep(interval)
        after = _core_times(cores)
        own1, wall1 = _own_seconds(), time.monotonic()
    except (OSError, ValueError, IndexError):
        return _load_share(n_cores)
    busy = 0.0
    for core, (busy0, total0) in before.items():
        busy1, total1 = after.get(core, (busy0, total0))
        if total1 > total0:
            busy += (busy1 - busy0) / (total1 - total0)
    own = (own1 - own0) / max(wall1 - wall0, 1e-9)
    return max(0.0, busy - own)


def busy_cores(interval=0.1, max_age=REUSE_SECONDS):
    """How many of this process's cores other processes keep busy now.

    Parameters
    ----------
    interval : float
        Seconds over which ``/proc/stat`` is read; this process's own CPU time over
        them is left out.
    max_age : float
        A measurement taken at most this many seconds ago (of the same cores) is
        returned instead of measuring again; 0 measures anew.

    Returns
    -------
    busy : float
        Busy cores, from 0 to :func:`usable_cores`, over the cores of this process's
        affinity only; the share of the host's 1-minute load average where
        ``/proc/stat`` or the affinity cannot be read (see the module's docstring).
    """
    global _last
    cores = _affinity()
    with _measuring:
        if _last is not None and _last[1] == cores and _clock() - _last[0] < max_age:
            return _last[2]
        busy = _measure(cores, interval)
        _last = (_clock(), cores, busy)
    return busy


def idle_cores(interval=0.1, max_age=REUSE_SECONDS):
    """The usable cores not busy now, at least 1 (:func:`usable_cores` minus
    :func:`busy_cores`, rounded; the parameters are the latter's)."""
    return max(1, int(usable_cores() - busy_cores(interval, max_age) + 0.5))


def user_chose_threads():
    """Whether torch's thread count is the user's: set in the environment
    (:data:`THREAD_VARIABLES`) or by ``torch.set_num_threads`` since the import."""
    if any(os.environ.get(name) for name in THREAD_VARIABLES):
        return True
    return torch.get_num_threads() != _IMPORT_THREADS


def command_threads(given=None):
    """The threads of a command-line run (``braindecode-pars pretrain``), chosen once
    when it starts.

    ``given`` (its ``--threads``) when set; else torch's count when the environment sets
    it (:data:`THREAD_VARIABLES`; ``torchrun`` sets ``OMP_NUM_THREADS=1`` in each of its
    processes when the launcher's environment has none); else :func:`idle_cores`. A
    count fixed by the flag or the environment is the same at every sitting of a run,
    which a resume bit for bit on a CPU needs: torch's CPU kernels split their sums and
    products by thread, so that another count computes other bits (a run on 2 threads
    ends with other weights than on 1); the idle cores can differ from one start to the
    next.

    Examples
    --------
    >>> command_threads(3)
    3
    """
    if given:
        return int(given)
    if any(os.environ.get(name) for name in THREAD_VARIABLES):
        return torch.get_num_threads()
    return idle_cores()


def chosen_threads(what="fit"):
    """The threads a fit runs on by the module's rule, logging when its cores are busy.

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
            "This process's cores are busy: %d of its %d cores idle. %s runs on %d torch "
            "threads instead of %d (torch.set_num_threads(n) after importing "
            "braindecode_pars, or OMP_NUM_THREADS, sets them yourself).",
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
