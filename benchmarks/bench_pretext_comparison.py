"""PARS against MAE, MP3, DropPos and training from scratch under one budget: the
paper's Table 1 at this project's scale.

Encoders (``benchmarks/encoders/comparison/{method}-{seed}.pt``, ``runs.json`` beside
them): the small encoder (64 x 4, 1-s patches at 100 Hz), pretrained by each pretext
task with the library's defaults (lr 1e-3, batch 64, warm-up then cosine), 4,000 steps,
seeds 0, 1 and 2, all on one corpus: the shipped encoders' corpus without any subject a
development split scores (EEGMAT's 12 pool subjects, the nine Sleep-EDF segments and
the 129 Muse recordings; 74.6 channel-hours of 82 people)::

    braindecode-pars store --shared-data ../shared/data --eegmat-subjects pool --muse \\
        --window-seconds 10 --out results/store-pool
    braindecode-pars pretrain --store results/store-pool --method M --seed S \\
        --steps 4000 --device cuda --threads 1 --out results/comparison/runs/M-S

Each encoder is then read two ways, the scores appended to
``benchmarks/results/pretext_comparison.jsonl`` as they finish (resumable):

- ``probe``: the library's probe over the frozen encoder (``PARSProbe(encoder=E)`` at
  its defaults: the encoder's tokens, log band power and the tangent space), on the
  test splits of the five development tasks (``lib/dev_tasks.py``) with the fewest
  labels (k = 1 subject or block, five draws) and with all of them; beside it the
  probe without an encoder (``PARSProbe()``), the band-power floor and the probe over
  randomly initialised encoders of the same size (initialisations 0, 1, 2: the
  pretraining-free start), and the probe over the shipped ``pars-small-v2``
  (``PARSClassifier()``'s default; pretrained on a corpus that holds the EEGMAT
  selection subjects, not the test ones);
- ``finetune``: full fine-tuning (``PARSFineTuner(encoder=E)`` at the library's
  defaults when the rows ran: 40 epochs, ``FINETUNE``) on the main job's EEGMAT split,
  all 8 pool subjects labelled, the 12 test subjects scored, one fit per encoder (its
  pretraining seed as the fit's seed); beside it the same architecture from scratch
  and braindecode's EEGNet (seeds 0, 1, 2);
  ``finetune-one``: the same with one labelled pool subject, the main job's five draws;
  ``finetune-mi``: the same rows on the four PhysioNet-MI development tasks' test
  splits (the probe's: one labelled block in five draws, and both pool blocks).

Nothing here is chosen on a test split: every setting is the library's default, fixed
before these rows ran. ``report`` writes ``pretext_comparison.md``.

Usage (one thread each; the two modes can run side by side on two cores)::

    OMP_NUM_THREADS=1 python -m benchmarks.bench_pretext_comparison probe
    OMP_NUM_THREADS=1 python -m benchmarks.bench_pretext_comparison finetune
    OMP_NUM_THREADS=1 python -m benchmarks.bench_pretext_comparison finetune-one
    python -m benchmarks.bench_pretext_comparison report
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import balanced_accuracy_score

from benchmarks.lib.dev_tasks import DEV_TASKS, load_task, split
from benchmarks.lib.finetuning import POOL, fine_tuner, read_rows, scratch_encoder
from benchmarks.lib.finetuning import load as load_main_split
from benchmarks.lib.networks import compact_network
from benchmarks.lib.pretext_report import write_report
from braindecode_pars import PARSProbe
from braindecode_pars.datasets.eegmat import EEGMAT_TEST_SUBJECTS
from braindecode_pars.demo.low_label import draw_subjects
from braindecode_pars.features import band_power_pipeline
from braindecode_pars.hub.folders import load_encoder
from braindecode_pars.models.encoder import PatchEncoder

logger = logging.getLogger("bench_pretext_comparison")

HERE = Path(__file__).resolve().parent
ENCODERS = HERE / "encoders" / "comparison"
RESULTS = HERE / "results"
METHODS = ("pars", "mae", "mp3", "droppos")
SEEDS = (0, 1, 2)
KS = ("1", "all")
DRAWS = (0, 1, 2, 3, 4)
LABELS = {"pars": "PARS", "mae": "MAE", "mp3": "MP3", "droppos": "DropPos"}

#: the fine-tuner's settings of the recorded rows: its defaults when they ran (40 epochs,
#: spatial dropout 0.5; now 200 and 0, chosen later on EEGMAT subjects outside the main job)
FINETUNE = {"max_epochs": 40, "spatial_drop_prob": 0.5}


def encoder_file(method, seed):
    return ENCODERS / f"{method}-{seed}.pt"


def random_encoder(seed):
    """A new encoder of the comparison's size, initialised with ``seed``."""
    torch.manual_seed(seed)
    return PatchEncoder(sfreq=100.0, **load_encoder(encoder_file("pars", 0)).config.asdict())


def done_keys(path):
    return {tuple(r["key"]) for r in read_rows(path)}


def append(path, row):
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    logger.info("%s: %.3f (%.0f s)", " ".join(map(str, row["key"])), row["bal_acc"], row["seconds"])


def probe_rows():
    """(row name, pretraining seed or None, the estimator's settings); the estimator is
    :func:`band_power_pipeline` for the floor, else ``PARSProbe``."""
    rows = [("band-power floor", None, None), ("probe, no encoder", None, {})]
    rows += [("probe, pars-small-v2 (the default)", None, dict(encoder="pars-small-v2"))]
    rows += [("probe, random encoder", s, dict(encoder=random_encoder(s))) for s in SEEDS]
    for method in METHODS:
        rows += [
            (f"probe, {LABELS[method]}", s, dict(encoder=str(encoder_file(method, s))))
            for s in SEEDS
        ]
    return rows


def run_probe(out):
    done = done_keys(out)
    rows = probe_rows()  # the random encoders are built once, copied by each fit
    for task in DEV_TASKS:
        X, y, units, pool, scored, sfreq = load_task(task, "test")
        for k in KS:
            draws = DRAWS if k == "1" else (0,)
            for draw in draws:
                train, test, labelled = split(units, pool, scored, k, draw)
                for name, seed, settings in rows:
                    key = (task, k, draw, name, seed)
                    if key in done:
                        continue
                    if settings is None:
                        est = band_power_pipeline(sfreq=sfreq, random_state=draw)
                    else:
                        est = PARSProbe(**settings, sfreq=sfreq, random_state=draw)
                    t0 = time.perf_counter()
                    est.fit(X[train], y[train])
                    pred = est.predict(X[test])
                    append(out, dict(
                        key=list(key), task=task, k=k, draw=draw, row=name, seed=seed,
                        labelled=[int(u) for u in labelled],
                        bal_acc=float(balanced_accuracy_score(y[test], pred)),
                        seconds=time.perf_counter() - t0,
                    ))  # fmt: skip


def fit_job(name, seed, X, y, n_classes, sfreq, groups=None):
    """One fine-tuning job fitted on ``X``, ``y``: braindecode's EEGNet, the comparison's
    architecture from scratch, or full fine-tuning of the comparison encoder that
    ``name`` ends with, for pretraining seed ``seed`` (the fine-tuner at ``FINETUNE``)."""
    if name == "EEGNet":
        torch.manual_seed(seed)
        clf = compact_network("EEGNet", X.shape[1], X.shape[2], n_classes, y, seed)
        return clf.fit(X.astype(np.float32), y)
    if name == "from scratch":
        encoder = scratch_encoder(seed, sfreq)
    else:
        method = next(m for m in METHODS if name.endswith(LABELS[m]))
        encoder = str(encoder_file(method, seed))
    return fine_tuner(encoder, FINETUNE, seed, sfreq).fit(X, y, groups=groups)


def run_finetune(out, one_subject=False):
    """Full fine-tuning rows: all 8 pool subjects labelled, or (``one_subject``) one
    labelled pool subject in each of :data:`DRAWS` (the main job's draws)."""
    done = done_keys(out)
    X, y, groups, sfreq = load_main_split()
    test = np.isin(groups, EEGMAT_TEST_SUBJECTS)
    jobs = [(f"full fine-tuning, {LABELS[m]}", s) for m in METHODS for s in SEEDS]
    jobs += [("from scratch", s) for s in SEEDS] + [("EEGNet", s) for s in SEEDS]
    if one_subject:
        cells = [("1 subject", d, draw_subjects(POOL, 1, d, spread=True)) for d in DRAWS]
    else:
        cells = [("8 subjects", 0, list(POOL))]
    for k, draw, subjects in cells:
        train = np.isin(groups, subjects)
        for name, seed in jobs:
            key = ("eegmat-main", k, draw, name, seed)
            if key in done:
                continue
            t0 = time.perf_counter()
            clf = fit_job(name, seed, X[train], y[train], 2, sfreq, groups=groups[train])
            pred = clf.predict(X[test].astype(np.float32))
            append(out, dict(
                key=list(key), task="eegmat-main", k=k, draw=draw, row=name, seed=seed,
                labelled=[int(u) for u in subjects],
                bal_acc=float(balanced_accuracy_score(y[test], pred)),
                predicted_minority=float(np.mean(pred == 1)),
                seconds=time.perf_counter() - t0,
            ))  # fmt: skip


#: the development tasks fully fine-tuned by ``finetune-mi`` (EEGMAT is fine-tuned on the
#: main job's split by ``finetune`` and ``finetune-one``)
MI_TASKS = tuple(t for t in DEV_TASKS if t.startswith("mi-"))


def run_finetune_mi(out):
    """Full fine-tuning rows on the PhysioNet-MI development tasks' test splits, at
    k = 1 (the probe's five draws) and with all labels: every comparison encoder, the
    same architecture from scratch and EEGNet, the fine-tuner at ``FINETUNE``. A draw
    whose labelled blocks an earlier draw already fitted reuses that fit's score (the
    fits are seeded by the pretraining seed, not the draw, so they would be the same)."""
    done = done_keys(out)
    jobs = [(f"full fine-tuning, {LABELS[m]}", s) for m in METHODS for s in SEEDS]
    jobs += [("from scratch", s) for s in SEEDS] + [("EEGNet", s) for s in SEEDS]
    for task in MI_TASKS:
        X, y, units, pool, scored, sfreq = load_task(task, "test")
        y = np.unique(y, return_inverse=True)[1]  # codes 0..n-1, as EEGNet's classes are
        n_classes = int(y.max()) + 1
        for k in KS:
            fitted = {}
            for draw in DRAWS if k == "1" else (0,):
                train, test, labelled = split(units, pool, scored, k, draw)
                for name, seed in jobs:
                    key = (task, k, draw, name, seed)
                    if key in done:
                        continue
                    memo = (tuple(sorted(int(u) for u in labelled)), name, seed)
                    t0 = time.perf_counter()
                    if memo not in fitted:
                        clf = fit_job(name, seed, X[train], y[train], n_classes, sfreq)
                        pred = clf.predict(X[test].astype(np.float32))
                        fitted[memo] = (pred, time.perf_counter() - t0)
                    pred, seconds = fitted[memo]
                    append(out, dict(
                        key=list(key), task=task, k=k, draw=draw, row=name, seed=seed,
                        labelled=[int(u) for u in labelled],
                        bal_acc=float(balanced_accuracy_score(y[test], pred)),
                        n_classes_predicted=int(len(np.unique(pred))),
                        seconds=seconds,
                    ))  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode",
        choices=("probe", "finetune", "finetune-one", "finetune-mi", "report"))  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS / "pretext_comparison")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    if args.mode == "probe":
        run_probe(args.out.with_name(args.out.name + "_probe.jsonl"))
    elif args.mode == "finetune-mi":
        run_finetune_mi(args.out.with_name(args.out.name + "_finetune.jsonl"))
    elif args.mode in ("finetune", "finetune-one"):
        one = args.mode == "finetune-one"
        run_finetune(args.out.with_name(args.out.name + "_finetune.jsonl"), one_subject=one)
    else:
        write_report(args.out)


if __name__ == "__main__":
    main()
