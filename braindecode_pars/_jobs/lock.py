"""One process at a time in a folder: :func:`folder_lock`, for the builds and runs that
write into a folder they own (a window store, a pretraining run's ``--out``).

The lock is ``fcntl.flock`` on a file in the folder (:data:`LOCK_FILE`) that holds the
holder's process id and what it does. The kernel releases a ``flock`` when its holder
ends, however it ends (SIGKILL, a power cut aside), so a lock left by a dead process
never blocks: the file may stay, but nobody holds it. Where ``fcntl`` does not exist
(Windows) the folder is not locked.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

logger = logging.getLogger(__name__)

#: The lock file of a locked folder.
LOCK_FILE = ".lock"

#: The folders this process holds with ``reentrant=True`` allowed: folder -> [times
#: entered]. (A command that locks its ``--out`` and the net that locks the same folder
#: as its ``checkpoint_dir`` hold one lock.)
_HELD = {}
#: The open lock files of the folders this process holds, by folder.
_OPEN = {}


def _forget_in_child():
    """In a process just forked (a worker of a store build or a DataLoader), close its
    copies of the lock files: a ``flock`` belongs to the open file, which the fork
    shares, so a worker would otherwise hold its parent's folder after the parent was
    killed, until the worker itself ended."""
    for f in _OPEN.values():
        with contextlib.suppress(OSError):
            f.close()
    _OPEN.clear()
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class FolderLockedError(RuntimeError):
    """Another process holds the lock of a folder.

    ``pid`` is its process id (None when it could not be read), ``holder`` what it
    wrote it does (``what`` of its :func:`folder_lock`).
    """

    def __init__(self, message, pid=None, holder=None):
        super().__init__(message)
        self.pid = pid
        self.holder = holder


def _holder(f):
    """``(pid, what)`` written in an open lock file, or ``(None, None)``."""
    f.seek(0)
    pid, _, what = f.read().decode(errors="replace").partition("\n")
    try:
        return int(pid), what.strip() or None
    except ValueError:  # written by a process stopped between truncate and write
        return None, None


@contextlib.contextmanager
def folder_lock(path, what, reentrant=False):
    """Hold the lock of folder ``path`` (created if missing) while the block runs.

    Taken without waiting: when another process holds it, :class:`FolderLockedError`
    is raised at once, naming that process, before the caller does any work. The lock
    file is removed when the block ends.

    Parameters
    ----------
    path : str | Path
        The folder.
    what : str
        What the holder does there, in words (``"a store build"``), written in the
        lock file and named to a process that finds the folder locked.
    reentrant : bool
        If this process already holds the folder, join that lock instead of being
        refused (a command that locked its output folder, then the training it runs
        there).

    Yields
    ------
    path : Path
        The lock file.

    Raises
    ------
    FolderLockedError
        When another process (or another ``folder_lock`` of this one) holds the lock.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with folder_lock(folder, "a store build"):
    ...     with folder_lock(folder, "a second build"):  # doctest: +ELLIPSIS
    ...         pass
    Traceback (most recent call last):
    ...
    braindecode_pars._jobs.lock.FolderLockedError: ... is in use by process ... (a store build)...
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    lock = path / LOCK_FILE
    key = path.resolve()
    if reentrant and key in _HELD:
        _HELD[key] += 1
        try:
            yield lock
        finally:
            _HELD[key] -= 1
        return
    if fcntl is None:
        logger.debug("No fcntl on this system: %s is not locked.", path)
        yield lock
        return
    while True:
        f = open(lock, "a+b")  # noqa: SIM115 (held open while locked)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid, holder = _holder(f)
            f.close()
            by = "another process" if pid is None else f"process {pid}"
            doing = f" ({holder})" if holder else ""
            raise FolderLockedError(
                f"'{path}' is in use by {by}{doing}, so {what} cannot start there (its "
                f"lock: {lock}). Wait for it to end, or end it (kill "
                f"{pid if pid is not None else 'it'}), or give another folder.",
                pid,
                holder,
            ) from None
        try:  # the file locked may have been removed by a holder ending meanwhile
            same = os.fstat(f.fileno()).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()
    try:
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n{what}\n".encode())
        f.flush()
        _HELD[key], _OPEN[key] = 1, f
        yield lock
    finally:
        _HELD.pop(key, None)
        _OPEN.pop(key, None)
        lock.unlink(missing_ok=True)  # before the unlock: no one locks a removed file
        f.close()
