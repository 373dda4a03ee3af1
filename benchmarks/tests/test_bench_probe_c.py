"""The selection of the probe's default C: its rows are the library's probe, its score
weighs EEGMAT's label counts as one task, and its choice keeps the current default
unless beaten by more than the margin."""

import numpy as np
import pandas as pd
import pytest

from benchmarks import bench_probe_c
from braindecode_pars import PARSProbe
from braindecode_pars.features.recipe import ProbeRecipe
from braindecode_pars.features.transformers import block_features

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bench():
    return bench_probe_c


def _summary(bench, values):
    """A summary frame from {(recipe_index, C, task, k): mean}."""
    recipes = list(bench.RECIPES)
    return pd.DataFrame(
        [dict(recipe=recipes[r], C=C, task=t, k=k, mean=v) for (r, C, t, k), v in values.items()]
    )


def test_a_row_is_the_library_probe_at_that_c(bench):
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 30)
    X = rng.standard_normal((60, 3, 200)) * (1 + 0.3 * y[:, None, None])
    X[:, 0] += 0.5 * np.sin(np.arange(200) / 3) * y[:, None]
    train, test = np.arange(0, 60, 2), np.arange(1, 60, 2)
    raw = block_features(X, ProbeRecipe(("bandpower", "tangentspace")), sfreq=100.0)[0]
    blocks = {"bp": raw["bandpower"], "ts": raw["tangentspace"]}
    for C in (0.01, 1.0):
        ours = bench.predict_blocks(blocks, y, train, test, C, seed=0)
        probe = PARSProbe(C=C, sfreq=100.0, random_state=0).fit(X[train], y[train])
        np.testing.assert_array_equal(ours, probe.predict(X[test]))
    assert (bench.predict_blocks(blocks, y, train, test, 1.0, 0) == y[test]).mean() > 0.8


def test_eegmat_label_counts_weigh_as_one_task(bench):
    eeg, mi = bench.EEGMAT, "mi-imagery-lr"
    values = {}
    for r in (0, 1):
        for k, v in zip(bench.KS, (0.5, 0.6, 0.7, 0.8), strict=True):  # EEGMAT mean 0.65
            values[(r, 1.0, eeg, k)] = v
        values[(r, 1.0, mi, "1")] = 0.55
    score = bench.scores(_summary(bench, values))
    assert score.loc[1.0, "score"] == pytest.approx((0.65 + 0.55) / 2)  # not 0.64, the cell mean


def test_the_current_default_stays_unless_beaten_by_more_than_the_margin(bench):
    score = pd.Series({0.1: 0.604, 1.0: 0.600, 10.0: 0.590})
    assert bench.choose(score) == 1.0  # 0.004 better: within the margin
    score[0.1] = 0.606
    assert bench.choose(score) == 0.1
    assert bench.choose(pd.Series({0.1: 0.6, 10.0: 0.7})) == 10.0  # no current value: the best


def test_the_label_gain_is_twelve_subjects_minus_one(bench):
    eeg = bench.EEGMAT
    first, second = (0.7, 0.6, 0.6, 0.62), (0.5, 0.6, 0.7, 0.75)
    values = {(0, 1.0, eeg, k): v for k, v in zip(bench.KS, first, strict=True)}
    values.update({(1, 1.0, eeg, k): v for k, v in zip(bench.KS, second, strict=True)})
    gain = bench.label_gain(_summary(bench, values))
    recipes = list(bench.RECIPES)
    assert gain.loc[1.0, recipes[0]] == pytest.approx(-0.08)
    assert gain.loc[1.0, recipes[1]] == pytest.approx(0.25)
