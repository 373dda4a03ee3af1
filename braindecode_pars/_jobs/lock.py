"""One process at a time in a folder: :func:`folder_lock`, for the builds and runs that
write into a folder they own (a window store, a pretraining run's ``--out``).

The lock is ``fcntl.flock`` on a file in the folder (:data:`LOCK_FILE`) that holds the
holder's process id and what it does. The kernel releases a ``flock`` when its holder
ends, however it ends (SIGKILL, a power cut aside), so a lock left by a dead process
never blocks: the file may stay, but nobody holds it. Within one process, the folders
held are kept in a registry, and a second holder is refused from it before the lock file
is opened (or joins the first, with ``reentrant=True``).

Where clusters keep data:

- **NFS.** Linux emulates ``flock`` on NFS with POSIX (``fcntl``) locks of the whole
  file. They are seen by processes on other hosts (NFSv4, or NFSv3 with its lock
  daemon), so two jobs on two nodes are kept apart; but they belong to the process, not
  to the open file: a second ``flock`` of the file in the same process would be granted,
  and closing either descriptor would release both. The registry above is what refuses
  a second holder in the process there. An NFSv3 mount without the lock daemon
  (``nolock``, or lockd not running) refuses ``flock`` with ``ENOLCK``.
- **Lustre.** Mounted with ``flock``, the lock holds across nodes; with ``localflock``,
  between the processes of one node only; without either (the default on many sites)
  ``flock`` fails with ``ENOSYS``.
- **FUSE** filesystems may not implement it (``EOPNOTSUPP``), some others answer
  ``EINVAL``.

On a filesystem without ``flock`` (:data:`NO_FLOCK`), the folder is not locked against
other processes: one warning says so, once per folder and process, and the block runs.
Where ``fcntl`` does not exist (Windows) the folder is not locked against other processes
either. The registry keeps a second holder of this process out in both cases.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

logger = logging.getLogger(__name__)

#: The lock file of a locked folder.
LOCK_FILE = ".lock"

#: The ``errno`` values of a ``flock`` that the filesystem does not provide: Lustre
#: without flock (ENOSYS), NFS without its lock daemon (ENOLCK), FUSE (EOPNOTSUPP,
#: ENOTSUP where it differs), others (EINVAL).
NO_FLOCK = frozenset(
    {
        errno.ENOSYS,
        errno.ENOLCK,
        errno.EOPNOTSUPP,
        getattr(errno, "ENOTSUP", errno.EOPNOTSUPP),
        errno.EINVAL,
    }
)

#: The folders this process holds: folder -> [times entered, what the first holder
#: does]. Reserved before the lock file is opened. (A command that locks its ``--out``
#: and the net that locks the same folder as its ``checkpoint_dir``, ``reentrant=True``,
#: hold one lock.)
_HELD = {}
#: The open lock files of the folders this process holds, by folder (none for a folder
#: on a filesystem without flock).
_OPEN = {}
#: The folders on a filesystem without flock that this process has warned about.
_WARNED = set()
#: Guards the three above between threads.
_mutex = threading.Lock()


def _forget_in_child():
    """In a process just forked (a worker of a store build or a DataLoader), close its
    copies of the lock files: a ``flock`` belongs to the open file, which the fork
    shares, so a worker would otherwise hold its parent's folder after the parent was
    killed, until the worker itself ended. (A POSIX lock, NFS's, is not inherited.)"""
    global _mutex
    _mutex = threading.Lock()  # another thread of the parent may have held it
    for f in _OPEN.values():
        with contextlib.suppress(OSError):
            f.close()
    _OPEN.clear()
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class FolderLockedError(RuntimeError):
    """Another process, or another :func:`folder_lock` of this one, holds the lock of a
    folder.

    ``pid`` is its process id (None when it could not be read), ``holder`` what it
    wrote it does (``what`` of its :func:`folder_lock`).
    """

    def __init__(self, message, pid=None, holder=None):
        super().__init__(message)
        self.pid = pid
        self.holder = holder


class LockFileError(OSError):
    """The lock file of a folder could not be opened, locked or written, for a reason
    other than another holder or a filesystem without flock (no permission, a full disk,
    a quota). ``errno`` is the failed call's; the message names the folder."""


def _lock_file_error(path, lock, what, err):
    """:class:`LockFileError` of the failed call ``err`` on ``lock``, the lock file of
    folder ``path``."""
    reason = err.strerror or str(err)
    out = LockFileError(
        f"'{path}' cannot be locked for {what}: {reason} (errno {err.errno}; its lock file: "
        f"{lock}). Check that the folder is writable and its filesystem not full, or give "
        "another folder."
    )
    out.errno = err.errno
    return out


def _holder(f):
    """``(pid, what)`` written in an open lock file, or ``(None, None)``."""
    f.seek(0)
    pid, _, what = f.read().decode(errors="replace").partition("\n")
    try:
        return int(pid), what.strip() or None
    except ValueError:  # written by a process stopped between truncate and write
        return None, None


def _remove_if_empty(lock):
    """Remove the lock file ``lock`` when it is empty: opened for a ``flock`` that failed,
    and no holder's (a holder writes its process id in it once it holds it)."""
    with contextlib.suppress(OSError):
        if os.stat(lock).st_size == 0:
            lock.unlink()


def _no_flock(path, key, lock, err):
    """Go on without a lock on a filesystem without flock (``err``): warn once for this
    folder in this process, and remove the lock file tried when empty."""
    _remove_if_empty(lock)
    with _mutex:
        warned = key in _WARNED
        _WARNED.add(key)
    if not warned:
        logger.warning(
            "'%s' is on a filesystem without flock (%s, errno %d: an NFS mount without "
            "its lock daemon, Lustre mounted without flock, FUSE), so it is not locked "
            "against other processes: see that no other run or build writes into it at "
            "the same time.",
            path, err.strerror or err, err.errno,
        )  # fmt: skip


def _take(path, lock, key, what):
    """Open and ``flock`` ``lock``, the lock file of folder ``path``, and write this
    process in it; the open file, or None where the filesystem has no flock."""
    while True:
        try:
            f = open(lock, "a+b")  # noqa: SIM115 (held open while locked)
        except OSError as err:
            raise _lock_file_error(path, lock, what, err) from err
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
        except OSError as err:
            f.close()
            if err.errno in NO_FLOCK:
                _no_flock(path, key, lock, err)
                return None
            _remove_if_empty(lock)
            raise _lock_file_error(path, lock, what, err) from err
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
    except OSError as err:
        lock.unlink(missing_ok=True)
        f.close()
        raise _lock_file_error(path, lock, what, err) from err
    return f


@contextlib.contextmanager
def folder_lock(path, what, reentrant=False):
    """Hold the lock of folder ``path`` (created if missing) while the block runs.

    Taken without waiting: when another process holds it, :class:`FolderLockedError`
    is raised at once, naming that process, before the caller does any work. A second
    holder in this process is refused (or joins, ``reentrant``) before the lock file is
    opened. The lock file is removed when the block ends. On a filesystem without flock
    the folder is not locked against other processes: a warning says so and the block
    runs (the module's docstring says what NFS, Lustre and FUSE give).

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
        there). The lock is released when its last holder leaves, whichever took it.

    Yields
    ------
    path : Path
        The lock file.

    Raises
    ------
    FolderLockedError
        When another process (or another ``folder_lock`` of this one) holds the lock.
    LockFileError
        When the lock file cannot be opened, locked or written for another reason (no
        permission, a full disk); the message names the folder.

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
    with _mutex:
        held = _HELD.get(key)
        if held is None:
            _HELD[key] = [1, what]  # reserved: a second holder is refused from here on
        elif reentrant:
            held[0] += 1
    if held is not None and not reentrant:
        raise FolderLockedError(
            f"'{path}' is in use by process {os.getpid()} ({held[1]}), this process, so "
            f"{what} cannot start there while that holds it (its lock: {lock}). Let it end "
            "first, or give another folder.",
            os.getpid(),
            held[1],
        )
    if held is not None:
        try:
            yield lock
        finally:
            _leave(key, lock)
        return
    try:
        if fcntl is None:
            logger.debug("No fcntl on this system: %s is not locked.", path)
        else:
            f = _take(path, lock, key, what)
            if f is not None:
                with _mutex:
                    _OPEN[key] = f
        yield lock
    finally:
        _leave(key, lock)


def _leave(key, lock):
    """One holder of the lock of folder ``key`` (its file ``lock``) leaves; the last one
    to leave, whichever took it first, releases it: a reentrant holder in another thread
    never outlives the lock it joined."""
    with _mutex:
        held = _HELD.get(key)
        held[0] -= 1
        if held[0] > 0:
            return
        _HELD.pop(key, None)
        f = _OPEN.pop(key, None)
        if f is not None:  # released under the mutex: no holder of this process between
            lock.unlink(missing_ok=True)  # before the unlock: no one locks a removed file
            f.close()
