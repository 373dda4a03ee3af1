"""The fine-tuning selection benchmarks' reports (``benchmarks/bench_finetuning_outer.py``,
``bench_finetuning.py``), on rows built here, against numpy."""

import numpy as np
import pytest

from benchmarks import bench_finetuning_outer


@pytest.fixture(scope="module")
def outer():
    return bench_finetuning_outer


def _cells(text, first, holding=""):
    """The cells of the first markdown row whose first cell is ``first`` and whose second
    holds ``holding``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == first and len(cells) > 1 and holding in cells[1]:
            return cells
    raise AssertionError(f"no row {first!r}")


def test_the_selection_report_gives_each_candidate_mean_and_gain_over_the_defaults(outer):
    rng = np.random.default_rng(0)
    rows = []
    for name in ("defaults", "max_epochs=200"):
        for seed in range(3):
            rows.append(dict(candidate=name, start="pretrained", seed=seed,
                             balanced_accuracy=float(rng.uniform(0.4, 0.7)),
                             minority_share=float(rng.uniform(0, 0.4)), seconds=10.0,
                             train_loss=list(rng.uniform(0, 1, 200)),
                             heldout_bal_acc=list(rng.uniform(0, 1, 200))))  # fmt: skip
    text = outer.report(rows)
    scores = {n: [r["balanced_accuracy"] for r in rows if r["candidate"] == n]
              for n in ("defaults", "max_epochs=200")}  # fmt: skip
    cells = _cells(text, "max_epochs=200")
    assert float(cells[3]) == pytest.approx(np.mean(scores["max_epochs=200"]), abs=5e-4)
    gain = np.mean(scores["max_epochs=200"]) - np.mean(scores["defaults"])
    assert float(cells[5]) == pytest.approx(gain, abs=1e-3)
    # the curve table: the mean training loss at epoch 200 over the three seeds
    curve = [c for c in text.splitlines() if c.startswith("| max_epochs=200 | pretrained | 0.")]
    losses = [float(v) for v in curve[0].strip("|").split("|")[2:10]]
    at_200 = np.mean([r["train_loss"][199] for r in rows if r["candidate"] == "max_epochs=200"])
    assert losses[-1] == pytest.approx(at_200, abs=5e-4)


def test_the_subjects_report_averages_seeds_then_subjects_and_correlates_methods(outer):
    rng = np.random.default_rng(1)
    subjects = {"test": [1, 4, 13], "selection": [12, 14, 15]}
    rows = [
        dict(method=m, seed=seed, subject=s, set=set_, minority_share=0.2,
             balanced_accuracy=float(rng.uniform(0, 1)))
        for m in ("a", "b") for set_, ids in subjects.items() for s in ids for seed in range(3)
    ]  # fmt: skip
    text = outer.subjects_report(rows)

    def per_subject(method, ids):
        return np.array([np.mean([r["balanced_accuracy"] for r in rows
                                  if r["method"] == method and r["subject"] == s])
                         for s in ids])  # fmt: skip

    for set_, ids in subjects.items():
        a = per_subject("a", ids)
        cell = _cells(text, set_, " (")[1]  # the set's summary row, method "a"
        mean, rest = cell.split(" (")
        assert float(mean) == pytest.approx(a.mean(), abs=5e-4)
        assert rest.startswith(f"{int((a < 0.5).sum())} of 3")
    every = list(subjects["test"]) + list(subjects["selection"])
    r = np.corrcoef(per_subject("a", every), per_subject("b", every))[0, 1]
    assert float(_cells(text, "a")[2]) == pytest.approx(r, abs=5e-3)


def test_the_labels_report_gives_mean_std_and_seeds_and_reads_the_test_rows_at_8(outer):
    rng = np.random.default_rng(1)
    rows = [dict(method=m, n_labelled=n, seed=s, balanced_accuracy=float(rng.uniform(0.4, 0.8)),
                 minority_share=float(rng.uniform(0.1, 0.4)))
            for m, n, s in outer.label_jobs((0, 1, 2))]  # fmt: skip
    test_rows = [
        dict(
            row="full fine-tuning of pars-small-v2 (library defaults)",
            seed=s,
            balanced_accuracy=0.5 + s / 100,
            minority_share=0.3,
        )
        for s in range(3)
    ]
    test_rows.append(
        dict(
            row="probe over pars-small-v2 features alone",
            seed=0,
            balanced_accuracy=0.9,
            minority_share=0.2,
        )
    )  # not a labels row
    text = outer.labels_report(rows, test_rows)
    method = outer.LABEL_METHODS[2]
    cells = _cells(text, method)
    at_24 = [
        r["balanced_accuracy"] for r in rows if r["method"] == method and r["n_labelled"] == 24
    ]
    mean, std = (float(v) for v in cells[3].split(" (")[0].split(" ± "))
    assert mean == pytest.approx(np.mean(at_24), abs=5e-4)
    assert std == pytest.approx(np.std(at_24), abs=5e-4)
    assert cells[1] == "0.510 ± 0.008 (0.500, 0.510, 0.520)"  # the test rows at 8
    assert _cells(text, "from scratch")[1:3] == ["not run", "not run"]
    # the jobs: 9 fits of each probe, fine-tuning at 24 and 16, from scratch at 24 only
    jobs = outer.label_jobs((0, 1, 2))
    assert len(jobs) == 2 * 9 + 6 + 3 and len(set(jobs)) == len(jobs)


def test_the_labels_figure_draws_each_methods_mean_at_its_labelled_subjects(outer):
    rows = [dict(method=m, n_labelled=n, seed=s, balanced_accuracy=0.5 + n / 100 + s / 1000,
                 minority_share=0.3) for m, n, s in outer.label_jobs((0, 1, 2))]  # fmt: skip
    fig = outer.plot_labels(rows)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    probe = lines[outer.LABEL_METHODS[0]]
    np.testing.assert_allclose(probe.get_ydata(), [0.581, 0.661, 0.741])  # means of 3 seeds
    scratch = lines["from scratch"]  # run at 24 only
    np.testing.assert_allclose(scratch.get_ydata(), [0.741])
