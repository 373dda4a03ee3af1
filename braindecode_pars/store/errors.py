"""The errors of a store build, which the command line and users catch.

A build resumed with other settings is refused (:class:`StoreMismatchError`), as is a
data file shorter than its journal says (:class:`StoreDataLostError`); a failed write is
a :class:`StoreWriteError` and a stop signal a :class:`StoreBuildStopped`, which the
same call resumes.
"""

from __future__ import annotations


class StoreMismatchError(ValueError):
    """A store folder holds a build (or a store) with other settings than those given.

    ``differences`` maps each differing entry to ``(saved, given)``.
    """

    def __init__(self, message, differences):
        super().__init__(message)
        self.differences = differences


class StoreDataLostError(ValueError):
    """An unfinished build's (or a store's) data file is shorter than its journal (or
    index) describes."""


class StoreBuildStopped(Exception):
    """A store build stopped by a stop signal at a recording's end; the same call resumes.

    ``signal`` is the signal's name (``"SIGTERM"``), ``done`` the units committed.
    """

    def __init__(self, message, signal_name, done):
        super().__init__(message)
        self.signal = signal_name
        self.done = done


class StoreWriteError(OSError):
    """Writing a store failed (a full disk, a quota, a file size limit); what was
    committed before is kept. ``errno`` is the failed write's."""
