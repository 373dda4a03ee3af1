"""The token-readout benchmark: its targets against an independent reference, its
bookkeeping of tokens and folds, and its readouts learning what data built for them hold
(and staying at chance on what they do not)."""

import argparse

import numpy as np
import pytest
import torch
from scipy.signal import periodogram

from benchmarks import bench_token_readout
from braindecode_pars import PatchEncoder
from tests._learning import SEED, learned

from .conftest import TINY, assert_refused

pytestmark = pytest.mark.usefixtures("one_thread")

SFREQ, PATCH = 100.0, 100


@pytest.fixture(scope="module")
def bench():
    return bench_token_readout


def synthetic(n_subjects=4, n_per_recording=(6, 3), n_chans=3, n_times=1000, seed=0):
    """Windows of white noise plus a 10-Hz and a 2-Hz oscillation whose amplitudes are
    drawn anew for every 1-s patch; the data dict the benchmark reads, and the log
    amplitudes (n_windows, n_chans, n_patches, 2)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n_times) / SFREQ
    X, amps, subject, target, index, count = [], [], [], [], [], []
    for s in range(n_subjects):
        for session, n in enumerate(n_per_recording):
            for i in range(n):
                log_amp = rng.uniform(-1, 1.5, size=(n_chans, n_times // PATCH, 2))
                amp = np.repeat(np.exp(log_amp), PATCH, axis=1)  # (n_chans, n_times, 2)
                x = rng.standard_normal((n_chans, n_times)) * 0.3
                x += amp[..., 0] * np.sin(2 * np.pi * 10 * t + rng.uniform(0, 6.3))
                x += amp[..., 1] * np.sin(2 * np.pi * 2 * t + rng.uniform(0, 6.3))
                X.append(x)
                amps.append(log_amp)
                subject.append(s)
                target.append(session)
                index.append(i)
                count.append(n)
    data = dict(
        X=np.asarray(X, dtype=np.float32),
        subject=np.asarray(subject),
        target=np.asarray(target),
        index=np.asarray(index),
        n_in_recording=np.asarray(count),
        ch_names=[f"ch{c}" for c in range(n_chans)],
        sfreq=SFREQ,
    )
    return data, np.asarray(amps)


def test_patch_band_power_matches_scipys_periodogram(bench):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((2, 3, 400)) * 5 + 2
    power = bench.patch_band_power(X, PATCH, SFREQ)
    assert power.shape == (2, 3, 4, len(bench.BANDS))
    Z = (X - X.mean(-1, keepdims=True)) / X.std(-1, keepdims=True)  # what the encoder sees
    for w, c, p in [(0, 0, 0), (1, 2, 3), (0, 1, 2)]:
        freqs, psd = periodogram(Z[w, c, p * PATCH : (p + 1) * PATCH], SFREQ, window="hann")
        psd[1:-1] /= 2  # scipy's one-sided density doubles the inner bins; the benchmark's
        # log power is of the two-sided periodogram, a constant offset of log10(2) per band
        for b, (_, lo, hi) in enumerate(bench.BANDS):
            expected = np.log10(psd[(freqs >= lo) & (freqs < hi)].mean())
            np.testing.assert_allclose(power[w, c, p, b], expected, rtol=1e-10)


def test_a_10_hz_patch_has_its_power_in_alpha(bench):
    t = np.arange(1000) / SFREQ
    X = np.sin(2 * np.pi * 10 * t)[None, None] + 0.01 * np.random.default_rng(0).standard_normal(
        (1, 1, 1000)
    )
    power = bench.patch_band_power(X, PATCH, SFREQ)[0, 0]
    names = [b for b, _, _ in bench.BANDS]
    assert (power.argmax(-1) == names.index("alpha")).all()


def test_time_blocks_are_contiguous_and_cover_every_recording(bench):
    index = np.r_[np.arange(18), np.arange(6)]
    count = np.r_[np.full(18, 18), np.full(6, 6)]
    blocks = bench.time_blocks(index, count, 4)
    assert blocks[:18].tolist() == sorted(blocks[:18].tolist())  # contiguous in time
    assert set(blocks[:18]) == set(blocks[18:]) == {0, 1, 2, 3}
    assert np.bincount(blocks[:18]).tolist() == [5, 4, 5, 4]


def test_readouts_learn_a_linear_target_and_stay_at_chance_on_noise(bench):
    rng = np.random.default_rng(SEED)
    n, groups = 600, np.repeat(np.arange(6), 100)
    target = rng.standard_normal(n)
    X = np.c_[target + 0.1 * rng.standard_normal(n), rng.standard_normal((n, 5))]
    noise = rng.standard_normal(n)
    r2 = bench.regress_folds(X, np.c_[target, noise], groups, 3)
    assert r2.shape == (3, 2)
    learned(r2[:, 0].min(), above=0.95, what="R^2 of the target, worst fold")
    learned(r2[:, 1].mean(), below=0.05, what="R^2 of noise")
    labels = (target > 0).astype(int)
    score = bench.classify_folds(X, labels, groups, 3).min()
    learned(score, above=0.9, what="labels, worst fold")
    chance = bench.classify_folds(X, rng.integers(0, 2, n), groups, 3).mean()
    learned(abs(chance - 0.5), below=0.08, what="random labels, off chance")


def test_the_task_readout_holds_out_each_subject_and_chooses_C_inside(bench):
    rng = np.random.default_rng(SEED)
    groups = np.repeat(np.arange(5), 24)
    y = np.tile(np.r_[np.zeros(18), np.ones(6)], 5).astype(int)
    X = np.c_[y + 0.3 * rng.standard_normal(len(y)), rng.standard_normal((len(y), 10))]
    scores, chosen = bench.task_folds(X, y, groups)
    assert len(scores) == len(chosen) == 5
    # balanced accuracy, chance 0.5: 0.72 to 0.97 for the worst subject over seeds 0-9
    learned(scores.min(), above=0.65, what="task, worst held-out subject")
    assert set(chosen) <= set(bench.TASK_CS)
    noise, _ = bench.task_folds(rng.standard_normal((len(y), 10)), y, groups)
    learned(abs(noise.mean() - 0.5), below=0.2, what="task from noise, off chance")


def test_grid_bookkeeping_pairs_each_token_with_its_own_patch(bench):
    """Tokens built from each patch's known log amplitudes: the band-power readout must
    find alpha and delta, and channel, subject and task (which the tokens do not hold)
    stay near chance. A token paired with another patch's target would score R^2 ~ 0."""
    data, amps = synthetic(seed=SEED)
    design = bench.Design(data, PATCH, n_tokens=600, n_splits=2)
    rng = np.random.default_rng(SEED)
    mixing = rng.standard_normal((2, 8))
    tokens = amps @ mixing + 0.05 * rng.standard_normal((*amps.shape[:3], 8))
    rows = {r["target"]: r for r in bench.measure_grid("synthetic", tokens, design)}
    learned(rows["band power: alpha"]["mean"], above=0.8, what="alpha")
    learned(rows["band power: delta"]["mean"], above=0.5, what="delta")
    for target in ("channel", "subject"):
        above_chance = rows[target]["mean"] - rows[target]["chance"]
        learned(above_chance, below=0.15, what=f"{target}, over chance")
    assert {f"task: {r}" for r in bench.TASK_READOUTS} <= set(rows)
    assert rows["task: mean"]["n_folds"] == 4  # one per held-out subject


def test_position_is_read_with_the_embedding_and_not_without_it(bench):
    data, _ = synthetic(n_subjects=4, n_per_recording=(4, 2), n_chans=2, seed=SEED)
    design = bench.Design(data, PATCH, n_tokens=1200, n_splits=2)
    torch.manual_seed(SEED)
    encoder = PatchEncoder(sfreq=SFREQ, **TINY).eval()
    rows = {
        (r["target"], r["condition"]): r for r in bench.measure_position("tiny", encoder, design)
    }
    chance = rows[("position", "PE given")]["chance"]
    assert chance == pytest.approx(1 / 9)
    learned(rows[("position", "PE given")]["mean"], above=0.5, what="position, PE given")
    start = rows[("position (start, s)", "PE given")]["mean"]
    learned(start, above=0.8, what="start (R^2), PE given")
    # no positional embedding anywhere: the order of the patches cannot be read
    withheld = rows[("position", "PE withheld (all)")]["mean"] - chance
    learned(withheld, below=0.06, what="position, PE withheld, over chance")
    start = rows[("position (start, s)", "PE withheld (all)")]["mean"]
    learned(start, below=0.05, what="start (R^2), PE withheld")


def test_the_withheld_mask_covers_80_percent_and_scores_only_masked_tokens(bench):
    data, _ = synthetic(n_subjects=2, n_per_recording=(2, 1), n_chans=2)
    design = bench.Design(data, PATCH, n_tokens=50, n_splits=2)
    assert design.masked.mean() == pytest.approx(bench.POS_MASK_RATIO)
    assert design.masked[design.pos_rows, design.pos_cols].all()
    assert len(design.pos_rows) == 50
    start = design.starts[design.pos_rows, design.pos_cols]
    assert np.array_equal(design.pos_seconds, start / SFREQ)
    assert design.pos_bin.min() >= 0 and design.pos_bin.max() <= 8
    # the overlap count, by a loop over the scored tokens' windows
    for i in range(0, 50, 7):
        row, col = design.pos_rows[i], design.pos_cols[i]
        others = [j for j in range(40) if j != col]
        shared = sum(abs(design.starts[row, j] - design.starts[row, col]) < PATCH for j in others)
        assert design.pos_overlap[i] == shared


def test_the_bundled_windows_are_the_recordings_cut_in_10_s(bench):
    data = bench.load_eegmat_windows((4,), channels=(0, 1))
    # subject 4: 170 s of rest, 62 s of arithmetic
    assert data["X"].shape == (17 + 6, 2, 1000)
    assert data["target"].tolist() == [0] * 17 + [1] * 6
    assert data["index"][:17].tolist() == list(range(17))
    assert data["ch_names"] == ["Fp1", "Fp2"]


def test_the_report_pools_random_seeds_and_keeps_each_encoder(bench):
    def row(encoder, mean, std):
        return bench._row(
            encoder, "channel", "PE given", "balanced accuracy", 1 / 19, [mean - std, mean + std]
        )

    rows = [row("PARS (pars-small-v2)", 0.30, 0.01), row("random (seed 0)", 0.10, 0.02)]
    rows.append(row("random (seed 1)", 0.20, 0.04))
    args = argparse.Namespace(command="python -m benchmarks.bench_token_readout")
    text = "\n".join(bench.report(rows, args, "info", 60.0))
    assert "| channel | PE given | 0.053 | 0.300 ± 0.014 | 0.150 ± 0.042 [0.100, 0.200] |" in text
    assert "random (2 seeds)" in text


def test_bad_counts_are_refused(bench, capsys):
    assert_refused(bench.parse_args, ["--folds", "1"], "--folds must be at least 2, got 1", capsys)
