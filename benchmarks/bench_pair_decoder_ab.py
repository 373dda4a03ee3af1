"""The 64 x 4 PARS step with the pair decoder of another revision, against this one.

A change to the decoder that saves a millisecond moves the PARS / encoder-alone
ratio by about 0.02, less than this machine's drift between two runs of
``bench_pair_decoder_repeat.py``. This script compares two versions of the
cross-attention decoder's code in one process, on the same model and batch: the
module ``braindecode_pars/models/pair_decoders.py`` as it is in the git revision
``--against`` is loaded beside the working one, and every round runs the PARS step
with the decoder as each module's class (the same parameters; their order
alternating) and the encoder-alone step, so that each round's
ratios share the machine's state. Reported per run: each version's median ratio to
the encoder-alone step, and the median over rounds of the new step's time over the
old one's.

Usage::

    python benchmarks/bench_pair_decoder_ab.py --against HEAD~1 \
        --out benchmarks/results/pair_decoder_ab.md
"""

from __future__ import annotations

import importlib.util
import logging
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from _measure import (
    ROOT,
    alternating_step_times,
    check_at_least_one,
    machine,
    paired_ratio,
    report_parser,
    write_report,
)
from bench_pair_decoder import SIZES, SMALL_BATCH, make_steps

logger = logging.getLogger("bench_pair_decoder_ab")
MODULE = "braindecode_pars/models/pair_decoders.py"


def load_revision(revision):
    """The pair-decoder module as it is in git ``revision``, imported under another name.

    It is a module of this ``braindecode_pars.models``, so that its relative imports
    (argument checks and the like) resolve to this revision's package."""
    try:
        source = subprocess.run(
            ["git", "show", f"{revision}:{MODULE}"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except subprocess.CalledProcessError as err:
        raise SystemExit(
            f"bench_pair_decoder_ab: '--against {revision}': git has no {MODULE} there "
            f"({err.stderr.strip()})"
        ) from None
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(
        "braindecode_pars.models.pair_decoders_against", f.name
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    Path(f.name).unlink()
    return module


def ab_rounds(old_class, rounds, warmup=3):
    """Per round the times of the PARS step with its decoder of class ``old_class``
    and of this revision's class, and of the encoder-alone step (seconds).

    The decoder keeps its parameters; only its class changes between the steps, and
    with it all the code its forward and backward run (the functions of the other
    revision's module included).
    """
    encoder, small = SIZES["64 x 4"]
    pars_step, encoder_step = make_steps(
        40, "cross_attention", "folded", SMALL_BATCH, encoder, small
    )
    decoder = pars_step.model.decoder
    new_class = type(decoder)

    def with_class(cls):
        def step():
            decoder.__class__ = cls
            pars_step()

        return step

    steps = [with_class(old_class), with_class(new_class), encoder_step]
    try:
        return alternating_step_times(steps, rounds, warmup)
    finally:
        decoder.__class__ = new_class


def summary(times):
    """(old ratio, new ratio, new / old step): medians over the rounds."""
    old, new, encoder = times
    return paired_ratio(old, encoder)[0], paired_ratio(new, encoder)[0], paired_ratio(new, old)[0]


def report(results, args, revision_line):
    """Markdown lines: every run, then the medians over the runs."""
    lines = [
        "# The 64 x 4 PARS step: this revision's pair decoder against another's",
        "",
        f"Machine: {machine()}. {revision_line} Each run: {args.rounds} rounds after 3 "
        "warm-up rounds, each round the PARS step with either decoder (their order "
        "alternating) and the encoder-alone step; the same model and batch (batch 64 of "
        "10-s windows at 100 Hz, 40 patches, pos_mask_ratio 0.8, folded cross-attention "
        "decoder, fused AdamW). Ratios: medians over the rounds.",
        "",
        f"Command: `python benchmarks/bench_pair_decoder_ab.py --against {args.against} "
        f"--runs {args.runs} --rounds {args.rounds} --out {args.out or '...'}`",
        "",
        "| run | ratio to the encoder-alone step, against | ratio, this revision | "
        "step time, this revision / against |",
        "|---|---|---|---|",
    ]
    for i, (old, new, rel) in enumerate(results, 1):
        lines.append(f"| {i} | {old:.3f} | {new:.3f} | {rel:.3f} |")
    medians = [statistics.median(r[k] for r in results) for k in range(3)]
    lines.append(f"| median | {medians[0]:.3f} | {medians[1]:.3f} | {medians[2]:.3f} |")
    lines.append(
        f"| runs where this revision's ratio is lower | | "
        f"{sum(r[1] < r[0] for r in results)} of {len(results)} | |"
    )
    return lines


def main(argv=None):
    parser = report_parser(__doc__)
    parser.add_argument("--against", required=True, help="git revision of the other decoder")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args(argv)
    check_at_least_one(parser, args, "runs", "rounds")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    old = load_revision(args.against)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", args.against],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    head = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    torch.manual_seed(0)
    results = []
    for i in range(args.runs):
        results.append(summary(ab_rounds(old.CrossAttentionPairDecoder, args.rounds)))
        logger.info("run %d: against %.3f, this %.3f, step %.3f", i + 1, *results[-1])
    line = f"This revision: {head}; against: {args.against} ({commit})."
    write_report(report(results, args, line), args.out)


if __name__ == "__main__":
    sys.exit(main())
