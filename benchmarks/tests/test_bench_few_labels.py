"""benchmarks/bench_few_labels.py's bookkeeping: the row names it parses, the summary
statistic of docs/benchmarks/few_labels.rst (distinct labelled sets first, pretraining
seeds last) against hand arithmetic, and the report written from result files."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks import bench_few_labels


@pytest.fixture(scope="module")
def bench():
    return bench_few_labels


def test_method_names(bench):
    mean = bench.PROBE_READOUT
    assert bench.parse_method("pars in-domain[3000]") == ("pars in-domain", 3000, mean)
    assert bench.parse_method("pars transductive[1000]") == ("pars transductive", 1000, mean)
    assert bench.parse_method("pars transductive[3000, mean+std]") == (
        "pars transductive",
        3000,
        "mean+std",
    )
    assert bench.parse_method("pars in-domain in fit") == ("pars in-domain in fit", None, mean)
    assert bench.parse_method("EEGNet") == ("EEGNet", None, mean)
    with pytest.raises(ValueError, match="Unknown method 'pars default in fit'"):
        bench.parse_method("pars default in fit")
    with pytest.raises(ValueError, match="one of mean"):  # not a readout
        bench.parse_method("pars in-domain[3000, median]")


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


class _Recorder:
    """Stands in for PARSClassifier: records what a row builds and fits."""

    seen = {}

    def __init__(self, encoder=None, head=None, **kwargs):
        self.seen.update(encoder=encoder, head=head)

    def fit(self, X, y, groups=None, X_unlabeled=None):
        self.seen.update(n_fit=len(X), unlabeled=X_unlabeled)
        return self

    def predict(self, X):
        return np.zeros(len(X), dtype=int)


@pytest.mark.parametrize(
    "method", ["pars in-domain in fit", "pars in-domain[3000]", "pars in-domain[3000, mean+std]"]
)
def test_each_probe_row_builds_the_estimator_its_docstring_names(bench, monkeypatch, method):
    from braindecode_pars import PARSPretrainer, PARSProbe

    monkeypatch.setattr(bench, "PARSClassifier", _Recorder)
    cached = object()
    monkeypatch.setattr(bench, "pretrained", lambda *args: (cached, 12.0))
    units = np.repeat([1, 2, 3], 2)
    X, y = np.zeros((6, 2, 100)), np.tile([0, 1], 3)
    ctx = dict(pool=("key", X, units, 1.0), pool_units=units, labelled=[1], cache=None)
    kind, steps, readout = bench.parse_method(method)
    train, test = np.flatnonzero(units == 1), np.flatnonzero(units == 3)
    pred, pre = bench.score(kind, steps, X, y, units, train, test, ctx, 0, 0, readout)
    seen = _Recorder.seen
    expected = "mean+std" if method.endswith("mean+std]") else bench.PROBE_READOUT
    assert isinstance(seen["head"], PARSProbe) and seen["head"].readout == expected
    assert seen["n_fit"] == 2 and len(pred) == 2
    if method == "pars in-domain in fit":  # pretrains in fit, on the pool without unit 1
        assert isinstance(seen["encoder"], PARSPretrainer) and np.isnan(pre)
        assert len(seen["unlabeled"]) == 4
    else:  # the encoder pretrained once per pool, and its cost
        assert seen["encoder"] is cached and pre == 12.0 and seen["unlabeled"] is None


def test_the_recipe_rows_read_the_encoder_as_every_probe_row(bench, monkeypatch):
    """``--recipes`` computes its features with the readout of the other probe rows
    (:data:`PROBE_READOUT`), not the library's default, as its recorded rows were."""
    import braindecode_pars.features.blocks as features

    class Read(Exception):
        pass

    def block_features(X, recipe, **kwargs):
        raise Read(recipe.readout)

    monkeypatch.setattr(bench, "load_encoder", lambda path: "encoder")
    monkeypatch.setattr(features, "block_features", block_features)
    X, units = np.zeros((6, 2, 100)), np.repeat([1, 2, 3], 2)
    with pytest.raises(Read) as read:
        bench.recipe_rows("t", "selection", X, np.tile([0, 1], 3), units, [1, 2, 3], [3],
                          ["4"], [0], 1000, 0, Path("cache"))  # fmt: skip
    assert read.value.args == (bench.PROBE_READOUT,)
