"""Tables of ``bench_pretext_comparison``: ``pretext_comparison.md`` from its two JSONL
files and the encoders' ``runs.json`` (written by
``python -m benchmarks.bench_pretext_comparison report``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.lib.encoders import ENCODERS as BENCHMARK_ENCODERS
from benchmarks.lib.encoders import benchmark_encoder
from benchmarks.lib.finetuning import read_rows

ENCODERS = BENCHMARK_ENCODERS / "comparison"
PRETEXTS = ("PARS", "MAE", "MP3", "DropPos")
PROBE_ROWS = (
    "band-power floor",
    "probe, no encoder",
    "probe, pars-small-v2 (the default)",
    "probe, random encoder",
    *(f"probe, {m}" for m in PRETEXTS),
)
FT_ROWS = ("from scratch", *(f"full fine-tuning, {m}" for m in PRETEXTS), "EEGNet")
TASKS = ("eegmat-arithmetic", "mi-executed-lr", "mi-imagery-4", "mi-imagery-lr", "mi-executed-ff")
MI_TASKS = tuple(t for t in TASKS if t.startswith("mi-"))


def read_jsonl(path):
    return pd.DataFrame(read_rows(path))


def per_seed(probe):
    """Score of each (row, seed, task, k): the mean over the draws; seedless rows get
    seed -1."""
    probe = probe.assign(seed=probe["seed"].fillna(-1).astype(int))
    return probe.groupby(["row", "seed", "task", "k"])["bal_acc"].mean().reset_index()


def cell(values):
    values = np.asarray(values, dtype=float)
    if len(values) > 1:
        return f"{values.mean():.3f} ± {values.std(ddof=1):.3f}"
    return f"{values.mean():.3f}"


def probe_table(scores, k):
    """Rows x tasks at ``k``; a seeded row's cell is mean ± sd over its seeds."""
    sel = scores[scores.k == k]
    lines = [
        "| row | " + " | ".join(TASKS) + " | mean of 5 |",
        "|---|" + "---|" * (len(TASKS) + 1),
    ]
    for row in PROBE_ROWS:
        part = sel[sel.row == row]
        if part.empty:
            continue
        cells = [
            cell(part[part.task == t].bal_acc) if (part.task == t).any() else "-" for t in TASKS
        ]
        complete = part.groupby("seed").filter(lambda g: g.task.nunique() == len(TASKS))
        means = complete.groupby("seed").bal_acc.mean()
        cells.append(f"**{cell(means)}**" if len(means) else "-")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


#: The summary's rows (the README's table): the library's defaults and the PARS rows.
SUMMARY_ROWS = (
    "band-power floor",
    "probe, pars-small-v2 (the default)",
    "probe, no encoder",
    "probe, random encoder",
    "probe, PARS",
)
#: The summary's task order (the README's columns).
SUMMARY_TASKS = (
    "eegmat-arithmetic", "mi-imagery-lr", "mi-executed-lr", "mi-imagery-4", "mi-executed-ff",
)  # fmt: skip


def summary_table(probe, scores):
    """One line per row: each task at k = 1, the mean of 5 at k = 1 and with all labels
    (means over seeds where a row has them), and the mean seconds per fit."""
    at_1 = means_by_seed(scores, "1")
    at_all = means_by_seed(scores, "all")
    lines = [
        "## Summary: k = 1 per task, the mean of 5 at k = 1 and with all labels",
        "",
        "| row | " + " | ".join(SUMMARY_TASKS) + " | mean, k = 1 | mean, all labels | s per fit |",
        "|---|" + "---|" * (len(SUMMARY_TASKS) + 3),
    ]
    for row in SUMMARY_ROWS:
        part = scores[(scores.row == row) & (scores.k == "1")]
        if part.empty or row not in at_1.index.get_level_values(0):
            continue
        cells = [f"{part[part.task == t].bal_acc.mean():.3f}" for t in SUMMARY_TASKS]
        cells += [f"{at_1[row].mean():.3f}", f"{at_all[row].mean():.3f}"]
        cells.append(f"{probe[probe.row == row].seconds.mean():.1f}")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return lines


def ft_one_means(ft):
    """Each (row, seed)'s mean over the one-subject draws; rows with all five draws."""
    if not len(ft) or not (ft.k == "1 subject").any():
        return pd.Series(dtype=float)
    one = ft[ft.k == "1 subject"]
    complete = one.groupby(["row", "seed"]).filter(lambda g: g.draw.nunique() == 5)
    return complete.groupby(["row", "seed"]).bal_acc.mean()


def ft_mi_means(ft):
    """Each (row, seed, k)'s mean over the four MI tasks (each task's score the mean over
    its draws); rows with all four tasks. Also the per-(row, seed, task, k) scores."""
    if not len(ft) or "task" not in ft or not ft.task.isin(MI_TASKS).any():
        return pd.Series(dtype=float), pd.DataFrame()
    mi = ft[ft.task.isin(MI_TASKS)]
    tasks = mi.groupby(["row", "seed", "task", "k"]).bal_acc.mean().reset_index()
    complete = tasks.groupby(["row", "seed", "k"]).filter(lambda g: g.task.nunique() == 4)
    return complete.groupby(["row", "k", "seed"]).bal_acc.mean(), tasks


def ft_mi_table(ft):
    """Rows x MI tasks at k = 1, and the mean of the four at k = 1 and with all labels."""
    means, tasks = ft_mi_means(ft)
    if not len(means):
        return []
    lines = [
        "## Full fine-tuning, PhysioNet-MI tasks (the probe's test splits)",
        "",
        "Each task's score is the mean over its draws (k = 1: one labelled block, five "
        "draws; all: both pool blocks); a seeded cell is mean ± sd over seeds.",
        "",
        "| row | " + " | ".join(f"{t}, k = 1" for t in MI_TASKS)
        + " | mean of 4, k = 1 | mean of 4, all labels | s per fit |",
        "|---|" + "---|" * (len(MI_TASKS) + 3),
    ]  # fmt: skip
    for row in FT_ROWS:
        part = tasks[(tasks.row == row) & (tasks.k == "1")]
        if part.empty:
            continue
        cells = [cell(part[part.task == t].bal_acc) if (part.task == t).any() else "-"
                 for t in MI_TASKS]  # fmt: skip
        for k in ("1", "all"):
            cells.append(f"**{cell(means[row][k])}**" if (row, k) in means.index.droplevel(2)
                         else "-")  # fmt: skip
        seconds = ft[(ft.row == row) & ft.task.isin(MI_TASKS)].seconds.mean()
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {seconds:.0f} |")
    return lines


def means_by_seed(scores, k):
    sel = scores[scores.k == k]
    complete = sel.groupby(["row", "seed"]).filter(lambda g: g.task.nunique() == len(TASKS))
    return complete.groupby(["row", "seed"]).bal_acc.mean()


def verdict(a, b):
    """The rule, fixed before the tables were read: ``a`` beats ``b`` when its mean over
    seeds is higher by more than the sum of their standard deviations over seeds; "no"
    when lower by as much; "level" in between."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    spread = (a.std(ddof=1) if len(a) > 1 else 0) + (b.std(ddof=1) if len(b) > 1 else 0)
    gap = a.mean() - b.mean()
    word = "yes" if gap > spread else ("no" if gap < -spread else "level")
    return f"{word} ({a.mean():.3f} against {b.mean():.3f}, gap {gap:+.3f}, spread {spread:.3f})"


def write_report(out):
    out = Path(out)
    probe = read_jsonl(out.with_name(out.name + "_probe.jsonl"))
    ft_path = out.with_name(out.name + "_finetune.jsonl")
    ft = read_jsonl(ft_path) if ft_path.exists() else pd.DataFrame(columns=["row", "bal_acc"])
    runs = json.loads(benchmark_encoder(ENCODERS / "runs.json").read_text())
    scores = per_seed(probe)
    lines = [
        "# PARS, MAE, MP3, DropPos and no pretraining under one budget",
        "",
        "Written by `python -m benchmarks.bench_pretext_comparison report` from its rows "
        "(protocol in its docstring and on "
        "`docs/benchmarks/pretext_comparison.rst`). Balanced accuracy on the test splits; "
        "a row with pretraining seeds gives mean ± sd over its 3 seeds (each seed's "
        "score the mean over the draws), the others the mean over the draws.",
        "",
        "## Pretraining (one H100, 4,000 steps each, all 12 runs at once)",
        "",
        "| pretext task | held-out pretext skill, seeds 0, 1, 2 | final training loss |",
        "|---|---|---|",
    ]
    for m in ("pars", "mae", "mp3", "droppos"):
        rs = [runs[f"{m}-{s}"] for s in (0, 1, 2)]
        skills = ", ".join(f"{r['valid_skill']:.3f}" for r in rs)
        losses = ", ".join(f"{r['final_train_loss']:.4f}" for r in rs)
        lines.append(f"| {rs[0]['model']} | {skills} | {losses} |")
    lines += ["", *summary_table(probe, scores)]
    for k, title in (("1", "one labelled subject or block (five draws)"), ("all", "all labels")):
        lines += ["", f"## Frozen encoder under the probe, {title}", ""]
        lines += probe_table(scores, k)
    ft_8 = ft[ft.k == "8 subjects"] if len(ft) else ft
    lines += [
        "",
        "## Full fine-tuning, EEGMAT main split (8 pool subjects labelled, 12 test subjects)",
        "",
        "| row | balanced accuracy | per seed | share predicted as arithmetic | s per fit |",
        "|---|---|---|---|---|",
    ]
    for row in FT_ROWS:
        part = ft_8[ft_8.row == row].sort_values("seed") if len(ft_8) else ft_8
        if part.empty:
            continue
        seeds = ", ".join(f"{v:.3f}" for v in part.bal_acc)
        minority = ", ".join(f"{v:.2f}" for v in part.predicted_minority)
        lines.append(
            f"| {row} | {cell(part.bal_acc)} | {seeds} | {minority} | {part.seconds.mean():.0f} |"
        )
    ft_1 = ft_one_means(ft)
    if len(ft_1):
        lines += [
            "",
            "## Full fine-tuning, EEGMAT main split, one labelled pool subject (five draws)",
            "",
            "Each seed's score is the mean over the five draws (the main job's labelled "
            "subjects); the cell is mean ± sd over seeds.",
            "",
            "| row | balanced accuracy | per seed | s per fit |",
            "|---|---|---|---|",
        ]
        for row in FT_ROWS:
            if row not in ft_1.index.get_level_values(0):
                continue
            vals = ft_1[row]
            seconds = ft[(ft.k == "1 subject") & (ft.row == row)].seconds.mean()
            per = ", ".join(f"{v:.3f}" for v in vals)
            lines.append(f"| {row} | {cell(vals)} | {per} | {seconds:.0f} |")
    lines += ["", *ft_mi_table(ft)]
    lines += ["", "## The paper's two claims at this scale", ""]
    for k in ("1", "all"):
        m = means_by_seed(scores, k)
        if ("probe, PARS" not in m.index.get_level_values(0)) or (
            "probe, random encoder" not in m.index.get_level_values(0)
        ):
            continue
        lines.append(
            f"- Probe, mean of 5 tasks, k = {k}: PARS beats no pretraining (random encoder): "
            + verdict(m["probe, PARS"], m["probe, random encoder"])
        )
        for other in ("MAE", "MP3", "DropPos"):
            if f"probe, {other}" in m.index.get_level_values(0):
                lines.append(
                    f"- Probe, mean of 5 tasks, k = {k}: PARS beats {other}: "
                    + verdict(m["probe, PARS"], m[f"probe, {other}"])
                )
    # each row's scores per seed: the 8-subject fits as they are, the one-subject means
    eight = ft_8.groupby(["row", "seed"]).bal_acc.mean() if len(ft_8) else pd.Series(dtype=float)
    by_seed = {"EEGMAT, 8 subjects": eight, "EEGMAT, 1 subject": ft_1}
    mi_means, _ = ft_mi_means(ft)
    for k in ("1", "all"):
        if len(mi_means) and k in mi_means.index.get_level_values(1):
            by_seed[f"mean of 4 MI tasks, k = {k}"] = mi_means.xs(k, level="k")
    for label, scores_ in by_seed.items():
        rows = set(scores_.index.get_level_values(0)) if len(scores_) else set()
        if "full fine-tuning, PARS" not in rows:
            continue
        for other in FT_ROWS[:-1]:  # the pretrained starts and from scratch, not EEGNet
            if other in rows and other != "full fine-tuning, PARS":
                lines.append(
                    f"- Full fine-tuning, {label}: PARS beats {other.split(', ')[-1]}: "
                    + verdict(scores_["full fine-tuning, PARS"], scores_[other])
                )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
