"""The thread benchmark, at a smoke size: both rows fit beside the busy process, the rule
runs on fewer threads than the usable cores, and the report holds every figure."""

import pytest
import torch

from braindecode_pars import _threads

from .conftest import import_benchmark


@pytest.mark.serial
def test_the_rule_row_runs_on_fewer_threads_beside_the_busy_process(tmp_path, monkeypatch):
    bench = import_benchmark("bench_threads")
    monkeypatch.setattr(_threads, "_IMPORT_THREADS", _threads._IMPORT_THREADS)  # restored
    before = torch.get_num_threads()
    out = tmp_path / "threads.md"
    usable, results = bench.main(
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
