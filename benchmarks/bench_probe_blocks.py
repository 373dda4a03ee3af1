"""The probe's blocks weighed by what they carry (issue 87): how much say the encoder's
block gets beside band power and the tangent space, chosen on the selection splits by a
rule written before any run, then read once on the test splits.

``PARSClassifier()`` is the probe over ``pars-small-v2`` with every block scaled to the
same total variance, so the encoder's block (128 features a channel under
``readout="mean+std"``) has as much say as six band powers. Where the encoder carries
little that costs more than it could give (issue 87's table: 16 points on a sleep
staging task). ``PARSProbe(block_weights=...)`` weighs the encoder's block: a fixed
weight, or ``"auto"``, the weight of :data:`~braindecode_pars.features.recipe.ENCODER_WEIGHTS`
whose gain over weight 0 beats a margin of standard errors over inner group folds
(:func:`~braindecode_pars.features.recipe.choose_weight`), and fallback weights with
fewer than three groups (the encoder's block and the tangent space's: on the main job
with two labelled subjects band power alone scored 0.641 and the probe without an
encoder 0.530, issue 87, so with one or two subjects the classical blocks may need
weighing too). This rule sets the margin, the fallback weights and whether
``PARSClassifier()`` takes ``"auto"``.

The rule (written and committed before any of its runs)
=======================================================

- **Tasks and splits.** The selection splits of the five development tasks
  (``benchmarks/lib/dev_tasks.py``; the test splits are never read by ``select``):
  ``eegmat-arithmetic`` (the main job's task) with k = 1, 2, 4 and 12 labelled pool
  subjects (seeds 0-4, drawn by ``labelled_units``; 12 is the whole pool), scored on
  the 12 selection subjects; the four PhysioNet-MI S001 tasks with one block labelled
  and the other scored (seeds 0-4 draw the two blocks). Each distinct labelled set
  weighs once (``draw_summary``).
- **Encoder.** ``pars-small-v2`` (what ``PARSClassifier()`` reads), read as the
  library's default (``readout="mean+std"``, half-patch stride). Caveat stated before
  the runs: it was pretrained on EEGMAT's 24 training subjects without their labels,
  the pool and selection subjects among them; ``--encoder
  benchmarks/encoders/pars-selection`` runs the same rule over an encoder that never
  saw the selection subjects (reported beside it, not part of the choice).
- **Fits.** Each block's raw features computed once per task by the library's
  ``block_features`` and cached (``benchmarks/.cache/probe_blocks/``); every row is
  then fitted by the functions ``PARSProbe.fit`` calls (``compare_recipes``,
  ``choose_weight``, ``choose_recipe``, ``fit_blocks``), ``C=3``, ``random_state`` the
  seed. ``--smoke`` checks on one task that a row equals ``PARSProbe`` fitted on the
  windows.
- **Rows** (:data:`MECHANISMS`): fixed weights of the encoder's block (0, 0.25, 0.5,
  1) times the tangent space's (1, 0.5, 0), band power 1: ``fixed`` (today's
  ``PARSClassifier()``: both 1), ``none`` (``PARSProbe()``: encoder 0, tangent space
  1), ``enc0.25-ts1``, ..., ``enc0-ts0`` (band power alone, ``C=3``);
  ``auto-1se`` and ``auto-2se`` (``block_weights="auto"`` with a margin of 1 or 2
  standard errors; scored only where the labelled units are three or more: EEGMAT
  k = 4 and 12), ``recipe-auto`` (``recipe="auto"`` with its incumbent, the fixed
  recipe; the same cells).
- **Score.** Balanced accuracy on the scored units. A row's score over a set of cells:
  the mean over tasks of each task's mean over its cells, each cell the mean over its
  distinct labelled sets.
- **Decisions**, in order:

  1. *Fallback weights* (:data:`~braindecode_pars.features.recipe.FALLBACK_WEIGHTS`,
     fewer than three groups): over the cells of fewer than three labelled units
     (EEGMAT k = 1 and 2, the four MI tasks), the score of each of the twelve fixed
     weightings; of those within 0.005 of the best, the **smallest encoder weight, then
     the largest tangent-space weight** (the nearest to ``PARSProbe()``).
  2. *Margin* (:data:`~braindecode_pars.features.recipe.WEIGHT_MARGIN_SE`): over the
     cells of three labelled units or more (EEGMAT k = 4 and 12), ``auto-1se`` against
     ``auto-2se``: **2 unless 1 scores higher by more than 0.005**.
  3. *The default*: ``auto`` (the chosen margin on three groups or more, the chosen
     fallback weights below) scored over every cell. ``PARSClassifier()``'s head becomes
     ``PARSProbe(block_weights="auto")`` when its score is **at least ``none``'s less
     0.01 and at least ``fixed``'s less 0.005**; otherwise the default stays.
  4. *recipe="auto"* as ``PARSClassifier()``'s default where there are three groups or
     more: only if ``recipe-auto`` beats the default of decision 3 on the cells of
     three labelled units or more by more than 0.01 (reported either way).

- **What the choice is used for.** The library's constants are set to decisions 1 and
  2 and the default to decision 3 in one commit that names this report; ``test`` then
  reads the test splits once: EEGMAT k = 1, 2, 4, 12 drawn from the 24 training
  subjects and scored on the 12 test subjects, the MI tasks with block 1 or 2 (k = 1)
  and both (k = all) labelled and block 3 scored; rows ``fixed``, ``none`` and the
  chosen default (``chosen``), seeds 0-4.
- **Not tried** (budget, and stated before the runs): weights of the tangent space
  with three groups or more, and any weighting of ``PARSProbe()`` (no encoder: it keeps
  today's behaviour), the encoder block's width (a projection), late fusion, other
  ``C``; 2-fold comparisons with two groups.

Usage (one thread, resumable: each row appends a JSON line and is skipped when found)::

    OMP_NUM_THREADS=1 python -m benchmarks.bench_probe_blocks select
    OMP_NUM_THREADS=1 python -m benchmarks.bench_probe_blocks test
    python -m benchmarks.bench_probe_blocks report
    OMP_NUM_THREADS=1 python -m benchmarks.bench_probe_blocks select --smoke  # one MI task

``select`` and ``test`` append to ``results/probe_blocks.jsonl`` (each row names its
part); ``report`` writes ``probe_blocks.md``. Estimated before the runs
(not measured; the features dominate): the encoder over the 24 EEGMAT subjects
(about 580 windows of 19 channels) and the four MI tasks' two blocks (64 channels),
then about 300 logistic regressions per EEGMAT draw of 12 subjects: 20-40 minutes of
one thread for ``select``, as much for ``test``. Measured on the 2-core development
machine beside another job: about 3 minutes for ``select``, 1 for ``test``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import balanced_accuracy_score

from benchmarks.lib.dev_tasks import DEV_TASKS, draw_summary, split
from benchmarks.lib.encoders import benchmark_encoder
from benchmarks.lib.measure import git_commit, machine, table_head, write_report
from benchmarks.lib.probe_cells import (  # noqa: F401
    CACHE,
    EEGMAT,
    FULL,
    KS,
    MIN_GROUPS,
    SEEDS,
    cells,
    score,
    task_features,
)
from braindecode_pars.features.recipe import (
    ENCODER_WEIGHTS,
    choose_recipe,
    choose_weight,
    compare_recipes,
    fit_blocks,
    inner_splitter,
)

logger = logging.getLogger("bench_probe_blocks")

RESULTS = Path(__file__).resolve().parent / "results"
#: Both parts' rows, one file (the lab caps its result files: ``test_lab_size.py``).
ROWS = RESULTS / "probe_blocks.jsonl"
REPORT = RESULTS / "probe_blocks.md"

#: Decision 1's tangent-space weights (band power stays 1).
TS_WEIGHTS = (1.0, 0.5, 0.0)


def weights_name(encoder, tangentspace):
    """A fixed weighting's row: ``fixed`` and ``none`` for today's two probes."""
    named = {(1.0, 1.0): "fixed", (0.0, 1.0): "none"}
    return named.get((encoder, tangentspace), f"enc{encoder:g}-ts{tangentspace:g}")


#: The fixed weightings, by row.
FIXED_WEIGHTS = {
    weights_name(e, t): {"encoder": e, "tangentspace": t}
    for t in TS_WEIGHTS
    for e in ENCODER_WEIGHTS
}
#: The rows: a fixed weighting, or an inner comparison.
MECHANISMS = {**FIXED_WEIGHTS, "auto-1se": "auto:1", "auto-2se": "auto:2", "recipe-auto": "recipe"}
#: The rows that need three labelled units or more.
COMPARED = ("auto-1se", "auto-2se", "recipe-auto")
#: Decision 1: a weight within this of the best counts as the best (the smallest wins).
FALLBACK_TOLERANCE = 0.005
#: Decision 2: margin 1 replaces 2 only when it scores higher by more than this.
MARGIN_TOLERANCE = 0.005
#: Decision 3: ``auto`` becomes the default when at least ``none`` less NONE_SLACK and
#: ``fixed`` less FIXED_SLACK.
NONE_SLACK, FIXED_SLACK = 0.01, 0.005
#: Decision 4: recipe-auto must beat decision 3's default by more than this.
RECIPE_MARGIN = 0.01


@functools.cache
def commit():
    """The checkout's commit when the process first asks, ``+`` when tracked files changed."""
    return git_commit(dirty=True)


# -- features ----------------------------------------------------------------------------
def rows_of(feats, rows):
    return {name: F[rows] for name, F in feats.items()}


# -- one row -----------------------------------------------------------------------------
def weight_candidates():
    return [FULL.weighted({"encoder": w}) for w in ENCODER_WEIGHTS]


def recipe_candidates():
    return [FULL, *(r for r in FULL.candidates(encoder=True) if r != FULL)]


def fit_row(how, feats, y, groups, seed, cache):
    """The recipe a row fits on the labelled windows (``feats``, ``y``, ``groups``) and
    what it chose; ``how`` a value of :data:`MECHANISMS`; ``cache`` keeps one draw's
    inner comparisons across rows."""
    if not isinstance(how, str):
        return FULL.weighted(how), {}
    n_groups = len(np.unique(groups))
    kind = "recipe" if how == "recipe" else "weights"
    if kind not in cache:
        candidates = recipe_candidates() if kind == "recipe" else weight_candidates()
        scores, folds = compare_recipes(
            candidates, feats, y, groups, random_state=seed,
            cv=inner_splitter("auto", n_groups), return_folds=True,
        )  # fmt: skip
        cache[kind] = (candidates, scores, folds)
    candidates, scores, folds = cache[kind]
    if kind == "recipe":
        chosen, _ = choose_recipe(scores, candidates, folds.scores, incumbent=0)
    else:
        chosen = choose_weight(scores, candidates, folds.scores, margin=float(how.split(":")[1]))
    recipe = candidates[chosen]
    return recipe, {"inner_means": [float(m) for m in scores["mean"]], "folds": str(folds)}


def score_row(recipe, feats, y, train, test, groups, seed):
    model = fit_blocks(recipe, rows_of(feats, train), y[train], groups, random_state=seed)
    proba = model.predict_proba(rows_of(feats, test))
    return float(balanced_accuracy_score(y[test], model.classes_[proba.argmax(axis=1)]))


def read_rows(part, path=ROWS):
    """The rows of ``part`` ("selection" or "test")."""
    if not Path(path).exists():
        return []
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["part"] == part]


def append(path, row):
    row = dict(row, commit=commit(), machine=machine())
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    logger.info("%s: %.3f (%s)", " ".join(map(str, row["key"])), row["bal_acc"], row["recipe"])


def run(part, mechanisms, out, encoder, tasks):
    done = {tuple(r["key"]) for r in read_rows(part, out)}
    for task in tasks:
        feats, _, y, units, pool, scored, _ = task_features(task, part, encoder)
        for k, seeds in cells(task, scored):
            for seed in seeds:
                train, test, labelled = split(units, pool, scored, k, seed)
                groups = units[train]
                cache = {}
                for mechanism in mechanisms:
                    key = (part, str(encoder), task, k, seed, mechanism)
                    if key in done:
                        continue
                    if mechanism in COMPARED and len(np.unique(groups)) < MIN_GROUPS:
                        continue
                    start = time.perf_counter()
                    recipe, extra = fit_row(
                        MECHANISMS[mechanism], rows_of(feats, train), y[train], groups, seed,
                        cache,
                    )  # fmt: skip
                    bal = score_row(recipe, feats, y, train, test, None, seed)
                    append(out, dict(
                        key=list(key), part=part, encoder=str(encoder), task=task, k=k,
                        seed=seed, mechanism=mechanism, units=" ".join(map(str, labelled)),
                        n_units=len(labelled), recipe=str(recipe),
                        encoder_weight=recipe.weight("encoder"), bal_acc=bal,
                        seconds=time.perf_counter() - start, **extra,
                    ))  # fmt: skip


def smoke(encoder):
    """One MI task at seed 0, its labelled block cut in three pseudo-units: the rows
    ``fixed``, ``none`` and ``enc0.5-ts0`` fitted here on the cached features fit the
    recipe ``PARSProbe`` fits on the windows, and score as it does. (``auto-2se`` is this
    rule's ``choose_weight``; since issue 98 ``PARSProbe(block_weights="auto")`` is
    another rule, ``bench_probe_evidence``'s, so it is not compared here.)"""
    from braindecode_pars import PARSProbe

    task = "mi-executed-lr"
    feats, X, y, units, pool, scored, sfreq = task_features(task, "selection", encoder)
    train, test, _ = split(units, pool, scored, "1", 0)
    groups = np.arange(len(train)) * 3 // len(train)
    weights = {"fixed": None, "none": {"encoder": 0}, "enc0.5-ts0": {"encoder": 0.5,
               "tangentspace": 0}}  # fmt: skip
    for mechanism in ("fixed", "none", "enc0.5-ts0"):
        start = time.perf_counter()
        recipe, _ = fit_row(MECHANISMS[mechanism], rows_of(feats, train), y[train], groups, 0, {})
        ours = score_row(recipe, feats, y, train, test, None, 0)
        probe = PARSProbe(
            encoder, block_weights=weights[mechanism], sfreq=sfreq, random_state=0
        ).fit(X[train], y[train], groups=groups)
        theirs = float(balanced_accuracy_score(y[test], probe.predict(X[test])))
        logger.info("smoke %s: %s %.3f; PARSProbe %s %.3f (%.0f s)", mechanism, recipe, ours,
                    probe.recipe_, theirs, time.perf_counter() - start)  # fmt: skip
        assert str(probe.recipe_) == str(recipe) and abs(ours - theirs) < 0.01, mechanism


# -- the rule ----------------------------------------------------------------------------
def table(rows):
    df = pd.DataFrame(rows)
    df = df.assign(k=df.k.astype(str), method=df.mechanism)
    return draw_summary(df, "bal_acc", by=("task", "method", "k", "n_units"))


def auto_summary(summary, margin, fallback):
    """The ``auto`` default's cells: the margin's row on three units or more, the fixed
    weighting ``fallback`` (a row's name) below."""
    fallback_row = fallback
    high = summary[(summary.method == f"auto-{margin:g}se") & (summary.n_units >= MIN_GROUPS)]
    low = summary[(summary.method == fallback_row) & (summary.n_units < MIN_GROUPS)]
    return pd.concat([high, low]).assign(method="auto")


def decide(summary):
    """Decisions 1-4 of the rule, and the scores they read."""
    low = {name: score(summary, name, few=True) for name in FIXED_WEIGHTS}
    best = max(low.values())
    near = [n for n, s in low.items() if s >= best - FALLBACK_TOLERANCE - 1e-12]
    fallback = min(
        near, key=lambda n: (FIXED_WEIGHTS[n]["encoder"], -FIXED_WEIGHTS[n]["tangentspace"])
    )
    one, two = (score(summary, f"auto-{m}se", few=False) for m in (1, 2))
    margin = 1.0 if one > two + MARGIN_TOLERANCE else 2.0
    auto = auto_summary(summary, margin, fallback)
    full = pd.concat([summary, auto])
    totals = {name: score(full, name) for name in ("fixed", "none", "auto")}
    adopt = totals["auto"] >= totals["none"] - NONE_SLACK - 1e-12 and (
        totals["auto"] >= totals["fixed"] - FIXED_SLACK - 1e-12
    )
    default = "auto" if adopt else "fixed"
    recipe = score(summary, "recipe-auto", few=False)
    incumbent = score(full, default, few=False)
    return dict(
        low=low, fallback=fallback, margin_scores=(one, two), margin=margin, totals=totals,
        adopt=adopt, default=default, recipe_auto=recipe, default_high=incumbent,
        recipe_default=bool(recipe > incumbent + RECIPE_MARGIN),
    )  # fmt: skip


def report(out=REPORT):
    rows = [r for r in read_rows("selection") if r["encoder"] == "pars-small-v2"]
    summary = table(rows)
    d = decide(summary)
    lines = [
        "# The probe's blocks weighed by what they carry (issue 87)",
        "",
        "Written by `benchmarks/bench_probe_blocks.py` (the rule is its docstring, committed "
        "before any run). Balanced accuracy; each distinct labelled set weighs once.",
        "",
        f"- Commits of the rows: {sorted({r['commit'] for r in rows})}",
        f"- Machine: {rows[0]['machine'] if rows else ''}",
        "",
        "## Decisions (selection splits only)",
        "",
        "1. Fallback weights (fewer than three labelled units): "
        + ", ".join(f"{n} {s:.3f}" for n, s in d["low"].items())
        + f" -> **FALLBACK_WEIGHTS = {FIXED_WEIGHTS[d['fallback']]}** ({d['fallback']})",
        f"2. Margin (three units or more): 1 SE {d['margin_scores'][0]:.3f}, 2 SE "
        f"{d['margin_scores'][1]:.3f} -> **WEIGHT_MARGIN_SE = {d['margin']:g}**",
        "3. Every cell: "
        + ", ".join(f"{n} {s:.3f}" for n, s in d["totals"].items())
        + f" -> **PARSClassifier() {'takes' if d['adopt'] else 'does not take'} "
        "block_weights='auto'**",
        f"4. recipe='auto' on three units or more: {d['recipe_auto']:.3f} against the "
        f"default's {d['default_high']:.3f} -> "
        f"**{'becomes' if d['recipe_default'] else 'does not become'} the default there**",
        "",
        "## Every cell (selection)",
        "",
        *table_head("task", "k", *MECHANISMS),
    ]
    for (task, k), part in summary.groupby(["task", "k"], sort=False):
        by = part.set_index("method")["mean"]
        lines.append(
            f"| {task} | {k} | "
            + " | ".join(f"{by[m]:.3f}" if m in by else "" for m in MECHANISMS)
            + " |"
        )
    test_rows = read_rows("test")
    if test_rows:
        t = table(test_rows)
        lines += ["", "## Test splits (read once, after the choice)", "",
                  *table_head("task", "k", "fixed", "none", "chosen")]  # fmt: skip
        for (task, k), part in t.groupby(["task", "k"], sort=False):
            by = part.set_index("method")["mean"]
            lines.append(
                f"| {task} | {k} | "
                + " | ".join(f"{by[m]:.3f}" if m in by else "" for m in ("fixed", "none", "chosen"))
                + " |"
            )
        lines.append(
            "| mean over tasks | | "
            + " | ".join(f"{score(t, m):.3f}" for m in ("fixed", "none", "chosen"))
            + " |"
        )
    write_report(lines, out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("select", "test", "report"))
    parser.add_argument("--encoder", default="pars-small-v2", help="shipped name or folder")
    parser.add_argument("--tasks", nargs="+", default=list(DEV_TASKS), choices=list(DEV_TASKS))
    parser.add_argument("--smoke", action="store_true", help="one MI task against PARSProbe")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    benchmark_encoder(args.encoder)
    if args.mode == "select" and args.smoke:
        smoke(args.encoder)
    elif args.mode == "select":
        run("selection", list(MECHANISMS), ROWS, args.encoder, args.tasks)
    elif args.mode == "test":
        run_test(args.encoder, args.tasks)
    else:
        report()


def run_test(encoder, tasks):
    """The test splits, once, after the choice: ``fixed``, ``none`` and ``chosen`` (the
    default as the choice left it: ``block_weights="auto"`` at the library's constants,
    which must be the rule's, or today's probe)."""
    from braindecode_pars.features import recipe as constants

    d = decide(table([r for r in read_rows("selection") if r["encoder"] == "pars-small-v2"]))
    fallback = FIXED_WEIGHTS[d["fallback"]]
    if d["adopt"] and (
        constants.FALLBACK_WEIGHTS != fallback or constants.WEIGHT_MARGIN_SE != d["margin"]
    ):
        raise SystemExit(
            "Set FALLBACK_WEIGHTS and WEIGHT_MARGIN_SE to the rule's choice "
            f"({fallback}, {d['margin']:g}) and commit before reading the test splits."
        )
    done = {tuple(r["key"]) for r in read_rows("test")}
    for task in tasks:
        feats, _, y, units, pool, scored, _ = task_features(task, "test", encoder)
        for k, seeds in cells(task, scored):
            for seed in seeds:
                train, test, labelled = split(units, pool, scored, k, seed)
                groups = units[train]
                compared = len(np.unique(groups)) >= MIN_GROUPS
                chosen = FIXED_WEIGHTS["fixed"]
                if d["adopt"]:
                    chosen = f"auto:{d['margin']:g}" if compared else fallback
                cache = {}
                rows = (("fixed", FIXED_WEIGHTS["fixed"]), ("none", FIXED_WEIGHTS["none"]),
                        ("chosen", chosen))  # fmt: skip
                for name, how in rows:
                    key = ("test", str(encoder), task, k, seed, name)
                    if key in done:
                        continue
                    start = time.perf_counter()
                    recipe, extra = fit_row(how, rows_of(feats, train), y[train], groups, seed,
                                            cache)  # fmt: skip
                    bal = score_row(recipe, feats, y, train, test, None, seed)
                    append(ROWS, dict(
                        key=list(key), part="test", encoder=str(encoder), task=task, k=k,
                        seed=seed, mechanism=name, units=" ".join(map(str, labelled)),
                        n_units=len(labelled), recipe=str(recipe),
                        encoder_weight=recipe.weight("encoder"), bal_acc=bal,
                        seconds=time.perf_counter() - start, **extra,
                    ))  # fmt: skip


if __name__ == "__main__":
    main()
