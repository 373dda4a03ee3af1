"""The loops' trace (benchmarks/bench_loop_trace.py): its arithmetic against known
answers, and its dry run on a CPU."""

import pytest

from benchmarks import bench_loop_trace

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bench():
    return bench_loop_trace


def test_the_busy_time_is_the_union_of_the_intervals(bench):
    # overlapping, nested, touching and apart: [0, 4] + [5, 7] + [8, 9]
    intervals = [(5, 6), (0, 3), (1, 2), (2, 4), (6, 7), (8, 9)]
    assert bench._union(intervals) == 4 + 2 + 1
    assert bench._union([]) == 0


def test_the_figures_per_step_are_marginal(bench):
    # a run pays 2 s, 50 syncs and 0.5 s of GPU work once, then per step 0.1 s, 3 syncs
    # and 0.08 s of GPU work: the marginal figures are the per-step ones
    def run(n):
        return dict(wall=2 + 0.1 * n, ops=100 + 10 * n, syncs=50 + 3 * n, busy=0.5 + 0.08 * n)

    row = bench.per_step(run(12), run(60), (12, 60))
    assert row["wall"] == pytest.approx(0.1) and row["ops"] == pytest.approx(10)
    assert row["syncs"] == pytest.approx(3) and row["busy"] == pytest.approx(0.8)
    assert "busy" not in bench.per_step(dict(wall=1, ops=1), dict(wall=2, ops=3), (1, 2))


def test_the_dry_run_on_a_cpu_traces_the_step_and_both_loops(bench, tmp_path):
    out = tmp_path / "trace.md"
    rows = bench.main(["--tiny", "--device", "cpu", "--steps", "10", "--out", str(out)])
    assert len(rows) == 3
    for row in rows.values():
        assert row["wall"] > 0 and row["ops"] > 100  # a PARS step runs hundreds of operators
        assert "syncs" not in row  # no CUDA activity on a CPU
    table = [line for line in out.read_text().splitlines() if line.startswith("| ")]
    assert len(table) == 4 and all(line.endswith("| n/a | n/a | n/a | n/a |") for line in table[1:])
