"""The development tasks' selection rows over several pretraining seeds of the selection
encoder: how much a row moves with the seed alone.

Reads the CSVs that ``bench_dev_tasks.py --part selection`` wrote with each selection
encoder (the same corpus, store and settings, another seed) and writes, at one
labelled unit, each row's balanced accuracy per encoder and its mean ± std over them,
per task and for the mean over tasks (each distinct labelled set weighted once, as in
``bench_dev_tasks.py``), beside the rows that do not read the encoder, and a figure.
Nothing is fitted here: the numbers are the CSVs'.

Usage::

    python -m benchmarks.report_dev_tasks_seeds \
        benchmarks/results/dev_tasks_selection.csv \
        benchmarks/results/dev_tasks_selection_seed1.csv \
        benchmarks/results/dev_tasks_selection_seed2.csv \
        --labels "seed 0" "seed 1" "seed 2" --out benchmarks/results/dev_tasks_selection_seeds
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from benchmarks.lib import dev_tasks

#: Blocks of a probe row that come from the selection encoder (``enc``, ``encstd``,
#: ``encblocks``); rows without one (floors, ``bp``, ``ts``, random encoders) do not
#: change with its seed.
ENCODER_ROW = re.compile(r"\benc(?:std|blocks)?\b|^deep pars")


def lowest_k(csv):
    """Methods x tasks balanced accuracy at one labelled unit of one CSV, with the mean
    over tasks (:func:`benchmarks.lib.dev_tasks.lowest_k`)."""
    df = pd.read_csv(csv)
    df["k"], df["units"] = df["k"].astype(str), df["units"].astype(str)
    low = dev_tasks.lowest_k(df, "balanced_accuracy")
    if low is None:
        raise ValueError(f"{csv} has no row at one labelled unit (k = 1).")
    return low


def over_encoders(tables, labels):
    """Per row that reads the encoder: its value per encoder and mean ± std over them.

    Parameters
    ----------
    tables : list of pandas.DataFrame
        :func:`lowest_k` of each encoder's CSV; only the rows and tasks every table has
        are compared.
    labels : list of str
        One name per table.

    Returns
    -------
    per_encoder : pandas.DataFrame
        Rows (methods) x labels: the mean over tasks with each encoder.
    summary : pandas.DataFrame
        Rows (methods) x tasks and "mean over tasks": mean over the encoders; with
        columns "std" and "range" of the mean over tasks.
    fixed : pandas.DataFrame
        The rows that do not read the encoder (from the first table; equal in all).
    """
    if len(tables) != len(labels):
        raise ValueError(f"labels: one per CSV, got {len(labels)} for {len(tables)} CSVs.")
    if len(tables) < 2:
        raise ValueError(f"Give at least two CSVs to compare seeds, got {len(tables)}.")
    methods = sorted(set.intersection(*(set(t.index) for t in tables)))
    columns = [c for c in tables[0].columns if all(c in t.columns for t in tables)]
    encoder_rows = [m for m in methods if ENCODER_ROW.search(m)]
    stack = np.stack([t.loc[encoder_rows, columns].to_numpy(float) for t in tables])
    summary = pd.DataFrame(stack.mean(0), index=encoder_rows, columns=columns)
    means = stack[:, :, columns.index("mean over tasks")]
    summary["std"] = means.std(0, ddof=1)
    summary["range"] = [
        f"{lo:.3f} - {hi:.3f}" for lo, hi in zip(means.min(0), means.max(0), strict=True)
    ]
    per_encoder = pd.DataFrame(means.T, index=encoder_rows, columns=labels)
    fixed = tables[0].loc[[m for m in methods if m not in encoder_rows], columns]
    for label, t in zip(labels[1:], tables[1:], strict=True):
        moved = (t.loc[fixed.index, columns] - fixed).abs().max(axis=1) > 1e-9
        if moved.any():
            raise ValueError(
                f"Rows that do not read the encoder differ between {labels[0]!r} and "
                f"{label!r}: {', '.join(fixed.index[moved])}; the CSVs are not runs of the "
                "same tasks, splits and seeds with another encoder."
            )
    return per_encoder, summary, fixed


def task_table(title, rows, tasks):
    """Markdown lines: a section ``title`` with one line per row of ``rows``, its value
    per task and the mean over tasks."""
    columns = [*tasks, "mean over tasks"]
    lines = ["", f"## {title}", "", "| method | " + " | ".join(columns) + " |"]
    lines.append("|---|" + "---|" * len(columns))
    for m, r in rows.iterrows():
        lines.append(f"| {m} | " + " | ".join(f"{r[c]:.3f}" for c in columns) + " |")
    return lines


def write(csvs, labels, out, command):
    tables = [lowest_k(c) for c in csvs]
    per_encoder, summary, fixed = over_encoders(tables, labels)
    tasks = [c for c in summary.columns if c not in ("mean over tasks", "std", "range")]
    order = summary.sort_values("mean over tasks", ascending=False).index
    lines = [
        "# Development tasks, selection splits, over pretraining seeds of the selection encoder",
        "",
        f"Command: `{command}`",
        "",
        "One labelled unit (k = 1), balanced accuracy; per task the mean over its distinct "
        "labelled sets (each once), then the mean over tasks. CSVs: "
        + ", ".join(f"{lab}: `{Path(c).name}`" for lab, c in zip(labels, csvs, strict=True))
        + ".",
        "",
        "## Rows that read the encoder: mean over tasks with each encoder",
        "",
        "| method | " + " | ".join(labels) + " | mean ± std | range |",
        "|---|" + "---|" * (len(labels) + 2),
    ]
    for m in order:
        r, s = per_encoder.loc[m], summary.loc[m]
        lines.append(
            f"| {m} | "
            + " | ".join(f"{v:.3f}" for v in r)
            + f" | {s['mean over tasks']:.3f} ± {s['std']:.3f} | {s['range']} |"
        )
    lines += task_table("The same rows per task, mean over the encoders", summary.loc[order], tasks)
    lines += task_table(
        "Rows that do not read the encoder (the same with every encoder)",
        fixed.sort_values("mean over tasks", ascending=False),
        tasks,
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text("\n".join([*lines, ""]))

    shown = [m for m in order if "aligned" not in m]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(shown) + 3.0))
    ypos = np.arange(len(shown))[::-1]
    for lab in labels:
        ax.scatter(per_encoder.loc[shown, lab], ypos, s=18, label=f"encoder {lab}", zorder=3)
    ax.errorbar(
        summary.loc[shown, "mean over tasks"],
        ypos,
        xerr=summary.loc[shown, "std"],
        fmt="|",
        color="k",
        ms=14,
        label="mean ± std over encoders",
        zorder=2,
    )
    free = fixed[~fixed.index.str.contains("rand")]["mean over tasks"]
    probes = free[free.index.str.startswith("probe[")]
    floors = free[free.index.str.startswith("floor")]
    for rows, style, what in ((probes, "--", "probe without encoder"), (floors, ":", "floor")):
        if len(rows):
            ax.axvline(
                rows.max(),
                color="tab:red",
                ls=style,
                lw=1,
                label=f"best {what}: {rows.idxmax()} {rows.max():.3f}",
            )
    rand = fixed[fixed.index.str.contains(r"rand\d*\+bp\+ts, 100\]")]["mean over tasks"]
    if len(rand) > 1:
        ax.axvspan(
            rand.mean() - rand.std(ddof=1),
            rand.mean() + rand.std(ddof=1),
            color="0.85",
            label=f"random encoders + bp + ts, C = 100 (mean ± std of {len(rand)})",
        )
    ax.set_yticks(ypos, shown, fontsize=8)
    ax.set_xlabel("balanced accuracy, one labelled unit, mean over the tasks")
    # beside the axes, where it covers neither the points nor the axis label
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("Selection splits: rows that read the encoder, per pretraining seed", fontsize=9)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120, bbox_inches="tight")
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "csvs", nargs="+", type=Path, help="bench_dev_tasks.py CSVs, one per encoder"
    )
    parser.add_argument("--labels", nargs="+", required=True, help="one name per CSV")
    parser.add_argument("--out", type=Path, required=True, help="prefix of the .md/.png")
    args = parser.parse_args(argv)
    if len(args.labels) != len(args.csvs):
        parser.error(f"--labels: one per CSV, got {len(args.labels)} for {len(args.csvs)} CSVs")
    missing = [str(c) for c in args.csvs if not c.exists()]
    if missing:
        parser.error(f"CSVs not found: {', '.join(missing)}")
    given = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "-m", "benchmarks.report_dev_tasks_seeds", *given])
    write(args.csvs, args.labels, args.out, command)


if __name__ == "__main__":
    main()
