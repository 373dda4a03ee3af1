"""The repeated 64 x 4 measurement: every run reported, the summary counts the runs
at each target."""

import argparse

import pytest

from ._helpers import assert_refused
from .conftest import import_benchmark


@pytest.fixture(scope="module")
def bench():
    return import_benchmark("bench_pair_decoder_repeat")


def test_the_summary_counts_the_runs_at_each_target(bench):
    # (PARS w/s, encoder-alone w/s, ratio, q1, q3) of four runs
    results = [(900, 1200, 1.35, 1.3, 1.4), (1100, 1400, 1.28, 1.2, 1.3)]
    results += [(1000, 1300, 1.30, 1.2, 1.4), (1300, 1700, 1.25, 1.2, 1.3)]
    args = argparse.Namespace(runs=4, repeats=21, pause=10.0)
    text = "\n".join(bench.report(results, args))
    assert "| 1 | 900 | 1,200 | 1.35 (1.30-1.40) |" in text
    assert "| median | 1,050 | 1.290 |" in text
    assert "| range | 900 - 1,300 | 1.25 - 1.35 |" in text
    # 1,000 windows/s and a ratio of 1.30 count as met
    assert "| 3 of 4 | 3 of 4 |" in text


def test_a_run_times_both_steps(bench):
    (run,) = bench.repeated_runs(runs=1, repeats=3, pause=0.0)
    pars, encoder, ratio, q1, q3 = run
    assert pars > 0 and encoder > 0 and q1 <= ratio <= q3
    # the PARS step adds the pair decoder to the same encoder step
    assert ratio > 1.0


def test_bad_counts_are_refused(bench, capsys):
    assert_refused(bench.main, ["--runs", "0"], "--runs must be at least 1, got 0", capsys)
