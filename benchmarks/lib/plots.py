"""Figures of the paper's protocols (:mod:`benchmarks.lib.protocols`): the scores
against the labelled training patients, and the scores per held-out subject."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def plot_lines(summary, x, xlabel, metrics=("balanced_accuracy", "kappa")):
    """One line per method with a ±std band, one panel per metric."""
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(5 * len(metrics), 3.8), constrained_layout=True, squeeze=False
    )
    for ax, metric in zip(axes[0], metrics, strict=True):
        for method in summary.index.get_level_values("method").unique():
            part = summary.loc[method]
            xs = part.index.to_numpy()
            mean = part[(metric, "mean")].to_numpy()
            std = np.nan_to_num(part[(metric, "std")].to_numpy())
            ax.plot(xs, mean, marker="o", label=method)
            ax.fill_between(xs, mean - std, mean + std, alpha=0.15)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric.replace("_", " "))
    axes[0][0].legend(fontsize=8)
    return fig


def plot_subject_bars(frame, metric="kappa"):
    """Per-subject bars, one colour per method (paper Fig. 5)."""
    table = frame.groupby(["subject", "method"])[metric].mean().unstack("method")
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(table)), 3.5), constrained_layout=True)
    width = 0.8 / max(len(table.columns), 1)
    for i, method in enumerate(table.columns):
        ax.bar(np.arange(len(table)) + i * width, table[method], width, label=method)
    ax.set_xticks(np.arange(len(table)) + 0.4 - width / 2, [str(s) for s in table.index])
    ax.set_xlabel("held-out subject")
    ax.set_ylabel("Cohen's kappa" if metric == "kappa" else metric)
    ax.legend(fontsize=8)
    return fig
