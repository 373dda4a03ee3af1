"""The GPU benchmark in its tiny CPU configuration: it runs, its tables are whole, and
its timed PARS step computes PARS's loss and trains the model."""

import copy
import json
import math

import pytest
import torch

from benchmarks import bench_gpu as gpu_module
from benchmarks.lib import device_steps
from braindecode_pars.models.pair import kernels as pair_kernels


@pytest.fixture(scope="module")
def bench_gpu():
    """``benchmarks/bench_gpu.py`` as a module."""
    return gpu_module


def table(text, header):
    """The cells of the rows of the Markdown table whose header starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header)) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def number(cell):
    return float(cell.replace(",", ""))


@pytest.mark.slow  # 20 to 30 s on 2 busy CPU cores, half of it torch.compile
@pytest.mark.filterwarnings("ignore:dynamo_pgo force disabled:UserWarning")
def test_tiny_cpu_run_writes_whole_tables(bench_gpu, tmp_path):
    out = tmp_path / "gpu.md"
    argv = ["--device", "cpu", "--tiny", "--repeats", "2", "--compile-backend", "aot_eager"]
    results = bench_gpu.main([*argv, "--out", str(out)])
    text = out.read_text()
    assert "## CPU, tiny configuration, not a GPU figure" in text
    assert f"`python -m benchmarks.bench_gpu {' '.join(argv)} --out {out}`" in text
    assert f"torch {torch.__version__}" in text

    steps = table(text, "| batch | precision")
    expected = [["8", bench_gpu.VARIANT_NAMES[v]] for v in bench_gpu.DEFAULT_VARIANTS]
    assert [row[:2] for row in steps] == expected
    for row, measured in zip(steps, results["steps"][8].values(), strict=True):
        pars_wps, enc_wps, ratio, pars_first, enc_first = map(number, row[2:7])
        assert all(math.isfinite(x) and x > 0 for x in (pars_wps, enc_wps, ratio))
        assert pars_first > 0 and enc_first > 0
        # the ratio of step times is the inverse ratio of the windows per second
        assert measured["ratio"] == pytest.approx(measured["encoder_wps"] / measured["pars_wps"])
        assert ratio == pytest.approx(measured["ratio"], abs=0.005)
        # the table's rates are rounded to 0.1 and its ratio to 0.01: the interval that
        # rounding leaves (a slow tiny step's rate of a few windows per second moves the
        # ratio of the rounded rates by a percent or more)
        low = (enc_wps - 0.05) / (pars_wps + 0.05) - 0.005
        high = (enc_wps + 0.05) / max(pars_wps - 0.05, 1e-9) + 0.005
        assert low - 1e-9 <= ratio <= high + 1e-9, (low, ratio, high)
        loss = number(row[8])
        assert math.isfinite(loss) and loss > 0
        assert loss == pytest.approx(measured["loss"], abs=5e-5)
    assert steps[2][7] and steps[0][7] == steps[1][7] == ""  # graph breaks: compiled row only

    memory = table(text, "| batch | n_patches")
    assert [row[:3] for row in memory] == [
        ["8", "40", "1024"],
        ["8", "80", "4096"],
        ["8", "128", "10404"],
    ]
    for row in memory:
        assert number(row[3]) >= 0 and number(row[4]) >= 0
        assert row[5:] == ["n/a on CPU", "n/a on CPU"]


@pytest.mark.parametrize("bf16, rel", [(False, 1e-6), (True, 2e-2)])
def test_pars_step_trains_on_the_pars_loss(bench_gpu, bf16, rel):
    """The timed step's loss is the PARS loss of its batch, computed apart in float32."""
    steps = device_steps.TrainingSteps(device_steps.TINY, 40, 8, "cpu", bf16=bf16)
    before = copy.deepcopy(steps.model)
    rng = torch.get_rng_state()
    steps.pars_step()
    torch.set_rng_state(rng)  # the same patches and masks
    with torch.no_grad():
        expected = before(steps.X)["loss"]
    assert steps.pars_loss.dtype == torch.float32
    assert float(steps.pars_loss) == pytest.approx(float(expected), rel=rel)
    for part in ("encoder", "decoder"):  # one AdamW step moved both
        old, new = getattr(before, part).parameters(), getattr(steps.model, part).parameters()
        assert any(not torch.equal(a, b) for a, b in zip(old, new, strict=True))


def test_the_recorded_loss_survives_its_output_being_rewritten(bench_gpu):
    """Under CUDA graphs a step's output lives in the graph's memory and the next replay
    rewrites it: the recorded loss must be a copy. Simulated on a CPU by rewriting the
    forward's output after the step."""
    steps = device_steps.TrainingSteps(device_steps.TINY, 40, 8, "cpu", bf16=False)
    outputs = []

    def forward():
        outputs.append(steps.model(steps.X)["loss"])
        return outputs[-1]

    loss = steps._step(forward)
    value = float(loss)
    with torch.no_grad():
        outputs[-1].fill_(123.0)  # what a later replay does to the graph's output
    assert float(loss) == value != 123.0
    assert not steps.graphs  # eager: no graphs to mark steps for
    graphs = device_steps.TrainingSteps(
        device_steps.TINY, 40, 8, "cpu", compiled=True, backend="aot_eager", mode="reduce-overhead"
    )
    assert graphs.graphs


def test_the_fused_operators_row_is_the_triton_rows_with_the_fused_operator(bench_gpu):
    fused = bench_gpu.VARIANTS[bench_gpu.VARIANT_NAMES["bf16-compile-fused"]]
    triton = bench_gpu.VARIANTS[bench_gpu.VARIANT_NAMES["bf16-compile-triton"]]
    assert fused.kernel == "fused" and fused.fallback == "torch"  # (folded into the kernel)
    assert fused._replace(kernel="tables", fallback="triton") == triton
    # the same under CUDA graphs; every other row times the tables operator, whatever
    # "auto" takes on the device
    graphs = bench_gpu.VARIANTS[bench_gpu.VARIANT_NAMES["bf16-compile-fused-graphs"]]
    assert graphs.kernel == "fused" and graphs != fused
    others = [v for v in bench_gpu.VARIANTS.values() if v not in (fused, graphs)]
    assert {v.kernel for v in others} == {"tables"}
    # PARS takes the kernel; where no Triton kernel runs (a CPU without the
    # interpreter) the steps run the tables operator, and say so
    steps = device_steps.TrainingSteps(device_steps.TINY, 40, 2, "cpu", kernel="fused")
    assert steps.model.decoder.kernel == "fused"
    expected = pair_kernels.resolve_decoder_kernel("fused", steps.X)  # "tables" without Triton
    assert steps.operator == expected
    assert device_steps.TrainingSteps(device_steps.TINY, 40, 2, "cpu").operator == "tables"


@pytest.mark.filterwarnings("ignore:Warning. Profiler clears events:UserWarning")
def test_the_profile_holds_the_parts_of_the_operator_the_steps_run(bench_gpu):
    steps = device_steps.TrainingSteps(device_steps.TINY, 40, 2, "cpu", bf16=False)
    tables = bench_gpu.profile_steps(steps, (10.0, 8.0), repeats=1)
    parts = list(bench_gpu.PROFILE_PARTS["tables"])
    assert list(tables) == ["pars", "encoder", *parts, "rest of the decoder (projections, "
                            "gather, loss)"]  # fmt: skip
    assert tables[parts[0]] > 0 and tables[parts[1]] > 0  # the operator's events were found
    operator = tables[parts[0]] + tables[parts[1]]
    assert tables[list(tables)[-1]] == pytest.approx(2.0 - operator)
    # the fused operator's rows are its two custom operators' (none ran here: 0 ms)
    steps.operator = "fused"
    fused = bench_gpu.profile_steps(steps, (10.0, 8.0), repeats=1)
    assert list(bench_gpu.PROFILE_PARTS["fused"].values()) == [
        "braindecode_pars::pair_attention_fused",
        "braindecode_pars::pair_attention_fused_backward",
    ]
    assert list(fused)[2:4] == list(bench_gpu.PROFILE_PARTS["fused"])
    assert fused[list(fused)[2]] == fused[list(fused)[3]] == 0.0
    assert fused[list(fused)[-1]] == pytest.approx(2.0)


def test_the_steps_timed_are_written_before_the_memory_table(bench_gpu, tmp_path, monkeypatch):
    """The device check kills a part at its time limit: the JSON holds the step table
    as soon as it is timed, before the memory table runs."""

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt  # as if killed in the memory table

    monkeypatch.setattr(bench_gpu, "memory_row", stopped)
    path = tmp_path / "gpu.json"
    argv = ["--device", "cpu", "--tiny", "--repeats", "1", "--variants", "bf16",
            "--memory-patches", "40", "--json", str(path)]  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        bench_gpu.main(argv)
    record = json.loads(path.read_text())
    row = record["steps"]["8"]["bf16 autocast"]
    assert row["pars_wps"] > 0 and row["operator"] == "tables" and record["memory"] == {}
