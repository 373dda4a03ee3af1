"""Pretext skill of every pretext task with the library's pretraining defaults, real EEG.

PARS, MAE, MP3 and DropPos on the same encoder (the small one: 64 features, 4
blocks), the same crops (10 s at 100 Hz) and the same optimisation (lr 1e-3, batch
64, warm-up then cosine over the budget), on the shipped encoder's corpus with
every tenth recording held out. Skill = 1 - loss / loss of the predictor that
learned nothing (PARS: no shift; MAE: zero; MP3 and DropPos: uniform over the 10
positions), on 512 fixed validation crops with fixed draws.

Usage::

    python -m benchmarks.bench_pretext_methods --steps 1500 \\
        --out benchmarks/results/pretext_methods.md
"""

from __future__ import annotations

import torch

from benchmarks.lib.measure import machine, write_report
from benchmarks.lib.pretext import (
    fixed_batch,
    open_corpus,
    pretext_parser,
    save_curves,
    skill_curve,
    split_views,
)
from braindecode_pars.models.encoder_config import ENCODER_SIZES
from braindecode_pars.models.pretext import PRETEXT_MODELS


def main():
    parser = pretext_parser(__doc__, steps=1500, out="benchmarks/results/pretext_methods.md")
    parser.add_argument("--methods", nargs="+", default=["pars", "mae", "mp3", "droppos"])
    args = parser.parse_args()
    store = open_corpus(args)
    train, valid = split_views(store, 1000)
    X_valid = fixed_batch(valid, 512)
    rows = []
    for method in args.methods:
        torch.manual_seed(0)
        model = PRETEXT_MODELS[method](n_times=1000, sfreq=100, **ENCODER_SIZES["small"])
        curve = skill_curve(model, train, X_valid, args.steps, 64, 1e-3, args.steps // 10)
        rows.append(dict(method=method, curve=curve))
        print(method, f"{curve[-1]['valid_skill']:.3f}", flush=True)
    out = save_curves(rows, args.out)
    lines = [
        "# Pretext skill of each method with the library's defaults (real EEG)",
        "",
        f"Machine: {machine()}. Command: `python -m benchmarks.bench_pretext_methods --steps "
        f"{args.steps}`. Small encoder, 10-s crops at 100 Hz, lr 1e-3, batch 64, "
        f"{args.steps} steps. Validation on 512 fixed crops of held-out recordings.",
        "",
        "| method | trivial loss | validation loss | skill @ 50 % | skill @ 100 % | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["curve"]
        half = c[len(c) // 2 - 1]["valid_skill"]
        lines.append(
            f"| {r['method']} | {c[-1]['valid_trivial']:.4f} | {c[-1]['valid_loss']:.4f} | "
            f"{half:.3f} | {c[-1]['valid_skill']:.3f} | {c[-1]['seconds']:.0f} |"
        )
    write_report(lines, out)


if __name__ == "__main__":
    main()
