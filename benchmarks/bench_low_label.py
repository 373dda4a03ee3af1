"""The low-label benchmark: EEGMAT rest vs mental arithmetic with k labelled subjects.

12 test subjects (``EEGMAT_TEST_SUBJECTS``) that no fit trains on; k
labelled subjects drawn from the other 24 (each seed its own draw); 10-s windows,
19 channels at 100 Hz. Rows: the band-power floor; the small encoder from scratch;
the shipped PARS encoder (``pars-small``) fine-tuned with each strategy. Balanced
accuracy and Cohen's kappa on the test subjects, mean ± std over draws. Resumable:
rows are appended to the CSV as they finish.

Usage::

    python benchmarks/bench_low_label.py --ks 1 2 4 --seeds 0 1 2 3 4 \\
        --out benchmarks/results/low_label_eegmat.md
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from _measure import machine
from _pretext import SHARED

from braindecode_pars import PARSClassifier
from braindecode_pars.datasets import EEGMAT_TEST_SUBJECTS, EEGMAT_TRAIN_SUBJECTS, load_eegmat
from braindecode_pars.estimator import windows_to_arrays
from braindecode_pars.experiments.low_label import (
    format_summary,
    plot_label_efficiency,
    run_low_label,
    summarize,
)
from braindecode_pars.floor import BandPowerClassifier
from braindecode_pars.training.checkpoints import load_encoder


def methods(names, sfreq, encoder, max_epochs, lr):
    size = dict(
        emb_dim=encoder.emb_dim, depth=encoder.depth, n_heads=encoder.n_heads, ff_dim=encoder.ff_dim
    )
    common = dict(sfreq=sfreq, verbose=0, max_epochs=max_epochs, batch_size=16, lr=lr)
    pars = dict(pretrained_encoder="pars-small", **common)
    table = {
        "floor (band power)": BandPowerClassifier(sfreq=sfreq),
        "scratch": PARSClassifier(pretrain_epochs=0, **size, **common),
        "scratch + amplitude": PARSClassifier(pretrain_epochs=0, amplitude=True, **size, **common),
        "PARS full": PARSClassifier(**pars),
        "PARS full, lr 1e-4": PARSClassifier(**{**pars, "lr": 1e-4}),
        "PARS full + amplitude": PARSClassifier(amplitude=True, **pars),
        "PARS frozen": PARSClassifier(finetune="frozen", **pars),
        "PARS frozen + amplitude": PARSClassifier(finetune="frozen", amplitude=True, **pars),
        "PARS lp-ft + amplitude": PARSClassifier(finetune="lp-ft", amplitude=True, **pars),
    }
    return {name: table[name] for name in names}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+")
    parser.add_argument("--max-epochs", type=int, default=40)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--suffix", default="", help="appended to the method names")
    parser.add_argument("--data", default=str(SHARED / "eegmat"))
    parser.add_argument("--out", default="benchmarks/results/low_label_eegmat.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    windows = load_eegmat(args.data)
    X, y, sfreq = windows_to_arrays(windows)
    subjects = windows.get_metadata()["subject"].to_numpy()
    encoder = load_encoder("pars-small")
    all_names = [
        "floor (band power)", "scratch", "scratch + amplitude", "PARS full",
        "PARS full + amplitude", "PARS frozen", "PARS frozen + amplitude",
        "PARS lp-ft + amplitude",
    ]  # fmt: skip
    names = args.methods or all_names
    out = Path(args.out)
    results = run_low_label(
        X,
        y,
        subjects,
        {
            name + args.suffix: clf
            for name, clf in methods(names, sfreq, encoder, args.max_epochs, args.lr).items()
        },
        EEGMAT_TEST_SUBJECTS,
        EEGMAT_TRAIN_SUBJECTS,
        ks=args.ks,
        seeds=args.seeds,
        out=out.with_suffix(".csv"),
    )
    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    plot_label_efficiency(results, chance=0.5, ax=ax)
    ax.set_title("EEGMAT rest vs arithmetic, 12 test subjects")
    fig.savefig(out.with_suffix(".png"), dpi=110)
    summary = summarize(results)
    lines = [
        "# Low-label benchmark: EEGMAT rest vs mental arithmetic",
        "",
        f"Machine: {machine()}. Command: `python benchmarks/bench_low_label.py --ks "
        f"{' '.join(map(str, args.ks))} --seeds {' '.join(map(str, args.seeds))} "
        f"--max-epochs {args.max_epochs} --lr {args.lr:g}`. 12 test subjects that no "
        "fit trains on; k labelled subjects drawn from the other 24 per seed; 10-s "
        "windows, 19 channels, 100 Hz. Deep rows: the small encoder (64 x 4), batch 16, "
        f"{args.max_epochs} epochs, lr {args.lr:g} unless the row says otherwise, groups = "
        "subjects (fewer than 3 subjects: no validation split, the last epoch).",
        "",
        "| method | k | balanced accuracy | kappa | draws |",
        "|---|---|---|---|---|",
    ]
    for (name, k), row in summary.iterrows():
        ba, ka = row["balanced_accuracy"], row["kappa"]
        lines.append(
            f"| {name} | {k} | {ba['mean']:.3f} ± {np.nan_to_num(ba['std']):.3f} | "
            f"{ka['mean']:.3f} ± {np.nan_to_num(ka['std']):.3f} | {int(ba['count'])} |"
        )
    lines += ["", "```", format_summary(results), "```"]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
