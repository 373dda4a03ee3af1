"""The accelerator path of a PARS step on a CPU: memory and FLOPs against the encoder.

A CPU in eager mode does not take the path a GPU takes; this check does (torch.compile
with aot_eager, the pair operator in the chunks an accelerator takes), so a decoder that
grows on the GPU fails here too.
"""

import pytest

from benchmarks import bench_accelerator_path


@pytest.fixture(scope="module")
def bench():
    return bench_accelerator_path


@pytest.mark.slow  # about a minute: two compiled steps in fresh processes
@pytest.mark.filterwarnings("ignore:dynamo_pgo force disabled:UserWarning")
def test_at_128_patches_pars_stays_within_its_targets(bench, tmp_path):
    out = tmp_path / "accelerator_path.md"
    rows = bench.main(["--patches", "128", "--out", str(out)])
    row = rows[128]
    # the decoder is measured (it costs something) and stays within the targets
    assert row["memory"]["pars"] > row["memory"]["encoder"] > 20
    assert row["memory_ratio"] <= bench.MAX_MEMORY_RATIO
    assert 1.0 < row["flop_ratio"] <= bench.MAX_FLOP_RATIO
    assert "| 128 |" in out.read_text()


def test_the_flop_check_fails_a_decoder_that_materialises_the_pairs(bench):
    # the naive decoder's (batch, n^2, 2F) pair tensor through the attention: the
    # check must see it (fake tensors, nothing computed)
    folded = bench.flop_row("paper", 128, 64)
    naive = bench.flop_row("paper", 128, 64, decoder_impl="naive")
    assert folded["encoder"] == naive["encoder"]
    assert folded["pars"] / folded["encoder"] <= bench.MAX_FLOP_RATIO
    assert naive["pars"] / naive["encoder"] > 2 * bench.MAX_FLOP_RATIO
