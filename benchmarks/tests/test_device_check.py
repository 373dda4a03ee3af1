"""The device check (benchmarks/device_check.py): its reading of the targets, the wheels it
installs, db22036's decoder it swaps in, and its dry run on a CPU."""

import re
import subprocess
from pathlib import Path

import pytest
import torch

from benchmarks import bench_gpu as gpu_module
from benchmarks import device_check
from benchmarks.lib import device_steps

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def check():
    return device_check


@pytest.fixture(scope="module")
def bench_gpu():
    return gpu_module


def _steps(pars_wps, ratio):
    return {"pars_wps": pars_wps, "encoder_wps": pars_wps * ratio, "ratio": ratio}


def test_the_targets_are_read_from_the_results(check):
    compiled = "bf16 autocast + torch.compile"
    graphs = check.GRAPHS_ROW
    tree = {
        "steps": {
            "256": {"bf16 autocast": _steps(30_000, 1.2), compiled: _steps(40_000, 1.1)},
            "1024": {
                "bf16 autocast": _steps(26_000, 1.3),
                compiled: _steps(52_000, 1.2),
                graphs: _steps(55_000, 1.14),
                check.TRITON_ROW: _steps(54_600, 1.16),
                check.FUSED_ROW: {**_steps(57_200, 1.1), "operator": "fused"},
            },
        },
        "memory": {
            "1024x128": {"encoder": [14_000, 15_000], "pars": [18_000, 21_000]},
            "1024x256": {"encoder": [30_000, 32_000], "pars": [None, None]},
        },
    }
    old = {
        "steps": {
            "256": {"bf16 autocast": _steps(31_000, 1.3), compiled: _steps(39_000, 1.5)},
            "1024": {"bf16 autocast": _steps(26_000, 1.5), compiled: _steps(39_273, 1.49)},
        }
    }
    lines = check.checks(tree, old, (0.93, 0.88), {"passed": 7, "skipped": 2}, (0.95, 0.91))
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in lines[2:]}
    met = {k: v[-1].rstrip(" |") for k, v in rows.items()}
    slower = "PARS at least as fast as db22036, batch 256, bf16 autocast"
    assert rows[slower][0] == f"30,000 against 31,000 windows/s ({30 / 31:.2f})"
    assert met[slower] == "**no**"
    assert met[f"PARS at least as fast as db22036, batch 1024, {compiled}"] == "yes"
    # equal speed meets "at least as fast"
    assert met["PARS at least as fast as db22036, batch 1024, bf16 autocast"] == "yes"
    over = "PARS / encoder step at most 1.15, batch 1024, bf16 + compile"
    assert rows[over][0] == "1.20 (52,000 windows/s)" and met[over] == "**no**"
    assert rows[over + ", CUDA graphs (reduce-overhead)"] == ["1.14 (55,000 windows/s)", "yes |"]
    peak = "peak step memory at most 1.5 x the encoder's, 128 patches, batch 1024"
    assert rows[peak][0] == f"peak 20.5 against 14.6 GiB ({21_000 / 15_000:.2f})"
    assert met[peak] == "yes"
    moon = "trains (the moonshot: the paper's limit pushed out), 256 patches, batch 1024"
    assert rows[moon][0] == "out of memory" and met[moon] == "**no**"
    moonshot = "moonshot: 50,000 windows/s compiled at batch 1024 (H200)"
    assert rows[moonshot] == ["55,000, CUDA graphs", "yes |"]  # the faster compiled row
    assert met["`PARSPretrainer.fit` at least 0.9 of the bare step"] == "yes"
    assert met["`braindecode-pars pretrain` at least 0.9 of the bare step"] == "**no**"
    graphs_loop = "`braindecode-pars pretrain` at least 0.9 of the bare step, CUDA graphs"
    assert rows[graphs_loop + " (reduce-overhead)"] == ["0.91", "yes |"]
    triton = f"for the record: {check.TRITON_ROW}, batch 1024"
    assert rows[triton][0] == (
        "54,600 windows/s, PARS / encoder 1.16, 1.05 x bf16 autocast + torch.compile's"
    )
    fused = f"for the record: {check.FUSED_ROW}, batch 1024"
    assert rows[fused][0] == (
        "57,200 windows/s, PARS / encoder 1.10, 1.10 x bf16 autocast + torch.compile's"
    )
    decision = (
        "the fused operator CUDA's default (`_DEVICE_DEFAULTS`): faster than the tables "
        "operator, compiled, and the CUDA tests pass"
    )
    assert rows[decision] == [
        "fused operator: 57,200 windows/s vs 52,000 for the tables operator (compiled, "
        "batch 1024), 1.10 x",
        "yes |",
    ]
    # rows this check did not run (TF32, float64 tables) are left out, not said missing
    assert not any("float64 factor tables" in line or "TF32" in line for line in lines)
    assert rows["the CUDA tests pass"][0] == "7 passed, 2 skipped"
    assert met["the CUDA tests pass"] == "yes"

    # what did not run is said missing, and judged on nothing
    empty = check.checks(None, None, None, {})
    assert all(line.endswith("| n/a |") for line in empty[2:])
    assert not any("fused" in line for line in empty)  # a row not run: no decision

    # the fused operator becomes the default only if faster and the CUDA tests pass
    def decide(fused, tests):
        tree["steps"]["1024"][check.FUSED_ROW] = fused
        lines = check.checks(tree, old, None, tests)
        return next(line for line in lines if line.startswith(f"| {decision} |"))

    slower = {**_steps(51_000, 1.2), "operator": "fused"}
    assert decide(slower, {"passed": 7}).endswith("0.98 x | **no** |")
    faster = {**_steps(57_200, 1.1), "operator": "fused"}
    assert decide(faster, {"passed": 6, "failed": 1}).endswith("| **no** |")
    assert decide(faster, {}).endswith("| n/a |")  # the tests did not report
    # where no Triton kernel runs the row ran the tables operator: nothing to decide
    said = decide({**faster, "operator": "tables"}, {"passed": 7})
    assert "the fused row ran the tables operator" in said and said.endswith("| n/a |")
    assert decide({"skipped": "no compiler"}, {"passed": 7}).endswith("| missing | n/a |")


def test_the_last_lines_say_which_cuda_defaults_the_rows_choose(check):
    """The speed page's rule on the rows: the fastest compiled step's operator, the
    fastest loop's compile mode (graphs only if that loop keeps 0.9 of its bare step) and
    batches; nothing changes without the CUDA tests passing or a row that ran."""
    compiled = "bf16 autocast + torch.compile"
    tree = {"steps": {"1024": {
        compiled: _steps(52_000, 1.2),
        check.GRAPHS_ROW: _steps(55_000, 1.14),
        check.FUSED_ROW: {**_steps(57_200, 1.1), "operator": "fused"},
        check.FUSED_GRAPHS_ROW: {**_steps(61_000, 1.05), "operator": "fused"},
    }}}  # fmt: skip
    b256 = {"steps": {"256": {check.GRAPHS_ROW: _steps(20_000, 1.8),
                              check.FUSED_GRAPHS_ROW: _steps(23_000, 1.4)}}}  # fmt: skip
    loops = {"loop": (10_000, 0.72), "loop_graphs": (14_000, 0.88),
             "loop_device": (12_000, 0.85), "loop_graphs_device": (15_500, 0.93)}  # fmt: skip
    lines = check.chosen_defaults(tree, b256, loops, {"passed": 9})
    assert lines[0] == "## The defaults these rows choose for CUDA"
    said = {line.split(":")[0].lstrip("- "): line for line in lines[2:]}
    assert said["decoder_kernel"].startswith("- decoder_kernel: fused (fastest step at batch "
                                             "1024: fused, graphs, 61,000")  # fmt: skip
    mode = "- compile_mode: reduce-overhead (fastest loop: loop_graphs_device, 15,500 windows/s"
    assert said["compile_mode"].startswith(mode + ", 0.93")
    assert said["batches"] == "- batches: device (fastest loop: loop_graphs_device)"
    assert said["batch 256 under CUDA graphs (windows/s)"].endswith("tables 20,000, fused 23,000")
    # graphs that do not keep 0.9 of their bare step are not the default
    slow = {**loops, "loop_graphs_device": (15_500, 0.85)}
    assert (
        "compile_mode: None (fastest" in check.chosen_defaults(tree, b256, slow, {"passed": 9})[3]
    )
    # failing tests, a fused row that ran the tables, nothing run: said, nothing chosen
    failed = check.chosen_defaults(tree, b256, loops, {"passed": 8, "failed": 1})
    assert all("(unchanged: the CUDA tests did not pass)" in line for line in failed[2:5])
    tree["steps"]["1024"][check.FUSED_ROW]["operator"] = "tables"
    assert "tables (unchanged: no fused row" in check.chosen_defaults(tree, b256, loops, {})[2]
    empty = check.chosen_defaults(None, None, {}, {})
    assert "no loop ran" in empty[3] and "no loop ran" in empty[4] and "missing" in empty[5]


def test_the_parts_fit_the_budget_and_the_tests_run_first(check):
    # the parts' limits add up to the default budget, at most 8 minutes, so that a
    # 15-minute device slot holds a rerun; the correctness gate runs first
    assert sum(check.LIMITS[p] for p in check.DEFAULT_PARTS) == check.BUDGET <= 8 * 60
    assert check.DEFAULT_PARTS[0] == "tests"
    assert set(check.DEFAULT_PARTS) <= set(check.LIMITS)
    assert list(check.parse_args(["--out", "x"]).parts) == list(check.DEFAULT_PARTS)
    # the loops' trace is a second call's part, at the paper's size
    assert "trace" in check.LIMITS and "trace" not in check.DEFAULT_PARTS
    assert check.trace_argv(False, "t.md")[-4:] == ["--size", "paper", "--steps", "60"]
    # db22036's A/B passed twice: a part by name, not by default
    assert "bench_db22036" in check.LIMITS and "bench_db22036" not in check.DEFAULT_PARTS
    # the loop at batch 256 in {default, CUDA graphs}, drawing on the host, by default;
    # drawing on the device and the CUDA-graph rows at batch 256 by name; the
    # estimator's loop alone
    assert {p for p in check.DEFAULT_PARTS if p.startswith("loop")} == {"loop", "loop_graphs"}
    assert {"loop_device", "loop_graphs_device", "bench_256"} <= set(check.LIMITS)
    for part, (graphs, batches) in check.LOOP_PARTS.items():
        # each holds a few paper-size compilations (11 to 23 s each on an H200, where
        # every loop part timed out at 40 s), and recordings under CUDA graphs
        assert check.LIMITS[part] >= (130 if graphs else 110), part
        argv = check.loop_argv(False, "l.md", graphs, batches)
        assert argv[argv.index("--batches") + 1] == batches and "--no-cli" in argv
        assert ("--compile-mode" in argv) == graphs, part
        assert argv[-6:-2] == ["--size", "paper", "--steps", "150"]


def test_this_trees_side_runs_and_profiles_the_fused_operators_row(check, bench_gpu):
    # the rows the check reads are bench_gpu's, by name and by label
    assert set(check.TREE_VARIANTS) <= set(bench_gpu.VARIANT_NAMES)
    assert "bf16-compile-fused" in check.TREE_VARIANTS
    names = {label: name for name, label in bench_gpu.VARIANT_NAMES.items()}
    assert names[check.FUSED_ROW] == "bf16-compile-fused"
    assert names[check.TRITON_ROW] == "bf16-compile-triton"
    assert names[check.GRAPHS_ROW] == "bf16-compile-graphs"
    assert names[check.FUSED_GRAPHS_ROW] == "bf16-compile-fused-graphs"
    for tiny in (False, True):
        argv = check.bench_gpu_argv("tree", tiny, "t.json", "t.md")
        variants = argv[argv.index("--variants") + 1 : argv.index("--json")]
        # the tables and the fused operator, each in the default mode and as CUDA graphs
        assert variants == ["bf16-compile", *check.TREE_VARIANTS]
        assert set(variants) == {"bf16-compile", "bf16-compile-graphs", "bf16-compile-fused",
                                 "bf16-compile-fused-graphs"}  # fmt: skip
        at_256 = check.bench_gpu_argv("tree", tiny, "t.json", "t.md", batch=256)
        assert at_256[at_256.index("--variants") + 1 : at_256.index("--json")] == list(
            check.GRAPH_VARIANTS
        )
        assert "--profile" not in at_256
        assert tiny or at_256[at_256.index("--batch-size") + 1] == "256"
        # the compiled row (the tables operator) and the fused operator's are profiled
        assert argv[argv.index("--profile") + 1 : argv.index("--profile") + 3] == [
            "bf16-compile",
            "bf16-compile-fused",
        ]
        assert bench_gpu.parse_args(argv[3:]).profile == ["bf16-compile", "bf16-compile-fused"]
    # without the fused row (--tree-variants) only the compiled row is profiled; the
    # other side profiles nothing
    argv = check.bench_gpu_argv("tree", False, "t.json", "t.md", ["bf16-compile-triton"])
    at = argv.index("--profile")
    assert argv[at + 1 : at + 3] == ["bf16-compile", "--batch-size"]
    assert "--profile" not in check.bench_gpu_argv("db22036", False, "t.json", "t.md")


def test_the_cuda_tests_are_found_wherever_tests_keeps_them(check, monkeypatch):
    files = check.cuda_test_files()
    names, keyword = check.CUDA_TESTS
    assert {"test_pair_fused.py", "test_training_steps.py"} <= set(names)  # what changed
    assert [Path(f).name for f in files] == names and all((ROOT / f).is_file() for f in files)
    every = check.cuda_test_files(check.ALL_CUDA_TESTS)  # the whole suite, by name
    assert set(files) <= set(every) and any("test_pair_fallback.py" in f for f in every)
    argv = check.tests_argv()
    assert argv[-2:] == ["-k", keyword] and argv[-2 - len(files) : -2] == files
    assert "--tb=short" in argv
    # a rerun: the node ids named, no keyword, pytest's whole tracebacks
    ids = ["tests/internals/test_pair_fused.py::test_on_a_gpu_the_fused_operator_is_exact"]
    rerun = check.tests_argv(tests=ids, tb="long")
    assert rerun[-1:] == ids and "-k" not in rerun and "--tb=long" in rerun
    args = check.parse_args(["--out", "x", "--parts", "tests", "--tests", *ids, "--tb", "long"])
    assert args.tests == ids and args.tb == "long" and args.logs is None
    monkeypatch.setattr(check, "CUDA_TESTS", ([*names, "test_gone.py"], keyword))
    with pytest.raises(FileNotFoundError, match=r"\['test_gone.py'\]"):
        check.cuda_test_files()


def test_the_outputs_of_the_parts_are_parsed(check):
    assert check.loop_ratios("...\nestimator/step 0.71, command line/step 0.66\n") == (0.71, 0.66)
    assert check.loop_ratios("crashed") is None
    assert check.loop_ratios("estimator/step 0.93, command line/step n/a") == (0.93, None)
    table = "| `PARSPretrainer.fit` | 14,210 | 0.93 (0.93-0.93) | 40 | 5.1 |"
    assert check.loop_rate(f"x\n{table}\n") == 14_210.0 and check.loop_rate("") is None
    out = "x\n===== 3 passed, 1 failed, 2 skipped, 9 deselected in 41.20s =====\n"
    assert check.test_counts(out) == {"passed": 3, "failed": 1, "skipped": 2, "deselected": 9}
    assert check.test_counts("killed") == {}


#: pytest's output as the H200 gave it (9470f02), with the failure sections that the
#: report's last 4,000 characters left out (warnings and durations came after them).
PYTEST_OUTPUT = """..F.F
=================================== FAILURES ===================================
____________ test_on_a_gpu_the_fused_operator_is_exact[float32] ____________
tests/internals/test_pair_fused.py:98: in test_on_a_gpu_the_fused_operator_is_exact
    _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL, False, "cuda")
E   AssertionError: Tensor-likes are not close!
_______ test_on_a_gpu_cuda_graphs_replay_fresh_draws_and_the_log_keeps_copies _______
E   RuntimeError: Error: accessing tensor output of CUDAGraphs that has been overwritten
=============================== warnings summary ===============================
tests/test_pretrainer.py::test_on_a_gpu_the_estimator_runs
  UserWarning: Pretraining ended with a pretext skill of -0.027
============================= slowest 10 durations =============================
23.08s call     tests/internals/test_training_steps.py::test_on_a_gpu_no_training_step
=========================== short test summary info ============================
FAILED tests/internals/test_pair_fused.py::test_on_a_gpu_the_fused_operator_is_exact[float32]
PASSED tests/internals/test_training_steps.py::test_training_batches_come_in_pinned_memory
3 failed, 7 passed, 34 deselected, 24 warnings in 57.70s
"""


def test_the_tests_failures_reach_the_report_whole_and_every_output_its_log(check, tmp_path):
    kept = check.pytest_failures(PYTEST_OUTPUT)
    assert kept.startswith("=" * 35 + " FAILURES")
    assert "E   AssertionError: Tensor-likes are not close!" in kept
    assert "E   RuntimeError: Error: accessing tensor output of CUDAGraphs" in kept
    assert kept.endswith("3 failed, 7 passed, 34 deselected, 24 warnings in 57.70s")
    assert check.test_counts(kept) == {"failed": 3, "passed": 7, "deselected": 34}
    # passing tests: the summary alone; a run killed before its summary: nothing
    passed = PYTEST_OUTPUT[PYTEST_OUTPUT.index("=========================== short") :]
    assert check.pytest_failures(passed) == passed.strip()
    assert check.pytest_failures("collecting ...\nkilled") == ""
    # too long: the end of the failures kept, and the whole summary
    short = check.pytest_failures(PYTEST_OUTPUT, most=400)
    assert short.startswith("[... the failures' first part cut ...]")
    assert short.endswith("in 57.70s") and "FAILED tests/internals" in short
    # the logs: whole, or their start and end
    check.write_log("x" * 50, tmp_path / "logs" / "a.log")
    assert (tmp_path / "logs" / "a.log").read_text() == "x" * 50
    check.write_log("a" * 100 + "b" * 300, tmp_path / "b.log", most=200)
    text = (tmp_path / "b.log").read_text()
    assert text.startswith("a" * 50 + "\n[... 200 bytes cut ...]\n") and text.endswith("b" * 150)


def test_the_wheels_are_the_versions_the_tests_run_with():
    """Every wheel the device installs is pinned to the version of constraints.txt."""

    def pins(path):
        found = {}
        for line in Path(path).read_text().splitlines():
            if "==" in line and not line.startswith("#"):
                name, version = line.strip().split("==")
                found[re.sub(r"[-_.]+", "-", name).lower()] = version
        return found

    wheels = pins(ROOT / "benchmarks/device_wheels.txt")
    constraints = pins(ROOT / "constraints.txt")
    assert {"braindecode", "skorch", "mne"} <= set(wheels)
    assert {name: constraints.get(name) for name in wheels} == wheels


def test_db22036s_decoder_is_db22036s_and_computes_what_this_trees_does(bench_gpu):
    shown = subprocess.run(
        ["git", "show", device_steps.DB22036_SOURCE], cwd=ROOT, capture_output=True, text=True
    )  # fmt: skip
    if shown.returncode and not device_steps.DB22036_FILE.exists():
        pytest.skip("db22036's decoder needs this checkout's git history or make device-wheels")
    if shown.returncode == 0:  # (a clone with the history) the decoder is db22036's
        original = shown.stdout.replace("from .._checks", "from braindecode_pars._util.checks")
        assert device_steps.db22036_source() == original

    # the A side computes the same PARS loss as the B side: same weights, same draws
    torch.manual_seed(0)
    steps = device_steps.TrainingSteps(device_steps.TINY, 40, 4, "cpu", bf16=False)
    swapped = device_steps.use_decoder(
        device_steps.TrainingSteps(device_steps.TINY, 40, 4, "cpu", bf16=False).model, "db22036"
    )
    swapped.load_state_dict(steps.model.state_dict())
    assert type(swapped.decoder).__module__ == "pair_decoders_db22036"
    X = torch.randn(4, 1, device_steps.TINY.n_times, dtype=torch.float64)
    for model in (steps.model, swapped):
        model.double()
    out = [m(X, generator=torch.Generator().manual_seed(1))["loss"] for m in (steps.model, swapped)]
    torch.testing.assert_close(out[0], out[1], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="'decoder' must be one of"):
        device_steps.use_decoder(steps.model, "sdpa")


@pytest.mark.slow  # 3 to 13 min on 2 busy CPU cores: seven processes, compilations
@pytest.mark.device  # make test-device, and .ci/run when the device check's files change
@pytest.mark.filterwarnings("ignore:dynamo_pgo force disabled:UserWarning")
def test_the_dry_run_on_a_cpu_writes_one_whole_results_file(check, tmp_path):
    out = tmp_path / "device_check.md"
    # the default parts, and the CUDA-graph rows at batch 256 and the loops drawing on
    # the device, which run by name
    every = [*check.DEFAULT_PARTS, "bench_256", "loop_device", "loop_graphs_device"]
    logs = tmp_path / "logs"
    summary = check.main(["--tiny", "--out", str(out), "--budget", "900", "--parts", *every,
                          "--logs", str(logs)])  # fmt: skip
    text = out.read_text()
    assert "- Card: CPU (" in text and "a dry run" in text
    row = r"^\| (tests|bench_tree|bench_256|loop\w*) \| `(.*)` \| (\S+) \|"
    parts = re.findall(row, text, re.M)
    assert [p[0] for p in parts] == every
    assert all(p[2] == "0" for p in parts), parts  # every part ran to its end
    assert sorted(f.name for f in logs.iterdir()) == sorted(f"{p}.log" for p in every)
    assert "[loop " in (logs / "loop.log").read_text()  # the loop's progress, as it ran
    commands = dict((p[0], p[1]) for p in parts)
    assert "--profile bf16-compile bf16-compile-fused" in commands["bench_tree"]
    assert ("bf16-compile bf16-compile-graphs bf16-compile-fused bf16-compile-fused-graphs"
            in commands["bench_tree"])  # fmt: skip
    assert "bf16-compile-graphs bf16-compile-fused-graphs" in commands["bench_256"]
    assert "### Profile of one step: batch 8, bf16 autocast + torch.compile" in text
    assert "### Profile of one step: batch 8, bf16 autocast + torch.compile, fused operator" in text
    assert "pair operator, backward (with its fallback)" in text
    for part, (graphs, batches) in check.LOOP_PARTS.items():
        assert f"--batches {batches}" in commands[part]
        assert ("--compile-mode reduce-overhead" in commands[part]) == graphs
    # on a CPU the fused row ran the tables operator: said, and nothing decided
    assert re.search(
        r"fused operator: [0-9,.]+ windows/s vs [0-9,.]+ for the tables operator \(compiled, "
        r"batch 8\), [0-9.]+ x; the fused row ran the tables operator.* \| n/a \|",
        text,
    )
    assert re.search(
        r"batch 8, bf16 \+ compile, CUDA graphs \(reduce-overhead\) \| [0-9.]+ \(", text
    )
    assert re.search(r"`PARSPretrainer.fit` at least 0.9 of the bare step \| [0-9.]+ \|", text)
    loop_graphs = r"`PARSPretrainer.fit` at least 0.9 of the bare step, CUDA graphs \(reduce"
    assert re.search(loop_graphs + r"-overhead\) \| [0-9.]+ \|", text)
    assert "`braindecode-pars pretrain` at least" not in text  # its loop is not run
    assert re.search(r"the CUDA tests pass \| .*skipped", text)  # no GPU here: they skip
    assert "db22036" not in "".join(commands.values())  # its A/B is not a default part
    # the last lines: the defaults the rows choose (none on a CPU, whose CUDA tests skip)
    assert summary[-5:-1] == text.rstrip().splitlines()[-5:-1]
    assert summary[-6] == "## The defaults these rows choose for CUDA"
    assert summary[-4].startswith("- decoder_kernel: tables (unchanged: no fused row")
    assert re.match(r"- compile_mode: (None|reduce-overhead) \(fastest loop: loop", summary[-3])
    assert re.match(r"- batches: (host|device) \(fastest loop: loop", summary[-2])
