"""Windows stored once, memory-mappable: every recording in one data file, plus an index.

A pretraining corpus is preprocessed once (braindecode ``preprocess``), windowed, and
written with :func:`write_window_store`, one recording at a time when it comes from a
:class:`~braindecode_pars.datasets.windowing.RecordingStream` (``lazy=True`` readers),
by ``jobs`` worker processes if asked; :meth:`SingleChannelWindows.from_store` then
memory-maps it, so that processes and data-loading workers share the operating
system's page cache instead of holding copies, and a crop is a slice of the mapped file.

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
                        written, samples clipped, and the build's settings
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
not complete) are written, and the build files removed.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import json
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset
from tqdm.auto import tqdm

from .._checks import check_int, check_option

logger = logging.getLogger(__name__)

#: Version of the layout written by :func:`write_window_store`.
STORE_FORMAT = 3
#: Versions :func:`read_window_store` opens (2: float32 stores of versions before 0.2).
READABLE_FORMATS = (2, 3)
#: The data types of a store: ``dtype`` name -> numpy's little-endian code.
STORE_DTYPES = {"float32": "<f4", "float16": "<f2"}
#: The data file of each data type.
DATA_FILES = {"<f4": "data.f32", "<f2": "data.f16"}
#: A float16 store scales a recording so that its largest absolute value is below this.
FLOAT16_PEAK = 2.0**14
#: Bytes of float64 samples read from a recording at a time while writing it.
_CHUNK_BYTES = 1 << 24
#: Files of a build in progress.
_BUILD, _JOURNAL, _PART = "build.json", "journal.jsonl", "data.part"
#: Seconds between two progress lines in a log file (no terminal to draw a bar on).
PROGRESS_SECONDS = 30.0


def _eeg_picks(info, what):
    """Indices of the EEG channels of ``info`` (bad channels left out), or a clear error.

    ``what`` names the recording in the error message.
    """
    picks = mne.pick_types(info, eeg=True, exclude="bads")
    if len(picks) == 0:
        types = sorted(set(info.get_channel_types()))
        raise ValueError(
            f"{what} has no EEG channel (channel types: {types}); pretraining reads EEG "
            "channels only: set the channel types with raw.set_channel_types()."
        )
    return picks


def _describe(ds, position):
    """A short name of a recording for messages: its description, or its position."""
    description = getattr(ds, "description", None)
    if description is None or len(description) == 0:
        return f"Recording {position}"
    items = ", ".join(f"{k}={v}" for k, v in description.to_dict().items())
    return f"Recording {position} ({items})"


def _check_same_sfreq(sfreq, new, what):
    """The common sampling rate so far, or ``ValueError`` naming both rates."""
    if sfreq is not None and abs(sfreq - new) > 1e-6:
        raise ValueError(
            f"Recordings have different sampling rates ({sfreq:g} and {new:g} Hz, the "
            f"latter in {what}); resample them to one rate (the readers' 'sfreq', or "
            "braindecode's Preprocessor('resample', sfreq=...)) before pretraining."
        )
    return float(new)


def _float32_blocks(raw, picks):
    """``(start, block)`` pairs covering the ``picks`` of ``raw``, float32, in time order.

    About ``_CHUNK_BYTES`` of float64 samples are read at a time (from memory, or from
    the file of a recording that is not preloaded), so that converting a recording
    adds little to it.
    """
    step = max(1, _CHUNK_BYTES // (8 * len(picks)))
    for start in range(0, raw.n_times, step):
        stop = min(raw.n_times, start + step)
        yield start, raw.get_data(picks=picks, start=start, stop=stop).astype(np.float32)


def _read_float32(raw, picks):
    """The ``picks`` of ``raw`` as one (n_picks, n_times) float32 array, read in blocks."""
    out = np.empty((len(picks), raw.n_times), dtype=np.float32)
    for start, block in _float32_blocks(raw, picks):
        out[:, start : start + block.shape[1]] = block
    return out


def float16_scale(array):
    """The power of two that a float16 store multiplies ``array`` by (see the module).

    Its largest finite absolute value times the scale lies in [2**13, 2**14); an
    array of zeros (or of no finite value) keeps scale 1.
    """
    finite = np.abs(array[np.isfinite(array)])
    peak = float(finite.max()) if finite.size else 0.0
    if peak == 0.0:
        return 1.0
    return float(2.0 ** np.clip(np.ceil(np.log2(FLOAT16_PEAK / peak)) - 1, -126, 126))


def _encode(array, code):
    """``array`` (float32) as the store's ``code`` bytes: (data, scale, samples clipped)."""
    if code == "<f4":
        return array.astype("<f4", copy=False), 1.0, 0
    scale = float16_scale(array)
    scaled = array * np.float32(scale) if scale != 1.0 else array
    top = float(np.finfo(np.float16).max)
    clipped = int(np.count_nonzero(np.abs(scaled) > top))  # infinities only (NaN compare False)
    if clipped:
        scaled = np.clip(scaled, -top, top)
    return scaled.astype("<f2"), scale, clipped


def _plain(value):
    """A description value as JSON writes it (numpy scalars as Python numbers)."""
    return value.item() if hasattr(value, "item") else value


def _prepare_dataset(ds, what, code):
    """One windows dataset as the store holds it: a dict of its data and metadata."""
    raw = getattr(ds, "raw", None)
    if raw is None or getattr(ds, "crop_inds", None) is None:
        raise ValueError(
            f"{what} is not windows of a continuous recording (epochs-based "
            "windows?): window it with create_fixed_length_windows or "
            "create_windows_from_events (use_mne_epochs=False)."
        )
    picks = _eeg_picks(raw.info, what)
    data, scale, clipped = _encode(_read_float32(raw, picks), code)
    crops = np.asarray(ds.crop_inds, dtype=np.int64).reshape(-1, 3)[:, 1:]
    return {
        "what": what,
        "sfreq": float(raw.info["sfreq"]),
        "data": data,
        "scale": scale,
        "clipped": clipped,
        "windows": crops.tolist(),
        "ch_names": [raw.ch_names[p] for p in picks],
        "description": {k: _plain(v) for k, v in ds.description.items()},
    }


def _task_name(task, position):
    """A name of a stream's recording before it is read: its file, else its position."""
    read = task[0]
    args = getattr(read, "args", ())
    if args and isinstance(args[0], str | Path):
        return str(args[0])
    return f"Recording {position}"


def _prepare(unit, position, code, on_error):
    """The store's part of one unit (a stream's task, or windows in memory).

    Returns ``{"recordings": [...]}`` or, when the unit cannot be stored and
    ``on_error`` is ``"skip"``, ``{"skipped": [{"recording", "reason"}], "read": bool}``.
    Runs in a worker process for a stream's task when ``jobs > 1``.
    """
    kind, payload = unit
    name = _task_name(payload, position) if kind == "task" else None
    read = kind != "task"
    try:
        if kind == "task":
            windows = _task_windows(*payload)
            read = True
            if windows is None:
                reason = "no window (shorter than one window, see the warnings)"
                return {"skipped": [{"recording": name, "reason": reason}], "read": True}
        else:
            windows = payload
        if not isinstance(windows, BaseConcatDataset):
            raise TypeError(
                f"Item {position} of 'windows' must be braindecode windows (a "
                f"BaseConcatDataset), but got {type(windows).__name__}."
            )
        recordings = []
        for ds in windows.datasets:
            what = _describe(ds, position)
            if name is not None:
                what = f"{what} of '{name}'" if what.startswith("Recording") else what
            recordings.append(_prepare_dataset(ds, what, code))
        return {"recordings": recordings}
    except TypeError:
        raise
    except Exception as err:  # readers raise ValueError, OSError, RuntimeError...
        if on_error == "raise":
            if name is None:  # windows in memory: the message names the recording
                raise
            raise ValueError(
                f"Cannot store '{name}' ({type(err).__name__}: {err}). Remove it, or pass "
                "on_error='skip' (the command's --on-error skip) to leave out what cannot "
                "be stored, each listed with its reason in the store's info.json."
            ) from err
        what = name or f"Item {position}"
        return {"skipped": [{"recording": what, "reason": f"{type(err).__name__}: {err}"}],
                "read": read}  # fmt: skip


def _task_windows(read, windower, description):
    """The windows of one task of a RecordingStream (None: no window)."""
    from .windowing import RecordingStream

    return RecordingStream._windows(read, windower, description)


def _units(windows):
    """The units of ``windows``: (iterable of ("task" | "windows", payload), count or None,
    names for the source's fingerprint or None, whether workers can take them)."""
    from .windowing import RecordingStream

    if isinstance(windows, RecordingStream):
        tasks = windows.tasks()
        names = [_task_name(t, i) for i, t in enumerate(tasks)]
        return [("task", t) for t in tasks], len(tasks), names, True
    if isinstance(windows, BaseConcatDataset):
        units = [("windows", BaseConcatDataset([ds])) for ds in windows.datasets]
        return units, len(units), None, False
    if isinstance(windows, Iterable) and not isinstance(windows, np.ndarray | str | bytes | Path):
        count = len(windows) if hasattr(windows, "__len__") else None
        return (("windows", chunk) for chunk in windows), count, None, False
    raise TypeError(
        "'windows' must be braindecode windows (a BaseConcatDataset) or an iterable of "
        "them, one recording at a time (a RecordingStream, a generator), but got "
        f"{type(windows).__name__}."
    )


def _worker_start():
    """Worker processes use one thread each: the processes are the parallelism."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[name] = "1"
    logging.getLogger("mne").setLevel(logging.ERROR)


def _results(units, start, jobs, parallel, code, on_error):
    """``(position, prepared)`` of every unit from ``start`` on, in their order.

    With ``jobs > 1`` (and units that workers can take) ``jobs`` processes prepare
    the units, at most ``2 * jobs`` ahead of the one written; the order of the
    results is the units' whatever the order they finish in.
    """
    if jobs == 1 or not parallel:
        for position, unit in enumerate(units):
            if position >= start:
                yield position, _prepare(unit, position, code, on_error)
            del unit  # let the recording go before the next one is read
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if context.get_start_method() == "forkserver":  # workers fork with the imports done
        context.set_forkserver_preload([__name__])
    pending = collections.deque()
    todo = ((p, u) for p, u in enumerate(units) if p >= start)
    with concurrent.futures.ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_worker_start
    ) as pool:
        try:
            for position, unit in todo:
                pending.append((position, pool.submit(_prepare, unit, position, code, on_error)))
                while len(pending) > 2 * jobs or (pending and pending[0][1].done()):
                    done, future = pending.popleft()
                    yield done, future.result()
            while pending:
                done, future = pending.popleft()
                yield done, future.result()
        finally:
            for _, future in pending:
                future.cancel()


class _Progress:
    """Progress of a build with an ETA: a tqdm bar on a terminal, else a log line every
    :data:`PROGRESS_SECONDS` (a log file stays one short line per report)."""

    def __init__(self, total, done):
        self.total, self.start_done, self.done = total, done, done
        self.started = self.last = time.monotonic()
        from ..training.callbacks import shows_bars

        self.bar = None
        if shows_bars(sys.stderr):
            self.bar = tqdm(total=total, initial=done, desc="store", unit="rec", mininterval=1.0)

    def update(self):
        self.done += 1
        if self.bar is not None:
            self.bar.update()
            return
        now = time.monotonic()
        if now - self.last >= PROGRESS_SECONDS:
            self.last = now
            logger.info("store: %s", self.line(now))

    def line(self, now):
        """``120 of 320 recordings (38 %), 1.2 recordings/s, about 2 min 47 s left``."""
        rate = (self.done - self.start_done) / max(now - self.started, 1e-9)
        if self.total is None:
            return f"{self.done} recordings, {rate:.2f} recordings/s"
        left = (self.total - self.done) / rate if rate > 0 else float("inf")
        eta = _eta(left)
        share = 100 * self.done / max(self.total, 1)
        return (
            f"{self.done} of {self.total} recordings ({share:.0f} %), "
            f"{rate:.2f} recordings/s, {eta}"
        )

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _eta(seconds):
    """``about 2 min 47 s left`` (``unknown time left`` before a rate is known)."""
    if not np.isfinite(seconds):
        return "unknown time left"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"about {hours} h {minutes:02d} min left"
    if minutes:
        return f"about {minutes} min {secs:02d} s left"
    return f"about {secs} s left"


def _clear(path):
    """Remove what a store and its build write in ``path`` (index first: the store is then
    incomplete)."""
    names = ("index.npz", *DATA_FILES.values(), "data.tmp", "info.json", "recordings.json",
             _BUILD, _JOURNAL, _PART, "index.tmp.npz")  # fmt: skip
    for name in names:
        if (path / name).exists():
            (path / name).unlink()


def _dump_json(path, content):
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(content, f, default=str)
    os.replace(tmp, path)


class StoreMismatchError(ValueError):
    """A store folder holds a build (or a store) with other settings than those given.

    ``differences`` maps each differing entry to ``(saved, given)``.
    """

    def __init__(self, message, differences):
        super().__init__(message)
        self.differences = differences


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
    them (a line cut by a kill, and data written after the last line, are dropped)."""
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
    if part.exists():
        with open(part, "r+b") as f:
            f.truncate(end * itemsize)
    return entries, end


def _fsync_append(f, data):
    f.write(data)
    f.flush()
    os.fsync(f.fileno())


def write_window_store(
    windows,
    path,
    overwrite=False,
    *,
    dtype="float32",
    jobs=1,
    on_error="raise",
    settings=None,
):
    """Write braindecode windows to a store folder, one recording at a time; resumable.

    Every recording's EEG channels (MNE type ``eeg``, bad channels left out) are
    written once, whatever the number of its windows; a recording that is not
    preloaded is read from its file in chunks. Given a
    :class:`~braindecode_pars.datasets.windowing.RecordingStream` (a reader with
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

    Returns
    -------
    path : Path

    Raises
    ------
    StoreMismatchError
        When ``path`` holds an unfinished build with other settings (the message lists
        them), unless ``overwrite``.
    FileExistsError
        When ``path`` holds a complete store of other (or no) ``settings``, unless
        ``overwrite``.

    Examples
    --------
    >>> from braindecode_pars.datasets import load_recordings
    >>> stream = load_recordings("my_study/**/*.edf", lazy=True)  # doctest: +SKIP
    >>> write_window_store(stream, "store/", jobs=4, dtype="float16")  # doctest: +SKIP
    """
    check_option("dtype", dtype, tuple(STORE_DTYPES))
    check_int("jobs", jobs, 1)
    check_option("on_error", on_error, ("raise", "skip"))
    path = Path(path)
    code = STORE_DTYPES[dtype]
    settings = None if settings is None else json.loads(json.dumps(settings, default=str))
    units, total, names, parallel = _units(windows)
    source = None if names is None else hashlib.sha1("\n".join(names).encode()).hexdigest()
    build = {"format": STORE_FORMAT, "dtype": code, "source": source, "settings": settings}
    if (path / "index.npz").exists() and not overwrite:
        info = json.loads((path / "info.json").read_text())
        if settings is not None and info.get("build") == build:
            for name in (_BUILD, _JOURNAL, _PART):  # left by a build stopped at its end
                (path / name).unlink(missing_ok=True)
            logger.info("The store at %s is complete: nothing to do.", path)
            return path
        raise FileExistsError(f"A window store exists at '{path}'; pass overwrite=True.")
    path.mkdir(parents=True, exist_ok=True)
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
            os.replace(data_file, path / _PART)
    entries, offset = _read_journal(path, np.dtype(code).itemsize)
    sfreq = next((r["sfreq"] for e in entries for r in e.get("recordings", ())), None)
    pre_skipped = [
        {"recording": str(name), "reason": reason}
        for name, reason in getattr(windows, "skipped", ())
    ]
    if entries:
        logger.info("Resuming the store build in %s after %d units.", path, len(entries))
    progress = _Progress(total, len(entries))
    try:
        with open(path / _PART, "ab") as data, open(path / _JOURNAL, "ab") as journal:
            results = _results(units, len(entries), jobs, parallel, code, on_error)
            for position, prepared in results:
                entry = {"unit": position}
                if "skipped" in prepared:
                    entry.update(skipped=prepared["skipped"], read=prepared["read"])
                    for item in prepared["skipped"]:
                        logger.warning("Skipping %s: %s", item["recording"], item["reason"])
                else:
                    entry["recordings"] = []
                    for rec in prepared["recordings"]:
                        try:
                            sfreq = _check_same_sfreq(sfreq, rec["sfreq"], rec["what"])
                        except ValueError as err:
                            if on_error == "raise":
                                raise
                            entry.setdefault("skipped", []).append(
                                {"recording": rec["what"], "reason": str(err)}
                            )
                            continue
                        n_chans, n_times = rec["data"].shape
                        _fsync_append(data, rec["data"].tobytes())
                        meta = {k: rec[k] for k in ("sfreq", "scale", "clipped", "windows",
                                                    "ch_names", "description")}  # fmt: skip
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
                _fsync_append(journal, line.encode())
                entries.append(entry)
                progress.update()
    finally:
        progress.close()
    return _finish(path, entries, pre_skipped, build, code, sfreq)


def _finish(path, entries, pre_skipped, build, code, sfreq):
    """Write the index, info and descriptions of a build's journal; remove the build files."""
    rows, shapes, scales, recordings, skipped = [], [], [], [], list(pre_skipped)
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
    index = np.concatenate(rows) if rows else np.zeros((0, 3), np.int64)
    if len(index) == 0:
        _clear(path)
        detail = f" ({len(skipped)} skipped: {skipped[0]['reason']}...)" if skipped else ""
        raise ValueError(f"'windows' holds no window: nothing to write{detail}.")
    data_file = DATA_FILES[code]
    os.replace(path / _PART, path / data_file)
    _dump_json(path / "recordings.json", recordings)
    info = {
        "format": STORE_FORMAT,
        "dtype": code,
        "data_file": data_file,
        "sfreq": sfreq,
        "n_recordings": len(recordings),
        "n_windows": len(index),
        "n_recordings_read": read,
        "n_recordings_skipped": len(skipped),
        "skipped": skipped,
        "clipped_samples": clipped,
        "build": build,
    }
    _dump_json(path / "info.json", info)
    with open(path / "index.tmp.npz", "wb") as f:
        np.savez(
            f,
            index=index,
            recordings=np.asarray(shapes, dtype=np.int64),
            scales=np.asarray(scales, dtype=np.float64),
        )
    os.replace(path / "index.tmp.npz", path / "index.npz")
    for name in (_BUILD, _JOURNAL):
        (path / name).unlink(missing_ok=True)
    skipped_text = f", {len(skipped)} skipped (listed in info.json)" if skipped else ""
    logger.info(
        "Stored %d windows of %d recordings in %s (%s)%s.",
        len(index), len(recordings), path, np.dtype(code).name, skipped_text,
    )  # fmt: skip
    return path


def read_window_store(path, descriptions=True):
    """Memory-map a store: returns (recordings, index, info).

    Parameters
    ----------
    path : str | Path
        The store folder.
    descriptions : bool
        Read the channel names and description of every recording into
        ``info["recordings"]``; False leaves them on disk (what pretraining does).

    Returns
    -------
    recordings : list of numpy.memmap, shape (n_chans, n_samples)
        Read-only views of the mapped data file, one per recording.
    index : ndarray, shape (n_windows, 3)
        Recording, start and stop of every window.
    info : dict
        ``sfreq``, ``dtype`` (``"<f4"`` or ``"<f2"``: the recordings' data type),
        ``scales`` (one float per recording: a recording divided by its scale is the
        written values; 1 in float32 stores), and ``recordings`` (a list of dicts
        with ``ch_names`` and ``description``) when ``descriptions`` is True.
    """
    path = Path(path)
    if not (path / "index.npz").is_file():
        raise FileNotFoundError(f"No complete window store at '{path}' (index.npz is missing).")
    with open(path / "info.json") as f:
        info = json.load(f)
    arrays = np.load(path / "index.npz")
    index = arrays["index"]
    if info.get("format") not in READABLE_FORMATS:
        raise ValueError(
            f"The window store at '{path}' has format {info.get('format', 1)}, not "
            f"{' or '.join(map(str, READABLE_FORMATS))}: write it again with "
            "write_window_store (or 'braindecode-pars store')."
        )
    data_file = info.get("data_file", DATA_FILES.get(info["dtype"], "data.f32"))
    data = np.memmap(path / data_file, dtype=info["dtype"], mode="r")
    n_recordings = len(arrays["recordings"])
    scales = arrays["scales"] if "scales" in arrays.files else np.ones(n_recordings)
    info["scales"] = np.asarray(scales, dtype=np.float64).tolist()
    recordings = [
        data[offset : offset + n_chans * n_times].reshape(n_chans, n_times)
        for offset, n_chans, n_times in arrays["recordings"].tolist()
    ]
    if descriptions:
        with open(path / "recordings.json") as f:
            info["recordings"] = json.load(f)
    return recordings, index, info


def _person(description):
    """Who a recording is from: its description's ``subject``, else the folder of its
    ``file`` (the layout of per-subject folders, e.g. ``subject101/``), else None."""
    subject = description.get("subject")
    if subject is not None:
        return str(subject)
    file = description.get("file")
    if file:
        return Path(str(file)).parent.name or None
    return None


def store_summary(path):
    """What a store holds: recordings, channel-hours and people, in all and per dataset.

    Channel-hours count every stored sample of every channel once (overlapping
    windows do not count twice). People are the distinct (dataset, person) pairs, a
    recording's person being its description's ``subject`` or, without one, the
    folder of its ``file``; recordings with neither are counted in
    ``unattributed_recordings``.

    Parameters
    ----------
    path : str | Path
        A store folder (:func:`write_window_store`).

    Returns
    -------
    summary : dict
        ``n_recordings``, ``n_windows``, ``hours`` (recording time),
        ``channel_hours``, ``people``, ``unattributed_recordings``, and ``datasets``:
        the same keys for each value of the descriptions' ``dataset`` (``"?"``
        without one).

    Examples
    --------
    >>> import numpy as np, mne
    >>> from braindecode.datasets import BaseConcatDataset, RawDataset
    >>> from braindecode.preprocessing import create_fixed_length_windows
    >>> import pandas as pd, tempfile
    >>> info = mne.create_info(["C3", "C4"], 100.0, "eeg")
    >>> raw = mne.io.RawArray(np.zeros((2, 36000)), info, verbose=False)
    >>> ds = BaseConcatDataset([RawDataset(raw, pd.Series({"subject": 1}))])
    >>> windows = create_fixed_length_windows(
    ...     ds, window_size_samples=1000, window_stride_samples=1000, drop_last_window=True
    ... )
    >>> folder = tempfile.mkdtemp()
    >>> _ = write_window_store(windows, folder, overwrite=True)
    >>> summary = store_summary(folder)
    >>> summary["channel_hours"], summary["people"]
    (0.2, 1)
    """
    path = Path(path)
    recordings, index, info = read_window_store(path)
    sfreq = float(info["sfreq"])
    per = {}
    for rec, meta in zip(recordings, info["recordings"], strict=True):
        description = meta.get("description") or {}
        dataset = str(description.get("dataset", "?"))
        entry = per.setdefault(
            dataset,
            {"n_recordings": 0, "n_windows": 0, "hours": 0.0, "channel_hours": 0.0,
             "people": set(), "unattributed_recordings": 0},
        )  # fmt: skip
        n_chans, n_times = rec.shape
        entry["n_recordings"] += 1
        entry["hours"] += n_times / sfreq / 3600
        entry["channel_hours"] += n_chans * n_times / sfreq / 3600
        person = _person(description)
        if person is None:
            entry["unattributed_recordings"] += 1
        else:
            entry["people"].add(person)
    counts = np.bincount(index[:, 0], minlength=len(recordings))
    for meta, n in zip(info["recordings"], counts, strict=True):
        dataset = str((meta.get("description") or {}).get("dataset", "?"))
        per[dataset]["n_windows"] += int(n)
    datasets = {}
    for name, entry in per.items():
        datasets[name] = dict(entry, people=len(entry["people"]))
    summary = {
        key: sum(d[key] for d in datasets.values())
        for key in ("n_recordings", "n_windows", "hours", "channel_hours", "people",
                    "unattributed_recordings")
    }  # fmt: skip
    summary["datasets"] = datasets
    for entry in [summary, *datasets.values()]:
        entry["hours"] = round(entry["hours"], 2)
        entry["channel_hours"] = round(entry["channel_hours"], 2)
    return summary
