"""The 64 x 4 row of the pair-decoder benchmark measured many times, minutes apart.

On this machine the speed drifts by up to a third within minutes, so one measurement
of the PARS / encoder-alone ratio and of the windows per second lands anywhere in a
band around the targets of the pair-decoder work (64 x 4: at most 1.3 times the
encoder-alone step, 1,000 windows/s or more). This script repeats the first row of
``bench_pair_decoder.py`` (batch 64 of 10-s windows at 100 Hz, 40 patches,
pos_mask_ratio 0.8, the folded cross-attention decoder, fused AdamW; the two steps
interleaved, the ratio the median over rounds of each round's ratio) ``--runs``
times with ``--pause`` seconds between them, on the same two models, and reports
every run and the median and range over the runs.

Usage::

    python benchmarks/bench_pair_decoder_repeat.py --out benchmarks/results/pair_decoder_repeat.md
"""

from __future__ import annotations

import logging
import statistics
import time

import torch
from _measure import (
    check_at_least_one,
    machine,
    paired_ratio,
    report_parser,
    step_times,
    write_report,
)
from bench_pair_decoder import SIZES, SMALL_BATCH, make_steps

logger = logging.getLogger("bench_pair_decoder_repeat")


def repeated_runs(runs, repeats, pause, size="64 x 4"):
    """``runs`` measurements of a size's row: per run (PARS windows/s, encoder-alone
    windows/s, median paired ratio, its first and third quartiles)."""
    encoder, small = SIZES[size]
    batch = SMALL_BATCH if small else 16
    pars_step, encoder_step = make_steps(40, "cross_attention", "folded", batch, encoder, small)
    results = []
    for i in range(runs):
        if i:
            time.sleep(pause)
        t_pars, t_enc = step_times([pars_step, encoder_step], repeats)
        ratio, q1, q3 = paired_ratio(t_pars, t_enc)
        results.append(
            (batch / statistics.median(t_pars), batch / statistics.median(t_enc), ratio, q1, q3)
        )
        logger.info("run %d: %.0f w/s, ratio %.3f", i + 1, results[-1][0], ratio)
    return results


def report(results, args):
    """The Markdown lines of the runs and their summary against the targets."""
    pars = [r[0] for r in results]
    ratios = [r[2] for r in results]
    lines = [
        "# The 64 x 4 PARS step, measured repeatedly",
        "",
        f"Machine: {machine()}. Each run: {args.repeats} interleaved rounds of the PARS "
        "step and the encoder-alone step after 2 warm-up rounds (batch 64 of 10-s windows "
        "at 100 Hz, 40 patches, pos_mask_ratio 0.8, folded cross-attention decoder, fused "
        f"AdamW); {args.pause:g} s between runs; the same two models throughout.",
        "",
        "Command: `python benchmarks/bench_pair_decoder_repeat.py --runs "
        f"{args.runs} --pause {args.pause:g} --out benchmarks/results/pair_decoder_repeat.md`",
        "",
        "| run | PARS windows/s | encoder-alone windows/s | ratio of step times (quartiles) |",
        "|---|---|---|---|",
    ]
    for i, (p, e, r, q1, q3) in enumerate(results, 1):
        lines.append(f"| {i} | {p:,.0f} | {e:,.0f} | {r:.2f} ({q1:.2f}-{q3:.2f}) |")
    lines += [
        "",
        "| over the runs | PARS windows/s | ratio |",
        "|---|---|---|",
        f"| median | {statistics.median(pars):,.0f} | {statistics.median(ratios):.3f} |",
        f"| range | {min(pars):,.0f} - {max(pars):,.0f} | {min(ratios):.2f} - {max(ratios):.2f} |",
        f"| runs at the target (>= 1,000 windows/s; ratio <= 1.3) | "
        f"{sum(p >= 1000 for p in pars)} of {len(pars)} | "
        f"{sum(r <= 1.3 for r in ratios)} of {len(ratios)} |",
    ]
    return lines


def main(argv=None):
    parser = report_parser(__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--pause", type=float, default=10.0, help="seconds between runs")
    parser.add_argument("--repeats", type=int, default=21, help="interleaved rounds per run")
    args = parser.parse_args(argv)
    check_at_least_one(parser, args, "runs", "repeats")
    if args.pause < 0:
        parser.error(f"--pause must be 0 or more seconds, got {args.pause}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.manual_seed(0)
    write_report(report(repeated_runs(args.runs, args.repeats, args.pause), args), args.out)


if __name__ == "__main__":
    main()
