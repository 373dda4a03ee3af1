"""The pretraining-loop benchmark in its tiny CPU configuration: it runs both loops,
counts the windows they trained, and its rates are the marginal ones."""

import pytest
import torch

from benchmarks import bench_pretrain_loop
from benchmarks.lib import loops as loop_lib

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bench():
    """``benchmarks/bench_pretrain_loop.py`` as a module."""
    return bench_pretrain_loop


def test_the_marginal_rate_cancels_what_a_run_pays_once(bench):
    # 2 s of setup, then 100 windows/s: runs of 200 and 1000 windows
    short, long = (2.0 + 200 / 100, 200, 25), (2.0 + 1000 / 100, 1000, 125)
    assert bench.marginal(short, long) == pytest.approx(100.0)


def test_the_estimator_run_trains_the_steps_it_counts(bench):
    X = loop_lib.corpus(loop_lib.TINY, 8)
    assert X.shape == (27, loop_lib.N_CHANS, loop_lib.TINY.n_times)
    seconds, windows, epochs = loop_lib.estimator_run(loop_lib.TINY, X, 8, "cpu", False, False, 12)
    # 24 training windows (3 held out): 3 full steps an epoch, 12 steps in 4 epochs
    assert (windows, epochs) == (12 * 8, 4) and seconds > 0


@pytest.mark.slow  # 15 to 25 s on 2 busy CPU cores
def test_tiny_cpu_run_reports_both_ratios_on_its_last_line(bench, tmp_path, capsys):
    out = tmp_path / "loop.md"
    argv = ["--tiny", "--device", "cpu", "--steps", "150", "--rounds", "1", "--out", str(out)]
    est, cli = bench.main(argv)
    text = out.read_text()
    last = text.strip().splitlines()[-1]
    assert last == f"estimator/step {est:.2f}, command line/step {cli:.2f}"
    assert 0.2 < est < 2 and 0.2 < cli < 2  # a rate of the same order as the step's
    assert "| `PARSPretrainer.fit` |" in text and "| `braindecode-pars pretrain` |" in text
    assert "torch.compile" not in text  # a CPU's default: not compiled


def _busy_in_json(n):
    import json

    for _ in range(n):
        json.loads(json.dumps(list(range(2000))))


def test_the_profile_counts_each_functions_own_time_in_its_area(bench):
    total, areas, top = bench.profile_areas(lambda: _busy_in_json(200))
    assert total > 0 and sum(areas.values()) <= total * 1.05
    # the JSON encoder and decoder are where this function spends its time
    assert areas["logs, history and JSON"] > 0.5 * sum(areas.values())
    assert max(areas, key=areas.get) == "logs, history and JSON"
    assert len(top) <= 12 and top == sorted(top, reverse=True)


def test_the_profile_report_gives_each_area_for_both_loops(bench, tmp_path):
    X = loop_lib.corpus(loop_lib.TINY, 8)
    store = loop_lib.write_store(loop_lib.TINY, X, tmp_path / "store")
    out = tmp_path / "profile.md"
    loops = loop_lib.Loops(loop_lib.TINY, X, store, tmp_path, 8, torch.device("cpu"),
                        False, False, None, 0)  # fmt: skip
    bench.profile_report(loops, 40, out)
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ")]
    areas = [a for a, _ in bench.AREAS] + ["other"]
    for area in areas:
        assert any(row.startswith(f"| {area} |") for row in rows), area
    whole = next(row for row in rows if "whole run" in row).split("|")[2:4]
    assert all(float(cell) > 0 for cell in whole)  # the long runs take longer


def test_the_corpus_size_and_the_compile_mode_reach_both_loops(bench, tmp_path, monkeypatch):
    import json
    from pathlib import Path

    import braindecode_pars.cli
    from braindecode_pars.hub.folders import run_state

    X = loop_lib.corpus(loop_lib.TINY, 8, batches=5)
    assert len(X) - -(-len(X) // 10) == 5 * 8  # 5 training batches once 10 % is held out

    seen = {}

    def fake_main(flags):  # the command line as the benchmark calls it
        seen["flags"] = flags
        out = Path(flags[flags.index("--out") + 1])  # a run's state, as a run leaves it
        (out / "state-1").mkdir(parents=True)
        (out / "state-1" / "params.pt").write_bytes(b"")
        (out / "state.json").write_text(json.dumps({"state": "state-1"}))
        history = [{"batches": [{"train_loss": 0.1, "train_batch_size": 8}]}]
        (run_state(out) / "history.json").write_text(json.dumps(history))

    monkeypatch.setattr(braindecode_pars.cli, "main", fake_main)
    loops = loop_lib.Loops(loop_lib.TINY, X, tmp_path / "store", tmp_path, 8,
                        torch.device("cpu"), False, True, "reduce-overhead", 0, "device",
                        "fused")  # fmt: skip
    assert loops.cli("run", 3)[1:] == (8, 1)
    flags = seen["flags"]
    settings = json.loads(Path(flags[flags.index("--config") + 1]).read_text())
    assert settings["compile_mode"] == "reduce-overhead" and settings["compile"] is True
    assert settings["batches"] == "device" and settings["decoder_kernel"] == "fused"
    assert settings["n_patches"] == loop_lib.N_PATCHES and settings["amp"] is False

    made = {}
    monkeypatch.setattr(
        loop_lib.PARSPretrainer, "fit", lambda self, X: made.update(self.get_params())
    )
    monkeypatch.setattr(loop_lib, "trained_windows", lambda history: 0)
    monkeypatch.setattr(loop_lib.PARSPretrainer, "history_", [], raising=False)
    loops.estimator(3)
    assert made["compile_mode"] == "reduce-overhead" and made["compile"] is True
    assert made["batches"] == "device" and made["decoder_kernel"] == "fused"
    args = bench.parse_args(["--tiny", "--batches", "read-ahead", "--decoder-kernel", "fused",
                             "--no-cli"])  # fmt: skip
    assert (args.batches, args.decoder_kernel, args.cli) == ("read-ahead", "fused", False)
    assert bench.parse_args([]).batches == "auto" and bench.parse_args([]).cli
