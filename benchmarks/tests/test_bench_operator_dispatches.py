"""The pair operator's dispatch count (``bench_operator_dispatches``): the counter on a
function whose calls are known, and the script at a tiny size."""

import pytest
import torch

from benchmarks import bench_operator_dispatches as bench

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_counter_counts_a_known_function_by_kind():
    x = torch.randn(4, 3)
    with bench.DispatchCounter() as counter:
        y = (x + 1) + 2
        z = y.view(-1) + 3  # three additions, one view
        torch.empty(5)  # one allocation
    assert counter.by_kind() == {"launching": 3, "view/metadata": 1, "allocation": 1}
    assert counter.calls[("launching", "aten.add.Tensor")] == 3
    assert counter.calls[("view/metadata", "aten.view.default")] == 1
    torch.testing.assert_close(z, x.view(-1) + 6)  # the mode changes no value
    with bench.DispatchCounter() as outer:
        x.t()
        with bench.DispatchCounter() as inner:
            bench.DispatchCounter.record("a kernel")  # counted in the innermost only
    assert inner.by_kind() == {"launching": 1, "view/metadata": 0, "allocation": 0}
    assert outer.by_kind() == {"launching": 0, "view/metadata": 1, "allocation": 0}


def test_the_script_counts_the_operators_ways_at_a_tiny_size(tmp_path):
    out = tmp_path / "operator_dispatches.md"
    argv = ["--emb-dim", "16", "--depth", "1", "--heads", "2", "--decoder-heads", "2",
            "--n-patches", "10", "--batch-size", "3", "--paper-head-dim", "16",
            "--out", str(out)]  # fmt: skip
    result = bench.main(argv)

    def launching(operator, which):
        return operator[which].by_kind()["launching"]

    step = result["step"]
    kept = step["accelerator, tables kept, torch fallback"]["operator"]
    recomputed = step["accelerator, tables recomputed, torch fallback"]["operator"]
    triton = step["accelerator, tables kept, Triton fallback"]["operator"]
    # the same forward; the recomputing backward adds per chunk the tables' 4 calls
    # (baddbmm, amax, sub_, exp2_) and the ratio's 5 (bmm, mul, bmm, masked_fill_, div_)
    chunks = bench._chunks(3, 8, 10, 16 // 2)
    assert chunks > 1
    assert launching(kept, "forward") == launching(recomputed, "forward") > 0
    assert launching(recomputed, "backward") - launching(kept, "backward") == 9 * chunks
    # the Triton fallback: one launch each way in place of the torch fallback's calls
    for which in ("forward", "backward"):
        assert triton[which].calls[("launching", f"triton: _{which}_kernel")] == 1
        assert launching(triton, which) < launching(kept, which)
    # the whole step sees the operator as one call each way
    whole = step["accelerator, tables kept, torch fallback"]["step"]
    assert whole["forward"].calls[("launching", "braindecode_pars.pair_attention.default")] == 1
    assert (
        whole["backward"].calls[("launching", "braindecode_pars.pair_attention_backward.default")]
        == 1
    )
    text = out.read_text()
    assert "`python -m benchmarks.bench_operator_dispatches --emb-dim 16" in text
    assert "| accelerator, tables kept, Triton fallback |" in text
    if bench.fused.triton is None:
        assert set(result["operator"]) == set(bench.WAYS)
        return
    assert set(result["operator"]) == {*bench.WAYS, bench.FUSED}
    # the fused operator, run under the interpreter: one kernel each way, within the target
    for counts in (step[bench.FUSED]["operator"], result["operator"][bench.FUSED]):
        for which in ("forward", "backward"):
            assert counts[which].calls[("launching", f"triton: fused _{which}_kernel")] == 1
        assert launching(counts, "forward") + launching(counts, "backward") <= 10
    fused_step = step[bench.FUSED]["step"]
    assert (
        fused_step["forward"].calls[("launching", "braindecode_pars.pair_attention_fused.default")]
        == 1
    )
    assert "target at most 10: met" in text
