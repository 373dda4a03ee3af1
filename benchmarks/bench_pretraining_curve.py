"""What more pretraining buys: held-out pretext skill and few-label downstream accuracy
against pretraining steps, corpus and encoder size, and PARS against MAE at equal
wall-clock.

Every encoder of the curve is pretrained on data that no selection or test split of
the development tasks scores (``lib/dev_tasks.py``): the
12 EEGMAT pool subjects, the nine Sleep-EDF segments and, except on the corpus axis's
smaller point, the 129 Muse headband recordings (``store-selection``: 74.6
channel-hours, 82 people; without the headband 40.5 channel-hours, 17 people). Its
pretext skill is measured on whole recordings held out of pretraining (10 %).

Downstream: the selection splits of the four development tasks at one labelled unit
(``bench_dev_tasks.py``'s splits and 5 draws), balanced accuracy, two recipes over
the frozen encoder:

- ``probe[enc, 1]``: a logistic regression on the encoder's features alone (what
  the encoder itself carries);
- ``probe[enc+bp+ts, 100]``: the library's default recipe (``PARSClassifier``'s
  default head, ``PARSProbe``, over a pretrained encoder), encoder features beside
  log band power and the tangent space.

and three reference rows that need no pretraining: ``probe[rand, 1]`` and
``probe[rand+bp+ts, 100]`` (a randomly initialised 64 x 4 encoder), and
``probe[bp+ts, 100]`` (no encoder).

The axes (each run in :data:`RUNS`, its command recorded in the ``.commands`` file):

- steps: PARS 64 x 4 for 1,000, 3,000, 10,000 and 30,000 optimiser steps (batch 64),
  each with its own full learning-rate schedule (warm-up, cosine to 0); the
  30,000-step point is ``benchmarks/encoders/pars-selection``;
- corpus: the 10,000-step run without the headband recordings, same steps;
- size: 128 x 6 (8 heads, ff 256) for as many steps as fit the 10,000-step 64 x 4
  run's wall-clock on this CPU (from a 400-step throughput probe);
- method: MAE 64 x 4 for as many steps as fit the same wall-clock.

Usage::

    python -m benchmarks.bench_pretraining_curve --pretrain   # runs what is missing
    python -m benchmarks.bench_pretraining_curve              # evaluates and reports
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from benchmarks.lib.dev_tasks import DEV_TASKS
from benchmarks.lib.encoders import benchmark_encoder
from benchmarks.lib.measure import machine
from benchmarks.lib.selection import evaluate, per_task
from braindecode_pars.hub.folders import load_encoder
from braindecode_pars.store import store_summary

logger = logging.getLogger("bench_pretraining_curve")

ROOT = Path(__file__).resolve().parents[1]
CLI = "braindecode-pars"
SMALL = "--size small"  # 64 x 4, 4 heads, feed-forward 128
LARGE = "--config benchmarks/configs/encoder_128x6.json"  # 128 x 6, 8 heads, 256
COMMON = "--n-patches 40 --valid-fraction 0.1 --threads 2 --device cpu"
STORES = {
    "store-selection": "--eegmat-subjects pool --muse",
    "store-selection-nomuse": "--eegmat-subjects pool",
}
#: Steps of the equal-wall-clock runs: the 10,000-step 64 x 4 run's minutes times each
#: configuration's steps per minute in a 400-step probe (``probe-*`` runs).
STEPS_128x6 = 3900
STEPS_MAE = 43600

#: name -> (axes, store, pretrain arguments, exported folder or None for
#: results/curve/enc/<name>)
RUNS = {
    "pars-64x4-1000": (("steps",), "store-selection", f"{SMALL} --steps 1000", None),
    "pars-64x4-3000": (("steps",), "store-selection", f"{SMALL} --steps 3000", None),
    "pars-64x4-10000": (
        ("steps", "corpus", "size", "method"),
        "store-selection",
        f"{SMALL} --steps 10000",
        None,
    ),
    "pars-64x4-30000": (
        ("steps",),
        "store-selection",
        f"{SMALL} --steps 30000",
        "benchmarks/encoders/pars-selection",
    ),
    "pars-64x4-10000-nomuse": (
        ("corpus",),
        "store-selection-nomuse",
        f"{SMALL} --steps 10000",
        None,
    ),
    "pars-128x6-equal-time": (("size",), "store-selection", f"{LARGE} --steps {STEPS_128x6}", None),
    "mae-64x4-equal-time": (
        ("method",),
        "store-selection",
        f"--method mae {SMALL} --steps {STEPS_MAE}",
        None,
    ),
}
NOTES = """Notes on reading it:

- The 30,000-step point is the selection encoder
  (`benchmarks/encoders/pars-selection`), run in sittings on one or two threads with
  the CPU shared at times: its minutes do not compare with the other rows'.
- Held-out skill compares along the steps and size/method axes (the same held-out
  recordings). On the corpus axis each run is scored on held-out recordings of its
  own corpus, and the headband recordings are harder to predict: the two skills do
  not compare; the downstream columns do.
- The equal-wall-clock step counts came from 400-step throughput probes (the
  128 x 6 probe with 4 heads, the run with 8, hence its 13.3 minutes against 11.5).
- Downstream noise: the three PhysioNet-MI tasks' selection splits have two distinct
  draws (block 1 labelled and block 2 scored, or the reverse), so the std over the
  5 draws understates how much a row would move with other data; differences of a
  few points between single rows are within what one block of one subject gives.
- Seeds: the 30,000-step run again with pretraining seeds 1 and 2
  (`benchmarks/encoders/pars-selection-seed1`, `-seed2`; the same held-out
  recordings): held-out skill 0.540 and 0.586 against 0.676, the default recipe
  0.505 and 0.548 against 0.579 on these four tasks
  (`benchmarks/results/dev_tasks_selection_seeds.md`). The spread over seeds at one
  budget is as wide as the differences along the steps axis; the three seeds rank
  the same by skill and downstream, but three points show little (`pars-small-v3`,
  trained further, rose in skill and not downstream: below)."""
ENCODER_METHODS = ("probe[enc, 1]", "probe[enc+bp+ts, 100]")
REFERENCE_METHODS = ("probe[rand, 1]", "probe[rand+bp+ts, 100]", "probe[bp+ts, 100]")


def encoder_folder(name):
    exported = RUNS[name][3]
    return benchmark_encoder(ROOT / (exported or f"results/curve/enc/{name}"))


def commands(name):
    """The store, pretraining and export commands of a run."""
    _, store, arguments, exported = RUNS[name]
    out = f"results/curve/{name}"
    return [
        f"{CLI} store --shared-data ../shared/data {STORES[store]} --window-seconds 10 "
        f"--out results/{store}",
        f"{CLI} pretrain --store results/{store} --out {out} {arguments} {COMMON}",
        f"{CLI} export --run {out} --out {exported or f'results/curve/enc/{name}'}",
    ]


def pretrain(names):
    """Build the stores and run the pretraining and export of every missing run, one at
    a time (a stopped run continues when this is run again)."""
    bindir = Path(sys.executable).parent
    for name in names:
        if (encoder_folder(name) / "model.safetensors").is_file():
            continue
        store, run, export = commands(name)
        if not (ROOT / "results" / RUNS[name][1] / "index.npz").is_file():
            subprocess.run(shlex.split(store), cwd=ROOT, check=True, env=_env(bindir))
        for command in (run, export):
            logger.info("%s", command)
            subprocess.run(shlex.split(command), cwd=ROOT, check=True, env=_env(bindir))


def _env(bindir):
    import os

    env = dict(os.environ)
    env["PATH"] = f"{bindir}:{env.get('PATH', '')}"
    return env


def run_facts(name):
    """Steps, wall-clock, held-out skill, corpus and size of an exported run."""
    folder = encoder_folder(name)
    with open(folder / "pretrain_history.json") as f:
        history = json.load(f)
    with open(folder / "run_config.json") as f:
        config = json.load(f)
    # the split is recorded per epoch since it was introduced; the selection encoder's
    # first sitting (epochs 1-86) held out the same recordings but did not record it
    splits = {row.get("valid_split") for row in history} - {None}
    if splits != {"recordings"} or history[-1].get("valid_split") != "recordings":
        raise ValueError(f"{name}: validation split {splits}, not whole recordings")
    encoder = load_encoder(folder)
    summary = store_summary(ROOT / "results" / RUNS[name][1])
    return dict(
        encoder=name,
        method=config["model"],
        size=f"{encoder.emb_dim} x {encoder.depth}",
        parameters=sum(p.numel() for p in encoder.parameters()),
        steps=int(sum(row["train_batch_count"] for row in history)),
        minutes=sum(row["dur"] for row in history) / 60,
        channel_hours=summary["channel_hours"],
        people=summary["people"],
        valid_skill=history[-1]["valid_skill"],
    )


def report(scores, facts, out):
    """The table (markdown) and the figure."""
    # per task, each distinct labelled set once (the MI tasks' five draws hold two
    # sets); the mean over the tasks of those; the std over draws of each draw's mean
    # over the tasks
    by_task = per_task(scores)
    per_draw = scores.groupby(["encoder", "method", "draw"]).balanced_accuracy.mean()
    summary = pd.DataFrame(
        {
            "mean": by_task.groupby(["encoder", "method"]).mean(),
            "std": per_draw.groupby(["encoder", "method"]).std(),
        }
    )
    facts = pd.DataFrame(facts).set_index("encoder")

    def cell(encoder, method):
        m, s = summary.loc[(encoder, method)]
        return f"{m:.3f} ± {s:.3f}"

    lines = [
        "# Pretraining curve: steps, corpus, encoder size, and MAE at equal wall-clock",
        "",
        f"{machine()}. Commands: `benchmarks/results/pretraining_curve.commands`; "
        "how to run: `python -m benchmarks.bench_pretraining_curve --help`.",
        "",
        "Held-out skill: pretext skill (1 - loss / loss of predicting nothing) on whole "
        "recordings held out of pretraining, last epoch. Downstream: balanced accuracy on "
        "the selection splits of the four development tasks at one labelled unit: per "
        "task the mean over its distinct labelled sets (five on EEGMAT; the MI tasks' "
        "five draws hold two, one block or the other), then the mean over the tasks; ± "
        "the std over the 5 draws of each draw's mean over the tasks.",
        "",
        "| run | axes | method | size | parameters | steps | minutes | channel-hours | "
        "people | held-out skill | probe[enc, 1] | probe[enc+bp+ts, 100] (default) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in facts.iterrows():
        lines.append(
            f"| {name} | {', '.join(RUNS[name][0])} | {row.method} | {row['size']} | "
            f"{row.parameters:,} | {row.steps:,} | {row.minutes:.1f} | "
            f"{row.channel_hours:.1f} | {row.people} | {row.valid_skill:.3f} | "
            f"{cell(name, ENCODER_METHODS[0])} | {cell(name, ENCODER_METHODS[1])} |"
        )
    lines += ["", NOTES]
    lines += ["", "Reference rows, no pretraining:", "", "| row | downstream |", "|---|---|"]
    lines += [f"| {m} | {cell('reference', m)} |" for m in REFERENCE_METHODS]
    lines += ["", "Per task (mean over distinct labelled sets):", ""]
    tasks = list(DEV_TASKS)
    lines += ["| run | method | " + " | ".join(tasks) + " |", "|---|---|" + "---|" * len(tasks)]
    for name in ["reference", *facts.index]:
        for method in REFERENCE_METHODS if name == "reference" else ENCODER_METHODS:
            values = [by_task.loc[(name, method, t)] for t in tasks]
            lines.append(f"| {name} | {method} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")

    fig, axes = plt.subplots(2, 3, figsize=(12, 6.5), sharey="row")
    steps = [n for n in facts.index if "steps" in RUNS[n][0]]
    steps.sort(key=lambda n: facts.loc[n, "steps"])
    x = facts.loc[steps, "steps"].to_numpy()
    axes[0, 0].plot(x, facts.loc[steps, "valid_skill"], "o-", color="C0")
    for j, method in enumerate(ENCODER_METHODS):
        m = [summary.loc[(n, method), "mean"] for n in steps]
        s = [summary.loc[(n, method), "std"] for n in steps]
        axes[1, 0].errorbar(x, m, yerr=s, fmt="o-", color=f"C{j}", capsize=3, label=method)
    for ax in axes[:, 0]:
        ax.set_xscale("log")
    axes[1, 0].set_xlabel("pretraining steps (PARS 64 x 4)")
    pairs = [
        (1, "corpus (skill: each on its own held-out recordings)",
         [("pars-64x4-10000-nomuse", "without headband"), ("pars-64x4-10000", "with headband")]),
        (2, "size / method, equal wall-clock", [("pars-64x4-10000", "PARS 64 x 4"),
                                                ("pars-128x6-equal-time", "PARS 128 x 6"),
                                                ("mae-64x4-equal-time", "MAE 64 x 4")]),
    ]  # fmt: skip
    for col, title, runs in pairs:
        runs = [(n, label) for n, label in runs if n in facts.index]
        pos = np.arange(len(runs))
        axes[0, col].bar(pos, [facts.loc[n, "valid_skill"] for n, _ in runs], color="C0")
        for j, method in enumerate(ENCODER_METHODS):
            m = [summary.loc[(n, method), "mean"] for n, _ in runs]
            s = [summary.loc[(n, method), "std"] for n, _ in runs]
            axes[1, col].errorbar(pos + 0.1 * (j - 0.5), m, yerr=s, fmt="o", color=f"C{j}",
                                  capsize=3, label=method)  # fmt: skip
        for ax in axes[:, col]:
            ax.set_xticks(pos, [label for _, label in runs])
            ax.set_xlim(-0.6, len(runs) - 0.4)
        axes[0, col].set_title(title)
    axes[0, 0].set_title("steps")
    axes[0, 0].set_ylabel("held-out pretext skill")
    axes[1, 0].set_ylabel("balanced accuracy, k = 1\n(selection splits, mean of 4 tasks)")
    for ax in axes[1]:
        for j, method in enumerate(REFERENCE_METHODS):
            ax.axhline(summary.loc[("reference", method), "mean"], color=f"C{j + 2}", ls="--",
                       lw=1, label=method if ax is axes[1, 0] else None)  # fmt: skip
    axes[1, 0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrain", action="store_true", help="run the missing runs first")
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/pretraining_curve")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(args.threads)
    with open(args.out.with_suffix(".commands"), "w") as f:
        for name in args.runs:
            f.write(f"# {name}\n" + "\n".join(commands(name)) + "\n")
        f.write("python -m benchmarks.bench_pretraining_curve\n")
    if args.pretrain:
        pretrain(args.runs)
    names = [n for n in args.runs if (encoder_folder(n) / "model.safetensors").is_file()]
    missing = sorted(set(args.runs) - set(names))
    if missing:
        logger.warning("not pretrained yet (run with --pretrain): %s", ", ".join(missing))
    start = time.perf_counter()
    csv = args.out.with_suffix(".csv")
    if csv.exists() and "seed" in pd.read_csv(csv, nrows=0).columns:  # rows written before 3ab04e9
        pd.read_csv(csv).rename(columns={"seed": "draw"}).to_csv(csv, index=False)
    scores = evaluate(names, csv, encoder_folder, ENCODER_METHODS, references=REFERENCE_METHODS)
    scores = scores[scores.encoder.isin(["reference", *names])]
    report(scores, [run_facts(n) for n in names], args.out)
    logger.info("done in %.0f s", time.perf_counter() - start)


if __name__ == "__main__":
    main()
