"""A pretraining corpus from a user's own recordings.

The shipped encoder's corpus is :func:`~braindecode_pars.datasets.corpus.shared_corpus`;
the preprocessing and the windowing are in :mod:`.windowing`.
"""

from __future__ import annotations

import difflib
import functools
import glob
import logging
import re
from pathlib import Path

import mne
import numpy as np
from braindecode.datasets import BaseConcatDataset, RawDataset

from braindecode_pars._util.checks import check_option
from braindecode_pars._util.logs import plural
from braindecode_pars.io.windowing import (
    RecordingStream,
    fixed_length_windower,
    microvolt_step,
    recording_preprocessors,
    windows_of,
)
from braindecode_pars.io.windows import _channel_sets_message, _same_channels

logger = logging.getLogger(__name__)

#: Extensions of the recordings that :func:`mne.io.read_raw` reads.
_RECORDING_EXTENSIONS = (
    ".edf", ".bdf", ".gdf", ".fif", ".fif.gz", ".vhdr", ".set", ".cnt", ".mff", ".nxe",
)  # fmt: skip


def find_recordings(patterns):
    """Files matching a folder, a glob (``'data/**/*.edf'``) or a list of either.

    A folder stands for every recording below it with an extension of
    :data:`_RECORDING_EXTENSIONS`; so does a glob, whose matches are filtered the
    same way (``'data/*'`` skips BrainVision's ``.vmrk`` and ``.eeg`` companions).
    A plain file path is taken as it is.

    Parameters
    ----------
    patterns : str | Path | list of them
        Folders, globs or files.

    Returns
    -------
    files : list of Path
        The recordings, sorted within each pattern, each listed once.

    Raises
    ------
    FileNotFoundError
        When a pattern matches no recording; the message names the pattern.
    """
    patterns = [patterns] if isinstance(patterns, str | Path) else list(patterns)
    if not patterns:
        raise FileNotFoundError("No recording pattern given: 'patterns' is empty.")
    files = []
    for pattern in map(str, patterns):
        if Path(pattern).is_dir():
            found = [p for p in sorted(Path(pattern).rglob("*")) if _is_recording(p)]
        elif glob.has_magic(pattern):
            found = [Path(p) for p in sorted(glob.glob(pattern, recursive=True))]
            found = [p for p in found if _is_recording(p)]
        else:
            found = [Path(pattern)] if Path(pattern).is_file() else []
        if not found:
            raise FileNotFoundError(
                f"No recording matches {pattern!r} "
                f"(extensions: {', '.join(_RECORDING_EXTENSIONS)})."
            )
        files += [p for p in found if p not in files]
    return files


def _is_recording(path):
    return path.is_file() and path.name.lower().endswith(_RECORDING_EXTENSIONS)


#: Words of channel names that mark a signal other than EEG (a word starting with the
#: first five: ``EKG1``, ``EMG-chin``, ``Resp oro-nasal``), matched without regard to case.
_NON_EEG_PREFIXES = ("ECG", "EKG", "EOG", "EMG", "RESP")
_NON_EEG_WORDS = (
    "LOC", "ROC", "SPO2", "SAO2", "PLETH", "PULSE", "HR", "THOR", "THORAX", "ABD", "ABDO",
    "ABDOMEN", "AIRFLOW", "FLOW", "NASAL", "SNORE", "CHIN", "LEG", "POSITION", "LIGHT",
    "TEMP", "STATUS", "TRIGGER", "STIM", "STI", "EVENT", "MARKER", "PHOTIC", "IBI",
    "BURSTS", "SUPPR", "MISC",
)  # fmt: skip
#: Reference electrodes: a channel whose name holds only these (``A1``, ``A2-A1``,
#: ``EEG M1-M2``, ``REF``) is a reference derivation, not EEG of a scalp site.
_REFERENCE_NAMES = ("A1", "A2", "M1", "M2", "REF", "LE", "RE", "AVG", "AR", "CAR", "GND")


def _non_eeg_channels(ch_names):
    """The channel names that mark a non-EEG signal or a reference derivation.

    A name is cut into words at every character that is not a letter or a digit,
    a leading ``EEG`` is dropped (EDF's type prefix), and the channel is left out
    when a word names another signal (:data:`_NON_EEG_PREFIXES`,
    :data:`_NON_EEG_WORDS`: ``ECG ECG``, ``EOG LOC-A2``, ``EMG Chin``...) or when
    every word is a reference electrode (:data:`_REFERENCE_NAMES`: ``EEG A2-A1``,
    ``M1``, ``REF``). Scalp sites measured against a reference (``EEG Fp1-REF``,
    ``C3-M2``) and mastoid-adjacent sites (``TP9``) are EEG.

    Parameters
    ----------
    ch_names : list of str
        A recording's channel names as its file gives them (``raw.ch_names``).

    Returns
    -------
    names : list of str
        The names left out, in their order.
    """
    out = []
    for name in ch_names:
        words = [w for w in re.split(r"[^0-9A-Z]+", name.upper()) if w]
        if words[:1] == ["EEG"]:
            words = words[1:]
        other = any(w.startswith(_NON_EEG_PREFIXES) or w in _NON_EEG_WORDS for w in words)
        reference = bool(words) and all(w in _REFERENCE_NAMES for w in words)
        if other or reference:
            out.append(name)
    return out


def _excluded(raw, picks, exclude):
    """The channel names of ``raw`` that ``exclude`` leaves out of ``picks``: its names,
    and the automatic exclusions (:func:`_non_eeg_channels`, but for names ``picks``
    lists) when it is or holds "auto"."""
    names = set() if isinstance(exclude, str) else set(exclude) - {"auto"}
    automatic = set()
    if exclude == "auto" or (not isinstance(exclude, str) and "auto" in exclude):
        asked = set(picks) if isinstance(picks, list | tuple) else set()
        automatic = set(_non_eeg_channels(raw.ch_names)) - asked
    return [ch for ch in raw.ch_names if ch in names or ch in automatic]


def _check_exclude(exclude):
    """``exclude`` as "auto" or a list of channel names (which may hold "auto"), or an
    error in MNE's wording."""
    if exclude == "auto":
        return exclude
    if isinstance(exclude, list | tuple | set) and all(isinstance(n, str) for n in exclude):
        return list(exclude)
    raise ValueError(
        "Invalid value for the 'exclude' parameter. Allowed values are 'auto' and a list "
        "of channel names (holding 'auto' to add the automatic exclusions), but got "
        f"{exclude!r} instead."
    )


#: The words of ``load_recordings``'s ``subject_from`` (besides a regular expression
#: or a function): each recording its own subject, or the header's patient code.
_SUBJECT_SOURCES = ("file", "header")
#: What ``subject_from`` names in the ``subject_from`` column of a description.
_SUBJECT_COLUMN = "subject_from"


def _header_subject(raw):
    """The person of a recording as its header names them (EDF's patient code), or None
    (none, or anonymised to 'X')."""
    subject = (raw.info.get("subject_info") or {}).get("his_id")
    if subject is None or str(subject).strip() in ("", "X", "x"):
        return None
    return str(subject).strip()


def _drop_identity(raw):
    """Remove from ``raw.info`` what names a person or a place (its header's patient
    fields: code, names, birth date, sex, hand; experimenter, description, project,
    device's site and serial), in place; the data, channels and ``meas_date`` are kept.
    EDF's recording field (hospital code, technician, equipment) is not read by MNE."""
    with raw.info._unlock():
        raw.info["subject_info"] = None
        raw.info["experimenter"] = None
        raw.info["description"] = None
        raw.info["proj_name"] = None
        raw.info["proj_id"] = None
        raw.info["device_info"] = None
        raw.info["helium_info"] = None
    return raw


def check_subject_from(subject_from):
    """``subject_from`` as ``(kind, how)``, or a clear error before any work.

    Parameters
    ----------
    subject_from : None | "file" | "header" | str | re.Pattern | callable
        See :func:`load_recordings`.

    Returns
    -------
    kind : str
        ``"file"``, ``"header"``, ``"pattern"`` or ``"function"``.
    how : re.Pattern | callable | None
        The compiled pattern, or the function.
    """
    if subject_from is None or subject_from in _SUBJECT_SOURCES:
        return subject_from or "file", None
    if callable(subject_from) and not isinstance(subject_from, re.Pattern):
        return "function", subject_from
    allowed = (
        "'file' (each recording its own subject), 'header' (the header's patient code), a "
        "regular expression of the file's name with a group for the subject (r'(S\\d+)_', "
        "or a group named 'subject'), or a function of the file's path"
    )
    if not isinstance(subject_from, str | re.Pattern):
        raise TypeError(
            f"'subject_from' must be {allowed}, but got {type(subject_from).__name__} "
            f"({subject_from!r})."
        )
    try:
        regex = re.compile(subject_from)
    except re.error as err:
        raise ValueError(
            f"'subject_from' must be {allowed}, but got {subject_from!r}, not a regular "
            f"expression ({err})."
        ) from None
    if regex.groups == 0:
        raise ValueError(
            f"'subject_from' must be {allowed}, but got {regex.pattern!r}, which has no "
            "group: put the subject's part of the name in parentheses."
        )
    return "pattern", regex


def file_keys(files):
    """A name of each file that says no more than its path: its path relative to the
    folder all ``files`` share, without the extension (``night1``, ``sub-01/rest``).

    Parameters
    ----------
    files : list of str | Path

    Returns
    -------
    keys : list of str
    """
    paths = [Path(f).absolute() for f in files]
    if not paths:
        return []
    parents = [p.parent.parts for p in paths]
    common = 0
    while all(len(p) > common and p[common] == parents[0][common] for p in parents):
        common += 1
    keys = []
    for path in paths:
        name = path.name
        for ext in sorted(_RECORDING_EXTENSIONS, key=len, reverse=True):
            if name.lower().endswith(ext):
                name = name[: -len(ext)]
                break
        keys.append("/".join([*path.parent.parts[common:], name]))
    return keys


def _subjects_of(files, kind, how):
    """The subject of each file by the file (``kind`` "file", "pattern", "function"; the
    header's are read with the recordings), or a ValueError naming the file the
    pattern does not match, before any recording is read."""
    keys = dict(zip(files, file_keys(files), strict=True))
    if kind in ("file", "header"):
        return keys
    subjects = {}
    for file in files:
        if kind == "function":
            subject = how(Path(file))
            if subject is None or str(subject).strip() == "":
                raise ValueError(
                    f"'subject_from' (the function {how!r}) gave no subject for '{file}'."
                )
        else:
            text = Path(file).as_posix() if "/" in how.pattern else Path(file).name
            match = how.search(text)
            if match is None:
                where = "path" if "/" in how.pattern else "name"
                raise ValueError(
                    f"'subject_from' {how.pattern!r} does not match the {where} of the file "
                    f"'{file}'; change the pattern, or leave the file out."
                )
            subject = match.group("subject") if "subject" in how.groupindex else match.group(1)
        subjects[file] = str(subject)
    return subjects


def _description(file, subject, kind, native_sfreq=None):
    """A recording's description: its file, its subject, where the subject comes from and
    the rate its channels kept were recorded at (``native_sfreq``, before any
    resampling: :func:`_channel_rates`)."""
    description = {"file": str(file), "subject": subject, _SUBJECT_COLUMN: kind}
    if native_sfreq is not None:
        description[_NATIVE_COLUMN] = float(native_sfreq)
    return description


#: The description column of the rate each recording was recorded at.
_NATIVE_COLUMN = "native_sfreq"


def _say_native_rates(rates, sfreq, h_freq):
    """Say, before any preprocessing, what bringing recordings of ``rates`` (file ->
    native rate) to ``sfreq`` leaves: recordings upsampled from a lower rate hold nothing
    above their own Nyquist frequency. When other recordings hold more there (a higher
    native rate, and no low-pass ``h_freq`` at or below the lowest native Nyquist), a
    WARNING names the rates, the recordings of each and the fixes; when every recording
    is upsampled from one rate, an INFO line says what they hold."""
    upsampled = {f: r for f, r in rates.items() if r < sfreq - 1e-6}
    if not upsampled:
        return
    lowest = min(rates.values())
    by_rate = {}
    for file, rate in rates.items():
        by_rate.setdefault(rate, []).append(file)
    said = "; ".join(
        f"{rate:g} Hz: {plural(len(files), 'recording')} ({_files(files)})"
        for rate, files in sorted(by_rate.items())
    )
    top = min(sfreq / 2, min(75.0, 0.45 * sfreq) if h_freq is None else h_freq)
    if len(by_rate) == 1 or top <= lowest / 2 + 1e-6:
        logger.info(
            "The recordings are brought from %s to %g Hz: they hold nothing above %g Hz "
            "(half the native rate).",
            said, sfreq, lowest / 2,
        )  # fmt: skip
        return
    logger.warning(
        "The recordings were recorded at %d rates (%s) and are brought to %g Hz: the %s "
        "upsampled from %g Hz hold nothing above %g Hz, where the others hold EEG up to "
        "%g Hz. Band power and an encoder then tell the rates apart rather than the EEG "
        "(a classifier's fit warns when a band is empty in some windows only). "
        "Band-limit every recording below the lowest native Nyquist frequency (h_freq=%g; "
        "the command's --h-freq %g), or choose bands that end below %g Hz (the probe's "
        "'bands'). Each recording's rate is in the windows' description, '%s'.",
        len(by_rate), said, sfreq, plural(len(by_rate[lowest]), "recording"), lowest,
        lowest / 2, min(top, max(rates.values()) / 2), _low_pass_below(lowest),
        _low_pass_below(lowest), lowest / 2, _NATIVE_COLUMN,
    )  # fmt: skip


def _low_pass_below(rate):
    """A low-pass edge below the Nyquist frequency of ``rate`` that leaves room for the
    filter's transition: 88 % of it, in whole Hz (22 Hz for 50 Hz)."""
    return max(1, int(0.88 * rate / 2))


def _channel_rates(raw):
    """The rate each channel of a recording was recorded at, ``{name: Hz}``, as read.

    EDF, BDF and GDF files give each signal its own number of samples per data record:
    MNE reads every channel at the highest rate (``raw.info["sfreq"]``), upsampling the
    others, and keeps the header's counts (``n_samps`` per ``record_length``) in the
    reader's extras, which this reads. A recording of other formats, or whose reader
    keeps no such counts, has every channel at ``raw.info["sfreq"]``.

    Parameters
    ----------
    raw : mne.io.BaseRaw
        The recording just read (no channel picked or renamed yet).

    Returns
    -------
    rates : dict
        ``{channel name: native rate in Hz}`` for every channel of ``raw``.
    """
    sfreq = float(raw.info["sfreq"])
    rates = dict.fromkeys(raw.ch_names, sfreq)
    extras = getattr(raw, "_raw_extras", None) or [{}]
    extras = extras[0] if isinstance(extras[0], dict) else {}
    try:
        n_samps = np.asarray(extras["n_samps"], dtype=float)
        sel = np.asarray(extras.get("sel", np.arange(len(n_samps))), dtype=int)
        duration = float(extras["record_length"][0]) / float(extras["record_length"][1])
        names = list(extras["ch_names"])
    except (KeyError, TypeError, ValueError, IndexError):  # not an EDF-like reader
        return rates
    per_channel = n_samps[sel] if len(sel) == len(names) and len(sel) else n_samps
    if len(per_channel) != len(raw.ch_names) or duration <= 0:
        return rates  # counts not aligned with the channels as read: MNE's rate
    return {
        ch: min(sfreq, float(n) / duration) for ch, n in zip(raw.ch_names, per_channel, strict=True)
    }


def _channels(file, picks, exclude, on_error, skipped, headers, header=False):
    """The recording's header (not its data, its identity dropped), the channels kept and
    left out, its header's patient code (with ``header``, else None) and the rate its
    channels kept were recorded at (the fastest of them), or None to skip
    it: ``(file, reason)`` is then appended to ``skipped`` and said once for all files by
    :func:`_skipped_summary`; the header's channel names go to ``headers``."""
    try:
        raw = mne.io.read_raw(file, preload=False, verbose="error")
    except Exception as err:  # MNE's readers raise ValueError, OSError, RuntimeError...
        reason = f"{type(err).__name__}: {err}"
        if on_error == "raise":
            raise ValueError(
                f"Cannot read the recording '{file}' ({reason}). Remove it, or pass "
                "on_error='skip' to leave unreadable files out with a warning."
            ) from err
        skipped.append((str(file), f"cannot read it ({reason})"))
        return None
    subject = _header_subject(raw) if header else None
    rates = _channel_rates(raw)
    _drop_identity(raw)
    names = list(raw.ch_names)
    headers[file] = names
    try:
        raw.pick(picks)
    except ValueError:
        skipped.append((str(file), f"its channels do not match picks={picks!r}"))
        return None
    left_out = _excluded(raw, picks, exclude)
    kept = [ch for ch in raw.ch_names if ch not in left_out]
    if not kept:
        skipped.append(
            (str(file), f"every channel of picks={picks!r} is left out by exclude={exclude!r}")
        )
        return None
    not_picked = [ch for ch in names if ch not in raw.ch_names]
    native = max(rates[ch] for ch in kept)  # the rate of the channels kept
    return raw.pick(kept), left_out, not_picked, subject, native


def _site(name):
    """The electrode site of a channel name, in capitals: what is left once a leading
    ``EEG`` (EDF's type prefix) and a reference after ``-`` are cut (``EEG Fp1-REF``:
    FP1)."""
    words = name.strip().upper().split()
    if len(words) > 1 and words[0] == "EEG":
        words = words[1:]
    return re.split(r"[-\s]", " ".join(words))[0]


def _closest_channel(pick, ch_names):
    """The channel of ``ch_names`` that a wrong name ``pick`` most likely meant, or None.

    The same name in other capitals first, then the same site (:func:`_site`: ``'Fp1'``
    is ``'EEG Fp1-Ref'``'s), then the nearest name or site by
    :func:`difflib.get_close_matches`.

    Parameters
    ----------
    pick : str
        A channel name that ``ch_names`` does not hold.
    ch_names : list of str
        A recording's channel names.

    Returns
    -------
    name : str | None
    """
    for same in (
        [n for n in ch_names if n.upper() == pick.upper()],
        [n for n in ch_names if _site(n) == _site(pick)],
        difflib.get_close_matches(pick, ch_names, n=1),
    ):
        if same:
            return same[0]
    sites = {_site(n): n for n in reversed(ch_names)}
    near = difflib.get_close_matches(_site(pick), list(sites), n=1)
    return sites[near[0]] if near else None


def _skipped_summary(skipped, headers, picks, exclude, n_files):
    """One message for every skipped file: how many, why, and for those whose channels
    do not match ``picks``, the channel names their headers hold (grouped by channel
    set) with the closest name to each pick and the ``picks`` that would take them."""
    kinds = {"channels": [], "excluded": [], "unreadable": []}
    for file, reason in skipped:
        kind = "unreadable" if reason.startswith("cannot read") else "channels"
        kinds["excluded" if "left out by exclude" in reason else kind].append((file, reason))
    parts = []
    if kinds["channels"]:
        files = [f for f, _ in kinds["channels"]]
        parts.append(f"{len(files)} without the channels picks={picks!r} ({_files(files)})")
    if kinds["excluded"]:
        files = [f for f, _ in kinds["excluded"]]
        parts.append(
            f"{len(files)} whose channels of picks={picks!r} exclude={exclude!r} leaves out "
            f"every one ({_files(files)})"
        )
    if kinds["unreadable"]:
        (first, reason), n = kinds["unreadable"][0], len(kinds["unreadable"])
        files = _files([f for f, _ in kinds["unreadable"]])
        parts.append(f"{n} that cannot be read ({files}; {Path(first).name}: {reason[16:-1]})")
    message = f"Skipped {len(skipped)} of {plural(n_files, 'recording')}: {'; '.join(parts)}."
    sets = {}
    for file, _ in kinds["channels"]:
        sets.setdefault(tuple(headers[Path(file)]), []).append(file)
    for channels, files in sets.items():
        message += (
            f" {'Its' if len(files) == 1 else 'Their'} channels"
            + (f" ({_files(files)})" if len(sets) > 1 else "")
            + f": {', '.join(channels)}."
        )
        if isinstance(picks, list | tuple):
            missing = [p for p in picks if p not in channels]
            near = {p: _closest_channel(str(p), list(channels)) for p in missing}
            found = {p: c for p, c in near.items() if c is not None}
            if found:
                message += (
                    " Closest to each pick: "
                    + ", ".join(f"{p!r} -> {c!r}" for p, c in found.items())
                    + "."
                )
            if len(found) == len(missing):
                fixed = [near.get(p, p) for p in picks]
                message += f" Name them as the files do: picks={fixed!r}."
        else:
            message += (
                f" picks={picks!r} selects channels by MNE type, of which these files have "
                "none (EDF types every channel 'eeg'); name the channels as the files do: "
                "picks=[...]."
            )
    return message


def _read(file, channels, description):
    """The recording ``file`` with ``channels``, its header's identity dropped, as a
    braindecode RawDataset with ``description``."""
    raw = _drop_identity(mne.io.read_raw(file, preload=False, verbose="error"))
    return RawDataset(raw.pick(channels), description)


@functools.lru_cache(maxsize=1)
def _montage_sites():
    """The electrode names of MNE's 10-05 montage, in capitals (10-20's T3-T6 included)."""
    import warnings

    names = mne.channels.get_builtin_montages()
    name = "colin27_1005" if "colin27_1005" in names else "standard_1005"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        montage = mne.channels.make_standard_montage(name)
    return frozenset(n.upper() for n in montage.ch_names)


def _off_montage(ch_names):
    """The channel names whose site is not on the 10-05 montage.

    A name's site is what is left once a leading ``EEG`` (EDF's type prefix) and a
    reference after ``-`` are cut: ``EEG Fp1-REF`` is Fp1, ``C3-M2`` is C3; ``X1``,
    ``Photic`` or ``DC01`` are not sites.

    Parameters
    ----------
    ch_names : list of str
        Channel names, any case, with or without EDF's ``EEG`` prefix and a reference.

    Returns
    -------
    names : list of str
        The names off the montage, in their order.
    """
    sites = _montage_sites()
    return [name for name in ch_names if _site(name) not in sites]


def _files(files, shown=3):
    """``a.edf, b.edf, c.edf and 44 more``."""
    names = [Path(f).name for f in files]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _log_channels(kept, exclude, not_picked=None, picks="eeg", purpose="pretraining"):
    """Say once what the recordings keep: one INFO line for all, each recording at DEBUG;
    one WARNING for kept channels off the 10-05 montage (grouped by those channels,
    naming the files) and one when the recordings have several channel sets.
    ``purpose`` is the word of the lines: "pretraining" (on the channels...) or
    "reading" (labelled recordings for a classifier)."""
    sets = {}
    for file, (channels, left_out) in kept.items():
        sets.setdefault(tuple(channels), []).append(file)
        logger.debug(
            "%s: %s %d channels: %s; left out (exclude=%r): %s.",
            file, f"{purpose} on" if purpose == "pretraining" else purpose, len(channels),
            ", ".join(channels), exclude, ", ".join(left_out) or "none",
        )  # fmt: skip
    out = {}
    for file, (_, left_out) in kept.items():
        for ch in left_out:
            out.setdefault(ch, []).append(file)
    typed = {}  # channels picks left out (of another MNE type) -> their recordings
    for file, names in (not_picked or {}).items():
        if file in kept:
            for ch in names:
                typed[ch] = typed.get(ch, 0) + 1
    other = ", ".join(f"{ch} ({n})" for ch, n in typed.items())
    other = f" Not picked (picks={picks!r}, recordings): {other}." if typed else ""
    if len({(tuple(c), tuple(o)) for c, o in kept.values()}) == 1:
        channels, left_out = next(iter(kept.values()))
        logger.info(
            "%s %s of %s: %s; left out (exclude=%r): %s.%s",
            _verb(purpose), plural(len(channels), "channel"),
            "the recording" if len(kept) == 1 else f"the {len(kept)} recordings",
            ", ".join(channels), exclude, ", ".join(left_out) or "none", other,
        )  # fmt: skip
    else:
        shown = "; ".join(f"{len(f)} with {plural(len(c), 'channel')}" for c, f in sets.items())
        left = ", ".join(f"{ch} ({len(f)})" for ch, f in out.items()) or "none"
        logger.info(
            "%s the channels of %s, %d channel sets (%s); left out "
            "(exclude=%r, recordings): %s.%s Each recording's channels: DEBUG logging.",
            _verb(purpose), plural(len(kept), "recording"), len(sets), shown, exclude, left, other,
        )  # fmt: skip
    off = {}
    for file, (channels, _) in kept.items():
        names = tuple(_off_montage(channels))
        if names:
            off.setdefault(names, []).append(file)
    if off:
        groups = "; ".join(
            f"{', '.join(names)} in {plural(len(files), 'recording')} ({_files(files)})"
            for names, files in off.items()
        )
        every = sorted({n for names in off for n in names})
        logger.warning(
            "Kept as EEG, though their names are not sites of the 10-05 montage: %s. If "
            "they are not scalp EEG, leave them out with exclude=['auto', %s] (the "
            "command's --exclude %s).",
            groups, ", ".join(repr(n) for n in every), " ".join(every),
        )  # fmt: skip
    if len(sets) > 1:
        _log_channel_sets(sets)


def _log_subjects(descriptions, kind, hint):
    """Say in one INFO line how the recordings are grouped into subjects (counts only,
    never a subject's name); with ``hint`` (``subject_from`` left at its default), how to
    group them by person."""
    n_subjects = len({d["subject"] for d in descriptions.values()})
    if kind == "file":
        if hint:
            logger.info(
                "Each of the %s is its own subject (subject_from='file'); the headers' "
                "patient fields are not read. To group recordings by person, give "
                "subject_from a regular expression of the file names with the subject "
                "in a group (subject_from=r'(S\\d+)R\\d+', the command's --subject-from), "
                "a function of the path, or 'header' for the headers' patient codes.",
                plural(len(descriptions), "recording"),
            )  # fmt: skip
        return
    unnamed = sum(d[_SUBJECT_COLUMN] == "file" for d in descriptions.values())
    logger.info(
        "%s of %s (subject_from=%r)%s.",
        plural(n_subjects, "subject"), plural(len(descriptions), "recording"),
        kind if kind != "pattern" else "a pattern",
        f"; {unnamed} whose header names no one are their own subject" if unnamed else "",
    )  # fmt: skip


def _verb(purpose):
    """The opening of the line of :func:`_log_channels`: "Pretraining on" or "Reading"."""
    return "Pretraining on" if purpose == "pretraining" else "Reading"


def _log_channel_sets(sets):
    """Say what recordings of several channel sets (``{channels: [files]}``) become: one
    channel each of several names stacks by position (INFO, naming the names); others
    need one set (a WARNING with the channels they share, or the remedies when they
    share none; never an empty pick)."""
    if all(len(channels) == 1 for channels in sets):
        names = "; ".join(
            f"{channels[0]} ({plural(len(files), 'recording')}: {_files(files)})"
            for channels, files in sets.items()
        )
        logger.info(
            "The recordings have one channel each, under %d names: %s. Pretraining draws "
            "one channel at a time and takes them all; a classifier stacks their windows "
            "by position, as one channel.",
            len(sets), names,
        )  # fmt: skip
        return
    common = [ch for ch in next(iter(sets)) if all(ch in c for c in sets)]
    groups = "; ".join(
        f"{plural(len(files), 'recording')} with {plural(len(channels), 'channel')} "
        f"({_files(files)})"
        for channels, files in sets.items()
    )
    if common:
        fix = (
            f"picks={common!r} (the command's --channels {' '.join(common)}) keeps the "
            f"{plural(len(common), 'channel')} they share."
        )
    else:
        fix = (
            "they share no channel: read the recordings of each set apart, or rename "
            "the same sites to one name first (mne's Raw.rename_channels)."
        )
    logger.warning(
        "The recordings have %d channel sets: %s. Pretraining draws one channel at a time "
        "and takes them all; a classifier of several channels needs one set: %s",
        len(sets), groups, fix,
    )  # fmt: skip


def load_recordings(
    patterns,
    sfreq=100.0,
    window_seconds=30.0,
    stride_seconds=None,
    l_freq=0.3,
    h_freq=None,
    notch_freq=None,
    picks="eeg",
    n_jobs=1,
    exclude="auto",
    on_error="raise",
    lazy=False,
    subject_from=None,
):
    """Any recordings MNE reads (EDF, BDF, FIF, BrainVision, EEGLAB...) as pretraining windows.

    Each file is read with :func:`mne.io.read_raw`, its EEG channels kept
    (``picks``, ``exclude``), preprocessed as the paper does
    (:func:`recording_preprocessors`) through braindecode's ``preprocess``, scaled from
    volts (MNE's unit) to microvolts, and cut into fixed-length windows. Recordings
    shorter than one window are skipped with a warning. Every file's header is read
    first, so that an unreadable file stops the call (or is skipped,
    ``on_error="skip"``) before any preprocessing. The channels kept are logged
    in one ``logging.INFO`` line (each recording's at ``DEBUG``); one warning names
    the kept channels whose names are not sites of the 10-05 montage
    (:func:`_off_montage`) with their files, and one the channel sets when the
    recordings have several. The description holds ``file``, ``subject``,
    ``subject_from`` (what the subject was read from, see ``subject_from``) and
    ``native_sfreq``, the rate the recording's channels kept were recorded at, after
    ``picks`` and ``exclude`` (the fastest of them: an EDF, BDF or GDF file gives each
    signal its own rate, so that EEG at 50 Hz beside an ECG at 500 Hz left out is at
    50 Hz, though MNE reads the file at 500 Hz). Recordings of several
    native rates brought to ``sfreq`` are said before any preprocessing: a warning names
    those upsampled from a lower rate, which hold nothing above their own Nyquist
    frequency where the others do, and the fix (``h_freq`` below the lowest native
    Nyquist frequency, e.g. 22 Hz with recordings at 50 Hz). What a
    header says of the person (EDF's patient code, name, birth date; the experimenter,
    a description) is dropped from every recording's ``info`` as it is read, and
    nothing of it reaches the description, a store or a log unless ``subject_from="header"``
    asks for the patient code.
    Recordings of one channel each under several names (sleep labs mix derivations:
    C3-A1, CZ-A1, Fpz-Cz) are one channel to a classifier: their windows stack by
    position, and the log says so. Hand the result to
    :class:`~braindecode_pars.pretraining.SingleChannelWindows` (one random channel
    of a random crop per example) or write it once with
    :func:`~braindecode_pars.store.write_window_store`.

    Parameters
    ----------
    patterns : str | Path | list
        Folders, globs (``'path/**/*.edf'``) or files.
    sfreq : float
        Sampling rate after resampling (the encoder's).
    window_seconds, stride_seconds : float
        Window length and stride (default: the length, windows one after the other;
        the store command's ``--stride-seconds`` defaults to 5 s, overlapping windows
        for pretraining's crops).
    l_freq, h_freq, notch_freq, picks
        See :func:`recording_preprocessors`. ``picks`` selects channels as MNE does:
        ``"eeg"`` (the default) keeps the channels typed EEG, which in an EDF file is
        every channel, ECG and reference derivations included (hence ``exclude``).
    n_jobs : int
        Parallel jobs of the preprocessing (without ``lazy``).
    exclude : "auto" | list of str
        Channels left out of ``picks``. ``"auto"``: those whose names mark another
        signal (ECG, EKG, EOG, EMG, respiration...) or a reference derivation (A1,
        A2, M1, M2, ``A2-A1``, REF...), see :func:`_non_eeg_channels`, except the
        names ``picks`` lists itself. A list: these names (MNE's meaning of
        ``exclude``), and the automatic ones too when it holds ``"auto"``
        (``["auto", "X1"]``); ``[]`` keeps every channel ``picks`` selects.
    on_error : "raise" | "skip"
        A file that cannot be read (not the format its extension says, damaged):
        ``"raise"`` stops with an error naming the file and the reason; ``"skip"``
        leaves it out with a logged warning.
    lazy : bool
        False: every recording is read and windowed now, in memory. True: a
        :class:`~braindecode_pars.io.windowing.RecordingStream` that reads,
        preprocesses and windows one recording at a time as it is iterated, for
        :func:`~braindecode_pars.store.write_window_store` (a store of any number of
        recordings in the memory of one).

    Returns
    -------
    windows : braindecode BaseConcatDataset | RecordingStream
        Windows in microvolts; description column ``file``; no targets (pretraining
        windows).

    Examples
    --------
    >>> windows = load_recordings("my_study/**/*.edf", sfreq=100, window_seconds=10)
    ... # doctest: +SKIP
    """
    return _load_recordings(
        patterns, sfreq, window_seconds, stride_seconds, l_freq, h_freq, notch_freq, picks,
        n_jobs, exclude, on_error, lazy, subject_from,
    )  # fmt: skip


def _load_recordings(
    patterns, sfreq=100.0, window_seconds=30.0, stride_seconds=None, l_freq=0.3, h_freq=None,
    notch_freq=None, picks="eeg", n_jobs=1, exclude="auto", on_error="raise", lazy=False,
    subject_from=None, *, purpose="pretraining", one_set=False,
):  # fmt: skip
    """:func:`load_recordings`'s work. ``purpose`` words the log ("pretraining", or
    "reading" labelled recordings); ``one_set``: recordings of several channel sets
    (but one-channel recordings, which stack by position, and the same channels in
    other orders, which are read in one) are refused from their headers, before any
    preprocessing, as a classifier's windows would be after it."""
    check_option("on_error", on_error, ("raise", "skip"))
    exclude = _check_exclude(exclude)
    kind, how = check_subject_from(subject_from)
    files = find_recordings(patterns)
    subjects = _subjects_of(files, kind, how)
    kept, raws, skipped, descriptions, not_picked, headers = {}, [], [], {}, {}, {}
    rates = {}
    for file in files:
        found = _channels(file, picks, exclude, on_error, skipped, headers, header=kind == "header")
        if found is None:
            continue
        raw, left_out, not_picked[file], named, rates[file] = found
        kept[file] = (list(raw.ch_names), left_out)
        descriptions[file] = (
            _description(file, subjects[file], "file", rates[file])
            if kind == "header" and named is None
            else _description(file, named or subjects[file], kind, rates[file])
        )
        if not lazy:
            raws.append(RawDataset(raw, descriptions[file]))
    if not kept:
        raise ValueError(
            "No recording is left to read. "
            + _skipped_summary(skipped, headers, picks, exclude, len(files))
        )
    if skipped:
        logger.warning(_skipped_summary(skipped, headers, picks, exclude, len(files)))
    if one_set:
        sets = {}
        for file, (channels, _) in kept.items():
            sets.setdefault(tuple(channels), []).append(Path(file).name)
        one_order = len(sets) > 1 and _same_channels(sets)  # read in one order later
        if len(sets) > 1 and not one_order and not all(len(channels) == 1 for channels in sets):
            raise ValueError(
                _channel_sets_message(
                    sets, "The recordings' headers (read before any preprocessing) give"
                )
            )
    _log_channels(kept, exclude, not_picked, picks, purpose)
    _log_subjects(descriptions, kind, hint=subject_from is None)
    _say_native_rates(rates, sfreq, h_freq)
    # the channels are picked already: the preprocessing keeps them all
    preprocessors = [
        *recording_preprocessors(sfreq, l_freq, h_freq, notch_freq, picks="all"),
        microvolt_step(),
    ]
    if lazy:
        readers = [
            functools.partial(_read, file, channels, descriptions[file])
            for file, (channels, _) in kept.items()
        ]
        windower = fixed_length_windower(preprocessors, sfreq, window_seconds, stride_seconds)
        return RecordingStream(readers, windower, skipped=skipped)
    return windows_of(
        BaseConcatDataset(raws),
        preprocessors,
        sfreq,
        window_seconds,
        stride_seconds,
        n_jobs,
    )
