"""What stores and runs written before ``subject_from`` say of the people recorded,
and their rewrite.

Before :func:`~braindecode_pars.io.load_recordings` took ``subject_from``, it put
an EDF header's patient code (``his_id``, often the patient's name) into each
recording's ``subject``: ``store --recordings`` wrote it into the store's
``recordings.json``, and a pretraining run listed the store's recordings by name in
its ``config.json`` (``data.recordings``), which ``export`` copied into
``run_config.json`` and the model card. Now a recording's subject is what the user
chose (its file, by default) and a run records counts and a hash.

:func:`warn_header_identities` names such a store, once, when it is opened;
:func:`anonymize` rewrites a store, a run or an export in place, each file
atomically (:func:`~braindecode_pars._util.atomic.write_atomic`), the folder locked
(:func:`~braindecode_pars._jobs.lock.folder_lock`). From a shell::

    python -m braindecode_pars.store.identity stores/mine runs/mine encoders/mine
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

from braindecode_pars._jobs.lock import folder_lock
from braindecode_pars._util.atomic import write_atomic
from braindecode_pars._util.logs import plural

logger = logging.getLogger(__name__)

#: The description keys of a recording that ``load_recordings`` wrote before
#: ``subject_from``: its file and, where the header named one, the patient code.
_LEGACY_KEYS = frozenset({"file", "subject"})
#: The command that rewrites stores, runs and exports (:func:`anonymize`).
COMMAND = "python -m braindecode_pars.store.identity"

_warned = set()  # the stores named by a warning in this process


def _header_identities(recordings):
    """The positions of the recordings whose description holds a header's patient code.

    That is a description written by ``load_recordings`` before ``subject_from``:
    ``file`` and ``subject`` and nothing else (no ``subject_from``, which says where
    a subject comes from since).

    Parameters
    ----------
    recordings : list of dict
        A store's ``recordings.json`` (``{"ch_names", "description"}`` each).

    Returns
    -------
    positions : list of int
    """
    out = []
    for i, meta in enumerate(recordings):
        description = meta.get("description") or {}
        if "subject" in description and "file" in description and set(description) <= _LEGACY_KEYS:
            out.append(i)
    return out


def _names(recordings, positions, shown=3):
    """``a.edf, b.edf, c.edf and 4 more``: the file names of ``positions``."""
    names = [Path(str(recordings[i]["description"]["file"])).name for i in positions]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def warn_header_identities(path, recordings=None):
    """Warn, once in a process for each store, when the store's descriptions hold EDF
    headers' patient codes (:func:`_header_identities`), naming the file and the
    recordings and how to rewrite them (:func:`anonymize`).

    Parameters
    ----------
    path : str | Path
        The store folder.
    recordings : list of dict | None
        Its ``recordings.json``, when read already.

    Returns
    -------
    positions : list of int
        The recordings concerned.
    """
    path = Path(path)
    if recordings is None:
        file = path / "recordings.json"
        recordings = json.loads(file.read_text()) if file.is_file() else []
    positions = _header_identities(recordings)
    key = str(path.resolve())
    if positions and key not in _warned:
        _warned.add(key)
        logger.warning(
            "'%s' holds the EDF headers' patient codes (often patients' names) as the "
            "'subject' of %s (%s): the store was written before subject_from. Rewrite "
            "it without them, each recording its own subject: %s '%s' "
            "(braindecode_pars.store.anonymize), then write it again with "
            "--subject-from to group recordings by person.",
            path / "recordings.json", plural(len(positions), "recording"),
            _names(recordings, positions), COMMAND, path,
        )  # fmt: skip
    return positions


def _anonymize_store(path):
    """Rewrite ``recordings.json``: each header's code replaced by the recording's file key."""
    from braindecode_pars.io.recordings import file_keys

    file = path / "recordings.json"
    recordings = json.loads(file.read_text())
    positions = _header_identities(recordings)
    if not positions:
        return []
    files = [
        (meta.get("description") or {}).get("file")
        for meta in recordings
        if (meta.get("description") or {}).get("file")
    ]
    keys = dict(zip(files, file_keys(files), strict=True))
    for i in positions:
        description = recordings[i]["description"]
        description["subject"] = keys[description["file"]]
        description["subject_from"] = "file"
    write_atomic(file, json.dumps(recordings))
    _warned.discard(str(path.resolve()))
    return [file]


def _anonymize_run(path):
    """Rewrite a run's ``config.json`` (the recordings counted, not named) or an
    export's ``run_config.json`` and card (the same, and nothing local: the store and
    the command's paths as placeholders, ``<store>``, unless the export named them, no
    salt)."""
    from braindecode_pars.models.card import listed_recordings, public_run_config

    written = []
    for name in ("config.json", "run_config.json"):
        file = path / name
        if not file.is_file():
            continue
        config = json.loads(file.read_text())
        if not isinstance(config, dict):
            continue
        public = public_run_config(config)
        if name == "config.json":  # the run's own record keeps where its store and run are
            public.update({k: config[k] for k in ("data.store", "command") if k in config})
        if listed_recordings(config) or (name == "run_config.json" and public != config):
            write_atomic(file, json.dumps(public, indent=1))
            written.append(file)
    card = path / "README.md"
    if (path / "run_config.json").is_file() and card.is_file():
        text = card.read_text()
        record = json.loads((path / "run_config.json").read_text())
        names = record.get("public_names") if isinstance(record, dict) else None

        def public(key, value):  # as public_run_config gives it, with the export's names
            return public_run_config({key: value}, names)[key]

        new = re.sub(r"(?m)^- recordings \((\d+)\): .*$", r"- recordings: \1", text)
        new = re.sub(  # the store and the command as public_run_config gives them
            r"(?m)^- store: (.*)\n",
            lambda m: "" if public("data.store", m[1]) == "<store>" else
            f"- store: {public('data.store', m[1])}\n",
            new,
        )  # fmt: skip
        new = re.sub(
            r"(?m)^(```bash\n)(braindecode-pars .*)$",
            lambda m: m[1] + public("command", m[2]),
            new,
        )
        if new != text:
            write_atomic(card, new)
            written.append(card)
    return written


def anonymize(path):
    """Rewrite a store, a pretraining run or an export written before ``subject_from``
    so that it names no one, in place.

    - A store (``recordings.json``): each recording whose ``subject`` is its header's
      patient code (:func:`_header_identities`) gets the subject a store gets now by
      default, its file (the path relative to the folder the store's files share,
      without the extension), and ``subject_from="file"``. To group by person, write
      the store again with ``subject_from`` (``store --subject-from``).
    - A run (``config.json``) or an export (``run_config.json``, ``README.md``): the
      list of recordings by name becomes their number and a hash
      (:func:`~braindecode_pars.models.card.public_run_config`); the card's line that
      listed them gives their number. An export's store and command name no local
      path (placeholders, ``<store>``, but for the names the export gave them), as
      exports are written now.

    Each file is written atomically; the folder is locked meanwhile (a build or a run
    in it refuses to start, and this call refuses a folder that one holds).

    Parameters
    ----------
    path : str | Path
        The folder of a store, a run or an export.

    Returns
    -------
    files : list of Path
        The files rewritten (none when the folder named no one).

    Raises
    ------
    FileNotFoundError
        When ``path`` is none of these.
    ValueError
        When it holds an unfinished store build (finish it, or start it again with
        ``overwrite=True``, first).
    """
    path = Path(path)
    known = ("recordings.json", "config.json", "run_config.json")
    if not any((path / name).is_file() for name in known):
        if (path / "build.json").is_file():
            raise ValueError(
                f"'{path}' holds an unfinished store build: finish it (the same store "
                "command) or start it again with --overwrite, then rewrite it."
            )
        raise FileNotFoundError(
            f"'{path}' is not a window store, a pretraining run or an export (it holds none "
            f"of {', '.join(known)})."
        )
    with folder_lock(path, "the rewrite of its descriptions"):
        if (path / "recordings.json").is_file():
            return _anonymize_store(path)
        return _anonymize_run(path)


def _main(argv=None):
    """``python -m braindecode_pars.store.identity PATH...``: :func:`anonymize` each."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(
            f"usage: {COMMAND} PATH [PATH ...]\n\nRewrite window stores, pretraining runs "
            "and exports written before subject_from so that they name no one: a store's "
            "header patient codes become each recording's file, a run's list of "
            "recordings their number and a hash.\n"
        )
        return 0 if argv else 2
    from braindecode_pars._jobs.lock import FolderLockedError, LockFileError

    for path in argv:
        try:
            files = anonymize(path)
        except (FileNotFoundError, ValueError, FolderLockedError, LockFileError) as err:
            raise SystemExit(f"{COMMAND}: {err}") from None
        done = ", ".join(f.name for f in files) if files else "nothing to rewrite"
        sys.stdout.write(f"{path}: {done}\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
