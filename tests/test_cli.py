"""The command line's own behaviour: quiet help, its flags (at most 40, the tuning ones in
an "advanced" group, the other settings in --config), the encoder size and the step
budget. The lab's ``store`` of the paper's corpora is tested with the lab
(benchmarks/tests)."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import braindecode_pars.cli as cli

from ._helpers import tiny_config

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

#: The flags that left the command line, and where their setting is now.
PAPER_CORPUS_FLAGS = ("--ysyw", "--tueg", "--tuab", "--tusz", "--allow-test-patients",
                      "--ysyw-split-file", "--shared-data", "--eegmat-subjects", "--muse",
                      "--subjects", "--runs", "--data-path")  # fmt: skip
CONFIG_FLAGS = ("--n-patches", "--pos-mask-ratio", "--mask-ratio", "--decoder-heads",
                "--sampling", "--lr", "--valid-fraction", "--seed", "--checkpoint-minutes",
                "--stop-signal", "--amp", "--compile", "--compile-mode",
                "--keep-freed-memory")  # fmt: skip


def commands():
    """The parser of each command, by name."""
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def flags_of(parser):
    """The flags of ``parser`` (``--help`` aside), one per action."""
    return [
        a.option_strings[-1]
        for a in parser._actions
        if a.option_strings and not isinstance(a, argparse._HelpAction)
    ]


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


def test_the_command_line_has_at_most_41_flags_and_the_papers_corpora_left_it():
    """The redesign's 40, and ``store --subject-from``: the choice of what groups a
    user's recordings into people, which a header's patient code does only on request."""
    counted = {name: flags_of(parser) for name, parser in commands().items()}
    assert set(counted) == {"store", "pretrain", "demo", "export"}
    assert "--out" in counted["store"] and "--read" in counted["pretrain"]  # the count finds
    assert {name: len(flags) for name, flags in counted.items()} == {
        "demo": 6, "store": 17, "pretrain": 16, "export": 2,
    }  # fmt: skip
    assert sum(len(flags) for flags in counted.values()) <= 41
    every = {flag for flags in counted.values() for flag in flags}
    gone = ("--no-default-exclude", "--keep-all-channels", *PAPER_CORPUS_FLAGS)
    assert every.isdisjoint(gone), every & set(gone)
    assert set(counted["pretrain"]).isdisjoint(CONFIG_FLAGS)  # in --config


def test_the_advanced_group_holds_the_tuning_flags_alone():
    pretrain = commands()["pretrain"]
    groups = {
        g.title: {a.option_strings[-1] for a in g._group_actions} for g in pretrain._action_groups
    }
    assert groups["advanced"] == {"--threads", "--workers", "--read"}
    assert "--threads" not in groups["options"] and "--steps" in groups["options"]
    text = pretrain.format_help()
    assert text.index("\nadvanced:\n") > text.index("--extend")  # after the run's flags
    assert "set by name in --config" in " ".join(text.split())


def test_every_flag_has_help_and_says_its_default():
    for name, command in commands().items():
        text = command.format_help()
        for action in command._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            assert action.help, (name, action.option_strings)
            default = action.default
            if isinstance(default, int | float | str) and not isinstance(default, bool):
                assert (
                    f"default: {default}" in " ".join(text.split()) or "default" in action.help
                ), (name, action.option_strings)
    pretrain = " ".join(commands()["pretrain"].format_help().split())
    assert "--threads THREADS torch CPU threads (default: the cores not busy" in pretrain
    store = " ".join(commands()["store"].format_help().split())
    assert "--stride-seconds STRIDE_SECONDS step between window starts: overlapping" in store
    assert "strides by the window unless told: windows one after the other) (default: 5.0)" in (
        store
    )
    assert "(default: )" not in store  # --stop-signal's empty list says nothing
    assert "python -m benchmarks.lab store" in store  # where the paper's corpora went


def test_data_preparation_is_stores_alone_and_pretrain_reads_a_store():
    """The flags that read and preprocess recordings are ``store``'s; ``pretrain`` reads
    its ``--store`` (or the bundled EEG), so the two share no data flag."""
    flags = {name: set(flags_of(parser)) for name, parser in commands().items()}
    assert flags["store"] & flags["pretrain"] == {"--out", "--window-seconds"}
    for flag in ("--recordings", "--sfreq", "--notch-freq", "--exclude"):
        with pytest.raises(SystemExit):
            cli.main(["pretrain", "--out", "run", flag, "1"])


@pytest.mark.parametrize(
    "argv, message",
    [
        pytest.param(["pretrain", "--lr", "1e-4"], r'\{"lr": 0.0001\}', id="lr"),
        pytest.param(["pretrain", "--n-patches", "12"], r'\{"n_patches": 12\}', id="patches"),
        pytest.param(["pretrain", "--no-amp"], r'\{"amp": false\}', id="no-amp"),
        pytest.param(["pretrain", "--sampling=fixed"], r'\{"sampling": "fixed"\}', id="="),
        pytest.param(["store", "--ysyw", "y"], r"python -m benchmarks.lab store --ysyw", id="ysyw"),
        pytest.param(["store", "--runs", "1"], r"python -m benchmarks.lab store --runs", id="runs"),
        pytest.param(["store", "--keep-all-channels"], r"'--exclude none' keeps", id="merged"),
    ],
)
def test_a_flag_that_left_says_where_its_setting_is(argv, message):
    with pytest.raises(SystemExit, match=rf"{argv[1].split('=')[0]} is not a flag.*{message}"):
        cli.main([argv[0], "--out", "o", *argv[1:]])
    with pytest.raises(SystemExit) as unknown:  # any other: argparse's usage error
        cli.main(["pretrain", "--out", "o", "--bogus", "1"])
    assert unknown.value.code == 2


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
                    in_cli = name.startswith("braindecode_pars.cli")
                    assert top in sys.stdlib_module_names or top == "__future__" or in_cli, (
                        path,
                        name,
                    )


def test_steps_are_counted_over_the_windows_the_split_leaves(tmp_path):
    """Three recordings of 12, 12 and 25 windows; valid_fraction 0.3 holds out whole
    recordings, 25 windows (the rounded fraction would be 15): 24 train, 3 batches of 8
    an epoch, so --steps 10 takes 4 epochs, 12 steps (over the fraction: 2 epochs, 6)."""
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
    from braindecode_pars.hub.folders import run_state
    from braindecode_pars.store import write_window_store

    windows = load_physionet_mi_continuous(runs=(1, 2, 3), window_seconds=5, stride_seconds=5)
    write_window_store(windows, tmp_path / "store")
    run = tmp_path / "run"
    flags = ["--store", str(tmp_path / "store"), "--out", str(run), "--batch-size", "8"]
    flags += ["--steps", "10", *tiny_config(tmp_path, n_patches=4, valid_fraction=0.3)]
    assert cli.main(["pretrain", *flags, "--device", "cpu"]) == 0
    history = json.loads((run_state(run) / "history.json").read_text())
    validated = [row for row in history if "valid_loss" in row]  # on the cadence
    assert [row["epoch"] for row in validated] == [1, 4]  # 3 steps an epoch, every 200
    assert {row["valid_split"] for row in validated} == {"recordings"}
    assert len(history) == 4 and sum(row["train_batch_count"] for row in history) == 12


def test_the_config_sets_the_encoders_input_normalisation(tmp_path):
    """``--config``'s normalisation settings reach the encoder and the run's record;
    window+scale takes the statistics of the store it trains on; a mode that does not
    exist is refused naming the setting before any work."""
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
    from braindecode_pars.hub.folders import load_encoder
    from braindecode_pars.pretraining import SingleChannelWindows
    from braindecode_pars.store import write_window_store

    windows = load_physionet_mi_continuous(runs=(1,), window_seconds=5, stride_seconds=5)
    write_window_store(windows, tmp_path / "store")  # microvolts, as the loaders give
    run = tmp_path / "run"
    flags = ["--store", str(tmp_path / "store"), "--out", str(run), "--steps", "2"]
    config = tiny_config(tmp_path, n_patches=4, normalization="window+scale", unit="uV")
    assert cli.main(["pretrain", *flags, *config, "--device", "cpu"]) == 0
    encoder = load_encoder(run / "encoder.pt")
    statistics = SingleChannelWindows.from_store(tmp_path / "store").log_std_statistics()
    assert (encoder.normalization, encoder.unit) == ("window+scale", "uV")
    assert (encoder.log_std_mean, encoder.log_std_std) == pytest.approx(statistics)
    record = json.loads((run / "config.json").read_text())
    assert record["encoder.normalization"] == "window+scale"
    bad = tiny_config(tmp_path, normalization="zscore")
    with pytest.raises(SystemExit, match=r"'normalization'.*'zscore'"):
        cli.main(["pretrain", "--out", str(tmp_path / "other"), *bad, "--device", "cpu"])
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        pytest.param(
            ["--sfreq", "100"], r"the bundled PhysioNet-MI .* takes no --sfreq", id="sfreq"
        ),
        pytest.param(
            ["--exclude", "none"], r"takes no --exclude: --sfreq, .* are for --rec", id="exclude"
        ),  # fmt: skip
        pytest.param(
            ["--window-seconds", "0"], r"--window-seconds must be above 0, but got 0", id="window"
        ),  # fmt: skip
        pytest.param(["--l-freq", "-1"], r"--l-freq must be at least 0, but got -1", id="lfreq"),
        pytest.param(["--jobs", "0"], r"--jobs must be at least 1, but got 0", id="jobs"),
        pytest.param(["--stop-signal", "KILL"], r"'--stop-signal'", id="signal"),
        pytest.param(
            ["--recordings", "a.edf", "--braindecode-dataset", "b"],
            r"give it alone, but got --recordings too",
            id="two",
        ),  # fmt: skip
    ],
)
def test_store_refuses_bad_flags_naming_them_before_any_work(flags, message, tmp_path):
    with pytest.raises(SystemExit, match=message):
        cli.main(["store", "--out", str(tmp_path / "store"), *flags])
    assert not (tmp_path / "store").exists()
