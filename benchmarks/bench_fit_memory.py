"""Peak memory of ``PARSClassifier``'s default fit and predict on preloaded braindecode
windows, this revision against another, as a multiple of the windows' float32 array.

The fit is the probe over the shipped ``pars-small`` encoder (log band power, tangent
space, the encoder's features, a logistic regression): ``PARSClassifier(encoder=
"pars-small")`` here, ``PARSClassifier(pretrained_encoder="pars-small")`` up to
b211f06, whose probe read the windows four times per fit (each an MNE copy of every
recording) and twice per predict. Each figure comes from a fresh process that imports
the revision's package from its checkout, builds the windows (RawArray recordings of
white noise at 100 Hz, two classes by recording, cut with braindecode's
``create_fixed_length_windows``, ``preload=True``; see ``bench_read_memory.py``), then
fits once and predicts once: the growth of the peak resident memory (``VmHWM`` of
``/proc/self/status``, reset just before the step) during each.

Usage (``--before`` is a checkout of the other revision)::

    git worktree add /tmp/before b211f06
    python benchmarks/bench_fit_memory.py --before /tmp/before \
        --out benchmarks/results/fit_memory.md
"""

from __future__ import annotations

import datetime
import inspect
import json
import logging
import os
import statistics
import sys

from _measure import in_child, machine, peak_growth, write_report
from bench_read_memory import make_windows, memory_checkouts, memory_parser, revision

logger = logging.getLogger("bench_fit_memory")


def child(root, n_windows, n_chans, n_times, n_recordings):
    """One fit and one predict in this (fresh) process; print the figures as JSON."""
    import warnings

    sys.path.insert(0, str(root))
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    from braindecode_pars import PARSClassifier

    windows = make_windows(n_windows, n_chans, n_times, n_recordings)
    old = "pretrained_encoder" in inspect.signature(PARSClassifier).parameters
    if old:
        clf = PARSClassifier(pretrained_encoder="pars-small", random_state=0, verbose=0)
    else:
        clf = PARSClassifier(encoder="pars-small", random_state=0, verbose=0)
    out = {"output_bytes": n_windows * n_chans * n_times * 4}
    fit_mib, out["fit_seconds"] = peak_growth(lambda: clf.fit(windows))
    result = {}
    predict_mib, out["predict_seconds"] = peak_growth(
        lambda: result.setdefault("y", clf.predict(windows))
    )
    out["fit_bytes"], out["predict_bytes"] = fit_mib * 2**20, predict_mib * 2**20
    if len(result["y"]) != n_windows:
        raise RuntimeError(f"predicted {len(result['y'])} windows, expected {n_windows}")
    print(json.dumps(out))


def report(rows, roots, args):
    """Markdown lines of the results."""
    output_mib = args.windows * args.chans * args.times * 4 / 2**20
    command = (
        f"python benchmarks/bench_fit_memory.py --before {args.before} --windows "
        f"{args.windows} --chans {args.chans} --times {args.times} --recordings "
        f"{args.recordings} --repeats {args.repeats} --out {args.out or '...'}"
    )
    lines = [
        "# Peak memory of PARSClassifier's default fit and predict on braindecode windows",
        "",
        f"Machine: {machine()}, {os.cpu_count()} cores. Date: {datetime.date.today()}.",
        "",
        f"Command: `{command}`",
        "",
        f"{args.windows} windows of {args.chans} channels x {args.times} samples at 100 Hz "
        f"from {args.recordings} preloaded RawArray recordings; their float32 array is "
        f"{output_mib:.1f} MiB. The default probe over `pars-small` is fitted on them, then "
        "predicts them. Each figure from a fresh process importing the revision's package; "
        f"medians over {args.repeats} processes per cell (the revisions alternating). "
        "`VmHWM growth`: the growth of the peak resident memory during the step (reset "
        "just before it). Times are not reported: other jobs shared the machine.",
        "",
        "| revision | fit: VmHWM growth (MiB) | x windows | predict: VmHWM growth (MiB) "
        "| x windows |",
        "|---|---|---|---|---|",
    ]
    for name, root in roots.items():
        ms = rows[name]
        fit = statistics.median(m["fit_bytes"] for m in ms)
        pred = statistics.median(m["predict_bytes"] for m in ms)
        out = ms[0]["output_bytes"]
        lines.append(
            f"| {name} ({revision(root)}) | {fit / 2**20:.1f} | {fit / out:.2f} | "
            f"{pred / 2**20:.1f} | {pred / out:.2f} |"
        )
    return lines


def main(argv=None):
    parser = memory_parser(__doc__, n_child=5)
    parser.add_argument("--recordings", type=int, default=8)
    args = parser.parse_args(argv)
    if args.child:
        root, *sizes = args.child
        return child(root, *map(int, sizes))
    roots = memory_checkouts(parser, args, "braindecode_pars/__init__.py", "recordings")
    if args.windows % args.recordings:
        parser.error(f"--windows ({args.windows}) must be a multiple of --recordings")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rows = {}
    for _ in range(args.repeats):
        for name, root in roots.items():
            m = in_child(os.path.abspath(__file__), root, args.windows, args.chans,
                         args.times, args.recordings)  # fmt: skip
            rows.setdefault(name, []).append(m)
            logger.info("%s: %s", name, m)
    write_report(report(rows, roots, args), args.out)


if __name__ == "__main__":
    sys.exit(main())
