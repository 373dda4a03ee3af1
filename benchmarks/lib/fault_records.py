"""Records of the fault harness's trials: what ``bench_faults`` and
``bench_faults_pretrain`` write with ``--records PATH``.

A record is a JSON file of the rows real trials gave (the harness's own dicts, tuples as
lists), with the command that wrote it, the commit, the date, the machine and the CPU
seconds the recording took. It publishes nothing local: the temporary folder of the
trials, the checkout, the Python installation, the home folder and the host's name are
replaced by placeholders (``<tmp>``, ``<repo>``, ``<python>``, ``<home>``, ``<host>``), and
any other absolute path by ``<path>``. ``benchmarks/tests/test_fault_records.py`` runs the
harness's report code on the records in ``benchmarks/tests/records/`` without starting a
process (issue 89: the trials themselves run in ``make test-faults``).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import resource
import socket
import sys
import tempfile
from pathlib import Path

from benchmarks.lib.measure import ROOT, command_line, cpu_model, git_commit

#: An absolute path that no placeholder replaced: a ``/`` that starts a word, followed by
#: at least two parts.
_PATH = re.compile(r"(?<![\w<>./-])/[\w.+-]+(?:/[\w.+@-]*)+")


def local_places(*folders):
    """``(text, placeholder)`` for each local path or name a record may hold, the longest
    first: ``folders`` (where the trials ran) and the system's temporary folder as
    ``<tmp>``, the checkout as ``<repo>``, the Python installation as ``<python>``, the
    home folder as ``<home>`` and the host's name as ``<host>``."""
    places = [(str(f), "<tmp>") for f in folders]
    places += [(str(Path(f).resolve()), "<tmp>") for f in folders]
    places += [(tempfile.gettempdir(), "<tmp>"), (str(ROOT), "<repo>")]
    places += [(sys.prefix, "<python>"), (sys.base_prefix, "<python>")]
    places += [(os.path.expanduser("~"), "<home>")]
    host = socket.gethostname()
    places = [(text, mark) for text, mark in places if len(text) > 1]
    places.sort(key=lambda place: -len(place[0]))
    return places + ([(host, "<host>")] if len(host) > 2 else [])


def scrub(value, places):
    """``value`` (JSON-ready: dicts, lists, tuples, strings, numbers) with each local text
    of ``places`` (:func:`local_places`) replaced by its placeholder and any other
    absolute path by ``<path>``; tuples become lists."""
    if isinstance(value, str):
        for text, mark in places:
            value = value.replace(text, mark)
        return _PATH.sub("<path>", value)
    if isinstance(value, dict):
        return {key: scrub(item, places) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(item, places) for item in value]
    return value


def cpu_seconds():
    """The CPU seconds (user and system) of this process and of its children that ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def write_records(path, module, argv, records, folders=()):
    """Write ``records`` (a dict of the trials' results) to the JSON file ``path``, with
    the command (``python -m module argv``), the commit, the date, the machine and the
    CPU seconds so far (:func:`cpu_seconds`), nothing local (:func:`scrub`; ``folders``:
    where the trials ran, as ``<tmp>``). Returns what it wrote."""
    head = {
        "command": command_line(module, argv),
        "commit": git_commit(dirty=True),
        "date": str(datetime.date.today()),
        "machine": cpu_model(),
        "python": sys.version.split()[0],
        "cpu_seconds": round(cpu_seconds(), 1),
    }
    written = scrub({**head, **records}, local_places(*folders))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(written, indent=1) + "\n")
    return written


def read_records(path):
    """The records in the JSON file ``path`` (:func:`write_records`)."""
    return json.loads(Path(path).read_text())
