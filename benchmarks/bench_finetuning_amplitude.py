"""Does fine-tuning see relative amplitude across channels? The remedies, measured.

The task (``tests._helpers.relative_amplitude_task``): two channels of one spectrum
(an 8-13 Hz rhythm in noise), class 0 with the first channel at twice the second's
amplitude, class 1 the reverse, each window's overall gain random (log-uniform over a
factor of 16); 160 windows of 4 s at 100 Hz to fit, 160 others to score. Log band power
with tangent space (``PARSProbe``) reads it perfectly; :class:`~braindecode_pars.PARSFineTuner`
normalises each channel of each window apart (the encoder's instance normalisation),
which removes exactly what the label rides on.

Each row is :class:`~braindecode_pars.PARSFineTuner` at the library's defaults but for
the model change it names (and ``max_epochs``), from scratch (``encoder=None``) and over
the shipped encoder (``"pars-small-v2"``), seed 0, scored by balanced accuracy on the
held-out windows:

- ``per channel and window``: the model as it was (``amplitude=False``);
- ``amplitude=True``: each channel's standardised log amplitude added to its spatial
  token before the spatial attention;
- ``amplitude="relative"``: each channel's log amplitude minus its window's mean over
  channels, standardised, the vector of channels mapped linearly into the pooled token
  before its norm (and the same with the default augmentation less its
  ``ChannelsDropout``, which zeroes one of the two channels in about a fifth of the
  training windows);
- ``one scale per window``: the encoder's instance normalisation replaced by one shared
  across the window's channels (each channel minus its mean, divided by the root mean
  variance of the window's channels), so the channels keep their ratio;
- ``overlapping patches``: 7 patches of 1 s on a 0.5-s stride instead of 4;
- ``pooling over time and channels``: the query attends to every patch token of every
  channel (with its channel embedding) instead of one mean token per channel.

The last three are built here (subclasses of the model passed as ``module``); the first
three are the library's ``amplitude`` values.

Run with one thread (minutes per row at 200 epochs on a CPU)::

    OMP_NUM_THREADS=1 python -m benchmarks.bench_finetuning_amplitude --epochs 20
    OMP_NUM_THREADS=1 python -m benchmarks.bench_finetuning_amplitude --epochs 200 \\
        --rows today relative
    python -m benchmarks.bench_finetuning_amplitude --report

Each fit appends a JSON line to ``finetuning_amplitude.jsonl``; ``--report`` writes
``finetuning_amplitude.md`` from them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
from braindecode.augmentation import ChannelsDropout, FTSurrogate, SmoothTimeMask
from sklearn.metrics import balanced_accuracy_score
from sklearn.utils import check_random_state

from benchmarks.lib.measure import machine, table_head, write_report
from braindecode_pars import PARSFineTuner, PARSProbe
from braindecode_pars.models.multichannel import MultiChannelClassifier
from tests._helpers import relative_amplitude_task

RESULTS = Path(__file__).resolve().parent / "results"


class SharedScale(MultiChannelClassifier):
    """One normalisation per window shared by its channels: each channel minus its mean
    over time, divided by the root mean variance of the window's channels; the
    encoder's own instance normalisation bypassed (its tokenizer, positional embedding
    and blocks as they are)."""

    def spatial_tokens(self, X):
        B, C, T = X.shape
        X = X.float() - X.float().mean(-1, keepdim=True)
        scale = X.pow(2).mean(dim=(1, 2), keepdim=True).sqrt().clamp_min(1e-30)
        X = (X / scale).reshape(B * C, 1, T)
        enc = self.encoder
        starts = enc.fixed_starts(T, device=X.device)
        tokens = enc.tokenizer(enc.cut_patches(X, starts)) + enc.position_embedding(starts)
        return enc.encode(tokens).mean(dim=1).view(B, C, -1)


class Overlapping(MultiChannelClassifier):
    """Patches on a half-patch stride: 7 tokens per 4-s window instead of 4."""

    def spatial_tokens(self, X):
        B, C, T = X.shape
        starts = self.encoder.fixed_starts(T, self.encoder.patch_size // 2, X.device)
        return self.encoder(X.reshape(B * C, 1, T), starts=starts).mean(dim=1).view(B, C, -1)


class TimeAndChannels(MultiChannelClassifier):
    """The query attends to every patch token of every channel (each with its channel's
    embedding), not to one mean token per channel."""

    def forward(self, X, return_features=False):
        B, C, T = X.shape
        tokens = self.encoder(X.reshape(B * C, 1, T))  # (B * C, P, E)
        tokens = tokens.view(B, C, tokens.shape[1], -1) + self.channel_embedding[:, :, None]
        tokens = tokens.reshape(B, -1, tokens.shape[-1])
        pooled, _ = self.spatial_attn(
            self.query.expand(B, -1, -1), tokens, tokens, need_weights=False
        )
        features = self.norm(pooled[:, 0])
        if return_features:
            return {"features": features, "cls_token": None}
        return self.final_layer(features)


def augmentation(sfreq, seed, dropout):
    """The ``"standard"`` augmentation as it was before issue 77 (``dropout``: with
    ``ChannelsDropout`` on any number of channels) or as it is on these two channels
    (without): the same transforms and draws, so that rows keep their meaning."""
    rng = check_random_state(seed)  # one stream shared by the transforms, as the library's
    return [
        FTSurrogate(0.5, random_state=rng),
        *([ChannelsDropout(0.5, p_drop=0.2, random_state=rng)] if dropout else []),
        SmoothTimeMask(0.5, mask_len_samples=int(round(sfreq)), random_state=rng),
    ]


#: row name -> (label, PARSFineTuner parameters); "augmentation": True or False is
#: ``augmentation(..., dropout=...)``. Every row but "relative-nodrop" is the model of
#: the defaults before issue 77 (amplitude=False, ChannelsDropout) but for its change.
ROWS = {
    "today": (
        "per channel and window (the defaults before issue 77)",
        {"amplitude": False, "augmentation": True},
    ),
    "token": (
        "amplitude=True (added to the spatial tokens)",
        {"amplitude": True, "augmentation": True},
    ),
    "relative": (
        'amplitude="relative" (into the pooled token)',
        {"amplitude": "relative", "augmentation": True},
    ),
    "relative-nodrop": (
        'amplitude="relative", no ChannelsDropout (the defaults after issue 77)',
        {"amplitude": "relative", "augmentation": False},
    ),
    "shared": (
        "one scale per window across channels",
        {"module": SharedScale, "amplitude": False, "augmentation": True},
    ),
    "overlap": (
        "overlapping patches (0.5-s stride)",
        {"module": Overlapping, "amplitude": False, "augmentation": True},
    ),
    "pool": (
        "pooling over time and channels",
        {"module": TimeAndChannels, "amplitude": False, "augmentation": True},
    ),
}
ENCODERS = {"scratch": None, "pars-small-v2": "pars-small-v2"}
#: what the commits of the runs in ``finetuning_amplitude.jsonl`` mean (``+``: files
#: edited when the run wrote its rows)
COMMITS_NOTE = (
    "`df2d1b8+`: the 20-epoch rows of the first run (all but the two `relative` rows) "
    "ran before the library's change was committed; none of them uses "
    '`amplitude="relative"`, and `amplitude=True` computed what it computes at f5c6b84. '
    "`f5c6b84+`: the 200-epoch rows ran the code of f5c6b84 (docs were edited while "
    "they ran). The last three remedies were run at 20 epochs only."
)


def commit():
    """The checkout's commit, with ``+`` when it has changes."""
    run = lambda *a: subprocess.run(a, capture_output=True, text=True).stdout.strip()  # noqa: E731
    head = run("git", "rev-parse", "--short", "HEAD")
    return head + ("+" if run("git", "status", "--porcelain", "--untracked-files=no") else "")


def run(rows, epochs, seed, out):
    """Fit each row over each encoder; append one JSON line per fit to ``out``."""
    Xf, yf, Xs, ys, sfreq = relative_amplitude_task(seed=seed)
    torch.set_num_threads(1)  # after the imports (tests' conftest sets its own)
    start = time.perf_counter()
    probe = PARSProbe(sfreq=sfreq).fit(Xf, yf)
    records = [
        dict(
            row="probe", encoder="-", epochs=0, seed=seed,
            balanced_accuracy=balanced_accuracy_score(ys, probe.predict(Xs)),
            fit_seconds=time.perf_counter() - start,
        )
    ]  # fmt: skip
    for name in rows:
        for enc_name, encoder in ENCODERS.items():
            params = dict(ROWS[name][1], encoder=encoder, sfreq=sfreq, random_state=seed)
            dropout = params.pop("augmentation", True)
            params["augmentation"] = augmentation(sfreq, seed, dropout)
            clf = PARSFineTuner(max_epochs=epochs, **params)
            start = time.perf_counter()
            clf.fit(Xf, yf)
            seconds = time.perf_counter() - start
            records.append(
                dict(
                    row=name, encoder=enc_name, epochs=epochs, seed=seed,
                    balanced_accuracy=balanced_accuracy_score(ys, clf.predict(Xs)),
                    fit_seconds=seconds,
                    train_loss=[round(float(h["train_loss"]), 4) for h in clf.history_],
                )
            )  # fmt: skip
            print(json.dumps({k: v for k, v in records[-1].items() if k != "train_loss"}))
    with open(out, "a") as f:
        for record in records:
            f.write(json.dumps(dict(record, commit=commit(), machine=machine())) + "\n")


def report(jsonl, out):
    """The table of every fit in ``jsonl`` (the last of each row, encoder and epochs)."""
    rows = {}
    for line in Path(jsonl).read_text().splitlines():
        r = json.loads(line)
        rows[(r["row"], r["epochs"], r["encoder"])] = r
    lines = [
        "# Fine-tuning on relative amplitude across channels",
        "",
        "Written by `python -m benchmarks.bench_finetuning_amplitude --report` from "
        "`finetuning_amplitude.jsonl` (the task, the rows and the commands: the script's "
        "docstring). `PARSFineTuner` at the library's defaults but for the row's model "
        "and `max_epochs`; balanced accuracy on 160 held-out windows (chance 0.5), seed 0; "
        "fit seconds on one thread of a 2-core x86_64 CPU shared with other jobs.",
        "",
        *table_head(
            "remedy", "epochs", "from scratch", "over pars-small-v2", "fit s (scratch / v2)"
        ),
    ]
    probe = [r for (name, _, _), r in rows.items() if name == "probe"]
    if probe:
        p = probe[-1]
        lines.append(
            f"| `PARSProbe()` (band power, tangent space) | - | {p['balanced_accuracy']:.3f} "
            f"| - | {p['fit_seconds']:.1f} |"
        )
    keys = {(n, e) for n, e, _ in rows if n != "probe"}
    keys = sorted(keys, key=lambda k: (k[1], list(ROWS).index(k[0])))
    for name, epochs in keys:
        cells = [rows.get((name, epochs, enc)) for enc in ENCODERS]
        acc = [f"{c['balanced_accuracy']:.3f}" if c else "-" for c in cells]
        secs = " / ".join(f"{c['fit_seconds']:.0f}" if c else "-" for c in cells)
        lines.append(f"| {ROWS[name][0]} | {epochs} | {acc[0]} | {acc[1]} | {secs} |")
    commits = sorted({r["commit"] for r in rows.values()})
    lines += ["", f"Commits of the runs: {', '.join(commits)}; machine: "
              f"{sorted({r['machine'] for r in rows.values()})[0]}.", "", COMMITS_NOTE]  # fmt: skip
    write_report(lines, out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "finetuning_amplitude.jsonl")
    parser.add_argument("--report", action="store_true", help="write the table and stop")
    args = parser.parse_args(argv)
    if args.report:
        report(args.out, args.out.with_suffix(".md"))
        return
    run(args.rows, args.epochs, args.seed, args.out)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
