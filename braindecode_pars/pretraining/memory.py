"""Keep freed memory in the process, so that CPU training steps stop faulting pages in.

A training step on a CPU allocates and frees the same tensors at every step. glibc's
``malloc`` (the allocator torch uses on Linux) serves allocations from 128 KiB up to
a threshold that it raises as the program frees larger blocks, by ``mmap``, and gives
the top of its heap back to the system when more than twice that threshold lies free
there. Each page it gave back is faulted in and zeroed again by the kernel at its next
use. With the thresholds fixed high, freed memory stays in the process and the next
step reuses it.

The page faults per step and the step times with and without: :doc:`/scaling`.

The setting is the process's, like ``torch.set_num_threads``: it applies to every
allocation after it, of torch and of everything else. The peak resident memory is
unchanged; what changes is that memory freed below the peak is no longer returned
until the process ends (up to ``trim_threshold`` of it at the top of the heap).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

from braindecode_pars._util.checks import check_int

logger = logging.getLogger(__name__)

#: ``mallopt`` parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3

#: The largest ``M_MMAP_THRESHOLD`` glibc accepts on 64-bit systems
#: (``DEFAULT_MMAP_THRESHOLD_MAX``): 4 MiB * sizeof(long).
_MAX_MMAP_THRESHOLD = 32 * 1024 * 1024

#: ``mallopt`` takes its value as a C ``int``.
_INT_MAX = 2**31 - 1

#: Default heap memory kept at the top of the heap after frees.
_DEFAULT_TRIM_THRESHOLD = 256 * 1024 * 1024


def _glibc():
    """The C library when it is glibc (its ``mallopt`` is the one documented here), else None."""
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


def keep_freed_memory(mmap_threshold=_MAX_MMAP_THRESHOLD, trim_threshold=_DEFAULT_TRIM_THRESHOLD):
    """Fix glibc's ``malloc`` thresholds so that freed memory is reused, not given back.

    The same as starting Python with ``MALLOC_MMAP_THRESHOLD_`` and
    ``MALLOC_TRIM_THRESHOLD_`` set, done from inside the process. ``braindecode-pars
    pretrain`` calls it before training on a CPU (``--no-keep-freed-memory`` turns it
    off); a script that trains on a CPU can call it once at its start. Elsewhere than
    Linux with glibc it does nothing and returns False (other allocators, such as
    macOS's or musl's, have no such thresholds).

    Parameters
    ----------
    mmap_threshold : int
        Allocations of at least this many bytes are served by ``mmap`` and given back
        when freed; smaller ones come from the heap. At most
        :data:`_MAX_MMAP_THRESHOLD` (32 MiB), glibc's limit.
    trim_threshold : int
        Bytes free at the top of the heap beyond which the heap is shrunk.

    Returns
    -------
    applied : bool
        Whether glibc took both settings.
    """
    check_int("mmap_threshold", mmap_threshold, minimum=0)
    check_int("trim_threshold", trim_threshold, minimum=0)
    if trim_threshold > _INT_MAX:
        raise ValueError(
            f"'trim_threshold' must be <= {_INT_MAX} (mallopt takes a C int), but got "
            f"{trim_threshold}."
        )
    if mmap_threshold > _MAX_MMAP_THRESHOLD:
        raise ValueError(
            f"'mmap_threshold' must be <= {_MAX_MMAP_THRESHOLD} (32 MiB, glibc's limit on "
            f"64-bit systems), but got {mmap_threshold}."
        )
    libc = _glibc()
    if libc is None:
        logger.debug("keep_freed_memory: not glibc on Linux; allocator left as it is")
        return False
    # mallopt returns 1 on success, 0 on error
    applied = bool(libc.mallopt(_M_MMAP_THRESHOLD, mmap_threshold)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, trim_threshold)
    )
    logger.info(
        "glibc malloc: mmap threshold %d MiB, trim threshold %d MiB%s",
        mmap_threshold >> 20,
        trim_threshold >> 20,
        "" if applied else " refused",
    )
    return applied
