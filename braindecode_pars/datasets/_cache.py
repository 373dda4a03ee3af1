"""Labelled windows prepared once, one recording at a time, and read back lazily from disk.

The fine-tuning recipes (``load_ysyw``, ``load_tuab``, ``load_tusz``, ``load_eesm17``)
take a ``cache_dir``: each recording is then read, preprocessed, windowed and written
(braindecode's ``BaseConcatDataset.save`` layout, the signal as float32 FIF) before
the next is read, and the windows are returned by braindecode's
``load_concat_dataset(preload=False)``: windows read from disk as they are used,
whatever the size of the dataset. A later call with the same settings reads the same
folder without preparing anything.

Layout of a cache folder::

    cache/
      0/ 1/ ...      one recording each: 0-raw.fif (float32), metadata_df.pkl,
                     description.json, ... (braindecode's layout)
      cache.json     the settings it was made with and every recording's description,
                     written last (a folder without it is an unfinished cache)
"""

from __future__ import annotations

import json
import logging
import shutil
import warnings
from pathlib import Path

import pandas as pd
from braindecode.datautil.serialization import load_concat_dataset

from braindecode_pars._util.atomic import write_atomic

logger = logging.getLogger(__name__)

_MARKER = "cache.json"


def _normalised(settings):
    """``settings`` as they read back from JSON (tuples become lists...)."""
    return json.loads(json.dumps(settings, default=str))


def _load(cache_dir, saved):
    n = saved["n_recordings"]
    with warnings.catch_warnings():  # braindecode's read_json call warns under pandas 3
        warnings.filterwarnings("ignore", message="The 'convert_dates' keyword")
        windows = load_concat_dataset(cache_dir, preload=False, ids_to_load=list(range(n)))
    # description.json loses the types of its values ("001" reads back as 1): restore them
    windows.set_description(pd.DataFrame(saved["descriptions"]), overwrite=True)
    return windows


def _cached_windows(stream, cache_dir, settings):
    """The windows of ``stream`` written once to ``cache_dir``, read back lazily.

    Parameters
    ----------
    stream : RecordingStream
        The recordings, read, preprocessed and windowed one at a time.
    cache_dir : str | Path
        The cache folder: empty or missing (it is then filled), or holding a cache
        made with the same ``settings`` (it is then read as it is).
    settings : dict
        What the windows depend on (files, preprocessing, windowing), JSON-serialisable;
        a folder made with other settings is refused.

    Returns
    -------
    windows : braindecode BaseConcatDataset
        Windows whose recordings are not preloaded (``raw.preload`` is False).
    """
    cache_dir = Path(cache_dir)
    settings = _normalised(settings)
    marker = cache_dir / _MARKER
    if marker.is_file():
        saved = json.loads(marker.read_text())
        if saved["settings"] != settings:
            differ = sorted(
                k
                for k in set(settings) | set(saved["settings"])
                if settings.get(k) != saved["settings"].get(k)
            )
            raise FileExistsError(
                f"The cache folder 'cache_dir'='{cache_dir}' holds windows made with other "
                f"settings (they differ in {differ}); pass another 'cache_dir' or delete "
                "this one."
            )
        logger.info("Reading %d cached recordings from %s.", saved["n_recordings"], cache_dir)
        return _load(cache_dir, saved)
    if cache_dir.is_dir():
        foreign = [p.name for p in cache_dir.iterdir() if not (p.is_dir() and p.name.isdigit())]
        if foreign:
            raise FileExistsError(
                f"The cache folder 'cache_dir'='{cache_dir}' holds files that are not a "
                f"cache ({sorted(foreign)[:5]}); pass an empty or new folder."
            )
        for unfinished in cache_dir.iterdir():  # a write that was interrupted: start again
            shutil.rmtree(unfinished)
    cache_dir.mkdir(parents=True, exist_ok=True)
    n, descriptions = 0, []
    for windows in stream:
        with warnings.catch_warnings():  # braindecode warns of the recordings written before
            warnings.filterwarnings("ignore", message="Chosen directory")
            windows.save(str(cache_dir), overwrite=True, offset=n)
        n += len(windows.datasets)
        descriptions += [
            {k: (v.item() if hasattr(v, "item") else v) for k, v in ds.description.items()}
            for ds in windows.datasets
        ]
        del windows  # let the recording go before the next one is read
    if n == 0:
        raise ValueError(f"No recording gave a window; nothing was written to '{cache_dir}'.")
    saved = {"settings": settings, "n_recordings": n, "descriptions": descriptions}
    write_atomic(marker, json.dumps(saved, default=str))
    logger.info("Wrote %d recordings' windows to %s.", n, cache_dir)
    return _load(cache_dir, _normalised(saved))
