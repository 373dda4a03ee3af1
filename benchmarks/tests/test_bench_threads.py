"""The thread benchmark, at a smoke size: both rows fit, each in a fresh process, beside
the busy process; the rule runs on fewer threads than the usable cores, and the report
holds every figure."""

import pytest
import torch

from benchmarks import bench_threads


def test_a_rows_process_sets_the_threads_as_a_user_would(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MKL_NUM_THREADS", "1")
    every = bench_threads.row_env("all cores", 3)
    rule = bench_threads.row_env("the rule", 3)
    assert every["OMP_NUM_THREADS"] == "3" and "MKL_NUM_THREADS" not in every
    assert not {"OMP_NUM_THREADS", "MKL_NUM_THREADS"} & set(rule)  # the rule chooses
    assert every["PYTHONPATH"].split(":")[0] == rule["PYTHONPATH"].split(":")[0]  # the lab


@pytest.mark.serial
@pytest.mark.slow  # two fits, each in a fresh process
def test_the_rule_row_runs_on_fewer_threads_beside_the_busy_process(tmp_path):
    before = torch.get_num_threads()
    out = tmp_path / "threads.md"
    usable, results = bench_threads.main(
        ["--repeats", "1", "--epochs", "2", "--windows", "8", "--out", str(out)]
    )
    assert torch.get_num_threads() == before  # the benchmark leaves torch as it found it
    (every,) = results["all cores"]
    (rule,) = results["the rule"]
    assert every["threads"] == usable
    if usable >= 2:  # one core held by the busy process
        assert rule["threads"] <= usable - 1
    for run in (every, rule):
        assert run["wall"] > 0 and run["total"] > 0 and run["estimate"] > 0
    text = out.read_text()
    assert "| all cores |" in text and "| the rule |" in text and "Command:" in text
