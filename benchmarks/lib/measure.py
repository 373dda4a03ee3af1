"""Timing and memory helpers shared by the benchmark scripts."""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

#: The checkout these scripts belong to (the folder above ``benchmarks/``).
ROOT = Path(__file__).resolve().parents[2]


def git_commit(dirty=False):
    """The checkout's commit (short; ``"unknown"`` outside git), with ``+`` when ``dirty``
    is asked for and tracked files have changes."""
    git = lambda *a: subprocess.run(["git", *a], cwd=Path(__file__).parents[2],  # noqa: E731
                                    capture_output=True, text=True).stdout.strip()  # fmt: skip
    changed = dirty and git("status", "--porcelain", "--untracked-files=no")
    return (git("rev-parse", "--short", "HEAD") or "unknown") + ("+" if changed else "")


def step_times(steps, repeats, warmup=2):
    """Times of each step over ``repeats`` rounds, the steps interleaved so that they
    share machine state: ``times[i][r]`` is step ``i`` in round ``r``."""
    for _ in range(warmup):
        for step in steps:
            step()
    times = [[] for _ in steps]
    for _ in range(repeats):
        for step, record in zip(steps, times, strict=True):
            t0 = time.perf_counter()
            step()
            record.append(time.perf_counter() - t0)
    return times


def alternating_step_times(steps, rounds, warmup=2):
    """Like :func:`step_times`, but the first two steps (the two being compared) swap
    places every other round, so neither always runs straight after the other; the
    steps after them keep their place at the end of each round."""
    for _ in range(warmup):
        for step in steps:
            step()
    rest = tuple(range(2, len(steps)))
    times = [[] for _ in steps]
    for r in range(rounds):
        for i in ((0, 1) if r % 2 else (1, 0)) + rest:
            t0 = time.perf_counter()
            steps[i]()
            times[i].append(time.perf_counter() - t0)
    return times


def median_times(steps, repeats, warmup=2):
    """Median time of each step, the steps interleaved (see :func:`step_times`)."""
    return [statistics.median(t) for t in step_times(steps, repeats, warmup)]


def paired_ratio(times_a, times_b):
    """Median and quartiles of ``a / b`` over the rounds of interleaved steps.

    Each round's two steps ran one after the other, so their ratio cancels most of
    this machine's drift in speed, which moves absolute times by up to a third.
    """
    ratios = sorted(a / b for a, b in zip(times_a, times_b, strict=True))
    if len(ratios) < 2:  # quantiles need two values
        return ratios[0], ratios[0], ratios[0]
    q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    return median, q1, q3


def status_mib(field):
    """A field of /proc/self/status in MiB (VmRSS, VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB -> MiB
    raise RuntimeError(f"{field} not in /proc/self/status")


def peak_growth(step):
    """Run ``step`` once; growth of the peak resident memory (MiB) and its duration (s).

    The peak (VmHWM) is reset just before the step (Linux's clear_refs), so that the
    peaks of importing torch and building the model do not hide the step's own.
    """
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_mib("VmRSS")
    t0 = time.perf_counter()
    step()
    elapsed = time.perf_counter() - t0
    return status_mib("VmHWM") - before, elapsed


def in_child(module, *args, env=None):
    """Run ``python -m module --child args...`` in a fresh process (this checkout first
    on its path, so that ``benchmarks`` imports from any folder); parse the JSON it prints
    last. ``module``: a script's dotted name, ``__spec__.name`` inside the script;
    ``env``: the process's environment (default :func:`child_env`)."""
    cmd = [sys.executable, "-m", module, "--child", *map(str, args)]
    env = child_env() if env is None else env
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def child_env(**changes):
    """This process's environment with this checkout first on ``PYTHONPATH``, for a
    child process that runs a script as ``python -m benchmarks.<script>``; ``changes``
    set variables (a value of None removes one)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), env.get("PYTHONPATH"))))
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
    return env


def command_line(module, argv=None):
    """The command that runs the script ``module`` (its dotted name, ``__spec__.name``
    inside it) with ``argv`` (``sys.argv[1:]`` if None), as a report records it."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def cpu_model():
    """The processor's name (``model name`` of ``/proc/cpuinfo`` where there is one), with
    the number of cores this process may use."""
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                name,
            )
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{name}, {cores} cores"


def machine():
    """One line describing where the figures were taken."""
    return (
        f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch "
        f"threads, torch {torch.__version__}"
    )


def write_report(lines, out=None):
    """Join the report's ``lines``, write them to the file ``out`` if given, and print them."""
    text = "\n".join(lines) + "\n"
    if out:
        with open(out, "w") as f:
            f.write(text)
    print(text)


def table_head(*columns):
    """The two header lines of a Markdown table with these ``columns``."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]


def report_parser(doc):
    """A benchmark's command line, described by the first line of its docstring ``doc``,
    with ``--out``: where to write the Markdown report."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--out", help="write the Markdown report here (default: stdout only)")
    return parser


def check_at_least_one(parser, args, *names):
    """Stop through ``parser.error`` where an option ``--name`` of ``args`` is below 1."""
    for name in names:
        value = getattr(args, name)
        if value < 1:
            parser.error(f"--{name} must be at least 1, got {value}")


def append_score(csv, columns, y_true, y_pred, **row):
    """Append one scored row to a resumable CSV (header on the first row): the row's
    keys, and the balanced accuracy and Cohen's kappa of ``y_pred``. Returns the row."""
    import pandas as pd
    from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

    row.update(
        balanced_accuracy=balanced_accuracy_score(y_true, y_pred),
        kappa=cohen_kappa_score(y_true, y_pred),
    )
    pd.DataFrame([row], columns=columns).to_csv(csv, mode="a", header=not csv.exists(), index=False)
    return row
