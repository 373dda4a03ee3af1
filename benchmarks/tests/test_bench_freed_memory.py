"""The freed-memory benchmark: steps timed alone in blocks, faults counted, medians reported."""

import argparse
import time

import pytest

from benchmarks import bench_freed_memory

from .conftest import assert_refused


@pytest.fixture(scope="module")
def bench():
    return bench_freed_memory


def test_blocks_time_each_step_alone_and_skip_the_first_of_a_block(bench):
    calls = []

    def step(name, seconds):
        def run():
            calls.append(name)
            time.sleep(seconds)

        return run

    (t_a, t_b), faults, ratio = bench.alone([step("a", 0.02), step("b", 0.01)], rounds=3)
    assert calls == (["a"] * 4 + ["b"] * 4) * 3
    assert t_a == pytest.approx(0.02, abs=0.005) and t_b == pytest.approx(0.01, abs=0.005)
    assert ratio == pytest.approx(2.0, rel=0.3)
    assert all(f >= 0 for f in faults)


def test_the_report_gives_every_process_and_the_medians(bench):
    def row(pars, faults):
        return dict(pars=pars, pars_faults=faults, encoder=1500.0, encoder_faults=0,
                    alone_ratio=1500.0 / pars, interleaved_ratio=1.3)  # fmt: skip

    rows = [
        ("64 x 4", "glibc defaults", row(1000.0, 3000)),
        ("64 x 4", "freed memory kept", row(1200.0, 0)),
        ("64 x 4", "glibc defaults", row(1100.0, 2000)),
        ("64 x 4", "freed memory kept", row(1250.0, 2)),
    ]
    text = "\n".join(bench.report(rows, argparse.Namespace(pairs=2, rounds=12)))
    assert "| 64 x 4 | glibc defaults | 1,000 | 3,000 | 1,500 | 0 | 1.50 | 1.30 |" in text
    medians = text.split("Medians over the processes:")[1]
    assert "| 64 x 4 | glibc defaults | 1,050 | 2,500 | 1,500 | 0 | 1.43 | 1.30 |" in medians
    assert "| 64 x 4 | freed memory kept | 1,225 | 1 | 1,500 | 0 | 1.23 | 1.30 |" in medians
    assert "--pairs 2 --rounds 12" in text


def test_bad_counts_are_refused(bench, capsys):
    assert_refused(bench.main, ["--rounds", "0"], "--rounds must be at least 1, got 0", capsys)
