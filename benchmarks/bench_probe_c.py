"""The probe's default ``C``, chosen on the selection splits at several label counts.

Both defaults of the library fit the same probe: ``PARSClassifier()`` over its shipped
encoder (blocks: the encoder read as ``"mean+std"``, log band power, the tangent space)
and ``PARSProbe()`` (band power and the tangent space). Their ``C`` is one parameter,
in the library's units (each block standardised and scaled to ``P / B``, so that ``C``
means what it means over standardised features whatever the channels and blocks).

The rule, written before any row ran:

- **Rows**: each of the two recipes at each ``C`` of :data:`C_GRID`, fitted by the
  library's own path (each block's raw features computed once per task by
  :func:`~braindecode_pars.features.transformers.block_features`, then
  :func:`~braindecode_pars.features.recipe.fit_blocks` per draw, as ``PARSProbe.fit``
  does), on the encoder ``--encoder`` (default: ``pars-small-v2``, the one
  ``PARSClassifier()`` reads).
- **Splits**: the selection part of the five development tasks
  (``benchmarks/lib/dev_tasks.py``; no test split is read): EEGMAT with 1, 2, 4 and 12
  labelled pool subjects (five draws; 12 is the whole pool), scored on the 12 selection
  subjects; the four PhysioNet-MI S001 tasks with one block labelled and the other
  scored (their five seeds draw two sets). Each distinct labelled set weighs once.
- **Score of a C**: for each recipe, the mean over the five tasks of the mean balanced
  accuracy, EEGMAT's entry being the mean over its four label counts; then the mean
  over the two recipes.
- **Choice**: the ``C`` of the best score. The current default, ``C = 1``, stays
  unless the best beats it by more than :data:`MARGIN`.
- **Reported beside it, not part of the choice**: at each ``C``, each recipe's EEGMAT
  mean with 12 labelled subjects minus its mean with one (more labels should not make
  a default worse), and every cell of the grid.

Caveat, stated before the rows: ``pars-small-v2`` was pretrained on EEGMAT's 24
training subjects without their labels, the pool and selection subjects among them;
``--encoder benchmarks/encoders/pars-selection`` (pretrained without the selection
subjects) gives the same grid over an encoder that never saw the scored subjects.

Usage::

    python -m benchmarks.bench_probe_c --out benchmarks/results/probe_c
    python -m benchmarks.bench_probe_c --out benchmarks/results/probe_c --report-only
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import torch

from benchmarks.lib.dev_probe import features, predict_blocks
from benchmarks.lib.dev_tasks import DEV_TASKS, draw_summary, load_task, split
from benchmarks.lib.encoders import benchmark_encoder
from benchmarks.lib.measure import append_score, command_line, machine, table_head, write_report

logger = logging.getLogger("bench_probe_c")

#: The C values compared, in the library's units.
C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
#: The default before this selection, kept unless beaten by more than MARGIN.
CURRENT_C = 1.0
MARGIN = 0.005
#: The two defaults: their name and their blocks (:func:`benchmarks.lib.dev_probe.features`' names).
RECIPES = {
    "PARSClassifier() probe (encoder + band power + tangent space)": ("encstd", "bp", "ts"),
    "PARSProbe() (band power + tangent space)": ("bp", "ts"),
}
EEGMAT = "eegmat-arithmetic"
KS = ("1", "2", "4", "12")
COLUMNS = ("task", "recipe", "C", "k", "seed", "units", "balanced_accuracy", "kappa", "seconds")


def cells(df):
    """Mean balanced accuracy per (recipe, C, task, k), each distinct labelled set once
    (:func:`benchmarks.lib.dev_tasks.draw_summary`)."""
    df = df.assign(k=df.k.astype(str))
    return draw_summary(df, "balanced_accuracy", by=("recipe", "C", "task", "k"))


def scores(summary):
    """The score of each C (see the rule): per recipe, the mean over tasks (EEGMAT's
    entry the mean over its label counts), then the mean over recipes. Returns a frame
    indexed by C with a column per recipe and ``score``."""
    per_task = summary.groupby(["recipe", "C", "task"]).mean(numeric_only=True)["mean"]
    per_recipe = per_task.groupby(["recipe", "C"]).mean().unstack("recipe")
    per_recipe["score"] = per_recipe.mean(axis=1)
    return per_recipe


def choose(score, current=CURRENT_C, margin=MARGIN):
    """The C the rule chooses from ``score`` (indexed by C): the best, unless ``current``
    is within ``margin`` of it."""
    best = float(score.idxmax())
    if current in score.index and score.max() - score.loc[current] <= margin:
        return float(current)
    return best


def label_gain(summary, task=EEGMAT, low="1", high="12"):
    """Per recipe and C, the task's mean with ``high`` labelled units minus with ``low``."""
    t = summary[summary.task == task].pivot_table(index=["recipe", "C"], columns="k", values="mean")
    return (t[high] - t[low]).unstack("recipe")


def run(args):
    torch.set_num_threads(args.threads)
    csv = args.out.with_suffix(".csv")
    csv.parent.mkdir(parents=True, exist_ok=True)
    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=COLUMNS)
    key = set(zip(done.task, done.recipe, done.C, done.k.astype(str), done.seed, strict=True))
    with open(args.out.with_suffix(".commands"), "a") as f:
        f.write(command_line(__spec__.name) + "\n")
    for name in args.tasks:
        X, y, units, pool, scored, sfreq = load_task(name, "selection")
        blocks = features(X, sfreq, args.encoder, rand_seeds=(), readouts=["encstd"])
        for k in KS if scored is not None else ("1",):
            for seed in args.seeds:
                train, test, labelled = split(units, pool, scored, k, seed)
                for recipe, names in RECIPES.items():
                    chosen = {b: blocks[b] for b in names}
                    for C in C_GRID:
                        if (name, recipe, C, k, seed) in key:
                            continue
                        start = time.perf_counter()
                        pred = predict_blocks(chosen, y, train, test, C, seed)
                        append_score(
                            csv, COLUMNS, y[test], pred, task=name, recipe=recipe, C=C, k=k,
                            seed=seed, units=" ".join(map(str, labelled)),
                            seconds=time.perf_counter() - start,
                        )  # fmt: skip
                logger.info("%s k=%s seed=%d done", name, k, seed)


def report(df, args):
    """The Markdown report and the figure, from the rows."""
    summary = cells(df)
    score = scores(summary)
    chosen = choose(score["score"])
    gain = label_gain(summary)
    recipes = list(RECIPES)
    lines = [
        "# The probe's default C, chosen on the selection splits",
        "",
        "Written by `benchmarks/bench_probe_c.py` (the rule is its docstring, committed "
        "before any row ran). Balanced accuracy on the selection part of the five "
        "development tasks, each distinct labelled set weighted once; C in the library's "
        "units. No test split is read.",
        "",
        f"- Encoder of the first recipe: `{args.encoder}`",
        f"- Machine: {machine()}",
        f"- Commands: `{args.out.with_suffix('.commands').name}`",
        "",
        f"**Chosen: C = {chosen:g}** (best score at C = {float(score['score'].idxmax()):g}; "
        f"the current default C = {CURRENT_C:g} stays unless beaten by more than {MARGIN}).",
        "",
        "## Score of each C",
        "",
        "Per recipe, the mean over the five tasks (EEGMAT's entry the mean over 1, 2, 4 "
        "and 12 labelled subjects); the score is their mean.",
        "",
        *table_head("C", *recipes, "score"),
    ]
    for C, row in score.iterrows():
        lines.append(
            f"| {C:g} | " + " | ".join(f"{row[r]:.3f}" for r in recipes) + f" | {row.score:.3f} |"
        )
    lines += [
        "",
        "## More labels: EEGMAT with 12 labelled subjects minus with one",
        "",
        *table_head("C", *recipes),
    ]
    for C, row in gain.iterrows():
        lines.append(f"| {C:g} | " + " | ".join(f"{row[r]:+.3f}" for r in recipes) + " |")
    lines += ["", "## Every cell: mean ± std over the distinct labelled sets", ""]
    columns = [(EEGMAT, k) for k in KS] + [(t, "1") for t in DEV_TASKS if t != EEGMAT]
    header = [f"{t} k={k}" if t == EEGMAT else t for t, k in columns]
    for recipe in recipes:
        lines += [f"### {recipe}", "", *table_head("C", *header)]
        r = summary[summary.recipe == recipe].set_index(["C", "task", "k"])
        for C in sorted(r.index.get_level_values("C").unique()):
            out = []
            for t, k in columns:
                c = r.loc[(C, t, k)] if (C, t, k) in r.index else None
                out.append("" if c is None else f"{c['mean']:.3f} ± {c['std']:.3f}")
            lines.append(f"| {C:g} | " + " | ".join(out) + " |")
        lines.append("")
    write_report(lines, args.out.with_suffix(".md"))
    plot(summary, score, chosen, args.out.with_suffix(".png"))


def plot(summary, score, chosen, path):
    """Left: EEGMAT's mean against labelled subjects, a line per C, per recipe; right:
    each recipe's mean over tasks and the score against C."""
    fig, axes = plt.subplots(1, len(RECIPES) + 1, figsize=(5 * (len(RECIPES) + 1), 4))
    cmap = plt.get_cmap("viridis")
    for ax, recipe in zip(axes, RECIPES, strict=False):
        e = summary[(summary.recipe == recipe) & (summary.task == EEGMAT)]
        for i, C in enumerate(C_GRID):
            c = e[e.C == C].set_index("k").reindex(list(KS))
            ax.plot([int(k) for k in KS], c["mean"], "o-", color=cmap(i / len(C_GRID)),
                    label=f"C = {C:g}", lw=2.5 if C == chosen else 1)  # fmt: skip
        ax.set(xscale="log", xticks=[int(k) for k in KS], xticklabels=KS,
               xlabel="labelled EEGMAT pool subjects", ylabel="balanced accuracy",
               title=recipe.replace(" (", "\n("))  # fmt: skip
        ax.legend(fontsize=7)
    ax = axes[-1]
    for recipe in RECIPES:
        ax.plot(score.index, score[recipe], "o-", label=recipe.split(" (")[0])
    ax.plot(score.index, score["score"], "k.-", lw=2, label="score (mean)")
    ax.axvline(chosen, color="grey", ls=":")
    ax.set(xscale="log", xlabel="C (library's units)", ylabel="mean over tasks",
           title="Selection score against C")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="prefix of the .csv/.md/.png")
    parser.add_argument("--encoder", default="pars-small-v2", help="shipped name or folder")
    parser.add_argument("--tasks", nargs="+", default=list(DEV_TASKS), choices=list(DEV_TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--report-only", action="store_true", help="write the tables and figure from the CSV"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if not args.report_only:
        benchmark_encoder(args.encoder)
        run(args)
    report(pd.read_csv(args.out.with_suffix(".csv")), args)


if __name__ == "__main__":
    main()
