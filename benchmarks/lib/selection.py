"""Choosing among pretraining configurations by a rule written before their runs
(``bench_patch_density``; ``bench_normalization`` until it retired): the probe rows of
each encoder and of the references on the development tasks' splits at one labelled
unit, their score per task, and the rule's comparison of configurations over pretraining seeds."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import balanced_accuracy_score

from benchmarks.lib.dev_probe import fit_probe_row
from benchmarks.lib.dev_tasks import DEV_TASKS, labelled_units, load_task, part_units, split
from braindecode_pars.features.blocks import block_features
from braindecode_pars.features.recipe import ProbeRecipe
from braindecode_pars.hub.folders import load_encoder
from braindecode_pars.models.encoder import PatchEncoder

logger = logging.getLogger("benchmarks.selection")

#: The columns of a rows file.
COLUMNS = ("encoder", "task", "method", "draw", "balanced_accuracy")
#: The labelled draws of every probe row.
DRAWS = (0, 1, 2, 3, 4)
#: The rows without a pretrained encoder: the probe over band power and covariances,
#: and the same over a random encoder of the small size.
REFERENCE_METHODS = ("probe[bp+ts, 100]", "probe[rand+bp+ts, 100]")


#: Every row's encoder readout, the default when the rows began (non-overlapping patches).
ROWS_READOUT = {"patch_stride_seconds": 1.0}


def evaluate(
    names, csv, folder, methods, part="selection", tasks=None, load=None,
    references=REFERENCE_METHODS,
):  # fmt: skip
    """The probe rows ``methods`` of every encoder ``names`` (its folder ``folder(name)``)
    and the rows ``references`` of the encoder "reference" on the ``part`` splits
    ("selection" or "test") at one labelled unit, appended to ``csv`` as they finish
    (rows already there are kept); ``tasks`` and ``load`` default to the development
    tasks and their loader."""
    tasks = DEV_TASKS if tasks is None else tasks
    load = load_task if load is None else load
    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=COLUMNS)
    key = set(zip(done.encoder, done.task, done.method, done.draw, strict=True))
    for task in tasks:
        X, y, units, pool, scored, sfreq = load(task, part)
        blocks = None
        for name in ["reference", *names]:
            wanted = references if name == "reference" else methods
            if all((name, task, m, d) in key for m in wanted for d in DRAWS):
                continue
            if blocks is None:
                torch.manual_seed(0)
                rand = PatchEncoder(sfreq=100.0, emb_dim=64, depth=4, n_heads=4, ff_dim=128)
                every = ProbeRecipe(("encoder", "bandpower", "tangentspace"), **ROWS_READOUT)
                raw = block_features(X, every, sfreq=sfreq, encoder=rand)[0]
                blocks = {"rand": raw["encoder"], "bp": raw["bandpower"], "ts": raw["tangentspace"]}
            if name != "reference":
                encoder = load_encoder(folder(name))
                recipe = ProbeRecipe(("encoder",), **ROWS_READOUT)
                enc = block_features(X, recipe, sfreq=sfreq, encoder=encoder)
                blocks["enc"] = enc[0]["encoder"]
            rows = probe_rows(name, task, blocks, y, units, pool, scored, {m: m for m in wanted})
            append_rows(csv, rows)
            logger.info("%s %s done", task, name)
    return pd.read_csv(csv)


def probe_rows(name, task, blocks, y, units, pool, scored, methods):
    """The rows of encoder ``name`` on ``task`` at one labelled unit, draw by draw:
    ``methods`` maps each row's name to the probe row fitted (:func:`fit_probe_row`) on
    ``blocks``."""
    rows = []
    for draw in DRAWS:
        train, test, _ = split(units, pool, scored, "1", draw)
        for row, method in methods.items():
            pred = fit_probe_row(method, blocks, y, train, test, units, draw)
            score = balanced_accuracy_score(y[test], pred)
            rows.append(dict(encoder=name, task=task, method=row, draw=draw,
                             balanced_accuracy=score))  # fmt: skip
    return rows


def append_rows(csv, rows):
    """Append ``rows`` (of :data:`COLUMNS`) to the rows file ``csv``."""
    pd.DataFrame(rows, columns=COLUMNS).to_csv(csv, mode="a", header=not csv.exists(), index=False)


def per_task(scores, part="selection"):
    """Balanced accuracy per (encoder, method, task): the mean over the task's distinct
    labelled sets (the MI tasks' five draws hold two)."""
    scores = scores.assign(
        units=[
            " ".join(map(str, labelled_units(*part_units(t, part), "1", d)))
            for t, d in zip(scores.task, scores.draw, strict=True)
        ]
    )
    per_set = scores.groupby(["encoder", "method", "task", "units"]).balanced_accuracy.mean()
    return per_set.groupby(["encoder", "method", "task"]).mean()


def choose(mode_scores, baseline, n_seeds):
    """The rule: ``mode_scores`` ``{mode: [score of each seed]}`` -> (chosen mode, table of
    mean, spread and seeds). A mode is chosen over ``baseline`` only if its mean exceeds
    the baseline's by more than the larger of the two spreads (standard deviations over
    seeds); if several do, the highest. Modes without all their ``n_seeds`` seeds are
    reported, never chosen."""
    table = {m: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else np.nan, len(v))
             for m, v in mode_scores.items()}  # fmt: skip
    base_mean, base_std, base_n = table[baseline]
    winners = []
    for mode, (mean, std, n) in table.items():
        if mode == baseline or n < n_seeds or base_n < n_seeds:
            continue
        if mean - base_mean > max(std, base_std):
            winners.append((mean, mode))
    return (max(winners)[1] if winners else baseline), table


def best_margin(scores, base_scores, n_seeds, step=0.002):
    """How far a mode missing seeds could at best clear the rule's bar over the baseline:
    the largest of mean - baseline's mean - larger spread over every score (0 to 1) of
    its missing seeds. Negative: no missing score lets it be chosen. The margin is
    concave in them, so a grid of ``step`` misses its maximum by less than ``step``."""
    axes = [np.arange(0, 1 + step, step)] * (n_seeds - len(scores))
    grid = np.stack(np.meshgrid(*axes), -1).reshape(-1, len(axes)) if axes else np.zeros((1, 0))
    full = np.hstack([np.tile(scores, (len(grid), 1)), grid])
    spread = np.maximum(full.std(1, ddof=1), np.std(base_scores, ddof=1))
    return float((full.mean(1) - np.mean(base_scores) - spread).max())
