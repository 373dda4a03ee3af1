"""The pretraining-loop benchmark in its tiny CPU configuration: it runs both loops,
counts the windows they trained, and its rates are the marginal ones."""

import pytest

from .conftest import import_benchmark

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bench():
    """``benchmarks/bench_pretrain_loop.py`` as a module."""
    return import_benchmark("bench_pretrain_loop")


def test_the_marginal_rate_cancels_what_a_run_pays_once(bench):
    # 2 s of setup, then 100 windows/s: runs of 200 and 1000 windows
    short, long = (2.0 + 200 / 100, 200, 25), (2.0 + 1000 / 100, 1000, 125)
    assert bench.marginal(short, long) == pytest.approx(100.0)


def test_the_estimator_run_trains_the_steps_it_counts(bench):
    X = bench.corpus(bench.TINY, 8)
    assert X.shape == (27, bench.N_CHANS, bench.TINY.n_times)
    seconds, windows, epochs = bench.estimator_run(bench.TINY, X, 8, "cpu", False, False, 12)
    # 24 training windows (3 held out): 3 full steps an epoch, 12 steps in 4 epochs
    assert (windows, epochs) == (12 * 8, 4) and seconds > 0


@pytest.mark.slow  # 15 to 25 s on 2 busy CPU cores
def test_tiny_cpu_run_reports_both_ratios_on_its_last_line(bench, tmp_path, capsys):
    out = tmp_path / "loop.md"
    argv = ["--tiny", "--device", "cpu", "--steps", "150", "--rounds", "1", "--out", str(out)]
    est, cli = bench.main(argv)
    text = out.read_text()
    last = text.strip().splitlines()[-1]
    assert last == f"estimator/step {est:.2f}, command line/step {cli:.2f}"
    assert 0.2 < est < 2 and 0.2 < cli < 2  # a rate of the same order as the step's
    assert "| `PARSPretrainer.fit` |" in text and "| `braindecode-pars pretrain` |" in text
