"""What a linear readout of an encoder's tokens recovers: position, band power, channel,
subject and task.

For the shipped PARS encoder (``pars-small-v2``), the MAE encoder of the same size
(``benchmarks/encoders/mae-small``) and randomly initialised encoders of that size, the
tokens of single-channel 10-s windows of EEGMAT's 12 test subjects (bundled with the
package; neither pretrained encoder saw them; the development tasks' test subjects, so
nothing is to be chosen from these numbers) are read by linear models, every one
cross-validated so that the windows it is scored on come from subjects (or, for the
subject itself, from times of the recordings) it was not fitted on:

- **position**: a token's start second in the window (9 bins of 1 s; balanced accuracy,
  chance 1/9; and the R^2 of its start), from single tokens of 40 patches at random
  starts in a 10-s window, as in pretraining, with the positional embedding *given* to
  every patch, *withheld* from 80 % of them (the mask token instead, as PARS's
  pretraining does; the score is on the masked tokens, the other 20 % anchor them) and
  withheld from *all* of them (the order of the patches cannot be read; how many other
  patches overlap the scored one, fewer near the window's ends, can: its R^2 is given);
- **band power**: the log power of the patch in each band (delta 0.5-4, theta 4-8,
  alpha 8-13, beta 13-30, gamma 30-45 Hz), of the patch as the encoder sees it (after
  its instance normalisation of the window), from single tokens of the fixed grid of
  ten 1-s patches (R^2 per band), against a linear readout of the patch's own samples;
- **channel**: which of the 19 electrodes a single-channel window is, from its mean
  token (balanced accuracy, chance 1/19);
- **subject**: which of the subjects a single-channel window comes from, from its mean
  token; the folds split each recording into contiguous blocks of time (fold k tests
  block k of every recording), so the same recordings are on both sides but never the
  same windows or times (balanced accuracy, chance 1 / n_subjects);
- **task**: rest or mental arithmetic, from readouts of all the window's tokens (19
  channels): ``mean``, ``mean+std`` and ``max`` over channels and patches, and the mean
  (``channels mean``) or mean and standard deviation (``channels mean+std``) of each
  channel, concatenated, as the probe reads the encoder; each against the log band power
  of the raw window (the floor's features) and of the normalised window. Leave one
  subject out; the logistic regression's ``C`` chosen inside each training fold by a
  grouped inner split; balanced accuracy per held-out subject.

Band power, channel, subject and task are read both from the tokens the probe reads (the
fixed grid, positional embedding given) and with the positional embedding withheld from
every patch. Features are standardised inside each training fold; token-level models are
fitted on a fixed random subsample of the tokens (the same for every encoder).

Usage::

    python -m benchmarks.bench_token_readout --out benchmarks/results/token_readout.md
    python -m benchmarks.bench_token_readout --quick  # seconds: 4 subjects, 4 channels
"""

from __future__ import annotations

import argparse
import copy
import logging
import time
from pathlib import Path

import numpy as np
import torch
from scipy.signal import get_window
from sklearn.linear_model import LogisticRegression, RidgeCV
from sklearn.metrics import balanced_accuracy_score, r2_score
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from benchmarks.lib.encoders import ENCODERS, benchmark_encoder
from benchmarks.lib.measure import check_at_least_one, command_line
from braindecode_pars.datasets import bundled_data_path
from braindecode_pars.features.blocks import DEFAULT_BANDS

logger = logging.getLogger("bench_token_readout")

ROOT = Path(__file__).resolve().parents[1]
#: The encoders read, by row name: a shipped name or a folder of the repository.
PRETRAINED = {
    "PARS (pars-small-v2)": "pars-small-v2",
    "MAE (mae-small)": str(ENCODERS / "mae-small"),
}
#: The bands of the band-power target, ``(name, low, high)`` in Hz, half-open: the
#: probe's bands with its two beta bands as one.
BANDS = (*DEFAULT_BANDS[:3], ("beta", 13.0, 30.0), DEFAULT_BANDS[-1])
#: The window-level readouts of the task, in report order.
TASK_READOUTS = ("mean", "mean+std", "max", "channels mean", "channels mean+std")
#: Band-power references of the task, channel and subject (encoder-free rows).
REFERENCES = ("band power (raw)", "band power (normalised)")
#: Share of the patches whose positional embedding is withheld, as in pretraining.
POS_MASK_RATIO = 0.8
#: Patches per window in the position measurement, as in pretraining.
N_POSITION_PATCHES = 40
#: ``C`` of the token-level logistic regressions (n >> features: barely matters).
TOKEN_C = 1.0
#: ``C`` values the task's inner split chooses from.
TASK_CS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
#: Ridge penalties the regressions choose from by efficient leave-one-out on their fold.
RIDGE_ALPHAS = tuple(np.logspace(-2, 4, 7))


# -- data ------------------------------------------------------------------------------
def load_eegmat_windows(subjects, window_seconds=10.0, channels=None):
    """Non-overlapping windows of the bundled EEGMAT recordings (microvolts, 100 Hz).

    Returns a dict: ``X`` (n_windows, n_chans, n_times) float32, ``subject``, ``target``
    (0 rest, 1 arithmetic), ``index`` (the window's place within its recording),
    ``n_in_recording`` (that recording's number of windows), ``ch_names``, ``sfreq``.
    """
    with np.load(bundled_data_path() / "eegmat_100hz.npz") as f:
        ch_names = [str(c) for c in f["ch_names"]]
        sfreq = float(f["sfreq"])
        picks = list(range(len(ch_names))) if channels is None else list(channels)
        size = int(round(window_seconds * sfreq))
        X, subject, target, index, count = [], [], [], [], []
        for s in subjects:
            for session in (1, 2):
                data = f[f"s{int(s):02d}_{session}"][picks].astype(np.float32)
                n = data.shape[-1] // size
                X.append(data[:, : n * size].reshape(len(picks), n, size).transpose(1, 0, 2))
                subject += [int(s)] * n
                target += [session - 1] * n
                index += list(range(n))
                count += [n] * n
    return dict(
        X=np.concatenate(X),
        subject=np.asarray(subject),
        target=np.asarray(target),
        index=np.asarray(index),
        n_in_recording=np.asarray(count),
        ch_names=[ch_names[p] for p in picks],
        sfreq=sfreq,
    )


def time_blocks(index, n_in_recording, n_blocks):
    """Block ``k`` of ``n_blocks`` contiguous blocks of time within each recording."""
    return np.minimum(index * n_blocks // n_in_recording, n_blocks - 1)


# -- encoders and tokens -----------------------------------------------------------------
def build_encoders(seeds, pretrained=PRETRAINED):
    """The encoders by row name: the pretrained ones, then one random one per seed, of
    the size of the first pretrained encoder."""
    from braindecode_pars import PatchEncoder, load_encoder

    encoders = {
        name: copy.deepcopy(load_encoder(benchmark_encoder(path))).eval()
        for name, path in pretrained.items()
    }
    reference = next(iter(encoders.values()))
    for seed in seeds:
        torch.manual_seed(seed)
        encoder = PatchEncoder.from_config(reference.config, reference.sfreq)
        encoders[f"random (seed {seed})"] = encoder.eval()
    return encoders


def tokens_at(encoder, X, starts, pos_mask, batch_size=512):
    """The last block's tokens of single-channel windows ``X`` (n, 1, n_times) at
    ``starts`` (n, n_patches), the mask token where ``pos_mask`` (n, n_patches) is True;
    (n, n_patches, emb_dim) float32."""
    out = []
    with torch.no_grad():
        for i in range(0, len(X), batch_size):
            x = torch.as_tensor(X[i : i + batch_size])
            s = torch.as_tensor(starts[i : i + batch_size])
            m = torch.as_tensor(pos_mask[i : i + batch_size])
            out.append(encoder(x, starts=s, pos_mask=m).numpy())
    return np.concatenate(out)


def grid_tokens(encoder, X, withheld=False):
    """Tokens of every channel of ``X`` (n, n_chans, n_times) on the fixed grid of 1-patch
    stride, as the probe reads them (``withheld``: the mask token on every patch instead
    of the positional embedding); (n, n_chans, n_patches, emb_dim)."""
    n, c, t = X.shape
    starts = encoder.fixed_starts(t).numpy()
    flat = X.reshape(n * c, 1, t)
    S = np.tile(starts, (n * c, 1))
    M = np.full(S.shape, withheld)
    tokens = tokens_at(encoder, flat, S, M)
    return tokens.reshape(n, c, len(starts), -1)


def patch_band_power(X, patch_size, sfreq, bands=BANDS, eps=1e-5):
    """Log10 band power of the fixed-grid patches of each channel of ``X`` (n, n_chans,
    n_times) after the encoder's instance normalisation of the window: the Hann-windowed
    periodogram of each patch less its mean, the mean over a band's bins; (n, n_chans,
    n_patches, n_bands)."""
    mean = X.mean(-1, keepdims=True)
    std = X.std(-1, keepdims=True)
    Z = np.where(std > eps * np.sqrt((X**2).mean(-1, keepdims=True)), (X - mean) / std, 0.0)
    n_patches = X.shape[-1] // patch_size
    patches = Z[..., : n_patches * patch_size].reshape(*X.shape[:-1], n_patches, patch_size)
    patches = patches - patches.mean(-1, keepdims=True)  # the patch's offset is not delta
    window = get_window("hann", patch_size)  # periodic, as scipy's and MNE's Welch use
    spec = np.abs(np.fft.rfft(patches * window, axis=-1)) ** 2 / (sfreq * (window**2).sum())
    freqs = np.fft.rfftfreq(patch_size, 1 / sfreq)
    power = [spec[..., (freqs >= lo) & (freqs < hi)].mean(-1) for _, lo, hi in bands]
    return np.log10(np.maximum(np.stack(power, -1), np.finfo(np.float64).tiny))


def window_readouts(tokens):
    """The task readouts of grid tokens (n, n_chans, n_patches, F), by name."""
    n, c, p, f = tokens.shape
    pooled = tokens.reshape(n, c * p, f)
    per_channel = tokens.mean(2).reshape(n, c * f)
    per_channel_std = tokens.std(2).reshape(n, c * f)
    return {
        "mean": pooled.mean(1),
        "mean+std": np.concatenate([pooled.mean(1), pooled.std(1)], 1),
        "max": pooled.max(1),
        "channels mean": per_channel,
        "channels mean+std": np.concatenate([per_channel, per_channel_std], 1),
    }


def window_band_power(X, sfreq, normalised=False):
    """Log band power per channel of whole windows (the floor's six bands, Welch);
    ``normalised``: of the window after instance normalisation; (n, n_chans, n_bands)."""
    from braindecode_pars.features.blocks import DEFAULT_BANDS, BandPowerFeatures

    X = X.astype(np.float64)
    if normalised:
        X = (X - X.mean(-1, keepdims=True)) / np.maximum(X.std(-1, keepdims=True), 1e-12)
    features = BandPowerFeatures(sfreq=sfreq).fit_transform(X)
    return features.reshape(len(X), X.shape[1], len(DEFAULT_BANDS))


# -- readouts ----------------------------------------------------------------------------
def _splits(groups, n_splits):
    return list(
        GroupKFold(n_splits=min(n_splits, len(np.unique(groups)))).split(groups, groups=groups)
    )


def classify_folds(X, y, groups, n_splits, C=TOKEN_C):
    """Balanced accuracy of a standardised logistic regression on each held-out fold of
    groups."""
    scores = []
    for train, test in _splits(groups, n_splits):
        model = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000))
        model.fit(X[train], y[train])
        scores.append(balanced_accuracy_score(y[test], model.predict(X[test])))
    return np.asarray(scores)


def regress_folds(X, Y, groups, n_splits):
    """R^2 of a standardised ridge regression (penalty chosen on the training fold) on
    each held-out fold of groups, per column of ``Y`` (n, n_targets);
    (n_folds, n_targets)."""
    Y = Y.reshape(len(Y), -1)
    scores = []
    for train, test in _splits(groups, n_splits):
        model = make_pipeline(StandardScaler(), RidgeCV(alphas=RIDGE_ALPHAS))
        model.fit(X[train], Y[train])
        pred = model.predict(X[test]).reshape(len(test), -1)
        scores.append([r2_score(Y[test, j], pred[:, j]) for j in range(Y.shape[1])])
    return np.asarray(scores)


def _logistic(C):
    return make_pipeline(
        StandardScaler(), LogisticRegression(C=C, class_weight="balanced", max_iter=2000)
    )


def task_folds(X, y, groups, Cs=TASK_CS, inner_splits=3):
    """Balanced accuracy on each held-out group (leave one group out) of a class-balanced
    logistic regression whose ``C`` is chosen on the training groups by a grouped inner
    split; (scores per group, C chosen per group)."""
    scores, chosen = [], []
    for held in np.unique(groups):
        train, test = np.flatnonzero(groups != held), np.flatnonzero(groups == held)
        inner = _splits(groups[train], inner_splits)
        inner_score = []
        for C in Cs:
            s = []
            for a, b in inner:
                model = _logistic(C).fit(X[train][a], y[train][a])
                s.append(balanced_accuracy_score(y[train][b], model.predict(X[train][b])))
            inner_score.append(np.mean(s))
        C = Cs[int(np.argmax(inner_score))]
        model = _logistic(C).fit(X[train], y[train])
        scores.append(balanced_accuracy_score(y[test], model.predict(X[test])))
        chosen.append(C)
    return np.asarray(scores), chosen


# -- the measurement --------------------------------------------------------------------
def _row(encoder, target, condition, metric, chance, scores, **extra):
    scores = np.asarray(scores, dtype=float)
    return dict(
        encoder=encoder,
        target=target,
        condition=condition,
        metric=metric,
        chance=chance,
        mean=float(scores.mean()),
        std=float(scores.std(ddof=1)) if len(scores) > 1 else 0.0,
        n_folds=len(scores),
        scores=";".join(f"{s:.4f}" for s in scores),
        **extra,
    )


class Design:
    """What every encoder is measured on: the windows, the draws and the folds, fixed
    once so that every encoder is read on the same tokens."""

    def __init__(self, data, patch_size, n_tokens, n_splits, seed=0):
        rng = np.random.default_rng(seed)
        X = data["X"]
        n, c, t = X.shape
        self.data, self.n_splits, self.patch_size = data, n_splits, patch_size
        self.n_subjects = len(np.unique(data["subject"]))
        # single-channel windows, (window, channel) pairs
        self.chan = np.tile(np.arange(c), n)
        self.win = np.repeat(np.arange(n), c)
        self.flat_subject = data["subject"][self.win]
        self.flat_block = time_blocks(data["index"], data["n_in_recording"], n_splits)[self.win]
        # position: 40 random starts per single-channel window, 80 % masked
        n_flat, k = n * c, N_POSITION_PATCHES
        self.starts = rng.integers(0, t - patch_size + 1, size=(n_flat, k))
        self.masked = np.zeros((n_flat, k), dtype=bool)
        n_masked = int(round(POS_MASK_RATIO * k))
        order = rng.permuted(np.tile(np.arange(k), (n_flat, 1)), axis=1)
        np.put_along_axis(self.masked, order[:, :n_masked], True, axis=1)
        # the tokens scored: up to n_tokens (single-channel window, masked patch) pairs
        per_window = max(1, min(n_masked, -(-n_tokens // n_flat)))
        pick = order[:, :per_window]  # masked patches, first of each window's order
        self.pos_rows = np.repeat(np.arange(n_flat), per_window)
        self.pos_cols = pick.reshape(-1)
        keep = rng.permutation(len(self.pos_rows))[:n_tokens]
        self.pos_rows, self.pos_cols = self.pos_rows[keep], self.pos_cols[keep]
        start = self.starts[self.pos_rows, self.pos_cols]
        self.pos_seconds = start / data["sfreq"]
        # how many of the window's other patches share samples with the scored one: fewer
        # near the window's ends, readable without any positional embedding
        others = np.abs(self.starts[self.pos_rows] - start[:, None]) < patch_size
        self.pos_overlap = (others.sum(1) - 1).astype(float)
        # 1-s bins of the start; a start at exactly t - patch_size joins the last bin
        self.n_pos_bins = (t - patch_size) // patch_size
        self.pos_bin = np.minimum(start // patch_size, self.n_pos_bins - 1)
        # band power: grid tokens of single-channel windows, a fixed subsample
        n_grid = t // patch_size
        cells = rng.permutation(n_flat * n_grid)[:n_tokens]
        self.bp_flat, self.bp_patch = cells // n_grid, cells % n_grid
        power = patch_band_power(X, patch_size, data["sfreq"]).reshape(n_flat, n_grid, -1)
        self.bp_target = power[self.bp_flat, self.bp_patch]
        # the encoder-free references
        self.references = {
            "band power (raw)": window_band_power(X, data["sfreq"]),
            "band power (normalised)": window_band_power(X, data["sfreq"], normalised=True),
        }
        self.patch_samples = self._patch_samples()

    def _patch_samples(self):
        X = self.data["X"]
        n, c, t = X.shape
        Z = (X - X.mean(-1, keepdims=True)) / np.maximum(X.std(-1, keepdims=True), 1e-12)
        n_grid = t // self.patch_size
        patches = Z[..., : n_grid * self.patch_size].reshape(n * c, n_grid, self.patch_size)
        return patches[self.bp_flat, self.bp_patch]


def measure_position(name, encoder, design):
    """Rows of the position readout, for the three positional conditions."""
    X = design.data["X"]
    n, c, t = X.shape
    flat = X.reshape(n * c, 1, t)
    rows = []
    conditions = {
        "PE given": np.zeros_like(design.masked),
        "PE withheld (80 %)": design.masked,
        "PE withheld (all)": np.ones_like(design.masked),
    }
    needed = np.unique(design.pos_rows)
    local = np.searchsorted(needed, design.pos_rows)
    groups = design.flat_subject[design.pos_rows]
    for condition, mask in conditions.items():
        tokens = tokens_at(encoder, flat[needed], design.starts[needed], mask[needed])
        T = tokens[local, design.pos_cols]
        acc = classify_folds(T, design.pos_bin, groups, design.n_splits)
        rows.append(
            _row(name, "position", condition, "balanced accuracy", 1 / design.n_pos_bins, acc)
        )
        Y = np.c_[design.pos_seconds, design.pos_overlap]
        r2 = regress_folds(T, Y, groups, design.n_splits)
        rows.append(_row(name, "position (start, s)", condition, "R^2", 0.0, r2[:, 0]))
        rows.append(_row(name, "overlapping patches", condition, "R^2", 0.0, r2[:, 1]))
    return rows


def measure_grid(name, tokens, design):
    """Rows of the band-power, channel, subject and task readouts of grid ``tokens``
    (n, n_chans, n_patches, F) of one condition (set by the caller)."""
    n, c, p, f = tokens.shape
    flat = tokens.reshape(n * c, p, f)
    groups = design.flat_subject
    rows = []
    T = flat[design.bp_flat, design.bp_patch]
    r2 = regress_folds(T, design.bp_target, groups[design.bp_flat], design.n_splits)
    for j, (band, _, _) in enumerate(BANDS):
        rows.append(_row(name, f"band power: {band}", None, "R^2", 0.0, r2[:, j]))
    mean_token = flat.mean(1)
    rows += _identity_rows(name, mean_token, design)
    return rows + _task_rows(name, window_readouts(tokens), design)


def _identity_rows(name, features, design):
    """Channel (held-out subjects) and subject (held-out blocks of time) readouts of
    single-channel window features."""
    acc = classify_folds(features, design.chan, design.flat_subject, design.n_splits)
    rows = [_row(name, "channel", None, "balanced accuracy", 1 / len(np.unique(design.chan)), acc)]
    acc = classify_folds(features, design.flat_subject, design.flat_block, design.n_splits)
    rows.append(_row(name, "subject", None, "balanced accuracy", 1 / design.n_subjects, acc))
    return rows


def _task_rows(name, readouts, design):
    rows = []
    for readout, features in readouts.items():
        scores, chosen = task_folds(features, design.data["target"], design.data["subject"])
        rows.append(
            _row(
                name,
                f"task: {readout}",
                None,
                "balanced accuracy",
                0.5,
                scores,
                C_chosen=" ".join(f"{C:g}" for C in chosen),
            )
        )
    return rows


def measure_references(design):
    """The encoder-free rows: band power of the patch samples (a linear readout of the
    normalised patch itself), and channel, subject and task from window band power."""
    groups = design.flat_subject[design.bp_flat]
    r2 = regress_folds(design.patch_samples, design.bp_target, groups, design.n_splits)
    rows = [
        _row("patch samples", f"band power: {band}", "no encoder", "R^2", 0.0, r2[:, j])
        for j, (band, _, _) in enumerate(BANDS)
    ]
    for name, power in design.references.items():
        n, c, b = power.shape
        rows += [
            dict(r, condition="no encoder")
            for r in _identity_rows(name, power.reshape(n * c, b), design)
        ]
        task = {"channels": power.reshape(n, c * b)}
        rows += [dict(r, condition="no encoder") for r in _task_rows(name, task, design)]
    return rows


def measure_encoder(name, encoder, design):
    """Every row of one encoder."""
    t0 = time.perf_counter()
    rows = measure_position(name, encoder, design)
    for withheld in (False, True):
        condition = "PE withheld (all)" if withheld else "PE given"
        tokens = grid_tokens(encoder, design.data["X"], withheld=withheld)
        rows += [dict(r, condition=condition) for r in measure_grid(name, tokens, design)]
    logger.info("%s: %d rows in %.0f s", name, len(rows), time.perf_counter() - t0)
    return rows


# -- report ------------------------------------------------------------------------------
def encoder_family(name):
    """The report's column of an encoder row: random seeds share one."""
    return "random" if name.startswith("random (seed") else name


def summarise(rows):
    """Per (family, target, condition): mean over folds (over seeds' means for the random
    encoders), the spread over folds (mean of the seeds' fold std) and, for several
    seeds, the seeds' means."""
    out = {}
    for r in rows:
        key = (encoder_family(r["encoder"]), r["target"], r["condition"])
        out.setdefault(key, []).append(r)
    summary = {}
    for key, group in out.items():
        means = [g["mean"] for g in group]
        summary[key] = dict(
            mean=float(np.mean(means)),
            fold_std=float(np.mean([g["std"] for g in group])),
            seed_means=means,
            chance=group[0]["chance"],
            metric=group[0]["metric"],
            n_folds=group[0]["n_folds"],
        )
    return summary


def cell(s):
    if s is None:
        return "-"
    text = f"{s['mean']:.3f} ± {s['fold_std']:.3f}"
    if len(s["seed_means"]) > 1:
        text += f" [{min(s['seed_means']):.3f}, {max(s['seed_means']):.3f}]"
    return text


def ordered_keys(summary, families):
    """(target, condition) pairs of the encoder rows, in report order."""
    keys = []
    for fam, target, condition in summary:
        if fam in families and (target, condition) not in keys:
            keys.append((target, condition))
    order = ["position", "position (start, s)", "overlapping patches"]
    order += [f"band power: {b}" for b, _, _ in BANDS]
    order += ["channel", "subject"] + [f"task: {r}" for r in TASK_READOUTS]
    conds = ["PE given", "PE withheld (80 %)", "PE withheld (all)"]
    return sorted(keys, key=lambda k: (conds.index(k[1]), order.index(k[0])))


def report(rows, args, design_info, seconds):
    """The Markdown report's lines."""
    summary = summarise(rows)
    families = [
        f
        for f in dict.fromkeys(encoder_family(r["encoder"]) for r in rows)
        if f not in ("patch samples", *REFERENCES)
    ]
    n_seeds = len({r["encoder"] for r in rows if r["encoder"].startswith("random (seed")})
    header = [f if f != "random" else f"random ({n_seeds} seeds)" for f in families]
    lines = [
        "# What a linear readout of the tokens recovers",
        "",
        f"Command: `{args.command}`. {design_info}. Run time {seconds / 60:.1f} min on "
        "one torch thread.",
        "",
        "Cells: mean over the cross-validation folds ± their standard deviation; for the "
        "random encoders the mean over seeds of that, the fold spread averaged over the "
        "seeds, and in brackets the lowest and highest seed. Balanced accuracy (chance "
        "given) or R^2 (0 = predicting the training mean). Folds: held-out subjects "
        "(GroupKFold) for position, band power and channel; held-out blocks of time "
        "within every recording for subject; leave one subject out for the task, `C` "
        "chosen on the training subjects. `PE given`: the positional embedding on every "
        "patch; `PE withheld (80 %)`: the mask token on 80 % of 40 randomly placed "
        "patches, scored on those (as pretraining hides them); `PE withheld (all)`: the "
        "mask token on every patch.",
        "",
        "| target | condition | chance | " + " | ".join(header) + " |",
        "|---|---|---|" + "---|" * len(header),
    ]
    for target, condition in ordered_keys(summary, families):
        chance = next(
            summary[(f, target, condition)]["chance"]
            for f in families
            if (f, target, condition) in summary
        )
        cells = [cell(summary.get((f, target, condition))) for f in families]
        lines.append(f"| {target} | {condition} | {chance:.3f} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Encoder-free references (same folds): a linear readout of the normalised patch's "
        "samples (band power), and the log band power (six bands, Welch) of each "
        "channel's window in microvolts (`raw`) or after instance normalisation "
        "(`normalised`); for the task, all channels' band powers side by side (the floor's "
        "features).",
        "",
        "| target | reference | chance | score |",
        "|---|---|---|---|",
    ]
    for (fam, target, _condition), s in summary.items():
        if fam in ("patch samples", *REFERENCES):
            lines.append(f"| {target} | {fam} | {s['chance']:.3f} | {cell(s)} |")
    chosen = [
        (r["encoder"], r["target"], r["condition"], r["C_chosen"])
        for r in rows
        if r.get("C_chosen")
    ]
    lines += ["", "`C` chosen per held-out subject for the task readouts (first rows):", ""]
    lines += [f"- {e}, {t}, {c}: {C}" for e, t, c, C in chosen[:6]]
    return lines


# -- command line ------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="the Markdown report")
    parser.add_argument("--quick", action="store_true",
        help="seconds: 4 subjects, 4 channels, one random seed, few tokens")  # fmt: skip
    parser.add_argument("--seeds", type=int, default=5, help="random encoders (seeds 0..n-1)")
    parser.add_argument("--tokens", type=int, default=12000,
        help="tokens scored by the token-level readouts")  # fmt: skip
    parser.add_argument("--folds", type=int, default=4, help="folds of the grouped splits")
    args = parser.parse_args(argv)
    check_at_least_one(parser, args, "seeds", "tokens")
    if args.folds < 2:
        parser.error(f"--folds must be at least 2, got {args.folds}")
    args.command = command_line("benchmarks.bench_token_readout", argv)
    return args


def main(argv=None):
    from braindecode_pars.datasets.eegmat import EEGMAT_TEST_SUBJECTS

    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    subjects, channels = EEGMAT_TEST_SUBJECTS, None
    if args.quick:
        subjects, channels = EEGMAT_TEST_SUBJECTS[:4], (0, 6, 10, 17)
        args.seeds, args.tokens = 1, min(args.tokens, 1500)
    data = load_eegmat_windows(subjects, channels=channels)
    encoders = build_encoders(range(args.seeds))
    patch_size = next(iter(encoders.values())).patch_size
    design = Design(data, patch_size, args.tokens, args.folds)
    info = (
        f"EEGMAT test subjects {', '.join(map(str, subjects))} (bundled, 0.3-45 Hz, 100 Hz; "
        f"in neither encoder's pretraining corpus), {len(data['ch_names'])} channels, "
        f"{len(data['X'])} windows of 10 s ({int((data['target'] == 0).sum())} rest, "
        f"{int((data['target'] == 1).sum())} arithmetic); {len(design.pos_rows)} tokens per "
        f"token-level readout, {args.folds} folds"
    )
    logger.info(info)
    rows = measure_references(design)
    for name, encoder in encoders.items():
        rows += measure_encoder(name, encoder, design)
    seconds = time.perf_counter() - t0
    lines = report(rows, args, info, seconds)
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
        logger.info("wrote %s", args.out)
    else:
        print(text)
    return rows


if __name__ == "__main__":
    main()
