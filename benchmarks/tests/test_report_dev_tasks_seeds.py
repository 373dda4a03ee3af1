"""The report over pretraining seeds: each encoder's rows, their mean and std over the
encoders by hand, and CSVs that are not the same runs refused."""

import numpy as np
import pandas as pd
import pytest

from benchmarks import report_dev_tasks_seeds


@pytest.fixture(scope="module")
def report():
    return report_dev_tasks_seeds


def _csv(path, enc_scores, floor=0.6):
    """Two tasks; task a's k = 1 rows draw two sets (seeds 0 and 2 the same set). Every
    row is of the selection part at k = 1, its score both metrics."""
    rows = []
    for task, enc in zip(("a", "b"), enc_scores, strict=True):
        for seed, units in enumerate(("1", "2", "1")):
            for method, value in (("probe[enc+bp, 1]", enc[seed]), ("floor (band power)", floor)):
                rows.append((task, method, seed, units, value))
    table = pd.DataFrame(rows, columns=["task", "method", "seed", "units", "balanced_accuracy"])
    table = table.assign(part="selection", k="1", kappa=table["balanced_accuracy"], seconds=0.0)
    table.to_csv(path, index=False)
    return path


def test_rows_over_encoders_by_hand(report, tmp_path):
    one = _csv(tmp_path / "one.csv", [(0.6, 0.8, 0.7), (0.5, 0.5, 0.5)])
    two = _csv(tmp_path / "two.csv", [(0.4, 0.6, 0.4), (0.7, 0.7, 0.7)])
    report.write([one, two], ["s0", "s1"], tmp_path / "out", "cmd")
    # task a, encoder one: set "1" = mean(0.6, 0.7) = 0.65, set "2" = 0.8 -> 0.725
    mean_one = (0.725 + 0.5) / 2
    mean_two = ((0.4 + 0.6) / 2 + 0.7) / 2  # set "1" 0.4, set "2" 0.6 -> 0.5; task b 0.7
    per_encoder, summary, fixed = report.over_encoders(
        [report.lowest_k(one), report.lowest_k(two)], ["s0", "s1"]
    )
    np.testing.assert_allclose(per_encoder.loc["probe[enc+bp, 1]"], [mean_one, mean_two])
    assert summary.loc["probe[enc+bp, 1]", "mean over tasks"] == pytest.approx(
        (mean_one + mean_two) / 2
    )
    assert summary.loc["probe[enc+bp, 1]", "std"] == pytest.approx(
        np.std([mean_one, mean_two], ddof=1)
    )
    assert list(fixed.index) == ["floor (band power)"]
    text = (tmp_path / "out.md").read_text()
    assert f"| probe[enc+bp, 1] | {mean_one:.3f} | {mean_two:.3f} |" in text
    assert (tmp_path / "out.png").stat().st_size > 0


def test_csvs_of_other_runs_are_refused(report, tmp_path):
    one = _csv(tmp_path / "one.csv", [(0.6, 0.8, 0.7), (0.5, 0.5, 0.5)])
    other = _csv(tmp_path / "other.csv", [(0.6, 0.8, 0.7), (0.5, 0.5, 0.5)], floor=0.55)
    with pytest.raises(ValueError, match="do not read the encoder differ.*floor"):
        report.over_encoders([report.lowest_k(one), report.lowest_k(other)], ["s0", "s1"])
    with pytest.raises(ValueError, match="labels: one per CSV"):
        report.over_encoders([report.lowest_k(one)] * 2, ["s0"])
    with pytest.raises(SystemExit):
        report.main(
            [
                str(one),
                str(tmp_path / "missing.csv"),
                "--labels",
                "a",
                "b",
                "--out",
                str(tmp_path / "x"),
            ]
        )
