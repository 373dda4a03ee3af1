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
:func:`~braindecode_pars.features.band_power_pipeline` and
:func:`~braindecode_pars.features.riemann_pipeline` (one block, standardised, ``C = 1``).
``probe[BLOCKS, C]`` is the library's probe (:func:`braindecode_pars.features.recipe.fit_blocks`
on the raw features of :func:`braindecode_pars.features.blocks.block_features`) with the
blocks ``enc`` (the encoder's
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
(balanced accuracy, :func:`braindecode_pars.features.recipe.compare_recipes`), else 1.
**C in a row's name is in the units the rows were recorded in**: each block scaled to
a total variance of 1. The library now scales each block to ``P / B`` (``P`` features
over ``B`` blocks, so that its C means what it means over standardised features), so a
row fits the library's probe with ``C * B / P``, the same fit (:func:`library_c`). A
third field ``aligned`` (``probe[enc+bp+ts, 100, aligned]``) aligns each unit
(subject or block), labelled or scored, on its own windows first
(``PARSProbe(align="groups")``'s recipe);
``probe[enc|bp+ts, C]`` is late fusion: one logistic regression on each part between
``|`` (each block scaled as in the probe), their class probabilities averaged;
``floor (band power, aligned)`` and ``floor (tangent space, aligned)`` are the floors
so aligned (the floor a task's test table compares with stays the better of the two
unaligned floors on the selection split). Every block's raw features
are a function of their window alone, so the benchmark computes them once per task and
fits the rest per draw, as ``PARSProbe`` does within one fit. The deep rows fit the
estimators themselves: ``deep pars`` is ``PARSClassifier(encoder=...)`` with its
default head, the probe (``PARSProbe()`` at its current defaults; ``deep pars`` rows
recorded before issue 46 are ``probe[encstd+bp+ts, 100]``, and those recorded before
the default readout changed ``probe[enc+bp+ts, 100]``); ``deep pars, earlier
defaults`` is ``PARSClassifier(encoder=..., head=PARSFineTuner(strategy="frozen",
...))``, the trained spatial head over the frozen
encoder on half-window crops of windows of 10 s or more, at lr 1e-3 (the defaults
before the probe); ``deep scratch`` is ``PARSFineTuner()``, a new encoder of the same
size and its head, every weight trained on whole windows, at the fine-tuner's current
settings. A deep row may set its head's parameters over its own: ``deep scratch[lr=3e-4,
max_epochs=80]``, ``deep pars[align="groups"]`` (the names the rows had before the
estimators were composed, ``probe_align`` and ``probe_C``, are read as ``align`` and
``C``).

Usage::

    python -m benchmarks.bench_dev_tasks --part selection \
        --encoder benchmarks/encoders/pars-selection --out benchmarks/results/dev_tasks_selection
"""

from __future__ import annotations

import argparse
import ast
import inspect
import logging
import re
import shlex
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks.lib.dev_probe import (
    FLOORS,
    READOUT_BLOCKS,
    features,
    fit_probe_row,
    random_block_seed,
    requested_blocks,
)
from benchmarks.lib.dev_tasks import (
    DEV_TASKS,
    draw_summary,
    load_task,
    lowest_k,
    split,
)
from benchmarks.lib.encoders import benchmark_encoder
from benchmarks.lib.measure import append_score, command_line, machine, table_head
from braindecode_pars.demo.low_label import scratch_classifier
from braindecode_pars.hub.folders import load_encoder

logger = logging.getLogger("bench_dev_tasks")

COLUMNS = ("task", "part", "method", "k", "seed", "units", "balanced_accuracy", "kappa", "seconds")


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
        return scratch_classifier(load_encoder(encoder).config.asdict(), **common, **overrides)
    raise ValueError(f"Unknown method {method!r}; deep rows are {DEEP_METHODS}.")


def fit_deep(method, encoder, X, y, train, test, units, sfreq, seed):
    clf = deep_classifier(method, encoder, X, sfreq, seed)
    clf.fit(X[train], y[train], groups=units[train])
    if "groups" in inspect.signature(clf.predict).parameters:
        return clf.predict(X[test], groups=units[test])
    return clf.predict(X[test])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("selection", "test"), required=True)
    parser.add_argument("--encoder",
        help="shipped name or folder (with --report-only: read from the .commands file's "
        "last command when left out)")  # fmt: skip
    parser.add_argument("--tasks", nargs="+", default=list(DEV_TASKS))
    parser.add_argument("--ks", nargs="+", default=["1", "2", "4", "all"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+", default=[])
    parser.add_argument("--deep-ks", nargs="+", default=["1"], help="k of the deep rows")
    parser.add_argument("--out", type=Path, required=True, help="prefix of the .csv/.md")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--selection-csv", type=Path,
        default=Path(__file__).parent / "results" / "dev_tasks_selection.csv",
        help="with --part test: the selection run whose floors choose each task's floor "
        "(the floors do not depend on the encoder)")  # fmt: skip
    parser.add_argument("--report-only", action="store_true",
        help="write the tables and figure from the CSV")  # fmt: skip
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
    benchmark_encoder(args.encoder)
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
        f.write(command_line(__spec__.name) + "\n")
    for name in args.tasks:
        X, y, units, pool, scored, sfreq = load_task(name, args.part)
        blocks = features(X, sfreq, args.encoder, rand_seeds, readouts)
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
                    if method in FLOORS or method.startswith("probe["):
                        pred = fit_probe_row(method, blocks, y, train, test, units, seed)
                    elif method.startswith("deep"):
                        pred = fit_deep(method, args.encoder, X, y, train, test, units, sfreq, seed)
                    else:
                        raise ValueError(f"Unknown method {method!r}.")
                    units_ = " ".join(map(str, labelled))
                    row = append_score(
                        csv, COLUMNS, y[test], pred, task=name, part=args.part, method=method,
                        k=k, seed=seed, units=units_, seconds=time.perf_counter() - start,
                    )  # fmt: skip
                    logger.info(
                        "%s %s k=%s seed=%d: %.3f", name, method, k, seed, row["balanced_accuracy"]
                    )
    write_report(pd.read_csv(csv), args)


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
        *table_head("method", "seeds", *tasks, "mean over tasks", "range"),
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


if __name__ == "__main__":
    main()
