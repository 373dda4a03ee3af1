"""The journal that makes a store build resumable.

A build (:func:`~braindecode_pars.store.write.write_window_store`) appends each
recording's data to ``data.part`` and flushes it (:func:`_fsync_append`), then commits
it with one journal line; :func:`_read_journal` reads the complete lines back and cuts
what a kill left after them. A build resumed with other settings is refused
(:class:`~braindecode_pars.store.errors.StoreMismatchError`, :func:`_differences`), as
is a data file shorter than its journal says (the errors are in
:mod:`~braindecode_pars.store.errors`). The resume protocol is described in
:mod:`.store`.
"""

from __future__ import annotations

import json
import os

from braindecode_pars.store.errors import (
    StoreDataLostError,
    StoreWriteError,
)

#: Files of a build in progress.
_BUILD, _JOURNAL, _PART = "build.json", "journal.jsonl", "data.part"


def _differences(saved, given):
    """``{key: (saved, given)}`` of the build records' differing entries, settings by name."""
    out = {}
    for key in sorted(set(saved) | set(given)):
        a, b = saved.get(key), given.get(key)
        if key == "settings" and isinstance(a, dict) and isinstance(b, dict):
            for name in sorted(set(a) | set(b)):
                if a.get(name) != b.get(name):
                    out[name] = (a.get(name), b.get(name))
        elif a != b:
            out[key] = (a, b)
    return out


def _read_journal(path, itemsize):
    """The complete lines of a build's journal, the journal and ``data.part`` truncated to
    them (a line cut by a kill, and data written after the last line, are dropped).

    A ``data.part`` shorter than its journal says (or missing) is refused with
    :class:`StoreDataLostError`: truncating would pad it with zeros.
    """
    journal, entries, good = path / _JOURNAL, [], 0
    if journal.exists():
        with open(journal, "rb") as f:
            for raw_line in f:
                if not raw_line.endswith(b"\n"):
                    break
                try:
                    entry = json.loads(raw_line)
                except ValueError:
                    break
                if entry.get("unit") != len(entries):
                    break
                entries.append(entry)
                good += len(raw_line)
        with open(journal, "r+b") as f:
            f.truncate(good)
    end = 0
    for entry in entries:
        for rec in entry.get("recordings", ()):
            end = max(end, rec["offset"] + rec["n_chans"] * rec["n_times"])
    part = path / _PART
    size = part.stat().st_size if part.exists() else 0
    if size < end * itemsize:
        raise StoreDataLostError(
            f"The unfinished store build in '{path}' has lost data: its journal names "
            f"{end * itemsize} bytes of recordings but {_PART} holds {size} (removed or "
            "cut outside the build). Start it again with overwrite=True (the command's "
            "--overwrite)."
        )
    if part.exists():
        with open(part, "r+b") as f:
            f.truncate(end * itemsize)
    return entries, end


def _write_error(path, err):
    """:class:`StoreWriteError` of a failed write ``err`` in store folder ``path``."""
    what = err.strerror or str(err)
    out = StoreWriteError(
        f"Cannot write the store in '{path}': {what} (errno {err.errno}): a full disk, a "
        "quota or a file size limit (ulimit -f)? The recordings committed before are kept: "
        "make room and call again with the same settings (the same command) to resume."
    )
    out.errno = err.errno
    return out


def _fsync_append(f, data):
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
