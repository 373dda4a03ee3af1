"""The low-label benchmark: k labelled subjects (or blocks), fixed test subjects.

Two tasks. ``eegmat``: EEGMAT rest vs mental arithmetic, 12 test subjects
(``EEGMAT_TEST_SUBJECTS``) that no fit trains on, k labelled subjects drawn from the
other 24 (each seed its own draw), 10-s windows, 19 channels at 100 Hz.
``physionet-mi``: the bundled PhysioNet-MI subject S001, 4 classes, block 3 tested,
k of blocks 1 and 2 labelled. Rows: the band-power floor; the small encoder from
scratch; the shipped PARS encoder (``pars-small``) and an MAE encoder pretrained on
the same corpus with the same budget, fine-tuned with each strategy, on whole
windows or random crops, with or without augmentation. Balanced accuracy and
Cohen's kappa on the test set, mean ± std over draws. Resumable: rows are appended
to the CSV as they finish, and each command is recorded beside it.

Usage::

    python -m benchmarks.bench_low_label --task eegmat --ks 1 2 4 8 24 --threads 1 \
        --methods "floor (band power)" scratch "PARS full" "MAE full"
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from benchmarks.lib.encoders import ENCODERS, benchmark_encoder
from benchmarks.lib.measure import command_line, machine
from benchmarks.lib.pretext import SHARED
from braindecode_pars import PARSClassifier, PARSFineTuner
from braindecode_pars.datasets.eegmat import (
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
    load_eegmat,
)
from braindecode_pars.datasets.physionet_mi import load_physionet_mi
from braindecode_pars.demo.low_label import (
    format_summary,
    plot_label_efficiency,
    run_low_label,
    scratch_classifier,
    summarize,
    summary_table,
)
from braindecode_pars.features.baselines import band_power_pipeline
from braindecode_pars.hub.folders import load_encoder
from braindecode_pars.io.windows import read_windows

#: The MAE encoder pretrained on the same corpus with the same budget as pars-small
#: (``benchmarks/encoders/mae-small/README.md`` says how it was made).
MAE_ENCODER = ENCODERS / "mae-small"


class InstanceNormalized(TransformerMixin, BaseEstimator):
    """Each channel of each window to zero mean and unit variance, as the encoder
    sees it (:meth:`PatchEncoder.normalize`): what the floor keeps without power."""

    def fit(self, X, y=None):
        self.encoder_ = load_encoder("pars-small")  # only its normalisation is used
        return self

    def transform(self, X):
        return self.encoder_.normalize(torch.as_tensor(np.asarray(X))).numpy()


class EncoderFeatures(TransformerMixin, BaseEstimator):
    """A frozen encoder's tokens, averaged over each channel's 1-s patches and
    concatenated over channels: (n_windows, n_chans * emb_dim)."""

    def __init__(self, encoder="pars-small", batch_size=32):
        self.encoder = encoder
        self.batch_size = batch_size

    def fit(self, X, y=None):
        self.encoder_ = load_encoder(benchmark_encoder(self.encoder)).eval()
        return self

    def transform(self, X):
        out = []
        with torch.no_grad():
            for i in range(0, len(X), self.batch_size):
                xb = torch.as_tensor(np.asarray(X[i : i + self.batch_size]), dtype=torch.float32)
                B, C, T = xb.shape  # each channel through the single-channel encoder
                tokens = self.encoder_(xb.reshape(B * C, 1, T))
                out.append(tokens.mean(dim=1).reshape(B, -1).numpy())
        return np.concatenate(out)


def linear_probe(encoder):
    """Logistic regression on a frozen encoder's pooled features (class-balanced)."""
    return make_pipeline(
        EncoderFeatures(encoder),
        StandardScaler(),
        LogisticRegression(class_weight="balanced", max_iter=2000),
    )


def methods(names, sfreq, encoder, max_epochs, lr, crop_seconds):
    size = encoder.config.asdict()
    # every row names its strategy, crops and epoch selection, so that a change of the
    # fine-tuner's defaults changes no row
    common = dict(verbose=0, max_epochs=max_epochs, batch_size=16, lr=lr)
    common.update(strategy="full", crop_seconds=None, min_valid_groups=3)
    crops = dict(crop_seconds=crop_seconds)
    augment = dict(augmentation="standard")  # FTSurrogate, ChannelsDropout, SmoothTimeMask
    frozen = dict(strategy="frozen")
    last = dict(min_valid_groups=10**6)  # no validation split: the last epoch

    def head(*changes):
        params = dict(common)
        for change in changes:
            params.update(change)
        return params

    def scratch(*changes):
        """A new encoder of the shipped one's size, every weight trained."""
        return scratch_classifier(size, sfreq=sfreq, **head(*changes))

    def pars(*changes, encoder="pars-small"):
        """The neural head over a saved encoder (``pars-small``, or MAE's)."""
        return PARSClassifier(
            encoder=encoder, head=PARSFineTuner(**head(*changes)), sfreq=sfreq, verbose=0
        )

    def mae(*changes):
        return pars(*changes, encoder=MAE_ENCODER)

    table = {
        "floor (band power)": band_power_pipeline(sfreq=sfreq),
        "floor on instance-normalised windows": make_pipeline(
            InstanceNormalized(), band_power_pipeline(sfreq=sfreq)
        ),
        "PARS features + logistic regression": linear_probe("pars-small"),
        "MAE features + logistic regression": linear_probe(MAE_ENCODER),
        "scratch": scratch(),
        "scratch + amplitude": scratch(dict(amplitude=True)),
        "scratch, crops": scratch(crops),
        "scratch + augmentation": scratch(augment),
        "scratch, last epoch": scratch(last),
        "scratch, crops, last epoch": scratch(crops, last),
        "PARS full": pars(),
        "PARS full, lr 1e-4": pars(dict(lr=1e-4)),
        "PARS full + amplitude": pars(dict(amplitude=True)),
        "PARS frozen": pars(frozen),
        "PARS frozen + amplitude": pars(frozen, dict(amplitude=True)),
        "PARS lp-ft": pars(dict(strategy="lp-ft")),
        "PARS lp-ft + amplitude": pars(dict(strategy="lp-ft", amplitude=True)),
        "PARS full, crops": pars(crops),
        "PARS frozen, crops": pars(frozen, crops),
        "PARS full + augmentation": pars(augment),
        "PARS full, crops + augmentation": pars(crops, augment),
        "PARS full, last epoch": pars(last),
        "PARS frozen, last epoch": pars(frozen, last),
        "PARS frozen, crops, last epoch": pars(frozen, crops, last),
        "PARS frozen, crops + amplitude, last epoch": pars(
            frozen, crops, dict(amplitude=True), last
        ),
        "PARS frozen, crops + augmentation, last epoch": pars(frozen, crops, augment, last),
        "PARS frozen, crops, last epoch, lr 3e-3": pars(frozen, crops, last, dict(lr=3e-3)),
        "PARS frozen, crops, last epoch, spatial dropout 0.2": pars(
            frozen, crops, last, dict(spatial_drop_prob=0.2)
        ),
        "PARS frozen, crops, last epoch, 80 epochs": pars(frozen, crops, last, dict(max_epochs=80)),
        "MAE full": mae(),
        "MAE frozen": mae(frozen),
        "MAE lp-ft": mae(dict(strategy="lp-ft")),
        "MAE frozen, crops, last epoch": mae(frozen, crops, last),
    }
    unknown = sorted(set(names) - set(table))
    if unknown:
        raise ValueError(f"Unknown methods {unknown}; known: {sorted(table)}.")
    return {name: table[name] for name in names}


def physionet_mi(sfreq):
    """PhysioNet-MI S001, 4 classes, executed and imagined runs; groups = blocks 1-3."""
    windows = load_physionet_mi(runs=range(3, 15), sfreq=sfreq)
    data = read_windows(windows)
    X, y, sfreq = data.X, data.y, data.sfreq
    return X, y, sfreq, windows.get_metadata()["block"].to_numpy()


#: The run that chose the earlier defaults, inside the 24 training subjects (never the test
#: subjects); it chooses nothing now (the development tasks' selection splits do).
SELECTION_TEST = tuple(sorted(EEGMAT_TRAIN_SUBJECTS)[0::2])
SELECTION_POOL = tuple(sorted(EEGMAT_TRAIN_SUBJECTS)[1::2])

#: Figure labels of the rows that are what the classifier's defaults did before the probe.
DEFAULT_LABELS = {
    "PARS frozen, crops, last epoch": "PARS frozen, crops, last epoch (earlier defaults)",
    "MAE frozen, crops, last epoch": "MAE frozen, crops, last epoch (earlier defaults)",
    "scratch, crops, last epoch": "scratch, crops, last epoch (earlier defaults, scratch)",
    "PARS full": "PARS full, best epoch from 3 subjects (the paper's strategy)",
    "scratch": "scratch full, best epoch from 3 subjects",
}

#: Rows in the EEGMAT figures: the floor, the defaults, the paper's strategy.
EEGMAT_PLOT = [
    "floor (band power)",
    "floor on instance-normalised windows",
    "PARS frozen, crops, last epoch",
    "MAE frozen, crops, last epoch",
    "scratch, crops, last epoch",
    "PARS full",
    "scratch",
]

TASKS = {
    "eegmat": dict(
        title="EEGMAT rest vs mental arithmetic",
        groups="subjects",
        ks=[1, 2, 4, 8, 24],
        crop_seconds=5.0,
        chance=0.5,
        plot=EEGMAT_PLOT,
        labels=DEFAULT_LABELS,
        out="benchmarks/results/low_label_eegmat.md",
        about=(
            "12 test subjects that no fit trains on; k labelled subjects drawn from the "
            "other 24 per seed (k = 24: all of them, the seed changing only the fit); "
            "10-s windows, 19 channels, 100 Hz."
        ),
    ),
    "eegmat-selection": dict(
        title="EEGMAT rest vs arithmetic, selection within the 24 training subjects",
        groups="subjects",
        ks=[1, 2, 4, 8],
        crop_seconds=5.0,
        chance=0.5,
        plot=EEGMAT_PLOT,
        labels=DEFAULT_LABELS,
        out="benchmarks/results/low_label_eegmat_selection.md",
        about=(
            "How the earlier fine-tuning defaults were chosen without the 12 test "
            "subjects: the 24 training subjects split into 12 selection-test subjects "
            "(every other one: "
            f"{' '.join(map(str, SELECTION_TEST))}) and 12 labelled-pool subjects "
            f"({' '.join(map(str, SELECTION_POOL))}); k labelled subjects drawn from the "
            "pool per seed; 10-s windows, 19 channels, 100 Hz."
        ),
    ),
    "physionet-mi": dict(
        title="PhysioNet-MI S001, left fist / right fist / both fists / both feet",
        groups="blocks",
        ks=[1, 2],
        crop_seconds=2.0,
        chance=0.25,
        plot=["floor (band power)", "PARS frozen", "MAE frozen", "scratch", "PARS full"],
        labels={
            "PARS frozen": "PARS frozen, whole 4-s windows (earlier defaults)",
            "scratch": "scratch (earlier defaults, scratch)",
            "PARS full": "PARS full (the paper's strategy)",
        },
        out="benchmarks/results/low_label_physionet_mi.md",
        about=(
            "One subject (S001, bundled), executed and imagined runs 3-14, 4-s windows from "
            "each cue, 64 channels, 100 Hz. The runs form three blocks, each holding one run "
            "of every task: block 3 (runs 11-14) is the test set, k labelled blocks are "
            "drawn from blocks 1 and 2 per seed (k = 2: both, the seed changing only the fit)."
        ),
    ),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="eegmat")
    parser.add_argument("--ks", nargs="+", type=int, help="default: every k of the task")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+")
    parser.add_argument("--max-epochs", type=int, default=40)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--crop-seconds", type=float, help="rows with crops (default: task's)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--suffix", default="", help="appended to the method names")
    parser.add_argument("--data", default=str(SHARED / "eegmat"))
    parser.add_argument("--out", help="default: benchmarks/results/low_label_<task>.md")
    parser.add_argument(
        "--plot-methods", nargs="+", help="rows in the figure (default: the task's)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    task = TASKS[args.task]
    ks = args.ks or task["ks"]
    crop_seconds = args.crop_seconds or task["crop_seconds"]
    encoder = load_encoder("pars-small")
    if args.task.startswith("eegmat"):
        windows = load_eegmat(args.data)
        data = read_windows(windows)
        X, y, sfreq = data.X, data.y, data.sfreq
        groups = windows.get_metadata()["subject"].to_numpy()
        test, pool = EEGMAT_TEST_SUBJECTS, EEGMAT_TRAIN_SUBJECTS
        if args.task == "eegmat-selection":
            test, pool = SELECTION_TEST, SELECTION_POOL
            keep = np.isin(groups, EEGMAT_TRAIN_SUBJECTS)  # the test subjects are not read
            X, y, groups = X[keep], y[keep], groups[keep]
    else:
        X, y, sfreq, groups = physionet_mi(encoder.sfreq)
        test, pool = [3], [1, 2]
    all_names = [
        "floor (band power)", "scratch", "PARS full", "PARS frozen", "MAE full", "MAE frozen",
    ]  # fmt: skip
    names = args.methods or all_names
    if any(name.startswith("MAE") for name in names):
        benchmark_encoder(MAE_ENCODER)
    out = Path(args.out or task["out"])
    results = run_low_label(
        X,
        y,
        groups,
        {
            name + args.suffix: clf
            for name, clf in methods(
                names, sfreq, encoder, args.max_epochs, args.lr, crop_seconds
            ).items()
        },
        test,
        pool,
        ks=ks,
        seeds=args.seeds,
        out=out.with_suffix(".csv"),
    )
    commands_file = out.with_suffix(".commands")
    commands = commands_file.read_text().splitlines() if commands_file.exists() else []
    command = command_line(__spec__.name)
    if command not in commands:
        commands.append(command)
        commands_file.write_text("\n".join(commands) + "\n")
    shown = args.plot_methods or task["plot"]
    plotted = results[results["method"].isin(shown)].copy()
    plotted["method"] = pd.Categorical(plotted["method"], categories=shown, ordered=True)
    plotted = plotted.sort_values("method")
    plotted["method"] = plotted["method"].astype(str).map(lambda m: task["labels"].get(m, m))
    fig, ax = plt.subplots(figsize=(11, 5), constrained_layout=True)
    plot_label_efficiency(plotted, chance=task["chance"], ax=ax)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # off the curves
    ax.set_xlabel(f"labelled {task['groups']}")
    ax.set_title(task["title"])
    fig.savefig(out.with_suffix(".png"), dpi=110)
    summary = summarize(results)
    lines = [
        f"# Low-label benchmark: {task['title']}",
        "",
        f"Machine: {machine()}. {task['about']} Deep rows: the small encoder (64 x 4; PARS = "
        "the shipped `pars-small`, MAE = `benchmarks/encoders/mae-small`, pretrained on "
        "the same corpus for the same 80 epochs), batch 16, lr 1e-3, 40 epochs unless the "
        f"row says otherwise; crops: {crop_seconds:g}-s random crops in training, "
        "5 crops averaged in prediction; augmentation: braindecode's FTSurrogate, "
        "ChannelsDropout (0.2) and SmoothTimeMask (1 s), each with probability 0.5; groups "
        f"= {task['groups']} (fewer than 3: no validation split, the last epoch).",
        "",
        "Commands (each adds its rows to the same CSV; rows already there are not run again):",
        "",
        *[f"    {c}" for c in commands],
        "",
        *summary_table(summary, count_header="draws"),
    ]
    lines += ["", "```", format_summary(results, chance=task["chance"]), "```"]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
