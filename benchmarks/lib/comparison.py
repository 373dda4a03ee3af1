"""Pretext tasks compared on one footing: the paper's Table 1 and Fig. 3, at small scale.

Every method gets the same pretraining data, the same encoder size, the same number
of epochs and the same seeds; only the pretext task differs. On the bundled
PhysioNet-MI subject:

- pretraining: the runs without imagery trials (baselines, executed movements), 30-s
  windows, one random channel of a random crop per example; once per method and seed;
- fine-tuning: the 4-class imagery task, each block of runs (3-6, 7-10, 11-14) held
  out in turn as the test set; the model is fine-tuned on ``n`` of the other blocks
  (``n_train_blocks``, the label-efficiency axis: each block holds two imagery runs),
  chosen at random by the seed;
- scores: balanced accuracy and Cohen's kappa on the held-out block, averaged over
  the test blocks, then mean and standard deviation over seeds.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import shlex
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from benchmarks.lib.checks import check_option
from benchmarks.lib.seeding import isolated_random_state
from braindecode_pars.datasets.physionet_mi import load_physionet_mi, load_physionet_mi_continuous
from braindecode_pars.demo.low_label import scratch_classifier, summary_table
from braindecode_pars.estimators.classifier import PARSClassifier
from braindecode_pars.estimators.finetuner import PARSFineTuner
from braindecode_pars.features.baselines import band_power_pipeline
from braindecode_pars.hub.folders import save_encoder
from braindecode_pars.io.windows import read_windows
from braindecode_pars.metrics import balanced_accuracy, cohen_kappa
from braindecode_pars.pretraining import run_pretraining
from braindecode_pars.pretraining.views import SingleChannelWindows


def pretext_params(method, n_patches=40, pos_mask_ratio=0.8, mask_ratio=0.75):
    """The settings that the pretext model ``method`` takes, from one shared set.

    ``pos_mask_ratio`` is PARS's and DropPos's ``gamma_pos``; ``mask_ratio`` is the
    share of patches MAE and DropPos remove and MP3 hides from keys and values.
    """
    return {
        "pars": dict(n_patches=n_patches, pos_mask_ratio=pos_mask_ratio),
        "mae": dict(mask_ratio=mask_ratio),
        "mp3": dict(mask_ratio=mask_ratio),
        "droppos": dict(mask_ratio=mask_ratio, pos_mask_ratio=pos_mask_ratio),
    }[method]


logger = logging.getLogger(__name__)

METHODS = ("floor", "scratch", "mae", "mp3", "droppos", "pars")
LABELS = {
    "floor": "Floor (band power)",
    "scratch": "Scratch",
    "mae": "MAE",
    "mp3": "MP3",
    "droppos": "DropPos",
    "pars": "PARS",
}


@dataclasses.dataclass
class ComparisonConfig:
    """Settings of the comparison; every method shares all of them."""

    methods: tuple = METHODS
    seeds: tuple = (0, 1, 2)
    n_train_blocks: tuple = (1, 2)
    subjects: tuple = (1,)
    data_path: str | None = None
    emb_dim: int = 64
    depth: int = 4
    n_heads: int = 4
    ff_dim: int = 128
    n_patches: int = 40  # PARS, paper section 2.5
    pos_mask_ratio: float = 0.8  # PARS gamma_pos (paper) and DropPos gamma_pos
    mask_ratio: float = 0.75  # MAE, MP3, DropPos (their originals' defaults)
    pretrain_window_seconds: float = 30.0
    pretrain_stride_seconds: float = 5.0
    pretrain_epochs: int = 60
    pretrain_batch_size: int = 32
    pretrain_lr: float = 1e-3
    finetune_epochs: int = 40
    finetune_batch_size: int = 16
    lr: float = 1e-4
    device: str = "cpu"

    def check(self):
        for method in self.methods:
            check_option("methods", method, METHODS)
        if not self.seeds:
            raise ValueError("'seeds' must name at least one seed.")
        for n in self.n_train_blocks:
            check_option("n_train_blocks", n, (1, 2))


def scratch_size(config):
    """The encoder size of an experiment configuration (for a scratch encoder)."""
    return dict(
        emb_dim=config.emb_dim, depth=config.depth, n_heads=config.n_heads, ff_dim=config.ff_dim
    )


def finetune_params(config, **extra):
    """:class:`~braindecode_pars.PARSFineTuner` parameters from an experiment
    configuration (the comparison's).

    Every pretext encoder, and scratch, is fully fine-tuned on whole windows, as in
    the paper's Table 1, rather than with the probe, the low-label default.
    """
    return dict(
        strategy="full",
        crop_seconds=None,
        max_epochs=config.finetune_epochs,
        batch_size=config.finetune_batch_size,
        lr=config.lr,
        device=config.device,
        **extra,
    )


def comparison_classifier(encoder, seed, config, sfreq):
    """The classifier of one method: the neural head fully fine-tuned over ``encoder``
    (a pretext task's saved encoder), or over a new encoder of the configuration's size
    (``encoder=None``: scratch)."""
    head = finetune_params(config, verbose=0)
    if encoder is None:
        return scratch_classifier(scratch_size(config), sfreq=sfreq, random_state=seed, **head)
    return PARSClassifier(
        encoder=encoder, head=PARSFineTuner(**head), sfreq=sfreq, random_state=seed, verbose=0
    )


def pretrain_method(method, seed, config, view, out):
    """Pretrain one pretext task on the shared view; returns the encoder file and losses."""
    params = pretext_params(method, config.n_patches, config.pos_mask_ratio, config.mask_ratio)
    run_dir = out / "pretrain" / f"{method}_seed{seed}"
    with isolated_random_state(seed, config.device):  # the caller's generators are kept
        net = run_pretraining(
            view,
            method,
            checkpoint_dir=run_dir,
            max_epochs=config.pretrain_epochs,
            batch_size=config.pretrain_batch_size,
            lr=config.pretrain_lr,
            device=config.device,
            progress_bar=False,
            encoder_kwargs=dict(
                emb_dim=config.emb_dim,
                depth=config.depth,
                n_heads=config.n_heads,
                ff_dim=config.ff_dim,
            ),
            **params,
        )
    path = out / "encoders" / f"{method}_seed{seed}.pt"
    save_encoder(net.encoder, path)
    losses = net.history[:, "train_loss"]
    return path, float(losses[0]), float(losses[-1])


def run_comparison(out="results/comparison", config=None):
    """Run the comparison; write the raw scores, a table and the label-efficiency figure.

    Returns
    -------
    scores : pandas.DataFrame
        One row per method, seed, number of training blocks and test block.
    """
    config = config or ComparisonConfig()
    config.check()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    pretrain_windows = load_physionet_mi_continuous(
        config.subjects,
        path=config.data_path,
        window_seconds=config.pretrain_window_seconds,
        stride_seconds=config.pretrain_stride_seconds,
    )
    view = SingleChannelWindows(pretrain_windows)
    windows = load_physionet_mi(config.subjects, path=config.data_path)
    data = read_windows(windows)
    X, y, sfreq = data.X, data.y, data.sfreq
    blocks = windows.get_metadata()["block"].to_numpy()
    all_blocks = sorted(np.unique(blocks).tolist())

    encoders, pretrain_log = {}, []
    for method, seed in itertools.product(config.methods, config.seeds):
        if method in ("scratch", "floor"):
            continue
        logger.info("Pretraining %s, seed %d.", LABELS[method], seed)
        path, first, last = pretrain_method(method, seed, config, view, out)
        encoders[method, seed] = path
        pretrain_log.append(
            {"method": method, "seed": seed, "first_loss": first, "last_loss": last}
        )

    jobs = list(itertools.product(config.seeds, all_blocks, config.n_train_blocks, config.methods))
    rows = []
    for seed, test_block, n_train, method in tqdm(jobs, desc="fine-tuning", leave=False):
        pool = [b for b in all_blocks if b != test_block]
        rng = np.random.default_rng([seed, test_block, n_train])
        train_blocks = sorted(rng.choice(pool, size=n_train, replace=False).tolist())
        train = np.isin(blocks, train_blocks)
        test = blocks == test_block
        if method == "floor":  # log band power + logistic regression
            clf = band_power_pipeline(sfreq=sfreq)
        else:
            encoder = None if method == "scratch" else encoders[method, seed]
            clf = comparison_classifier(encoder, seed, config, sfreq)
        clf.fit(X[train], y[train])
        y_pred = clf.predict(X[test])
        rows.append(
            {
                "method": method,
                "seed": seed,
                "n_train_blocks": n_train,
                "n_train_runs": 2 * n_train,
                "train_blocks": str(train_blocks),
                "test_block": test_block,
                "balanced_accuracy": balanced_accuracy(y[test], y_pred, 4),
                "kappa": cohen_kappa(y[test], y_pred, 4),
            }
        )
    scores = pd.DataFrame(rows)
    scores.to_csv(out / "scores.csv", index=False)
    with open(out / "config.json", "w") as f:
        json.dump({"config": dataclasses.asdict(config), "pretraining": pretrain_log}, f, indent=2)
    summary = summarize(scores)
    (out / "table.md").write_text(format_table(summary, config, pretrain_log))
    fig = plot_label_efficiency(summary)
    fig.savefig(out / "label_efficiency.png", dpi=120)
    plt.close(fig)
    return scores


def summarize(scores):
    """Mean over test blocks per seed, then mean and std over seeds."""
    per_seed = scores.groupby(["method", "n_train_runs", "seed"])[
        ["balanced_accuracy", "kappa"]
    ].mean()
    summary = per_seed.groupby(["method", "n_train_runs"]).agg(["mean", "std"])
    order = [m for m in METHODS if m in summary.index.get_level_values("method")]
    return summary.loc[order]  # the paper's order: scratch, MAE, MP3, DropPos, PARS


def format_table(summary, config, pretrain_log=()):
    """Markdown table: mean ± std over seeds, with the command and settings that made it."""
    command = shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])
    lines = [
        "# Pretext tasks compared on bundled PhysioNet-MI (subject S001)",
        "",
        f"Made by: `{command}`",
        "",
        f"Encoder: emb_dim {config.emb_dim}, depth {config.depth}, {config.n_heads} heads, "
        f"ff {config.ff_dim}. Pretraining: {config.pretrain_epochs} epochs on the runs "
        f"without imagery trials (30-s windows, one random channel). Fine-tuning: "
        f"{config.finetune_epochs} epochs; each block of runs held out in turn; seeds "
        f"{list(config.seeds)} (mean ± std over seeds of the mean over test blocks). "
        "Chance: balanced accuracy 0.25, kappa 0.",
        "",
        *summary_table(summary, k_header="labelled runs", labels=LABELS),
    ]
    if pretrain_log:
        lines += [
            "",
            "Pretraining loss, first and last epoch (mean over seeds):",
            "",
            "| method | first | last |",
            "|---|---|---|",
        ]
        log = pd.DataFrame(list(pretrain_log)).groupby("method")[["first_loss", "last_loss"]]
        for method, row in (
            log.mean().reindex([m for m in METHODS if m != "scratch"]).dropna().iterrows()
        ):
            lines.append(f"| {LABELS[method]} | {row['first_loss']:.4f} | {row['last_loss']:.4f} |")
    return "\n".join(lines) + "\n"


def plot_label_efficiency(summary):
    """Paper Fig. 3: the metrics against the number of labelled runs, one line per method."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for ax, metric, name in zip(
        axes, ("balanced_accuracy", "kappa"), ("balanced accuracy", "Cohen's kappa"), strict=True
    ):
        for method in summary.index.get_level_values("method").unique():
            part = summary.loc[method]
            x = part.index.to_numpy()
            mean, std = part[(metric, "mean")].to_numpy(), part[(metric, "std")].to_numpy()
            ax.plot(x, mean, marker="o", label=LABELS[method])
            ax.fill_between(x, mean - np.nan_to_num(std), mean + np.nan_to_num(std), alpha=0.15)
        ax.axhline(
            0.25 if metric == "balanced_accuracy" else 0.0, color="0.5", ls=":", label="chance"
        )
        ax.set_xlabel("labelled training runs")
        ax.set_ylabel(name)
        ax.set_xticks(sorted(summary.index.get_level_values("n_train_runs").unique()))
    axes[0].legend(fontsize=8)
    fig.suptitle("Label efficiency on PhysioNet-MI S001 (mean ± std over seeds)")
    return fig
