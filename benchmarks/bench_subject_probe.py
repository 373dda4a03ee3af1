"""What frozen features hold of the subject and of the label: the subject probe
(FMScope's protocol) of log band power, each shipped encoder and a random encoder of the
same size.

For each dataset and feature set (:mod:`benchmarks.lib.subject_probe`): subject
identity trained on the first half of each recording and scored on the second half
(temporal blocks), and the label across subjects with grouped folds, each the balanced
accuracy of a logistic regression on standardised features. Datasets: the bundled
EEGMAT windows (20 subjects), EEGMAT from PhysioNet's files in the shared data (36
subjects) when they are there, and PhysioNet-MI subject 1 (the one subject the project
holds: the label probe only, across blocks of runs).

Usage::

    python -m benchmarks.bench_subject_probe --out benchmarks/results/subject_probe.md
    python -m benchmarks.bench_subject_probe --quick  # seconds: 3 subjects, 4 windows each
    python -m benchmarks.bench_subject_probe --encoders pars-small-v2 path/to/exported-run
"""

from __future__ import annotations

import argparse
import datetime
import logging
import time
from pathlib import Path

import torch

from benchmarks.lib import subject_probe
from benchmarks.lib.measure import ROOT, command_line, machine, write_report

logger = logging.getLogger("bench_subject_probe")

#: The shared recordings, beside the repository.
SHARED_DATA = ROOT.parent / "shared" / "data"
#: ``--quick``: the bundled EEGMAT subjects read, and windows per recording.
QUICK_SUBJECTS, QUICK_WINDOWS = (0, 1, 2), 4


def datasets(shared_data, quick=False):
    """The datasets probed, and notes on those left out."""
    if quick:
        return [subject_probe.eegmat_bundled(QUICK_SUBJECTS, QUICK_WINDOWS)], [
            f"`--quick`: bundled EEGMAT subjects {list(QUICK_SUBJECTS)}, their first "
            f"{QUICK_WINDOWS} windows of each recording; a check that the benchmark runs, "
            "not a measurement."
        ]
    found, notes = [subject_probe.eegmat_bundled()], []
    eegmat = Path(shared_data) / "eegmat"
    if eegmat.is_dir():
        found.append(subject_probe.eegmat_shared(eegmat))
    else:
        notes.append(f"EEGMAT's PhysioNet files are not in `{eegmat}`: not measured.")
    found.append(subject_probe.physionet_mi())
    notes.append(
        "PhysioNet-MI: the project holds subject 1 only (bundled, and in the shared data), "
        "so subject identity is not measured there and the label probe's folds are its "
        "three blocks of runs."
    )
    return found, notes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="Markdown file to write the report to")
    parser.add_argument("--shared-data", default=str(SHARED_DATA), help="the shared recordings")
    parser.add_argument("--quick", action="store_true", help="a few windows of 3 subjects")
    parser.add_argument("--C", type=float, default=1.0, help="the probes' inverse penalty")
    parser.add_argument("--seed", type=int, default=subject_probe.RANDOM_SEED,
                        help="the random encoder's seed")  # fmt: skip
    parser.add_argument("--encoders", nargs="+",
                        help="shipped names or saved encoders' folders (default: every "
                        "shipped encoder)")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    data, notes = datasets(args.shared_data, args.quick)
    sets = subject_probe.feature_sets(args.encoders, random_seed=args.seed)

    def log(row):
        logger.info(
            "%s | %s: subject %s, label %.3f (%.0f s)", row["dataset"], row["features"],
            "-" if row["subject"] is None else f"{row['subject']:.3f}", row["label"],
            row["seconds"],
        )  # fmt: skip

    rows = subject_probe.probe_table(data, sets, C=args.C, log=log)
    minutes = (time.perf_counter() - start) / 60
    notes = [*notes, f"Wall time: {minutes:.1f} min ({torch.get_num_threads()} torch threads)."]
    lines = subject_probe.report_lines(
        rows, data,
        command=command_line(__spec__.name, argv),
        machine=machine(),
        date=datetime.date.today().isoformat(),
        notes=notes,
    )  # fmt: skip
    write_report(lines, args.out)
    return rows


if __name__ == "__main__":
    main()
