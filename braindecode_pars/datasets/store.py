"""Windows stored once, memory-mappable: one float32 array per recording plus an index.

A pretraining corpus is preprocessed once (braindecode ``preprocess``), windowed, and
written with :func:`write_window_store`; :meth:`SingleChannelWindows.from_store`
then memory-maps the recordings, so that data-loading workers share the operating
system's page cache instead of holding copies, and a crop is a slice of a mapped file.

Layout of a store folder::

    store/
      recordings/00000.npy ...   (n_chans, n_samples) float32, one per recording
      index.npz                  recording, start, stop of every window
      info.json                  sfreq, channel names and description per recording
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
from braindecode.datasets import BaseConcatDataset
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)


def _atomic_npy(path, array):
    tmp = path.with_name(path.stem + ".tmp.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


def write_window_store(windows, path, overwrite=False):
    """Write braindecode windows (with preloaded recordings) to a store folder.

    Every recording is written once, whatever the number of its windows; each file
    is written whole or not at all, and the index last, so an interrupted write
    leaves no store that looks complete.

    Parameters
    ----------
    windows : braindecode BaseConcatDataset
        Windows from ``create_windows_from_events`` or ``create_fixed_length_windows``
        whose recordings are preloaded.
    path : str | Path
        The store folder.
    overwrite : bool
        Replace an existing store.

    Returns
    -------
    path : Path
    """
    path = Path(path)
    if (path / "index.npz").exists() and not overwrite:
        raise FileExistsError(f"A window store exists at '{path}'; pass overwrite=True.")
    if not isinstance(windows, BaseConcatDataset):
        raise TypeError(
            f"'windows' must be a braindecode BaseConcatDataset, but got {type(windows).__name__}."
        )
    (path / "recordings").mkdir(parents=True, exist_ok=True)
    if (path / "index.npz").exists():
        (path / "index.npz").unlink()
    index, recordings, sfreq = [], [], None
    for rec, ds in enumerate(tqdm(windows.datasets, desc="writing recordings", leave=False)):
        raw = getattr(ds, "raw", None)
        if raw is None or not getattr(raw, "preload", False):
            raise ValueError(
                f"Recording {rec} is not preloaded: window the data with preload=True "
                "(or call raw.load_data()) before writing a store."
            )
        if sfreq is not None and raw.info["sfreq"] != sfreq:
            raise ValueError(
                f"Recordings have different sampling rates ({sfreq} and {raw.info['sfreq']} Hz)."
            )
        sfreq = raw.info["sfreq"]
        _atomic_npy(
            path / "recordings" / f"{rec:05d}.npy", raw.get_data(picks="eeg").astype(np.float32)
        )
        index += [(rec, int(start), int(stop)) for _, start, stop in ds.crop_inds]
        recordings.append(
            {
                "ch_names": [
                    raw.ch_names[i]
                    for i in np.flatnonzero(np.isin(raw.get_channel_types(), ["eeg"]))
                ],
                "description": {
                    k: (v.item() if hasattr(v, "item") else v) for k, v in ds.description.items()
                },
            }
        )
    with open(path / "info.json", "w") as f:
        json.dump({"sfreq": sfreq, "recordings": recordings}, f, default=str)
    index = np.asarray(index, dtype=np.int64)
    tmp = path / "index.tmp.npz"
    np.savez(tmp, index=index)
    os.replace(tmp, path / "index.npz")
    logger.info("Wrote %d windows of %d recordings to %s.", len(index), len(recordings), path)
    return path


def read_window_store(path):
    """Memory-map a store: returns (recordings, index, info).

    ``recordings`` is a list of read-only ``np.memmap`` arrays (n_chans, n_samples),
    ``index`` an (n_windows, 3) array of recording, start and stop.
    """
    path = Path(path)
    if not (path / "index.npz").is_file():
        raise FileNotFoundError(f"No complete window store at '{path}' (index.npz is missing).")
    with open(path / "info.json") as f:
        info = json.load(f)
    recordings = [
        np.load(path / "recordings" / f"{rec:05d}.npy", mmap_mode="r")
        for rec in range(len(info["recordings"]))
    ]
    index = np.load(path / "index.npz")["index"]
    return recordings, index, info
