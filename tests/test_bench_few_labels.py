"""benchmarks/bench_few_labels.py's bookkeeping: the row names it parses, the summary
statistic of docs/benchmarks/few_labels.rst (distinct labelled sets first, pretraining
seeds last) against hand arithmetic, and the report written from result files."""

import numpy as np
import pandas as pd
import pytest

from .conftest import import_benchmark


@pytest.fixture(scope="module")
def bench():
    return import_benchmark("bench_few_labels")


def test_method_names(bench):
    assert bench.parse_method("pars in-domain[3000]") == ("pars in-domain", 3000)
    assert bench.parse_method("pars transductive[1000]") == ("pars transductive", 1000)
    assert bench.parse_method("pars in-domain in fit") == ("pars in-domain in fit", None)
    assert bench.parse_method("EEGNet") == ("EEGNet", None)
    with pytest.raises(ValueError, match="Unknown method 'pars default in fit'"):
        bench.parse_method("pars default in fit")


def _rows(method, task, scores, units, pretrain_seed=-1, k="1"):
    """One row per draw (seed i, labelled set units[i])."""
    return [
        dict(task=task, part="test", method=method, k=k, seed=i, pretrain_seed=pretrain_seed,
             units=u, balanced_accuracy=a, kappa=0.0, seconds=2.0, pretrain_seconds=0.0)
        for i, (a, u) in enumerate(zip(scores, units, strict=True))
    ]  # fmt: skip


def test_the_summary_averages_distinct_labelled_sets_then_pretraining_seeds(bench):
    # draws 0 and 1 label the same subject: their mean counts once
    units = ["3", "3", "7"]
    rows = _rows("pars in-domain[3000]", "t", [0.6, 0.8, 0.5], units, pretrain_seed=0)
    rows += _rows("pars in-domain[3000]", "t", [0.7, 0.7, 0.9], units, pretrain_seed=1)
    df = pd.DataFrame(rows).assign(row="r")
    s = bench.summary(df).iloc[0]
    seed0 = ((0.6 + 0.8) / 2 + 0.5) / 2  # 0.6
    seed1 = (0.7 + 0.9) / 2  # 0.8
    assert s["per_seed"] == pytest.approx([seed0, seed1])
    assert s["mean"] == pytest.approx((seed0 + seed1) / 2)
    assert s["std_pretrain"] == pytest.approx(np.std([seed0, seed1], ddof=1))
    # the spread over draws: the distinct sets' means over both seeds
    set3, set7 = np.mean([0.6, 0.8, 0.7, 0.7]), np.mean([0.5, 0.9])
    assert s["std_draws"] == pytest.approx(np.std([set3, set7], ddof=1))


def test_the_lowest_k_mean_is_taken_per_pretraining_seed(bench):
    rows = []
    for p, (a, b) in enumerate([(0.6, 0.9), (0.8, 0.5)]):
        rows += _rows("pars in-domain[3000]", "t1", [a], ["1"], pretrain_seed=p)
        rows += _rows("pars in-domain[3000]", "t2", [b], ["1"], pretrain_seed=p)
    df = pd.DataFrame(rows).assign(row=bench.ROW_NAMES["pars in-domain[3000]"])
    (line,) = bench.lowest_k_table(bench.summary(df), ["t1", "t2"])
    per_seed = [(0.6 + 0.9) / 2, (0.8 + 0.5) / 2]  # 0.75, 0.65
    assert f"{np.mean(per_seed):.3f} ± {np.std(per_seed, ddof=1):.3f} (pretraining seeds)" in line


def test_the_report_joins_the_reference_rows_and_names_each_row(bench, tmp_path):
    mine = _rows("pars transductive[3000]", "eegmat-arithmetic", [0.7, 0.6], ["1", "2"], 0)
    mine += _rows("EEGNet", "eegmat-arithmetic", [0.55, 0.45], ["1", "2"])
    ref = _rows("probe[bp+ts, 100]", "eegmat-arithmetic", [0.65, 0.55], ["1", "2"])
    ref += _rows("deep pars", "eegmat-arithmetic", [0.9, 0.9], ["1", "2"])  # not a reference
    pd.DataFrame(mine).to_csv(tmp_path / "few_labels_test.csv", index=False)
    pd.DataFrame(ref).to_csv(tmp_path / "dev_tasks_test.csv", index=False)
    bench.write_report("test", tmp_path)
    table = (tmp_path / "few_labels_test.md").read_text()
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    assert "0.650 ± 0.071" in lines[bench.ROW_NAMES["pars transductive[3000]"]]
    assert "0.500 ± 0.071" in lines["EEGNet from scratch"]
    assert "0.600 ± 0.071" in lines["probe, no encoder (band power + tangent space)"]
    assert "0.900" not in table  # only the reference rows are joined
    assert (tmp_path / "few_labels_test.png").stat().st_size > 10_000
