"""Training steps on a CPU with glibc's malloc defaults and with freed memory kept.

``braindecode-pars pretrain`` calls :func:`braindecode_pars.pretraining.keep_freed_memory`
before training on a CPU. This script measures what that buys: in fresh processes,
alternately with glibc's defaults and with the call, it records

- the PARS step and the encoder-alone step each repeated on its own, as training runs
  them: ``--rounds`` rounds of a block of 4 PARS steps then a block of 4
  encoder-alone steps, the first step of each block not counted (median step time
  and minor page faults per step, and the median over rounds of the ratio of the
  two blocks' median times);
- the two steps interleaved, as ``bench_pair_decoder.py`` compares them (3 x
  ``--rounds`` rounds; the median over rounds of each round's ratio),

at 64 x 4 (batch 64 of 10-s windows at 100 Hz) and at the paper's size (batch 16 of
30-s windows at 200 Hz), 40 patches, pos_mask_ratio 0.8, the folded cross-attention
decoder, fused AdamW. Each process builds the same models (seed 0).

Usage::

    python -m benchmarks.bench_freed_memory --out benchmarks/results/freed_memory.md
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import statistics
import time

import torch

from benchmarks.lib.measure import (
    check_at_least_one,
    in_child,
    machine,
    paired_ratio,
    report_parser,
    step_times,
    write_report,
)
from benchmarks.lib.steps import SIZES, SMALL_BATCH, make_steps

logger = logging.getLogger("bench_freed_memory")

SETTINGS = ("glibc defaults", "freed memory kept")
BENCH_SIZES = ("64 x 4", "512 x 8 (paper)")


def _faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def alone(steps, rounds, block=4):
    """Each step repeated on its own, as training runs it, in alternating blocks.

    Per round, each step runs ``block`` times in a row; the first of a block settles
    the allocator after the other step's block and is not counted. Returns, per step,
    its median time and median minor page faults over the counted steps, and the
    median over rounds of the ratio of the first step's block median to the second's
    (the blocks of a round run seconds apart, so the ratio cancels most of the
    machine's drift).
    """
    times = [[] for _ in steps]
    faults = [[] for _ in steps]
    ratios = []
    for _ in range(rounds):
        medians = []
        for step, t, f in zip(steps, times, faults, strict=True):
            block_times = []
            for i in range(block):
                f0, t0 = _faults(), time.perf_counter()
                step()
                if i:
                    block_times.append(time.perf_counter() - t0)
                    f.append(_faults() - f0)
            t += block_times
            medians.append(statistics.median(block_times))
        ratios.append(medians[0] / medians[1])
    return (
        [statistics.median(t) for t in times],
        [statistics.median(f) for f in faults],
        statistics.median(ratios),
    )


def child(setting, size, rounds):
    """One process's measurements (printed as JSON by ``--child``)."""
    if setting == SETTINGS[1]:
        from braindecode_pars.pretraining.memory import keep_freed_memory

        assert keep_freed_memory(), "glibc refused the thresholds"
    torch.manual_seed(0)
    encoder, small = SIZES[size]
    batch = SMALL_BATCH if small else 16
    pars_step, encoder_step = make_steps(40, "cross_attention", "folded", batch, encoder, small)
    for step in (pars_step, encoder_step):  # warm-up
        step()
    (t_pars, t_enc), (f_pars, f_enc), alone_ratio = alone([pars_step, encoder_step], rounds)
    ratio = paired_ratio(*step_times([pars_step, encoder_step], 3 * rounds))[0]
    return dict(
        pars=batch / t_pars,
        pars_faults=f_pars,
        encoder=batch / t_enc,
        encoder_faults=f_enc,
        alone_ratio=alone_ratio,
        interleaved_ratio=ratio,
    )


def report(rows, args):
    """Markdown lines: every process, then the medians per size and setting."""
    lines = [
        "# CPU training steps with glibc's malloc defaults and with freed memory kept",
        "",
        f"Machine: {machine()}. Fresh processes, the two settings alternating "
        f"({args.pairs} of each per size). In each, the PARS step and the encoder-alone step "
        f"each repeated on its own, as training runs them: {args.rounds} rounds of 4 PARS "
        "steps then 4 encoder-alone steps, the first of each block not counted (median "
        "step time and minor page faults per step; the ratio is the median over rounds "
        "of the two blocks' median times); then the two interleaved, as in "
        f"`pair_decoder.md` ({3 * args.rounds} rounds, the median of each round's ratio). "
        "40 patches, "
        "pos_mask_ratio 0.8, folded cross-attention decoder, fused AdamW; 64 x 4: batch "
        "64 of 10-s windows at 100 Hz; the paper's size: batch 16 of 30-s windows at 200 Hz. "
        '"Freed memory kept": `braindecode_pars.pretraining.keep_freed_memory()` (glibc\'s '
        "mmap threshold 32 MiB, trim threshold 256 MiB), which `braindecode-pars "
        "pretrain` calls on a CPU.",
        "",
        f"Command: `python -m benchmarks.bench_freed_memory --pairs {args.pairs} --rounds "
        f"{args.rounds} --out benchmarks/results/freed_memory.md`",
        "",
        "| encoder | allocator | PARS windows/s (alone) | PARS faults/step | "
        "encoder-alone windows/s | encoder-alone faults/step | ratio, steps alone | "
        "ratio, interleaved |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def rate(windows_per_second):
        return (
            f"{windows_per_second:,.0f}"
            if windows_per_second >= 100
            else f"{windows_per_second:.1f}"
        )

    def line(size, setting, r):
        return (
            f"| {size} | {setting} | {rate(r['pars'])} | {r['pars_faults']:,.0f} | "
            f"{rate(r['encoder'])} | {r['encoder_faults']:,.0f} | {r['alone_ratio']:.2f} | "
            f"{r['interleaved_ratio']:.2f} |"
        )

    for size, setting, r in rows:
        lines.append(line(size, setting, r))
    lines += ["", "Medians over the processes:", "", *lines[-len(rows) - 2 : -len(rows)]]
    for size in BENCH_SIZES:
        for setting in SETTINGS:
            mine = [r for s, t, r in rows if s == size and t == setting]
            if mine:
                lines.append(
                    line(size, setting, {k: statistics.median(r[k] for r in mine) for k in mine[0]})
                )
    return lines


def main(argv=None):
    parser = report_parser(__doc__)
    parser.add_argument("--pairs", type=int, default=4, help="processes of each setting per size")
    parser.add_argument("--rounds", type=int, default=12, help="rounds of blocks per process")
    parser.add_argument("--sizes", nargs="+", default=list(BENCH_SIZES), choices=BENCH_SIZES)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        setting, size, rounds = args.child
        print(json.dumps(child(setting, size, int(rounds))))
        return
    check_at_least_one(parser, args, "pairs", "rounds")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    rows = []
    for size in args.sizes:
        for i in range(args.pairs):
            order = SETTINGS if i % 2 == 0 else SETTINGS[::-1]
            for setting in order:
                r = in_child(__spec__.name, setting, size, args.rounds)
                logger.info("%s, %s: %s", size, setting, r)
                rows.append((size, setting, r))
    write_report(report(rows, args), args.out)


if __name__ == "__main__":
    main()
