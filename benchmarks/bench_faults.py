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

The same trials are run with the signal sent to the command's whole process group at
once (``kill -- -PGID``, as SLURM signals every process of a job at its time limit: the
command and its workers together); they also record whether the group is empty (no
process of it left) once the command has ended.

Then it kills ``store --jobs 2`` (SIGKILL) at each point of the store's finish
(``braindecode_pars.store.write.FINISH_STEPS``: once a step is on the disk, and while a
file is written, before it takes its name), and records whether the store left reads
back as the reference (whole), is refused as incomplete, and whether the same command
resumes it to the reference's bytes.

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

from benchmarks.lib.process_groups import group_empty, send

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


def _env():
    """This environment, the checkout's root first on the path (the package, the lab)."""
    import braindecode_pars

    root = str(Path(braindecode_pars.__file__).resolve().parents[1])
    return dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))


def start_store(pattern, out, jobs=2, limit=None, group=False, code=None):
    """``store`` in a fresh process (its output in ``<out>.log``), optionally under a
    file size limit of ``limit`` bytes, or as the leader of a process group of its own
    (``group``: its group id is its pid, as a job's under a scheduler), or run by the
    Python ``code`` (given the command's arguments) instead of the command line's module."""

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    start = ["-m", "braindecode_pars.cli"] if code is None else ["-c", code]
    log = open(f"{out}.log", "wb")  # noqa: SIM115 (the child's; closed by the caller)
    process = subprocess.Popen(
        [sys.executable, *start, *store_argv(pattern, out, jobs)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=_env(),
        preexec_fn=None if limit is None else limited,
        start_new_session=group,
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


def store_trial(pattern, reference, out, sig, point, delay, jobs=2, group=False):
    """One trial: ``store --jobs`` stopped by ``sig`` once ``point`` recordings are
    committed and ``delay`` seconds more, then resumed here; its figures. ``group``: the
    signal goes to every process of the command at once (``kill -- -PGID``)."""
    import psutil

    process = start_store(pattern, out, jobs, group=group)
    wait_for(out, process, point)
    time.sleep(delay)
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    at_signal = committed(out)
    sent = time.monotonic()
    send(process, sig, group)
    output = finish(process)
    seconds = time.monotonic() - sent
    deadline = time.monotonic() + GRACE_SECONDS
    while alive(children) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive(children)
    empty = group_empty(process.pid) if group else None
    for p in left:  # not to leave them to the next trial
        p.kill()
    run_here(pattern, out)
    return {
        "signal": signal.Signals(sig).name,
        "group": group,
        "group_empty": empty,
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


def store_faults(
    folder, signals=("SIGTERM", "SIGKILL"), trials=3, seed=0, recordings=6, targets=("main",)
):
    """The trials of ``--part store`` in ``folder``: (recordings' glob, reference folder,
    rows). ``targets``: where the signal goes, ``"main"`` (the command's process) and/or
    ``"group"`` (every process of the command at once), each with its own trials."""
    folder = Path(folder)
    pattern = write_recordings(folder / "rec", recordings)
    reference = folder / "reference"
    run_here(pattern, reference)
    rng = np.random.default_rng(seed)
    rows = []
    for target in targets:
        for name in signals:
            for trial in range(trials):
                point = int(rng.integers(0, recordings - 1))  # the last one left to build
                delay = float(rng.uniform(0.0, 0.2))
                out = folder / f"{target}-{name}-{trial}"
                rows.append(
                    store_trial(pattern, reference, out, getattr(signal, name), point, delay,
                                group=target == "group")
                )  # fmt: skip
    return pattern, reference, rows


def finish_points():
    """The points of the finish at which :func:`finish_kills` kills a build, in their
    order: ``("during", file)``, once the file is written, before it takes its name (the
    data: before anything of the finish is done); ``("after", step)``, once the step of
    ``braindecode_pars.store.write.FINISH_STEPS`` is on the disk."""
    from braindecode_pars.store.write import FINISH_STEPS

    during = ("data", "recordings.json", "info.json", "index.npz")  # the renames
    points = []
    for step in FINISH_STEPS:
        points += [("during", step)] if step in during else []
        points.append(("after", step))
    return points


#: The Python a build killed at a point of its finish runs (after a line that sets
#: ``WHEN`` and ``STEP``): the command line, given the command's arguments, with a SIGKILL
#: of itself at that point (after the step: on the finish's own debug line that the step
#: is done; during a write: the rename that ends it, replaced in this process only).
KILLED_AT = """
import logging, os, signal, sys
from pathlib import Path
from braindecode_pars import cli
argv = sys.argv[1:]
out = Path(argv[argv.index("--out") + 1])
def kill():
    os.kill(os.getpid(), signal.SIGKILL)
if WHEN == "after":
    class KillAfter(logging.Handler):
        def emit(self, record):
            if record.msg.endswith(": %s done.") and record.args[-1] == STEP:
                kill()
    write_log = logging.getLogger("braindecode_pars.store.write")
    write_log.setLevel(logging.DEBUG)
    write_log.addHandler(KillAfter())
else:
    target = out / ("data.f32" if STEP == "data" else STEP)
    real_replace = os.replace
    def replace(source, destination):
        if Path(destination) == target:
            kill()
        return real_replace(source, destination)
    os.replace = replace
cli.main(argv)
"""


def reads_as_reference(out, reference):
    """``"whole"`` where the store at ``out`` reads back as ``reference`` (recordings,
    index, info and descriptions), ``"refused"`` where reading it is refused (an error:
    it is not complete), ``"WRONG"`` where it reads back otherwise."""
    from braindecode_pars.store import read_window_store

    try:
        recordings, index, info = read_window_store(out)
    except (OSError, ValueError):
        return "refused"
    expected, expected_index, expected_info = read_window_store(reference)
    same = (
        np.array_equal(index, expected_index)
        and info == expected_info
        and len(recordings) == len(expected)
        and all(np.array_equal(a, b) for a, b in zip(recordings, expected, strict=True))
    )
    return "whole" if same else "WRONG"


def finish_kill(pattern, reference, out, when, step, jobs=2):
    """``store --jobs`` (a process group of its own) killed by SIGKILL at ``(when,
    step)`` of its finish (:func:`finish_points`), then the same command here; its
    figures: the exit status, the temporary files left, what the store left is
    (:func:`reads_as_reference`), whether the group is empty and whether the resumed
    store is the reference's bytes."""
    code = f"WHEN, STEP = {when!r}, {step!r}\n{KILLED_AT}"
    process = start_store(pattern, out, jobs, group=True, code=code)
    output = finish(process)
    empty = group_empty(process.pid)
    temporary = sorted(n for n in os.listdir(out) if n.startswith(".") and n.endswith(".tmp"))
    left = reads_as_reference(out, reference)
    run_here(pattern, out)
    return {
        "when": when,
        "step": step,
        "status": process.returncode,
        "temporary": temporary,
        "left": left,
        "group_empty": empty,
        "equal": same_store(reference, out),
        "output": output,
    }


def finish_kills(pattern, reference, folder, points=None, jobs=2):
    """:func:`finish_kill` at each of ``points`` (all of :func:`finish_points` by
    default) in ``folder``: the rows."""
    points = finish_points() if points is None else points
    Path(folder).mkdir(parents=True, exist_ok=True)
    return [
        finish_kill(pattern, reference, Path(folder) / f"finish-{when}-{step}", when, step, jobs)
        for when, step in points
    ]


def full_disk(pattern, reference, out, recordings=2.5):
    """``store`` under a file size limit of ``recordings`` recordings' data, then resumed
    here without it: (exit status, its output, recordings committed, equal)."""
    from braindecode_pars.store import read_window_store

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


def _trial_table(rows, trials, group):
    """The lines of a table of signal trials (:func:`store_trial`'s rows)."""
    empty = ["group empty"] if group else []
    lines = [
        "| " + " | ".join(["signal", "trial", "committed at the signal", "delay s",
                           "exit status", "s to end", "workers", "left", *empty,
                           "resumed store equal"]) + " |",
        "|" + "---|" * (9 + len(empty)),
    ]  # fmt: skip
    for i, row in enumerate(rows):
        cells = [row["signal"], i % trials + 1, row["committed"], f"{row['delay']:.2f}",
                 row["status"], f"{row['seconds']:.2f}", row["workers"], row["left"]]  # fmt: skip
        if group:
            cells.append("yes" if row["group_empty"] else "NO")
        cells.append("yes" if row["equal"] else "NO")
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return lines


def _trials_summary(rows):
    equal = sum(row["equal"] for row in rows)
    left = sum(row["left"] for row in rows)
    text = (
        f"Trials: {len(rows)} ({', '.join(sorted({r['signal'] for r in rows}))}); stores "
        f"equal after the resume: {equal} of {len(rows)}; processes left: {left}"
    )
    if rows and rows[0]["group"]:
        text += f"; groups empty: {sum(bool(r['group_empty']) for r in rows)} of {len(rows)}"
    return text + "."


def store_results(folder, trials, seed, recordings):
    """Every trial of ``--part store`` in ``folder``: the load average before, the
    seconds they took, the signal trials' rows (``trials``), the finish's kills
    (``finish``), the full disk (``disk``) and the second build (``second``), a dict
    ready for JSON (what ``--records`` writes, :func:`store_lines` reports)."""
    load = os.getloadavg()[0]
    start = time.monotonic()
    pattern, reference, rows = store_faults(
        folder, trials=trials, seed=seed, recordings=recordings, targets=("main", "group")
    )
    finish_rows = finish_kills(pattern, reference, Path(folder) / "finish")
    status, output, done, disk_equal = full_disk(pattern, reference, Path(folder) / "disk")
    pid, message, first, second_equal = second_build(pattern, reference, Path(folder) / "two")
    return {
        "load": load,
        "seconds": time.monotonic() - start,
        "trials": rows,
        "finish": finish_rows,
        "disk": {"status": status, "output": output, "kept": done, "equal": disk_equal},
        "second": {"pid": pid, "message": message, "status": first, "equal": second_equal},
    }


def store_lines(results, trials, seed, recordings):
    """The lines of ``faults_store.md`` for the trials' ``results`` (:func:`store_results`,
    or a record of them) run by ``--trials``, ``--seed`` and ``--recordings``."""
    from benchmarks.lib.measure import cpu_model

    rows, finish_rows = results["trials"], results["finish"]
    main_rows = [r for r in rows if not r["group"]]
    group_rows = [r for r in rows if r["group"]]
    disk, second = results["disk"], results["second"]
    pid, message = second["pid"], second["message"]
    refused = "Cannot write the store" in disk["output"]
    lines = [
        "# Faults: `braindecode-pars store` stopped, killed, on a full disk, built twice",
        "",
        f"{datetime.date.today()}, {cpu_model()} (load average {results['load']:.2f} "
        f"before), Python {sys.version.split()[0]}; written by `python -m "
        f"benchmarks.bench_faults --part store --trials {trials} --seed {seed} --recordings "
        f"{recordings}` in {results['seconds']:.0f} s.",
        "",
        f"{recordings} synthetic FIF recordings (3 EEG channels, 15 minutes, 250 Hz), stored "
        "at 100 Hz in 5-s windows by `store --jobs 2`, stopped by a signal once a seeded "
        "random number of recordings were committed plus a random delay of up to 0.2 s, "
        "then resumed by the same command; compared byte for byte with an uninterrupted "
        "build (every file of the folder). Workers: the command's processes when the "
        f"signal was sent; left: those alive {GRACE_SECONDS:g} s after it ended.",
        "",
        "## The signal to the command's process",
        "",
        *_trial_table(main_rows, trials, group=False),
        "",
        _trials_summary(main_rows),
        "",
        "## The signal to the whole job at once",
        "",
        "The same trials with the signal sent to every process of the command at the same "
        "moment, as `kill -- -PGID` sends it (the command started as the leader of a "
        "process group, `start_new_session`, signalled by `os.killpg`): what a scheduler "
        "does at a job's time limit. Group empty: no process of the group left "
        f"(`os.killpg(pgid, 0)` finds none) within {GRACE_SECONDS:g} s of the command's end. "
        "An exit status of -15 is a SIGTERM that reached the command at its start, before "
        "it handled the signal (no recording read yet): it ends at once, with nothing to "
        "keep; 0, a build that ended before the signal.",
        "",
        *_trial_table(group_rows, trials, group=True),
        "",
        _trials_summary(group_rows),
        "",
        "## A kill at each point of the store's finish",
        "",
        "`store --jobs 2` killed (SIGKILL) at each point of its finish "
        "(`store/write.py`: the data file takes its name, `recordings.json`, `info.json` and "
        "`index.npz` are written atomically, then `build.json` and the journal are removed): "
        "*during* a write, once its temporary file is written and before it takes its name "
        "(for the data, before anything of the finish is done); *after* a step, once it is "
        "on the disk. The store left is *whole* where it reads back as the uninterrupted "
        "build (recordings, index, info, descriptions), *refused* where reading it is "
        "refused as incomplete (`index.npz` is missing); then the same command runs again.",
        "",
        "| point | exit status | temporary files left | store left | group empty | "
        "resumed store equal |",
        "|---|---|---|---|---|---|",
    ]
    for row in finish_rows:
        lines.append(
            f"| {row['when']} {row['step']} | {row['status']} | {len(row['temporary'])} | "
            f"{row['left']} | {'yes' if row['group_empty'] else 'NO'} | "
            f"{'yes' if row['equal'] else 'NO'} |"
        )
    whole = sum(r["left"] == "whole" for r in finish_rows)
    refused_left = sum(r["left"] == "refused" for r in finish_rows)
    resumed = sum(r["equal"] for r in finish_rows)
    lines += [
        "",
        f"Points: {len(finish_rows)}; left whole: {whole}, refused as incomplete: "
        f"{refused_left}, read back wrong: {len(finish_rows) - whole - refused_left}; "
        f"resumed to the same bytes: {resumed} of {len(finish_rows)}.",
        "",
        "## A full disk, a second build",
        "",
        f"Full disk (a file size limit of 2.5 recordings' data, `RLIMIT_FSIZE`): exit status "
        f"{disk['status']}, refused with a message: {'yes' if refused else 'NO'}, recordings "
        f"kept: {disk['kept']}, resumed store equal: {'yes' if disk['equal'] else 'NO'}.",
        "",
        f"A second `store` into a folder being built by process {pid}: "
        f"{'refused' if message and str(pid) in message else 'NOT refused'} "
        f'("{message}"); the first ended with status {second["status"]}, its store equal: '
        f"{'yes' if second['equal'] else 'NO'}.",
    ]
    return lines


def main(argv=None):
    from benchmarks.lib.measure import report_parser, write_report

    parser = report_parser(__doc__)
    parser.add_argument("--part", choices=["store"], required=True, help="what to fault")
    parser.add_argument("--trials", type=int, default=5, help="trials per signal")
    parser.add_argument("--seed", type=int, default=0, help="seed of the points")
    parser.add_argument("--recordings", type=int, default=8, help="synthetic recordings")
    parser.add_argument("--records",
        help="also write the trials' rows here as JSON (benchmarks/tests/records/: "
        "what test_fault_records.py runs the report code on)")  # fmt: skip
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.INFO)  # the resumes' lines: the report says what they did
    with tempfile.TemporaryDirectory() as tmp:
        results = store_results(tmp, args.trials, args.seed, args.recordings)
    write_report(store_lines(results, args.trials, args.seed, args.recordings), args.out)
    if args.records:
        from benchmarks.lib.fault_records import write_records

        options = {k: getattr(args, k) for k in ("part", "trials", "seed", "recordings")}
        write_records(args.records, "benchmarks.bench_faults", argv,
                      {"args": options, **results}, folders=[tmp])  # fmt: skip


if __name__ == "__main__":
    main()
