import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from benchmarks import lab
from benchmarks.lib import comparison

ComparisonConfig, format_table = comparison.ComparisonConfig, comparison.format_table
run_comparison, summarize = comparison.run_comparison, comparison.summarize

TINY = dict(
    seeds=(0,),
    n_train_blocks=(1,),
    emb_dim=16,
    depth=1,
    n_heads=2,
    ff_dim=16,
    n_patches=10,
    pretrain_epochs=1,
    finetune_epochs=1,
    pretrain_batch_size=64,
)


def test_every_method_runs_on_the_same_footing(tmp_path):
    plt.close("all")
    scores = run_comparison(tmp_path, ComparisonConfig(**TINY))
    assert plt.get_fignums() == []  # the figure it wrote to a file is closed
    assert len(scores) == 6 * 3  # the floor and five methods, three held-out blocks
    assert set(scores.method) == {"floor", "scratch", "mae", "mp3", "droppos", "pars"}
    # the same training blocks for every method of a seed and test block
    per_fold = scores.groupby(["test_block"])["train_blocks"].nunique()
    assert (per_fold == 1).all()
    for row in scores.itertuples():
        assert str(row.test_block) not in row.train_blocks
    for name in ("scores.csv", "table.md", "label_efficiency.png", "config.json"):
        assert (tmp_path / name).is_file()
    for method in ("mae", "mp3", "droppos", "pars"):
        assert (tmp_path / "encoders" / f"{method}_seed0.pt").is_file()
    saved = json.loads((tmp_path / "config.json").read_text())
    assert len(saved["pretraining"]) == 4
    table = (tmp_path / "table.md").read_text()
    assert "Made by:" in table and "| PARS | 2 |" in table
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    # the floor first, then the paper's order
    assert rows[1:7] == ["Floor (band power)", "Scratch", "MAE", "MP3", "DropPos", "PARS"]


def test_summary_is_mean_and_std_over_seeds_of_the_mean_over_test_blocks():
    rows = []
    for seed, offset in ((0, 0.0), (1, 0.2)):
        for block, value in ((1, 0.3), (2, 0.5)):
            rows.append(
                {
                    "method": "pars",
                    "seed": seed,
                    "n_train_runs": 2,
                    "test_block": block,
                    "balanced_accuracy": value + offset,
                    "kappa": 0.0,
                }
            )
    summary = summarize(pd.DataFrame(rows))
    ba = summary.loc[("pars", 2), "balanced_accuracy"]
    assert ba["mean"] == pytest.approx(0.5)  # seed means 0.4 and 0.6
    assert ba["std"] == pytest.approx(np.std([0.4, 0.6], ddof=1))
    assert "0.500 ± 0.141" in format_table(summary, ComparisonConfig())


def test_bad_method_is_refused_before_any_work(tmp_path):
    with pytest.raises(
        ValueError, match="'methods' parameter. Allowed values are 'floor', 'scratch'"
    ):
        run_comparison(tmp_path, ComparisonConfig(methods=("pars", "byol")))
    assert not (tmp_path / "scores.csv").exists()


def test_command_line_writes_the_table(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(lab, "ComparisonConfig", lambda: ComparisonConfig(**TINY))
    lab.main(["compare", "--out", str(tmp_path), "--methods", "scratch", "pars", "--seeds", "3"])
    printed = capsys.readouterr().out
    assert "| Scratch |" in printed and "| PARS |" in printed and "| MAE |" not in printed
    assert set(pd.read_csv(tmp_path / "scores.csv").seed) == {3}
