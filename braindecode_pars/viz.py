"""Figures: predicted and true shift matrices (paper Fig. 6), training curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch


def sorted_shift_matrices(out, index=0):
    """Prediction, target and error of one window, patches in chronological order.

    Parameters
    ----------
    out : dict
        The output of :class:`~braindecode_pars.PARS` (``theta_pred``,
        ``theta_true``, ``pair_mask``, ``starts``).
    index : int
        Which window of the batch.

    Returns
    -------
    pred, true, err : ndarray, shape (n_patches, n_patches)
        ``pred`` and ``err`` (absolute error) are zero outside the masked pairs; ``true``
        is the full target matrix, as in the paper's Fig. 6.
    """
    order = torch.argsort(out["starts"][index])
    pick = (order[:, None], order[None, :])
    mask = out["pair_mask"][index][pick].cpu().numpy()
    pred = out["theta_pred"][index][pick].detach().cpu().numpy()
    true = out["theta_true"][index][pick].detach().cpu().numpy()
    err = np.where(mask, np.abs(pred - true), 0.0)
    return np.where(mask, pred, 0.0), true, err


def plot_shift_matrices(out, index=0, title=None):
    """Paper Fig. 6: predicted shifts, targets and their error for one window.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    pred, true, err = sorted_shift_matrices(out, index)
    mask = out["pair_mask"][index].cpu().numpy()
    rmse = float(np.sqrt((err[err != 0] ** 2).mean())) if mask.any() else float("nan")
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6), constrained_layout=True)
    panels = [
        (pred, r"predicted $\hat\theta$", "RdBu_r", (-1, 1)),
        (true, r"target $\theta$", "RdBu_r", (-1, 1)),
        (err, f"absolute error (RMSE {rmse:.3f})", "magma", (0, max(err.max(), 1e-6))),
    ]
    for ax, (mat, name, cmap, (lo, hi)) in zip(axes, panels, strict=True):
        im = ax.imshow(mat, cmap=cmap, vmin=lo, vmax=hi)
        ax.set_title(name)
        ax.set_xlabel("patch k (chronological)")
        ax.set_ylabel("patch j")
        fig.colorbar(im, ax=ax, shrink=0.8)
    if title:
        fig.suptitle(title)
    return fig


def plot_training_curves(pretrain_history=None, finetune_histories=None):
    """Pretraining loss and learning rate; fine-tuning losses per run.

    Parameters
    ----------
    pretrain_history : skorch History | list of dict | None
    finetune_histories : dict of str -> list of History | None
        e.g. ``{"PARS": [fold histories], "scratch": [...]}``.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    n = int(pretrain_history is not None) + int(bool(finetune_histories))
    fig, axes = plt.subplots(
        1, max(n, 1), figsize=(5.5 * max(n, 1), 3.8), squeeze=False, constrained_layout=True
    )
    axes = list(axes[0])
    if pretrain_history is not None:
        ax = axes.pop(0)
        epochs = [row["epoch"] for row in pretrain_history]
        ax.plot(epochs, [row["train_loss"] for row in pretrain_history], label="train loss")
        if "valid_loss" in pretrain_history[0]:
            ax.plot(epochs, [row["valid_loss"] for row in pretrain_history], label="valid loss")
        ax.set_xlabel("epoch")
        ax.set_ylabel("PARS loss (MSE)")
        ax.set_title("pretraining")
        if "lr" in pretrain_history[0]:
            lr_ax = ax.twinx()
            lr_ax.plot(epochs, [row["lr"] for row in pretrain_history], color="0.6", ls=":")
            lr_ax.set_ylabel("learning rate", color="0.4")
        ax.legend(loc="upper right")
    if finetune_histories:
        ax = axes.pop(0)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for color, (name, histories) in zip(colors, finetune_histories.items(), strict=False):
            for i, hist in enumerate(histories):
                epochs = [row["epoch"] for row in hist]
                label = name if i == 0 else None
                ax.plot(epochs, [row["valid_loss"] for row in hist], color=color, label=label)
                ax.plot(
                    epochs, [row["train_loss"] for row in hist], color=color, ls="--", alpha=0.5
                )
        ax.set_xlabel("epoch")
        ax.set_ylabel("cross-entropy (solid: valid, dashed: train)")
        ax.set_title("fine-tuning, one line per fold")
        ax.legend()
    return fig
