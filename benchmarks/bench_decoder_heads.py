"""PARS pretext skill with 8 and 4 heads in the pair decoder of the small encoder.

The cross-attention decoder's heads are not given by the paper; the library uses 8,
the paper encoder's. The small encoder (64 features, 4 blocks) has 4 heads of its
own, and a decoder of 4 heads does half the decoder's table work: at 64 x 4 it
brings the PARS step from about 1.3 to about 1.2 times the encoder-alone step. This
script measures what it does to learning: the same pretraining (``bench_pretext_
settings.py``'s defaults: 10-s crops, 40 patches, lr 1e-3, batch 64, warm-up then
cosine over ``--steps``) with each decoder, ``--seeds`` initialisations each, the
validation skill on 512 fixed crops of held-out recordings as it goes, and the
seconds each run took. ``--part ratio`` measures instead the training step of each
against the encoder-alone step, as ``bench_pair_decoder.py`` does (batch 64 of 10-s
windows, the three steps interleaved in every round).

Usage::

    python -m benchmarks.bench_decoder_heads --steps 2000 --threads 2 \\
        --out benchmarks/results/decoder_heads.md
    python -m benchmarks.bench_decoder_heads --part ratio --threads 2 \\
        --out benchmarks/results/decoder_heads_ratio.md
"""

from __future__ import annotations

import statistics

import torch

from benchmarks.lib.measure import alternating_step_times, machine, paired_ratio, write_report
from benchmarks.lib.pretext import (
    fixed_batch,
    open_corpus,
    pretext_parser,
    save_curves,
    skill_curve,
    split_views,
)
from benchmarks.lib.steps import SIZES, SMALL_BATCH, make_steps
from braindecode_pars import PARS
from braindecode_pars.models.encoder_config import ENCODER_SIZES

HEADS = (8, 4)


def run(train, X_valid, heads, seed, args):
    """One pretraining run's skill curve (``skill_curve`` rows)."""
    torch.manual_seed(seed)
    model = PARS(
        n_times=1000, sfreq=100, n_patches=40, decoder_heads=heads, **ENCODER_SIZES["small"]
    )
    return skill_curve(
        model, train, X_valid, args.steps, args.batch_size, args.lr, args.eval_every, seed=seed
    )


def step_ratios(runs, rounds, warmup=3):
    """Per run, the median over rounds of each decoder's PARS step over the
    encoder-alone step, the three steps interleaved (the decoders' order alternating),
    and each decoder's median windows/s."""
    encoder, small = SIZES["64 x 4"]
    steps = []
    for heads in HEADS:
        torch.manual_seed(0)
        pars_step, encoder_step = make_steps(
            40, "cross_attention", "folded", SMALL_BATCH, dict(encoder, decoder_heads=heads), small
        )
        steps.append(pars_step)
    steps.append(encoder_step)
    for _ in range(warmup):
        for step in steps:
            step()
    results = []
    for _ in range(runs):
        times = alternating_step_times(steps, rounds, warmup=0)
        results.append(
            [paired_ratio(times[i], times[2])[0] for i in (0, 1)]
            + [SMALL_BATCH / statistics.median(times[i]) for i in (0, 1)]
        )
    return results


def ratio_report(results, args):
    """Markdown lines of :func:`step_ratios`."""
    lines = [
        "# The 64 x 4 PARS step with 8 and 4 decoder heads, against the encoder-alone step",
        "",
        f"Machine: {machine()}. Command: `python -m benchmarks.bench_decoder_heads --part "
        f"ratio --threads {args.threads} --runs {args.runs} --rounds {args.rounds}`. Batch 64 "
        "of 10-s windows at 100 Hz, 40 patches, pos_mask_ratio 0.8, folded cross-attention "
        "decoder, fused AdamW; each round the PARS step with either decoder (their order "
        "alternating) and the encoder-alone step; ratios are medians over the rounds.",
        "",
        "| run | ratio, 8 heads | ratio, 4 heads | windows/s, 8 heads | windows/s, 4 heads |",
        "|---|---|---|---|---|",
    ]
    for i, (r8, r4, w8, w4) in enumerate(results, 1):
        lines.append(f"| {i} | {r8:.3f} | {r4:.3f} | {w8:,.0f} | {w4:,.0f} |")
    medians = [statistics.median(r[k] for r in results) for k in range(4)]
    lines.append(
        f"| median | {medians[0]:.3f} | {medians[1]:.3f} | {medians[2]:,.0f} | {medians[3]:,.0f} |"
    )
    return lines


def report(results, args):
    """Markdown lines: every run, then mean and spread over the seeds per decoder."""
    lines = [
        "# PARS pretext skill with 8 and 4 decoder heads (small encoder, real EEG)",
        "",
        f"Machine: {machine()}. Command: `python -m benchmarks.bench_decoder_heads --steps "
        f"{args.steps} --threads {args.threads} --seeds {args.seeds} --out {args.out}`. Batch "
        f"{args.batch_size}, lr {args.lr:g}, 10-s crops at 100 Hz, 40 patches, "
        "pos_mask_ratio 0.8, encoder 64 x 4 (4 heads); warm-up 5 % then cosine over the "
        "run. Skill = 1 - loss / loss of predicting no shift, on 512 fixed validation "
        "crops of held-out recordings (0 = learned nothing).",
        "",
        "| decoder heads | seed | skill @ 50 % | @ 100 % of steps | seconds |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        curve = r["curve"]
        half = min(curve, key=lambda row: abs(row["step"] - args.steps / 2))
        lines.append(
            f"| {r['heads']} | {r['seed']} | {half['valid_skill']:.3f} | "
            f"{curve[-1]['valid_skill']:.3f} | {curve[-1]['seconds']:.0f} |"
        )
    lines += ["", "| decoder heads | final skill, mean ± std over seeds | seconds, mean |"]
    lines.append("|---|---|---|")
    for heads in HEADS:
        mine = [r["curve"][-1] for r in results if r["heads"] == heads]
        if not mine:
            continue
        skills = [row["valid_skill"] for row in mine]
        spread = statistics.stdev(skills) if len(skills) > 1 else 0.0
        lines.append(
            f"| {heads} | {statistics.mean(skills):.3f} ± {spread:.3f} | "
            f"{statistics.mean(row['seconds'] for row in mine):.0f} |"
        )
    return lines


def main(argv=None):
    parser = pretext_parser(__doc__, steps=1000, out="benchmarks/results/decoder_heads.md")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=3, help="initialisations per decoder")
    parser.add_argument("--part", choices=("skill", "ratio"), default="skill")
    parser.add_argument("--runs", type=int, default=4, help="--part ratio: measurements")
    parser.add_argument("--rounds", type=int, default=60, help="--part ratio: rounds per run")
    args = parser.parse_args(argv)
    for name, value in (
        ("--steps", args.steps),
        ("--seeds", args.seeds),
        ("--runs", args.runs),
        ("--rounds", args.rounds),
    ):
        if value < 1:
            parser.error(f"{name} must be at least 1, got {value}")
    if args.part == "ratio":
        torch.set_num_threads(args.threads)
        write_report(ratio_report(step_ratios(args.runs, args.rounds), args), args.out)
        return
    store = open_corpus(args)
    train, valid = split_views(store, 1000)
    X_valid = fixed_batch(valid, 512)
    results = []
    for seed in range(args.seeds):
        for heads in HEADS:  # the two decoders alternate, so drift touches both alike
            curve = run(train, X_valid, heads, seed, args)
            results.append(dict(heads=heads, seed=seed, curve=curve))
            print(
                f"heads {heads}, seed {seed}: valid skill {curve[-1]['valid_skill']:.3f} in "
                f"{curve[-1]['seconds']:.0f} s",
                flush=True,
            )
    save_curves(results, args.out)
    write_report(report(results, args), args.out)


if __name__ == "__main__":
    main()
