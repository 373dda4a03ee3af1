"""Rate of ``braindecode-pars store`` with one and several processes, and the bytes of a
float16 store against a float32 one.

Writes N synthetic EDF recordings (19 EEG channels named as EDF files name them, an
ECG channel, 256 Hz, 10 minutes each by default) to a temporary folder, then runs
``braindecode-pars store --recordings FOLDER --jobs J`` (the paper's preprocessing of
a clinical tree: 200 Hz, 0.3-75 Hz, 60 Hz notch, 30-s windows without overlap) once
per ``--jobs`` value and ``--dtype``, each in a fresh process, and records:

- the build's seconds (``cli.main`` timed inside the process: the interpreter's start
  and the imports, the same for every row, are apart in ``command s``), its
  recordings per second and its rate against one process;
- whether the stores of every ``--jobs`` value hold the same bytes;
- the data file's bytes and the whole store's, float16 against float32.

Run it on an idle machine: the rows share its cores. The load average before the
first row is in the report.

Usage::

    python -m benchmarks.bench_store --out benchmarks/results/store.md
    python -m benchmarks.bench_store --recordings 2 --minutes 1  # a quick check
"""

from __future__ import annotations

import argparse
import datetime
import filecmp
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.lib.edf_recordings import write_recordings
from benchmarks.lib.measure import child_env, table_head, write_report

#: The ``store`` flags of every row but ``--jobs`` and ``--dtype``.
STORE_FLAGS = ["--sfreq", "200", "--l-freq", "0.3", "--h-freq", "75", "--notch-freq", "60",
               "--window-seconds", "30", "--stride-seconds", "30"]  # fmt: skip


def child(folder, out, jobs, dtype):
    """Run ``store`` here, timed from the call (the imports done): print its JSON."""
    from braindecode_pars import cli

    argv = ["store", "--recordings", folder, "--out", out, "--jobs", str(jobs)]
    argv += ["--dtype", dtype, "--overwrite", *STORE_FLAGS]
    start = time.perf_counter()
    cli.main(argv)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds}))


def run_store(folder, out, jobs, dtype):
    """One row: ``store`` in a fresh process; its build seconds and the command's."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", __spec__.name, "--child", str(folder), str(out), str(jobs), dtype],
        capture_output=True,
        text=True,
        env=child_env(),
    )
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"store --jobs {jobs} --dtype {dtype} failed:\n{done.stderr[-3000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return dict(row, command=wall)


def folder_bytes(folder):
    return sum(p.stat().st_size for p in Path(folder).iterdir() if p.is_file())


def same_bytes(a, b):
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(
        filecmp.cmp(Path(a) / n, Path(b) / n, shallow=False) for n in names
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="write the Markdown report here")
    parser.add_argument("--recordings", type=int, default=12, help="synthetic EDF recordings")
    parser.add_argument("--minutes", type=float, default=10.0, help="length of a recording")
    parser.add_argument("--jobs", nargs="+", type=int, default=[1, 2], help="rows' --jobs")
    parser.add_argument("--child", nargs=4, metavar=("FOLDER", "OUT", "JOBS", "DTYPE"))
    args = parser.parse_args()
    if args.child:
        folder, out, jobs, dtype = args.child
        child(folder, out, int(jobs), dtype)
        return
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_recordings(tmp / "edf", args.recordings, 60 * args.minutes, distinct=4)
        rows = {}
        for jobs in args.jobs:
            rows[jobs] = run_store(tmp / "edf", tmp / f"jobs{jobs}", jobs, "float32")
        half = run_store(tmp / "edf", tmp / "float16", args.jobs[0], "float16")
        same = all(same_bytes(tmp / f"jobs{args.jobs[0]}", tmp / f"jobs{j}") for j in args.jobs)
        info = json.loads((tmp / f"jobs{args.jobs[0]}" / "info.json").read_text())
        sizes = {
            "float32": (
                os.path.getsize(tmp / f"jobs{args.jobs[0]}" / "data.f32"),
                folder_bytes(tmp / f"jobs{args.jobs[0]}"),
            ),
            "float16": (
                os.path.getsize(tmp / "float16" / "data.f16"),
                folder_bytes(tmp / "float16"),
            ),
        }
    n = args.recordings
    base = rows[args.jobs[0]]["seconds"]
    lines = [
        "# `braindecode-pars store`: processes and float16",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores (load average {load:.2f} before "
        f"the first row), Python {sys.version.split()[0]}; written by "
        "`benchmarks/bench_store.py`"
        + (
            f" (--recordings {n} --minutes {args.minutes:g})"
            if n != 12 or args.minutes != 10
            else ""
        )
        + ".",
        "",
        f"{n} synthetic EDF recordings of {args.minutes:g} minutes (19 EEG channels and an "
        "ECG channel at 256 Hz), stored at 200 Hz (0.3-75 Hz, 60 Hz notch, 30-s windows): "
        f"{info['n_windows']} windows.",
        "",
        *table_head("--jobs", "build s", "recordings/s", "rate / 1 process", "command s"),
    ]
    for jobs, row in rows.items():
        lines.append(
            f"| {jobs} | {row['seconds']:.1f} | {n / row['seconds']:.2f} | "
            f"{base / row['seconds']:.2f} | {row['command']:.1f} |"
        )
    lines += [
        "",
        f"The stores of --jobs {', '.join(map(str, args.jobs))} hold the same bytes: "
        f"{'yes' if same else 'NO'}.",
        "",
        *table_head("--dtype", "data file bytes", "store bytes", "share of float32", "build s"),
    ]
    for dtype, (data, whole) in sizes.items():
        seconds = half["seconds"] if dtype == "float16" else base
        lines.append(
            f"| {dtype} | {data:,} | {whole:,} | {whole / sizes['float32'][1]:.3f} | "
            f"{seconds:.1f} |"
        )
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
