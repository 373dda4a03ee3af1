"""A braindecode dataset, in memory or saved with its ``save``, as windows for a store.

braindecode users hold their recordings as a ``BaseConcatDataset`` of ``RawDataset``
(preprocessed with ``braindecode.preprocessing.preprocess``) or of windows, and keep
them on disk with ``dataset.save(folder)``, which ``braindecode.datautil.
load_concat_dataset`` reads back. :func:`braindecode_windows` turns either kind into
the windows that :func:`~braindecode_pars.store.write_window_store` takes, and
:func:`load_saved_windows` does it for a saved folder (``braindecode-pars store
--braindecode-dataset FOLDER``). Nothing is preprocessed again: the recordings are
stored at their own rate and with their own filters.
"""

from __future__ import annotations

import logging
from pathlib import Path

from braindecode_pars._util.logs import plural
from braindecode_pars.io.windowing import _fixed_windows, _long_enough, _window_size

logger = logging.getLogger(__name__)


def braindecode_windows(dataset, window_seconds=10.0, stride_seconds=5.0):
    """Windows of a braindecode ``BaseConcatDataset``: its raws cut, or its windows as given.

    Parameters
    ----------
    dataset : braindecode.datasets.BaseConcatDataset
        Of ``RawDataset`` (continuous recordings, preprocessed or not) or of windows
        datasets (``create_fixed_length_windows``, ``create_windows_from_events``).
    window_seconds : float
        Length of the windows cut from raws, in seconds.
    stride_seconds : float | None
        Step between their starts; None: ``window_seconds`` (no overlap).

    Returns
    -------
    windows : braindecode.datasets.BaseConcatDataset
        Windows of every recording at least one window long (shorter ones are left
        out with a logged warning), exactly those of braindecode's
        ``create_fixed_length_windows`` with ``on_last_window="drop"``; a dataset of
        windows is returned as it is, ``window_seconds`` and ``stride_seconds`` unused.
    """
    from braindecode.datasets import BaseConcatDataset

    if not isinstance(dataset, BaseConcatDataset):
        raise TypeError(
            "'dataset' must be a braindecode BaseConcatDataset of raws or of windows, but "
            f"got {type(dataset).__name__}."
        )
    if not dataset.datasets:
        raise ValueError("'dataset' holds no recording.")
    windowed = [hasattr(ds, "windows") or hasattr(ds, "crop_inds") for ds in dataset.datasets]
    if all(windowed):
        logger.info("The dataset holds windows: stored as they are (--window-seconds unused).")
        return dataset
    if any(windowed) or not all(hasattr(ds, "raw") for ds in dataset.datasets):
        kinds = sorted({type(ds).__name__ for ds in dataset.datasets})
        raise ValueError(
            "'dataset' must hold either raws (RawDataset) or windows, not both, but got "
            f"{', '.join(kinds)}."
        )
    rates = sorted({float(ds.raw.info["sfreq"]) for ds in dataset.datasets})
    if len(rates) > 1:
        raise ValueError(
            f"The recordings of 'dataset' must share one sampling rate, but got {rates} Hz; "
            "resample them first (braindecode.preprocessing.Resample)."
        )
    size, stride = _window_size(window_seconds, stride_seconds, rates[0])
    kept = _long_enough(dataset.datasets, size, window_seconds)
    if not kept:
        raise ValueError(
            f"No recording of 'dataset' is at least window_seconds={window_seconds} s long "
            f"({size} samples at {rates[0]} Hz)."
        )
    return _fixed_windows(kept, size, stride, preload=False)  # read when stored


def load_saved_windows(path, window_seconds=10.0, stride_seconds=5.0):
    """Windows of a braindecode dataset saved with ``BaseConcatDataset.save(path)``.

    The recordings are read with ``braindecode.datautil.load_concat_dataset(path,
    preload=False)`` (kept on disk; a store reads each in chunks) and cut by
    :func:`braindecode_windows`. A description value that is its recording's header
    identity (the patient code or a name MNE read from its header, as
    ``load_recordings`` put the code into ``subject`` before ``subject_from``) is
    replaced by a pseudonym (``subject-1``...; one per value, so that a grouping
    holds), with a warning, and the header's identity is dropped from every
    recording's ``info``; the other description columns are kept as they are (in a
    store's ``recordings.json``; a run and its model card count recordings and
    people, never list them).

    Parameters
    ----------
    path : str | Path
        The folder that ``save`` wrote (numbered sub-folders, one per recording).
    window_seconds, stride_seconds : float
        As :func:`braindecode_windows` takes them.

    Returns
    -------
    windows : braindecode.datasets.BaseConcatDataset
    """
    from braindecode.datautil import load_concat_dataset

    path = Path(path)
    if not path.is_dir() or not (path / "0").is_dir():
        raise FileNotFoundError(
            f"'{path}' is not a braindecode dataset saved with BaseConcatDataset.save (a "
            "folder holding one numbered sub-folder per recording, '0', '1'...)."
        )
    dataset = load_concat_dataset(path, preload=False)
    _pseudonymise_header_identities(dataset, path)
    return braindecode_windows(dataset, window_seconds, stride_seconds)


#: The fields of MNE's ``subject_info`` that name a person.
_NAMING_FIELDS = ("his_id", "first_name", "middle_name", "last_name")


def _pseudonymise_header_identities(dataset, path):
    """Replace, in place, the description values of ``dataset`` (just read from ``path``)
    that are its recordings' header identities (the patient code or a name of
    ``raw.info["subject_info"]``, as ``load_recordings`` put the code into ``subject``
    before ``subject_from``) by pseudonyms, ``subject-1``, ``subject-2``... in the order
    they first come (one value, one pseudonym: a grouping is kept), say so in one
    warning, and drop those identities from every recording's ``info``."""
    from braindecode_pars.io.recordings import _drop_identity

    pseudonyms, columns, recordings = {}, set(), 0
    for ds in dataset.datasets:
        info = ds.raw.info.get("subject_info") or {}
        names = {
            str(info[k]).strip().lower()
            for k in _NAMING_FIELDS
            if info.get(k) is not None and str(info[k]).strip() not in ("", "X", "x")
        }
        found = {k: v for k, v in ds.description.items() if str(v).strip().lower() in names}
        for key, value in found.items():
            name = pseudonyms.setdefault(str(value), f"subject-{len(pseudonyms) + 1}")
            ds.description[key] = name
            columns.add(key)
        recordings += bool(found)
        _drop_identity(ds.raw)
    if recordings:
        logger.warning(
            "%s of '%s' held its header's patient identity in its description (%s): "
            "replaced by pseudonyms (subject-1...; one per person, the grouping kept), "
            "so that the store names no one.",
            plural(recordings, "recording"), path, ", ".join(sorted(columns)),
        )  # fmt: skip
