"""Where PARS earns its place with few labels: pretraining on the task's own unlabelled
data, the test subjects' unlabelled EEG, and braindecode's compact networks, on the
development tasks' selection or test split.

The splits, draws and labelled units are :mod:`bench_dev_tasks`'s (one harness): draw
``s`` labels the units :func:`bench_dev_tasks.split` gives, and scores the part's
scored units. The reference rows (floors, the probe without an encoder, over a random
encoder, over a shipped encoder) are ``bench_dev_tasks.py``'s and stay in its result
files; ``--report`` joins both.

Rows (``--methods``):

- ``pars in-domain[N]``: :class:`~braindecode_pars.PARSClassifier`'s probe with
  pretraining on the task's own unlabelled pool. The encoder stage,
  ``PARSPretrainer(steps=N, random_state=p)``, is fitted on the pool's windows
  (EEGMAT: the part's labelled-pool subjects, 12 for selection and 24 for test;
  PhysioNet-MI S001: the baseline runs 1-2 and every run of the blocks that may be
  labelled, cut into 4-s windows), then ``PARSProbe(readout="mean")`` on the labelled
  windows (every probe row reads the tokens' mean: :data:`PROBE_READOUT`). The
  pool does not depend on the draw (for MI selection it is the labelled block's
  runs), so the encoder is pretrained once per pool and pretraining seed ``p`` and
  serves every draw: the windows ``PARSClassifier().fit(X, y, X_unlabeled=...)``
  would pretrain on, in another order. ``pretrain_seconds`` is its cost.
- ``pars transductive[N]``: the same with the scored units' windows (unlabelled) in
  the pool: the test-subject adaptation ``fit(..., X_target_unlabeled=...)`` does,
  declared as transductive.
- ``pars in-domain[N, R]``, ``pars transductive[N, R]``: the same, the probe reading
  the encoder with ``readout=R`` (``mean+std``: the mean and spread of the tokens over
  patches, ``PARSProbe``'s default).
- ``pars in-domain in fit``: ``PARSClassifier(encoder=PARSPretrainer(random_state=s),
  head=PARSProbe(readout="mean"), random_state=s)`` called as a user calls it,
  ``fit(X_labelled, y, groups=units, X_unlabeled=the pool's other windows)``: one
  pretraining per draw, to check the shared encoders above and time the whole fit.
- ``pars full fine-tuning``: ``PARSClassifier(encoder="pars-small",
  head=PARSFineTuner(strategy="full"))``, every weight of the shipped encoder and its
  head trained on the labelled windows, at the fine-tuner's default settings (the
  paper's strategy).
- ``EEGNet``, ``ShallowFBCSPNet``: braindecode's networks trained from scratch
  (:func:`compact_network`: AdamW, cosine schedule, class-weighted cross-entropy,
  batch 32, 200 optimiser steps, inputs divided by the training windows' std).

Each row is appended to the CSV as it finishes (resumable); pretrained encoders are
kept in ``--cache`` (resumable too); the command is recorded beside the CSV.

Usage::

    python -m benchmarks.bench_few_labels --part selection --methods 'pars in-domain[1000]' \\
        'pars in-domain[3000]' --ks 1 4 all --out benchmarks/results/few_labels_selection
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from braindecode.util import set_random_seeds
from sklearn.metrics import balanced_accuracy_score, cohen_kappa_score

from benchmarks.lib.dev_tasks import (
    DEV_TASKS,
    MI_SELECTION_BLOCKS,
    MI_TEST_BLOCKS,
    load_task,
    part_units,
    split,
)
from benchmarks.lib.measure import append_score, command_line
from benchmarks.lib.networks import NETWORKS, compact_network
from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer, PARSProbe
from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
from braindecode_pars.features.blocks import READOUTS
from braindecode_pars.hub.folders import load_encoder, save_encoder

logger = logging.getLogger("bench_few_labels")

COLUMNS = (
    "task",
    "part",
    "method",
    "k",
    "seed",
    "pretrain_seed",
    "units",
    "balanced_accuracy",
    "kappa",
    "seconds",
    "pretrain_seconds",
)
#: The probe's readout in every probe row: the tokens' mean, the library's default when
#: the rule was written (``PARSProbe``'s default is now "mean+std"), so that rows run
#: since compare with the rows run then.
PROBE_READOUT = "mean"


def parse_method(method):
    """``pars in-domain[3000]`` -> ("pars in-domain", 3000, PROBE_READOUT);
    ``pars transductive[3000, mean+std]`` -> ("pars transductive", 3000, "mean+std");
    others -> (method, None, PROBE_READOUT)."""
    match = re.fullmatch(r"(pars in-domain|pars transductive)\[(\d+)(?:, ([a-z+]+))?\]", method)
    if match and match.group(3) in (None, *READOUTS):
        return match.group(1), int(match.group(2)), match.group(3) or PROBE_READOUT
    if method in (*NETWORKS, "pars in-domain in fit", "pars full fine-tuning"):
        return method, None, PROBE_READOUT
    raise ValueError(
        f"Unknown method {method!r}: 'pars in-domain[N]', 'pars transductive[N]' (N steps; "
        f"'[N, R]' reads the probe's readout R, one of {', '.join(READOUTS)}), "
        f"'pars in-domain in fit', 'pars full fine-tuning', {', '.join(map(repr, NETWORKS))}."
    )


def block_runs(blocks):
    """PhysioNet-MI's task runs of the blocks (block b: runs 4b-1 .. 4b+2)."""
    return [r for b in blocks for r in range(4 * b - 1, 4 * b + 3)]


def pool_of(name, part, labelled, X, units, transductive):
    """The unlabelled pretraining pool of a draw: (key, windows, groups, window seconds).

    ``key`` names the pool (draws with the same key share it)."""
    task = DEV_TASKS[name]
    if name == "eegmat-arithmetic":
        pool, scored = part_units(name, part)
        keep = list(pool) + (list(scored) if transductive else [])
        idx = np.flatnonzero(np.isin(units, keep))
        key = f"eegmat-{part}{'-transductive' if transductive else ''}"
        return key, X[idx], units[idx], task.window_seconds
    if part == "selection":
        blocks = list(MI_SELECTION_BLOCKS) if transductive else list(labelled)
    else:
        blocks = list(MI_SELECTION_BLOCKS) + (list(MI_TEST_BLOCKS) if transductive else [])
    runs = [1, 2, *block_runs(sorted(blocks))]
    key = "mi-runs-" + "-".join(map(str, runs))
    windows = load_physionet_mi_continuous(
        runs=runs,
        window_seconds=task.window_seconds,
        stride_seconds=task.window_seconds,
        sfreq=100.0,
    )
    groups = windows.get_metadata()["run"].to_numpy()
    return key, windows, groups, task.window_seconds


def encoder_path(cache, key, steps, seed):
    """Where the encoder pretrained on pool ``key`` with ``steps`` and ``seed`` is kept."""
    return cache / f"{key}-{steps}-p{seed}.pt"


def pretrained(cache, key, steps, seed, pool, groups, window_seconds):
    """The encoder pretrained on ``pool`` with ``steps`` and ``seed``, and the seconds
    it took; read from ``cache`` when an earlier run kept it."""
    path = encoder_path(cache, key, steps, seed)
    meta = path.with_suffix(".json")
    if path.exists() and meta.exists():
        return load_encoder(path), json.loads(meta.read_text())["seconds"]
    logger.info("pretraining %s, %d steps, seed %d", key, steps, seed)
    start = time.perf_counter()
    stage = PARSPretrainer(
        steps=steps, window_seconds=window_seconds, sfreq=100.0, random_state=seed, verbose=0
    ).fit(pool, groups=groups)
    seconds = time.perf_counter() - start
    cache.mkdir(parents=True, exist_ok=True)
    save_encoder(stage.encoder_, path)
    skill = stage.history_[-1].get("valid_skill") if stage.history_ is not None else None
    meta.write_text(json.dumps(dict(seconds=seconds, valid_skill=skill, steps=steps)))
    return stage.encoder_, seconds


def score(method, steps, X, y, units, train, test, ctx, seed, pretrain_seed, readout=PROBE_READOUT):
    """Predictions of one row on the scored windows, and its pretraining seconds;
    ``readout`` is the probe's."""
    if method in NETWORKS:
        s = float(X[train].std())
        classes, codes = np.unique(y, return_inverse=True)  # labels as 0..n-1 (ff: 2, 3)
        clf = compact_network(method, X.shape[1], X.shape[2], len(classes), codes[train], seed)
        set_random_seeds(seed, cuda=False)  # the initialisation and the batch order
        clf.fit(X[train] / s, codes[train])
        return classes[clf.predict(X[test] / s)], 0.0
    if method == "pars full fine-tuning":
        head = PARSFineTuner(strategy="full", verbose=0)
        clf = PARSClassifier(encoder="pars-small", head=head, sfreq=100.0, random_state=seed)
        clf.set_params(verbose=0)
        clf.fit(X[train], y[train], groups=units[train])
        return clf.predict(X[test]), 0.0
    key, pool, groups, window = ctx["pool"]
    if method == "pars in-domain in fit":
        rest = (
            pool[np.flatnonzero(~np.isin(ctx["pool_units"], ctx["labelled"]))]
            if isinstance(pool, np.ndarray)
            else pool
        )
        stage, head = PARSPretrainer(random_state=seed, verbose=0), PARSProbe(readout=readout)
        clf = PARSClassifier(encoder=stage, head=head, sfreq=100.0, random_state=seed, verbose=0)
        clf.fit(X[train], y[train], groups=units[train], X_unlabeled=rest)
        return clf.predict(X[test]), float("nan")
    encoder, seconds = pretrained(ctx["cache"], key, steps, pretrain_seed, pool, groups, window)
    clf = PARSClassifier(
        encoder=encoder,
        head=PARSProbe(readout=readout),
        sfreq=100.0,
        random_state=seed,
        verbose=0,
    )
    clf.fit(X[train], y[train], groups=units[train])
    return clf.predict(X[test]), seconds


def recipe_rows(name, part, X, y, units, pool, scored, ks, seeds, steps, p_seed, cache):
    """The probe's recipes over one in-domain encoder (``pars in-domain[steps]``,
    pretraining seed ``p_seed``, read from ``cache``): each candidate of
    :meth:`braindecode_pars.features.ProbeRecipe.candidates` and ``recipe="auto"`` (chosen
    by the library's inner leave-one-group-out on the labelled units), on every draw.
    Features come from :func:`braindecode_pars.features.blocks.block_features`, once per
    task; the rest is fitted on the labelled windows only
    (:func:`braindecode_pars.features.recipe.fit_blocks`). A row is named by its recipe,
    whose C is the library's (rows recorded before issue 46 name C in the earlier
    units, each block of total variance 1: ``C=1`` and ``C=100`` there)."""
    from braindecode_pars.features.blocks import BLOCKS, block_features
    from braindecode_pars.features.recipe import (
        MIN_GROUPS,
        ProbeRecipe,
        compare_recipes,
        fit_blocks,
    )

    encoder = load_encoder(encoder_path(cache, f"eegmat-{part}", steps, p_seed))
    every = ProbeRecipe(BLOCKS, readout=PROBE_READOUT)
    features, _ = block_features(X, every, sfreq=100.0, encoder=encoder)
    recipes = every.candidates(encoder=True)
    rows = []
    for k in ks:
        for seed in seeds:
            train, test, labelled = split(units, pool, scored, k, seed)
            sub = {n: raw[train] for n, raw in features.items()}
            chosen = None
            if len(np.unique(units[train])) >= MIN_GROUPS:
                scores = compare_recipes(recipes, sub, y[train], units[train], random_state=seed)
                chosen = recipes[int(np.argmax(scores["mean"].to_numpy()))]
            for recipe in [*recipes, "auto"]:
                fitted = chosen if recipe == "auto" else recipe
                if fitted is None:
                    continue
                probe = fit_blocks(fitted, sub, y[train], random_state=seed)
                proba = probe.predict_proba({n: raw[test] for n, raw in features.items()})
                pred = probe.classes_[proba.argmax(axis=1)]
                rows.append(dict(
                    task=name, part=part, method=f"pars in-domain[{steps}] recipe {recipe}", k=k,
                    seed=seed, pretrain_seed=p_seed, units=" ".join(map(str, labelled)),
                    balanced_accuracy=balanced_accuracy_score(y[test], pred),
                    kappa=cohen_kappa_score(y[test], pred), seconds=np.nan,
                    pretrain_seconds=np.nan,
                ))  # fmt: skip
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("selection", "test"), required=True)
    parser.add_argument("--tasks", nargs="+", default=list(DEV_TASKS))
    parser.add_argument("--ks", nargs="+", default=["1", "all"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--pretrain-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=[])
    parser.add_argument("--out", type=Path, help="prefix of the .csv (not with --report)")
    parser.add_argument(
        "--cache", type=Path, default=Path(__file__).parent / ".cache" / "few_labels"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--recipes",
        type=int,
        metavar="STEPS",
        help="score every probe recipe and recipe='auto' over the cached in-domain encoders "
        "of STEPS steps (EEGMAT; k with three labelled subjects or more)",
    )
    parser.add_argument(
        "--report", action="store_true", help="write the part's table and figure from the CSVs"
    )
    args = parser.parse_args(argv)
    if args.report:
        write_report(args.part, Path(__file__).parent / "results")
        return
    if args.out is None:
        parser.error("--out is required unless --report is given")
    if args.recipes:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
        torch.set_num_threads(args.threads)
        X, y, units, pool, scored, _ = load_task("eegmat-arithmetic", args.part)
        csv = args.out.with_suffix(".csv")
        with open(args.out.with_suffix(".commands"), "a") as f:
            f.write(command_line(__spec__.name) + "\n")
        for p in args.pretrain_seeds:
            rows = recipe_rows("eegmat-arithmetic", args.part, X, y, units, pool, scored,
                               args.ks, args.seeds, args.recipes, p, args.cache)  # fmt: skip
            pd.DataFrame(rows, columns=COLUMNS).to_csv(
                csv, mode="a", header=not csv.exists(), index=False
            )
            logger.info("recipes over pretraining seed %d: %d rows", p, len(rows))
        return
    if not args.methods:
        parser.error("--methods is required unless --report or --recipes is given")
    try:
        parsed = [(m, *parse_method(m)) for m in args.methods]
    except ValueError as err:
        parser.error(str(err))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("braindecode_pars").setLevel(logging.WARNING)
    torch.set_num_threads(args.threads)
    csv = args.out.with_suffix(".csv")
    csv.parent.mkdir(parents=True, exist_ok=True)
    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=COLUMNS)
    key = set(
        zip(done.task, done.method, done.k.astype(str), done.seed, done.pretrain_seed, strict=True)
    )
    with open(args.out.with_suffix(".commands"), "a") as f:
        f.write(command_line(__spec__.name) + "\n")
    for name in args.tasks:
        X, y, units, pool, scored, _ = load_task(name, args.part)
        ks = [k for k in args.ks if k == "all" or int(k) <= len(pool)]
        ks = ["1"] if scored is None else ks
        pools = {}
        for k in ks:
            for seed in args.seeds:
                train, test, labelled = split(units, pool, scored, k, seed)
                for method, kind, steps, readout in parsed:
                    p_seeds = args.pretrain_seeds if kind.startswith("pars ") and steps else [-1]
                    for p in p_seeds:
                        if (name, method, str(k), seed, p) in key:
                            continue
                        ctx = dict(cache=args.cache, labelled=labelled)
                        if kind.startswith("pars"):
                            transductive = kind == "pars transductive"
                            which = (transductive, tuple(labelled) if scored is None else None)
                            if which not in pools:
                                pools[which] = pool_of(
                                    name, args.part, labelled, X, units, transductive
                                )
                            ctx["pool"] = pools[which]
                            if isinstance(ctx["pool"][1], np.ndarray):
                                ctx["pool_units"] = ctx["pool"][2]
                        start = time.perf_counter()
                        pred, pre = score(
                            kind, steps, X, y, units, train, test, ctx, seed, p, readout
                        )
                        seconds = time.perf_counter() - start
                        row = append_score(
                            csv, COLUMNS, y[test], pred, task=name, part=args.part,
                            method=method, k=k, seed=seed, pretrain_seed=p,
                            units=" ".join(map(str, labelled)), seconds=seconds,
                            pretrain_seconds=pre,
                        )  # fmt: skip
                        logger.info(
                            "%s %s k=%s seed=%d p=%d: %.3f (%.0f s)",
                            name,
                            method,
                            k,
                            seed,
                            p,
                            row["balanced_accuracy"],
                            seconds,
                        )


# -- the report: this script's rows beside bench_dev_tasks.py's reference rows ---------

#: The encoder pretrained elsewhere that each part's reference rows read.
REFERENCE_ENCODER = {"test": "pars-small", "selection": "pars-selection"}
#: Row names in the report, by (source, method): each named for what it is.
REFERENCE_ROWS = {
    "floor (band power)": "floor: band power, logistic regression",
    "floor (tangent space)": "floor: tangent space, logistic regression",
    "probe[bp+ts, 100]": "probe, no encoder (band power + tangent space)",
    "probe[rand+bp+ts, 100]": "probe + random encoder",
    "probe[enc+bp+ts, 100]": "probe + encoder pretrained elsewhere ({encoder})",
    "probe[encstd+bp+ts, 100]": "probe + encoder pretrained elsewhere ({encoder}), "
    "read as the tokens' mean and spread (the probe's default readout)",
}
ROW_NAMES = {
    "pars in-domain[1000]": "probe + encoder pretrained on the task's unlabelled pool, 1,000 steps",
    "pars in-domain[3000]": "probe + encoder pretrained on the task's unlabelled pool, 3,000 steps",
    "pars transductive[3000]": "probe + encoder pretrained on the pool and the test subjects' "
    "unlabelled EEG (transductive), 3,000 steps",
    "pars in-domain[3000, mean+std]": "probe + encoder pretrained on the task's unlabelled "
    "pool, 3,000 steps, read as the tokens' mean and spread (the probe's default readout)",
    "pars transductive[3000, mean+std]": "probe + encoder pretrained on the pool and the test "
    "subjects' unlabelled EEG (transductive), 3,000 steps, read as the tokens' mean and spread",
    "pars in-domain in fit": "PARSClassifier(encoder=PARSPretrainer()) as a user calls it: "
    "3,000 steps in fit, then the probe (readout='mean')",
    "pars full fine-tuning": "full fine-tuning of pars-small (PARSFineTuner)",
    "EEGNet": "EEGNet from scratch",
    "ShallowFBCSPNet": "ShallowFBCSPNet from scratch",
}
#: Shorter names for the figure's axes and legend (the tables keep the full names).
SHORT = {
    REFERENCE_ROWS["floor (band power)"]: "floor: band power",
    REFERENCE_ROWS["floor (tangent space)"]: "floor: tangent space",
    REFERENCE_ROWS["probe[bp+ts, 100]"]: "probe, no encoder (the default)",
    REFERENCE_ROWS["probe[rand+bp+ts, 100]"]: "probe + random encoder",
    REFERENCE_ROWS["probe[enc+bp+ts, 100]"]: "probe + {encoder}, mean",
    REFERENCE_ROWS["probe[encstd+bp+ts, 100]"]: "probe + {encoder}, mean+std",
    ROW_NAMES["pars in-domain[1000]"]: "probe + in-domain, 1,000 steps",
    ROW_NAMES["pars in-domain[3000]"]: "probe + in-domain, 3,000 steps",
    ROW_NAMES["pars transductive[3000]"]: "probe + transductive, 3,000 steps",
    ROW_NAMES["pars in-domain[3000, mean+std]"]: "probe + in-domain, 3,000 steps, mean+std",
    ROW_NAMES["pars transductive[3000, mean+std]"]: "probe + transductive, 3,000 steps, mean+std",
    ROW_NAMES["pars in-domain in fit"]: "PARSClassifier(encoder=PARSPretrainer())",
    ROW_NAMES["pars full fine-tuning"]: "full fine-tuning of {encoder}",
    "EEGNet from scratch": "EEGNet",
    "ShallowFBCSPNet from scratch": "ShallowFBCSPNet",
}


def short(row, encoder):
    """The figure's name of a report row."""
    for long, name in SHORT.items():
        if long.format(encoder=encoder) == row:
            return name.format(encoder=encoder)
    return row


ENCODER_FREE = (
    "floor: band power, logistic regression",
    "floor: tangent space, logistic regression",
    "probe, no encoder (band power + tangent space)",
    "EEGNet from scratch",
    "ShallowFBCSPNet from scratch",
)


def joined_rows(part, results):
    """This script's rows and the reference rows of ``dev_tasks_<part>.csv``, with
    report names (``row``), ``k`` and ``units`` as strings, ``pretrain_seed`` -1 where
    nothing was pretrained for the row."""
    mine = pd.read_csv(results / f"few_labels_{part}.csv", dtype={"k": str, "units": str})
    ref = pd.read_csv(results / f"dev_tasks_{part}.csv", dtype={"k": str, "units": str})
    ref = ref[ref.method.isin(REFERENCE_ROWS)].copy()
    encoder = REFERENCE_ENCODER[part]
    ref["row"] = [REFERENCE_ROWS[m].format(encoder=encoder) for m in ref.method]
    # bench_dev_tasks names PhysioNet-MI's k = all (both blocks) by its number, 2
    ref.loc[ref.task.str.startswith("mi-") & (ref.k == "2"), "k"] = "all"
    ref["pretrain_seed"], ref["pretrain_seconds"] = -1, 0.0
    mine["row"] = mine.method.map(ROW_NAMES)
    df = pd.concat([ref, mine], ignore_index=True)
    # the reference rows at the k this script ran (EEGMAT test: 1, 4, 12, all)
    keep = set(zip(mine.task, mine.k, strict=True))
    return df[[(t, k) in keep for t, k in zip(df.task, df.k, strict=True)]]


def summary(df):
    """Per (row, task, k): the mean over distinct labelled sets (seeds drawing the same
    set averaged first; with one set, over the seeds), its std over the sets
    (``std_draws``), and for pretrained rows the std over pretraining seeds of the
    per-seed means (``std_pretrain``); also the median seconds of a fit and of its
    pretraining."""
    out = []
    for (row, task, k), g in df.groupby(["row", "task", "k"], sort=False):
        per_seed = []
        for _, h in g.groupby("pretrain_seed"):
            sets = h.groupby("units").balanced_accuracy.mean()
            per_seed.append(sets.mean() if len(sets) > 1 else h.balanced_accuracy.mean())
        sets = g.groupby("units").balanced_accuracy.mean()
        spread = sets if len(sets) > 1 else g.groupby("seed").balanced_accuracy.mean()
        rest = np.where(g.seconds >= g.pretrain_seconds, g.seconds - g.pretrain_seconds, g.seconds)
        out.append(
            dict(
                row=row,
                task=task,
                k=k,
                mean=float(np.mean(per_seed)),
                std_draws=float(spread.std(ddof=1)) if len(spread) > 1 else 0.0,
                std_pretrain=float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else np.nan,
                per_seed=per_seed,
                seconds=float(np.median(rest) + g.pretrain_seconds.median()),
                pretrain_seconds=float(g.pretrain_seconds.median()),
            )
        )
    return pd.DataFrame(out)


def lowest_k_table(s, tasks):
    """Rows x tasks at k = 1 with the mean over tasks; for pretrained rows the mean over
    tasks is computed per pretraining seed, then mean ± std over the seeds."""
    low = s[s.k == "1"]
    lines = []
    for row, g in low.groupby("row", sort=False):
        g = g.set_index("task")
        if not set(tasks) <= set(g.index):
            continue
        cells = [f"{g.loc[t, 'mean']:.3f} ± {g.loc[t, 'std_draws']:.3f}" for t in tasks]
        seeds = [len(g.loc[t, "per_seed"]) for t in tasks]
        if min(seeds) > 1 and len(set(seeds)) == 1:
            over = np.mean([g.loc[t, "per_seed"] for t in tasks], axis=0)
            mean = f"{over.mean():.3f} ± {over.std(ddof=1):.3f} (pretraining seeds)"
        else:
            mean = f"{np.mean([g.loc[t, 'mean'] for t in tasks]):.3f}"
        mine = row in ROW_NAMES.values()  # the reference rows' features were computed once
        seconds = f"{g.seconds.median():.0f}" if mine else ""
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {mean} | {seconds} |")
    return lines


def mean_over_tasks(s, row, tasks, k="1"):
    """The mean over ``tasks`` of a row at ``k``, per pretraining seed (an array)."""
    g = s[(s.row == row) & (s.k == k)].set_index("task")
    return np.mean([g.loc[t, "per_seed"] for t in tasks], axis=0)


def decision(s, tasks):
    """Rules 1 and 2 of the few-label decision, written before any row ran, applied to
    the selection summary: the budget becomes 1,000 steps if S(1000) >= S(3000) - 0.005;
    the default keeps the encoder block and pretraining in ``fit`` only if the chosen
    budget's summary E >= F + 0.01, F the probe without an encoder. The rules as written
    are on docs/benchmarks/few_labels.rst at the tag ``benchmarks-history-2026-11``."""
    s1000 = mean_over_tasks(s, ROW_NAMES["pars in-domain[1000]"], tasks).mean()
    s3000 = mean_over_tasks(s, ROW_NAMES["pars in-domain[3000]"], tasks).mean()
    budget = 1000 if s1000 >= s3000 - 0.005 else 3000
    e = s3000 if budget == 3000 else s1000
    f = mean_over_tasks(s, REFERENCE_ROWS["probe[bp+ts, 100]"], tasks).mean()
    keep = e >= f + 0.01
    return [
        "## The rule applied (docs/benchmarks/few_labels.rst)",
        "",
        f"- S(1000) = {s1000:.3f}, S(3000) = {s3000:.3f}: the default budget is {budget:,} steps.",
        f"- E = {e:.3f} against F = {f:.3f} (the probe without an encoder): "
        + (
            "E >= F + 0.01, the default keeps the encoder block and pretraining in fit."
            if keep
            else "E < F + 0.01, the fixed recipe becomes bp+ts and the default does not "
            "pretrain when its head reads no encoder."
        ),
        "",
    ]


def recipe_table(df):
    """Markdown lines: each probe recipe and ``recipe="auto"`` over the in-domain
    encoders on EEGMAT's selection split, per budget and k (mean over draws, then ±
    std over pretraining seeds), and rule 3 (``recipe="auto"`` becomes the default head
    if its mean over the ks is at least the best fixed recipe's minus 0.005)."""
    df = df.assign(
        budget=df.method.str.extract(r"\[(\d+)\]")[0].astype(int),
        recipe=df.method.str.split(" recipe ").str[1],
    )
    ks = sorted(df.k.unique(), key=lambda k: (k == "all", int(k) if k != "all" else 0))
    lines = [
        "## The probe's recipes over the in-domain encoders (EEGMAT, rule 3)",
        "",
        "Mean over the distinct labelled sets per pretraining seed, then mean ± std over "
        "the seeds; "
        "`auto`: chosen per draw by inner leave-one-group-out on the labelled subjects.",
        "",
        "| budget | recipe | " + " | ".join(f"k = {k}" for k in ks) + " | mean over ks |",
        "|---|---|" + "---|" * (len(ks) + 1),
    ]
    verdict = []
    for budget, g in df.groupby("budget"):
        means = {}
        for recipe, h in g.groupby("recipe", sort=False):
            per = (  # each distinct labelled set once, then its pretraining seed
                h.groupby(["k", "pretrain_seed", "units"]).balanced_accuracy.mean()
                .groupby(["k", "pretrain_seed"]).mean().unstack("k")
            )  # fmt: skip
            cells = [f"{per[k].mean():.3f} ± {per[k].std(ddof=1):.3f}" for k in ks]
            means[recipe] = per[ks].mean(axis=1).mean()
            lines.append(
                f"| {budget:,} | {recipe} | " + " | ".join(cells) + f" | {means[recipe]:.3f} |"
            )
        fixed = {r: m for r, m in means.items() if r != "auto"}
        best = max(fixed, key=fixed.get)
        ok = means["auto"] >= fixed[best] - 0.005
        verdict.append(
            f"- {budget:,} steps: auto {means['auto']:.3f} against the best fixed recipe, "
            f"{best}, {fixed[best]:.3f}: "
            + ("within 0.005 or above." if ok else "below by more than 0.005.")
        )
    return [*lines, "", *verdict, ""]


def write_report(part, results):
    """``few_labels_<part>.md`` and ``.png`` from the CSVs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = joined_rows(part, results)
    s = summary(df)
    tasks = [t for t in DEV_TASKS if t in set(df.task)]
    lines = [
        f"# Few labels on the development tasks, {part} split",
        "",
        "Balanced accuracy. Rows and rule: docs/benchmarks/few_labels.rst; commands: "
        f"few_labels_{part}.commands (this script's rows) and dev_tasks_{part}.commands "
        "(the floors and probes over a shipped, random or no encoder). Cells: mean ± std "
        "over the distinct labelled sets (with one set, over the seeds); pretrained rows "
        "average their pretraining seeds first. Seconds: the median fit and predict of this "
        "script's rows, pretraining included, on one torch thread (the reference rows' "
        "features were computed once per task, so a time per fit is not theirs to give).",
        "",
        "## One labelled unit (k = 1)",
        "",
        "| row | " + " | ".join(tasks) + " | mean over tasks | seconds |",
        "|---|" + "---|" * (len(tasks) + 2),
        *lowest_k_table(s, tasks),
        "",
    ]
    complete = all(
        set(tasks) <= set(s[(s.row == ROW_NAMES[m]) & (s.k == "1")].task)
        for m in ("pars in-domain[1000]", "pars in-domain[3000]")
    )
    if part == "selection" and complete and set(tasks) == set(DEV_TASKS):
        lines += decision(s, tasks)
        recipes_csv = results / "few_labels_selection_recipes.csv"
        if recipes_csv.exists():
            lines += recipe_table(pd.read_csv(recipes_csv, dtype={"k": str, "units": str}))
    eeg = s[s.task == "eegmat-arithmetic"]
    ks = sorted(eeg.k.unique(), key=lambda k: (k == "all", int(k) if k != "all" else 0))
    lines += [
        "## EEGMAT, more labelled subjects",
        "",
        "| row | " + " | ".join(f"k = {k}" for k in ks) + " |",
        "|---|" + "---|" * len(ks),
    ]
    for row, g in eeg.groupby("row", sort=False):
        g = g.set_index("k")
        cells = [
            f"{g.loc[k, 'mean']:.3f} ± {g.loc[k, 'std_draws']:.3f}" if k in g.index else ""
            for k in ks
        ]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    mi = [t for t in tasks if t.startswith("mi-")]
    if part == "test" and mi:
        full = s[s.task.isin(mi) & (s.k == "all")]
        lines += [
            "",
            "## PhysioNet-MI S001, both blocks labelled (k = all)",
            "",
            "| row | " + " | ".join(mi) + " | mean |",
            "|---|" + "---|" * (len(mi) + 1),
        ]
        for row, g in full.groupby("row", sort=False):
            g = g.set_index("task")
            if set(mi) <= set(g.index):
                cells = [f"{g.loc[t, 'mean']:.3f} ± {g.loc[t, 'std_draws']:.3f}" for t in mi]
                lines.append(
                    f"| {row} | " + " | ".join(cells) + f" | {g.loc[mi, 'mean'].mean():.3f} |"
                )
    out = results / f"few_labels_{part}"
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")

    encoder = REFERENCE_ENCODER[part]
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 6), gridspec_kw=dict(width_ratios=[1, 1]))
    low = s[s.k == "1"]
    rows = [r for r, g in low.groupby("row", sort=False) if set(tasks) <= set(g.task)]
    means = [low[low.row == r]["mean"].mean() for r in rows]
    order = np.argsort(means)
    colors = [
        "tab:gray"
        if rows[i] in ENCODER_FREE
        else "tab:olive"
        if "random" in rows[i]
        else "tab:blue"
        for i in order
    ]
    a.barh(range(len(rows)), [means[i] for i in order], color=colors)
    for y_pos, i in enumerate(order):
        per_task = low[low.row == rows[i]].set_index("task")["mean"]
        a.plot(per_task.values, [y_pos] * len(per_task), "k.", ms=4)
    a.set_yticks(range(len(rows)), [short(rows[i], encoder) for i in order], fontsize=8)
    a.axvline(0.5, color="k", lw=0.5, ls=":")
    a.set_xlim(0.2, 1.0)
    a.set_xlabel("balanced accuracy at k = 1 (bar: mean over tasks; dots: each task)")
    a.set_title(
        f"{part} split: encoder-free rows grey, PARS encoders blue, a random encoder olive",
        fontsize=9,
    )
    palette = plt.get_cmap("tab20").colors
    for i, (row, g) in enumerate(eeg.groupby("row", sort=False)):
        g = g.set_index("k").reindex(ks).dropna(subset=["mean"])
        b.errorbar(
            [ks.index(k) for k in g.index],
            g["mean"],
            yerr=g["std_draws"],
            marker="osD^v<>ph*"[i % 10],
            color=palette[(2 * i) % 20 + (2 * i) // 20],
            capsize=2,
            label=short(row, encoder),
            ls="--" if row in ENCODER_FREE else "-",
        )
    b.set_xticks(range(len(ks)), [f"k = {k}" for k in ks])
    b.set_ylabel("balanced accuracy")
    b.set_title("EEGMAT: labelled subjects (dashed: encoder-free)", fontsize=9)
    b.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
