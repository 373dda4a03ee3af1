"""The building of a window store (:mod:`.store`): preparing recordings, in worker
processes if asked, and its progress.

:func:`~braindecode_pars.store.write.write_window_store` runs a build; this module
holds what it is made of: the data types and their encoding (:func:`float16_scale`),
the units of work of its input (a stream's recordings, which workers can take, or
windows in memory) and their preparation (EEG channels read, encoded), the ordered
results of a process pool (whose workers :mod:`.workers` starts and ends) and
the progress with its ETA. The journal that makes a build resumable, and the build's
errors, are :mod:`.journal`'s. The layout and the resume protocol are described
in :mod:`.store`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from braindecode.datasets import BaseConcatDataset
from tqdm.auto import tqdm

from braindecode_pars._util.channels import describe, eeg_picks, read_float32
from braindecode_pars.store._workers import _end_pool, _pool, _warm, _worker_context

logger = logging.getLogger(__name__)

#: The data types of a store: ``dtype`` name -> numpy's little-endian code.
STORE_DTYPES = {"float32": "<f4", "float16": "<f2"}
#: The data file of each data type.
DATA_FILES = {"<f4": "data.f32", "<f2": "data.f16"}
#: A float16 store scales a recording so that its largest absolute value is below this.
_FLOAT16_PEAK = 2.0**14
#: Whether the writing process prepares units itself while the workers start.
PARENT_HELPS = True
#: Seconds between two progress lines in a log file (no terminal to draw a bar on).
PROGRESS_SECONDS = 30.0


def float16_scale(array):
    """The power of two that a float16 store multiplies ``array`` by (see the module).

    Its largest finite absolute value times the scale lies in [2**13, 2**14); an
    array of zeros (or of no finite value) keeps scale 1.
    """
    finite = np.abs(array[np.isfinite(array)])
    peak = float(finite.max()) if finite.size else 0.0
    if peak == 0.0:
        return 1.0
    return float(2.0 ** np.clip(np.ceil(np.log2(_FLOAT16_PEAK / peak)) - 1, -126, 126))


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


def _preprocessing_text(ds):
    """The preprocessing braindecode recorded on windows ``ds`` (``raw_preproc_kwargs``),
    in words: ``"resample(sfreq=100.0); _band_pass(l_freq=0.3, h_freq=45.0)"``, the
    steps that change nothing (``load_data``, ``pick(picks='all')``) and ``verbose``
    left out; None when braindecode recorded none."""
    steps = getattr(ds, "raw_preproc_kwargs", None)
    if not steps:
        return None
    words = []
    for step in steps:
        fn = str(step.get("fn", "?")).rsplit(".", 1)[-1]
        kwargs = {k: v for k, v in (step.get("kwargs") or {}).items() if k != "verbose"}
        if fn == "load_data" or (fn == "pick" and kwargs.get("picks") == "all"):
            continue
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        words.append(f"{fn}({args})")
    return "; ".join(words) or None


def _prepare_dataset(ds, what, code):
    """One windows dataset as the store holds it: a dict of its data and metadata.

    A recording holding NaN samples is refused (``ValueError`` counting them): one
    NaN in a batch makes every weight NaN at the optimiser's first step.
    """
    raw = getattr(ds, "raw", None)
    if raw is None or getattr(ds, "crop_inds", None) is None:
        raise ValueError(
            f"{what} is not windows of a continuous recording (epochs-based "
            "windows?): window it with create_fixed_length_windows or "
            "create_windows_from_events (use_mne_epochs=False)."
        )
    picks = eeg_picks(raw.info, what)
    array = read_float32(raw, picks)
    nan = int(np.count_nonzero(np.isnan(array)))
    if nan:
        raise ValueError(
            f"{what} holds {nan} NaN samples (of {array.size}); pretraining on them makes "
            "every weight NaN at the first step. Repair or remove it, or skip it "
            "(on_error='skip', the command's --on-error skip)."
        )
    data, scale, clipped = _encode(array, code)
    del array
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
        "preprocessing": _preprocessing_text(ds),
    }


def _task_name(task, position):
    """A name of a stream's recording before it is read: its file, else its position."""
    read = task[0]
    args = getattr(read, "args", ())
    if args and isinstance(args[0], str | Path):
        return str(args[0])
    return f"Recording {position}"


class _NotWindows(TypeError):
    """An item of the windows given is not braindecode windows (the caller's mistake,
    raised whatever ``on_error``; a reader's own ``TypeError`` is a recording's fault)."""


def _fingerprint(windows):
    """What identifies windows in memory without reading their data: a hash of each
    recording's description, number of windows and number of samples."""
    parts = []
    for ds in windows.datasets:
        description = getattr(ds, "description", None)
        description = {} if description is None else description.to_dict()
        raw = getattr(ds, "raw", None)
        parts.append([description, len(ds), getattr(raw, "n_times", None)])
    text = json.dumps(parts, default=str, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()


def _check_windows(windows, position):
    """``windows`` (an item of the windows given), or :class:`_NotWindows`."""
    if not isinstance(windows, BaseConcatDataset):
        raise _NotWindows(
            f"Item {position} of 'windows' must be braindecode windows (a "
            f"BaseConcatDataset), but got {type(windows).__name__}."
        )
    return windows


def _prepare(unit, position, code, on_error):
    """The store's part of one unit (a stream's task, or windows in memory).

    Returns ``{"recordings": [...]}`` or, when the unit cannot be stored and
    ``on_error`` is ``"skip"``, ``{"skipped": [{"recording", "reason"}], "read": bool}``;
    windows in memory add ``"source"``, their :func:`_fingerprint`. Runs in a worker
    process for a stream's task when ``jobs > 1``.
    """
    kind, payload = unit
    name = _task_name(payload, position) if kind == "task" else None
    read = kind != "task"
    source = _fingerprint(_check_windows(payload, position)) if kind == "windows" else None
    done = {} if source is None else {"source": source}
    try:
        if kind == "task":
            windows = _task_windows(*payload)
            read = True
            if windows is None:
                reason = "no window (shorter than one window, see the warnings)"
                return {"skipped": [{"recording": name, "reason": reason}], "read": True}
        else:
            windows = payload
        _check_windows(windows, position)
        recordings = []
        for ds in windows.datasets:
            what = describe(ds, position)
            if name is not None:
                what = f"{what} of '{name}'" if what.startswith("Recording") else what
            recordings.append(_prepare_dataset(ds, what, code))
        return dict(done, recordings=recordings, pid=os.getpid())
    except _NotWindows:
        raise
    except Exception as err:  # readers raise ValueError, OSError, RuntimeError, TypeError...
        if on_error == "raise":
            if name is None:  # windows in memory: the message names the recording
                raise
            raise ValueError(
                f"Cannot store '{name}' ({type(err).__name__}: {err}). Remove it, or pass "
                "on_error='skip' (the command's --on-error skip) to leave out what cannot "
                "be stored, each listed with its reason in the store's info.json."
            ) from err
        what = name or f"Item {position}"
        return dict(done, skipped=[{"recording": what, "reason": f"{type(err).__name__}: {err}"}],
                    read=read)  # fmt: skip


def _task_windows(read, windower, description):
    """The windows of one task of a RecordingStream (None: no window)."""
    from braindecode_pars.io.windowing import RecordingStream

    return RecordingStream.task_windows(read, windower, description)


def _units(windows):
    """The units of ``windows``: (iterable of ("task" | "windows", payload), count or None,
    names for the source's fingerprint or None, whether workers can take them)."""
    from braindecode_pars.io.windowing import RecordingStream

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


def _prepare_alone(unit, position, context, ignored, code, on_error):
    """Prepare ``unit`` in a worker of its own, after a worker died while it and others
    were prepared: the unit that kills its worker again is named, and skipped or
    refused per ``on_error``, so that a resumed build does not die there again."""
    pool = _pool(1, context, ignored)
    try:
        return pool.submit(_prepare, unit, position, code, on_error).result()
    except concurrent.futures.process.BrokenProcessPool:
        name = _task_name(unit[1], position)
        reason = (
            "its worker process died while preparing it (killed, e.g. by the "
            "out-of-memory killer, or crashed)"
        )
        if on_error == "raise":
            raise ValueError(
                f"Cannot store '{name}': {reason}. Remove it, or pass on_error='skip' (the "
                "command's --on-error skip) to leave out what cannot be stored, each listed "
                "with its reason in the store's info.json."
            ) from None
        return {"skipped": [{"recording": name, "reason": reason}], "read": False}
    finally:
        _end_pool(pool)


def _results(units, start, jobs, parallel, code, on_error, ignored=()):
    """``(position, prepared)`` of every unit from ``start`` on, in their order.

    With ``jobs > 1`` (and units that workers can take) ``jobs`` processes prepare
    the units, at most ``2 * jobs`` ahead of the one written; the order of the
    results is the units' whatever the order they finish in. Until the first worker
    has started (where workers start by the forkserver, in seconds: it imports the
    libraries once) this process prepares the units itself instead of waiting
    (``PARENT_HELPS``). The workers leave the ``ignored`` signals, end with this
    process, and are ended (not waited for) when the results stop before the last
    unit. A worker that dies (``BrokenProcessPool``) is replaced, and the units in
    flight are prepared again each alone (:func:`_prepare_alone`).
    """
    if jobs == 1 or not parallel:
        for position, unit in enumerate(units):
            if position >= start:
                yield position, _prepare(unit, position, code, on_error)
            del unit  # let the recording go before the next one is read
        return
    context = _worker_context(preload=__name__)  # the module of the workers' task
    pool = _pool(jobs, context, ignored)
    warming = []  # the workers' first tasks
    if context.get_start_method() == "fork":  # workers start in milliseconds: wait
        warming.extend(pool.submit(_warm) for _ in range(jobs))
        concurrent.futures.wait(warming)
    else:  # submitted by a thread, since starting them blocks for seconds

        def launch():
            try:
                warming.extend(pool.submit(_warm) for _ in range(jobs))
            except RuntimeError:  # the build ended before the workers started
                pass

        threading.Thread(target=launch, daemon=True, name="store-workers").start()
    running, submitted, finished = collections.deque(), False, False

    def collect():
        """The next results and the pool to go on with (a new one after a death)."""
        position, unit, future = running[0]
        try:
            prepared = future.result()
        except concurrent.futures.process.BrokenProcessPool:
            in_flight = list(running)
            running.clear()
            _end_pool(pool)
            logger.warning(
                "A worker process died while %d recordings were prepared (from %s); "
                "preparing each of them again alone.",
                len(in_flight), _task_name(unit[1], position),
            )  # fmt: skip
            done = [(p, _prepare_alone(u, p, context, ignored, code, on_error))
                    for p, u, _ in in_flight]  # fmt: skip
            return done, _pool(jobs, context, ignored)
        running.popleft()
        return [(position, prepared)], pool

    try:
        for position, unit in enumerate(units):
            if position < start:
                continue
            helps = PARENT_HELPS and not submitted
            if helps and not any(f.done() for f in list(warming)):
                yield position, _prepare(unit, position, code, on_error)
                continue
            submitted = True
            future = pool.submit(_prepare, unit, position, code, on_error)
            running.append((position, unit, future))
            del unit, future  # a stream's task is small: kept to prepare it again
            while len(running) > 2 * jobs or (running and running[0][2].done()):
                done, pool = collect()
                yield from done
        while running:
            done, pool = collect()
            yield from done
        finished = True
    finally:
        for _, _, future in running:
            future.cancel()
        if submitted and finished:
            pool.shutdown(wait=True, cancel_futures=True)
        elif submitted:  # stopped (a stop signal, an error): its units are prepared again
            _end_pool(pool)
        # else every unit was prepared here, and the workers, still starting, stop on
        # their own once started (the pool is let go without waiting for them)


class _Progress:
    """Progress of a build with an ETA: a tqdm bar on a terminal, else a log line every
    :data:`PROGRESS_SECONDS` (a log file stays one short line per report)."""

    def __init__(self, total, done):
        self.total, self.start_done, self.done = total, done, done
        self.started = self.last = time.monotonic()
        from braindecode_pars._util.logs import shows_bars

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
