"""Which input normalisation the encoder should pretrain with: ``"window"`` (the paper's,
blind to amplitude), ``"window+scale"`` (the same plus an embedding of each window's log
standard deviation) or ``"fixed"`` (a fixed 10 µV scale, clipped at 200 µV), chosen on
the development tasks' selection splits by the rule below, written before its runs.

Every encoder is PARS 64 x 4 (``--size small``), 30,000 steps of batch 64, pretrained on
the selection corpus (the 12 EEGMAT pool subjects, the nine Sleep-EDF segments and the
129 Muse recordings: no selection or test split of the development tasks scores them),
with pretraining seeds 0, 1 and 2. The ``"window"`` encoders are the selection encoders
already in the repository's history (``benchmarks/encoders/pars-selection``,
``-seed1``, ``-seed2``; ``make benchmark-encoders`` restores them): the same corpus,
budget and settings, and that mode ignores the unit. The amplitude-aware ones read
microvolts, from the same windows stored in microvolts
(``python -m benchmarks.lab store ... --unit uV``: Sleep-EDF's digital units through
``SLEEP_EDF_ATM_UV_PER_UNIT``).

The rule (:data:`RULE`): the score of an encoder is the default recipe's
(``probe[enc+bp+ts, 100]``, ``PARSClassifier``'s head) balanced accuracy at one labelled
unit on the selection splits of the five development tasks (per task the mean over its
distinct labelled sets, then the mean over the tasks). A mode's score is the mean over
its three seeds, its spread their standard deviation. An amplitude-aware mode is chosen
over ``"window"`` only if its score exceeds window's by more than the larger of the two
spreads; if both do, the higher score. Nothing else (the test splits, the subject probe,
pretext skill) enters the choice.

The test splits (``--part test``, after the decision, which they do not change): the
probe rows of every encoder and the reference rows, and the fine-tuner from each encoder
(:func:`evaluate_finetuning`): ``full fine-tuning`` is :class:`~braindecode_pars.PARSFineTuner`
at the library's defaults (``fine_tuner(encoder, {}, draw, sfreq)`` of
``benchmarks/lib/finetuning.py``, as ``bench_finetuning_outer``'s and
``bench_finetuning``'s "library defaults" rows: every weight trained, 200 epochs, lr
3e-4, batch 16, the standard augmentation, no spatial dropout; at one labelled unit no
validation split, so the last epoch is kept), seeded by the draw; ``from scratch`` the
same from a new encoder of the same size (``pars-small-v2``'s, the ``"window"``
normalisation), its reference row. Both on the labelled unit of each draw of
``--finetune-draws`` only (default :data:`FINETUNE_DRAWS`, draw 0: EEGMAT's first drawn
training subject, PhysioNet-MI's block 1): a fit takes about 20 s (a MI task of one
block), 35 s (the four-class task) or 20-25 s (EEGMAT, one subject) on the project's
2-core CPU, so ten starts (nine encoders and scratch) over the five tasks take about 18
to 23 minutes per draw, and all five draws one and a half to two hours.

Usage::

    python -m benchmarks.bench_normalization --pretrain [--parallel 2] [--max-minutes M]
    python -m benchmarks.bench_normalization            # evaluates what exists, reports
    python -m benchmarks.bench_normalization --part test [--finetune-draws 0 1 2 3 4]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import balanced_accuracy_score

from benchmarks.lib import selection
from benchmarks.lib.dev_tasks import DEV_TASKS, load_task, split
from benchmarks.lib.encoders import SELECTION_ENCODERS, benchmark_encoder
from benchmarks.lib.finetuning import fine_tuner
from benchmarks.lib.measure import command_line, machine
from benchmarks.lib.selection import COLUMNS, DRAWS, REFERENCE_METHODS, per_task

logger = logging.getLogger("bench_normalization")

ROOT = Path(__file__).resolve().parents[1]
CLI = "braindecode-pars"
LAB = "python -m benchmarks.lab"
STORE = "results/store-selection-uv"
STORE_COMMAND = (
    f"{LAB} store --shared-data ../shared/data --eegmat-subjects pool --muse --unit uV "
    f"--window-seconds 10 --out {STORE}"
)
STEPS = 30000
SEEDS = (0, 1, 2)
MODES = ("window", "window+scale", "fixed")
#: The amplitude-aware modes' settings beside the size's (the unit is the store's).
AMPLITUDE_SETTINGS = {"unit": "uV"}
#: The selection encoders of the "window" mode, by seed (``make benchmark-encoders``).
WINDOW_ENCODERS = SELECTION_ENCODERS
SCORE = "probe[enc+bp+ts, 100]"  # the default recipe: the rule's score
ENCODER_METHODS = ("probe[enc, 1]", SCORE)
#: The test splits' fine-tuner rows: full fine-tuning of each encoder, and of a new
#: encoder of the same size for the reference (the lab's names of these rows).
FINETUNE_METHOD = "full fine-tuning"
SCRATCH_METHOD = "from scratch"
#: ``PARSFineTuner``'s parameters changed from the library's defaults: none.
FINETUNE_PARAMS = {}
#: The draws the fine-tuner rows run by default: one, so that every start over the five
#: tasks fits in about 25 minutes of the 2-core CPU (the module's docstring).
FINETUNE_DRAWS = (0,)
RULE = (
    "Score: the default recipe's (`probe[enc+bp+ts, 100]`) balanced accuracy at k = 1 on "
    "the selection splits of the five development tasks (per task the mean over its "
    "distinct labelled sets, then the mean over tasks). A mode's score: the mean over "
    "pretraining seeds 0, 1, 2; its spread: their standard deviation. An amplitude-aware "
    "mode is chosen over `window` only if its score exceeds window's by more than the "
    "larger of the two spreads; if both do, the higher score. Nothing else enters the "
    "choice (no test split, no subject probe, no pretext skill)."
)


def run_name(mode, seed):
    return f"{mode.replace('+', '-')}-seed{seed}"


def runs():
    """``{name: (mode, seed)}`` of every encoder the rule reads."""
    return {run_name(m, s): (m, s) for m in MODES for s in SEEDS}


def encoder_folder(name):
    mode, seed = runs()[name]
    if mode == "window":
        return benchmark_encoder(ROOT / WINDOW_ENCODERS[seed])
    return ROOT / "benchmarks/encoders/normalization" / name


def commands(name, threads=1, max_minutes=None):
    """The pretraining and export commands of an amplitude-aware run, and its config."""
    mode, seed = runs()[name]
    out = f"results/normalization/{name}"
    config = {"normalization": mode, **AMPLITUDE_SETTINGS, "n_patches": 40,
              "valid_fraction": 0.1, "seed": seed}  # fmt: skip
    stop = "" if max_minutes is None else f" --max-minutes {max_minutes}"
    return (
        f"{CLI} pretrain --store {STORE} --out {out} --size small --steps {STEPS} "
        f"--threads {threads} --device cpu --config {out}.json{stop}",
        f"{CLI} export --run {out} --out benchmarks/encoders/normalization/{name}",
        config,
    )


def pretrain(names, parallel=1, max_minutes=None):
    """Run (or continue) the missing amplitude-aware runs, ``parallel`` at a time with one
    thread each, then export the finished ones. A run stopped by ``max_minutes`` or a
    signal continues when this is called again."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
               OMP_NUM_THREADS="1")  # fmt: skip
    if not (ROOT / STORE / "index.npz").is_file():
        subprocess.run(
            [sys.executable, *shlex.split(STORE_COMMAND)[1:]], cwd=ROOT, check=True, env=env
        )
    todo = [n for n in names if runs()[n][0] != "window"]
    todo = [n for n in todo if not (encoder_folder(n) / "model.safetensors").is_file()]
    running = {}
    while todo or running:
        while todo and len(running) < parallel:
            name = todo.pop(0)
            run, _, config = commands(name, 1, max_minutes)
            (ROOT / "results/normalization").mkdir(parents=True, exist_ok=True)
            (ROOT / f"results/normalization/{name}.json").write_text(json.dumps(config))
            log = open(ROOT / f"results/normalization/{name}.log", "a")  # noqa: SIM115
            logger.info("%s", run)
            running[name] = (subprocess.Popen(shlex.split(run), cwd=ROOT, env=env,
                                              stdout=log, stderr=log), log)  # fmt: skip
        time.sleep(10)
        for name, (proc, log) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[name]
            if proc.returncode == 0:
                export = commands(name)[1]
                subprocess.run(shlex.split(export), cwd=ROOT, check=True, env=env)
                logger.info("%s finished and exported", name)
            else:
                logger.warning("%s stopped (exit %d): run again to continue", name,
                               proc.returncode)  # fmt: skip


def evaluate(names, csv, part="selection", folder=None):
    """The probe rows of every encoder and the reference rows on the ``part`` splits
    ("selection" or "test") at one labelled unit, appended to ``csv`` as they finish
    (rows already there are kept; :func:`benchmarks.lib.selection.evaluate`)."""
    return selection.evaluate(
        names, csv, encoder_folder if folder is None else folder, ENCODER_METHODS, part,
        tasks=DEV_TASKS, load=load_task,
    )  # fmt: skip


def finetune_score(name, X, y, units, pool, scored, sfreq, draw):
    """Balanced accuracy on the scored units of the fine-tuner fitted on the labelled
    unit of ``draw``: ``PARSFineTuner`` at :data:`FINETUNE_PARAMS` over the encoder
    ``name``, or over a new encoder of the same size for ``"reference"`` (from scratch);
    seeded by the draw, as the probe rows are."""
    train, test, _ = split(units, pool, scored, "1", draw)
    encoder = None if name == "reference" else encoder_folder(name)
    clf = fine_tuner(encoder, FINETUNE_PARAMS, draw, sfreq)
    clf.fit(X[train], y[train], groups=units[train])
    pred = clf.predict(X[test], groups=units[test])
    return balanced_accuracy_score(y[test], pred)


def evaluate_finetuning(names, csv, draws=FINETUNE_DRAWS, part="test"):
    """The fine-tuner rows (:data:`FINETUNE_METHOD` of every encoder, :data:`SCRATCH_METHOD`
    of the reference) at one labelled unit, draw by draw over the tasks (a stopped run
    holds whole draws first), appended to ``csv`` as each fit finishes; rows already
    there are kept."""
    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=COLUMNS)
    key = set(zip(done.encoder, done.task, done.method, done.draw, strict=True))
    loaded = {}
    for draw in draws:
        for task in DEV_TASKS:
            for name in ["reference", *names]:
                method = SCRATCH_METHOD if name == "reference" else FINETUNE_METHOD
                if (name, task, method, draw) in key:
                    continue
                if task not in loaded:
                    loaded[task] = load_task(task, part)
                X, y, units, pool, scored, sfreq = loaded[task]
                start = time.perf_counter()
                score = finetune_score(name, X, y, units, pool, scored, sfreq, draw)
                row = dict(encoder=name, task=task, method=method, draw=draw,
                           balanced_accuracy=score)  # fmt: skip
                pd.DataFrame([row], columns=COLUMNS).to_csv(
                    csv, mode="a", header=not csv.exists(), index=False
                )
                logger.info("%s %s %s draw %d: %.3f (%.0f s)", task, name, method, draw,
                            score, time.perf_counter() - start)  # fmt: skip
    return pd.read_csv(csv)


def choose(mode_scores, baseline="window", n_seeds=None):
    """The rule (:func:`benchmarks.lib.selection.choose`) over :data:`SEEDS`."""
    return selection.choose(mode_scores, baseline, len(SEEDS) if n_seeds is None else n_seeds)


def report(scores, names, out):
    tasks = per_task(scores)
    mean_over_tasks = tasks.groupby(["encoder", "method"]).mean()
    mode_scores = {}
    for name in names:
        mode, _ = runs()[name]
        mode_scores.setdefault(mode, []).append(mean_over_tasks.loc[(name, SCORE)])
    complete = all(len(mode_scores.get(m, [])) == len(SEEDS) for m in MODES)
    chosen, table = choose(mode_scores)
    lines = [
        "# Input normalisation of the encoder, chosen on the selection splits",
        "",
        f"{machine()}. Command: `python -m benchmarks.bench_normalization` "
        "(`--pretrain` runs what is missing; the commands are the last section).",
        "",
        "The rule, committed before its runs: " + RULE,
        "",
        "## Modes (mean ± std over pretraining seeds)",
        "",
        f"| mode | seeds run | {SCORE} (the rule's score) | probe[enc, 1] |",
        "|---|---|---|---|",
    ]
    for mode in MODES:
        members = [n for n in names if runs()[n][0] == mode]
        if not members:
            lines.append(f"| {mode} | 0 | not run yet | |")
            continue
        cells = []
        for method in (SCORE, "probe[enc, 1]"):
            values = [mean_over_tasks.loc[(n, method)] for n in members]
            spread = f" ± {np.std(values, ddof=1):.3f}" if len(values) > 1 else ""
            cells.append(f"{np.mean(values):.3f}{spread}")
        lines.append(f"| {mode} | {len(members)} | {cells[0]} | {cells[1]} |")
    references = ", ".join(
        f"{m} {mean_over_tasks.loc[('reference', m)]:.3f}" for m in REFERENCE_METHODS
    )
    lines += ["", f"Reference rows (no pretrained encoder): {references}."]
    lines += ["", "## Decision", ""]
    if complete:
        lines.append(f"By the rule: **{chosen}**.")
    else:
        done = ", ".join(f"{m} {len(mode_scores.get(m, []))}/{len(SEEDS)}" for m in MODES)
        lines.append(f"Not decided: the rule needs every mode's three seeds ({done} run).")
    lines += ["", "## Per encoder and task", ""]
    task_names = list(DEV_TASKS)
    lines += ["| encoder | method | " + " | ".join(task_names) + " | mean |",
              "|---|---|" + "---|" * (len(task_names) + 1)]  # fmt: skip
    for name in ["reference", *names]:
        for method in REFERENCE_METHODS if name == "reference" else ENCODER_METHODS:
            values = [tasks.loc[(name, method, t)] for t in task_names]
            lines.append(f"| {name} | {method} | " + " | ".join(f"{v:.3f}" for v in values)
                         + f" | {np.mean(values):.3f} |")  # fmt: skip
    lines += ["", "## Commands", "", "```", *command_lines(), "```"]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return chosen, complete


def command_lines():
    """The store's command, each amplitude-aware run's config, pretraining and export
    commands (every run the rule reads), and the report's."""
    lines = [STORE_COMMAND]
    for name in runs():
        if runs()[name][0] != "window":
            run, export, config = commands(name)
            lines += [f"# {name}: config {json.dumps(config)}", run, export]
    return [*lines, "python -m benchmarks.bench_normalization"]


def report_test(scores, names, chosen, out, command):
    """The test splits' table, after the decision: each mode's encoders (mean ± std over
    seeds) against the probe without an encoder and over a random one, the fine-tuner
    from each encoder and from scratch where their rows ran, and the goal's line (the
    chosen mode against no encoder, by more than the spread over seeds?)."""
    tasks = per_task(scores, "test")
    mean_over_tasks = tasks.groupby(["encoder", "method"]).mean()
    task_names = list(DEV_TASKS)
    tuned = scores[scores.method.isin([FINETUNE_METHOD, SCRATCH_METHOD])]
    lines = [
        "# Input normalisation of the encoder: the development tasks' test splits",
        "",
        f"{machine()}. Command: `{command}`, run "
        "after the decision on the selection splits (`normalization.md`), which it does not "
        "change. One labelled unit (k = 1), balanced accuracy; per task the mean over its "
        "distinct labelled sets, then the mean over tasks; ± the std over pretraining seeds.",
    ]
    if len(tuned):
        draws = sorted(int(d) for d in tuned.draw.unique())
        which = (
            f"run on draw(s) {' '.join(map(str, draws))} only (`--finetune-draws`), the "
            f"probe rows on draws {' '.join(map(str, DRAWS))}, so their labelled sets differ"
            if draws != list(DRAWS)
            else "run on the probe rows' draws"
        )
        lines += [
            "",
            f"`{FINETUNE_METHOD}`: `PARSFineTuner` at the library's defaults over each "
            f"encoder, `{SCRATCH_METHOD}` the same over a new encoder of the same size; "
            f"{which}.",
        ]
    lines += [
        "",
        "| row | " + " | ".join(task_names) + " | mean of 5 |",
        "|---|" + "---|" * (len(task_names) + 1),
    ]

    def ran(name, method):
        return all((name, method, t) in tasks.index for t in task_names)

    summary = {}
    for mode in MODES:
        for method in (*ENCODER_METHODS, FINETUNE_METHOD):
            members = [n for n in names if runs()[n][0] == mode and ran(n, method)]
            if not members:
                continue
            per = np.array([[tasks.loc[(n, method, t)] for t in task_names] for n in members])
            means = per.mean(axis=1)
            summary[(mode, method)] = (means.mean(), means.std(ddof=1) if len(means) > 1 else 0)
            cells = [f"{v:.3f}" for v in per.mean(axis=0)]
            m, sd = summary[(mode, method)]
            row = f"| {method}, {mode} ({len(members)} seeds) | " + " | ".join(cells)
            lines.append(row + f" | {m:.3f} ± {sd:.3f} |")
    for method in (*REFERENCE_METHODS, SCRATCH_METHOD):
        if not ran("reference", method):
            continue
        values = [tasks.loc[("reference", method, t)] for t in task_names]
        lines.append(f"| {method} | " + " | ".join(f"{v:.3f}" for v in values)
                     + f" | {np.mean(values):.3f} |")  # fmt: skip
    best, spread = summary[(chosen, SCORE)]
    floor = mean_over_tasks.loc[("reference", "probe[bp+ts, 100]")]
    verdict = "beats" if best - floor > spread else "does not beat"
    lines += [
        "",
        f"The goal: the default probe over the chosen mode's encoders (`{chosen}`, "
        f"{best:.3f} ± {spread:.3f}) {verdict} the same probe without an encoder "
        f"({floor:.3f}) by more than the spread over seeds ({best - floor:+.3f}).",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return verdict


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrain", action="store_true", help="run the missing runs first")
    parser.add_argument("--runs", nargs="+", default=list(runs()), choices=list(runs()))
    parser.add_argument("--parallel", type=int, default=1,
                        help="runs at once, one thread each (default 1)")  # fmt: skip
    parser.add_argument("--max-minutes", type=float, help="stop each run after this long")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/normalization")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (probes, fine-tuner)")
    parser.add_argument("--part", choices=["selection", "test"], default="selection",
                        help="test: also the test splits, once the selection decided")  # fmt: skip
    parser.add_argument("--finetune-draws", type=int, nargs="*", choices=DRAWS,
                        default=list(FINETUNE_DRAWS),
                        help="with --part test: the draws of the fine-tuner rows (default "
                        f"{' '.join(map(str, FINETUNE_DRAWS))}, about 20 minutes a draw; "
                        "none: no fine-tuner rows)")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.pretrain:
        pretrain(args.runs, args.parallel, args.max_minutes)
        return
    torch.set_num_threads(args.threads)
    names = [n for n in args.runs if (encoder_folder(n) / "model.safetensors").is_file()]
    missing = sorted(set(args.runs) - set(names))
    if missing:
        logger.warning("not pretrained yet (run with --pretrain): %s", ", ".join(missing))
    scores = evaluate(names, args.out.with_suffix(".csv"))
    scores = scores[scores.encoder.isin(["reference", *names])]
    chosen, complete = report(scores, names, args.out)
    logger.info("rule: %s%s", chosen, "" if complete else " (not every seed run yet)")
    if args.part == "test":
        if not complete:
            raise SystemExit("--part test: the selection's decision comes first (every seed).")
        test_out = args.out.with_name(args.out.name + "_test")
        command = command_line("benchmarks.bench_normalization", argv)
        scores = evaluate(names, test_out.with_suffix(".csv"), "test")
        if args.finetune_draws:
            scores = evaluate_finetuning(names, test_out.with_suffix(".csv"), args.finetune_draws)
        scores = scores[scores.encoder.isin(["reference", *names])]
        logger.info("test: %s", report_test(scores, names, chosen, test_out, command))


if __name__ == "__main__":
    main()
