"""Windows stored once, memory-mappable: every recording in one data file, plus an index.

A pretraining corpus is preprocessed once (braindecode ``preprocess``), windowed, and
written with :func:`write_window_store`, one recording at a time when it comes from a
:class:`~braindecode_pars.io.windowing.RecordingStream` (``lazy=True`` readers),
by ``jobs`` worker processes if asked; :meth:`SingleChannelWindows.from_store` then
memory-maps it, so that processes and data-loading workers share the operating
system's page cache instead of holding copies, and a crop is a slice of the mapped file.
This module writes a store; what a build is made of is in :mod:`.build` (its
workers in :mod:`.workers`, its journal and errors in :mod:`.journal`), and
the reading (:func:`read_window_store`, :func:`store_summary`) in :mod:`.read`.

Layout of a store folder (format 3; format 2, float32 only, still opens)::

    store/
      data.f32 | data.f16  the EEG channels of every recording, little-endian float32
                        (``info["dtype"]`` "<f4") or float16 ("<f2"), one recording
                        after the other, each (n_chans, n_samples), C order
      index.npz         windows: (n_windows, 3) recording, start, stop;
                        recordings: (n_recordings, 3) offset (samples), n_chans, n_samples;
                        scales: (n_recordings,) float64, stored value = value x scale
                        (1 in float32 stores; a power of two in float16 ones)
      info.json         format, dtype, data_file, sfreq, numbers of recordings and
                        windows, the recordings read, skipped (with the reasons) and
                        written, samples clipped, the preprocessing braindecode
                        recorded (each distinct one, with its number of recordings)
                        and the build's settings
      recordings.json   channel names and description of every recording

One data file, whatever the number of recordings, so that reading a store of tens
of thousands of recordings opens one file and makes one memory map. A float16 store
scales each recording by the power of two that brings its largest absolute value
just below 2**14: float16 then keeps 11 significant bits of every sample whatever
the unit (volts, microvolts, digital units), nothing overflows (non-finite values
are clipped to float16's range and counted), and scaling back is exact.

Resume protocol. While a store is built the folder holds ``build.json`` (the
format, dtype, caller's settings and a fingerprint of the recordings to read),
``data.part`` (the data so far) and ``journal.jsonl``. The recordings are written in
their order, whatever the number of worker processes: each one's data is appended
to ``data.part`` and flushed to disk (fsync), then one journal line, which says
where its data lies and what it holds (or why it was skipped), is appended and
flushed. A line is the commit of its recording: a build stopped at any point (a
kill, a power cut) leaves a journal whose complete lines name complete data. Run
again with the same settings, the build truncates ``data.part`` and the journal to
the last complete line and goes on from the next recording, so that it ends with
the same bytes as a build that was never stopped; other settings are refused (or
``overwrite=True`` starts again). At the end the data file is renamed, then
``recordings.json``, ``info.json`` and ``index.npz`` (last: a store without it is
not complete) are written atomically and flushed to the disk, each with the folder
(:func:`~braindecode_pars._util.atomic.atomic_write`), and only then are the build
files removed (:data:`FINISH_STEPS`): a kill or a power cut at any point of the finish
leaves a complete store (whose build files the same call removes) or one that the same
call finishes, with the same bytes (a write killed midway leaves a temporary file, which
the call removes too).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np

from braindecode_pars._jobs.lock import folder_lock
from braindecode_pars._jobs.signals import StopSignals, check_stop_signals
from braindecode_pars._util.atomic import atomic_write, rename_atomic, temporary_files
from braindecode_pars._util.channels import check_same_sfreq
from braindecode_pars._util.checks import check_int, check_option
from braindecode_pars._util.logs import plural
from braindecode_pars.store._build import (
    DATA_FILES,
    STORE_DTYPES,
    _fingerprint,
    _Progress,
    _results,
    _units,
)
from braindecode_pars.store._journal import (
    _BUILD,
    _JOURNAL,
    _PART,
    _differences,
    _fsync_append,
    _read_journal,
    _write_error,
)
from braindecode_pars.store._read import (
    _check_complete,
    _data_bytes,
)
from braindecode_pars.store.errors import (
    StoreBuildStopped,
    StoreDataLostError,
    StoreMismatchError,
)

logger = logging.getLogger(__name__)

#: Version of the layout written by :func:`write_window_store`.
_STORE_FORMAT = 3
#: The steps of a build's finish, in their order, each done before the next starts: the
#: data file takes its name, the descriptions, info and index are written (the index
#: last: a store without it is not complete), each flushed to the disk with its folder,
#: then the build files go.
FINISH_STEPS = ("data", "recordings.json", "info.json", "index.npz", _BUILD, _JOURNAL)
#: The files a build writes atomically (whose temporary files a killed write leaves).
_ATOMIC_FILES = ("recordings.json", "info.json", "index.npz", _BUILD)


def _clear(path):
    """Remove what a store and its build write in ``path`` (index first: the store is then
    incomplete), with the temporary files of writes that were killed midway."""
    names = ("index.npz", *DATA_FILES.values(), "data.tmp", "info.json", "recordings.json",
             _BUILD, _JOURNAL, _PART, "index.tmp.npz")  # fmt: skip
    for name in names:
        for file in (path / name, *temporary_files(path / name)):
            if file.exists():
                file.unlink()


def _remove_temporaries(path):
    """Remove the temporary files that writes killed midway left in ``path``."""
    for name in _ATOMIC_FILES:
        for file in temporary_files(path / name):
            file.unlink(missing_ok=True)


def _finish_step(path, step):
    """Called once each step of a build's finish (:data:`FINISH_STEPS`) is done: a debug
    line of this module's logger, ``"...: <step> done."``, on which the lab's fault
    tests kill a build, in a process of its own, at each point of its finish."""
    logger.debug("The store build in %s: %s done.", path, step)


def _dump_json(path, content):
    """``content`` as JSON in ``path``, atomically and on the disk (fsync) once done."""
    with atomic_write(path) as f:
        json.dump(content, f, default=str)


def write_window_store(
    windows,
    path,
    overwrite=False,
    *,
    dtype="float32",
    jobs=1,
    on_error="raise",
    settings=None,
    stop_signals=("SIGTERM",),
):
    """Write braindecode windows to a store folder, one recording at a time; resumable.

    Every recording's EEG channels (MNE type ``eeg``, bad channels left out) are
    written once, whatever the number of its windows; a recording that is not
    preloaded is read from its file in chunks. Given a
    :class:`~braindecode_pars.io.windowing.RecordingStream` (a reader with
    ``lazy=True``), ``jobs`` processes read and preprocess its recordings while this
    one writes them in their order, so that the store is the same whatever
    ``jobs``. Memory holds a recording per process (and ``2 * jobs`` prepared ones
    waiting), plus the index. A build that stops (killed, or an error) goes on where
    it stopped when called again with the same settings and ends with the same
    bytes as one that never stopped: see the module's resume protocol. Progress and
    an ETA are shown (a bar on a terminal, a log line every 30 s otherwise).

    Parameters
    ----------
    windows : braindecode BaseConcatDataset | RecordingStream | iterable of BaseConcatDataset
        Windows from ``create_windows_from_events`` or ``create_fixed_length_windows``
        (whose recordings are ``mne.io.Raw``, preloaded or not), a stream of
        recordings, or an iterable yielding windows, e.g. one recording at a time.
    path : str | Path
        The store folder.
    overwrite : bool
        Replace an existing store, or start an unfinished build again.
    dtype : {"float32", "float16"}
        The stored samples. ``"float16"``: half the bytes; each recording is scaled by
        a power of two recorded in the index (see the module), 11 significant bits
        kept.
    jobs : int
        Processes that read and preprocess a stream's recordings (1: this one). Other
        windows are already in memory and are written by this process.
    on_error : {"raise", "skip"}
        A recording that cannot be read, preprocessed or stored (a damaged file, no
        EEG channel, another sampling rate): ``"raise"`` stops, naming it (what was
        written so far is kept for the next call); ``"skip"`` leaves it out, with the
        reason logged and listed in the store's ``info.json`` (``skipped``).
    settings : dict | None
        What made the windows (the command's options), recorded in ``info.json``; a
        later call resumes a build only with the same settings, ``dtype`` and
        recordings, and with the same ``settings`` returns a complete store as it is.
        Windows in memory (not a stream) resume only where each recording already
        stored has the description, number of windows and of samples of the one given.
    stop_signals : iterable of str | int
        Signals (names such as ``"SIGUSR1"``, or numbers) that stop the build at the end
        of the recording being written, with :class:`StoreBuildStopped`, instead of
        ending the process: a cluster's scheduler sends SIGTERM before it kills a job
        (and, asked, a signal of the job's choosing first, e.g. SLURM's
        ``--signal=USR1@60``). Handled when called from the main thread. Ctrl-C
        (SIGINT) is not one: it raises ``KeyboardInterrupt`` at once, and what was
        committed before is kept as well. ``()``: none.

    Returns
    -------
    path : Path

    Raises
    ------
    StoreMismatchError
        When ``path`` holds an unfinished build with other settings (the message lists
        them), or of other windows in memory, unless ``overwrite``.
    FileExistsError
        When ``path`` holds a complete store of other (or no) ``settings``, unless
        ``overwrite``.
    FolderLockedError
        When another process builds a store in ``path`` (the message names it); nothing
        is done.
    LockFileError
        When the lock file of ``path`` cannot be written (no permission, a full disk);
        nothing is done. (On a filesystem without flock the build goes on, unlocked, with
        a warning: :func:`~braindecode_pars._jobs.lock.folder_lock`.)
    StoreBuildStopped
        When a stop signal stopped the build; the same call resumes it.
    StoreWriteError
        When a write fails (a full disk, a file size limit); the same call resumes.
    StoreDataLostError
        When an unfinished build's data file is shorter than its journal says.

    Examples
    --------
    >>> from braindecode_pars.datasets import load_recordings
    >>> stream = load_recordings("my_study/**/*.edf", lazy=True)  # doctest: +SKIP
    >>> write_window_store(stream, "store/", jobs=4, dtype="float16")  # doctest: +SKIP
    """
    check_option("dtype", dtype, tuple(STORE_DTYPES))
    check_int("jobs", jobs, 1)
    check_option("on_error", on_error, ("raise", "skip"))
    signals = check_stop_signals("stop_signals", stop_signals)
    path = Path(path)
    code = STORE_DTYPES[dtype]
    settings = None if settings is None else json.loads(json.dumps(settings, default=str))
    units, total, names, parallel = _units(windows)
    source = None if names is None else hashlib.sha1("\n".join(names).encode()).hexdigest()
    build = {"format": _STORE_FORMAT, "dtype": code, "source": source, "settings": settings}
    stop = StopSignals(
        signals,
        message="%s received: the store build stops once the recording it writes is "
        "committed, for the same call to resume.",
        ignore_file_size=True,  # a write past a file size limit fails, and is reported
    )
    with folder_lock(path, "a store build"), stop:
        return _build(windows, path, overwrite, build, units, total, parallel, jobs, on_error,
                      stop)  # fmt: skip


def _build(windows, path, overwrite, build, units, total, parallel, jobs, on_error, stop):
    """:func:`write_window_store` once its arguments are checked and its folder locked."""
    code, settings = build["dtype"], build["settings"]
    if (path / "index.npz").exists() and not overwrite:
        info = json.loads((path / "info.json").read_text())
        if settings is not None and info.get("build") == build:
            _check_complete(path)
            for name in (_BUILD, _JOURNAL, _PART):  # left by a build stopped at its end
                (path / name).unlink(missing_ok=True)
            _remove_temporaries(path)
            logger.info("The store at %s is complete: nothing to do.", path)
            return path
        raise FileExistsError(f"A window store exists at '{path}'; pass overwrite=True.")
    if overwrite or not (path / _BUILD).exists():
        _clear(path)
        _dump_json(path / _BUILD, build)
    else:
        saved = json.loads((path / _BUILD).read_text())
        if saved != build:
            differences = _differences(saved, build)
            listed = "; ".join(f"{k}: saved {a!r}, now {b!r}" for k, (a, b) in differences.items())
            raise StoreMismatchError(
                f"'{path}' holds an unfinished store build with other settings ({listed}). "
                "Run it with its settings to resume it, or pass overwrite=True (the "
                "command's --overwrite) to start again.",
                differences,
            )
        data_file = path / DATA_FILES[code]
        if data_file.exists() and not (path / _PART).exists():  # stopped at its end
            rename_atomic(data_file, path / _PART)
        _remove_temporaries(path)  # of a write killed midway (its file is written again)
    entries, offset = _read_journal(path, np.dtype(code).itemsize)
    sfreq = next((r["sfreq"] for e in entries for r in e.get("recordings", ())), None)
    pre_skipped = [
        {"recording": str(name), "reason": reason}
        for name, reason in getattr(windows, "skipped", ())
    ]
    if entries:
        done = plural(len(entries), "recording")
        logger.info("Resuming the store build in %s after %s.", path, done)
    if jobs > 1 and not parallel:
        logger.info(
            "jobs=%d: the windows are in memory already (not a RecordingStream); this "
            "process writes them.",
            jobs,
        )
    units = _same_windows(units, entries, path)
    progress = _Progress(total, len(entries))
    try:
        with open(path / _PART, "ab") as data, open(path / _JOURNAL, "ab") as journal:
            results = _results(units, len(entries), jobs, parallel, code, on_error, stop.signals)
            for position, prepared in results:
                entry = {"unit": position}
                if "source" in prepared:
                    entry["source"] = prepared["source"]
                if "skipped" in prepared:
                    entry.update(skipped=prepared["skipped"], read=prepared["read"])
                    for item in prepared["skipped"]:
                        logger.warning("Skipping %s: %s", item["recording"], item["reason"])
                else:
                    entry["recordings"] = []
                    for rec in prepared["recordings"]:
                        try:
                            sfreq = check_same_sfreq(sfreq, rec["sfreq"], rec["what"])
                        except ValueError as err:
                            if on_error == "raise":
                                raise
                            entry.setdefault("skipped", []).append(
                                {"recording": rec["what"], "reason": str(err)}
                            )
                            continue
                        n_chans, n_times = rec["data"].shape
                        _append(data, np.ascontiguousarray(rec["data"]).data, path)  # no copy
                        meta = {k: rec[k] for k in ("sfreq", "scale", "clipped", "windows",
                                                    "ch_names", "description",
                                                    "preprocessing")}  # fmt: skip
                        entry["recordings"].append(
                            dict(meta, offset=offset, n_chans=n_chans, n_times=n_times)
                        )
                        offset += n_chans * n_times
                        logger.debug(
                            "Stored %s: %d channels (%s), %d samples, %d windows.",
                            rec["what"], n_chans, ", ".join(rec["ch_names"]), n_times,
                            len(rec["windows"]),
                        )  # fmt: skip
                del prepared  # let the recording go before the next one is read
                line = json.dumps(entry, default=str) + "\n"
                _append(journal, line.encode(), path)
                entries.append(entry)
                progress.update()
                if stop.received and (total is None or len(entries) < total):
                    results.close()  # ends the workers now
                    raise StoreBuildStopped(
                        f"The store build in '{path}' stopped on {stop.received.name} after "
                        f"{len(entries)} of {total if total is not None else 'its'} "
                        "recordings; they are kept: call again with the same settings (the "
                        "same command) to resume.",
                        stop.received.name,
                        len(entries),
                    )
    finally:
        progress.close()
    try:
        return _finish(path, entries, pre_skipped, build, code, sfreq)
    except StoreDataLostError:
        raise
    except OSError as err:
        raise _write_error(path, err) from err


def _append(f, data, path):
    """Append ``data`` to ``f`` and flush it to disk, a failure as :class:`StoreWriteError`."""
    try:
        _fsync_append(f, data)
    except OSError as err:
        raise _write_error(path, err) from err


def _same_windows(units, entries, path):
    """``units``, each windows in memory already stored (journaled) checked against the
    journal's fingerprint first (:class:`StoreMismatchError`), before any is written."""
    for position, unit in enumerate(units):
        if position < len(entries) and unit[0] == "windows":
            saved = entries[position].get("source")
            if saved != _fingerprint(unit[1]):
                raise StoreMismatchError(
                    f"'{path}' holds an unfinished store build of other windows: item "
                    f"{position} of 'windows' differs from the one stored there (its "
                    "descriptions, numbers of windows or samples). Give the windows it was "
                    "started with to resume it, or pass overwrite=True to start again.",
                    {"source": (saved, "other windows")},
                )
        yield unit


def _finish(path, entries, pre_skipped, build, code, sfreq):
    """Write the index, info and descriptions of a build's journal; remove the build files."""
    rows, shapes, scales, recordings, skipped = [], [], [], [], list(pre_skipped)
    preprocessing = {}  # its words -> recordings
    read = clipped = 0
    for entry in entries:
        skipped += entry.get("skipped", [])
        read += bool(entry.get("recordings")) or bool(entry.get("read"))
        for rec in entry.get("recordings", ()):
            windows = np.asarray(rec["windows"], dtype=np.int64).reshape(-1, 2)
            rows.append(np.column_stack([np.full(len(windows), len(shapes), np.int64), windows]))
            shapes.append((rec["offset"], rec["n_chans"], rec["n_times"]))
            scales.append(rec["scale"])
            clipped += rec["clipped"]
            recordings.append({"ch_names": rec["ch_names"], "description": rec["description"]})
            steps = rec.get("preprocessing") or "not recorded"
            preprocessing[steps] = preprocessing.get(steps, 0) + 1
    index = np.concatenate(rows) if rows else np.zeros((0, 3), np.int64)
    if len(index) == 0:
        _clear(path)
        detail = f" ({len(skipped)} skipped: {skipped[0]['reason']}...)" if skipped else ""
        raise ValueError(f"'windows' holds no window: nothing to write{detail}.")
    data_file = DATA_FILES[code]
    expected, size = _data_bytes(shapes, code), (path / _PART).stat().st_size
    if size != expected:  # the build's own bookkeeping: never expected
        raise StoreDataLostError(
            f"The store build in '{path}' wrote {size} bytes of data where its journal "
            f"names {expected}; it is not complete. Start it again with overwrite=True."
        )
    rename_atomic(path / _PART, path / data_file)
    _finish_step(path, "data")
    _dump_json(path / "recordings.json", recordings)
    _finish_step(path, "recordings.json")
    info = {
        "format": _STORE_FORMAT,
        "dtype": code,
        "data_file": data_file,
        "sfreq": sfreq,
        "n_recordings": len(recordings),
        "n_windows": len(index),
        "n_recordings_read": read,
        "n_recordings_skipped": len(skipped),
        "skipped": skipped,
        "clipped_samples": clipped,
        "preprocessing": [{"steps": k, "recordings": n} for k, n in preprocessing.items()],
        "build": build,
    }
    _dump_json(path / "info.json", info)
    _finish_step(path, "info.json")
    with atomic_write(path / "index.npz", "wb") as f:
        np.savez(
            f,
            index=index,
            recordings=np.asarray(shapes, dtype=np.int64),
            scales=np.asarray(scales, dtype=np.float64),
        )
    _finish_step(path, "index.npz")
    # the data, recordings.json, info.json and index.npz are on the disk (each written
    # file flushed, and the folder after each rename): the journal can go
    for name in (_BUILD, _JOURNAL):
        (path / name).unlink(missing_ok=True)
        _finish_step(path, name)
    skipped_text = f", {len(skipped)} skipped (listed in info.json)" if skipped else ""
    logger.info(
        "Stored %d windows of %d recordings in %s (%s)%s.",
        len(index), len(recordings), path, np.dtype(code).name, skipped_text,
    )  # fmt: skip
    return path
