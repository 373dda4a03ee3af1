import json

import numpy as np
import torch

from braindecode_pars.cli import main
from braindecode_pars.experiments.demo import DemoConfig, format_results, run_demo
from braindecode_pars.viz import plot_training_curves, sorted_shift_matrices


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
    pred, true, err = sorted_shift_matrices(out)
    np.testing.assert_allclose(true, [[0, -0.1, -0.2], [0.1, 0, -0.1], [0.2, 0.1, 0]])
    # patch 10 (index 1) kept its PE: its row and column are empty
    assert np.all(pred[0] == 0) and np.all(pred[:, 0] == 0)
    np.testing.assert_allclose(pred[1:, 1:], 0.5 * true[1:, 1:])
    np.testing.assert_allclose(err[1:, 1:], 0.5 * np.abs(true[1:, 1:]))


def test_training_curves_figure_has_both_panels():
    hist = [{"epoch": e, "train_loss": 1 / e, "valid_loss": 1.2 / e, "lr": 1e-4} for e in (1, 2)]
    fig = plot_training_curves(hist, {"PARS": [hist], "scratch": [hist]})
    assert len(fig.axes) == 3  # pretraining, its learning-rate twin, fine-tuning


TINY = dict(
    emb_dim=16,
    depth=1,
    n_heads=2,
    ff_dim=16,
    n_patches=10,
    pretrain_epochs=2,
    finetune_epochs=2,
    pretrain_batch_size=64,
)


def test_demo_writes_the_table_and_figures(tmp_path):
    results = run_demo(tmp_path, DemoConfig(**TINY))
    assert len(results) == 6 and set(results.method) == {"PARS", "scratch"}
    assert sorted(results.test_block.unique()) == [1, 2, 3]
    assert np.isfinite(results[["balanced_accuracy", "kappa"]].to_numpy()).all()
    for name in (
        "results.csv",
        "results.json",
        "shift_matrices.png",
        "training_curves.png",
        "encoder.pt",
        "pretrain/encoder_best.pt",
    ):
        assert (tmp_path / name).is_file(), name
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["config"]["emb_dim"] == 16 and len(saved["folds"]) == 6
    assert "mean" in format_results(results)


def test_command_line_runs_the_demo(tmp_path, capsys, monkeypatch):
    import braindecode_pars.experiments.demo as demo

    monkeypatch.setattr(demo, "DemoConfig", lambda: DemoConfig(**TINY))
    assert (
        main(["demo", "--out", str(tmp_path), "--pretrain-epochs", "1", "--finetune-epochs", "1"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "scratch" in printed and "chance" in printed
    assert json.loads((tmp_path / "results.json").read_text())["config"]["pretrain_epochs"] == 1
