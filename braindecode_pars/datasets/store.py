"""Windows stored once, memory-mappable: every recording in one float32 file, plus an index.

A pretraining corpus is preprocessed once (braindecode ``preprocess``), windowed, and
written with :func:`write_window_store`, one recording at a time when it comes from a
:class:`~braindecode_pars.datasets.windowing.RecordingStream` (``lazy=True`` readers);
:meth:`SingleChannelWindows.from_store` then memory-maps it, so that processes and
data-loading workers share the operating system's page cache instead of holding
copies, and a crop is a slice of the mapped file.

Layout of a store folder (format 2)::

    store/
      data.f32          the EEG channels of every recording, float32 little-endian,
                        one recording after the other, each (n_chans, n_samples), C order
      index.npz         windows: (n_windows, 3) recording, start, stop;
                        recordings: (n_recordings, 3) offset (samples), n_chans, n_samples
      info.json         format, sfreq, numbers of recordings and windows
      recordings.json   channel names and description of every recording

One data file, whatever the number of recordings, so that reading a store of tens
of thousands of recordings opens one file and makes one memory map.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

#: Version of the layout written by :func:`write_window_store`.
STORE_FORMAT = 2
#: Bytes of float64 samples read from a recording at a time while writing it.
_CHUNK_BYTES = 1 << 24


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


def _chunks(windows):
    """The windows as an iterable of BaseConcatDatasets (one, or a stream of them)."""
    if isinstance(windows, BaseConcatDataset):
        return [windows]
    if isinstance(windows, Iterable) and not isinstance(windows, np.ndarray | str | bytes | Path):
        return windows
    raise TypeError(
        "'windows' must be braindecode windows (a BaseConcatDataset) or an iterable of "
        "them, one recording at a time (a RecordingStream, a generator), but got "
        f"{type(windows).__name__}."
    )


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


def _write_recording(f, raw, picks, offset):
    """Write the ``picks`` of ``raw`` at sample ``offset`` of the data file, float32 LE."""
    n_times = raw.n_times
    for start, block in _float32_blocks(raw, picks):
        for c, row in enumerate(block.astype("<f4", copy=False)):
            f.seek(4 * (offset + c * n_times + start))
            f.write(row.tobytes())


def _clear(path):
    """Remove what a store writes in ``path`` (index first: the store is then incomplete)."""
    for name in ("index.npz", "data.f32", "data.tmp", "info.json", "recordings.json"):
        if (path / name).exists():
            (path / name).unlink()


def _dump_json(path, content):
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
        json.dump(content, f, default=str)
    os.replace(tmp, path)


class _Written:
    """What a store writer has written so far: shapes, index and descriptions."""

    def __init__(self):
        self.rows, self.shapes, self.recordings, self.sfreq, self.offset = [], [], [], None, 0

    def add(self, f, ds):
        """Write the EEG channels of one windows dataset ``ds`` to the open data file."""
        rec = len(self.recordings)
        what = _describe(ds, rec)
        raw = getattr(ds, "raw", None)
        if raw is None or getattr(ds, "crop_inds", None) is None:
            raise ValueError(
                f"{what} is not windows of a continuous recording (epochs-based "
                "windows?): window it with create_fixed_length_windows or "
                "create_windows_from_events (use_mne_epochs=False)."
            )
        self.sfreq = _check_same_sfreq(self.sfreq, raw.info["sfreq"], what)
        picks = _eeg_picks(raw.info, what)
        _write_recording(f, raw, picks, self.offset)
        crops = np.asarray(ds.crop_inds, dtype=np.int64).reshape(-1, 3)
        self.rows.append(np.column_stack([np.full(len(crops), rec, np.int64), crops[:, 1:]]))
        self.shapes.append((self.offset, len(picks), raw.n_times))
        self.offset += len(picks) * raw.n_times
        description = {
            k: (v.item() if hasattr(v, "item") else v) for k, v in ds.description.items()
        }
        self.recordings.append(
            {"ch_names": [raw.ch_names[p] for p in picks], "description": description}
        )

    def add_all(self, f, windows):
        """Write every windows dataset of ``windows`` (a BaseConcatDataset)."""
        for ds in windows.datasets:
            self.add(f, ds)

    def index(self):
        return np.concatenate(self.rows) if self.rows else np.zeros((0, 3), np.int64)


def write_window_store(windows, path, overwrite=False):
    """Write braindecode windows to a store folder, one recording at a time.

    Every recording's EEG channels (MNE type ``eeg``, bad channels left out) are
    written once, as float32, whatever the number of its windows; a recording that
    is not preloaded is read from its file in chunks. Given an iterable (a
    :class:`~braindecode_pars.datasets.windowing.RecordingStream` from a reader with
    ``lazy=True``, a generator), each item is written and then let go: memory holds
    one recording at a time, plus the index. The data file is written under a
    temporary name and the index last, so an interrupted write leaves no store that
    looks complete.

    Parameters
    ----------
    windows : braindecode BaseConcatDataset | iterable of BaseConcatDataset
        Windows from ``create_windows_from_events`` or ``create_fixed_length_windows``
        (whose recordings are ``mne.io.Raw``, preloaded or not), or an iterable
        yielding such windows, e.g. one recording at a time.
    path : str | Path
        The store folder.
    overwrite : bool
        Replace an existing store.

    Returns
    -------
    path : Path

    Examples
    --------
    >>> from braindecode_pars.datasets import load_recordings
    >>> stream = load_recordings("my_study/**/*.edf", lazy=True)  # doctest: +SKIP
    >>> write_window_store(stream, "store/")  # doctest: +SKIP
    """
    path = Path(path)
    if (path / "index.npz").exists() and not overwrite:
        raise FileExistsError(f"A window store exists at '{path}'; pass overwrite=True.")
    chunks = _chunks(windows)
    path.mkdir(parents=True, exist_ok=True)
    _clear(path)
    written = _Written()
    total = len(chunks) if hasattr(chunks, "__len__") else None
    # no enumerate() or tqdm() around the iterable: either keeps a reference to the
    # previous recording while the next one is read
    with open(path / "data.tmp", "wb") as f, tqdm(total=total, desc="writing", leave=False) as bar:
        for chunk in chunks:
            if not isinstance(chunk, BaseConcatDataset):
                raise TypeError(
                    f"Item {bar.n} of 'windows' must be braindecode windows (a "
                    f"BaseConcatDataset), but got {type(chunk).__name__}."
                )
            written.add_all(f, chunk)
            del chunk  # let the recording go before the next one is read
            bar.update()
    index, recordings, sfreq = written.index(), written.recordings, written.sfreq
    if len(index) == 0:
        (path / "data.tmp").unlink()
        raise ValueError("'windows' holds no window: nothing to write.")
    os.replace(path / "data.tmp", path / "data.f32")
    _dump_json(path / "recordings.json", recordings)
    _dump_json(
        path / "info.json",
        {
            "format": STORE_FORMAT,
            "dtype": "<f4",
            "sfreq": sfreq,
            "n_recordings": len(recordings),
            "n_windows": len(index),
        },
    )
    with open(path / "index.tmp.npz", "wb") as f:
        np.savez(f, index=index, recordings=np.asarray(written.shapes, dtype=np.int64))
    os.replace(path / "index.tmp.npz", path / "index.npz")
    logger.info("Wrote %d windows of %d recordings to %s.", len(index), len(recordings), path)
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
        ``sfreq``, and ``recordings`` (a list of dicts with ``ch_names`` and
        ``description``) when ``descriptions`` is True.
    """
    path = Path(path)
    if not (path / "index.npz").is_file():
        raise FileNotFoundError(f"No complete window store at '{path}' (index.npz is missing).")
    with open(path / "info.json") as f:
        info = json.load(f)
    arrays = np.load(path / "index.npz")
    index = arrays["index"]
    if info.get("format") != STORE_FORMAT:
        raise ValueError(
            f"The window store at '{path}' has format {info.get('format', 1)}, not "
            f"{STORE_FORMAT}: write it again with write_window_store (or "
            "'braindecode-pars store')."
        )
    data = np.memmap(path / "data.f32", dtype=info["dtype"], mode="r")
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
