"""Every block of the probe earns its say on the user's own labels (issue 98): the least
gain a block must show (``EVIDENCE_DELTA``) and the time parts of the inner folds with
fewer than three groups (``TIME_PARTS``), chosen on the selection splits by a rule
written before any run, then the test splits read once.

``PARSProbe(block_weights="auto")`` (the default of ``PARSProbe()`` and of
``PARSClassifier()``'s head) fits band power alone unless inner folds on the labelled
windows show that the tangent space, then the encoder's block, helps by more than
``max(2 SE, delta)`` (the encoder's three weights share the level: 2.43 SE each; the SE
never below the binomial one of the held-out windows), the folds by group with three
groups or more and by contiguous time parts of each group's windows of each class
otherwise (:func:`~braindecode_pars.features.recipe.earn_blocks`).

The rule (written and committed before any of its runs; ``docs/benchmarks/defaults.rst``
gives it too)
==========================================================================================

- **Tasks and splits.** The selection splits of the five development tasks
  (``benchmarks/lib/dev_tasks.py``; ``select`` never reads a test split):
  ``eegmat-arithmetic`` (the main job's task: its selection subjects) with k = 1, 2, 4
  and 12 labelled pool subjects (seeds 0-4 drawn by ``labelled_units``), scored on the 12
  selection subjects; the four PhysioNet-MI S001 tasks with one block labelled and the
  other scored (seeds 0-4 draw the two blocks). A labelled set drawn twice is fitted
  once; each distinct set weighs once (``draw_summary``). Cells of fewer than three
  labelled units (EEGMAT k = 1, 2; every MI cell) compare by time parts, the others by
  leave-one-group-out.
- **Encoder and fits.** ``pars-small-v2`` read at the library's defaults; each block's
  raw features computed once per task by ``block_features`` and cached (the cache of
  ``bench_probe_blocks``), every row fitted by the functions ``PARSProbe.fit`` calls
  (``earn_blocks``, ``fit_blocks``) on the labelled windows in their order (braindecode's
  time order, recording by recording), ``C=3``, ``random_state`` the seed.
- **Rows.** ``earn[delta,P]`` (``PARSClassifier()``'s head: the encoder offered) and
  ``earn-noenc[delta,P]`` (``PARSProbe()``: no encoder) for delta in
  :data:`DELTAS` (0, 0.01, 0.02, 0.03) and P in :data:`PARTS` (3, 5); for reference,
  ``floor`` (band power + logistic regression at C=1, the dev tasks' and the main job's
  floor), ``bp`` (band power alone at C=3, the rule's null), ``ts`` (the tangent space
  alone), ``none`` and ``fixed`` (every block at equal say without and with the encoder:
  the defaults before); on the MI tasks ``ts830`` and ``none830`` (the tangent space of
  windows band-passed to 8-30 Hz, alone and beside broadband band power at equal say:
  which band to give the probe for motor imagery).
- **Score.** Balanced accuracy on the scored units. A row's score over a set of cells:
  the mean over tasks of each task's mean over its cells, each cell the mean over its
  distinct labelled sets (``bench_probe_blocks.score``).
- **Decision.** For each (delta, P), S = the mean of the scores of ``earn[delta,P]``
  and ``earn-noenc[delta,P]`` over every selection cell. Of the settings within 0.005 of
  the best S: the **largest delta** (the more conservative), then the **fewer parts**
  (fewer fits). The library's ``EVIDENCE_DELTA`` and ``TIME_PARTS`` are set to it in one
  commit that names this report. **What counts as a win**: the rule stays the default of
  ``PARSProbe()`` and ``PARSClassifier()`` when both its rows score at least
  ``floor``'s score less 0.01 over every selection cell; otherwise the default becomes
  the null (band power alone) and the report says so.
- **Test splits** (``test``, once, after that commit): EEGMAT k = 1, 2, 4, 12 drawn from
  the 24 training subjects and scored on the 12 test subjects, the MI tasks with block 1
  or 2 (k = 1) and both (k = all) labelled and block 3 scored, seeds 0-4; rows
  ``chosen`` (``PARSClassifier()``), ``chosen-noenc`` (``PARSProbe()``), ``floor``,
  ``bp``, ``none``, ``fixed``. Each row keeps its predictions; the report gives the
  paired difference ``chosen - floor`` (and ``chosen - bp``) with a 95 % interval from
  2,000 bootstrap draws of the scored windows (within each task and class, the same
  draw for both rows), which covers the test windows' sampling, the error that
  dominates here. Done when ``chosen`` is at or above ``floor`` less 0.01.
- **Not tried** (stated before the runs): other margins than 2 SE, the tangent space at
  weights below 1, other ``C``, the encoder fine-tuned, bands other than 8-30 Hz.

Usage (one thread, resumable: each row appends a JSON line and is skipped when found)::

    OMP_NUM_THREADS=1 python -m benchmarks.bench_probe_evidence select
    python -m benchmarks.bench_probe_evidence report
    OMP_NUM_THREADS=1 python -m benchmarks.bench_probe_evidence test

``select`` and ``test`` append to ``results/probe_evidence.jsonl`` (each row names its
part); ``report`` writes ``probe_evidence.md``.
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

from benchmarks.lib.dev_tasks import DEV_TASKS, draw_summary, load_task, split
from benchmarks.lib.encoders import benchmark_encoder
from benchmarks.lib.measure import git_commit, machine, table_head, write_report
from benchmarks.lib.probe_cells import CACHE, EEGMAT, FULL, MIN_GROUPS, cells, task_features
from benchmarks.lib.probe_cells import score as task_score
from braindecode_pars.features import recipe as recipe_module
from braindecode_pars.features.blocks import block_features
from braindecode_pars.features.recipe import (
    ProbeRecipe,
    TimeParts,
    earn_blocks,
    fit_blocks,
    inner_splitter,
)

logger = logging.getLogger("bench_probe_evidence")

RESULTS = Path(__file__).resolve().parent / "results"
ROWS = RESULTS / "probe_evidence.jsonl"
REPORT = RESULTS / "probe_evidence.md"
#: The least gains compared, and the time parts.
DELTAS = (0.0, 0.01, 0.02, 0.03)
PARTS = (3, 5)
#: Decision: settings within this of the best S count as the best.
TOLERANCE = 0.005
#: What counts as a win: both rows at least the floor less this.
FLOOR_SLACK = 0.01
#: The fixed rows: their recipes over the block features (``ts830``: the 8-30 Hz
#: covariances).
FIXED = {
    "floor": ProbeRecipe(("bandpower",), C=1.0),
    "bp": ProbeRecipe(("bandpower",)),
    "ts": ProbeRecipe(("tangentspace",)),
    "none": ProbeRecipe(("bandpower", "tangentspace")),
    "fixed": FULL,
}
MI_ROWS = {"ts830": ("ts830",), "none830": ("bandpower", "ts830")}
#: The 8-30 Hz band of ``ts830``.
MI_BAND = (8.0, 30.0)
NO_ENCODER = ProbeRecipe(("bandpower", "tangentspace"))


def earn_name(delta, parts, encoder=True):
    return f"earn{'' if encoder else '-noenc'}[{delta:g},{parts}]"


@functools.cache
def commit():
    return git_commit(dirty=True)


# -- features ----------------------------------------------------------------------------
def band_covariances(task, part):
    """The covariances of the task's windows band-passed to :data:`MI_BAND` (cached)."""
    from mne.filter import filter_data

    path = CACHE / f"ts830-{task}-{part}.npz"
    if path.exists():
        with np.load(path) as f:
            return f["ts830"]
    X, _, _, _, _, sfreq = load_task(task, part)
    low, high = MI_BAND
    filtered = filter_data(X.astype(np.float64), sfreq, low, high, verbose="error")
    covs = block_features(filtered, ProbeRecipe(("tangentspace",)), sfreq=sfreq)[0]
    covs = np.asarray(covs["tangentspace"])
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, ts830=covs)
    return covs


def features_of(task, part, encoder):
    feats, _, y, units, pool, scored, _ = task_features(task, part, encoder)
    feats = dict(feats)
    if task != EEGMAT and part == "selection":
        feats["ts830"] = band_covariances(task, part)
    return feats, y, units, pool, scored


def rows_of(feats, rows):
    return {name: F[rows] for name, F in feats.items()}


# -- the rows of one draw ----------------------------------------------------------------
class _Memo:
    """``compare_recipes`` computed once per candidate list and folds within a draw: the
    settings of delta reuse the inner comparisons (only the decisions differ)."""

    def __init__(self):
        self.original = recipe_module.compare_recipes
        self.seen = {}

    def __call__(self, candidates, features, y, groups, **kwargs):
        key = (tuple(str(c) for c in candidates), repr(kwargs.get("cv")))
        if key not in self.seen:
            self.seen[key] = self.original(candidates, features, y, groups, **kwargs)
        return self.seen[key]


def folds_for(groups, parts):
    n_groups = len(np.unique(groups))
    if n_groups >= MIN_GROUPS:
        return inner_splitter("auto", n_groups)
    return TimeParts(parts)


def evidence_rows(feats, y, groups, seed, rows):
    """``{row: (recipe, extra)}`` of the ``earn`` rows named in ``rows``."""
    memo = _Memo()
    out = {}
    recipe_module.compare_recipes = memo
    try:
        for parts in PARTS:
            cv = folds_for(groups, parts)
            for delta in DELTAS:
                for encoder, fixed in ((True, FULL), (False, NO_ENCODER)):
                    name = earn_name(delta, parts, encoder)
                    if name not in rows:
                        continue
                    ev = earn_blocks(fixed, feats, y, groups, cv=cv, random_state=seed,
                                     delta=delta)  # fmt: skip
                    out[name] = (ev.recipe, dict(
                        folds=str(ev.folds), compared=ev.compared,
                        decisions={d.block: [d.weight, [round(g, 4) for g in d.gains],
                                             [round(b, 4) for b in d.bars]]
                                   for d in ev.decisions},
                    ))  # fmt: skip
    finally:
        recipe_module.compare_recipes = memo.original
    return out


def predict(recipe, feats, y, train, test, seed):
    model = fit_blocks(recipe, rows_of(feats, train), y[train], random_state=seed)
    proba = model.predict_proba(rows_of(feats, test))
    return model.classes_[proba.argmax(axis=1)]


def read_rows(part, path=None):
    path = ROWS if path is None else path
    if not Path(path).exists():
        return []
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["part"] == part]


def append(row, path=None):
    path = ROWS if path is None else path
    row = dict(row, commit=commit(), machine=machine())
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    logger.info("%s: %.3f (%s)", " ".join(map(str, row["key"])), row["bal_acc"], row["recipe"])


def selection_rows(task):
    rows = [*FIXED, *(earn_name(d, p, e) for p in PARTS for d in DELTAS for e in (True, False))]
    return rows + (list(MI_ROWS) if task != EEGMAT else [])


def run(part, encoder, tasks, rows_for, chosen=None):
    """Fit and score every row of every distinct labelled set of ``part``."""
    done = {tuple(r["key"]) for r in read_rows(part)}
    for task in tasks:
        feats, y, units, pool, scored = features_of(task, part, encoder)
        for k, seeds in cells(task, scored):
            sets = set()
            for seed in seeds:
                train, test, labelled = split(units, pool, scored, k, seed)
                if tuple(labelled) in sets:
                    continue  # the same labelled set: fitted once, weighted once
                sets.add(tuple(labelled))
                groups = units[train]
                rows = [r for r in rows_for(task) if (part, str(encoder), task, k, seed, r)
                        not in done]  # fmt: skip
                if not rows:
                    continue
                start = time.perf_counter()
                wanted = {earn_name(*chosen, r == "chosen") if r.startswith("chosen") else r
                          for r in rows if r not in FIXED and r not in MI_ROWS}  # fmt: skip
                earned = evidence_rows(rows_of(feats, train), y[train], groups, seed, wanted)
                for row in rows:
                    extra = {}
                    if row in FIXED:
                        recipe = FIXED[row]
                    elif row in MI_ROWS:
                        recipe = ProbeRecipe(MI_ROWS[row])
                    else:
                        name = row
                        if row.startswith("chosen"):
                            name = earn_name(*chosen, row == "chosen")
                        recipe, extra = earned[name]
                    pred = predict(recipe, feats, y, train, test, seed)
                    row_out = dict(
                        key=[part, str(encoder), task, k, seed, row], part=part,
                        encoder=str(encoder), task=task, k=k, seed=seed, mechanism=row,
                        units=" ".join(map(str, labelled)), n_units=len(labelled),
                        recipe=str(recipe), bal_acc=float(balanced_accuracy_score(y[test], pred)),
                        **extra,
                    )  # fmt: skip
                    if part == "test":
                        row_out["pred"], row_out["true"] = pred.tolist(), y[test].tolist()
                    append(row_out)
                logger.info("%s k=%s seed %d: %d rows in %.0f s", task, k, seed, len(rows),
                            time.perf_counter() - start)  # fmt: skip


# -- the rule ----------------------------------------------------------------------------
def summary_of(rows):
    df = pd.DataFrame(rows)
    df = df.assign(k=df.k.astype(str), method=df.mechanism)
    return draw_summary(df, "bal_acc", by=("task", "method", "k", "n_units"))


def decide(summary):
    """The decision of the rule: the scores it reads, the setting chosen, the win."""
    s = {}
    for parts in PARTS:
        for delta in DELTAS:
            enc = task_score(summary, earn_name(delta, parts, True))
            noenc = task_score(summary, earn_name(delta, parts, False))
            s[(delta, parts)] = (enc, noenc, (enc + noenc) / 2)
    best = max(v[2] for v in s.values())
    near = [key for key, v in s.items() if v[2] >= best - TOLERANCE - 1e-12]
    delta, parts = max(near, key=lambda key: (key[0], -key[1]))
    floor = task_score(summary, "floor")
    enc, noenc, _ = s[(delta, parts)]
    win = enc >= floor - FLOOR_SLACK - 1e-12 and noenc >= floor - FLOOR_SLACK - 1e-12
    reference = {name: task_score(summary, name) for name in (*FIXED, *MI_ROWS)}
    return dict(scores=s, delta=delta, parts=parts, floor=floor, win=win, reference=reference)


def bootstrap_difference(rows_a, rows_b, y_of, n_draws=2000, seed=0):
    """The paired difference of two rows' scores over the tasks (the mean over tasks of
    each task's mean over cells and distinct sets) and its 95 % interval: the scored
    windows redrawn with replacement within each task and class, the same draw for both
    rows and every cell of the task."""
    rng = np.random.default_rng(seed)
    tasks = sorted({r["task"] for r in rows_a})
    pairs = {t: [] for t in tasks}
    for a in rows_a:
        b = next(r for r in rows_b if r["task"] == a["task"] and r["k"] == a["k"]
                 and r["seed"] == a["seed"])  # fmt: skip
        pairs[a["task"]].append((a["k"], np.array(a["pred"]), np.array(b["pred"])))
    draws = np.zeros(n_draws)
    point = []
    for task in tasks:
        y = y_of[task]
        by_class = [np.flatnonzero(y == c) for c in np.unique(y)]
        per_draw = np.zeros(n_draws)
        diffs = []
        for _, pa, pb in pairs[task]:
            diffs.append(balanced_accuracy_score(y, pa) - balanced_accuracy_score(y, pb))
        point.append(_cells_mean(pairs[task], diffs))
        for i in range(n_draws):
            idx = np.concatenate([rng.choice(c, len(c)) for c in by_class])
            d = [balanced_accuracy_score(y[idx], pa[idx]) - balanced_accuracy_score(y[idx], pb[idx])
                 for _, pa, pb in pairs[task]]  # fmt: skip
            per_draw[i] = _cells_mean(pairs[task], d)
        draws += per_draw / len(tasks)
    return float(np.mean(point)), tuple(float(q) for q in np.percentile(draws, [2.5, 97.5]))


def _cells_mean(pairs, values):
    """The mean over cells (k) of the mean over each cell's distinct sets."""
    by_k = {}
    for (k, _, _), v in zip(pairs, values, strict=True):
        by_k.setdefault(k, []).append(v)
    return float(np.mean([np.mean(v) for v in by_k.values()]))


def report(out=None):
    out = REPORT if out is None else out
    rows = read_rows("selection")
    summary = summary_of(rows)
    d = decide(summary)
    lines = [
        "# Every block of the probe earns its say (issue 98)",
        "",
        "Written by `benchmarks/bench_probe_evidence.py` (the rule is its docstring and "
        "`docs/benchmarks/defaults.rst`, committed before any run). Balanced accuracy; "
        "each distinct labelled set weighs once; a row's score is the mean over tasks of "
        "each task's mean over its cells.",
        "",
        f"- Commits of the rows: {sorted({r['commit'] for r in rows})}",
        f"- Machine: {rows[0]['machine'] if rows else ''}",
        "",
        "## Decision (selection splits only)",
        "",
        *table_head(
            "delta", "time parts", "PARSClassifier() (earn)", "PARSProbe() (earn-noenc)", "S"
        ),  # fmt: skip
    ]
    for (delta, parts), (enc, noenc, mean) in d["scores"].items():
        lines.append(f"| {delta:g} | {parts} | {enc:.3f} | {noenc:.3f} | {mean:.3f} |")
    lines += [
        "",
        "Reference rows over the same cells: "
        + ", ".join(f"{n} {s:.3f}" for n, s in d["reference"].items() if not np.isnan(s))
        + " (ts830 and none830: MI tasks only).",
        "",
        f"**EVIDENCE_DELTA = {d['delta']:g}, TIME_PARTS = {d['parts']}.** Win (both rows at "
        f"least floor {d['floor']:.3f} less {FLOOR_SLACK}): **{'yes' if d['win'] else 'no'}**"
        + ("" if d["win"] else " -> the default becomes band power alone")
        + ".",
        "",
        "## Every cell (selection)",
        "",
    ]
    chosen = (earn_name(d["delta"], d["parts"]), earn_name(d["delta"], d["parts"], False))
    shown = ("floor", "bp", "ts", "none", "fixed", *chosen, *MI_ROWS)
    lines += table_head("task", "k", *shown)
    for (task, k), part in summary.groupby(["task", "k"], sort=False):
        by = part.set_index("method")["mean"]
        cells_ = " | ".join(f"{by[m]:.3f}" if m in by else "" for m in shown)
        lines.append(f"| {task} | {k} | {cells_} |")
    lines += ["", "Each task's mean over its cells (selection):", ""]
    lines += per_task(summary, shown)
    mi = summary[summary.task != EEGMAT]
    lines += ["", "The mean over the four MI tasks (selection): " + ", ".join(
        f"{m} {task_score(mi, m):.3f}" for m in ("floor", "bp", "ts", "ts830", "none", "none830",
                                                 "fixed"))]  # fmt: skip
    lines += ["", "How often each block was admitted (selection, chosen setting):", ""]
    for name in chosen:
        picked = [r for r in rows if r["mechanism"] == name]
        for block in ("tangentspace", "encoder"):
            got = [r["decisions"][block][0] > 0 for r in picked if block in r.get("decisions", {})]
            if got:
                lines.append(f"- {name}: {block} admitted in {sum(got)} of {len(got)} fits")
    test_rows = read_rows("test")
    if test_rows:
        lines += _test_section(test_rows)
    write_report(lines, out)


def per_task(summary, names):
    """Rows: each task's mean over its cells, then the mean over tasks, for ``names``."""
    tasks = list(summary.task.unique())
    lines = table_head("row", *tasks, "mean over tasks")
    for name in names:
        s = summary[summary.method == name]
        if s.empty:
            continue
        means = s.groupby("task", sort=False)["mean"].mean()
        cells_ = " | ".join(f"{means[t]:.3f}" if t in means else "" for t in tasks)
        lines.append(f"| {name} | {cells_} | {means.mean():.3f} |")
    return lines


def _test_section(rows):
    t = summary_of(rows)
    names = ("chosen", "chosen-noenc", "floor", "bp", "none", "fixed")
    lines = [
        "",
        "## Test splits (read once, after the choice)",
        "",
        *table_head("task", "k", *names),
    ]
    for (task, k), part in t.groupby(["task", "k"], sort=False):
        by = part.set_index("method")
        cells_ = " | ".join(
            f"{by.loc[m, 'mean']:.3f} ± {by.loc[m, 'std']:.3f}" if m in by.index else ""
            for m in names
        )
        lines.append(f"| {task} | {k} | {cells_} |")
    lines.append("| mean over tasks | | "
                 + " | ".join(f"{task_score(t, m):.3f}" for m in names) + " |")  # fmt: skip
    lines += ["", "(± the standard deviation over the cell's distinct labelled sets.) Each "
              "task's mean over its cells (test):", "", *per_task(t, names)]  # fmt: skip
    admitted = {b: [r["decisions"][b][0] > 0 for r in rows
                    if r["mechanism"] == "chosen" and b in r.get("decisions", {})]
                for b in ("tangentspace", "encoder")}  # fmt: skip
    y_of = {r["task"]: np.array(r["true"]) for r in rows}  # the same windows in every cell
    lines += ["", "Paired differences over the tasks (95 % bootstrap interval of the scored "
              "windows):", ""]  # fmt: skip
    for a, b in (("chosen", "floor"), ("chosen", "bp"), ("chosen-noenc", "floor"),
                 ("chosen", "chosen-noenc"), ("chosen", "fixed"),
                 ("chosen-noenc", "none")):  # fmt: skip
        mean, (low, high) = bootstrap_difference(
            [r for r in rows if r["mechanism"] == a], [r for r in rows if r["mechanism"] == b], y_of
        )
        lines.append(f"- {a} - {b}: {mean:+.3f} [{low:+.3f}, {high:+.3f}]")
    lines += ["", "Blocks admitted by `chosen` (test): " + ", ".join(
        f"{b} in {sum(v)} of {len(v)} fits" for b, v in admitted.items())]  # fmt: skip
    return lines


def test_rows(task):
    return ["chosen", "chosen-noenc", *FIXED]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("select", "test", "report"))
    parser.add_argument("--encoder", default="pars-small-v2", help="shipped name or folder")
    parser.add_argument("--tasks", nargs="+", default=list(DEV_TASKS), choices=list(DEV_TASKS))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("braindecode_pars").setLevel(logging.ERROR)  # the probes' own lines
    torch.set_num_threads(1)
    benchmark_encoder(args.encoder)
    if args.mode == "select":
        run("selection", args.encoder, args.tasks, selection_rows)
    elif args.mode == "test":
        d = decide(summary_of(read_rows("selection")))
        chosen = (d["delta"], d["parts"])
        if (recipe_module.EVIDENCE_DELTA, recipe_module.TIME_PARTS) != chosen:
            raise SystemExit(
                f"Set EVIDENCE_DELTA and TIME_PARTS to the rule's choice {chosen} and commit "
                "before reading the test splits."
            )
        run("test", args.encoder, args.tasks, test_rows, chosen=chosen)
    else:
        report()


if __name__ == "__main__":
    main()
