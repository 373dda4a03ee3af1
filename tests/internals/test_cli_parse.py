"""The command line's parsing and what it hands the run, read from its private parse and
with its data read and the training stubbed (``tests/internals/_stubs.py``)."""

import json
import re

import pytest

import braindecode_pars.cli as cli
from braindecode_pars import PARSPretrainer
from braindecode_pars.cli import build_parser
from braindecode_pars.cli._encoder_commands import (
    _SIZES,
    _config_settings,
    _encoder_settings,
    _pretrain_settings,
)
from braindecode_pars.cli.store import _exclusions
from braindecode_pars.datasets.corpus import _recording_windows
from braindecode_pars.models.encoder_config import ENCODER_SIZES, NORMALIZATION_SETTINGS
from braindecode_pars.pretraining.config import PAPER

from .._helpers import tiny_config
from ..test_cli import commands
from ._stubs import stop_before_pretraining


def test_every_setting_only_the_config_sets_reaches_the_run(monkeypatch, tmp_path):
    """Each setting that is not a flag, given in --config, reaches ``run_pretraining`` (or
    the seed, torch) as the flag that set it did; at its default when not given."""
    import torch

    given = stop_before_pretraining(monkeypatch)
    run = ["pretrain", "--out", str(tmp_path / "run"), "--device", "cpu"]
    with pytest.raises(SystemExit):
        cli.main(run)
    assert (given["lr"], given["n_patches"], given["decoder_heads"]) == (1e-3, 40, 8)
    assert given["stop_signals"] == ["SIGTERM"] and given["checkpoint_every_minutes"] == 5.0
    assert given["batches"] == given["decoder_kernel"] == "auto"
    settings = dict(
        n_patches=12, pos_mask_ratio=0.5, decoder_heads=4, sampling="disjoint", lr=3e-3,
        weight_decay=0.01, valid_fraction=0.2, seed=7, checkpoint_minutes=0,
        stop_signal=["USR1"], amp=False, compile=False, compile_mode="default",
        batches="read-ahead", decoder_kernel="fused",
    )  # fmt: skip
    with pytest.raises(SystemExit):
        cli.main([*run, *tiny_config(tmp_path, **settings)])
    assert torch.initial_seed() == 7
    expected = dict(
        n_patches=12, pos_mask_ratio=0.5, decoder_heads=4, sampling="disjoint", lr=3e-3,
        weight_decay=0.01, valid_fraction=0.2, checkpoint_every_minutes=0,
        stop_signals=["SIGTERM", "USR1"], amp=False, compile=False, compile_mode="default",
        batches="read-ahead", decoder_kernel="fused",
    )  # fmt: skip
    assert {k: given[k] for k in expected} == expected
    with pytest.raises(SystemExit):
        cli.main([*run, "--method", "mae", *tiny_config(tmp_path, mask_ratio=0.5)])
    assert given["method"] == "mae" and given["mask_ratio"] == 0.5


@pytest.mark.parametrize(
    "config, message",
    [
        pytest.param(
            {"read": "ssd"},
            r"'read' in .* takes one of 'random', 'disk', but got 'ssd'",
            id="choice",
        ),  # fmt: skip
        pytest.param({"steps": 2.5}, r"'steps' in .* takes a int, but got 2.5", id="int"),
        pytest.param({"paper": 1}, r"'paper' in .* takes true or false, but got 1", id="switch"),
        pytest.param({"seed": -1}, r"--config: 'seed' must be >= 0, but got -1", id="seed"),
        pytest.param({"amp": "yes"}, r"--config: .*'amp' parameter.* but got 'yes'", id="amp"),
        pytest.param({"stop_signal": ["KILL"]}, r"--config: .*'stop_signal'", id="signal"),
        pytest.param({"lr": 0}, r"--config: .*'lr'", id="lr"),
        pytest.param({"decoder_heads": 3}, r"--config: 'decoder_heads' must divide", id="heads"),
        pytest.param(
            {"checkpoint_minutes": "5"}, r"'checkpoint_minutes' must be a number", id="minutes"
        ),  # fmt: skip
        pytest.param({"epoch": 3}, r"unknown options \['epoch'\]", id="unknown"),
        pytest.param(
            {"batches": "gpu"},
            r"--config: Invalid value for the 'batches' parameter. Allowed values are 'auto', "
            r"'host', 'read-ahead' and 'device', but got 'gpu'",
            id="batches",
        ),  # fmt: skip
        pytest.param(
            {"decoder_kernel": "triton"},
            r"--config: .*'decoder_kernel' parameter.*'tables' and 'fused', but got 'triton'",
            id="kernel",
        ),  # fmt: skip
    ],
)
def test_a_bad_config_setting_is_refused_naming_it_before_any_work(
    config, message, monkeypatch, tmp_path
):
    monkeypatch.setattr(
        cli._encoder_commands, "_pretrain_view", lambda args: pytest.fail("data read")
    )
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(config))
    with pytest.raises(SystemExit, match=message):
        cli.main(["pretrain", "--out", str(tmp_path / "run"), "--config", str(path)])
    assert not (tmp_path / "run").exists()


def test_pretrain_defaults_to_the_small_encoder_and_size_paper_gives_the_papers():
    assert set(_SIZES) == set(ENCODER_SIZES)
    args = cli._parse(["pretrain", "--out", "run"])
    assert args.size == "small" and _encoder_settings(args) == ENCODER_SIZES["small"]
    paper = cli._parse(["pretrain", "--out", "run", "--size", "paper"])
    assert _encoder_settings(paper) == ENCODER_SIZES["paper"]
    with pytest.raises(SystemExit):  # argparse names the choices
        cli._parse(["pretrain", "--out", "run", "--size", "medium"])


def test_the_config_file_sets_the_encoder_settings_and_every_flag(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"depth": 2, "n-heads": 4, "steps": 10, "store": "s"}))
    args = cli._parse(["pretrain", "--out", "run", "--size", "paper", "--config", str(config)])
    assert _encoder_settings(args) == dict(ENCODER_SIZES["paper"], depth=2, n_heads=4)
    assert (args.steps, args.store) == (10, "s")
    given = cli._parse(["pretrain", "--config", str(config), "--out", "r", "--steps", "3"])
    assert given.steps == 3  # a flag given takes precedence
    pretrain = cli._subparser(cli.build_parser(), "pretrain")
    every = {a.dest: a.default for a in pretrain._actions if a.dest not in ("help", "config")}
    config.write_text(json.dumps(dict(every, **_config_settings(), out="run")))
    assert vars(cli._parse(["pretrain", "--config", str(config)]))["out"] == "run"
    config.write_text(json.dumps({"recordings": ["a.edf"]}))
    with pytest.raises(SystemExit, match=r"unknown options \['recordings'\]"):
        cli._parse(["pretrain", "--out", "run", "--config", str(config)])
    config.write_text("[1, 2]")
    with pytest.raises(SystemExit, match=r"must hold a JSON object .* but holds a list"):
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
    monkeypatch.setattr(
        cli._encoder_commands, "_pretrain_view", lambda args: pytest.fail("data read")
    )
    (tmp_path / "bad.json").write_text('{"n_heads": 3}')
    with pytest.raises(SystemExit, match=r"--size small with --config's n_heads 3: 'n_heads' must"):
        cli.main(["pretrain", "--out", "unused", "--config", str(tmp_path / "bad.json")])


def test_exclude_adds_names_to_the_automatic_exclusions_and_none_turns_them_off():
    def parsed(*flags):
        return _exclusions(cli._parse(["store", "--out", "o", *flags]).exclude)

    assert parsed() == "auto"
    assert parsed("--exclude", "X1", "X2") == ["auto", "X1", "X2"]
    assert parsed("--exclude", "none") == []  # every channel of --channels (or EEG-typed)
    assert parsed("--exclude", "none", "X1") == parsed("--exclude", "X1", "none") == ["X1"]


@pytest.mark.parametrize("threads, env, expected", [(None, None, 3), (None, "1", 1), (2, "1", 2)])
def test_pretrain_runs_on_threads_the_flag_or_the_environment_fixes_else_the_idle_cores(
    monkeypatch, tmp_path, threads, env, expected
):
    """``--threads``, else OMP_NUM_THREADS (torchrun sets 1 per process), else the idle
    cores (3 here): a count the environment fixes is not replaced by the cores idle at
    the start, which differ from sitting to sitting and would round a resumed run's sums
    otherwise (issue 75)."""
    import torch

    from braindecode_pars._util import threads as _threads

    stop_before_pretraining(monkeypatch)
    monkeypatch.setattr(_threads, "idle_cores", lambda interval=0.1, max_age=5.0: 3)
    for name in _threads.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if env:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # torch's count, as OMP_NUM_THREADS=1 gives it at its start
    flags = ["--threads", str(threads)] if threads else []
    try:
        with pytest.raises(SystemExit):
            cli.main(["pretrain", "--out", str(tmp_path / "run"), "--device", "cpu", *flags])
        assert torch.get_num_threads() == expected
    finally:
        torch.set_num_threads(before)


def test_paper_batch_of_512_is_shared_by_the_processes(monkeypatch, tmp_path):
    import braindecode_pars.cli as cli
    import braindecode_pars.pretraining.distributed as dist

    seen = stop_before_pretraining(monkeypatch)
    monkeypatch.setattr(dist, "world_size", lambda: 4)
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--out", str(tmp_path / "run"), "--paper", "--device", "cpu"])
    assert seen["batch_size"] == 128 and seen["lr"] == 1e-4 and seen["max_epochs"] == 1000


def test_the_config_help_names_every_setting_only_it_sets_with_its_default():
    """The defaults ``--config``'s help states are those a run takes (PretrainConfig's
    and the command's own), so that the help cannot drift from them."""
    text = " ".join(commands()["pretrain"].format_help().split())
    settings = _config_settings()
    assert set(settings) == {*ENCODER_SIZES["small"], *NORMALIZATION_SETTINGS, "n_patches",
                             "pos_mask_ratio",
                             "mask_ratio", "decoder_heads", "sampling", "lr", "weight_decay",
                             "valid_fraction", "seed", "checkpoint_minutes", "stop_signal",
                             "amp", "compile", "compile_mode", "batches", "decoder_kernel",
                             "keep_freed_memory"}  # fmt: skip
    for name, default in settings.items():
        found = re.search(rf"\b{name} \(([^)]*)\)", text)
        assert found, name
        if isinstance(default, float | int) and not isinstance(default, bool):
            numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?(?:e-?\d+)?", found[1])]
            assert float(default) in numbers, (name, default, found[1])
        elif isinstance(default, bool):
            assert str(default).lower() in found[1], (name, found[1])


def test_store_without_recordings_writes_the_bundled_physionet_mi_subject(tmp_path):
    """No --recordings or --braindecode-dataset: the bundled subject 1's baseline and
    executed-movement runs, at the paper's 200 Hz, in 10-s windows every 5 s."""
    from braindecode_pars.datasets.physionet_mi import _NON_IMAGERY_RUNS
    from braindecode_pars.store import read_window_store

    assert cli.main(["store", "--out", str(tmp_path / "store")]) == 0
    _, index, info = read_window_store(tmp_path / "store")
    runs = [(m["description"]["subject"], m["description"]["run"]) for m in info["recordings"]]
    assert runs == [(1, run) for run in _NON_IMAGERY_RUNS] and info["sfreq"] == 200
    assert set(index[:, 2] - index[:, 1]) == {2000} and index[1, 1] - index[0, 1] == 1000


def test_recording_windows_without_a_source_is_none():
    assert _recording_windows() is None


def test_the_estimator_and_the_command_line_read_the_same_settings_and_preset():
    estimator = PARSPretrainer(n_patches=12, batch_size=32, lr=3e-3, steps=500)
    flags = ["pretrain", "--out", "x", "--batch-size", "32", "--steps", "500"]
    parsed = build_parser().parse_args(flags)
    parsed.n_patches, parsed.lr = 12, 3e-3  # settings of --config
    cli = _pretrain_settings(parsed)
    assert estimator.pretrain_config().replace(window_seconds=10.0) == cli
    paper = PARSPretrainer(preset="paper").pretrain_config()
    assert (paper.lr, paper.batch_size, paper.max_epochs, paper.window_seconds) == (
        PAPER.lr, PAPER.batch_size, PAPER.max_epochs, PAPER.window_seconds,
    )  # fmt: skip
    on_two = _pretrain_settings(build_parser().parse_args(["pretrain", "--paper"]), 2)
    assert on_two == paper.replace(batch_size=256, valid_fraction=0.1)  # 512 shared by two
