"""The FLOP count and MFU of ``bench_flops``: the counter against hand counts (a linear
layer, the CPU's attention kernel, each component of a tiny PARS step), and the reading
of the recorded rates."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from benchmarks import bench_flops as bench
from braindecode_pars import PARS

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_linear_layer_counts_2mnk_forward_and_4mnk_backward():
    m, k, n = 7, 5, 3
    layer = torch.nn.Linear(k, n)
    x = torch.randn(m, k, requires_grad=True)
    forward, backward = bench.phases(lambda: layer(x))
    # forward: x @ W.T; backward: the gradients of x and of W, one product each
    assert bench.total(forward) == 2 * m * n * k
    assert bench.total(backward) == 4 * m * n * k


def test_the_cpus_attention_kernel_is_counted_as_two_products_forward_five_backward():
    b, h, s, d = 2, 3, 5, 4
    q, k, v = (torch.randn(b, h, s, d, requires_grad=True) for _ in range(3))
    forward, backward = bench.phases(lambda: F.scaled_dot_product_attention(q, k, v))
    assert torch.ops.aten._scaled_dot_product_flash_attention_for_cpu in forward
    assert bench.total(forward) == 2 * (2 * b * h * s * s * d)  # q k^T, then a v
    assert bench.total(backward) == 5 * (2 * b * h * s * s * d)  # scores again, four grads


def test_a_tiny_steps_components_match_a_hand_count_and_add_up_to_the_step():
    encoder = dict(emb_dim=16, depth=2, n_heads=2, ff_dim=32)
    size = bench.Size("tiny", encoder, 500, 100.0)
    B, N, H = 3, 10, 2
    flops = bench.step_flops(size, B, n_patches=N, decoder_heads=H)
    n = PARS(n_times=500, sfreq=100.0, n_patches=N, **encoder).n_masked
    Fd, ff, depth, P, d = 16, 32, 2, 100, 16 // H  # P: 1-s patches at 100 Hz

    linear = 2 * B * N * (4 * Fd * Fd + 2 * Fd * ff)  # qkv, proj, the feed-forward
    product = 2 * B * N * N * Fd  # one (N x d) @ (d x N) product per head, all heads
    projections = 2 * B * N * Fd * (Fd + H) + 2 * B * n * Fd * 2 * Fd  # keys and s; [u, v]
    slots = min(B * H * n * n, max(256, 4 * B))  # the operator's fallback slots
    expected = {
        "patch tokenizer and position embedding": (2 * B * N * P * Fd,) * 2,  # no grad of X
        "encoder's transformer blocks": (depth * (linear + 2 * product),
                                         depth * (2 * linear + 5 * product)),
        "decoder's projections": (projections, 2 * projections),
        # W_q A1, W_q A2 (F x F each), w_head W_o (1 x F), and w_out W_v per head
        "decoder's weight folding": (4 * Fd**3 + 4 * Fd**2, 8 * Fd**3 + 8 * Fd**2),
        # the operator's own formulas: logits, num and den; the slots' logits
        "pair operator": (2 * B * H * (2 * n * N * d + 2 * n * n * N) + 2 * slots * N * d,
                          2 * B * H * (4 * n * n * N + 2 * 2 * n * N * d) + 4 * slots * N * d),
        "loss": (0, 0),  # elementwise
        "the rest": (0, 0),  # the components account for every counted FLOP
    }  # fmt: skip
    assert flops.components == expected
    assert flops.step == tuple(map(sum, zip(*expected.values(), strict=True)))
    encoder_parts = [expected[c] for c in bench.COMPONENTS[:2]]
    assert flops.encoder_alone == tuple(map(sum, zip(*encoder_parts, strict=True)))
    assert flops.per_window("step") == sum(flops.step) / B

    # the tables recomputed in backward: the forward's products again, in the operator only
    recomputed = bench.step_flops(size, B, n_patches=N, decoder_heads=H, keep_tables=False)
    extra = 2 * B * H * (2 * n * N * d + 2 * n * n * N)
    assert recomputed.components["pair operator"][1] == expected["pair operator"][1] + extra
    assert recomputed.components["the rest"] == (0, 0)


RESULT = """# A GPU run
## Steps
- Device: NVIDIA H200
- Command: `python benchmarks/bench_gpu.py --batch-size 256 --compile-mode reduce-overhead`
- Encoder: 512 x 8 (paper), 30-s windows at 200 Hz; PARS with the folded decoder
- Pair decoder: db22036's (`git show db22036:x.py`), same weights

| batch | precision | PARS windows/s | encoder-alone windows/s | ratio of step times |
|---|---|---|---|---|
| 1024 | bf16 autocast + torch.compile | 41,201.0 | 52,301.4 | 1.27 |
| 256 | float32 | 7,090.2 | 8,608.1 | 1.21 |

## The loops
- Device: NVIDIA H100 80GB HBM3; torch 2.11.0+cu130
- Command: `python benchmarks/bench_pretrain_loop.py --size paper --steps 300`
- Model: 512 x 8 (paper), 30-s windows at 200 Hz; PARS, 40 patches; batch 256; bf16 autocast

| what | windows/s (median round) | over the bare step |
|---|---|---|
| bare training step | 16,262 | 1.00 |
| `PARSPretrainer.fit` | 11,374 | 0.70 |

## Another size
- Encoder: 64 x 4 (small), 10-s windows at 100 Hz

| batch | precision | PARS windows/s | encoder-alone windows/s |
|---|---|---|---|
| 64 | float32 | 1,205.0 | 1,500.0 |
"""


def test_the_recorded_rates_are_read_with_their_card_batch_setting_and_line(tmp_path):
    path = tmp_path / "gpu_x.md"
    path.write_text(RESULT)
    got = [
        (r.line, r.card, r.batch, r.setting, r.decoder, r.step, r.windows_s)
        for r in bench.recorded_rates(path)
    ]
    compiled = "bf16 autocast + torch.compile (reduce-overhead)"
    h100 = "NVIDIA H100 80GB HBM3"
    assert got == [
        (10, "NVIDIA H200", 1024, compiled, "db22036's", "PARS step", 41201.0),
        (10, "NVIDIA H200", 1024, compiled, "db22036's", "encoder alone", 52301.4),
        (11, "NVIDIA H200", 256, "float32", "db22036's", "PARS step", 7090.2),
        (11, "NVIDIA H200", 256, "float32", "db22036's", "encoder alone", 8608.1),
        (20, h100, 256, "bf16 autocast", "this tree's", "PARS step", 16262.0),
        (21, h100, 256, "bf16 autocast", "this tree's", "PARSPretrainer.fit", 11374.0),
    ]  # the 64 x 4 table is left out


def test_mfu_is_windows_per_second_times_flops_per_window_over_the_cards_peak():
    flops = bench.StepFlops(4, {}, step=(1e9, 3e9), encoder_alone=(1e9, 1e9))
    rate = bench.Rate("f.md", 1, "NVIDIA H100 80GB HBM3", 4, "bf16", "this tree's",
                      "PARS step", 1000.0)  # fmt: skip
    achieved, share = bench.mfu(rate, flops)
    assert achieved == pytest.approx(1000.0 * 4e9 / 4)
    assert share == pytest.approx(1e12 / 989.4e12)
    alone = dataclasses.replace(rate, step="encoder alone")
    assert bench.mfu(alone, flops)[0] == pytest.approx(1000.0 * 2e9 / 4)
    with pytest.raises(ValueError, match="'card' must be one of"):
        bench.mfu(bench.Rate("f.md", 1, "Some GPU", 4, "bf16", "x", "PARS step", 1.0), flops)


def test_every_recorded_rate_names_a_card_whose_peak_is_known():
    for name in bench.RECORDED:
        rates = bench.recorded_rates(bench.RESULTS / name)
        assert rates, name
        for rate in rates:
            assert rate.card in bench.CARDS, (name, rate)
            assert rate.batch in (256, 1024) and rate.windows_s > 0, (name, rate)
