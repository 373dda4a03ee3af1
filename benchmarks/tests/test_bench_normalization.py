"""The normalisation selection's rule (``benchmarks/bench_normalization.py``) on scores
whose answer is known, and the runs it asks for."""

import pytest

from benchmarks.bench_normalization import (
    MODES,
    SEEDS,
    STORE,
    choose,
    command_lines,
    commands,
    runs,
)
from benchmarks.tests.conftest import ROOT


def test_an_amplitude_mode_is_chosen_only_beyond_the_larger_spread():
    window = [0.58, 0.60, 0.62]  # mean 0.60, std 0.02
    clear = {"window": window, "window+scale": [0.64, 0.65, 0.66], "fixed": [0.5, 0.6, 0.7]}
    chosen, table = choose(clear)  # +0.05 > 0.02; fixed's +0.0 does not count
    assert chosen == "window+scale"
    assert table["window"][:2] == pytest.approx((0.60, 0.02))
    within = {"window": window, "window+scale": [0.58, 0.63, 0.68], "fixed": window}
    assert choose(within)[0] == "window"  # +0.03 within its own spread of 0.05
    both = {"window": window, "window+scale": [0.64, 0.65, 0.66], "fixed": [0.69, 0.7, 0.71]}
    assert choose(both)[0] == "fixed"  # both beat it: the higher score
    short = {"window": window, "window+scale": [0.9, 0.9], "fixed": window}
    assert choose(short)[0] == "window"  # a mode without its three seeds is never chosen


def test_every_amplitude_run_reads_the_microvolt_store_with_its_mode_and_seed():
    names = runs()
    assert len(names) == len(MODES) * len(SEEDS)
    for name, (mode, seed) in names.items():
        if mode == "window":
            continue
        run, export, config = commands(name, threads=1, max_minutes=30)
        assert f"--store {STORE}" in run and "--steps 30000" in run and "--max-minutes 30" in run
        assert config == {"normalization": mode, "unit": "uV", "n_patches": 40,
                          "valid_fraction": 0.1, "seed": seed}  # fmt: skip
        assert export.endswith(f"benchmarks/encoders/normalization/{name}")


def test_the_recorded_report_ends_with_the_commands_it_ran():
    text = (ROOT / "benchmarks/results/normalization.md").read_text()
    assert text.endswith("\n## Commands\n\n```\n" + "\n".join(command_lines()) + "\n```\n")


def test_the_fine_tuner_rows_land_in_the_test_csv_once_and_in_its_table(tmp_path, monkeypatch):
    import numpy as np

    from benchmarks import bench_normalization as bn
    from benchmarks.lib.dev_tasks import DEV_TASKS
    from benchmarks.tests.conftest import TINY
    from braindecode_pars.models.encoder import PatchEncoder

    # one block task of three blocks (1 and 2 labelled in turn, 3 scored), tiny windows in µV
    rng = np.random.default_rng(0)
    units = np.repeat([1, 2, 3], 12)
    y = np.tile([0, 1], 18)
    t = np.arange(400) / 100.0
    X = 10 * rng.standard_normal((36, 3, 400)) + 20 * y[:, None, None] * np.sin(20 * np.pi * t)
    task = "mi-imagery-lr"
    monkeypatch.setattr(bn, "DEV_TASKS", {task: DEV_TASKS[task]})
    monkeypatch.setattr(bn, "load_task", lambda name, part: (X.astype(np.float32), y, units,
                                                             (1, 2), (3,), 100.0))  # fmt: skip
    names = [bn.run_name(mode, 0) for mode in bn.MODES]
    encoders = {n: PatchEncoder(sfreq=100.0, normalization=bn.runs()[n][0], **TINY) for n in names}
    monkeypatch.setattr(bn, "encoder_folder", encoders.__getitem__)
    monkeypatch.setattr(bn, "FINETUNE_PARAMS", {"max_epochs": 1})  # the wiring, not the skill
    csv = tmp_path / "normalization_test.csv"

    bn.evaluate(names, csv, "test")
    scores = bn.evaluate_finetuning(names, csv, draws=(0, 1))
    tuned = scores[scores.method.isin([bn.FINETUNE_METHOD, bn.SCRATCH_METHOD])]
    expected = [("reference", bn.SCRATCH_METHOD, d) for d in (0, 1)]
    expected += [(n, bn.FINETUNE_METHOD, d) for n in names for d in (0, 1)]
    assert sorted(zip(tuned.encoder, tuned.method, tuned.draw, strict=True)) == sorted(expected)
    assert tuned.balanced_accuracy.between(0, 1).all()

    def refit(*args):
        raise AssertionError("a row already in the CSV was fitted again")

    monkeypatch.setattr(bn, "finetune_score", refit)
    again = bn.evaluate_finetuning(names, csv, draws=(0, 1))
    assert len(again) == len(scores)

    command = "python -m benchmarks.bench_normalization --part test --finetune-draws 0 1"
    bn.report_test(again, names, "window", tmp_path / "normalization_test", command)
    text = (tmp_path / "normalization_test.md").read_text()
    assert f"Command: `{command}`" in text
    for mode in bn.MODES:
        assert f"| {bn.FINETUNE_METHOD}, {mode} (1 seeds) |" in text
        assert f"| {bn.SCORE}, {mode} (1 seeds) |" in text
    assert f"| {bn.SCRATCH_METHOD} |" in text and "draw(s) 0 1 only" in text
