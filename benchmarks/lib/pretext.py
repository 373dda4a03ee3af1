"""Shared by the pretext benchmarks: a corpus of real EEG and a skill-against-steps loop."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from braindecode_pars.datasets.corpus import shared_corpus
from braindecode_pars.models.pretext.base import pretext_skill
from braindecode_pars.pretraining.schedule import warmup_cosine_factor
from braindecode_pars.pretraining.views import SingleChannelWindows
from braindecode_pars.store.write import write_window_store

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


def pretext_parser(doc, steps, out):
    """A pretext benchmark's command line: ``--steps``, ``--threads``, ``--store``, ``--out``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--store", default="results/store-shared")
    parser.add_argument("--out", default=out)
    return parser


def open_corpus(args):
    """Set torch's threads to ``args.threads``; the corpus store at ``args.store``."""
    torch.set_num_threads(args.threads)
    return corpus_store(args.store)


def save_curves(results, out):
    """Write ``results`` as JSON beside the report ``out`` (a .json file); ``out`` as a Path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    return out


def corpus_store(path, data_path=SHARED, sfreq=100.0):
    """The shipped encoder's corpus (EEGMAT training subjects + Sleep-EDF) as a store."""
    path = Path(path)
    if not (path / "index.npz").exists():
        write_window_store(shared_corpus(data_path, sfreq=sfreq, window_seconds=10.0), path)
    return path


def split_views(store, n_times, valid_every=10):
    """Train and validation views of a store: every ``valid_every``-th recording validates."""
    train = SingleChannelWindows.from_store(store, n_times=n_times)
    valid = SingleChannelWindows.from_store(store, n_times=n_times)
    is_valid = train.index[:, 0] % valid_every == 0
    train.index, valid.index = train.index[~is_valid], valid.index[is_valid]
    return train, valid


def fixed_batch(view, n, seed=0):
    """``n`` crops drawn once with a fixed seed: the same validation windows every time."""
    torch.manual_seed(seed)
    view.reseed()
    idx = np.random.default_rng(seed).choice(len(view), size=n, replace=len(view) < n)
    return torch.stack([x for x, _ in view.__getitems__(idx)])


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


def skill_curve(
    model,
    train_view,
    X_valid,
    steps,
    batch_size,
    lr,
    eval_every,
    seed=0,
    weight_decay=1e-4,
    warmup=0.05,
):
    """Train with AdamW (warm-up then cosine over ``steps``); validation skill as it goes.

    Returns a list of dicts (step, seconds, train_skill, valid_loss, valid_trivial,
    valid_skill).
    """
    torch.manual_seed(seed)
    train_view.reseed()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    rng = np.random.default_rng(seed)
    rows, run_loss, run_triv, t0 = [], 0.0, 0.0, time.perf_counter()
    for step in range(1, steps + 1):
        for group in opt.param_groups:
            group["lr"] = lr * warmup_cosine_factor((step - 1) / steps, warmup)
        idx = rng.integers(0, len(train_view), batch_size)
        X = torch.stack([x for x, _ in train_view.__getitems__(idx)])
        out = model(X)
        opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        opt.step()
        run_loss += out["loss"].item()
        run_triv += out["trivial_loss"].item()
        if step % eval_every == 0 or step == steps:
            v_loss, v_triv, v_skill = evaluate(model, X_valid)
            rows.append(
                dict(
                    step=step,
                    seconds=time.perf_counter() - t0,
                    train_skill=pretext_skill(run_loss, run_triv),
                    valid_loss=v_loss,
                    valid_trivial=v_triv,
                    valid_skill=v_skill,
                )
            )
            run_loss = run_triv = 0.0
    return rows
