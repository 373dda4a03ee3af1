"""Atomic writes: a reader, or a run resumed after a crash or a power cut, finds a file
either as it was or whole, never half written.

Every file the package replaces in place (a checkpoint's pointer, a saved encoder, a
window store's index, ``info.json`` and ``recordings.json``, a split file, a cache's
marker, a results table) is written here, the same way:

1. into a temporary file beside it (same folder, so the same filesystem; a hidden name,
   ``.<name>.<pid>.<random>.tmp``, that no glob of the package's own files matches);
2. flushed and ``fsync``-ed, so that its bytes are on the disk;
3. renamed over the target (``os.replace``, atomic on POSIX filesystems);
4. then the folder is ``fsync``-ed, so that the rename itself survives a power cut.

A failure at any step (a full disk, an error of the writer, an interrupt) removes the
temporary file and leaves the target as it was. A process killed during the write
leaves at most a temporary file (:func:`temporary_files` finds them). This module
imports nothing of the package.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
from pathlib import Path

logger = logging.getLogger(__name__)

#: The modes of :func:`atomic_write`: a whole file, written anew (text or bytes).
WRITE_MODES = ("w", "wb")
#: Errors of ``fsync`` on a folder that mean the filesystem does not offer it (some
#: network and FUSE filesystems), not that the data is lost.
_NO_FOLDER_SYNC = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EISDIR}


def _temporary_name(path):
    """A name for the temporary file of ``path``, beside it."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _replace(source, target):
    """``os.replace``; where both names are links to one file (a hard link of a file
    that another process has put in place meanwhile), POSIX's rename does nothing, and
    the source name is removed here."""
    os.replace(source, target)
    if os.path.abspath(source) != os.path.abspath(target):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(source)


def temporary_files(path):
    """The temporary files that writes of ``path`` killed midway left beside it.

    Parameters
    ----------
    path : str | Path
        The target of the writes.

    Returns
    -------
    files : list of Path
    """
    path = Path(path)
    return sorted(path.parent.glob(f".{path.name}.*.tmp"))


def fsync_file(path):
    """Flush the data of the file ``path`` to the disk (``fsync``).

    Parameters
    ----------
    path : str | Path
        A file written and closed.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder):
    """Flush the entries of ``folder`` (the files created, renamed or removed in it) to
    the disk, so that a rename into it survives a power cut.

    Where the operating system or the filesystem cannot (Windows opens no folder; some
    network filesystems refuse ``fsync`` on one), nothing is done and a debug message
    says so; other errors (an I/O error) are raised.

    Parameters
    ----------
    folder : str | Path
    """
    if os.name != "posix":
        logger.debug("No fsync of folders here (%s): '%s' is not flushed.", os.name, folder)
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in _NO_FOLDER_SYNC:
            raise
        logger.debug("The filesystem of '%s' cannot fsync a folder (%s).", folder, err)
    finally:
        os.close(fd)


def rename_atomic(source, target, *, fsync=True):
    """Rename the file ``source`` over ``target`` (``os.replace``), then flush the folder
    of each, so that the rename survives a power cut.

    For a file made whole by other means (a store's data, journaled as it grew) that
    takes its final name; a file written at once is written with :func:`atomic_write`.

    Parameters
    ----------
    source, target : str | Path
        On one filesystem.
    fsync : bool
        Flush the folders after the rename.
    """
    source, target = Path(source), Path(target)
    _replace(source, target)
    if fsync:
        fsync_folder(target.parent)
        if source.parent.resolve() != target.parent.resolve():
            fsync_folder(source.parent)


@contextlib.contextmanager
def atomic_path(path, *, fsync=True):
    """A temporary path beside ``path`` to write by any means; on a clean exit it replaces
    ``path`` (flushed, renamed, the folder flushed), on an error it is removed.

    For writers that take a path rather than an open file (a hard link, a copy); those
    that write into a file use :func:`atomic_write`.

    Parameters
    ----------
    path : str | Path
        The file to write; its folder must exist.
    fsync : bool
        Flush the file before the rename and the folder after it. False only for files
        that can be made again at no cost.

    Yields
    ------
    tmp : Path
        The temporary path, which does not exist yet. The block must create it.
    """
    path = Path(path)
    tmp = _temporary_name(path)
    try:
        yield tmp
        if fsync:
            fsync_file(tmp)
        _replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if fsync:
        fsync_folder(path.parent)


@contextlib.contextmanager
def atomic_write(path, mode="w", *, encoding="utf-8", newline=None, fsync=True):
    """Write ``path`` atomically: the block writes into an open temporary file, which then
    replaces ``path`` (see the module).

    Parameters
    ----------
    path : str | Path
        The file to write; its folder must exist.
    mode : {"w", "wb"}
        Text or bytes.
    encoding, newline : str | None
        Of a text file, as :func:`open` takes them (``encoding`` is ignored for bytes).
    fsync : bool
        Flush the file before the rename and the folder after it.

    Yields
    ------
    file : file object
        The temporary file, open for writing.

    Raises
    ------
    ValueError
        For a ``mode`` other than "w" or "wb".

    Examples
    --------
    >>> import json, tempfile
    >>> from pathlib import Path
    >>> target = Path(tempfile.mkdtemp()) / "info.json"
    >>> with atomic_write(target) as f:
    ...     json.dump({"epoch": 3}, f)
    >>> json.loads(target.read_text())
    {'epoch': 3}
    """
    if mode not in WRITE_MODES:
        raise ValueError(
            f"Invalid value for the 'mode' parameter. Allowed values are 'w' and 'wb', but "
            f"got {mode!r} instead."
        )
    with atomic_path(path, fsync=False) as tmp:
        # O_EXCL: a new file of this process's, with the permissions umask gives any file
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        kwargs = {} if mode == "wb" else {"encoding": encoding, "newline": newline}
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            if fsync:
                os.fsync(f.fileno())
    if fsync:
        fsync_folder(Path(path).parent)


def write_atomic(path, data, *, fsync=True):
    """Write ``data`` (text or bytes) to ``path`` atomically (:func:`atomic_write`).

    Parameters
    ----------
    path : str | Path
    data : str | bytes
        Text is written in UTF-8.
    fsync : bool
        Flush the file before the rename and the folder after it.

    Raises
    ------
    TypeError
        For ``data`` that is neither text nor bytes.
    """
    if not isinstance(data, str | bytes | bytearray):
        raise TypeError(
            f"'data' must be text (str) or bytes, but got {type(data).__name__} instead."
        )
    with atomic_write(path, "w" if isinstance(data, str) else "wb", fsync=fsync) as f:
        f.write(data)


def save_atomic(obj, path):
    """``torch.save`` of ``obj`` to ``path`` through :func:`atomic_write` (its folder
    made if missing): a crash never leaves half a file."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as f:
        torch.save(obj, f)
