"""Faults, tested: ``braindecode-pars store`` killed at random points, resumed, and compared
with a build that was never stopped; a full disk; a second build into the same folder.

``--part store`` writes N small synthetic FIF recordings (3 EEG channels and an ECG,
250 Hz) to a temporary folder and builds their store once, uninterrupted (the
reference). Then, for each signal (SIGTERM, SIGKILL) and trial, it starts ``store
--jobs 2`` in a fresh process, waits until a seeded random number of recordings are
committed (journal lines) plus a seeded random delay, sends the signal, and records:

- the point of interruption (recordings committed when the signal was sent, and the
  delay after that), the command's exit status and the seconds it took to end;
- the processes it had started (its ``--jobs`` workers) still alive 10 s after it
  ended (none should be: they end with their parent);
- whether the same command, run again, resumes to a store of the reference's bytes.

It also runs ``store`` under a file size limit (``RLIMIT_FSIZE``, as a full disk: a
write fails) smaller than the store, checks that it is refused with a message and
that the same command without the limit resumes to the reference's bytes, and starts
a second ``store`` into a folder while a first builds there (refused, naming the
first; the first ends with the reference's bytes). ``benchmarks/tests/test_store_faults.py``
runs the same harness on a handful of trials.

Usage::

    python -m benchmarks.bench_faults --part store --out benchmarks/results/faults_store.md
    python -m benchmarks.bench_faults --part store --trials 1  # a quick check
"""

from __future__ import annotations

import datetime
import filecmp
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

#: The ``store`` flags of every build but ``--out`` and ``--jobs``.
STORE_FLAGS = ["--sfreq", "100", "--window-seconds", "5", "--stride-seconds", "5"]
#: Seconds a stopped command's processes are given to end.
GRACE_SECONDS = 10.0


def write_recordings(folder, n, seconds=900.0, sfreq=250.0):
    """``n`` FIF recordings of 3 EEG channels and an ECG; returns their glob."""
    import mne

    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        rng = np.random.default_rng(i)
        data = 1e-5 * rng.standard_normal((4, int(seconds * sfreq)))
        info = mne.create_info(["C3", "C4", "Cz", "ECG"], sfreq, ["eeg"] * 3 + ["ecg"])
        raw = mne.io.RawArray(data, info, verbose="error")
        raw.save(folder / f"r{i:02d}_raw.fif", verbose="error", overwrite=True)
    return str(folder / "*.fif")


def store_argv(pattern, out, jobs):
    return ["store", "--recordings", pattern, "--out", str(out), "--jobs", str(jobs), *STORE_FLAGS]


def run_here(pattern, out, jobs=1):
    """``store`` in this process (a clean build, or the resume of a stopped one)."""
    from braindecode_pars import cli

    cli.main(store_argv(pattern, out, jobs))


def same_store(a, b):
    """Whether store folders ``a`` and ``b`` hold the same files with the same bytes."""
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(
        filecmp.cmp(Path(a) / n, Path(b) / n, shallow=False) for n in names
    )


def committed(out):
    """Recordings committed in the build at ``out`` (complete journal lines)."""
    journal = Path(out) / "journal.jsonl"
    return journal.read_bytes().count(b"\n") if journal.exists() else 0


def start_store(pattern, out, jobs=2, limit=None):
    """``store`` in a fresh process (its output in ``<out>.log``), optionally under a
    file size limit of ``limit`` bytes."""
    import braindecode_pars

    root = str(Path(braindecode_pars.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    log = open(f"{out}.log", "wb")  # noqa: SIM115 (the child's; closed by the caller)
    process = subprocess.Popen(
        [sys.executable, "-m", "braindecode_pars.cli", *store_argv(pattern, out, jobs)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=None if limit is None else limited,
    )
    process.log = log
    return process


def wait_for(out, process, count, timeout=120.0):
    """Wait until ``count`` recordings are committed at ``out`` (the build started for
    0), or the process ends."""
    deadline = time.monotonic() + timeout
    journal = Path(out) / "journal.jsonl"
    while time.monotonic() < deadline and process.poll() is None:
        if journal.exists() and committed(out) >= count:
            return
        time.sleep(0.01)


def alive(processes):
    """Those of ``processes`` (psutil) still running (a zombie has ended)."""
    import psutil

    left = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                left.append(p)
        except psutil.NoSuchProcess:
            pass
    return left


def finish(process):
    """Wait for ``process`` (killed if still running after 120 s); its output."""
    try:
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.log.close()
    return Path(process.log.name).read_text(errors="replace")


def store_trial(pattern, reference, out, sig, point, delay, jobs=2):
    """One trial: ``store --jobs`` stopped by ``sig`` once ``point`` recordings are
    committed and ``delay`` seconds more, then resumed here; its figures."""
    import psutil

    process = start_store(pattern, out, jobs)
    wait_for(out, process, point)
    time.sleep(delay)
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    at_signal = committed(out)
    sent = time.monotonic()
    process.send_signal(sig)
    output = finish(process)
    seconds = time.monotonic() - sent
    deadline = time.monotonic() + GRACE_SECONDS
    while alive(children) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive(children)
    for p in left:  # not to leave them to the next trial
        p.kill()
    run_here(pattern, out)
    return {
        "signal": signal.Signals(sig).name,
        "point": point,
        "delay": delay,
        "committed": at_signal,
        "status": process.returncode,
        "seconds": seconds,
        "workers": len(children),
        "left": len(left),
        "equal": same_store(reference, out),
        "output": output,
    }


def store_faults(folder, signals=("SIGTERM", "SIGKILL"), trials=3, seed=0, recordings=6):
    """The trials of ``--part store`` in ``folder``: (reference folder, rows)."""
    folder = Path(folder)
    pattern = write_recordings(folder / "rec", recordings)
    reference = folder / "reference"
    run_here(pattern, reference)
    rng = np.random.default_rng(seed)
    rows = []
    for name in signals:
        for trial in range(trials):
            point = int(rng.integers(0, recordings - 1))  # the last one left to build
            delay = float(rng.uniform(0.0, 0.2))
            out = folder / f"{name}-{trial}"
            rows.append(store_trial(pattern, reference, out, getattr(signal, name), point, delay))
    return pattern, reference, rows


def full_disk(pattern, reference, out, recordings=2.5):
    """``store`` under a file size limit of ``recordings`` recordings' data, then resumed
    here without it: (exit status, its output, recordings committed, equal)."""
    from braindecode_pars.store.write import read_window_store

    recs, _, _ = read_window_store(reference, descriptions=False)
    limit = int(recordings * recs[0].nbytes)
    process = start_store(pattern, out, jobs=1, limit=limit)
    output = finish(process)
    done = committed(out)
    run_here(pattern, out)
    return process.returncode, output, done, same_store(reference, out)


def second_build(pattern, reference, out):
    """A second ``store`` (here) into ``out`` while a first (another process) builds
    there: (the first's pid, the second's message, the first's status, equal)."""
    from braindecode_pars import cli

    first = start_store(pattern, out, jobs=1)
    wait_for(out, first, 1)
    try:
        cli.main(store_argv(pattern, out, 1))
        message = None
    except SystemExit as err:
        message = str(err.code)
    finish(first)
    return first.pid, message, first.returncode, same_store(reference, out)


def store_report(folder, trials, seed, recordings):
    """The lines of ``faults_store.md``."""
    load = os.getloadavg()[0]
    start = time.monotonic()
    pattern, reference, rows = store_faults(folder, trials=trials, seed=seed, recordings=recordings)
    status, output, done, disk_equal = full_disk(pattern, reference, Path(folder) / "disk")
    pid, message, first, second_equal = second_build(pattern, reference, Path(folder) / "two")
    refused = "Cannot write the store" in output
    lines = [
        "# Faults: `braindecode-pars store` stopped, killed, on a full disk, built twice",
        "",
        f"{datetime.date.today()}, {os.cpu_count()} cores (load average {load:.2f} before), "
        f"Python {sys.version.split()[0]}; written by `benchmarks/bench_faults.py --part "
        f"store --trials {trials} --seed {seed} --recordings {recordings}` in "
        f"{time.monotonic() - start:.0f} s.",
        "",
        f"{recordings} synthetic FIF recordings (3 EEG channels, 15 minutes, 250 Hz), stored "
        "at 100 Hz in 5-s windows by `store --jobs 2`, stopped by a signal once a seeded "
        "random number of recordings were committed plus a random delay of up to 0.2 s, "
        "then resumed by the same command; compared byte for byte with an uninterrupted "
        "build. Workers: the command's processes when the signal was sent; left: those "
        f"alive {GRACE_SECONDS:g} s after it ended.",
        "",
        "| signal | trial | committed at the signal | delay s | exit status | s to end | "
        "workers | left | resumed store equal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, row in enumerate(rows):
        lines.append(
            f"| {row['signal']} | {i % trials + 1} | {row['committed']} | {row['delay']:.2f} | "
            f"{row['status']} | {row['seconds']:.2f} | {row['workers']} | {row['left']} | "
            f"{'yes' if row['equal'] else 'NO'} |"
        )
    equal = sum(row["equal"] for row in rows)
    left = sum(row["left"] for row in rows)
    lines += [
        "",
        f"Trials: {len(rows)} ({', '.join(sorted({r['signal'] for r in rows}))}); stores "
        f"equal after the resume: {equal} of {len(rows)}; processes left: {left}.",
        "",
        f"Full disk (a file size limit of 2.5 recordings' data, `RLIMIT_FSIZE`): exit status "
        f"{status}, refused with a message: {'yes' if refused else 'NO'}, recordings kept: "
        f"{done}, resumed store equal: {'yes' if disk_equal else 'NO'}.",
        "",
        f"A second `store` into a folder being built by process {pid}: "
        f"{'refused' if message and str(pid) in message else 'NOT refused'} "
        f'("{message}"); the first ended with status {first}, its store equal: '
        f"{'yes' if second_equal else 'NO'}.",
    ]
    return lines


def main():
    from benchmarks.lib.measure import report_parser, write_report

    parser = report_parser(__doc__)
    parser.add_argument("--part", choices=["store"], required=True, help="what to fault")
    parser.add_argument("--trials", type=int, default=5, help="trials per signal")
    parser.add_argument("--seed", type=int, default=0, help="seed of the points")
    parser.add_argument("--recordings", type=int, default=8, help="synthetic recordings")
    args = parser.parse_args()
    import logging

    logging.disable(logging.INFO)  # the resumes' lines: the report says what they did
    with tempfile.TemporaryDirectory() as tmp:
        lines = store_report(tmp, args.trials, args.seed, args.recordings)
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
