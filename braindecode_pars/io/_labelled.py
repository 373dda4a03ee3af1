"""Labelled windows from a user's own recordings: files to ``X``, ``y``, ``groups``.

:func:`load_labelled_recordings` reads each file's label and subject from its name
(a regular expression with named groups, or a function) or from a table (a CSV or TSV
file, BIDS's ``participants.tsv``, a pandas DataFrame), checks that every file has
them before any recording is read, then reads, preprocesses and windows the files as
:func:`~braindecode_pars.io.load_recordings` does (microvolts, the encoder's
sampling rate) and hands the windows to
:func:`~braindecode_pars.io.windows.read_windows`.
"""

from __future__ import annotations

import inspect
import logging
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from braindecode_pars._util.logs import plural
from braindecode_pars.io.recordings import _load_recordings, find_recordings, load_recordings
from braindecode_pars.io.windows import (
    _people_in_several_groups,
    _split_people_message,
    read_windows,
)

logger = logging.getLogger(__name__)

#: The column of a table that names files, unless told otherwise.
_FILE_COLUMN = "file"
#: Fields (of a pattern or a table) that name a person, whatever ``subject`` names:
#: when ``subject`` names another field, the groups are checked against them.
_PERSON_FIELDS = ("subject", "participant_id", "participant", "patient", "sub")
#: The keywords of :func:`~braindecode_pars.io.load_recordings` that
#: :func:`load_labelled_recordings` passes on: all but the files, ``lazy`` and
#: ``subject_from`` (its ``subject`` field gives the groups).
_READ_OPTIONS = tuple(
    name
    for name in inspect.signature(load_recordings).parameters
    if name not in ("patterns", "lazy", "subject_from")
)


def load_labelled_recordings(
    files,
    pattern=None,
    table=None,
    *,
    label="label",
    subject="subject",
    file_column=_FILE_COLUMN,
    **read_options,
):
    """Recordings and their labels as windows ``X``, labels ``y`` and subjects ``groups``.

    Each file gets *fields*: the named groups of ``pattern`` found in its name, or
    what the function ``pattern`` returns for it, and the columns of its row of
    ``table``. ``label`` and ``subject`` name the fields that hold its label and its
    subject; every window cut from the file gets them. Every file's fields are found
    (and a file without a label refused) before any recording is read. The recordings
    are then read as :func:`~braindecode_pars.io.load_recordings` reads them
    (EEG channels, band-pass, resampled to ``sfreq``, microvolts, fixed-length
    windows; a recording shorter than one window is skipped with a warning) and the
    windows read once by :func:`~braindecode_pars.io.windows.read_windows`.

    Parameters
    ----------
    files : str | Path | list
        Folders, globs (``'study/**/*.edf'``) or files
        (:func:`~braindecode_pars.io.find_recordings`).
    pattern : str | re.Pattern | callable | None
        A regular expression searched (``re.search``) in each file's name, with
        named groups for the fields: ``r"sub-(?P<subject>\\d+)_task-(?P<label>\\w+?)_"``;
        a pattern that holds ``/`` is searched in the file's whole path, so that a
        folder can give a field (``r"(?P<label>patients|controls)/"``). A function
        ``pattern(path) -> dict`` of fields (``{"label": ..., "subject": ...}``) also
        works. A file the pattern does not match (or for which the function returns
        None) is refused.
    table : pandas.DataFrame | str | Path | None
        A table of fields, one row per file or per subject: a DataFrame, or a CSV
        file (``.csv``) or a tab-separated one (any other extension: ``.tsv``, as
        BIDS's ``participants.tsv``). With a ``file_column`` column, a row belongs to
        the file whose name (or the end of whose path) it holds. Without one, rows
        are matched on the columns the table shares with the fields of ``pattern``
        (BIDS: ``pattern=r"(?P<participant_id>sub-[^_]+)_"``, ``subject="participant_id"``
        and ``label`` a column of ``participants.tsv``), compared as text. Each file
        must match exactly one row.
    label : str
        The field that holds each file's label.
    subject : str | None
        The field that holds each file's subject (its group); None: no groups.
    file_column : str
        The column of ``table`` naming files.
    **read_options
        How the recordings are read: the keywords of
        :func:`~braindecode_pars.io.load_recordings` (``sfreq``,
        ``window_seconds``, ``stride_seconds``, ``l_freq``, ``h_freq``, ``notch_freq``,
        ``picks``, ``exclude``, ``on_error``, ``n_jobs``), with its defaults: resampled
        to 100 Hz (the shipped encoders' rate), 30-s windows, one after the other.

    Returns
    -------
    windows : Windows
        ``windows.X`` (n_windows, n_chans, n_times) float32 in microvolts,
        ``windows.y`` (n_windows,) the labels as the fields hold them (text from a
        pattern), ``windows.groups`` (n_windows,) the subjects (None when ``subject``
        is None), ``windows.sfreq`` and ``windows.ch_names``; windows in the order of
        the files, each file's in time order. ``X``, ``y`` and ``groups`` go to
        :class:`~braindecode_pars.PARSClassifier` and to scikit-learn's group splitters
        as they are.

    Raises
    ------
    FileNotFoundError
        When ``files`` matches no recording.
    TypeError
        Before any file is looked for: a keyword that ``load_recordings`` does not take
        (``lazy`` included: the windows are read into memory).
    ValueError
        Before any recording is read: neither ``pattern`` nor ``table`` given; a file
        ``pattern`` does not match, or that matches no row (or several) of ``table``;
        a file without the field ``label`` (or ``subject``). After: recordings of
        different channels or lengths (``read_windows``).

    Examples
    --------
    >>> windows = load_labelled_recordings(
    ...     "study/*.edf", r"sub-(?P<subject>\\d+)_task-(?P<label>[a-z]+)_",
    ...     window_seconds=10)  # doctest: +SKIP
    >>> X, y, groups = windows.X, windows.y, windows.groups  # doctest: +SKIP
    """
    unknown = sorted(set(read_options) - set(_READ_OPTIONS))
    if unknown:
        raise TypeError(
            f"load_labelled_recordings() got {', '.join(map(repr, unknown))}, which "
            f"load_recordings does not take here; the read options are {list(_READ_OPTIONS)}."
        )
    if pattern is None and table is None:
        raise ValueError(
            "Give 'pattern' (a regular expression with named groups, or a function of the "
            "path) or 'table' (a DataFrame, or a CSV or TSV file), or both: each file's "
            "label is read from them, but both are None."
        )
    for name, value in (("label", label), ("file_column", file_column)):
        if not isinstance(value, str):
            raise TypeError(f"'{name}' must be a field name (str), but got {value!r}.")
    if subject is not None and not isinstance(subject, str):
        raise TypeError(f"'subject' must be a field name (str) or None, but got {subject!r}.")
    paths = find_recordings(files)
    fields = {path: {} for path in paths}
    if pattern is not None:
        fields = {path: _pattern_fields(pattern, path) for path in paths}
    if table is not None:
        fields = _join_table(_read_table(table), fields, file_column)
    wanted = [("label", label)] + ([("subject", subject)] if subject is not None else [])
    for path, found in fields.items():
        for name, field in wanted:
            if field not in found or _missing(found[field]):
                raise ValueError(
                    f"'{name}'={field!r} is not a field of the file '{path}': its fields are "
                    f"{sorted(found)} (from 'pattern' and 'table'); name one of them as "
                    f"'{name}'"
                    + (", or pass subject=None for no groups." if name == "subject" else ".")
                )
    if subject is not None:
        _check_people(fields, subject, "field")
    windows = _load_recordings(
        paths, subject_from="file", **read_options, purpose="reading", one_set=True
    )
    for ds in windows.datasets:  # the groups are the field ``subject`` names, or none
        for key in ("subject", "subject_from"):  # pandas 3 deprecates drop(inplace=True)
            ds.description.pop(key)
    by_name = {str(path): found for path, found in fields.items()}
    per_window = [(by_name[ds.description["file"]], len(ds)) for ds in windows.datasets]
    y = np.concatenate([np.repeat(np.asarray([f[label]]), n) for f, n in per_window])
    groups = None
    if subject is not None:
        groups = np.concatenate([np.repeat(np.asarray([f[subject]]), n) for f, n in per_window])
        headers = {
            Path(ds.description["file"]): {"subject": ds.description["subject"]}
            for ds in windows.datasets
            if "subject" in ds.description and not _missing(ds.description["subject"])
        }
        headers = {p: {**h, subject: fields[p][subject]} for p, h in headers.items()}
        _check_people(headers, subject, "header")
    out = read_windows(windows, y=y, groups=groups, name="files")
    labels, counts = np.unique(out.y, return_counts=True)
    logger.info(
        "Read %s from %s: labels %s; %s.",
        plural(len(out), "window"), plural(len(per_window), "recording"),
        ", ".join(f"{lab} ({n})" for lab, n in zip(labels.tolist(), counts.tolist(), strict=True)),
        "no groups" if groups is None else plural(len(np.unique(groups)), "subject"),
    )  # fmt: skip
    return out


def _missing(value):
    return value is None or (isinstance(value, float) and np.isnan(value))


def _pattern_fields(pattern, path):
    """The fields ``pattern`` gives ``path`` (a dict), or a ValueError naming ``pattern``."""
    if callable(pattern) and not isinstance(pattern, re.Pattern):
        found = pattern(path)
        if found is None:
            raise ValueError(f"'pattern' ({pattern!r}) returned None for the file '{path}'.")
        if not isinstance(found, dict):
            raise TypeError(
                f"'pattern', a function, must return a dict of fields (or None), but "
                f"returned {type(found).__name__} for the file '{path}'."
            )
        return dict(found)
    if not isinstance(pattern, str | re.Pattern):
        raise TypeError(
            "'pattern' must be a regular expression (str or re.Pattern) or a function of "
            f"the path, but got {type(pattern).__name__}."
        )
    regex = re.compile(pattern)
    if not regex.groupindex:
        raise ValueError(
            f"'pattern' {regex.pattern!r} has no named group; name the fields, e.g. "
            "r'sub-(?P<subject>\\d+)_task-(?P<label>\\w+?)_'."
        )
    text = path.as_posix() if "/" in regex.pattern else path.name
    match = regex.search(text)
    if match is None:
        where = "path" if "/" in regex.pattern else "name"
        raise ValueError(
            f"'pattern' {regex.pattern!r} does not match the {where} of the file '{path}'; "
            "change the pattern, or leave the file out of 'files'."
        )
    return {k: v for k, v in match.groupdict().items() if v is not None}


def _read_table(table):
    """``table`` as a DataFrame (a CSV file by its ``.csv`` extension, else tab-separated)."""
    if isinstance(table, pd.DataFrame):
        return table.reset_index(drop=isinstance(table.index, pd.RangeIndex))
    if not isinstance(table, str | Path):
        raise TypeError(
            "'table' must be a pandas DataFrame or the path of a CSV or TSV file, but got "
            f"{type(table).__name__}."
        )
    path = Path(table)
    if not path.is_file():
        raise FileNotFoundError(f"'table' {str(path)!r} is not a file.")
    sep = "," if path.suffix.lower() == ".csv" else "\t"
    return pd.read_csv(path, sep=sep, na_values=["n/a"])  # BIDS writes missing as n/a


def _join_table(table, fields, file_column):
    """Each file's fields with the columns of its row of ``table``."""
    if file_column in table.columns:
        keys = [file_column]
    else:
        keys = [c for c in table.columns if any(c in f for f in fields.values())]
        if not keys:
            raise ValueError(
                f"'table' has no column {file_column!r} ('file_column') and shares no column "
                f"with the fields of 'pattern' ({sorted({k for f in fields.values() for k in f})}"
                f"): its columns are {list(table.columns)}. Name files in a {file_column!r} "
                "column, or give 'pattern' a named group of a column's name."
            )
    text = table[keys].astype(str)
    out = {}
    for path, found in fields.items():
        if keys == [file_column]:
            values = text[file_column].str.replace("\\", "/", regex=False)
            posix = path.as_posix()
            rows = np.flatnonzero([posix == v or posix.endswith("/" + v) for v in values])
            key = f"{file_column}={path.name!r}"
        else:
            missing = [k for k in keys if k not in found]
            if missing:
                raise ValueError(
                    f"'pattern' gives the file '{path}' no field {missing} to match the "
                    f"rows of 'table' on (its fields: {sorted(found)})."
                )
            match = np.ones(len(table), dtype=bool)
            for k in keys:
                match &= (text[k] == str(found[k])).to_numpy()
            rows = np.flatnonzero(match)
            key = ", ".join(f"{k}={found[k]!r}" for k in keys)
        if len(rows) != 1:
            what = "no row" if len(rows) == 0 else f"{len(rows)} rows (rows {rows.tolist()})"
            raise ValueError(
                f"The file '{path}' ({key}) matches {what} of 'table'; each file must match "
                f"exactly one. The table's first values of {keys}: "
                f"{text[keys].head(5).to_dict('list')}."
            )
        row = table.iloc[int(rows[0])].to_dict()
        out[path] = {**found, **{k: v for k, v in row.items() if not _missing(v)}}
    return out


def _check_people(fields, subject, source):
    """Warn (``UserWarning``) when the field ``subject`` gives one person several groups, the person
    being named by another field (:data:`_PERSON_FIELDS`, of ``pattern`` or ``table``;
    ``source="field"``) or by the recordings' headers (EDF's patient code,
    ``source="header"``)."""
    names = {k for f in fields.values() for k in f if k != subject}
    for field in [f for f in names if f.lower() in _PERSON_FIELDS]:
        files = [p for p, f in fields.items() if field in f and subject in f]
        people = [fields[p][field] for p in files]
        split = _people_in_several_groups(people, [fields[p][subject] for p in files])
        if not split:
            continue
        where = "the recordings' headers" if source == "header" else f"the field {field!r}"
        fix = (
            "Group by person: name a field that holds the person as 'subject' (the "
            "headers give each recording's patient code)."
            if source == "header"
            else f"Group by person: subject={field!r}."
        )
        # a warning, not a log line: shown whether or not logging is set up
        warnings.warn(
            _split_people_message(split, f"{where}; subject={subject!r}", fix),
            UserWarning,
            stacklevel=3,
        )
        return
