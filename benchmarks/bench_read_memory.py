"""Peak memory of ``read_windows`` on preloaded braindecode windows, this revision against
another, as a multiple of the array it returns.

``read_windows`` reads windows into one float32 array (n_windows, n_chans, n_times).
Up to b211f06 it read each preloaded recording through MNE's ``get_data`` (a float64
copy of the whole recording), kept its windows as views of that copy in a list,
converted every window to a float32 copy and ``np.stack``-ed them. This revision
allocates the output once and fills it window by window. This script
measures both on windows of a known size, built from ``mne.io.RawArray`` recordings
of white noise and cut with braindecode's ``create_fixed_length_windows``
(``preload=True``), for two layouts: the windows spread over several recordings, and
all of them in one recording.

Each figure comes from a fresh process that imports only the ``adapters`` module of
the revision measured (its file, with the package's ``__init__`` files left out), builds
the windows, then reads them once:

- ``tracemalloc``: the peak of the memory traced by Python's ``tracemalloc`` (NumPy's
  arrays included) during the read, above what was traced before it;
- ``VmHWM``: the growth of the peak resident memory during the read (``VmHWM`` of
  ``/proc/self/status``, reset just before it through ``/proc/self/clear_refs``), and
  the read's time (no ``tracemalloc`` running).

Usage (``--before`` is a checkout of the other revision)::

    git worktree add /tmp/before b211f06
    python benchmarks/bench_read_memory.py --before /tmp/before \
        --out benchmarks/results/read_memory.md
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import logging
import os
import statistics
import subprocess
import sys
import types
from pathlib import Path

from _measure import (
    check_at_least_one,
    compared_checkouts,
    in_child,
    machine,
    peak_growth,
    report_parser,
    write_report,
)

logger = logging.getLogger("bench_read_memory")
SFREQ = 100.0
METHODS = ("tracemalloc", "VmHWM")


def load_adapters(root):
    """``braindecode_pars.datasets.adapters`` of the checkout at ``root``, imported from
    its file; the package and its ``datasets`` subpackage are empty stand-ins whose
    ``__path__`` is that checkout's folder, so that the module's relative imports load
    that checkout's modules and no package ``__init__`` runs."""
    for name, folder in (
        ("braindecode_pars", Path(root) / "braindecode_pars"),
        ("braindecode_pars.datasets", Path(root) / "braindecode_pars" / "datasets"),
    ):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    module = importlib.import_module("braindecode_pars.datasets.adapters")
    if Path(module.__file__).resolve() != (Path(root) / "braindecode_pars" / "datasets" /
                                          "adapters.py").resolve():  # fmt: skip
        raise RuntimeError(f"imported {module.__file__}, not the adapters of {root}")
    return module


def make_windows(n_windows, n_chans, n_times, n_recordings, seed=0):
    """``n_windows`` preloaded braindecode windows of (n_chans, n_times), cut without
    overlap from ``n_recordings`` RawArray recordings of white noise (tens of microvolts,
    in volts as MNE holds EEG)."""
    import mne
    import numpy as np
    from braindecode.datasets import BaseConcatDataset, RawDataset
    from braindecode.preprocessing import create_fixed_length_windows

    if n_windows % n_recordings:
        raise SystemExit(
            f"bench_read_memory: --windows ({n_windows}) must be a multiple of the number "
            f"of recordings ({n_recordings})"
        )
    rng = np.random.default_rng(seed)
    info = mne.create_info(n_chans, SFREQ, "eeg")
    datasets = []
    for subject in range(n_recordings):
        data = 2e-5 * rng.standard_normal((n_chans, n_times * n_windows // n_recordings))
        raw = mne.io.RawArray(data, info, verbose="error")
        datasets.append(RawDataset(raw, {"subject": subject, "label": subject % 2}, "label"))
        del data
    return create_fixed_length_windows(
        BaseConcatDataset(datasets),
        window_size_samples=n_times,
        window_stride_samples=n_times,
        on_last_window="drop",
        preload=True,
    )


def child(root, method, n_windows, n_chans, n_times, n_recordings):
    """One measurement in this (fresh) process; print it as a JSON line."""
    import gc
    import tracemalloc

    adapters = load_adapters(root)
    windows = make_windows(n_windows, n_chans, n_times, n_recordings)
    gc.collect()
    out = {}
    if method == "tracemalloc":
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        data = adapters.read_windows(windows)
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        out["peak_bytes"] = peak
    elif method == "VmHWM":
        result = {}

        def read():
            result["data"] = adapters.read_windows(windows)

        growth_mib, out["seconds"] = peak_growth(read)
        out["peak_bytes"] = growth_mib * 2**20
        data = result["data"]
    else:
        raise ValueError(method)
    if data.X.shape != (n_windows, n_chans, n_times):
        raise RuntimeError(f"read {data.X.shape}, expected {(n_windows, n_chans, n_times)}")
    out["output_bytes"] = data.X.nbytes
    print(json.dumps(out))


#: The files a read runs: ``adapters`` and the package modules it imports.
READ_FILES = ("braindecode_pars/datasets/adapters.py", "braindecode_pars/datasets/resample.py",
              "braindecode_pars/datasets/windowing.py", "braindecode_pars/_checks.py")  # fmt: skip


def revision(root):
    """The checkout at ``root``: its commit, the last commit that changed the files a read
    runs (:data:`READ_FILES`), and whether they differ from it there."""

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    last = git("log", "-1", "--format=%h", "--", *READ_FILES)
    changed = git("status", "--porcelain", "--", *READ_FILES)
    return f"{head}, read code of {last}" + (" with uncommitted changes" if changed else "")


def measure(script, roots, layouts, args):
    """Rows (layout, revision name, method, [measurements]), the revisions alternating."""
    rows = {}
    for n_recordings in layouts:
        for _ in range(args.repeats):
            for name, root in roots.items():
                for method in METHODS:
                    m = in_child(script, root, method, args.windows, args.chans, args.times,
                                 n_recordings)  # fmt: skip
                    rows.setdefault((n_recordings, name, method), []).append(m)
                    logger.info("%d recordings, %s, %s: %s", n_recordings, name, method, m)
    return rows


def report(rows, roots, args):
    """Markdown lines of the results."""
    with open("/proc/meminfo") as f:
        total_gib = int(f.readline().split()[1]) / 2**20
    output_mib = args.windows * args.chans * args.times * 4 / 2**20
    names = {name: f"{name} ({revision(root)})" for name, root in roots.items()}
    command = (
        f"python benchmarks/bench_read_memory.py --before {args.before} --windows "
        f"{args.windows} --chans {args.chans} --times {args.times} --recordings "
        f"{' '.join(map(str, args.recordings))} --repeats {args.repeats} --out {args.out or '...'}"
    )
    lines = [
        "# Peak memory of read_windows on preloaded braindecode windows",
        "",
        f"Machine: {machine()}, {os.cpu_count()} cores, {total_gib:.0f} GiB of memory. "
        f"Date: {datetime.date.today().isoformat()}.",
        "",
        f"Command: `{command}`",
        "",
        f"{args.windows} windows of {args.chans} channels x {args.times} samples, cut without "
        "overlap (`create_fixed_length_windows`, `preload=True`) from RawArray recordings of "
        "white noise; the output of `read_windows` is a float32 array of "
        f"{output_mib:.1f} MiB. Each figure from a fresh process that imports only the "
        "revision's `datasets/adapters.py`; medians over "
        f"{args.repeats} processes per cell (the revisions alternating). `tracemalloc`: the "
        "peak of the memory Python traces (NumPy's arrays included) during the read, above "
        "what was traced before it. `VmHWM`: the growth of the peak resident memory during "
        "the read (reset just before it), without tracemalloc; time: that read's.",
        "",
        "| recordings | revision | tracemalloc peak (MiB) | x output | VmHWM growth (MiB) | "
        "x output | time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_recordings in args.recordings:
        for name in roots:
            traced = [m["peak_bytes"] for m in rows[(n_recordings, name, "tracemalloc")]]
            rss = rows[(n_recordings, name, "VmHWM")]
            out_bytes = rss[0]["output_bytes"]
            traced = statistics.median(traced)
            growth = statistics.median(m["peak_bytes"] for m in rss)
            seconds = statistics.median(m["seconds"] for m in rss)
            per = args.windows // n_recordings
            lines.append(
                f"| {n_recordings} of {per} windows | {names[name]} | {traced / 2**20:.1f} | "
                f"{traced / out_bytes:.2f} | {growth / 2**20:.1f} | {growth / out_bytes:.2f} | "
                f"{seconds:.3f} |"
            )
    lines += [
        "",
        "Reading the figures: before, the list of windows held views into the float64 "
        "`get_data` copy of every recording read (together twice the output, whatever the "
        "number of recordings), then their float32 copies (once the output) and the "
        "stacked array (once): four times the output at peak. After, the output is "
        "allocated once and filled; the rest is one window's float64 copy and the NaN "
        "check's boolean mask of a few windows.",
    ]
    return lines


def memory_parser(doc, n_child):
    """The command line of a before/after memory benchmark on built windows (this script
    and ``bench_fit_memory.py``): ``--out``, ``--before``, the windows' sizes,
    ``--repeats``, and ``--child`` (``n_child`` values) for its fresh processes."""
    parser = report_parser(doc)
    parser.add_argument("--before", help="a checkout of the other revision (git worktree add)")
    parser.add_argument("--windows", type=int, default=400)
    parser.add_argument("--chans", type=int, default=19)
    parser.add_argument("--times", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="processes per cell")
    parser.add_argument("--child", nargs=n_child, help=argparse.SUPPRESS)
    return parser


def memory_checkouts(parser, args, needs, *counts):
    """The checkouts to measure, by name (see ``compared_checkouts``), once the options of
    :func:`memory_parser` are checked: the sizes, ``--repeats`` and the options
    ``counts`` at least 1, ``--before`` a checkout holding the file ``needs``."""
    check_at_least_one(parser, args, "windows", "chans", "times", "repeats", *counts)
    return compared_checkouts(parser, args.before, needs)


def main(argv=None):
    parser = memory_parser(__doc__, n_child=6)
    parser.add_argument(
        "--recordings", type=int, nargs="+", default=[8, 1],
        help="layouts: the windows spread over this many recordings",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.child:
        root, method, *sizes = args.child
        return child(root, method, *map(int, sizes))
    roots = memory_checkouts(parser, args, "braindecode_pars/datasets/adapters.py")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rows = measure(os.path.abspath(__file__), roots, args.recordings, args)
    write_report(report(rows, roots, args), args.out)


if __name__ == "__main__":
    sys.exit(main())
