"""One small fine-tuning fit with and without the thread rule, under a second busy process.

The question (issue 63): a fit beside another torch process ran 24 times slower, and the
fine-tuner's time estimate was off by ten, because torch ran a thread per core while the
other process held one. The rule (``braindecode_pars._threads``): a fit runs on the
cores idle when it starts, unless the user chose the threads.

- **Busy process**: a second Python process multiplying 512 x 512 matrices on one torch
  thread for the whole measurement (one core held), started before the first fit.
- **Rows**: *all cores* (torch's default, a thread per usable core, kept as a user's
  choice) and *the rule* (the same start, torch's count as at import, so the rule
  chooses); the two alternate, ``--repeats`` times each, on the same data.
- **Fit**: ``PARSFineTuner(strategy="full")`` over the shipped encoder, ``--epochs``
  epochs of ``--windows`` random windows of 4 channels x 10 s at 100 Hz, batch 32.
- **Reported**: the threads each fit ran on, the median wall time of the fit, the
  fine-tuner's time estimate (first epoch x epochs, as it logs it) and the epochs' actual
  total, medians over the repeats.

Run it on a machine with no other load (the recorded run's conditions)::

    python benchmarks/bench_threads.py --out benchmarks/results/threads.md
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import sys
import time

import numpy as np
import torch
from _measure import machine, report_parser, table_head, write_report

from braindecode_pars import PARSFineTuner, _threads
from braindecode_pars.hub import DEFAULT_ENCODER

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


def fit_once(row, X, y, epochs, usable):
    """One fit of ``row``; returns its threads, wall time, estimate and epochs' total."""
    torch.set_num_threads(usable)
    # "all cores": torch's count differs from the recorded import count (a user's choice);
    # "the rule": it is that count, and no environment variable fixes the threads
    _threads._IMPORT_THREADS = usable if row == "the rule" else -1
    seen = []
    chosen = _threads.chosen_threads

    def record(what="fit"):
        seen.append(chosen(what))
        return seen[-1]

    _threads.chosen_threads = record
    try:
        clf = PARSFineTuner(
            encoder=DEFAULT_ENCODER, strategy="full", max_epochs=epochs, batch_size=32,
            sfreq=100.0, verbose=0, random_state=0,
        )  # fmt: skip
        start = time.perf_counter()
        clf.fit(X, y)
        wall = time.perf_counter() - start
    finally:
        _threads.chosen_threads = chosen
    durations = [float(d) for d in clf.history[:, "dur"]]
    return dict(threads=seen[0], wall=wall, estimate=durations[0] * epochs, total=sum(durations))


def run(repeats, epochs, n_windows):
    """Every row ``repeats`` times, alternating, beside the busy process."""
    for name in _threads.THREAD_VARIABLES:
        os.environ.pop(name, None)  # the rule honours them: the measurement must not
    usable = _threads.usable_cores()
    X, y = windows(n_windows)
    results = {row: [] for row in ROWS}
    before = torch.get_num_threads()
    busy = busy_process()
    try:
        time.sleep(1.0)  # the busy process running
        for _ in range(repeats):
            for row in ROWS:
                results[row].append(fit_once(row, X, y, epochs, usable))
    finally:
        busy.kill()
        busy.wait()
        torch.set_num_threads(before)
    return usable, results


def report(usable, results, args):
    """The Markdown report of :func:`run`'s results."""
    lines = [
        "# One fine-tuning fit beside a second busy process, with and without the thread rule",
        "",
        f"Machine: {machine()} (torch threads before the rows), {usable} usable cores; "
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
    command = "python benchmarks/bench_threads.py " + shlex.join(sys.argv[1:])
    lines += ["", f"Command: `{command.strip()}`"]
    return lines


def main(argv=None):
    parser = report_parser(__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="fits of each row")
    parser.add_argument("--epochs", type=int, default=5, help="epochs of each fit")
    parser.add_argument("--windows", type=int, default=128, help="training windows")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    usable, results = run(args.repeats, args.epochs, args.windows)
    write_report(report(usable, results, args), args.out)
    return usable, results


if __name__ == "__main__":
    main()
