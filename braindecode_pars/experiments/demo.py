"""The main job: PARS against training from scratch on bundled PhysioNet-MI EEG.

1. Pretrain PARS on the recordings of the subject that hold no imagery trial (eyes
   open and closed baselines, executed movements): 30-s windows, one random channel
   of a random crop per example.
2. Fine-tune the paper's 4-class motor-imagery task (left fist, right fist, both
   fists, both feet) with ``cross_validate`` and ``LeaveOneGroupOut`` over the three
   blocks of runs (runs 3-6, 7-10, 11-14: each block holds every class), starting
   from the pretrained encoder, and from scratch.
3. Report balanced accuracy and Cohen's kappa per fold and on average, and draw the
   shift matrices of a window no pretraining saw (paper Fig. 6) and the training curves.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.model_selection import LeaveOneGroupOut, cross_validate

from ..datasets import SingleChannelWindows, load_physionet_mi, load_physionet_mi_continuous
from ..estimator import PARSClassifier, windows_to_arrays
from ..metrics import make_scorer
from ..training import pretrain, save_encoder
from ..viz import plot_shift_matrices, plot_training_curves

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class DemoConfig:
    """Settings of the demonstration; defaults keep it to minutes on two CPU cores.

    ``paper_size()`` gives the paper's encoder (512 features, 8 blocks, 8 heads).
    """

    subjects: tuple = (1,)
    data_path: str | None = None
    emb_dim: int = 64
    depth: int = 4
    n_heads: int = 4
    ff_dim: int = 128
    n_patches: int = 40  # paper section 2.5
    pos_mask_ratio: float = 0.8  # paper section 2.5
    pretrain_window_seconds: float = 30.0  # paper section 2.5: 30-s windows
    pretrain_stride_seconds: float = 5.0
    pretrain_epochs: int = 60
    pretrain_batch_size: int = 32
    finetune_epochs: int = 60
    finetune_batch_size: int = 16
    lr: float = 1e-4  # paper section 2.5
    pretrain_lr: float = 1e-3
    seed: int = 0
    device: str = "cpu"

    def paper_size(self):
        """The same settings with the paper's encoder size."""
        return dataclasses.replace(self, emb_dim=512, depth=8, n_heads=8, ff_dim=512)


def finetune_params(config, sfreq, **extra):
    """PARSClassifier parameters from an experiment configuration (demo or comparison)."""
    return dict(
        emb_dim=config.emb_dim,
        depth=config.depth,
        n_heads=config.n_heads,
        ff_dim=config.ff_dim,
        max_epochs=config.finetune_epochs,
        batch_size=config.finetune_batch_size,
        lr=config.lr,
        sfreq=sfreq,
        device=config.device,
        **extra,
    )


def pretrain_encoder(config, out):
    """Pretrain PARS on the non-imagery runs; resumes from ``out/pretrain`` if interrupted."""
    windows = load_physionet_mi_continuous(
        config.subjects,
        path=config.data_path,
        window_seconds=config.pretrain_window_seconds,
        stride_seconds=config.pretrain_stride_seconds,
    )
    view = SingleChannelWindows(windows)
    net = pretrain(
        view,
        "pars",
        checkpoint_dir=out / "pretrain",
        max_epochs=config.pretrain_epochs,
        batch_size=config.pretrain_batch_size,
        lr=config.pretrain_lr,
        device=config.device,
        encoder_kwargs=dict(
            emb_dim=config.emb_dim, depth=config.depth, n_heads=config.n_heads, ff_dim=config.ff_dim
        ),
        n_patches=config.n_patches,
        pos_mask_ratio=config.pos_mask_ratio,
    )
    save_encoder(net.encoder, out / "encoder.pt")
    return net


def shift_matrix_figure(net, config, out):
    """Fig. 6 on a 30-s crop of an imagery run, which pretraining never saw."""
    held_out = load_physionet_mi_continuous(
        config.subjects[:1],
        runs=(4,),
        path=config.data_path,
        window_seconds=config.pretrain_window_seconds,
        stride_seconds=config.pretrain_window_seconds,
    )
    view = SingleChannelWindows(held_out, max_shift=0)
    torch.manual_seed(config.seed)
    X = torch.stack([view[i][0] for i in range(len(view))]).to(config.device)
    model = net.pretext_.eval()
    with torch.no_grad():
        out_dict = model(X)
    fig = plot_shift_matrices(out_dict, index=0, title="PARS on a held-out 30-s window")
    fig.savefig(out / "shift_matrices.png", dpi=120)
    return float(out_dict["loss"])


def run_demo(out="results/demo", config=None):
    """Run the whole demonstration; write tables and figures to ``out``.

    Returns
    -------
    results : pandas.DataFrame
        One row per method and fold: held-out block, balanced accuracy, kappa.
    """
    config = config or DemoConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)

    net = pretrain_encoder(config, out)
    held_out_loss = shift_matrix_figure(net, config, out)

    windows = load_physionet_mi(config.subjects, path=config.data_path)
    X, y, sfreq = windows_to_arrays(windows)
    groups = windows.get_metadata()["block"].to_numpy()
    common = finetune_params(config, sfreq, random_state=config.seed)
    methods = {
        "PARS": PARSClassifier(pretrained_encoder=str(out / "encoder.pt"), **common),
        "scratch": PARSClassifier(pretrain_epochs=0, **common),
    }
    scoring = {name: make_scorer(name) for name in ("balanced_accuracy", "kappa")}
    rows, histories = [], {}
    cv = LeaveOneGroupOut()
    test_blocks = [int(np.unique(groups[test])[0]) for _, test in cv.split(X, y, groups)]
    for name, clf in methods.items():
        logger.info(
            "Fine-tuning %s: leave one block of runs out, %d folds.", name, len(test_blocks)
        )
        res = cross_validate(
            clf, X, y, groups=groups, cv=cv, scoring=scoring, return_estimator=True
        )
        histories[name] = [est.history_ for est in res["estimator"]]
        for fold, block in enumerate(test_blocks):
            rows.append(
                {
                    "method": name,
                    "test_block": block,
                    "balanced_accuracy": res["test_balanced_accuracy"][fold],
                    "kappa": res["test_kappa"][fold],
                }
            )
    results = pd.DataFrame(rows)
    results.to_csv(out / "results.csv", index=False)
    summary = results.groupby("method")[["balanced_accuracy", "kappa"]].agg(["mean", "std"])
    with open(out / "results.json", "w") as f:
        json.dump(
            {
                "config": dataclasses.asdict(config),
                "pretrain_final_loss": float(net.history[-1, "train_loss"]),
                "pretrain_held_out_loss": held_out_loss,
                "folds": rows,
                "summary": {
                    m: {
                        k: float(summary.loc[m, (k, s)])
                        for k in ("balanced_accuracy", "kappa")
                        for s in ("mean",)
                    }
                    for m in summary.index
                },
            },
            f,
            indent=2,
        )
    fig = plot_training_curves(net.history, histories)
    fig.savefig(out / "training_curves.png", dpi=120)
    return results


def format_results(results):
    """The per-fold and mean table as text."""
    lines = [f"{'method':<9}{'test block':>11}{'bal. acc.':>11}{'kappa':>9}"]
    for row in results.itertuples():
        lines.append(
            f"{row.method:<9}{row.test_block:>11}{row.balanced_accuracy:>11.3f}{row.kappa:>9.3f}"
        )
    for name, grp in results.groupby("method", sort=False):
        ba, ka = grp["balanced_accuracy"], grp["kappa"]
        lines.append(
            f"{name:<9}{'mean':>11}{ba.mean():>7.3f}±{ba.std():.3f}{ka.mean():>6.3f}±{ka.std():.3f}"
        )
    lines.append("chance: balanced accuracy 0.250, kappa 0.000 (4 balanced classes)")
    return "\n".join(lines)
