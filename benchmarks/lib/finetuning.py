"""What the fine-tuning benchmarks share (``bench_pretext_comparison``,
``bench_finetuning_recipe``): the main job's EEGMAT split, the
fine-tuner at the library's defaults but some parameters, and the JSON-lines rows they
append to."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from braindecode_pars import PARSFineTuner
from braindecode_pars._util.seeding import isolated_random_state
from braindecode_pars.datasets.bundled import BUNDLED_POOL_SUBJECTS, load_bundled_eegmat
from braindecode_pars.datasets.eegmat import EEGMAT_TEST_SUBJECTS
from braindecode_pars.hub.folders import load_encoder
from braindecode_pars.io.windows import read_windows
from braindecode_pars.models.encoder import PatchEncoder

ENCODER = "pars-small-v2"
POOL = tuple(BUNDLED_POOL_SUBJECTS)


def load():
    """The 20 subjects' windows: X (n, 19, 1000), y, subject of each window, sfreq."""
    windows = load_bundled_eegmat(tuple(EEGMAT_TEST_SUBJECTS) + POOL)
    data = read_windows(windows)
    groups = windows.get_metadata()["subject"].to_numpy()
    return data.X, np.asarray(data.y), groups, float(data.sfreq)


def fine_tuner(encoder, params, seed, sfreq, callbacks=None):
    """``PARSFineTuner`` at the library's defaults but ``params``; ``encoder=None`` is a
    new encoder of ``pars-small-v2``'s size (training from scratch)."""
    if encoder is None:
        encoder = scratch_encoder(seed, sfreq)
    return PARSFineTuner(
        encoder=encoder,
        sfreq=sfreq,
        random_state=seed,
        verbose=0,
        callbacks=callbacks,
        **params,
    )


def scratch_encoder(seed, sfreq):
    """A new encoder of ``pars-small-v2``'s size, initialised from ``seed``."""
    size = load_encoder(ENCODER).config.asdict()
    with isolated_random_state(seed, "cpu"):
        return PatchEncoder(sfreq=sfreq, **size)


def read_rows(path):
    """The rows of a JSON-lines file (none when it does not exist yet)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


#: the lab's recorded EEGNet rows on the four PhysioNet-MI development tasks' test splits
#: (``bench_pretext_comparison finetune-mi``), which the fine-tuning comparisons reuse
LAB_EEGNET = Path(__file__).resolve().parents[1] / "results" / "pretext_comparison_finetune.jsonl"
_MI_TASKS = ("mi-imagery-lr", "mi-executed-lr", "mi-imagery-4", "mi-executed-ff")


def lab_eegnet_rows():
    """EEGNet's rows of ``LAB_EEGNET`` on the four MI tasks, one per labelled set and
    seed (k = 1's five draws label blocks 1 and 2 only), in the fine-tuning
    comparisons' columns."""
    rows = {}
    for r in read_rows(LAB_EEGNET):
        if r["row"] != "EEGNet" or r["task"] not in _MI_TASKS:
            continue
        unit = "all" if r["k"] == "all" else r["labelled"][0]
        key = (r["task"], r["k"], unit, "EEGNet", r["seed"])
        rows.setdefault(key, dict(
            key=list(key), task=r["task"], k=r["k"], labelled=r["labelled"], row="EEGNet",
            seed=r["seed"], recipe=None, bal_acc=r["bal_acc"], train_bal_acc=np.nan,
            n_classes_predicted=r["n_classes_predicted"], seconds=r["seconds"],
            commit="lab's pretext_comparison_finetune.jsonl", machine="",
        ))  # fmt: skip
    return list(rows.values())


def recipe_fine_tuner(encoder, recipe, seed, sfreq):
    """``PARSFineTuner`` over ``encoder`` as given (None: the fine-tuner's own new small
    encoder) at the library's defaults but ``recipe``. A recipe's ``warmup`` names its
    learning-rate schedule: True, the fine-tuner's ``lr_schedule="warmup-cosine"``
    (10 % warm-up from a tenth of the rate, cosine to 0); False or left out,
    ``lr_schedule="constant"``, the rate the recipes without it were run at. A recipe
    that sets ``lr_schedule`` itself keeps it. The schedule is the fine-tuner's own,
    never a callback beside it (which the fine-tuner refuses)."""
    params = dict(recipe)
    warmup = params.pop("warmup", False)
    params.setdefault("lr_schedule", "warmup-cosine" if warmup else "constant")
    return PARSFineTuner(encoder=encoder, sfreq=sfreq, random_state=seed, verbose=0, **params)


def append_row(path, row, commit, machine, logger):
    """Append ``row`` (its ``commit`` and ``machine`` added) as a JSON line, and log its
    key, balanced accuracy, training accuracy and seconds."""
    row = dict(row, commit=commit, machine=machine)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    logger.info(
        "%s: %.3f (train %.3f, %.0f s)",
        " ".join(map(str, row["key"])), row["bal_acc"], row.get("train_bal_acc", np.nan),
        row["seconds"],
    )  # fmt: skip


def _balanced_accuracies(y, pred):
    """Balanced accuracy of each row of ``pred`` (..., n) against each row of ``y`` (n or
    broadcastable): the mean over the classes present in ``y`` of their recall."""
    classes = np.unique(y)
    recalls = []
    for c in classes:
        members = y == c
        count = members.sum(-1)
        hits = ((pred == c) & members).sum(-1)
        recalls.append(np.where(count > 0, hits / np.maximum(count, 1), np.nan))
    return np.nanmean(np.stack(recalls), axis=0)


def bootstrap_means(y, preds, n_boot=2000, seed=0):
    """Bootstrap draws of each row's mean over tasks of its mean over seeds of the
    balanced accuracy, resampling the scored windows and the seeds.

    Each draw resamples, per task, the scored windows (with replacement; the same
    windows for every row, so differences between rows are paired) and the seeds (with
    replacement; the same seed positions for every row).

    Parameters
    ----------
    y : dict of task -> ndarray, shape (n_windows,)
        Each task's scored labels.
    preds : dict of row -> dict of task -> ndarray, shape (n_seeds, n_windows)
        Each row's predictions of those windows, one line per seed (the same number of
        seeds for every row).
    n_boot : int
    seed : int

    Returns
    -------
    draws : dict of row -> ndarray, shape (n_boot,)
    """
    rng = np.random.default_rng(seed)
    rows = list(preds)
    n_seeds = {len(preds[r][t]) for r in rows for t in y}
    if len(n_seeds) != 1:
        raise ValueError(f"every row needs the same number of seeds, got {sorted(n_seeds)}")
    n_seeds = n_seeds.pop()
    seeds = rng.integers(0, n_seeds, (n_boot, n_seeds))
    draws = {r: np.zeros(n_boot) for r in rows}
    for task, labels in y.items():
        labels = np.asarray(labels)
        idx = rng.integers(0, len(labels), (n_boot, len(labels)))
        resampled = labels[idx]  # (n_boot, n)
        for r in rows:
            pred = np.asarray(preds[r][task])[:, idx]  # (n_seeds, n_boot, n)
            bal = _balanced_accuracies(resampled, pred)  # (n_seeds, n_boot)
            draws[r] += bal[seeds, np.arange(n_boot)[:, None]].mean(1) / len(y)
    return draws
