"""The command line's own behaviour: quiet help, the encoder size, the step budget, and
the data assembly it shares with scripts (datasets.pretraining_views)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import braindecode_pars.cli as cli
from braindecode_pars.cli.pretrain import SIZES, encoder_settings
from braindecode_pars.datasets.pretraining_views import (
    data_key,
    eegmat_subjects,
    recording_windows,
)
from braindecode_pars.models.config import ENCODER_SIZES

from ._helpers import stop_before_pretraining

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
TINY = ["--emb-dim", "16", "--depth", "1", "--n-heads", "2", "--ff-dim", "16", "--device", "cpu"]

#: Runs every command's --help in one process; prints the package modules it loaded.
HELP_SCRIPT = """
import argparse, sys
from braindecode_pars.cli import build_parser, main
loaded = set(sys.modules)
action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
for command in [[], *([name] for name in action.choices)]:
    try:
        main([*command, "--help"])
    except SystemExit as exit:
        assert exit.code == 0, (command, exit.code)
new = sorted(m for m in set(sys.modules) - loaded if m.startswith("braindecode_pars"))
print("LOADED", *new)
"""


def test_every_help_prints_no_warning_and_loads_nothing_beyond_the_parser():
    done = subprocess.run(
        [sys.executable, "-c", HELP_SCRIPT], env=ENV, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Warning" not in done.stderr and "warning" not in done.stderr, done.stderr
    assert done.stdout.count("usage: braindecode-pars") == 5  # the tool and its 4 commands
    assert "--size {small,paper}" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "LOADED"  # no module of the package
    module = subprocess.run(
        [sys.executable, "-m", "braindecode_pars.cli", "pretrain", "--help"],
        env=ENV, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert module.returncode == 0 and "Warning" not in module.stderr, module.stderr
    assert "usage: braindecode-pars pretrain" in module.stdout


def test_every_flag_has_help_and_says_its_default():
    import argparse

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        text = command.format_help()
        for action in command._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            assert action.help, (name, action.option_strings)
            default = action.default
            if isinstance(default, int | float | str) and not isinstance(default, bool):
                assert (
                    f"default: {default}" in " ".join(text.split()) or "default" in action.help
                ), (
                    name,
                    action.option_strings,
                )
    pretrain = " ".join(sub.choices["pretrain"].format_help().split())
    assert "--threads THREADS torch CPU threads (default: the cores not busy" in pretrain
    assert "--stride-seconds STRIDE_SECONDS step between the starts" in pretrain


def test_the_command_modules_import_only_the_standard_library_at_module_level():
    """What a command needs beyond the standard library is imported when it runs, so
    that building the parser (and --help) stays fast."""
    import ast

    for path in sorted(Path(cli.__file__).parent.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1, f"{path.name} imports ..{node.module} at module level"
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names = (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                )
                for name in names:
                    top = name.partition(".")[0]
                    assert top in sys.stdlib_module_names or top == "__future__", (path, name)


def test_pretrain_defaults_to_the_small_encoder_and_size_paper_gives_the_papers():
    assert set(SIZES) == set(ENCODER_SIZES)
    args = cli._parse(["pretrain", "--out", "run"])
    assert args.size == "small" and encoder_settings(args) == ENCODER_SIZES["small"]
    paper = cli._parse(["pretrain", "--out", "run", "--size", "paper"])
    assert encoder_settings(paper) == ENCODER_SIZES["paper"]
    deeper = cli._parse(["pretrain", "--out", "run", "--size", "paper", "--depth", "2"])
    assert encoder_settings(deeper) == dict(ENCODER_SIZES["paper"], depth=2)
    with pytest.raises(SystemExit):  # argparse names the choices
        cli._parse(["pretrain", "--out", "run", "--size", "medium"])


def test_the_encoder_size_reaches_pretraining_and_a_bad_one_is_refused_before_any_work(
    monkeypatch, tmp_path
):
    given = stop_before_pretraining(monkeypatch)
    for flags, size in (
        ([], ENCODER_SIZES["small"]),
        (["--size", "paper"], ENCODER_SIZES["paper"]),
        (["--emb-dim", "32"], dict(ENCODER_SIZES["small"], emb_dim=32)),
    ):
        with pytest.raises(SystemExit):
            cli.main(["pretrain", "--out", str(tmp_path / "run"), "--device", "cpu", *flags])
        assert given["encoder_kwargs"] == size
    monkeypatch.setattr(cli.pretrain, "_pretrain_view", lambda args: pytest.fail("data read"))
    with pytest.raises(SystemExit, match=r"--size small --n-heads 3: 'emb_dim' must be even"):
        cli.main(["pretrain", "--out", "unused", "--n-heads", "3"])
    with pytest.raises(SystemExit, match=r"'--eegmat-subjects' takes subject numbers, 'pool' or"):
        cli.main(["pretrain", "--out", "unused", "--shared-data", "x", "--eegmat-subjects", "a"])


def test_steps_are_counted_over_the_windows_the_split_leaves(tmp_path):
    """Three recordings of 12, 12 and 25 windows; --valid-fraction 0.3 holds out whole
    recordings, 25 windows (the rounded fraction would be 15): 24 train, 3 batches of 8
    an epoch, so --steps 10 takes 4 epochs, 12 steps (over the fraction: 2 epochs, 6)."""
    from braindecode_pars.hub import _run_state

    store = ["store", "--out", str(tmp_path / "store"), "--runs", "1", "2", "3"]
    cli.main([*store, "--window-seconds", "5", "--stride-seconds", "5"])
    run = tmp_path / "run"
    flags = ["--store", str(tmp_path / "store"), "--out", str(run), "--n-patches", "4"]
    flags += ["--batch-size", "8", "--valid-fraction", "0.3", "--steps", "10"]
    assert cli.main(["pretrain", *flags, *TINY]) == 0
    history = json.loads((_run_state(run) / "history.json").read_text())
    validated = [row for row in history if "valid_loss" in row]  # on the cadence
    assert [row["epoch"] for row in validated] == [1, 4]  # 3 steps an epoch, every 200
    assert {row["valid_split"] for row in validated} == {"recordings"}
    assert len(history) == 4 and sum(row["train_batch_count"] for row in history) == 12


def test_eegmat_subjects_take_numbers_and_train_and_name_the_parameter():
    from braindecode_pars.datasets import EEGMAT_TRAIN_SUBJECTS

    assert eegmat_subjects(None) == eegmat_subjects([]) == EEGMAT_TRAIN_SUBJECTS
    assert eegmat_subjects(["3", 1, "3"]) == (1, 3)
    assert eegmat_subjects(["train", "35"]) == tuple(sorted({*EEGMAT_TRAIN_SUBJECTS, 35}))
    with pytest.raises(ValueError, match=r"'--subjects' takes .* but got 'all'"):
        eegmat_subjects(["all"], name="--subjects")


def test_eegmat_subjects_pool_is_the_development_tasks_pool():
    from braindecode_pars.datasets.eegmat import EEGMAT_POOL_SUBJECTS

    assert eegmat_subjects(["pool", "1"]) == tuple(sorted({*EEGMAT_POOL_SUBJECTS, 1}))


def test_recording_windows_without_a_source_and_the_store_key_of_the_data_flags():
    assert recording_windows() is None
    # the name of the store a torchrun run writes in --out: resumed runs find theirs
    flags = dict(recordings=["data/*.edf"], shared_data=None, sfreq=None, window_seconds=10.0,
                 stride_seconds=5.0, l_freq=0.3, h_freq=None, notch_freq=None, exclude=None,
                 keep_all_channels=False, eegmat_subjects=None, muse=False)  # fmt: skip
    assert data_key(flags) == data_key(dict(reversed(flags.items())))
    assert data_key(flags) == "dd88c81440"  # as before the command line was split
    assert data_key(dict(flags, sfreq=200.0)) != data_key(flags)
