"""Pretext skill of the shipped encoders on whole recordings neither was pretrained on.

The recordings: EEGMAT's 12 test subjects
(:data:`~braindecode_pars.datasets.EEGMAT_TEST_SUBJECTS`), both recordings of each
(rest and mental arithmetic), read with :func:`~braindecode_pars.datasets.load_eegmat`
(0.3-45 Hz, 100 Hz, microvolts) from the shared data folder. Both shipped encoders were
pretrained on EEGMAT's 24 training subjects only (with Sleep-EDF, and for
``pars-small-v2`` the Muse headband recordings): their cards list the subjects, and
:func:`~braindecode_pars.datasets.shared_corpus` refuses the test subjects.

Every channel of every non-overlapping 10-s window of each recording is one
single-channel crop, the crops pretraining draws (1,000 samples at 100 Hz). The shipped
pretext model (``pretext.safetensors``, :func:`~braindecode_pars.hub.folders.load_pretext_model`)
draws its patches and position masks from a generator seeded with the draw's seed
(``_pretext.evaluate``: loss and trivial loss, weighted by crop, in evaluation mode),
and the skill is the library's :func:`~braindecode_pars.models.pretext.base.pretext_skill`,
1 - loss / loss of predicting no shift for every pair (0: nothing learned, 1: perfect).

Per subject and draw: the skill on that subject's crops. Reported: per model, the mean
over subjects of each subject's skill (averaged over the draws) ± its std over
subjects; the std over draws of the mean over subjects; the pooled skill over every
crop; and each subject's skill. Reference rows: a pretext model of the same size
and settings, randomly initialised (encoder and decoder), one per initialisation seed.

Usage::

    python -m benchmarks.bench_encoder_skill --out benchmarks/results/encoder_skill.md
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks.lib.dev_tasks import SHARED
from benchmarks.lib.measure import machine, table_head, write_report
from braindecode_pars.datasets.eegmat import EEGMAT_TEST_SUBJECTS, load_eegmat
from braindecode_pars.hub.folders import load_pretext_model, pretrained_path
from braindecode_pars.io.windows import read_windows
from braindecode_pars.models.pretext import PRETEXT_MODELS
from braindecode_pars.models.pretext.base import pretext_skill
from braindecode_pars.weights import PRETRAINED_ENCODERS

COLUMNS = ("model", "draw", "subject", "crops", "loss", "trivial", "skill")


@torch.no_grad()
def evaluate(model, X, seed=0, batch_size=256):
    """Loss, trivial loss and skill on fixed windows with fixed draws (eval mode)."""
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    loss = trivial = 0.0
    for i in range(0, len(X), batch_size):
        out = model(X[i : i + batch_size], generator=gen)
        n = len(X[i : i + batch_size])
        loss += float(out["loss"]) * n
        trivial += float(out["trivial_loss"]) * n
    model.train()
    return loss / len(X), trivial / len(X), pretext_skill(loss, trivial)


def crops_by_subject(data_path, subjects=EEGMAT_TEST_SUBJECTS, sfreq=100.0, seconds=10.0):
    """Every channel of every non-overlapping window of each subject's recordings, as
    single-channel crops ``(n, 1, n_times)``, by subject."""
    windows = load_eegmat(data_path, subjects=subjects, sfreq=sfreq, window_seconds=seconds)
    data = read_windows(windows)
    X, groups = np.asarray(data.X, dtype=np.float32), np.asarray(data.groups)
    return {int(s): torch.from_numpy(X[groups == s].reshape(-1, 1, X.shape[-1])) for s in subjects}


def random_pretext_model(name, seed):
    """A pretext model built from shipped encoder ``name``'s ``pretext.json`` (same size and
    settings), its weights those of torch's initialisation with ``seed``."""
    spec = json.loads((pretrained_path(name) / "pretext.json").read_text())
    method = spec.pop("method")
    torch.manual_seed(seed)
    return PRETEXT_MODELS[method](**spec).eval()


def measure(model, name, crops, draws, rows):
    """Append one row per draw and subject to ``rows``."""
    for draw in draws:
        t0 = time.perf_counter()
        for subject, X in crops.items():
            loss, trivial, skill = evaluate(model, X, seed=draw)
            rows.append(dict(model=name, draw=draw, subject=subject, crops=len(X), loss=loss,
                             trivial=trivial, skill=float(skill)))  # fmt: skip
        mean = np.mean([r["skill"] for r in rows if r["model"] == name and r["draw"] == draw])
        print(f"{name} draw {draw}: {mean:.3f} ({time.perf_counter() - t0:.0f} s)", flush=True)


def summary(scores):
    """Per model: mean ± std over subjects of each subject's skill (mean over draws), the
    std over draws of the mean over subjects, and the pooled skill (mean over draws)."""
    per_subject = scores.groupby(["model", "subject"]).skill.mean()
    per_draw = scores.groupby(["model", "draw"]).skill.mean()
    pooled = (
        scores.assign(loss=scores.loss * scores.crops, trivial=scores.trivial * scores.crops)
        .groupby(["model", "draw"])[["loss", "trivial"]]
        .sum()
    )
    pooled = (1 - pooled.loss / pooled.trivial).groupby("model").mean()
    return pd.DataFrame(
        {
            "mean": per_subject.groupby("model").mean(),
            "std_subjects": per_subject.groupby("model").std(),
            "min": per_subject.groupby("model").min(),
            "max": per_subject.groupby("model").max(),
            "std_draws": per_draw.groupby("model").std(),
            "pooled": pooled,
        }
    )


def report(scores, args, command, seconds):
    models = list(dict.fromkeys(scores.model))
    table = summary(scores).loc[models]
    per_subject = scores.groupby(["model", "subject"]).skill.mean().unstack("model")[models]
    n_crops = scores.drop_duplicates("subject").set_index("subject").crops
    draws = sorted(scores.draw.unique())
    lines = [
        "# Pretext skill of the shipped encoders on recordings neither was pretrained on",
        "",
        f"Machine: {machine()}. Command: `{command}` ({seconds / 60:.1f} minutes). "
        "Script: `benchmarks/bench_encoder_skill.py`; rows per model, draw and subject: "
        f"`{Path(args.out).with_suffix('.csv')}`.",
        "",
        f"Recordings: EEGMAT's {len(n_crops)} test subjects "
        f"({' '.join(map(str, n_crops.index))}), both recordings (rest, arithmetic), "
        "read with `load_eegmat` (0.3-45 Hz, 100 Hz). Neither encoder's corpus holds them: "
        "both cards list EEGMAT's 24 training subjects and leave these out. Crops: every "
        f"channel of every non-overlapping 10-s window, {n_crops.sum():,} single-channel "
        "crops of 1,000 samples (as in pretraining). Skill: 1 - loss / loss of predicting "
        "no shift for every pair (the library's `pretext_skill`), the shipped pretext "
        "model (`pretext.safetensors`) in evaluation mode, 40 patches, 80 % of them "
        f"position-masked, patches and masks drawn from a generator seeded with the draw "
        f"({len(draws)} draws: seeds {', '.join(map(str, draws))}).",
        "",
        "Per model: each subject's skill (its crops, mean over the draws), then the mean "
        "± std over the subjects, their minimum and maximum; the std over the draws of the "
        "mean over subjects; and the skill pooled over every crop (mean over the draws). "
        "`random init (seed s)`: a pretext model of the same size and settings, encoder "
        "and decoder randomly initialised, no training.",
        "",
        *table_head(
            "model", "skill, mean ± std over subjects", "min", "max", "std over draws", "pooled"
        ),
        *(
            f"| {name} | {row['mean']:.3f} ± {row.std_subjects:.3f} | {row['min']:.3f} | "
            f"{row['max']:.3f} | {row.std_draws:.4f} | {row.pooled:.3f} |"
            for name, row in table.iterrows()
        ),
        "",
        "A randomly initialised model does not predict no shift: its decoder's outputs "
        "have a random constant offset (the bias of its output layer) and a spread, and "
        "their mean square adds to the loss of predicting no shift. Its skill is therefore "
        "below 0, by an amount set by the draw of its weights (large for seed 1), never "
        "above: the trained encoders' skill is what they learned.",
    ]
    lines += ["", "Per subject (mean over the draws):", ""]
    lines += table_head("subject", "crops", *models)
    for subject, row in per_subject.iterrows():
        values = " | ".join(f"{row[m]:.3f}" for m in models)
        lines.append(f"| {subject} | {n_crops[subject]} | {values} |")
    write_report(lines, args.out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=SHARED / "eegmat")
    parser.add_argument("--draws", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--random-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="benchmarks/results/encoder_skill.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    crops = crops_by_subject(args.data)
    rows = []
    for name in PRETRAINED_ENCODERS:
        measure(load_pretext_model(name), name, crops, args.draws, rows)
    for seed in args.random_seeds:
        model = random_pretext_model(PRETRAINED_ENCODERS[0], seed)
        measure(model, f"random init (seed {seed})", crops, args.draws, rows)
    scores = pd.DataFrame(rows, columns=COLUMNS)
    scores.to_csv(Path(args.out).with_suffix(".csv"), index=False, float_format="%.6f")
    argv = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "-m", "benchmarks.bench_encoder_skill", *argv])
    report(scores, args, command, time.perf_counter() - start)


if __name__ == "__main__":
    main()
