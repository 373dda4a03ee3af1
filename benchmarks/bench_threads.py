"""One small fine-tuning fit with and without the thread rule, under a second busy process.

The question (issue 63): a fit beside another torch process ran 24 times slower, and the
fine-tuner's time estimate was off by ten, because torch ran a thread per core while the
other process held one. The rule (the estimators' ``fit``): a fit runs on the cores
idle when it starts, unless the user chose the threads.

- **Busy process**: a second Python process multiplying 512 x 512 matrices on one torch
  thread for the whole measurement (one core held), started before the first fit.
- **Rows**: each fit in a fresh process, as a user runs it: *all cores*
  (``OMP_NUM_THREADS`` set to the usable cores, a thread per core, which the rule keeps
  as the user's choice) and *the rule* (neither ``OMP_NUM_THREADS`` nor
  ``MKL_NUM_THREADS`` set, torch's threads as it starts them, so the rule chooses); the
  two alternate, ``--repeats`` times each, on the same data.
- **Fit**: ``PARSFineTuner(strategy="full")`` over the shipped encoder, ``--epochs``
  epochs of ``--windows`` random windows of 4 channels x 10 s at 100 Hz, batch 32.
- **Reported**: the threads each fit ran on, the median wall time of the fit, the
  fine-tuner's time estimate (first epoch x epochs, as it logs it) and the epochs' actual
  total, medians over the repeats.

Run it on a machine with no other load (the recorded run's conditions)::

    python -m benchmarks.bench_threads --out benchmarks/results/threads.md
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import subprocess
import sys
import time

import numpy as np
import torch
from skorch.callbacks import Callback

from benchmarks.lib.measure import (
    child_env,
    in_child,
    machine,
    report_parser,
    table_head,
    write_report,
)
from braindecode_pars import PARSFineTuner
from braindecode_pars.weights import DEFAULT_ENCODER

#: The environment variables that fix torch's threads (the user's choice, for the rule).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: The second process: one core busy with torch for as long as it lives.
BUSY = (
    "import torch\n"
    "torch.set_num_threads(1)\n"
    "a = torch.randn(512, 512)\n"
    "while True:\n"
    "    a = torch.tanh(a @ a)\n"
)
ROWS = ("all cores", "the rule")


def busy_process():
    """Start the second busy process; the caller kills it."""
    return subprocess.Popen([sys.executable, "-c", BUSY])


def windows(n, seed=0):
    """``n`` random windows (4 channels x 10 s at 100 Hz, microvolts) and labels."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 4, 1000)).astype(np.float32) * 10, np.arange(n) % 2


class RecordThreads(Callback):
    """Record torch's threads when training begins, inside the fit (the rule has chosen)."""

    def __init__(self):
        self.threads = []

    def on_train_begin(self, net, **kwargs):
        self.threads.append(torch.get_num_threads())


def child(epochs, n_windows):
    """One fit in this (fresh) process; print its threads, wall time, estimate and epochs'
    total as a JSON line."""
    X, y = windows(n_windows)
    record = RecordThreads()
    clf = PARSFineTuner(
        encoder=DEFAULT_ENCODER, strategy="full", max_epochs=epochs, batch_size=32,
        sfreq=100.0, verbose=0, random_state=0, callbacks=[("threads", record)],
    )  # fmt: skip
    start = time.perf_counter()
    clf.fit(X, y)
    wall = time.perf_counter() - start
    durations = [float(d) for d in clf.history[:, "dur"]]
    out = dict(threads=record.threads[0], wall=wall, estimate=durations[0] * epochs,
               total=sum(durations))  # fmt: skip
    print(json.dumps(out))


def usable_cores():
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def row_env(row, usable):
    """The environment of a row's process: "all cores" sets ``OMP_NUM_THREADS`` to the
    usable cores, "the rule" sets neither thread variable."""
    unset = dict.fromkeys(THREAD_VARIABLES)
    if row == "all cores":
        return child_env(**{**unset, "OMP_NUM_THREADS": usable})
    return child_env(**unset)


def run(repeats, epochs, n_windows):
    """Every row ``repeats`` times, alternating, each fit in a fresh process, beside the
    busy process."""
    usable = usable_cores()
    results = {row: [] for row in ROWS}
    busy = busy_process()
    try:
        time.sleep(1.0)  # the busy process running
        for _ in range(repeats):
            for row in ROWS:
                env = row_env(row, usable)
                results[row].append(in_child(__spec__.name, epochs, n_windows, env=env))
    finally:
        busy.kill()
        busy.wait()
    return usable, results


def report(usable, results, args):
    """The Markdown report of :func:`run`'s results."""
    lines = [
        "# One fine-tuning fit beside a second busy process, with and without the thread rule",
        "",
        f"Machine: {machine()} (torch threads of this process), {usable} usable cores; "
        "the second process holds one core (a torch matrix loop on one thread).",
        f"Fit: PARSFineTuner(strategy='full') over {DEFAULT_ENCODER}, {args.epochs} epochs "
        f"of {args.windows} windows of 4 channels x 10 s at 100 Hz; medians of "
        f"{args.repeats} repeats, the rows alternating.",
        "",
        *table_head("row", "torch threads", "fit (s)", "estimate (s)", "epochs' total (s)"),
    ]
    for row in ROWS:
        runs = results[row]
        med = {k: float(np.median([r[k] for r in runs])) for k in ("wall", "estimate", "total")}
        threads = sorted({r["threads"] for r in runs})
        lines.append(
            f"| {row} | {', '.join(map(str, threads))} | {med['wall']:.1f} | "
            f"{med['estimate']:.1f} | {med['total']:.1f} |"
        )
    command = "python -m benchmarks.bench_threads " + shlex.join(sys.argv[1:])
    lines += ["", f"Command: `{command.strip()}`"]
    return lines


def main(argv=None):
    parser = report_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="fits of each row")
    parser.add_argument("--epochs", type=int, default=5, help="epochs of each fit")
    parser.add_argument("--windows", type=int, default=128, help="training windows")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(*args.child)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    usable, results = run(args.repeats, args.epochs, args.windows)
    write_report(report(usable, results, args), args.out)
    return usable, results


if __name__ == "__main__":
    main()
