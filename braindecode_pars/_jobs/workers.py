"""How every worker process of the package starts: a DataLoader's, a process pool's.

A worker must end with the process that started the job (the trainer, the store's
build), whatever ends it, and must leave that process's stop signals to it (the job
stops at a boundary, then ends its workers). :class:`WorkerStart` does that first
(:func:`~braindecode_pars._jobs.orphans.die_with_parent`), then runs what the caller
adds (a user's own ``worker_init_fn``, a pool's own setup).

Which process a worker can watch depends on how it was started (:func:`start_method`):

- ``fork`` and ``spawn``: the job's process started it, so it is the worker's parent. A
  worker whose parent is no longer the job's process (the job ended before the worker
  ran) ends at once.
- ``forkserver``: the worker is a child of the forkserver, never of the job's process,
  so its parent cannot be compared with the job's. The death signal then comes from the
  forkserver, which ends with the job's process; the job's process is asked whether it
  is alive instead (by its id, given to the worker).

This module imports nothing of the package but :mod:`~braindecode_pars._jobs.orphans`.
"""

from __future__ import annotations

import multiprocessing
import os

from braindecode_pars._jobs.orphans import die_with_parent

#: The start methods of :mod:`multiprocessing`.
START_METHODS = ("fork", "forkserver", "spawn")


def start_method(context=None):
    """The start method with which ``context`` starts processes.

    Parameters
    ----------
    context : str | multiprocessing.context.BaseContext | None
        A start method's name, a context (``multiprocessing.get_context(...)``), or None:
        the default one (what a DataLoader or a pool given no context uses).

    Returns
    -------
    method : {"fork", "forkserver", "spawn"}

    Raises
    ------
    ValueError
        For a name or an object that is no start method.
    """
    if context is None:
        # the default, without fixing it (get_start_method() would): the first listed
        method = multiprocessing.get_start_method(allow_none=True)
        method = method or multiprocessing.get_all_start_methods()[0]
    elif isinstance(context, str):
        method = context
    else:
        method = getattr(context, "get_start_method", lambda: None)()
    if method not in START_METHODS:
        raise ValueError(
            "Invalid value for the 'multiprocessing_context' parameter. Allowed values are "
            f"None, {', '.join(map(repr, START_METHODS))} or a multiprocessing context, but "
            f"got {context!r} instead."
        )
    return method


def _alive(pid):
    """Whether the process ``pid`` exists (a signal 0 reaches it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user (an id taken again)
        return True
    return True


class WorkerStart:
    """A worker's start, for every pool: a DataLoader's ``worker_init_fn`` (called with
    the worker's id) and a process pool's ``initializer`` (called with ``initargs``).

    Made in the job's process, it records that process's id and the start method; in
    the worker it sets the death signal and the signals to ignore
    (:func:`~braindecode_pars._jobs.orphans.die_with_parent`, the parent checked as the
    module says), limits the worker's threads if asked, and then calls ``then`` with the
    same arguments: a user's own ``worker_init_fn`` keeps the protection.

    Parameters
    ----------
    method : {"fork", "forkserver", "spawn"}
        How the workers start (:func:`start_method`).
    ignore : tuple of signal.Signals
        Signals the workers ignore (the job's stop signals).
    watchdog : bool
        Also watch the parent from a thread, where the kernel cannot end the worker
        (see :func:`~braindecode_pars._jobs.orphans.die_with_parent`).
    threads : int | None
        Threads of the worker's numerical libraries (OpenMP, BLAS); None: as they are.
    then : callable | None
        Called last, with the worker's arguments (a DataLoader's worker id).

    Attributes
    ----------
    job : int
        The id of the process that made it (the job's).
    """

    def __init__(self, method, ignore=(), watchdog=False, threads=None, then=None):
        if method not in START_METHODS:
            raise ValueError(
                f"Invalid value for the 'method' parameter. Allowed values are "
                f"{', '.join(map(repr, START_METHODS))}, but got {method!r} instead."
            )
        if then is not None and not callable(then):
            raise TypeError(
                f"'then' (a worker_init_fn) must be callable or None, but got {then!r}."
            )
        self.method = method
        self.ignore = tuple(ignore)
        self.watchdog = watchdog
        self.threads = threads
        self.then = then
        self.job = os.getpid()

    def __call__(self, *args):
        forkserver = self.method == "forkserver"
        die_with_parent(
            parent=None if forkserver else self.job, ignore=self.ignore, watchdog=self.watchdog
        )
        if forkserver and not _alive(self.job):  # the job ended before this worker ran
            os._exit(1)
        if self.threads is not None:
            _limit_threads(self.threads)
        if self.then is not None:
            self.then(*args)

    def __repr__(self):
        return (
            f"WorkerStart(method={self.method!r}, job={self.job}, "
            f"ignore={[s.name for s in self.ignore]}, then={self.then!r})"
        )


def _limit_threads(n):
    """At most ``n`` threads in this process's numerical libraries: those it loads from
    now on (the environment) and those already loaded (threadpoolctl)."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = str(n)
    from threadpoolctl import threadpool_limits

    threadpool_limits(n)
