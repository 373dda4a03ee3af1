"""Peak memory of a probe's fit and predict, this revision against another, as a
multiple of the windows' float32 array.

``--input windows`` (the default): ``PARSClassifier(encoder=ENCODER)``, the probe over
the encoder's features, log band power and the tangent space, on preloaded braindecode
windows (RawArray recordings of white noise at 100 Hz, two classes by recording, cut
with braindecode's ``create_fixed_length_windows``; see ``bench_read_memory.py``);
``PARSClassifier(pretrained_encoder=...)`` up to b211f06. ``--input arrays``:
``PARSProbe(encoder=ENCODER, sfreq=100)`` on a float32 array of white noise (tens of
microvolts), as a user with arrays calls it. Each figure comes from a fresh process
that imports the revision's package from its checkout, builds the input, then fits once
and predicts once: the growth of the peak resident memory (``VmHWM`` of
``/proc/self/status``, reset just before the step) during each.

Usage (``--before`` is a checkout of the other revision)::

    git worktree add /tmp/before db22036
    python -m benchmarks.bench_fit_memory --before /tmp/before --input arrays \
        --encoder pars-small-v2 --windows 600
"""

from __future__ import annotations

import datetime
import inspect
import json
import logging
import os
import statistics
import sys

from benchmarks.lib.measure import in_child, machine, peak_growth, write_report
from benchmarks.lib.memory_checkouts import make_windows, memory_checkouts, memory_parser, revision

logger = logging.getLogger("bench_fit_memory")


def child(root, kind, encoder, warmup, n_windows, n_chans, n_times, n_recordings):
    """One fit and one predict in this (fresh) process; print the figures as JSON."""
    import warnings

    sys.path.insert(0, str(root))
    warnings.simplefilter("ignore")
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from braindecode_pars import PARSClassifier, PARSProbe

    if kind == "arrays":
        rng = np.random.default_rng(0)
        windows = (20 * rng.standard_normal((n_windows, n_chans, n_times))).astype(np.float32)
        y = np.arange(n_windows) % 2
        clf = PARSProbe(encoder=encoder, sfreq=100, random_state=0)
        fit = lambda: clf.fit(windows, y)  # noqa: E731
        if warmup == "warm":  # the first use of torch's kernels and lazy imports, paid
            PARSProbe(encoder=encoder, sfreq=100).fit(windows[:8].copy(), y[:8])
    else:
        windows = make_windows(n_windows, n_chans, n_times, n_recordings)
        old = "pretrained_encoder" in inspect.signature(PARSClassifier).parameters
        if old:
            clf = PARSClassifier(pretrained_encoder=encoder, random_state=0, verbose=0)
        else:
            clf = PARSClassifier(encoder=encoder, random_state=0, verbose=0)
        fit = lambda: clf.fit(windows)  # noqa: E731
    out = {"output_bytes": n_windows * n_chans * n_times * 4}
    fit_mib, out["fit_seconds"] = peak_growth(fit)
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
        f"python -m benchmarks.bench_fit_memory --before {args.before} --input {args.input} "
        f"--encoder {args.encoder}{' --warmup' * args.warmup} --windows "
        f"{args.windows} --chans {args.chans} --times {args.times} --recordings "
        f"{args.recordings} --repeats {args.repeats} --out {args.out or '...'}"
    )
    if args.input == "arrays":
        what = (
            f"A float32 array of {args.windows} windows of {args.chans} channels x "
            f"{args.times} samples at 100 Hz ({output_mib:.1f} MiB); "
            f'`PARSProbe(encoder="{args.encoder}", sfreq=100)` is fitted on it, then '
            "predicts it."
            + (
                " Before the measured fit, the same process fitted a probe on the first 8 "
                "windows: the figure leaves out what a process pays once (torch's first use "
                "of its kernels, lazy imports)."
                if args.warmup
                else " The measured fit is the process's first: it includes what a process "
                "pays once (torch's first use of its kernels, lazy imports)."
            )
        )
    else:
        what = (
            f"{args.windows} windows of {args.chans} channels x {args.times} samples at 100 "
            f"Hz from {args.recordings} preloaded RawArray recordings; their float32 array "
            f'is {output_mib:.1f} MiB. `PARSClassifier(encoder="{args.encoder}")` (the '
            "probe over the encoder) is fitted on them, then predicts them."
        )
    lines = [
        f"# Peak memory of a probe's fit and predict on {args.input}",
        "",
        f"Machine: {machine()}, {os.cpu_count()} cores. Date: {datetime.date.today()}.",
        "",
        f"Command: `{command}`",
        "",
        what + " Each figure from a fresh process importing the revision's package; "
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
    parser = memory_parser(__doc__, n_child=8)
    parser.add_argument("--recordings", type=int, default=8)
    parser.add_argument("--input", choices=("windows", "arrays"), default="windows")
    parser.add_argument("--encoder", default="pars-small", help="a shipped encoder's name")
    parser.add_argument(
        "--warmup", action="store_true",
        help="with --input arrays: fit on 8 windows first in the same process, so that the "
        "figure leaves out torch's first-use costs and lazy imports (paid once a process)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.warmup and args.input != "arrays":
        parser.error("--warmup is for --input arrays")
    if args.child:
        root, kind, encoder, warmup, *sizes = args.child
        return child(root, kind, encoder, warmup, *map(int, sizes))
    roots = memory_checkouts(parser, args, "braindecode_pars/__init__.py", "recordings")
    if args.windows % args.recordings:
        parser.error(f"--windows ({args.windows}) must be a multiple of --recordings")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rows = {}
    for _ in range(args.repeats):
        for name, root in roots.items():
            warmup = "warm" if args.warmup else "cold"
            m = in_child(__spec__.name, root, args.input, args.encoder, warmup,
                         args.windows, args.chans, args.times, args.recordings)  # fmt: skip
            rows.setdefault(name, []).append(m)
            logger.info("%s: %s", name, m)
    write_report(report(rows, roots, args), args.out)


if __name__ == "__main__":
    sys.exit(main())
