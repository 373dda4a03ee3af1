"""Pretext skill of every pretext task with the library's pretraining defaults, real EEG.

PARS, MAE, MP3 and DropPos on the same encoder (the small one: 64 features, 4
blocks), the same crops (10 s at 100 Hz) and the same optimisation (lr 1e-3, batch
64, warm-up then cosine over the budget), on the shipped encoder's corpus with
every tenth recording held out. Skill = 1 - loss / loss of the predictor that
learned nothing (PARS: no shift; MAE: zero; MP3 and DropPos: uniform over the 10
positions), on 512 fixed validation crops with fixed draws.

Usage::

    python benchmarks/bench_pretext_methods.py --steps 1500 \\
        --out benchmarks/results/pretext_methods.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from _measure import machine
from _pretext import corpus_store, fixed_batch, skill_curve, split_views

from braindecode_pars.models import PRETEXT_MODELS

SMALL = dict(emb_dim=64, depth=4, n_heads=4, ff_dim=128)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--methods", nargs="+", default=["pars", "mae", "mp3", "droppos"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--store", default="results/store-shared")
    parser.add_argument("--out", default="benchmarks/results/pretext_methods.md")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    store = corpus_store(args.store)
    train, valid = split_views(store, 1000)
    X_valid = fixed_batch(valid, 512)
    rows = []
    for method in args.methods:
        torch.manual_seed(0)
        model = PRETEXT_MODELS[method](n_times=1000, sfreq=100, **SMALL)
        curve = skill_curve(model, train, X_valid, args.steps, 64, 1e-3, args.steps // 10)
        rows.append(dict(method=method, curve=curve))
        print(method, f"{curve[-1]['valid_skill']:.3f}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    lines = [
        "# Pretext skill of each method with the library's defaults (real EEG)",
        "",
        f"Machine: {machine()}. Command: `python benchmarks/bench_pretext_methods.py --steps "
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
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
