"""Reading a window store (:mod:`.store`): memory-mapped, its size checked, summarised.

:func:`read_window_store` maps a complete store's data file, checked against its index
first (:func:`_check_complete`, which a build runs at its end too);
:func:`store_summary` counts what it holds (recordings, channel-hours, people). The
layout is described in :mod:`.store`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from braindecode_pars.store._build import DATA_FILES
from braindecode_pars.store.errors import StoreDataLostError

#: Versions :func:`read_window_store` opens (2: float32 stores of versions before 0.2).
READABLE_FORMATS = (2, 3)


def _data_bytes(shapes, code):
    """Bytes of the data of recordings ``(offset, n_chans, n_times)`` in dtype ``code``."""
    end = max((offset + n_chans * n_times for offset, n_chans, n_times in shapes), default=0)
    return end * np.dtype(code).itemsize


def _check_complete(path, info=None, shapes=None):
    """Refuse (:class:`StoreDataLostError`) a store whose data file is not the size its
    index describes."""
    if info is None:
        info = json.loads((path / "info.json").read_text())
    if shapes is None:
        shapes = np.load(path / "index.npz")["recordings"].tolist()
    data_file = path / info.get("data_file", DATA_FILES.get(info["dtype"], "data.f32"))
    size = data_file.stat().st_size if data_file.exists() else None
    expected = _data_bytes(shapes, info["dtype"])
    if size != expected:
        held = "no such file" if size is None else f"{size} bytes"
        raise StoreDataLostError(
            f"The window store at '{path}' is damaged: its index describes {expected} bytes "
            f"of data but {data_file.name} holds {held}. Write it again with "
            "write_window_store(..., overwrite=True) (the command's --overwrite)."
        )


def read_window_store(path, descriptions=True):
    """Memory-map a store: returns (recordings, index, info).

    Parameters
    ----------
    path : str | Path
        The store folder.
    descriptions : bool
        Read the channel names and description of every recording into
        ``info["recordings"]``; False leaves them on disk (what pretraining does). A
        store written before ``subject_from`` whose descriptions hold EDF headers'
        patient codes is named in a warning, once
        (:func:`~braindecode_pars.store.identity.warn_header_identities`).

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
    _check_complete(path, info, arrays["recordings"].tolist())
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
        from braindecode_pars.store.identity import warn_header_identities

        warn_header_identities(path, info["recordings"])
    return recordings, index, info


def _person(description):
    """Who a recording is from: its description's ``subject`` (unless it names the
    recording itself, ``subject_from="file"``), else the folder of its ``file`` (the
    layout of per-subject folders, e.g. ``subject101/``), else None."""
    subject = description.get("subject")
    if subject is not None and description.get("subject_from") != "file":
        return str(subject)
    file = description.get("file")
    if file:
        return Path(str(file)).parent.name or None
    return None


def store_summary(path):
    """What a store holds: recordings, channel-hours and people, in all and per dataset.

    Channel-hours count every stored sample of every channel once (overlapping
    windows do not count twice). People are the distinct (dataset, person) pairs, a
    recording's person being its description's ``subject`` or, without one (or with
    one that names the recording itself, ``subject_from="file"``: see
    :func:`~braindecode_pars.io.load_recordings`), the folder of its ``file``;
    recordings with neither are counted in ``unattributed_recordings``.

    Parameters
    ----------
    path : str | Path
        A store folder (:func:`write_window_store`).

    Returns
    -------
    summary : dict
        ``n_recordings``, ``n_windows``, ``hours`` (recording time),
        ``channel_hours``, ``people``, ``unattributed_recordings``, ``people_by``
        (the recordings attributed by ``subject`` and by ``folder``), and
        ``datasets``: the first six keys for each value of the descriptions'
        ``dataset`` (``"?"`` without one).

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
    ...     ds, window_size_samples=1000, window_stride_samples=1000, on_last_window="drop"
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
    per, people_by = {}, {"subject": 0, "folder": 0}
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
            named = description.get("subject") is not None
            basis = "subject" if named and description.get("subject_from") != "file" else "folder"
            people_by[basis] += 1
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
    summary["people_by"] = people_by
    summary["datasets"] = datasets
    for entry in [summary, *datasets.values()]:
        entry["hours"] = round(entry["hours"], 2)
        entry["channel_hours"] = round(entry["channel_hours"], 2)
    return summary
