"""The worker processes of a store build: how they start, a pool of them, its end.

A worker ends with the build's process, whatever ends it, ignores the build's stop
signals (the build stops at a recording's end, then ends its workers) and runs one
thread (:class:`~braindecode_pars._jobs.workers.WorkerStart`, the start of every worker
of the package). The order of their results, and what happens when one dies, are
:func:`~braindecode_pars.store._build._results`'.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import sys

from braindecode_pars._jobs.workers import WorkerStart


def _quiet_mne():
    """The last step of a worker's start: MNE logs errors only (the build reports each
    recording once, from its own process)."""
    logging.getLogger("mne").setLevel(logging.ERROR)


def _worker_context(preload):
    """How worker processes start: by ``fork`` where there is one (Linux: a copy of this
    process, its libraries already imported, in milliseconds; started before any other
    thread of the build, as torch's DataLoader starts its workers), else by the
    ``forkserver`` (the libraries imported once, seconds: the module ``preload``, which
    holds the workers' task) or ``spawn``."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if context.get_start_method() == "forkserver":  # workers fork with the imports done
        context.set_forkserver_preload([preload])
    return context


def _warm():
    """A worker's first task: it answers once it has started (its imports done)."""
    return os.getpid()


def _pool(jobs, context, ignored):
    """A pool of ``jobs`` worker processes, each started by
    :class:`~braindecode_pars._jobs.workers.WorkerStart`: it ends with the build's process
    (the kernel's ``PR_SET_PDEATHSIG``, and a watchdog thread where that cannot work),
    leaves the ``ignored`` signals (the build's stop signals: the build stops at a
    recording's end, then ends its workers) and uses one thread (the processes are the
    parallelism)."""
    start = WorkerStart(
        context.get_start_method(), ignore=ignored, watchdog=True, threads=1, then=_quiet_mne
    )
    return concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=start)


def _end_pool(pool):
    """End a pool's workers now (SIGKILL: they leave the stop signals), not after the
    units they prepare, which a stopped build prepares again when it resumes.

    A worker killed while it wrote a result leaves half a message in the pool's result
    pipe, which the pool's manager thread would wait for the rest of forever (and
    ``shutdown`` with it, seen once in 12 stopped builds): once the workers are dead,
    this process closes its own end for writing too, so that the manager reads the end
    of the pipe, takes the pool for broken and ends."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        process.kill()
    for process in processes:
        process.join(timeout=10)
    results = getattr(pool, "_result_queue", None)
    writer = getattr(results, "_writer", None)
    if writer is not None:
        writer.close()
    pool.shutdown(wait=True, cancel_futures=True)
