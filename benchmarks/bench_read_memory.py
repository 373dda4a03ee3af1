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

Each figure comes from a fresh process that imports only the module of ``read_windows``
of the revision measured (``io/windows.py``, or ``datasets/adapters.py`` before the
package's subfolders: its file, with the package's ``__init__`` files left out), builds
the windows, then reads them once:

- ``tracemalloc``: the peak of the memory traced by Python's ``tracemalloc`` (NumPy's
  arrays included) during the read, above what was traced before it;
- ``VmHWM``: the growth of the peak resident memory during the read (``VmHWM`` of
  ``/proc/self/status``, reset just before it through ``/proc/self/clear_refs``), and
  the read's time (no ``tracemalloc`` running).

Usage (``--before`` is a checkout of the other revision)::

    git worktree add /tmp/before b211f06
    python -m benchmarks.bench_read_memory --before /tmp/before \
        --out benchmarks/results/read_memory.md
"""

from __future__ import annotations

import datetime
import importlib
import json
import logging
import os
import statistics
import sys
import types
from pathlib import Path

from benchmarks.lib.measure import (
    in_child,
    machine,
    peak_growth,
    write_report,
)
from benchmarks.lib.memory_checkouts import make_windows, memory_checkouts, memory_parser, revision

logger = logging.getLogger("bench_read_memory")
METHODS = ("tracemalloc", "VmHWM")


def load_adapters(root):
    """``read_windows``'s module of the checkout at ``root`` (``io/windows.py``, or
    ``datasets/adapters.py`` in the layout before the package's subfolders), imported
    from its file; the package and its subpackages are empty stand-ins whose
    ``__path__`` is that checkout's folder, so that the module's imports load that
    checkout's modules and no package ``__init__`` runs."""
    package = Path(root) / "braindecode_pars"
    layouts = {"io/windows.py": "io.windows", "datasets/adapters.py": "datasets.adapters"}
    file = next((f for f in layouts if (package / f).is_file()), None)
    if file is None:
        raise RuntimeError(f"{root} holds neither io/windows.py nor datasets/adapters.py")
    folders = [package] + sorted(p.parent for p in package.glob("*/__init__.py"))
    for folder in folders:
        stand_in = ".".join(("braindecode_pars", *folder.relative_to(package).parts))
        module = types.ModuleType(stand_in)
        module.__path__ = [str(folder)]
        sys.modules[stand_in] = module
    module = importlib.import_module(f"braindecode_pars.{layouts[file]}")
    if Path(module.__file__).resolve() != (package / file).resolve():
        raise RuntimeError(f"imported {module.__file__}, not the {file} of {root}")
    return module


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


def measure(module, roots, layouts, args):
    """Rows (layout, revision name, method, [measurements]) of the script ``module`` (its
    dotted name), the revisions alternating."""
    rows = {}
    for n_recordings in layouts:
        for _ in range(args.repeats):
            for name, root in roots.items():
                for method in METHODS:
                    m = in_child(module, root, method, args.windows, args.chans, args.times,
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
        f"python -m benchmarks.bench_read_memory --before {args.before} --windows "
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
        "revision's module of `read_windows`; medians over "
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
    roots = memory_checkouts(parser, args, "braindecode_pars/__init__.py")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rows = measure(__spec__.name, roots, args.recordings, args)
    write_report(report(rows, roots, args), args.out)


if __name__ == "__main__":
    sys.exit(main())
