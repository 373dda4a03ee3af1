"""The decoder-heads benchmark's report: every run, then mean and spread per decoder."""

import argparse
import statistics

import pytest

from benchmarks import bench_decoder_heads

from .conftest import assert_refused


@pytest.fixture(scope="module")
def bench():
    return bench_decoder_heads


def _curve(half, final, seconds):
    return [
        dict(step=50, seconds=seconds / 2, valid_skill=half),
        dict(step=100, seconds=seconds, valid_skill=final),
    ]


def test_the_report_gives_each_run_and_the_mean_and_spread_per_decoder(bench):
    results = [
        dict(heads=8, seed=0, curve=_curve(0.10, 0.30, 200)),
        dict(heads=4, seed=0, curve=_curve(0.12, 0.28, 180)),
        dict(heads=8, seed=1, curve=_curve(0.08, 0.34, 210)),
        dict(heads=4, seed=1, curve=_curve(0.11, 0.26, 190)),
    ]
    args = argparse.Namespace(steps=100, threads=2, seeds=2, batch_size=64, lr=1e-3, out="o.md")
    text = "\n".join(bench.report(results, args))
    assert "| 8 | 0 | 0.100 | 0.300 | 200 |" in text
    assert "| 4 | 1 | 0.110 | 0.260 | 190 |" in text
    assert f"| 8 | 0.320 ± {statistics.stdev([0.30, 0.34]):.3f} | 205 |" in text
    assert f"| 4 | 0.270 ± {statistics.stdev([0.28, 0.26]):.3f} | 185 |" in text


def test_a_decoder_of_each_size_is_built_and_trained(bench, monkeypatch):
    seen = []

    def fake_curve(model, *args, **kwargs):
        seen.append((model.decoder.n_heads, model.decoder_heads, kwargs["seed"]))
        return _curve(0.0, 0.0, 1)

    monkeypatch.setattr(bench, "skill_curve", fake_curve)
    args = argparse.Namespace(steps=10, batch_size=4, lr=1e-3, eval_every=5)
    for heads in bench.HEADS:
        bench.run(None, None, heads, 1, args)
    assert seen == [(8, 8, 1), (4, 4, 1)]


def test_bad_counts_are_refused(bench, capsys):
    assert_refused(bench.main, ["--seeds", "0"], "--seeds must be at least 1, got 0", capsys)


def test_the_ratio_report_gives_each_run_and_the_medians(bench):
    results = [[1.30, 1.20, 1000.0, 1100.0], [1.28, 1.18, 1200.0, 1300.0]]
    args = argparse.Namespace(threads=2, runs=2, rounds=60)
    text = "\n".join(bench.ratio_report(results, args))
    assert "| 1 | 1.300 | 1.200 | 1,000 | 1,100 |" in text
    assert "| median | 1.290 | 1.190 | 1,100 | 1,200 |" in text
    assert "--part ratio --threads 2 --runs 2 --rounds 60" in text


def test_step_ratios_time_both_decoders_against_the_encoder(bench, monkeypatch):
    """Each decoder's step over the encoder-alone step, from the steps' own times (fixed
    here: a timing measured under load is the benchmark's to record, not a test's)."""
    times = {0: [3.0, 3.2, 2.8], 1: [2.0, 2.2, 1.8], 2: [1.0, 1.0, 1.0]}
    built = []

    def fake_times(steps, rounds, warmup=0):
        built.append(len(steps))
        return [times[i] for i in range(len(steps))]

    monkeypatch.setattr(bench, "alternating_step_times", fake_times)
    ((r8, r4, w8, w4),) = bench.step_ratios(runs=1, rounds=3, warmup=0)
    assert built == [3]  # both decoders' PARS steps and the encoder's, interleaved
    assert (r8, r4) == pytest.approx((3.0, 2.0))
    assert (w8, w4) == pytest.approx((bench.SMALL_BATCH / 3.0, bench.SMALL_BATCH / 2.0))
