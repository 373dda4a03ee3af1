"""glibc's ``malloc`` from the lab's scripts: its ``mallopt``, for memory measurements
that need its thresholds set (the library's ``keep_freed_memory`` sets them for
training; these scripts set them otherwise)."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

#: ``mallopt`` parameters (glibc's malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def glibc():
    """The C library when it is glibc (its ``mallopt`` is the one meant here), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        version = libc.gnu_get_libc_version  # only glibc defines it (not musl)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    version.restype = ctypes.c_char_p
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return libc
