"""Figures: predicted and true shift matrices (paper Fig. 6), training curves."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from braindecode_pars.pretraining.monitor import MONITOR_KEYS


def _sorted_shift_matrices(out, index=0):
    """Prediction, target and error of one window, patches in chronological order.

    Parameters
    ----------
    out : dict
        The output of :meth:`PARS.predict_shifts <braindecode_pars.PARS.predict_shifts>`
        (``theta_pred``, ``theta_true``, ``pair_mask``, ``starts``).
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


_GRID_KEYS = ("theta_pred", "theta_true", "pair_mask", "starts")


def _shift_grids(source, X, generator):
    """The dict of :meth:`PARS.predict_shifts` from a PARS model and windows, or the dict
    given, checked to hold the grids."""
    if isinstance(source, torch.nn.Module):
        if not hasattr(source, "predict_shifts"):
            raise TypeError(
                "'source' must be a PARS model (with predict_shifts) or the dict that "
                f"PARS.predict_shifts returns, but got a {type(source).__name__}."
            )
        if X is None:
            raise ValueError(
                "'X' is None: with a PARS model as 'source', pass the windows to predict, "
                "a tensor of shape (batch, 1, n_times)."
            )
        X = torch.as_tensor(X, dtype=torch.float32)
        was_training = source.training
        try:
            with torch.no_grad():
                return source.eval().predict_shifts(X, generator=generator)
        finally:
            source.train(was_training)
    if not isinstance(source, dict):
        raise TypeError(
            "'source' must be a PARS model (with predict_shifts) or the dict that "
            f"PARS.predict_shifts returns, but got a {type(source).__name__}."
        )
    if X is not None or generator is not None:
        raise ValueError(
            "'X' and 'generator' are for a PARS model as 'source'; the dict of "
            "predict_shifts already holds its predictions: leave them None."
        )
    missing = [key for key in _GRID_KEYS if key not in source]
    if missing:
        raise ValueError(
            f"'source' lacks the shift grids {missing}: model(X) (PARS.forward) returns the "
            "masked pairs' shifts only. Pass model.predict_shifts(X), or the model and the "
            "windows: plot_shift_matrices(model, X)."
        )
    return source


def plot_shift_matrices(source, X=None, *, index=0, title=None, generator=None):
    """Paper Fig. 6: predicted shifts, targets and their error for one window.

    Parameters
    ----------
    source : PARS | dict
        A PARS model, whose predictions on ``X`` are drawn (in evaluation mode, without
        gradients), or the dict of :meth:`PARS.predict_shifts
        <braindecode_pars.PARS.predict_shifts>` (``theta_pred``, ``theta_true``,
        ``pair_mask``, ``starts``).
    X : torch.Tensor, shape (batch, 1, n_times) | None
        The single-channel windows, with a PARS model as ``source``; None with a dict.
    index : int
        Which window of the batch to draw.
    title : str | None
        The figure's title.
    generator : torch.Generator | None
        Draws the patches and masks, with a PARS model as ``source``: a seeded one
        gives the same figure on every run.

    Returns
    -------
    fig : matplotlib.figure.Figure

    Examples
    --------
    >>> import torch
    >>> from braindecode_pars.hub.folders import load_pretext_model
    >>> model = load_pretext_model("pars-small")  # 10-s windows at 100 Hz
    >>> X = torch.randn(2, 1, 1000)
    >>> fig = plot_shift_matrices(model, X, generator=torch.Generator().manual_seed(0))
    >>> len(fig.axes)  # three panels and their colour bars
    6
    """
    out = _shift_grids(source, X, generator)
    pred, true, err = _sorted_shift_matrices(out, index)
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


def _has(history, key):
    """Whether any epoch of ``history`` recorded ``key``."""
    return any(key in row for row in history)


def _series(history, key):
    """The epochs that recorded ``key`` (validation is recorded on reported epochs only)
    and their values."""
    rows = [row for row in history if key in row]
    return [row["epoch"] for row in rows], [row[key] for row in rows]


def _marker(epochs, history):
    """A marker for a series recorded on some epochs only, so that each point shows."""
    return "o" if len(epochs) < len(history) else None


def plot_pretext_skill(history, ax=None, title="pretext skill"):
    """Train and validation pretext skill per epoch (0 = learned nothing, 1 = perfect).

    Parameters
    ----------
    history : skorch History | list of dict
        A :class:`~braindecode_pars.PretrainNet` history (``train_skill``, and
        ``valid_skill`` when a validation share was held out).
    ax : matplotlib Axes | None

    Returns
    -------
    ax : matplotlib Axes
    """
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8), constrained_layout=True)
    for key, label in (("train_skill", "train"), ("valid_skill", "validation")):
        epochs, values = _series(history, key)
        if epochs:
            ax.plot(epochs, values, label=label, marker=_marker(epochs, history))
    ax.axhline(0, color="k", lw=0.8, ls="--", label="learned nothing")
    ax.set_xlabel("epoch")
    ax.set_ylabel("skill = 1 - loss / trivial loss")
    ax.set_title(title)
    ax.legend(loc="lower right")
    return ax


#: The monitor's probes as the training figure names them, by history key.
_MONITOR_LABELS = {
    MONITOR_KEYS["label"]: "label across subjects (grouped folds)",
    MONITOR_KEYS["subject"]: "subject identity (temporal halves)",
}


def _plot_probe_monitor(history, ax):
    """The probes :class:`~braindecode_pars.pretraining.ProbeMonitor` logged, per epoch."""
    for key, label in _MONITOR_LABELS.items():
        epochs, values = _series(history, key)
        if epochs:
            ax.plot(epochs, values, label=label, marker=_marker(epochs, history))
    ax.set_xlabel("epoch")
    ax.set_ylabel("balanced accuracy of a linear probe")
    ax.set_title("probes of the frozen encoder")
    ax.legend(loc="lower right")
    return ax


def plot_training_curves(pretrain_history=None, finetune_histories=None):
    """Pretraining loss, skill and learning rate, the monitor's probes; fine-tuning losses.

    Parameters
    ----------
    pretrain_history : skorch History | list of dict | None
        A pretraining history; the probes of a
        :class:`~braindecode_pars.pretraining.ProbeMonitor` (``monitor_label``,
        ``monitor_subject``), where it holds them, get a panel of their own.
    finetune_histories : dict of str -> list of History | None
        e.g. ``{"PARS": [fold histories], "scratch": [...]}``.

    Returns
    -------
    fig : matplotlib.figure.Figure
    """
    has_skill = pretrain_history is not None and _has(pretrain_history, "train_skill")
    has_monitor = pretrain_history is not None and any(
        _has(pretrain_history, key) for key in _MONITOR_LABELS
    )
    n = int(pretrain_history is not None) + int(has_skill) + int(has_monitor)
    n += int(bool(finetune_histories))
    fig, axes = plt.subplots(
        1, max(n, 1), figsize=(5.5 * max(n, 1), 3.8), squeeze=False, constrained_layout=True
    )
    axes = list(axes[0])
    if pretrain_history is not None:
        ax = axes.pop(0)
        ax.plot(*_series(pretrain_history, "train_loss"), label="train loss")
        if _has(pretrain_history, "valid_loss"):
            epochs, values = _series(pretrain_history, "valid_loss")
            marker = _marker(epochs, pretrain_history)
            ax.plot(epochs, values, label="valid loss", marker=marker)
        trivial = "valid_trivial" if _has(pretrain_history, "valid_trivial") else "train_trivial"
        if _has(pretrain_history, trivial):
            epochs, values = _series(pretrain_history, trivial)
            ax.plot(epochs, values, color="k", ls="--", lw=0.8, label="learned nothing")
        ax.set_xlabel("epoch")
        ax.set_ylabel("pretext loss")
        ax.set_title("pretraining")
        if _has(pretrain_history, "lr"):
            lr_ax = ax.twinx()
            lr_ax.plot(*_series(pretrain_history, "lr"), color="0.6", ls=":")
            lr_ax.set_ylabel("learning rate", color="0.4")
        ax.legend(loc="upper right")
    if has_skill:
        plot_pretext_skill(pretrain_history, axes.pop(0))
    if has_monitor:
        _plot_probe_monitor(pretrain_history, axes.pop(0))
    if finetune_histories:
        ax = axes.pop(0)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for color, (name, histories) in zip(colors, finetune_histories.items(), strict=False):
            for i, hist in enumerate(histories):
                epochs = [row["epoch"] for row in hist]
                label = name if i == 0 else None
                if "valid_loss" in hist[0]:
                    valid = [row["valid_loss"] for row in hist]
                    ax.plot(epochs, valid, color=color, label=label)
                    label = None
                train = [row["train_loss"] for row in hist]
                ax.plot(epochs, train, color=color, ls="--", alpha=0.5, label=label)
        ax.set_xlabel("epoch")
        ax.set_ylabel("cross-entropy (solid: valid, dashed: train)")
        ax.set_title("fine-tuning, one line per run")
        ax.legend()
    return fig
