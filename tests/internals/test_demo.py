import json

import numpy as np
import pytest
import torch

from braindecode_pars.cli import main
from braindecode_pars.demo.main_job import DemoConfig, format_results, run_demo
from braindecode_pars.estimators.classifier import DEFAULT_ENCODER
from braindecode_pars.viz import _sorted_shift_matrices, plot_training_curves

from .._learning import SEED, learned


def test_shift_matrices_are_sorted_chronologically_and_masked():
    starts = torch.tensor([[30, 10, 20]])
    theta = (starts[:, :, None] - starts[:, None, :]) / 100.0
    pos_mask = torch.tensor([[True, False, True]])
    pair_mask = pos_mask[:, :, None] & pos_mask[:, None, :]
    out = {
        "starts": starts,
        "theta_true": theta,
        "theta_pred": theta * pair_mask * 0.5,
        "pair_mask": pair_mask,
    }
    pred, true, err = _sorted_shift_matrices(out)
    np.testing.assert_allclose(true, [[0, -0.1, -0.2], [0.1, 0, -0.1], [0.2, 0.1, 0]])
    # patch 10 (index 1) kept its PE: its row and column are empty
    assert np.all(pred[0] == 0) and np.all(pred[:, 0] == 0)
    np.testing.assert_allclose(pred[1:, 1:], 0.5 * true[1:, 1:])
    np.testing.assert_allclose(err[1:, 1:], 0.5 * np.abs(true[1:, 1:]))


def test_training_curves_figure_has_both_panels():
    hist = [{"epoch": e, "train_loss": 1 / e, "valid_loss": 1.2 / e, "lr": 1e-4} for e in (1, 2)]
    fig = plot_training_curves(hist, {"PARS": [hist], "scratch": [hist]})
    assert len(fig.axes) == 3  # pretraining, its learning-rate twin, fine-tuning
    skill = [
        {**row, "train_skill": 0.1 * e, "valid_skill": 0.1 * e, "train_trivial": 1.0}
        for e, row in enumerate(hist, 1)
    ]
    fig = plot_training_curves(skill, None)
    assert len(fig.axes) == 3  # pretraining, its learning-rate twin, skill
    assert any("skill" in ax.get_ylabel() for ax in fig.axes)


#: The main job at its smallest: one draw, one labelled subject, two test subjects.
TINY = dict(ks=(1,), seeds=(0,), test_subjects=(1, 4), pool_subjects=(0, 2), finetune_epochs=2)


def test_demo_writes_the_table_and_figures(tmp_path):
    config = DemoConfig(**TINY, seed=SEED)  # the shift predictions' draws
    results = run_demo(tmp_path, config)
    names = {
        "floor (band power)",
        "probe: pars-small-v2",  # PARSClassifier()
        "probe: no encoder",  # PARSProbe()
        "probe: random encoder",
        "trained from scratch",
    }
    assert len(results) == 5 and set(results.method) == names
    assert np.isfinite(results[["balanced_accuracy", "kappa"]].to_numpy()).all()
    for name in (
        "results.csv",
        "results.json",
        "shift_matrices.png",
        "training_curves.png",
        "label_efficiency.png",
    ):
        assert (tmp_path / name).is_file(), name
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["config"]["ks"] == [1] and len(saved["runs"]) == 5
    assert saved["config"]["encoder"] == DEFAULT_ENCODER  # PARSClassifier()'s head's
    # the shipped model predicts shifts on a window of a subject it never saw
    learned(saved["shipped_encoder_skill_on_test_window"], above=0.1, what="shipped model's skill")
    table = format_results(results)
    assert "k=1" in table and "s per fit" in table
    seconds = results.groupby("method")["seconds"].mean()
    assert f"{seconds['trained from scratch']:.1f}" in table.splitlines()[-2]
    again = run_demo(tmp_path, config)  # resumes: nothing runs again
    assert again.equals(results) or np.allclose(
        again.balanced_accuracy.to_numpy(), results.balanced_accuracy.to_numpy()
    )


@pytest.mark.slow
def test_command_line_runs_the_demo(tmp_path, capsys, monkeypatch):
    import braindecode_pars.demo.main_job as demo

    monkeypatch.setattr(demo, "DemoConfig", lambda: DemoConfig(**TINY))
    assert main(["demo", "--out", str(tmp_path), "--finetune-epochs", "1"]) == 0
    printed = capsys.readouterr().out
    assert "scratch" in printed and "chance" in printed and "floor" in printed
    assert json.loads((tmp_path / "results.json").read_text())["config"]["finetune_epochs"] == 1
