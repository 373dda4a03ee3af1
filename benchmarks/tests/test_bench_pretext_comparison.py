"""The pretext comparison's report: the rule behind its answers and the tables' means,
against numbers worked out by hand and numpy on rows built for the test."""

import json

import numpy as np
import pandas as pd
import pytest

from benchmarks.lib import pretext_report


@pytest.fixture(scope="module")
def report():
    return pretext_report


def test_the_rule_says_yes_no_or_level_by_the_seeds_spread(report):
    # gap 0.05, spread 0.01 + 0.01: yes; the other way round: no
    assert report.verdict([0.60, 0.61, 0.62], [0.55, 0.56, 0.57]).startswith("yes")
    assert report.verdict([0.55, 0.56, 0.57], [0.60, 0.61, 0.62]).startswith("no")
    # gap 0.01 under a spread of 0.02: level
    assert report.verdict([0.60, 0.61, 0.62], [0.59, 0.60, 0.61]).startswith("level")
    # one value on a side has no spread of its own: gap 0.011 against 0.01
    assert report.verdict([0.60, 0.61, 0.62], [0.599]).startswith("yes")
    assert "gap +0.011, spread 0.010" in report.verdict([0.60, 0.61, 0.62], [0.599])


TASKS = ("eegmat-arithmetic", "mi-executed-lr", "mi-imagery-4", "mi-imagery-lr", "mi-executed-ff")


def _rows(rng):
    """Probe rows: every task at k = 1 (five draws) and all (one), for a seedless row and
    a row with three seeds."""
    rows = []
    for task in TASKS:
        for k, draws in (("1", range(5)), ("all", (0,))):
            for draw in draws:
                cell = dict(task=task, k=k, draw=draw)
                rows.append(dict(cell, row="probe, no encoder", seed=None, seconds=1.0,
                                 bal_acc=rng.uniform(0.4, 0.9)))  # fmt: skip
                for seed in (0, 1, 2):
                    rows.append(dict(cell, row="probe, PARS", seed=seed, seconds=2.0,
                                     bal_acc=rng.uniform(0.4, 0.9)))  # fmt: skip
    return pd.DataFrame(rows)


def test_the_tables_mean_over_draws_then_tasks_then_seeds(report):
    probe = _rows(np.random.default_rng(0))
    scores = report.per_seed(probe)
    at_1 = report.means_by_seed(scores, "1")
    for seed in (0, 1, 2):  # the mean over draws of each task, then over the five tasks
        sel = probe[(probe.row == "probe, PARS") & (probe.seed == seed) & (probe.k == "1")]
        expected = np.mean([sel[sel.task == t].bal_acc.mean() for t in TASKS])
        assert at_1["probe, PARS"][seed] == pytest.approx(expected)
    summary = report.summary_table(probe, scores)
    line = next(x for x in summary if x.startswith("| probe, no encoder |"))
    cells = [c.strip() for c in line.strip("|").split("|")][1:]
    sel = probe[(probe.row == "probe, no encoder") & (probe.k == "1")]
    per_task = [sel[sel.task == t].bal_acc.mean() for t in report.SUMMARY_TASKS]
    assert cells[:5] == [f"{v:.3f}" for v in per_task]
    assert cells[5] == f"{np.mean(per_task):.3f}" and cells[-1] == "1.0"
    table = report.probe_table(scores, "all")
    pars = next(x for x in table if x.startswith("| probe, PARS |"))
    means = report.means_by_seed(scores, "all")["probe, PARS"].to_numpy()
    assert f"**{np.mean(means):.3f} ± {np.std(means, ddof=1):.3f}**" in pars


def test_the_report_is_written_from_the_rows(report, tmp_path, monkeypatch):
    probe = _rows(np.random.default_rng(1))
    out = tmp_path / "cmp"
    with open(tmp_path / "cmp_probe.jsonl", "w") as f:
        for row in probe.to_dict("records"):
            f.write(json.dumps(row) + "\n")
    runs = {f"{m}-{s}": dict(model=m.upper(), valid_skill=0.1 * s, final_train_loss=1.0)
            for m in ("pars", "mae", "mp3", "droppos") for s in (0, 1, 2)}  # fmt: skip
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    monkeypatch.setattr(report, "ENCODERS", tmp_path)
    report.write_report(out)
    text = out.with_suffix(".md").read_text()
    assert "PARS beats no pretraining" not in text  # no random-encoder rows: no claim
    assert "| probe, PARS |" in text


def test_one_subject_fine_tuning_means_over_the_five_draws_and_needs_them_all(report):
    rng = np.random.default_rng(2)
    rows = [
        dict(row=row, seed=seed, k="1 subject", draw=draw, bal_acc=rng.uniform(0.4, 0.7))
        for row in ("full fine-tuning, PARS", "from scratch")
        for seed in (0, 1, 2)
        for draw in range(5)
    ]
    ft = pd.DataFrame(rows[:-1])  # the last draw of scratch seed 2 has not run yet
    means = report.ft_one_means(ft)
    for seed in (0, 1, 2):
        sel = ft[(ft.row == "full fine-tuning, PARS") & (ft.seed == seed)]
        assert means["full fine-tuning, PARS"][seed] == pytest.approx(sel.bal_acc.mean())
    assert list(means["from scratch"].index) == [0, 1]  # seed 2 is incomplete: left out


def test_mi_fine_tuning_means_over_draws_then_the_four_tasks_and_needs_them_all(report):
    rng = np.random.default_rng(3)
    rows = [
        dict(
            row=row,
            seed=seed,
            task=task,
            k=k,
            draw=draw,
            bal_acc=rng.uniform(0.3, 0.8),
            seconds=1.0,
        )
        for row in ("full fine-tuning, PARS", "EEGNet")
        for seed in (0, 1)
        for task in report.MI_TASKS
        for k, draws in (("1", range(5)), ("all", (0,)))
        for draw in draws
    ]
    rows.append(dict(row="EEGNet", seed=0, task="eegmat-main", k="1 subject", draw=0,
                     bal_acc=0.99, seconds=1.0))  # fmt: skip  # another table: not read
    frame = pd.DataFrame(rows)
    # EEGNet seed 1 lacks one MI task at k = 1: that seed is left out of its mean
    frame = frame[~((frame.row == "EEGNet") & (frame.seed == 1) & (frame.k == "1")
                    & (frame.task == report.MI_TASKS[0]))]  # fmt: skip
    means, _ = report.ft_mi_means(frame)
    for seed in (0, 1):
        sel = frame[(frame.row == "full fine-tuning, PARS") & (frame.seed == seed)
                    & (frame.k == "1")]  # fmt: skip
        naive = np.mean([sel[sel.task == t].bal_acc.mean() for t in report.MI_TASKS])
        assert means["full fine-tuning, PARS"]["1"][seed] == pytest.approx(naive)
    assert list(means["EEGNet"]["1"].index) == [0]
    assert list(means["EEGNet"]["all"].index) == [0, 1]
    table = "\n".join(report.ft_mi_table(frame))
    assert "| EEGNet |" in table and "0.990" not in table
