"""Few labels on the development tasks: the floors, linear probes of an encoder, and
``PARSClassifier``, on a task's selection split or its test split.

Splits (``lib/dev_tasks.py``):

- ``eegmat-arithmetic``: ``--part selection`` draws k labelled subjects from the 12
  pool subjects and scores the 12 selection subjects; ``--part test`` draws from the
  24 training subjects (pool and selection) and scores the 12 test subjects.
- ``mi-*`` (PhysioNet-MI S001, one subject): ``selection`` labels one of blocks 1
  and 2 and scores the other (draw ``s`` labels block ``1 + s % 2``); ``test`` labels
  k of blocks 1 and 2 and scores block 3.

k = "all" labels every unit the part offers. Each row is appended to the CSV as it
finishes (resumable); the command is recorded beside it, the tables and figure are
written from the CSV.

Rows. ``floor (band power)`` and ``floor (tangent space)`` are
:func:`~braindecode_pars.floor.band_power_pipeline` and
:func:`~braindecode_pars.floor.riemann_pipeline`. ``probe[BLOCKS, C]`` is
:func:`~braindecode_pars.probe.probe_pipeline` with the blocks ``enc`` (the encoder's
features read as they were when the rows were first recorded,
``EncoderFeatures(readout="mean")``: each channel's tokens averaged over patches),
``rand`` (the same architecture, randomly initialised, read the same way: the recipe
without pretraining; ``rand1``, ``rand2``, ... other initialisations, seeds 1, 2, ...,
for the spread over them), ``encstd`` and ``encblocks`` (the encoder read otherwise:
``readout="mean+std"``, the mean and standard deviation of the tokens over patches, the
library's default since the selection rows of these blocks, and ``readout="blocks"``,
every block's mean token; computed only for rows that name them), ``bp`` (log band
power), ``ts`` (tangent space), and ``C`` a number or ``cv``: chosen among 0.1, 1, 10,
100 by leave-one-group-out over the labelled units when there are at least two
(balanced accuracy), else 1; a third field ``aligned``
(``probe[enc+bp+ts, 100, aligned]``) aligns each unit (subject or block), labelled
or scored, on its own windows first, as :class:`~braindecode_pars.probe.AlignedProbe`
does (``tests/test_bench_dev_tasks.py`` checks the two agree);
``probe[enc|bp+ts, C]`` is late fusion: one logistic regression on each part between
``|`` (each block scaled as in the probe), their class probabilities averaged;
``floor (band power, aligned)`` and ``floor (tangent space, aligned)`` are the floors
so aligned (the floor a task's test table compares with stays the better of the two
unaligned floors on the selection split). Every feature except the
tangent space is a function of its window alone, so the benchmark computes it once
per window and fits the scalers and the logistic regression per draw; the result is
the pipeline's (``tests/test_probe.py`` checks the two agree). The deep rows fit the
estimators themselves: ``deep pars`` is ``PARSClassifier(encoder=...)`` with its
default head, the probe (``PARSProbe()``: ``probe[encstd+bp+ts, 100]``, so the two
rows agree; ``deep pars`` rows recorded before the default readout changed are
``probe[enc+bp+ts, 100]``); ``deep pars, earlier defaults`` is ``PARSClassifier(encoder=..., head=
PARSFineTuner(strategy="frozen", ...))``, the trained spatial head over the frozen
encoder on half-window crops of windows of 10 s or more, at lr 1e-3 (the defaults
before the probe); ``deep scratch`` is ``PARSFineTuner()``, a new encoder of the same
size and its head, every weight trained on whole windows, at the fine-tuner's current
settings. A deep row may set its head's parameters over its own: ``deep scratch[lr=3e-4,
max_epochs=80]``, ``deep pars[align="groups"]`` (the names the rows had before the
estimators were composed, ``probe_align`` and ``probe_C``, are read as ``align`` and
``C``).

Usage::

    python benchmarks/bench_dev_tasks.py --part selection \
        --encoder benchmarks/encoders/pars-selection --out benchmarks/results/dev_tasks_selection
"""

from __future__ import annotations

import argparse
import ast
import inspect
import logging
import re
import shlex
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from _measure import append_score, machine
from _pretext import SHARED
from lib.dev_tasks import DEV_TASKS, MI_SELECTION_BLOCKS, MI_TEST_BLOCKS
from pyriemann.estimation import Covariances
from sklearn.metrics import balanced_accuracy_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from braindecode_pars.align import align_covariances, align_features
from braindecode_pars.datasets import load_eegmat, load_physionet_mi
from braindecode_pars.datasets.adapters import read_windows
from braindecode_pars.datasets.eegmat import (
    EEGMAT_POOL_SUBJECTS,
    EEGMAT_SELECTION_SUBJECTS,
    EEGMAT_TEST_SUBJECTS,
    EEGMAT_TRAIN_SUBJECTS,
)
from braindecode_pars.datasets.physionet_mi import run_block
from braindecode_pars.experiments.classifiers import scratch_classifier
from braindecode_pars.experiments.low_label import draw_subjects
from braindecode_pars.floor import BandPowerFeatures, _logistic
from braindecode_pars.hub import load_encoder
from braindecode_pars.models.encoder import PatchEncoder, size_of
from braindecode_pars.probe import BlockScaler, EncoderFeatures, _block_scaling

logger = logging.getLogger("bench_dev_tasks")

C_GRID = (0.1, 1.0, 10.0, 100.0)
COLUMNS = ("task", "part", "method", "k", "seed", "units", "balanced_accuracy", "kappa", "seconds")


def load_task(name, part, sfreq=100.0):
    """Windows, labels, units and the (pool, scored) units of a task's part."""
    task = DEV_TASKS[name]
    if name == "eegmat-arithmetic":
        pool, scored = part_units(name, part)
        windows = load_eegmat(SHARED / "eegmat", sorted(pool + scored), sfreq=sfreq)
        units = windows.get_metadata()["subject"].to_numpy().astype(int)
    else:
        blocks = (
            MI_SELECTION_BLOCKS if part == "selection" else MI_SELECTION_BLOCKS + MI_TEST_BLOCKS
        )
        runs = [r for r in task.runs if run_block(r) in blocks]
        windows = load_physionet_mi(runs=runs, window_seconds=task.window_seconds, sfreq=sfreq)
        units = windows.get_metadata()["block"].to_numpy().astype(int)
        pool, scored = part_units(name, part)
    data = read_windows(windows)
    return data.X.astype(np.float32), data.y, units, tuple(pool), scored, float(data.sfreq)


def part_units(name, part):
    """The (pool, scored) units of a task's part: the labelled units are drawn from the
    pool; ``scored`` None: the pool's other units are scored (one-subject task,
    selection part)."""
    if name == "eegmat-arithmetic":
        if part == "selection":
            return EEGMAT_POOL_SUBJECTS, EEGMAT_SELECTION_SUBJECTS
        return EEGMAT_TRAIN_SUBJECTS, EEGMAT_TEST_SUBJECTS
    return (
        (MI_SELECTION_BLOCKS, None)
        if part == "selection"
        else (MI_SELECTION_BLOCKS, MI_TEST_BLOCKS)
    )


def labelled_units(pool, scored, k, seed):
    """The labelled units of draw ``seed`` (see :func:`split`)."""
    if scored is None:  # one-subject task, selection part: one block labelled, the other scored
        return [pool[seed % len(pool)]]
    k = len(pool) if k == "all" else int(k)
    return draw_subjects(pool, k, seed, spread=True)


def split(units, pool, scored, k, seed):
    """Indices of the labelled and the scored windows of a draw, and the labelled units."""
    labelled = labelled_units(pool, scored, k, seed)
    if scored is None:
        scored = [u for u in pool if u not in labelled]
    train = np.flatnonzero(np.isin(units, labelled))
    test = np.flatnonzero(np.isin(units, scored))
    return train, test, labelled


def parse_probe(method):
    """``probe[enc+bp, cv]`` -> ({"enc", "bp"}, "cv", False); ``probe[enc+bp, 100,
    aligned]`` -> ({"enc", "bp"}, 100.0, True)."""
    inner = method[len("probe[") : -1]
    parts = [s.strip() for s in inner.split(",")]
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "aligned"):
        raise ValueError(
            f"Unknown probe row {method!r}: probe[BLOCKS, C] or probe[BLOCKS, C, aligned]."
        )
    blocks, C = parts[:2]
    return set(re.split(r"[+|]", blocks)), (C if C == "cv" else float(C)), len(parts) == 3


def fusion_parts(method):
    """The parts of a late-fusion probe row, in order: ``probe[enc|bp+ts, 100]`` ->
    [["enc"], ["bp", "ts"]]; None for a row without ``|`` (one regression)."""
    blocks = method[len("probe[") :].split(",")[0].strip()
    if "|" not in blocks:
        return None
    return [block_order(set(part.split("+"))) for part in blocks.split("|")]


#: The floors, by row name: (block, aligned within units).
FLOORS = {
    "floor (band power)": ("bp", False),
    "floor (tangent space)": ("ts", False),
    "floor (band power, aligned)": ("bp", True),
    "floor (tangent space, aligned)": ("ts", True),
}


def align_blocks(blocks, units):
    """Each block with every unit's windows aligned on themselves, as
    :class:`~braindecode_pars.align.AlignedProbe` does (features standardised,
    covariances re-centred). A unit's alignment reads its own windows only, so it is
    computed once per task and serves every draw."""
    return {
        name: ((align_covariances if kind == "covariances" else align_features)(F, units), kind)
        for name, (F, kind) in blocks.items()
    }


def scaled_blocks(blocks, train, test, scaler=BlockScaler):
    """The blocks' training and scored features, each block scaled on the training
    windows (covariances through the tangent space at the training windows' mean
    first), side by side: (X_train, X_test)."""
    tr, te = [], []
    for F, kind in blocks.values():
        steps = _block_scaling(kind)  # the probe's own: the tangent space, BlockScaler
        scaling = make_pipeline(*steps[:-1], scaler()).fit(F[train])
        tr.append(scaling.transform(F[train]))
        te.append(scaling.transform(F[test]))
    return np.hstack(tr), np.hstack(te)


def fit_blocks(blocks, train, test, C, seed, scaler=BlockScaler):
    """Scale each feature block on the training windows (the tangent space's reference
    point too), fit the regression, predict the scored windows. The floors are one
    block with a ``StandardScaler`` and C = 1; aligned rows pass blocks through
    :func:`align_blocks` first."""
    Xtr, Xte = scaled_blocks(blocks, train, test, scaler)
    return logistic(C, seed).fit(Xtr, _y[train]).predict(Xte)


def fit_fused(parts, train, test, C, seed):
    """Late fusion: one class-balanced logistic regression per part (a dict of blocks,
    each scaled as in :func:`fit_blocks`), the class probabilities of the scored
    windows averaged over the parts, the most probable class predicted."""
    proba = 0.0
    for blocks in parts:
        Xtr, Xte = scaled_blocks(blocks, train, test)
        model = logistic(C, seed).fit(Xtr, _y[train])
        proba = proba + model.predict_proba(Xte) / len(parts)
    return model.classes_[np.argmax(proba, axis=1)]


def inner_c(blocks, train, units, seed):
    """C of C_GRID with the best leave-one-group-out balanced accuracy over the
    labelled units; 1 with a single unit."""
    groups = np.unique(units[train])
    if len(groups) < 2:
        return 1.0
    scores = []
    for C in C_GRID:
        fold = []
        for g in groups:
            tr, te = train[units[train] != g], train[units[train] == g]
            if len(np.unique(_y[tr])) < 2:
                continue
            fold.append(balanced_accuracy_score(_y[te], fit_blocks(blocks, tr, te, C, seed)))
        scores.append(np.mean(fold) if fold else -np.inf)
    return C_GRID[int(np.argmax(scores))]


_y = None  # the labels of the current task (set in main)


#: The deep rows: the estimator's default head over the encoder (the probe), the
#: defaults it had before the probe (a trained spatial head over the frozen encoder, on
#: random crops of half the window for windows of 10 s or more), and scratch (a new
#: encoder of the same size, every weight trained, whole windows).
DEEP_METHODS = ("deep pars", "deep pars, earlier defaults", "deep scratch")

#: The names deep rows gave the probe's parameters before the estimators were
#: composed (``deep pars[probe_align="groups"]``), and the ``PARSProbe`` parameters
#: they are.
PROBE_ALIASES = {"probe_align": "align", "probe_C": "C"}


def parse_deep(method):
    """``deep scratch[lr=3e-4, max_epochs=80]`` -> ("deep scratch", {"lr": 3e-4, ...}):
    a deep row with parameters of its head set over the row's own."""
    if not method.endswith("]"):
        return method, {}
    base, inner = method[:-1].split("[", 1)
    overrides = {}
    for item in inner.split(","):
        key, value = (part.strip() for part in item.split("=", 1))
        overrides[key] = ast.literal_eval(value)
    return base.strip(), overrides


def deep_classifier(method, encoder, X, sfreq, seed):
    """The estimator of a deep row (see :data:`DEEP_METHODS`), seeded with ``seed``."""
    from braindecode_pars import PARSClassifier, PARSFineTuner, PARSProbe

    method, overrides = parse_deep(method)
    common = dict(sfreq=sfreq, random_state=seed, verbose=0)
    if method == "deep pars":
        head = PARSProbe(**{PROBE_ALIASES.get(k, k): v for k, v in overrides.items()})
        return PARSClassifier(encoder=encoder, head=head, **common)
    if method == "deep pars, earlier defaults":
        long = X.shape[-1] / sfreq >= 10.0 - 1e-6
        crop = X.shape[-1] / 2 / sfreq if long else None
        head = dict(strategy="frozen", crop_seconds=crop, lr=1e-3, verbose=0)
        head = PARSFineTuner(**{**head, **overrides})
        return PARSClassifier(encoder=encoder, head=head, **common)
    if method == "deep scratch":
        return scratch_classifier(size_of(load_encoder(encoder)), **common, **overrides)
    raise ValueError(f"Unknown method {method!r}; deep rows are {DEEP_METHODS}.")


def fit_deep(method, encoder, X, train, test, units, sfreq, seed):
    clf = deep_classifier(method, encoder, X, sfreq, seed)
    clf.fit(X[train], _y[train], groups=units[train])
    if "groups" in inspect.signature(clf.predict).parameters:
        return clf.predict(X[test], groups=units[test])
    return clf.predict(X[test])


def random_block_seed(name):
    """The initialisation seed of a random-encoder block: ``rand`` 0, ``rand3`` 3; None
    for any other block."""
    if name == "rand":
        return 0
    if name.startswith("rand") and name[4:].isdigit():
        return int(name[4:])
    return None


#: The blocks that read the encoder otherwise than its mean token, and their
#: ``EncoderFeatures`` readout.
READOUT_BLOCKS = {"encstd": "mean+std", "encblocks": "blocks"}


def block_order(names):
    """Blocks in the order they are stacked: the encoder (its mean token, then the
    other readouts), random encoders by seed, band power, tangent space."""
    rand = sorted((n for n in names if random_block_seed(n) is not None), key=random_block_seed)
    return [n for n in ("enc", *READOUT_BLOCKS, *rand, "bp", "ts") if n in names]


def features(X, sfreq, encoder, rand_seeds=(0,), readouts=()):
    """The per-window features: encoder, the encoder's other readouts named in
    ``readouts`` (of :data:`READOUT_BLOCKS`), random encoders (one block per seed of
    ``rand_seeds``: ``rand`` for seed 0, ``rand<seed>`` for the others), band power,
    covariances."""
    enc = load_encoder(encoder)
    blocks = {
        "enc": (EncoderFeatures(enc, sfreq=sfreq, readout="mean").fit_transform(X), "features")
    }
    for name in readouts:
        step = EncoderFeatures(enc, sfreq=sfreq, readout=READOUT_BLOCKS[name])
        blocks[name] = (step.fit_transform(X), "features")
    for seed in rand_seeds:
        torch.manual_seed(seed)
        rand = PatchEncoder(sfreq=enc.sfreq, **size_of(enc))
        name = "rand" if seed == 0 else f"rand{seed}"
        step = EncoderFeatures(rand, sfreq=sfreq, readout="mean")
        blocks[name] = (step.fit_transform(X), "features")
    blocks["bp"] = (BandPowerFeatures(sfreq=sfreq).fit_transform(X), "features")
    blocks["ts"] = (Covariances(estimator="oas").fit_transform(X.astype(np.float64)), "covariances")
    return blocks


def requested_blocks(methods):
    """Every block name the probe rows of ``methods`` use; unknown names are refused."""
    names = set()
    for method in methods:
        if method.startswith("probe["):
            names |= parse_probe(method)[0]
    known = ("enc", *READOUT_BLOCKS, "bp", "ts")
    unknown = sorted(n for n in names if n not in known and random_block_seed(n) is None)
    if unknown:
        raise ValueError(
            f"Unknown probe block(s) {unknown}: blocks are enc, encstd, encblocks, rand "
            "(rand1, rand2, ...: other random initialisations), bp and ts."
        )
    return names


def main(argv=None):
    global _y
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("selection", "test"), required=True)
    parser.add_argument(
        "--encoder",
        help="shipped name or folder (with --report-only: read from the .commands file's "
        "last command when left out)",
    )
    parser.add_argument("--tasks", nargs="+", default=list(DEV_TASKS))
    parser.add_argument("--ks", nargs="+", default=["1", "2", "4", "all"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+", default=[])
    parser.add_argument("--deep-ks", nargs="+", default=["1"], help="k of the deep rows")
    parser.add_argument("--out", type=Path, required=True, help="prefix of the .csv/.md/.png")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--selection-csv",
        type=Path,
        default=Path(__file__).parent / "results" / "dev_tasks_selection.csv",
        help="with --part test: the selection run whose floors choose each task's floor "
        "(the floors do not depend on the encoder)",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="write the tables and figure from the CSV"
    )
    args = parser.parse_args(argv)
    if args.part == "selection":
        args.selection_csv = None
    if args.report_only:
        if args.encoder is None:
            args.encoder = recorded_encoder(args.out.with_suffix(".commands"))
        write_report(pd.read_csv(args.out.with_suffix(".csv")), args)
        return
    if args.encoder is None:
        parser.error("--encoder is required unless --report-only is given")
    if not args.methods:
        parser.error("--methods is required unless --report-only is given")
    try:
        names = requested_blocks(args.methods)
    except ValueError as err:
        parser.error(str(err))
    rand_seeds = sorted({random_block_seed(n) for n in names} - {None})  # those rows name
    readouts = [n for n in READOUT_BLOCKS if n in names]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    csv = args.out.with_suffix(".csv")
    csv.parent.mkdir(parents=True, exist_ok=True)
    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=COLUMNS)
    if len(done):
        try:
            check_resume_encoder(args.out.with_suffix(".commands"), args.encoder)
        except ValueError as err:
            parser.error(str(err))
    key = set(zip(done.task, done.method, done.k.astype(str), done.seed, strict=True))
    with open(args.out.with_suffix(".commands"), "a") as f:
        f.write(shlex.join(["python", *sys.argv]) + "\n")
    for name in args.tasks:
        X, _y, units, pool, scored, sfreq = load_task(name, args.part)
        blocks = features(X, sfreq, args.encoder, rand_seeds, readouts)
        aligned_blocks = None  # align_blocks(blocks, units), made when a row needs it
        # k up to the pool's size; "all" only where it is not already one of the ks
        ks = [k for k in args.ks if k == "all" or int(k) <= len(pool)]
        if str(len(pool)) in ks:
            ks = [k for k in ks if k != "all"]
        ks = ["1"] if scored is None else ks
        for k in ks:
            for seed in args.seeds:
                train, test, labelled = split(units, pool, scored, k, seed)
                for method in args.methods:
                    if (name, method, str(k), seed) in key:
                        continue
                    if method.startswith("deep") and k not in args.deep_ks:
                        continue
                    start = time.perf_counter()
                    if method in FLOORS:
                        block, aligned = FLOORS[method]
                        names, C, scaler = {block}, 1.0, StandardScaler
                    elif method.startswith("probe["):
                        names, C, aligned = parse_probe(method)
                        scaler = BlockScaler
                    if method in FLOORS or method.startswith("probe["):
                        if aligned and aligned_blocks is None:
                            aligned_blocks = align_blocks(blocks, units)
                        source = aligned_blocks if aligned else blocks
                        chosen = {b: source[b] for b in block_order(names)}
                        fused = fusion_parts(method) if method.startswith("probe[") else None
                        if fused is not None:
                            if C == "cv":
                                raise ValueError(f"{method!r}: late fusion takes a fixed C.")
                            parts = [{b: source[b] for b in part} for part in fused]
                            pred = fit_fused(parts, train, test, C, seed)
                        else:
                            if C == "cv":
                                C = inner_c(chosen, train, units, seed)
                            pred = fit_blocks(chosen, train, test, C, seed, scaler)
                    elif method.startswith("deep"):
                        pred = fit_deep(method, args.encoder, X, train, test, units, sfreq, seed)
                    else:
                        raise ValueError(f"Unknown method {method!r}.")
                    units_ = " ".join(map(str, labelled))
                    row = append_score(
                        csv, COLUMNS, _y[test], pred, task=name, part=args.part, method=method,
                        k=k, seed=seed, units=units_, seconds=time.perf_counter() - start,
                    )  # fmt: skip
                    logger.info(
                        "%s %s k=%s seed=%d: %.3f", name, method, k, seed, row["balanced_accuracy"]
                    )
    write_report(pd.read_csv(csv), args)


def draw_summary(df, metric):
    """Mean ± std of ``metric`` per (task, method, k), each distinct labelled set
    weighted once.

    Seeds that draw the same labelled set (PhysioNet-MI has two blocks to label, so its
    five seeds draw two sets, three times and twice) are averaged first; the mean and
    std are then over the distinct sets. With one set (k = all) they are over the seeds
    (the training's own randomness; 0 for the deterministic rows). ``sets`` is the
    number of distinct labelled sets, ``draws`` the number of rows.
    """
    rows = []
    for (task, method, k), g in df.groupby(["task", "method", "k"], sort=False):
        per_set = g.groupby("units")[metric].mean()
        values = per_set if len(per_set) > 1 else g[metric]
        rows.append(
            dict(
                task=task,
                method=method,
                k=k,
                mean=values.mean(),
                std=np.nan_to_num(values.std(ddof=1)) if len(values) > 1 else 0.0,
                sets=len(per_set),
                draws=len(g),
            )
        )
    return pd.DataFrame(rows)


def lowest_k(df, metric):
    """Methods x tasks: ``metric`` at one labelled unit (each distinct labelled set
    weighted once, :func:`draw_summary`), with the "mean over tasks" (blank unless every
    task ran); None when no row has k = 1. ``df``'s ``k`` and ``units`` as strings."""
    s = draw_summary(df[df.k == "1"], metric)
    if s.empty:
        return None
    tasks = [t for t in df.task.unique() if t in set(s.task)]
    low = s.pivot(index="method", columns="task", values="mean")[tasks]
    low["mean over tasks"] = low.mean(axis=1, skipna=False)
    return low


def logistic(C, seed):
    """The probes' and floors' regression (the library's: class-balanced, L2 of inverse
    strength C)."""
    return _logistic(C, seed)


def over_initialisations(low):
    """Markdown lines: rows that differ only in the seed of their random encoder
    (``rand``, ``rand1``, ...), summarised over the seeds, from the lowest-k table
    ``low`` (methods x tasks, with the mean over tasks); nothing when no row has two
    seeds."""
    families = {}
    for method in low.index:
        if method.startswith("probe["):
            family = re.sub(r"\brand\d*\b", "rand*", method)
            if family != method:
                families.setdefault(family, []).append(method)
    families = {f: m for f, m in families.items() if len(m) > 1}
    if not families:
        return []
    tasks = list(low.columns[:-1])
    lines = [
        "## Lowest k, balanced accuracy: random encoders, mean ± std over their initialisations",
        "",
        "Each random-encoder row once per initialisation seed (`rand` is seed 0, "
        "`rand<seed>` the others); per task and for the mean over tasks, the mean ± "
        "std over the seeds, and the range of the mean over tasks.",
        "",
        "| method | seeds | " + " | ".join(tasks) + " | mean over tasks | range |",
        "|---|---|" + "---|" * (len(tasks) + 2),
    ]
    for family, methods in families.items():
        t = low.loc[methods]
        cells = [f"{t[c].mean():.3f} ± {t[c].std(ddof=1):.3f}" for c in [*tasks, "mean over tasks"]]
        spread = t["mean over tasks"]
        lines.append(
            f"| {family} | {len(methods)} | "
            + " | ".join(cells)
            + f" | {spread.min():.3f} - {spread.max():.3f} |"
        )
    return [*lines, ""]


def recorded_encoder(commands):
    """The ``--encoder`` of the last command recorded in a ``.commands`` file."""
    encoder = None
    for line in Path(commands).read_text().splitlines():
        if line.startswith("#"):
            continue
        words = shlex.split(line, comments=True)  # an inline "# ..." note may hold quotes
        if "--encoder" in words:
            encoder = words[words.index("--encoder") + 1]
    if encoder is None:
        raise ValueError(f"No command in {commands} names its --encoder: pass --encoder.")
    return encoder


def check_resume_encoder(commands, encoder):
    """Refuse to resume rows that another encoder made.

    A run resumes by skipping every (task, method, k, seed) already in its CSV, whatever
    encoder made it; so rows are only added to a CSV whose recorded commands name the
    same ``--encoder``.
    """
    commands = Path(commands)
    try:
        recorded = recorded_encoder(commands)
    except (FileNotFoundError, ValueError):
        raise ValueError(
            f"--out already holds rows but {commands} records no --encoder, so they cannot "
            "be told apart from another encoder's: choose another --out."
        ) from None
    if recorded != encoder:
        raise ValueError(
            f"--encoder {encoder!r}: the rows already under this --out were made with "
            f"--encoder {recorded!r} ({commands}); resuming would keep them as this "
            "encoder's. Pass that encoder to resume, or choose another --out."
        )


def chosen_floor(selection_csv):
    """Per task, the floor (band power or tangent space, unaligned: the field's two
    classical decoders) with the higher mean balanced accuracy at k = 1 on the
    selection split (each labelled set weighted once)."""
    sel = pd.read_csv(selection_csv)
    sel["k"] = sel["k"].astype(str)
    floors = ("floor (band power)", "floor (tangent space)")
    s = draw_summary(sel[sel.method.isin(floors) & (sel.k == "1")], "balanced_accuracy")
    return {task: g.sort_values("mean").method.iloc[-1] for task, g in s.groupby("task")}


def with_chosen_floor(df, selection_csv):
    """``df`` with the rows of each task's floor chosen on the selection split copied
    as the method ``floor (chosen on selection)``."""
    choice = chosen_floor(selection_csv)
    picked = df[[choice.get(t) == m for t, m in zip(df.task, df.method, strict=True)]]
    return pd.concat([df, picked.assign(method="floor (chosen on selection)")]), choice


def write_report(df, args):
    df = df.copy()
    df["k"] = df["k"].astype(str)
    df["units"] = df["units"].astype(str)
    choice = None
    if args.selection_csv is not None and args.selection_csv.exists():
        df, choice = with_chosen_floor(df, args.selection_csv)
    lines = [
        f"# Development tasks, {args.part} splits",
        "",
        f"Encoder: `{args.encoder}`. {machine()}",
        "",
    ]
    lines += ["Commands: see the `.commands` file beside this one.", ""]
    lines += [
        "Means and stds weight each distinct labelled set once: seeds that draw the same "
        "set are averaged first (PhysioNet-MI S001 has two blocks to label, so its five "
        "seeds draw two sets). Where only one set exists (k = all) the std is over seeds.",
        "",
    ]
    if choice:
        lines += [
            "`floor (chosen on selection)`: per task, the better floor at k = 1 on "
            f"`{args.selection_csv.name}`: "
            + "; ".join(f"{t}: {m}" for t, m in sorted(choice.items()))
            + ".",
            "",
        ]
    for metric in ("balanced_accuracy", "kappa"):
        g = draw_summary(df, metric)
        lines += [f"## {metric.replace('_', ' ')}, mean ± std over labelled sets", ""]
        for task in df.task.unique():
            t = g[g.task == task]
            ks = list(dict.fromkeys(t.k))
            sets = t.groupby("k", sort=False)[["sets", "draws"]].max()
            lines += [
                f"### {task}",
                "",
                "Labelled sets (rows): "
                + ", ".join(f"k = {k}: {sets.loc[k, 'sets']} ({sets.loc[k, 'draws']})" for k in ks),
                "",
                "| method | " + " | ".join(f"k = {k}" for k in ks) + " |",
            ]
            lines += ["|---|" + "---|" * len(ks)]
            for method in dict.fromkeys(t.method):
                cells = []
                for k in ks:
                    r = t[(t.method == method) & (t.k == k)]
                    cells.append(
                        f"{r['mean'].iloc[0]:.3f} ± {r['std'].iloc[0]:.3f}" if len(r) else ""
                    )
                lines.append(f"| {method} | " + " | ".join(cells) + " |")
            lines.append("")
    # the lowest k of every task, and the mean over tasks
    tables = {}
    for metric in ("balanced_accuracy", "kappa"):
        low = lowest_k(df, metric)
        if low is None:  # no row at one labelled unit
            continue
        tables[metric] = low
        lines += [
            f"## Lowest k (one labelled unit), {metric.replace('_', ' ')}, mean over labelled sets",
            "",
        ]
        lines += [
            "| method | " + " | ".join(low.columns) + " |",
            "|---|" + "---|" * len(low.columns),
        ]
        for method, r in low.sort_values("mean over tasks", ascending=False).iterrows():
            cells = ("" if np.isnan(v) else f"{v:.3f}" for v in r)
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    if "balanced_accuracy" in tables:
        lines += over_initialisations(tables["balanced_accuracy"])
    args.out.with_suffix(".md").write_text("\n".join(lines))
    if "balanced_accuracy" not in tables:  # no row at one labelled unit: no figure
        return
    low = tables["balanced_accuracy"]
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(low) + 1.5))
    order = low.sort_values("mean over tasks")
    ax.barh(order.index, order["mean over tasks"], color="tab:blue")
    for task in low.columns[:-1]:
        ax.scatter(order[task], order.index, s=12, label=task)
    ax.axvline(0.5, color="k", lw=0.5)
    ax.set_xlabel("balanced accuracy, one labelled unit (bars: mean over tasks)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)


if __name__ == "__main__":
    main()
