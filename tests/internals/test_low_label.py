"""The low-label runner: draws, scores, and a results file that runs share."""

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from braindecode_pars.demo.low_label import _run_low_label, draw_subjects

from .._learning import SEED, learned


class _MeanLevel(ClassifierMixin, BaseEstimator):
    """Logistic regression on each window's mean (the class signal of ``_task``)."""

    def __init__(self, random_state=None, hook=None):
        self.random_state = random_state
        self.hook = hook

    def fit(self, X, y):
        if self.hook is not None:
            self.hook()
        self.lr_ = LogisticRegression().fit(X.mean(axis=(1, 2))[:, None], y)
        self.classes_ = self.lr_.classes_
        return self

    def predict(self, X):
        return self.lr_.predict(X.mean(axis=(1, 2))[:, None])


def _task(n_subjects=6, per_subject=10, seed=0):
    rng = np.random.default_rng(seed)
    y = np.tile(np.repeat([0, 1], per_subject // 2), n_subjects)
    subjects = np.repeat(np.arange(n_subjects), per_subject)
    X = rng.standard_normal((len(y), 2, 20)) + 0.5 * y[:, None, None]
    return X, y, subjects


def test_rows_beat_chance_resume_and_keep_what_another_run_wrote(tmp_path):
    X, y, subjects = _task(seed=SEED)
    out = tmp_path / "results.csv"
    other = {"method": "other run", "k": 1, "seed": 0, "subjects": "5",
             "balanced_accuracy": 0.5, "kappa": 0.0, "seconds": 1.0}  # fmt: skip

    def another_run_writes():  # between this run's start and its first row
        if not out.is_file():
            pd.DataFrame([other]).to_csv(out, index=False)

    methods = {"mean level": _MeanLevel(hook=another_run_writes)}
    results = _run_low_label(
        X, y, subjects, methods, [0, 1], [2, 3, 4, 5], ks=[1, 2], seeds=[SEED, SEED + 1],
        out=out, progress=False,
    )  # fmt: skip
    assert len(results) == 4 + 1 and (results["method"] == "other run").sum() == 1
    saved = pd.read_csv(out)
    assert sorted(saved["method"]) == ["mean level"] * 4 + ["other run"]
    ours = saved[saved["method"] == "mean level"]
    # the mean separates the classes
    learned(ours["balanced_accuracy"].min(), above=0.65, what="worst row")  # chance: 0.5
    assert ours["subjects"].tolist() == [
        " ".join(map(str, draw_subjects([2, 3, 4, 5], k, s)))
        for k in (1, 2)
        for s in (SEED, SEED + 1)
    ]
    calls = []
    again = _run_low_label(
        X, y, subjects, {"mean level": _MeanLevel(hook=lambda: calls.append(1))},
        [0, 1], [2, 3, 4, 5], ks=[1, 2], seeds=[SEED, SEED + 1], out=out, progress=False,
    )  # fmt: skip
    assert not calls and len(again) == 5  # every row was there: nothing refitted


def test_all_subjects_of_the_pool_are_fitted_once_per_seed():
    X, y, subjects = _task()
    results = _run_low_label(
        X, y, subjects, {"mean level": _MeanLevel()}, [0, 1], [2, 3, 4, 5], ks=[4],
        seeds=[0, 1, 2], progress=False,
    )  # fmt: skip
    assert results["seed"].tolist() == [0, 1, 2]
    assert set(results["subjects"]) == {"2 3 4 5"}  # the same subjects, three fits


def _flatten(X):
    return X.reshape(len(X), -1)


def _lr(C):
    return make_pipeline(FunctionTransformer(_flatten), LogisticRegression(C=C))


def test_a_run_with_other_settings_is_refused_before_any_fit(tmp_path):
    """Rows are keyed by method, k and seed: a rerun whose method changed under the same
    name, or on other subjects or data, would keep the old rows as its own."""
    X, y, subjects = _task()
    out = tmp_path / "results.csv"
    run = dict(ks=[1], seeds=[0], out=out, progress=False)
    methods = {"lr": _lr(1.0), "mean level": _MeanLevel(hook=lambda: None)}
    flat = X
    _run_low_label(flat, y, subjects, methods, [0, 1], [2, 3, 4, 5], **run)
    settings = json.loads((tmp_path / "results.settings.json").read_text())
    assert settings["methods"]["lr"]["params"]["steps"][1][1]["params"]["C"] == 1.0
    calls = []
    changed = {"lr": _lr(10.0), "mean level": _MeanLevel(hook=lambda: None)}
    with pytest.raises(ValueError, match=r"'out'=.*results.csv.*these differ: method 'lr';"):
        _run_low_label(flat, y, subjects, changed, [0, 1], [2, 3, 4, 5], **run)
    with pytest.raises(ValueError, match="these differ: test_subjects, pool_subjects;"):
        _run_low_label(flat, y, subjects, methods, [0, 2], [3, 4, 5], **run)
    with pytest.raises(ValueError, match="these differ: data;"):
        _run_low_label(flat + 1.0, y, subjects, methods, [0, 1], [2, 3, 4, 5], **run)
    # the same settings resume; a new method joins the record
    more = {**methods, "C=10": _lr(10.0)}
    more["mean level"] = _MeanLevel(hook=lambda: calls.append(1))
    rows = _run_low_label(flat, y, subjects, more, [0, 1], [2, 3, 4, 5], **run)
    assert not calls and sorted(rows["method"]) == ["C=10", "lr", "mean level"]
    settings = json.loads((tmp_path / "results.settings.json").read_text())
    assert sorted(settings["methods"]) == ["C=10", "lr", "mean level"]


def test_settings_describe_estimators_modules_and_arrays():
    import torch

    from braindecode_pars import PatchEncoder
    from braindecode_pars.demo.low_label import describe

    torch.manual_seed(0)
    a = PatchEncoder(sfreq=100, emb_dim=8, depth=1, n_heads=2, ff_dim=16)
    b = PatchEncoder(sfreq=100, emb_dim=8, depth=1, n_heads=2, ff_dim=16)
    assert describe(a) != describe(b)  # other weights
    assert describe(a) == describe(a)
    assert describe(np.arange(3)) != describe(np.arange(4))
    nested = describe(make_pipeline(StandardScaler(), LogisticRegression(C=3.0)))
    assert nested["class"] == "sklearn.pipeline.Pipeline"
    assert nested["params"]["steps"][1][1]["params"]["C"] == 3.0
    json.dumps(nested)  # plain JSON
    assert describe(object()) == describe(object()) == "<object object>"  # no address


@pytest.mark.slow
def test_a_method_is_described_alike_in_processes_of_other_hash_seeds():
    """skorch keeps a set among its parameters, whose order follows the hash seed."""
    import os
    import subprocess
    import sys

    code = (
        "import json; from braindecode_pars import PARSClassifier, PARSFineTuner; "
        "from braindecode_pars.demo.low_label import describe; "
        "print(json.dumps(describe(PARSClassifier(encoder='pars-small', "
        "head=PARSFineTuner(lr=1e-3), sfreq=100)), sort_keys=True))"
    )
    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        outs.append(run.stdout.strip().splitlines()[-1])
    assert outs[0] == outs[1] and '"lr": 0.001' in outs[0]


def test_paths_are_described_by_contents_and_unsaved_methods_may_change(tmp_path):
    from braindecode_pars.demo.low_label import check_settings, describe

    for folder in ("a", "b"):
        (tmp_path / folder / "enc").mkdir(parents=True)
        (tmp_path / folder / "enc" / "w.bin").write_bytes(b"weights")
    a, b = tmp_path / "a" / "enc", tmp_path / "b" / "enc"
    assert describe(a) == describe(str(b))  # the same files elsewhere
    (b / "w.bin").write_bytes(b"other weights")
    assert describe(a) != describe(b)
    out = tmp_path / "results.csv"
    common = {"data": "d", "missing": float("nan")}  # NaN equals NaN here
    check_settings(out, common, {"m": describe(a)})
    check_settings(out, {**common}, {"m": describe(b)})  # no rows of "m" yet: taken
    with pytest.raises(ValueError, match="these differ: method 'm'"):
        check_settings(out, common, {"m": describe(a)}, done=["m"])


def test_fit_predict_hands_each_side_its_groups():
    from braindecode_pars.demo.low_label import _fit_predict

    seen = {}

    class Grouped(ClassifierMixin, BaseEstimator):
        def fit(self, X, y, groups=None):
            seen["fit"] = groups
            self.classes_ = np.unique(y)
            return self

        def predict(self, X, groups=None):
            seen["predict"] = groups
            return np.zeros(len(X), dtype=int)

    X, y = np.zeros((6, 2)), np.array([0, 1, 0, 1, 0, 1])
    groups = np.array([1, 1, 2, 2, 3, 3])
    train, test = np.arange(4), np.arange(4, 6)
    assert _fit_predict(Grouped(), X, y, groups, train, test).shape == (2,)
    np.testing.assert_array_equal(seen["fit"], [1, 1, 2, 2])
    np.testing.assert_array_equal(seen["predict"], [3, 3])
    # an estimator that takes no groups gets none
    assert _fit_predict(
        LogisticRegression(), X + np.arange(6)[:, None], y, groups, train, test
    ).shape == (2,)
