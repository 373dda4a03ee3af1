"""PARS pretext skill against optimiser steps on real EEG, for the settings a user picks.

One factor at a time around the library's pretraining defaults (10-s crops, 40
patches, lr 1e-3, batch 64, the small encoder: 64 features, 4 blocks): learning
rate 1e-4 / 3e-4 / 1e-3 / 3e-3, window 10 / 30 s, n_patches 20 / 40 / 80. Data: the
shipped encoder's corpus (EEGMAT training subjects and the Sleep-EDF nights at
100 Hz), every tenth recording held out for validation; validation skill on 512
fixed crops with fixed draws.

Usage::

    python -m benchmarks.bench_pretext_settings --steps 1000 \\
        --out benchmarks/results/pretext_settings.md
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
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
from braindecode_pars import PARS
from braindecode_pars.models.encoder_config import ENCODER_SIZES

BASE = dict(lr=1e-3, window=10.0, n_patches=40)
GRID = [
    dict(lr=1e-4), dict(lr=3e-4), dict(), dict(lr=3e-3),
    dict(window=30.0), dict(n_patches=20), dict(n_patches=80),
]  # fmt: skip


def main():
    parser = pretext_parser(__doc__, steps=1000, out="benchmarks/results/pretext_settings.md")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--eval-every", type=int, default=100)
    args = parser.parse_args()
    store = open_corpus(args)
    results = []
    for change in GRID:
        cfg = {**BASE, **change}
        n_times = int(cfg["window"] * 100)
        train, valid = split_views(store, n_times)
        X_valid = fixed_batch(valid, 512)
        torch.manual_seed(0)
        model = PARS(
            n_times=n_times, sfreq=100, n_patches=cfg["n_patches"], **ENCODER_SIZES["small"]
        )
        rows = skill_curve(
            model, train, X_valid, args.steps, args.batch_size, cfg["lr"], args.eval_every
        )
        results.append({"config": cfg, "curve": rows})
        print(
            cfg,
            f"valid skill {rows[-1]['valid_skill']:.3f} in {rows[-1]['seconds']:.0f} s",
            flush=True,
        )
    out = save_curves(results, args.out)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lines = [
        "# PARS pretext skill against optimiser steps (real EEG)",
        "",
        f"Machine: {machine()}. Command: `python -m benchmarks.bench_pretext_settings "
        f"--steps {args.steps} --threads {args.threads}`. Batch {args.batch_size}, small "
        "encoder (64 x 4), warm-up "
        "5 % then cosine over the run. Skill = 1 - loss / loss of predicting no shift, on "
        "512 fixed validation crops from held-out recordings (0 = learned nothing).",
        "",
        "| lr | window (s) | n_patches | skill @ 25 % | @ 50 % | @ 100 % of steps | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c, curve = r["config"], r["curve"]
        at = {q: curve[max(0, int(q * len(curve)) - 1)]["valid_skill"] for q in (0.25, 0.5, 1)}
        lines.append(
            f"| {c['lr']:g} | {c['window']:g} | {c['n_patches']} | {at[0.25]:.3f} | "
            f"{at[0.5]:.3f} | {at[1]:.3f} | {curve[-1]['seconds']:.0f} |"
        )
        label = f"lr {c['lr']:g}, {c['window']:g} s, N {c['n_patches']}"
        ax.plot([p["step"] for p in curve], [p["valid_skill"] for p in curve], label=label)
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel="optimiser step", ylabel="validation skill", title="PARS on real EEG")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=110)
    write_report(lines, out)


if __name__ == "__main__":
    main()
