"""The command line's own behaviour: quiet help, the encoder size, the step budget, and
the data assembly it shares with scripts (datasets.pretraining_views)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import braindecode_pars.cli as cli
from braindecode_pars.cli._commands import SIZES, encoder_settings
from braindecode_pars.datasets.pretraining_views import eegmat_subjects, recording_windows
from braindecode_pars.models.encoder_config import ENCODER_SIZES

from ._helpers import stop_before_pretraining, tiny_config

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}

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
    for name in ENCODER_SIZES["small"]:  # the settings only --config sets, each named
        assert f"{name} (" in pretrain
    store = " ".join(sub.choices["store"].format_help().split())
    assert "--stride-seconds STRIDE_SECONDS step between window starts (default: 5.0)" in store


def test_data_preparation_is_stores_alone_and_pretrain_reads_a_store():
    """The flags that read and preprocess recordings are ``store``'s; ``pretrain`` reads
    its ``--store`` (or the bundled EEG), so the two share no data flag."""
    import argparse

    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {
        name: {s for a in command._actions for s in a.option_strings}
        for name, command in sub.choices.items()
    }
    shared = {"-h", "--help", "--out", "--window-seconds", "--stop-signal"}
    assert flags["store"] & flags["pretrain"] == shared
    for flag in ("--recordings", "--shared-data", "--sfreq", "--notch-freq", "--subjects"):
        with pytest.raises(SystemExit):
            cli._parse(["pretrain", "--out", "run", flag, "1"])


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
    with pytest.raises(SystemExit):  # argparse names the choices
        cli._parse(["pretrain", "--out", "run", "--size", "medium"])


def test_the_config_file_sets_the_encoder_settings_and_every_flag(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"depth": 2, "n-heads": 4, "steps": 10, "store": "s"}))
    args = cli._parse(["pretrain", "--out", "run", "--size", "paper", "--config", str(config)])
    assert encoder_settings(args) == dict(ENCODER_SIZES["paper"], depth=2, n_heads=4)
    assert (args.steps, args.store) == (10, "s")
    given = cli._parse(["pretrain", "--config", str(config), "--out", "r", "--steps", "3"])
    assert given.steps == 3  # a flag given takes precedence
    parser = cli.build_parser()
    pretrain = cli._subparser(parser, "pretrain")
    every = {a.dest: a.default for a in pretrain._actions if a.dest not in ("help", "config")}
    config.write_text(json.dumps(dict(every, out="run")))
    assert vars(cli._parse(["pretrain", "--config", str(config)]))["out"] == "run"
    config.write_text(json.dumps({"recordings": ["a.edf"]}))
    with pytest.raises(SystemExit, match=r"unknown options \['recordings'\]"):
        cli._parse(["pretrain", "--out", "run", "--config", str(config)])


def test_the_encoder_size_reaches_pretraining_and_a_bad_one_is_refused_before_any_work(
    monkeypatch, tmp_path
):
    given = stop_before_pretraining(monkeypatch)
    for flags, size in (
        ([], ENCODER_SIZES["small"]),
        (["--size", "paper"], ENCODER_SIZES["paper"]),
        (tiny_config(tmp_path, emb_dim=32), dict(emb_dim=32, depth=1, n_heads=2, ff_dim=16)),
    ):
        with pytest.raises(SystemExit):
            cli.main(["pretrain", "--out", str(tmp_path / "run"), "--device", "cpu", *flags])
        assert given["encoder_kwargs"] == size
    monkeypatch.setattr(cli._commands, "_pretrain_view", lambda args: pytest.fail("data read"))
    (tmp_path / "bad.json").write_text('{"n_heads": 3}')
    with pytest.raises(SystemExit, match=r"--size small with --config's n_heads 3: 'n_heads' must"):
        cli.main(["pretrain", "--out", "unused", "--config", str(tmp_path / "bad.json")])
    with pytest.raises(SystemExit, match=r"'--eegmat-subjects' takes subject numbers, 'pool' or"):
        cli.main(["store", "--out", "unused", "--shared-data", "x", "--eegmat-subjects", "a"])


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
    assert cli.main(["pretrain", *flags, "--device", "cpu", *tiny_config(tmp_path)]) == 0
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


def test_recording_windows_without_a_source_is_none():
    assert recording_windows() is None
