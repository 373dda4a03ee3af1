"""The learning tests' margins: how far each learned score stands from its threshold
over seeds and torch thread counts.

A learning test (one that calls ``tests._learning.learned``: a classifier's score on
data built for it, a pretext skill, a probe at chance on noise) asserts one draw of its
data and models at one thread count. Float order (the instruction set, the thread
count, the order tests run in) moves a learned score; a threshold closer to the score
than that fails on a user's CPU though nothing is wrong. This script runs every
learning test at ``--seeds`` seeds (``PARS_LEARNING_SEED`` = 0, 1, ...: every random
draw of the test moves with it) and at each of ``--threads`` torch thread counts
(``PARS_TEST_THREADS``, ``OMP_NUM_THREADS``), one pytest process a run, with
``PARS_LEARNING_RECORD`` set so that every score is written down instead of asserted.
The report gives, for every score, its threshold, the worst run, mean and sd over the
runs, and whether the threshold sits below (or, for a score that must stay at chance,
above) the worst run.

The learning tests are found by reading the test files: every test function that calls
``learned``. Each run's rows go to ``seed<k>-threads<t>.jsonl`` in its folder once the run has
ended (written whole, then renamed), so a stopped sweep resumes at the first run not
written; ``--fresh`` starts again.

Usage::

    python -m benchmarks.learning_margins --out benchmarks/results/learning_margins.md
    python -m benchmarks.learning_margins --seeds 3 --threads 1 -k spatial_front
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.lib.measure import command_line, cpu_model, git_commit, write_report

logger = logging.getLogger("benchmarks.learning_margins")

ROOT = Path(__file__).resolve().parents[1]
TEST_FOLDERS = ("tests", "benchmarks/tests")
PARTS = ROOT / "benchmarks" / ".cache" / "learning_margins"


def _calls_learned(function):
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "learned"
        for node in ast.walk(function)
    )


def learning_tests(root=ROOT):
    """The node ids (``path::function``) of the test functions that call ``learned``,
    sorted."""
    found = []
    for folder in TEST_FOLDERS:
        for path in sorted((root / folder).rglob("test_*.py")):
            tree = ast.parse(path.read_text())
            for node in tree.body:
                if (
                    isinstance(node, ast.FunctionDef)
                    and node.name.startswith("test")
                    and _calls_learned(node)
                ):
                    found.append(f"{path.relative_to(root).as_posix()}::{node.name}")
    return sorted(found)


def _run(tests, seed, threads, part, timeout):
    """One pytest process over ``tests`` at ``seed`` and ``threads``; its scores written
    to ``part`` once it ends. Returns pytest's exit code."""
    with tempfile.TemporaryDirectory(prefix="margins-") as tmp:
        record = Path(tmp) / "rows.jsonl"
        env = {
            **os.environ,
            "PARS_LEARNING_SEED": str(seed),
            "PARS_TEST_THREADS": str(threads),
            "OMP_NUM_THREADS": str(threads),
            "PARS_LEARNING_RECORD": str(record),
        }
        env.pop("PYTEST_XDIST_WORKER", None)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0",
                   "-W", "ignore", "-rfE", *tests]  # fmt: skip
        process = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
        try:
            out, _ = process.communicate(timeout=timeout)
        except BaseException:  # a timeout, Ctrl-C or SIGTERM: no process left behind
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        lines = out.decode(errors="replace").strip().splitlines()
        tail = lines[-1:] or [""]
        logger.info(
            "seed %d, %d thread(s): exit %d, %s", seed, threads, process.returncode, tail[0]
        )
        for line in lines:  # pytest's short summary: which test failed, and its error
            if line.startswith(("FAILED ", "ERROR ")):
                logger.warning("seed %d, %d thread(s): %s", seed, threads, line)
        rows = record.read_text() if record.exists() else ""
        temporary = part.with_suffix(".tmp")
        temporary.write_text(rows)
        temporary.replace(part)
        return process.returncode


@contextlib.contextmanager
def _locked(folder):
    """Hold ``folder``'s lock (an flock on its ``.lock``) while the block runs; refuse at
    once, before any run, when another sweep holds it."""
    with open(folder / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.exit(f"{folder} is being written by another learning-margins sweep")
        yield


def _function(test_id):
    """``path::function`` of a pytest node id (its parameters left out)."""
    path, _, name = test_id.partition("::")
    return f"{path}::{name.split('[')[0]}"


def _read_rows(path):
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line]
        if path.exists()
        else []
    )


def summarise(rows):
    """One row a score (test, what): its threshold, worst run, mean, sd, runs, and
    whether the threshold is on the safe side of the worst run."""
    scores = {}
    for row in rows:
        key = (row["test"], row["what"])
        scores.setdefault(key, {"above": row["above"], "below": row["below"], "values": []})
        scores[key]["values"].append(row["score"])
    table = []
    for (test, what), entry in sorted(scores.items()):
        values = entry["values"]
        if entry["above"] is not None:
            threshold, worst = entry["above"], min(values)
            margin = worst - threshold
        else:
            threshold, worst = entry["below"], max(values)
            margin = threshold - worst
        table.append({
            "test": test, "what": what, "side": ">" if entry["above"] is not None else "<",
            "threshold": threshold, "worst": worst, "mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else 0.0, "runs": len(values),
            "margin": margin, "holds": margin > 0,
        })  # fmt: skip
    return table


def report(table, command, commit, n_runs, failed):
    lines = [
        "# The learning tests' margins",
        "",
        f"Written by `{command}` (last run: {n_runs} pytest runs, seeds by thread counts) "
        f"on {cpu_model()}, {datetime.date.today().isoformat()}; the rows ran at {commit} "
        "(`learning_margins.jsonl` names each row's commit). Each score below is over all "
        "of its runs. A score's margin is "
        "its worst run less the threshold (for a score that must stay under its "
        "threshold, the threshold less its worst run); every margin has to be positive.",
        "",
        "| test | score | threshold | worst | mean ± sd | runs | margin |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in table:
        name = row["test"].split("::", 1)
        lines.append(
            f"| `{name[0].rsplit('/', 1)[-1]}::{name[1] if len(name) > 1 else ''}` | {row['what']} "
            f"| {row['side']} {row['threshold']:g} | {row['worst']:.3f} "
            f"| {row['mean']:.3f} ± {row['sd']:.3f} | {row['runs']} "
            f"| {row['margin']:+.3f}{'' if row['holds'] else ' **fails**'} |"
        )
    holding = sum(row["holds"] for row in table)
    lines += ["", f"{holding} of {len(table)} scores hold at every run."]
    if failed:
        lines.append(
            f"Runs whose pytest failed (a score past its threshold, or an error): {failed}."
        )
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0 .. N-1 (default 10)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("-k", default=None, help="only the learning tests whose id holds this")
    parser.add_argument(
        "--raw", type=Path, default=ROOT / "benchmarks/results/learning_margins.jsonl"
    )
    parser.add_argument("--out", type=Path, default=None, help="the report (markdown)")
    parser.add_argument("--parts", type=Path, default=PARTS,
                        help="the folder of the runs' rows (resumed from)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800, help="seconds a run")
    parser.add_argument("--missing", action="store_true",
                        help="only the learning tests the raw file has no row of")  # fmt: skip
    parser.add_argument("--fresh", action="store_true", help="forget the runs written")
    args = parser.parse_args(argv)
    if args.seeds < 1 or any(t < 1 for t in args.threads):
        parser.error(f"--seeds and --threads must be >= 1, got {args.seeds} and {args.threads}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tests = [t for t in learning_tests() if args.k is None or args.k in t]
    if args.missing:  # only those without rows yet
        recorded = {_function(row["test"]) for row in _read_rows(args.raw)}
        tests = [t for t in tests if t not in recorded]
    if not tests:
        parser.error(f"no learning test matches -k {args.k!r}")
    logger.info("%d learning tests", len(tests))
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", args.k or "all") + ("-missing" * args.missing)
    parts = args.parts / name
    if args.fresh and parts.exists():
        shutil.rmtree(parts)
    parts.mkdir(parents=True, exist_ok=True)
    failed = []
    with _locked(parts):
        for threads in args.threads:
            for seed in range(args.seeds):
                part = parts / f"seed{seed}-threads{threads}.jsonl"
                if part.exists():
                    continue
                if _run(tests, seed, threads, part, args.timeout) != 0:
                    failed.append(f"seed {seed}, {threads} thread(s)")
        wanted = {f"seed{s}-threads{t}.jsonl" for s in range(args.seeds) for t in args.threads}
        done = [part for part in sorted(parts.glob("*.jsonl")) if part.name in wanted]
        rows = [json.loads(line) for part in done
                for line in part.read_text().splitlines() if line]  # fmt: skip
    commit = git_commit(dirty=True)
    for row in rows:
        row["commit"] = commit
    # the rows of these tests replace those recorded before; the others' stay
    kept = [row for row in _read_rows(args.raw) if _function(row["test"]) not in tests]
    rows = kept + [row for row in rows if _function(row["test"]) in tests]
    args.raw.write_text("".join(json.dumps(row) + "\n" for row in rows))
    table = summarise(rows)
    commits = sorted({row.get("commit", "?") for row in rows})
    lines = report(table, command_line("benchmarks.learning_margins", argv),
                   ", ".join(commits), len(done), failed)  # fmt: skip
    write_report(lines, args.out)
    return 0 if all(row["holds"] for row in table) else 1


if __name__ == "__main__":
    sys.exit(main())
