"""How much of PARS's pretext skill is waveform alignment? A shortcut check.

Random patch starts overlap, and two overlapping patches reveal their shift by
sharing samples; so does a patch overlapping one that kept its positional
embedding. ``sampling="disjoint"`` draws random starts with no two patches
overlapping. This script trains the small encoder for a fixed budget with
``random`` and ``disjoint`` sampling on three kinds of windows:

- real EEG (the shipped encoder's corpus, held-out recordings for validation);
- its phase-randomised surrogate (each window's Fourier phases drawn at random:
  the same power spectrum, no structure beyond it);
- white noise (no structure at all).

and records the validation skill reached (1 - loss / loss of predicting no shift).
10-s crops with 32 patches of 0.25 s, so that disjoint patches fit with room to
move (with the default 1-s patches, 40 of them never fit in 10 s, and 30-s crops
learn too slowly for this budget: ``pretext_settings.md``).

Usage::

    python -m benchmarks.bench_shortcut --steps 800 --out benchmarks/results/shortcut.md
"""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.lib.measure import machine, write_report
from benchmarks.lib.pretext import (
    fixed_batch,
    open_corpus,
    pretext_parser,
    save_curves,
    skill_curve,
    split_views,
)
from braindecode_pars import PARS
from braindecode_pars.models.encoder_config import ENCODER_SIZES


def phase_randomise(X, rng):
    """Same amplitude spectrum, uniformly random phases (DC and Nyquist kept real)."""
    spec = np.fft.rfft(X, axis=-1)
    phases = rng.uniform(0, 2 * np.pi, spec.shape)
    phases[..., 0] = 0
    if X.shape[-1] % 2 == 0:
        phases[..., -1] = 0
    return np.fft.irfft(np.abs(spec) * np.exp(1j * phases), n=X.shape[-1], axis=-1)


class Transformed:
    """A view whose windows are replaced by their surrogate or by white noise."""

    def __init__(self, view, kind, seed=0):
        self.view, self.kind = view, kind
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return len(self.view)

    def transform(self, X):
        if self.kind == "real":
            return X
        if self.kind == "noise":
            return torch.randn(
                X.shape, generator=torch.Generator().manual_seed(int(self.rng.integers(2**31)))
            )
        return torch.as_tensor(phase_randomise(X.numpy(), self.rng), dtype=torch.float32)

    def __getitems__(self, idx):
        items = self.view.__getitems__(idx)
        X = self.transform(torch.stack([x for x, _ in items]))
        return [(x, 0) for x in X]


def main():
    parser = pretext_parser(__doc__, steps=800, out="benchmarks/results/shortcut.md")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--n-patches", type=int, default=32)
    parser.add_argument("--patch-seconds", type=float, default=0.25)
    args = parser.parse_args()
    store = open_corpus(args)
    n_times = int(args.window * 100)
    results = []
    for kind in ("real", "surrogate", "noise"):
        train, valid = split_views(store, n_times)
        X_valid = Transformed(valid, kind, seed=1).transform(fixed_batch(valid, 512))
        for sampling in ("random", "disjoint"):
            torch.manual_seed(0)
            model = PARS(
                n_times=n_times,
                sfreq=100,
                n_patches=args.n_patches,
                sampling=sampling,
                patch_seconds=args.patch_seconds,
                **ENCODER_SIZES["small"],
            )
            curve = skill_curve(
                model,
                Transformed(train, kind, seed=2),
                X_valid,
                args.steps,
                args.batch_size,
                args.lr,
                eval_every=max(args.steps // 8, 1),
            )
            results.append(dict(data=kind, sampling=sampling, curve=curve))
            print(kind, sampling, f"{curve[-1]['valid_skill']:.3f}", flush=True)
    out = save_curves(results, args.out)
    skill = {(r["data"], r["sampling"]): r["curve"][-1]["valid_skill"] for r in results}
    lines = [
        "# Shortcut check: PARS skill on real EEG, its surrogate and white noise",
        "",
        f"Machine: {machine()}. Command: `python -m benchmarks.bench_shortcut --steps "
        f"{args.steps}`. Small encoder (64 x 4), {args.window:g}-s crops at 100 Hz, "
        f"{args.n_patches} patches of {args.patch_seconds:g} s, 80 % position-masked, "
        f"lr {args.lr:g}, batch {args.batch_size}, {args.steps} steps (warm-up then cosine). "
        "Validation skill on 512 fixed crops of held-out recordings (0 = predicting no "
        "shift, 1 = perfect).",
        "",
        "| windows | random sampling | disjoint sampling |",
        "|---|---|---|",
    ]
    for kind in ("real", "surrogate", "noise"):
        lines.append(
            f"| {kind} | {skill[(kind, 'random')]:.3f} | {skill[(kind, 'disjoint')]:.3f} |"
        )
    write_report(lines, out)


if __name__ == "__main__":
    main()
