"""The page cache of a file: how much of it is in memory (``mincore``), and dropping it
(``posix_fadvise(POSIX_FADV_DONTNEED)``), so that a benchmark reads from the disk.

``POSIX_FADV_DONTNEED`` asks the kernel to evict the file's *clean* pages from the page
cache (pages written and not yet on the disk are not evicted: :func:`drop_cached_pages`
calls ``fsync`` first); pages mapped by a running process stay. Nothing needs root,
unlike ``echo 1 > /proc/sys/vm/drop_caches``, and other files keep their pages.
:func:`cached_fraction` says whether it worked, from ``mincore`` over a read-only map of
the file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os

import numpy as np

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_libc.mincore.restype = ctypes.c_int
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.mmap.restype = ctypes.c_void_p
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.munmap.restype = ctypes.c_int
#: Bytes mapped and asked about at a time.
_SPAN = 1 << 30


def drop_cached_pages(path):
    """Evict the clean pages of the file ``path`` from the page cache.

    ``fsync`` first (so that every page is clean), then
    ``posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` over the whole file.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cached_fraction(path):
    """Share of the pages of the file ``path`` that are in the page cache (``mincore``)."""
    size = os.path.getsize(path)
    if size == 0:
        return 1.0
    page = mmap.PAGESIZE
    resident = total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        for start in range(0, size, _SPAN):
            length = min(_SPAN, size - start)
            address = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
            if address in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap of '{path}' failed")
            try:
                pages = (length + page - 1) // page
                vec = np.zeros(pages, dtype=np.uint8)
                if _libc.mincore(address, length, vec.ctypes.data) != 0:
                    raise OSError(ctypes.get_errno(), f"mincore of '{path}' failed")
                resident += int(np.count_nonzero(vec & 1))
                total += pages
            finally:
                _libc.munmap(address, length)
    finally:
        os.close(fd)
    return resident / total
