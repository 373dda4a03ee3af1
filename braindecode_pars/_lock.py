"""One writer per folder: an advisory lock held while a command builds into it.

The lock is ``fcntl.flock`` on ``<folder>/.lock``: the kernel releases it when the
process that holds it ends, however it ends (SIGKILL included), so a lock file left by a
dead process never blocks. The file holds the holder's process id and what it does,
which a refused process names.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

#: The folders this process holds, with how many times it entered each (a lock taken
#: by a command and again by the function it calls is one lock).
_HELD = {}

LOCK_NAME = ".lock"


@contextlib.contextmanager
def folder_lock(path, what):
    """Hold ``path`` for this process while the block runs; refuse if another holds it.

    Parameters
    ----------
    path : str | Path
        The folder (made if missing); the lock file is ``<path>/.lock``.
    what : str
        What holds it, in words ("pretraining"), for the message of a refused process.

    Raises
    ------
    RuntimeError
        Another live process holds the folder; the message names its process id.
    """
    folder = Path(path).resolve()
    if folder in _HELD:  # already ours: reentrant
        _HELD[folder][1] += 1
        try:
            yield folder
        finally:
            _HELD[folder][1] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = _acquire(folder, what)
    _HELD[folder] = [fd, 1]
    try:
        yield folder
    finally:
        del _HELD[folder]
        os.close(fd)  # releases the flock; the file stays (a later holder rewrites it)


def _acquire(folder, what):
    """An open descriptor of ``<folder>/.lock`` that holds its exclusive flock."""
    import fcntl

    lock_file = folder / LOCK_NAME
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        holder = _holder(fd)
        os.close(fd)
        if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise
        pid, _, held_for = holder.partition(" ")
        raise RuntimeError(
            f"'{folder}' is in use by process {pid} ({held_for or 'unknown'}), so {what} "
            f"cannot start there (lock file {lock_file}). Wait for that process to end, or "
            f"stop it (kill {pid}), or use another folder."
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {what}\n".encode())
    logger.debug("Locked %s for %s (process %d).", folder, what, os.getpid())
    return fd


def _holder(fd):
    """The holder written in an open lock file, "<pid> <what>" ("?" if unreadable)."""
    try:
        text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text or "?"
