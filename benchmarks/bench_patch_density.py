"""How densely PARS should draw its patches: the paper's 40 one-second patches come from
30-s crops (1.33 patch-seconds per second); the shipped encoders draw 40 from 10-s crops
(4.00), where the patches share samples and chain end to end, so that the eight with a
position can anchor the others by aligning samples. Four configurations, chosen on the
development tasks' selection splits by the rule below, written before their runs:

- ``a``: 40 random patches in 10-s crops (today's; the ``window`` encoders of
  the normalisation selection, ``benchmarks/encoders/pars-selection*``, restored by ``make
  benchmark-encoders``);
- ``b``: the paper's density in 10-s crops, 13 random patches;
- ``c``: 10 patches drawn ``sampling="disjoint"`` in 10-s crops (no two share a sample);
- ``d``: 40 random patches in 30-s crops, the paper's, from a store of 30-s windows of
  the same recordings (those at least 30 s long).

Every encoder is PARS 64 x 4 (``--size small``), 30,000 steps of batch 64 on the
selection corpus (the 12 EEGMAT pool subjects, the nine Sleep-EDF segments and the 129
Muse recordings), pretraining seeds 0, 1 and 2: the budget of ``normalization.md``.

The rule (:data:`RULE`) is in the module; the report adds what the rule does not read:
each configuration's pretext skill on its held-out recordings, the overlap statistics of
its draw (:func:`braindecode_pars.models.pretext.patch_overlap`) and the default probe.

Usage::

    python -m benchmarks.bench_patch_density --pretrain  # resumable: SIGTERM, then again
    python -m benchmarks.bench_patch_density            # evaluates what exists, reports
    python -m benchmarks.bench_patch_density --part test  # after the decision only
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks.lib.encoders import SELECTION_ENCODERS

logger = logging.getLogger("bench_patch_density")

ROOT = Path(__file__).resolve().parents[1]
CLI = "braindecode-pars"
LAB = "python -m benchmarks.lab"
STEPS = 30000
SEEDS = (0, 1, 2)
#: The selection corpus in 10-s windows (the ``a`` encoders' store) and in 30-s windows.
STORES = {10: "results/store-selection", 30: "results/store-selection-30s"}
STORE_COMMANDS = {
    seconds: f"{LAB} store --shared-data ../shared/data --eegmat-subjects pool --muse "
    f"--window-seconds {seconds} --out {store}"
    for seconds, store in STORES.items()
}
#: Each configuration: its crop (the store's windows, s) and its pretext settings.
CONFIGS = {
    "a": dict(crop=10, n_patches=40, sampling="random"),
    "b": dict(crop=10, n_patches=13, sampling="random"),
    "c": dict(crop=10, n_patches=10, sampling="disjoint"),
    "d": dict(crop=30, n_patches=40, sampling="random"),
}
#: Configuration ``a``'s encoders, already in the history, by seed.
A_ENCODERS = SELECTION_ENCODERS
SCORE = "probe[enc, 1]"  # the encoder block alone: the rule's score
DEFAULT = "probe[enc+bp+ts, 100]"  # PARSClassifier's head: the shipping condition's
RULE = (
    "Score: `probe[enc, 1]` (the probe over the encoder's features alone: what "
    "pretraining made) balanced accuracy at k = 1 on the selection splits of the five "
    "development tasks (per task the mean over its distinct labelled sets, then the mean "
    "over tasks). A configuration's score: the mean over pretraining seeds 0, 1, 2; its "
    "spread: their standard deviation. A configuration is chosen over `a` (today's) only "
    "if its score exceeds a's by more than the larger of the two spreads; if several do, "
    "the highest score. A new encoder (`pars-small-v3`, v2's corpus and budget with the "
    "chosen configuration) is pretrained only if one is chosen, and becomes the default "
    "only if the chosen configuration's default-probe score (`probe[enc+bp+ts, 100]`) "
    "exceeds both pars-small-v2's and the probe without an encoder (`probe[bp+ts, 100]`) "
    "by more than its spread over seeds. The readout (today's 1-s patches with positions, "
    "against positions withheld and against patches every 0.5 s) is chosen for the chosen "
    "configuration's encoders by the same comparison, against today's readout. Nothing "
    "else enters the choice: no test split, no subject probe, no pretext skill, no overlap "
    "statistic."
)


def run_name(config, seed):
    return f"density-{config}-seed{seed}"


def runs():
    """``{name: (configuration, seed)}`` of every encoder the rule reads."""
    return {run_name(c, s): (c, s) for c in CONFIGS for s in SEEDS}


def encoder_path(name):
    """Where run ``name``'s encoder lies (configuration ``a``'s: in the history)."""
    config, seed = runs()[name]
    if config == "a":
        return ROOT / A_ENCODERS[seed]
    return ROOT / "benchmarks/encoders/density" / name


def encoder_folder(name):
    """:func:`encoder_path`, checked to exist where it lies in the untracked folders."""
    from benchmarks.lib.encoders import benchmark_encoder

    return benchmark_encoder(encoder_path(name))


def commands(name):
    """The pretraining and export commands of a run of ``b``, ``c`` or ``d``, and its
    ``--config``."""
    config, seed = runs()[name]
    settings = CONFIGS[config]
    out = f"results/density/{name}"
    pretext = {"n_patches": settings["n_patches"], "sampling": settings["sampling"],
               "valid_fraction": 0.1, "seed": seed}  # fmt: skip
    return (
        f"{CLI} pretrain --store {STORES[settings['crop']]} --out {out} --size small "
        f"--steps {STEPS} --threads 1 --device cpu --config {out}.json",
        f"{CLI} export --run {out} --out benchmarks/encoders/density/{name}",
        pretext,
    )


def pretrain(names):
    """Run (or continue) the missing runs one at a time, one thread each, and export the
    finished ones. A run stopped by a signal continues from its last
    save when this is called again (stop it by SIGTERM: ``--max-minutes`` would leave an
    unfinished run, which is not exported)."""
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ.get('PATH', '')}", OMP_NUM_THREADS="1")
    for name in sorted(names, key=lambda n: runs()[n][::-1]):  # seed 0 of each first
        config, _ = runs()[name]
        if config == "a" or (encoder_path(name) / "model.safetensors").is_file():
            continue
        crop = CONFIGS[config]["crop"]
        if not (ROOT / STORES[crop] / "index.npz").is_file():
            command = [sys.executable, *shlex.split(STORE_COMMANDS[crop])[1:]]
            subprocess.run(command, cwd=ROOT, check=True, env=env)
        run, export, settings = commands(name)
        (ROOT / "results/density").mkdir(parents=True, exist_ok=True)
        (ROOT / f"results/density/{name}.json").write_text(json.dumps(settings))
        logger.info("%s", run)
        with open(ROOT / f"results/density/{name}.log", "a") as log:
            code = subprocess.run(shlex.split(run), cwd=ROOT, env=env, stdout=log, stderr=log)
        if code.returncode != 0:
            logger.warning("%s stopped (exit %d): run again to continue", name, code.returncode)
            return False
        subprocess.run(shlex.split(export), cwd=ROOT, check=True, env=env)
        logger.info("%s finished and exported", name)
    return True


#: The readouts the rule compares with today's (1-s patches, every one with its
#: position), by the method name of their rows: ``EncoderFeatures``'s settings.
READOUTS = {
    f"{SCORE} positions withheld": {"pos_mask_ratio": 1.0, "patch_stride_seconds": 1.0},
    f"{SCORE} patches every 0.5 s": {"patch_stride_seconds": 0.5},
}


def evaluate_readouts(names, csv, part="selection", readouts=READOUTS):
    """The ``readouts`` rows of every encoder on the ``part`` splits at one labelled
    unit (the probe over the encoder block alone, read otherwise), appended to ``csv``
    (rows already there are kept)."""
    from benchmarks.lib.dev_tasks import DEV_TASKS, load_task
    from benchmarks.lib.selection import COLUMNS, DRAWS, append_rows, probe_rows
    from braindecode_pars.features.blocks import block_features
    from braindecode_pars.features.recipe import ProbeRecipe
    from braindecode_pars.hub.folders import load_encoder

    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=COLUMNS)
    key = set(zip(done.encoder, done.task, done.method, done.draw, strict=True))
    for task in DEV_TASKS:
        loaded = None
        for name in names:
            todo = [m for m in readouts if any((name, task, m, d) not in key for d in DRAWS)]
            if not todo:
                continue
            loaded = loaded or load_task(task, part)
            X, y, units, pool, scored, sfreq = loaded
            encoder, rows = load_encoder(encoder_folder(name)), []
            for method in todo:
                recipe = ProbeRecipe(("encoder",), **READOUTS[method])
                blocks = {
                    "enc": block_features(X, recipe, sfreq=sfreq, encoder=encoder)[0]["encoder"]
                }
                rows += probe_rows(name, task, blocks, y, units, pool, scored, {method: SCORE})
            append_rows(csv, rows)
            logger.info("%s %s readouts done", task, name)
    return pd.read_csv(csv)


def pretext_skill(folder):
    """The last epoch's pretext skill on the run's held-out recordings (1 - loss over the
    trivial loss of predicting no shift; 0: nothing learned)."""
    history = json.loads((Path(folder) / "pretrain_history.json").read_text())
    return float(history[-1]["valid_skill"])


def overlap(config, n_draws=4096):
    """The overlap statistics of a configuration's draw (:func:`patch_overlap` of
    PARS's own draws at its crop, patches and sampling), seeded."""
    from braindecode_pars.models.pretext import PARS

    settings = CONFIGS[config]
    model = PARS(
        n_times=100 * settings["crop"], sfreq=100.0, n_patches=settings["n_patches"],
        sampling=settings["sampling"], emb_dim=8, depth=1, n_heads=1, ff_dim=8,
    )  # fmt: skip
    return model.overlap_statistics(n_draws, generator=torch.Generator().manual_seed(0))


def probes(names, csv, shared_data):
    """The subject and label probes (``bench_subject_probe``'s protocol) of every encoder,
    rows appended to ``csv`` as they finish (rows already there are kept)."""
    import pandas as pd

    from benchmarks.lib import subject_probe

    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=["encoder", "dataset"])
    key = set(zip(done.encoder, done.dataset, strict=True))
    found = [subject_probe.eegmat_bundled(), subject_probe.physionet_mi()]
    if (Path(shared_data) / "eegmat").is_dir():
        found.insert(1, subject_probe.eegmat_shared(Path(shared_data) / "eegmat"))
    for data in found:
        for name in names:
            if (name, data.name) in key:
                continue
            features = subject_probe._encoder_features(str(encoder_folder(name)))
            result = subject_probe.score(data, features)
            row = {"encoder": name, "dataset": data.name, **result}
            pd.DataFrame([row]).to_csv(csv, mode="a", header=not csv.exists(), index=False)
            logger.info("%s %s: subject %s, label %.3f", name, data.name, result["subject"],
                        result["label"])  # fmt: skip
    return pd.read_csv(csv)


def _mean_std(values):
    values = [v for v in values if v == v]  # NaN: not measured
    if not values:
        return "not run yet"
    spread = f" ± {np.std(values, ddof=1):.3f}" if len(values) > 1 else ""
    return f"{np.mean(values):.3f}{spread}"


def report(scores, probe_rows, names, out, test=None):
    """The selection's table and decision (``out``.md), with the test splits' table when
    ``test`` (their scores) is given; returns the configuration and readout chosen, or
    None while the rule cannot decide."""
    from benchmarks.lib.measure import git_commit, machine
    from benchmarks.lib.selection import REFERENCE_METHODS, best_margin, choose, per_task

    tasks = per_task(scores)
    mean_over_tasks = tasks.groupby(["encoder", "method"]).mean()
    members = {c: [n for n in names if runs()[n][0] == c] for c in CONFIGS}
    rule_scores = {c: [mean_over_tasks.loc[(n, SCORE)] for n in m] for c, m in members.items()}
    complete = all(len(v) == len(SEEDS) for v in rule_scores.values())
    chosen, _ = choose({c: v for c, v in rule_scores.items() if v}, "a", len(SEEDS))
    lines = [
        "# Patch density of PARS, chosen on the selection splits",
        "",
        f"{machine()}. Written by `python -m benchmarks.bench_patch_density` at commit "
        f"{git_commit()} (`--pretrain` runs what is missing; the commands are in "
        "`benchmarks/results/patch_density.commands`).",
        "",
        "The rule, committed before its runs: " + RULE,
        "",
        "## Configurations (mean ± std over pretraining seeds)",
        "",
        "| configuration | crop | patches | sampling | patch-s per s | masked pairs sharing "
        "samples | crops that chain | seeds run | pretext skill (held out) | "
        f"{SCORE} (the rule's score) | {DEFAULT} |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for config, settings in CONFIGS.items():
        stats, run = overlap(config), members[config]
        skills = [pretext_skill(encoder_folder(n)) for n in run]
        cells = [_mean_std(skills), _mean_std(rule_scores[config]),
                 _mean_std([mean_over_tasks.loc[(n, DEFAULT)] for n in run])]  # fmt: skip
        lines.append(
            f"| {config} | {settings['crop']} s | {settings['n_patches']} | "
            f"{settings['sampling']} | {stats['patch_seconds_per_second']:.2f} | "
            f"{100 * stats['shared_pairs']:.1f} % | {100 * stats['chained']:.0f} % | "
            f"{len(run)} | " + " | ".join(cells) + " |"
        )
    references = ", ".join(
        f"{m} {mean_over_tasks.loc[('reference', m)]:.3f}" for m in REFERENCE_METHODS
    )
    lines += ["", f"Reference rows (no pretrained encoder): {references}."]
    lines += ["", "## Readouts (mean ± std over pretraining seeds)", "",
              "| configuration | " + " | ".join([f"{SCORE} (today's)", *READOUTS]) + " |",
              "|---|" + "---|" * (len(READOUTS) + 1)]  # fmt: skip
    readout_scores = {}
    for config, run in members.items():
        cells = []
        for method in (SCORE, *READOUTS):
            values = [mean_over_tasks.get((n, method), np.nan) for n in run]
            readout_scores[(config, method)] = [v for v in values if v == v]
            cells.append(_mean_std(values))
        lines.append(f"| {config} | " + " | ".join(cells) + " |")
    if len(probe_rows):
        lines += ["", "## Subject and label probes (reported, not read by the rule)", "",
                  "`bench_subject_probe`'s protocol over `EncoderFeatures` at its default "
                  "readout when they ran (patches every 0.5 s); no subject probe with one "
                  "subject.", "",
                  "| configuration | dataset | subject (chance 1 / subjects) | label |",
                  "|---|---|---|---|"]  # fmt: skip
        probe_rows = probe_rows.assign(config=[runs()[n][0] for n in probe_rows.encoder])
        for (config, dataset), rows in probe_rows.groupby(["config", "dataset"], sort=True):
            subject = _mean_std(rows.subject.astype(float).tolist()).replace("not run yet", "-")
            label = _mean_std(rows.label.tolist())
            lines.append(f"| {config} | {dataset} | {subject} | {label} |")
    lines += ["", "## Decision", ""]
    open_ = {c: best_margin(v, rule_scores["a"], len(SEEDS)) for c, v in rule_scores.items()
             if len(v) < len(SEEDS)}  # fmt: skip
    decided, best = None, ", ".join(f"{c} by {m:+.3f}" for c, m in open_.items())
    if complete or (len(rule_scores["a"]) == len(SEEDS) and max(open_.values()) < 0):
        settled = "" if complete else (" Settled before every seed ran: whatever the "
            "missing seeds score (0 to 1), no configuration can clear the rule's bar over a (at "
            f"best {best}); the table fills in as they run.")  # fmt: skip
        lines.append(f"By the rule: **{chosen}**.{settled}")
        readout, _ = choose({m: readout_scores[(chosen, m)] for m in (SCORE, *READOUTS)},
                            SCORE, len(SEEDS))  # fmt: skip
        lines.append(f"The readout of its encoders, by the same comparison: **{readout}**.")
        decided = chosen, readout
    else:
        done = ", ".join(f"{c} {len(v)}/{len(SEEDS)}" for c, v in rule_scores.items())
        lines.append(f"Not decided: the rule needs every configuration's three seeds ({done}).")
    lines += ["", "## Per encoder and task", ""]
    task_names = sorted(
        {t for _, _, t in tasks.index}, key=list(tasks.index.get_level_values(2)).index
    )
    lines += ["| encoder | method | " + " | ".join(task_names) + " | mean |",
              "|---|---|" + "---|" * (len(task_names) + 1)]  # fmt: skip
    for name in ["reference", *names]:
        for method in REFERENCE_METHODS if name == "reference" else (SCORE, DEFAULT, *READOUTS):
            if (name, method, task_names[0]) not in tasks.index:
                continue
            values = [tasks.loc[(name, method, t)] for t in task_names]
            lines.append(f"| {name} | {method} | " + " | ".join(f"{v:.3f}" for v in values)
                         + f" | {np.mean(values):.3f} |")  # fmt: skip
    if decided is not None and test is not None:
        lines += table_of_test_splits(test, members, decided)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return decided


def table_of_test_splits(scores, members, decided):
    """The test splits' section, after the decision: each configuration's rows."""
    from benchmarks.lib.selection import REFERENCE_METHODS, per_task

    means = per_task(scores, "test").groupby(["encoder", "method"]).mean()
    methods = list(dict.fromkeys([SCORE, decided[1], DEFAULT]))
    lines = ["", "## Test splits (read after the decision, which they do not change)", "",
             "Command: `python -m benchmarks.bench_patch_density --part test`. Same probes "
             "and draws as above on the development tasks' test splits.", "",
             "| configuration | seeds | " + " | ".join(methods) + " |",
             "|---|---|" + "---|" * len(methods)]  # fmt: skip
    for config, run in members.items():
        cells = [_mean_std([means.get((n, m), np.nan) for n in run]) for m in methods]
        lines.append(f"| {config} | {len(run)} | " + " | ".join(cells) + " |")
    refs = [f"{m} {means.get(('reference', m), np.nan):.3f}" for m in REFERENCE_METHODS]
    ours = [means.get((n, DEFAULT), np.nan) for n in members[decided[0]]]
    gap = np.mean(ours) - means.get(("reference", REFERENCE_METHODS[0]), np.nan)
    lines += ["", f"Reference rows: {', '.join(refs)}. The default probe over {decided[0]}'s "
              f"encoders against the first: {gap:+.3f} (spread over seeds "
              f"{np.std(ours, ddof=1):.3f})."]  # fmt: skip
    return lines


def write_commands(path):
    with open(path, "w") as f:
        for seconds in sorted({c["crop"] for c in CONFIGS.values()}):
            f.write(f"{STORE_COMMANDS[seconds]}\n")
        for name, (config, _) in runs().items():
            if config != "a":
                run, export, settings = commands(name)
                f.write(f"# {name}: config {json.dumps(settings)}\n{run}\n{export}\n")
        f.write("python -m benchmarks.bench_patch_density\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrain", action="store_true", help="run the missing runs")
    parser.add_argument("--runs", nargs="+", default=list(runs()), choices=list(runs()))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/patch_density")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the probes")
    parser.add_argument("--probes", action="store_true",
                        help="also the subject and label probes of every encoder")  # fmt: skip
    parser.add_argument("--shared-data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--part", choices=["selection", "test"], default="selection",
                        help="test: also the test splits, once the rule has decided")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    write_commands(args.out.with_suffix(".commands"))
    if args.pretrain:
        pretrain(args.runs)
        return
    from benchmarks.lib.selection import evaluate

    torch.set_num_threads(args.threads)
    names = [n for n in args.runs if (encoder_path(n) / "model.safetensors").is_file()]
    missing = sorted(set(args.runs) - set(names))
    if missing:
        logger.warning("absent (make benchmark-encoders, then --pretrain): %s", ", ".join(missing))
    evaluate(names, args.out.with_suffix(".csv"), encoder_folder, (SCORE, DEFAULT))
    scores = evaluate_readouts(names, args.out.with_suffix(".csv"))
    scores = scores[scores.encoder.isin(["reference", *names])]
    probe_csv = args.out.with_name(args.out.name + "_probes.csv")
    probe_rows = probes(names, probe_csv, args.shared_data) if args.probes else (
        pd.read_csv(probe_csv) if probe_csv.exists() else pd.DataFrame())  # fmt: skip
    if len(probe_rows):
        probe_rows = probe_rows[probe_rows.encoder.isin(names)]
    test_csv = args.out.with_name(args.out.name + "_test.csv")
    decided = report(scores, probe_rows, names, args.out)
    logger.info("rule: %s", decided or "not decided yet")
    if args.part == "test":
        if decided is None:
            raise SystemExit("--part test: the selection's decision comes first.")
        evaluate(names, test_csv, encoder_folder, (SCORE, DEFAULT), "test")
        evaluate_readouts(names, test_csv, "test", {m: READOUTS[m] for m in decided[1:]
                                                    if m in READOUTS})  # fmt: skip
    if test_csv.exists():
        test = pd.read_csv(test_csv)
        report(scores, probe_rows, names, args.out, test[test.encoder.isin(["reference", *names])])


if __name__ == "__main__":
    main()
