import json
import math
import threading

import pytest
import torch

from braindecode_pars.models.pair import decoders as pair_decoders
from braindecode_pars.models.pair import tables as pair_attention
from braindecode_pars.models.pair.decoders import (
    CrossAttentionPairDecoder,
    MLPPairDecoder,
    _gather_tokens,
    _pair_embeddings,
)


def _random_case(B, N, n, F, dtype=torch.float64):
    y = torch.randn(B, N, F, dtype=dtype, requires_grad=True)
    idx = torch.stack([torch.randperm(N)[:n] for _ in range(B)])
    return y, idx


def _check_against_naive(decoder, y, idx, rtol):
    fast = decoder(y, idx)
    naive = decoder.forward_naive(y, idx)
    torch.testing.assert_close(fast, naive, rtol=rtol, atol=rtol * naive.abs().max().item())
    weights = torch.randn_like(naive)  # a random upstream gradient
    inputs = [y, *decoder.parameters()]
    g_fast = torch.autograd.grad((fast * weights).sum(), inputs)
    g_naive = torch.autograd.grad((naive * weights).sum(), inputs)
    for a, b in zip(g_fast, g_naive, strict=True):
        torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * b.abs().max().item())


@pytest.mark.parametrize(
    "B, N, n, F, H",
    [
        pytest.param(2, 10, 8, 32, 4, id="small"),
        pytest.param(3, 40, 32, 64, 8, id="paper-N"),
        pytest.param(1, 5, 2, 16, 1, id="one-head-two-masked"),
    ],
)
@pytest.mark.parametrize("weight_std", [None, 0.2], ids=["default-init", "wide-weights"])
def test_cross_attention_decoder_equals_naive_in_float64(B, N, n, F, H, weight_std):
    dec = CrossAttentionPairDecoder(F, H).double()
    if weight_std is not None:
        for p in dec.parameters():
            torch.nn.init.normal_(p, std=weight_std)
    y, idx = _random_case(B, N, n, F)
    _check_against_naive(dec, y, idx, rtol=1e-9)


def test_cross_attention_decoder_is_exact_for_very_peaked_attention():
    # logits spanning hundreds of nats: float32 factor tables would underflow here
    B, N, n, F, H = 2, 12, 9, 16, 2
    dec = CrossAttentionPairDecoder(F, H).double()
    for p in dec.parameters():
        torch.nn.init.normal_(p, std=0.6)
    y = torch.randn(B, N, F, dtype=torch.float64, requires_grad=True)
    idx = torch.arange(n).repeat(B, 1)
    with torch.no_grad():  # the attention logits of the naive computation
        w_q, w_k, _ = dec.attn.in_proj_weight.chunk(3)
        b_q, b_k, _ = dec.attn.in_proj_bias.chunk(3)
        q = dec.query_proj(_pair_embeddings(y[:, :n])) @ w_q.T + b_q  # (B, n*n, F)
        k = y @ w_k.T + b_k  # (B, N, F)
        d = F // H
        logits = torch.einsum("bphd,bmhd->bhpm", q.view(B, -1, H, d), k.view(B, N, H, d))
        spread = (logits.amax(-1) - logits.amin(-1)).max().item() / d**0.5
    assert spread > 100  # the case really is extreme
    _check_against_naive(dec, y, idx, rtol=1e-8)


@pytest.mark.parametrize("B, N, n, F", [(2, 10, 8, 32), (1, 40, 32, 64)])
def test_mlp_decoder_equals_naive_in_float64(B, N, n, F):
    dec = MLPPairDecoder(F, hidden_dim=48).double()
    y, idx = _random_case(B, N, n, F)
    _check_against_naive(dec, y, idx, rtol=1e-10)


def test_naive_mlp_decoder_reads_the_concatenated_pair():
    dec = MLPPairDecoder(4, hidden_dim=5).double()
    y, idx = _random_case(1, 3, 3, 4)
    out = dec.forward_naive(y, idx)
    for j in range(3):
        for k in range(3):
            pair = torch.cat((y[0, idx[0, j]], y[0, idx[0, k]]))
            expected = dec.fc2(torch.relu(dec.fc1(pair)))
            torch.testing.assert_close(out[0, j, k], expected[0])


#: Tolerance of the folded decoder in float32 against the naive one in float64: every
#: output and every gradient within 1e-5 of the largest magnitude of its reference
#: (measured: at most 2e-6; the naive decoder's own float32 error is as large).
FLOAT32_TOL = 1e-5

#: Under bf16 autocast the decoder's two projections run in bf16 (8 bits of mantissa,
#: as the encoder's products), its tables in float32: its error against the float64
#: reference is at most 1e-2 of the largest magnitude, or 1.25 times the naive
#: decoder's own error under the same autocast where that is larger (wide weights:
#: logits of tens of nats carry bf16 rounding of about 0.1 nat; measured over three
#: seeds, folded 0.005-0.031 against naive 0.007-0.10).
BF16_TOL = 1e-2


@pytest.fixture
def bad_pairs(monkeypatch):
    """Record, per call of the pair operator, how many pair-heads took the exact
    fallback (the operator's own count, read after its body ran: eagerly, even inside
    a compiled graph, where the operator is one opaque node)."""
    calls = []
    forward = pair_attention._pair_attention

    def recording_forward(*args):
        out = forward(*args)
        calls.append(int(out[1][0]))
        return out

    monkeypatch.setattr(pair_attention, "_pair_attention", recording_forward)
    return calls


def _wide(decoder, std):
    for p in decoder.parameters():
        torch.nn.init.normal_(p, std=std)
    return decoder


#: The devices this machine has: the CPU, and a CUDA GPU where one is present (the GPU
#: runs of the benchmark notes; CI has none).
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _check_against_float64_naive(dec, y, idx, tol, autocast=False, device="cpu"):
    """``dec`` (float32, run on ``device``) against the naive computation of a float64
    copy on the CPU: values, gradients. Under autocast the tolerance is the larger of
    ``tol`` and 1.25 times the naive decoder's own error under the same autocast."""
    ref_dec = CrossAttentionPairDecoder(dec.emb_dim, dec.n_heads).double()
    ref_dec.load_state_dict(dec.state_dict())
    y64 = y.detach().double().requires_grad_()
    ref = ref_dec.forward_naive(y64, idx)
    weights = torch.randn_like(ref)  # a random upstream gradient
    g_ref = torch.autograd.grad((ref * weights).sum(), [y64, *ref_dec.parameters()])
    dec = dec.to(device)

    def run(forward):
        y32 = y.detach().float().to(device).requires_grad_()
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=autocast):
            out = forward(y32, idx.to(device))
        g = torch.autograd.grad(
            (out.float() * weights.float().to(device)).sum(), [y32, *dec.parameters()]
        )
        return out, g

    out, g = run(dec)
    assert out.dtype == torch.float32
    if autocast:
        naive = run(dec.forward_naive)
        errors = [
            ((a.double().cpu() - b).abs().max() / b.abs().max()).item()
            for a, b in zip((naive[0], *naive[1]), (ref, *g_ref), strict=True)
        ]
        tol = max(tol, 1.25 * max(errors))
    for a, b in zip((out, *g), (ref, *g_ref), strict=True):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a.double().cpu(), b, rtol=0, atol=tol * b.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autocast", [False, True], ids=["float32", "bf16-autocast"])
@pytest.mark.parametrize(
    "B, N, n, F, H, weight_std",
    [
        pytest.param(2, 10, 8, 32, 4, None, id="small"),
        pytest.param(3, 40, 32, 64, 8, None, id="paper-N"),
        pytest.param(3, 40, 32, 64, 8, 0.2, id="paper-N-wide-weights"),
    ],
)
def test_float32_folded_decoder_equals_float64_naive(B, N, n, F, H, weight_std, autocast, device):
    dec = CrossAttentionPairDecoder(F, H)
    if weight_std is not None:
        _wide(dec, weight_std)
    y, idx = _random_case(B, N, n, F, dtype=torch.float32)
    _check_against_float64_naive(
        dec, y, idx, BF16_TOL if autocast else FLOAT32_TOL, autocast, device
    )


@pytest.mark.parametrize("device", DEVICES)
def test_float32_underflowing_pairs_are_computed_exactly(bad_pairs, device):
    # logits spread over ~100 nats: the float32 factor tables of some pairs underflow.
    # Logits that large carry float32 rounding of ~1e-5 nats themselves (the naive
    # decoder in float32 is off by 4e-5 here): the tolerance is 5e-5.
    dec = _wide(CrossAttentionPairDecoder(16, 2), std=1.0)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL, False, device)
    assert bad_pairs and 0 < bad_pairs[0] < 2 * 2 * 9 * 9  # some pairs, not all


def test_float64_underflowing_pairs_are_computed_exactly(bad_pairs):
    # logits spread over more than 700 nats: even float64 factor tables underflow
    dec = _wide(CrossAttentionPairDecoder(16, 2).double(), std=2.0)
    y = torch.randn(2, 12, 16, dtype=torch.float64, requires_grad=True)
    _check_against_naive(dec, y, torch.arange(9).repeat(2, 1), rtol=1e-9)
    assert bad_pairs and bad_pairs[0] > 0


def test_chunked_tables_on_cpu_equal_the_naive_decoder(monkeypatch, bad_pairs):
    # 7 windows of 4 heads, chunks of 2 windows: 4 chunks, the last one short
    monkeypatch.setattr(pair_attention, "_CPU_CHUNK_ELEMENTS", 2 * 4 * (2 * 6) * 10)
    dec = CrossAttentionPairDecoder(16, 4).double()
    y, idx = _random_case(7, 10, 6, 16)
    _check_against_naive(dec, y, idx, rtol=1e-9)
    assert bad_pairs == [0]  # one call, no fallback: the chunks alone are tested


@pytest.mark.parametrize("keep_tables_bytes", [0, None], ids=["recomputed", "kept"])
def test_the_accelerator_path_equals_the_naive_decoder(monkeypatch, bad_pairs, keep_tables_bytes):
    # the path a GPU takes, taken on this CPU (chunks sized by the scratch ratio, tables
    # recomputed in backward or kept within the default budget): 7 windows, 4 heads of
    # size 4, 6 masked of 10 patches: ceil(12 * 10 / (0.25 * 22 * 4)) = 6 chunks
    # wanted, 4 chunks of 2 windows
    sizes = []
    chunk_size = pair_attention._chunk_size

    def recording_chunk_size(q, k):
        sizes.append(chunk_size(q, k))
        return sizes[-1]

    monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: True)
    monkeypatch.setattr(pair_attention, "_chunk_size", recording_chunk_size)
    dec = CrossAttentionPairDecoder(16, 4, keep_tables_bytes=keep_tables_bytes).double()
    y, idx = _random_case(7, 10, 6, 16)
    _check_against_naive(dec, y, idx, rtol=1e-9)
    assert sizes == [2, 2]  # forward and backward, 4 chunks each
    assert bad_pairs == [0]


@pytest.mark.parametrize("accelerator", [False, True], ids=["cpu-path", "accelerator-path"])
def test_underflowing_pairs_on_both_paths(monkeypatch, bad_pairs, accelerator):
    monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: accelerator)
    dec = _wide(CrossAttentionPairDecoder(16, 2), std=1.0)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL)
    assert bad_pairs and bad_pairs[0] > 0


def test_accelerator_layout_chooses_the_path_in_its_block_and_gives_it_back(monkeypatch):
    chunks = []
    chunk_size = pair_attention._chunk_size

    def recording_chunk_size(q, k):
        chunks.append(pair_attention._on_accelerator(q))
        return chunk_size(q, k)

    monkeypatch.setattr(pair_attention, "_chunk_size", recording_chunk_size)
    dec = CrossAttentionPairDecoder(16, 4).double()
    y, idx = _random_case(3, 10, 6, 16)
    with pair_attention.accelerator_layout():
        _check_against_naive(dec, y, idx, rtol=1e-9)  # the accelerator's path, exact
        with pair_attention.accelerator_layout(False):
            dec(y, idx)
        dec(y, idx)
    dec(y, idx)
    assert chunks == [True, True, False, True, False]  # forward, backward, then each call
    with pytest.raises(TypeError, match="'enabled' must be True or False, but got 'yes'"):
        with pair_attention.accelerator_layout("yes"):
            pass


def test_folded_decoder_backward_can_run_twice():
    dec = _wide(CrossAttentionPairDecoder(16, 2), std=1.0)  # with fallback pairs
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    loss = dec(y, idx).pow(2).sum()
    (g1,) = torch.autograd.grad(loss, y, retain_graph=True)
    (g2,) = torch.autograd.grad(loss, y)
    torch.testing.assert_close(g1, g2, rtol=0, atol=0)


def test_gather_tokens_picks_the_rows_of_each_window():
    y = torch.randn(3, 7, 5, requires_grad=True)
    idx = torch.stack([torch.randperm(7)[:4] for _ in range(3)])
    out = _gather_tokens(y, idx)
    torch.testing.assert_close(out, y[torch.arange(3)[:, None], idx], rtol=0, atol=0)
    (grad,) = torch.autograd.grad(out.sum(), y)
    expected = torch.zeros(3, 7, 5)
    expected[torch.arange(3)[:, None], idx] = 1.0
    torch.testing.assert_close(grad, expected, rtol=0, atol=0)


def test_folded_decoder_refuses_an_attention_it_cannot_fold():
    torch.manual_seed(0)
    y, idx = torch.randn(2, 6, 8), torch.arange(4).expand(2, 4)
    dec = pair_decoders.CrossAttentionPairDecoder(8, 2)
    dec.attn.dropout = 0.1  # the naive decoder would drop attention weights in training
    with pytest.raises(ValueError, match="dropout"):
        dec(y, idx)
    dec.eval()  # no dropout in evaluation: the fold is exact again
    torch.testing.assert_close(dec(y, idx), dec.forward_naive(y, idx), rtol=1e-5, atol=1e-5)
    dec.attn.add_zero_attn = True
    with pytest.raises(ValueError, match="add_zero_attn"):
        dec(y, idx)


def test_pairs_beyond_the_fallback_are_counted_not_hidden(monkeypatch, bad_pairs):
    # the same underflowing case with room for 3 exact pairs only: the rest are counted
    dec = _wide(CrossAttentionPairDecoder(16, 2), std=1.0)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    full, unresolved, gap = dec.forward_counted(y, idx)
    assert unresolved.item() == 0 and unresolved.dtype == torch.long
    assert gap.item() > 43.6  # pairs underflowed: their gap is past float32's limit
    monkeypatch.setattr(pair_attention, "_FALLBACK_PAIRS", 3)
    monkeypatch.setattr(pair_attention, "_FALLBACK_PAIRS_PER_WINDOW", 1)
    partial, unresolved, _ = dec.forward_counted(y, idx)
    n_bad = bad_pairs[-1]
    assert n_bad > 3
    assert unresolved.item() == n_bad - 3
    differs = (partial - full).abs() > 1e-6
    assert 0 < differs.sum() <= n_bad - 3  # the uncomputed pairs, and only them


def test_a_denominator_of_zero_gives_a_finite_gap_that_strict_json_writes():
    # logits spread so far that some pair-heads' float32 tables hold exactly 0: their
    # gap (-log 0) is recorded as the largest float32, which strict JSON can write
    torch.manual_seed(0)
    dec = _wide(CrossAttentionPairDecoder(16, 2), std=3.0)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    theta, unresolved, gap = dec.forward_counted(y, idx)
    assert unresolved.item() > 0 and torch.isfinite(theta).all()  # pairs past every table
    assert gap.item() == torch.finfo(torch.float32).max
    assert json.loads(json.dumps({"train_pair_gap": gap.item()}, allow_nan=False))


def _direct_pair_attention(q, k, s, n, scale):
    """The operator's definition computed directly: (batch, n, n), the sum over heads."""
    logits = scale * torch.einsum("bhpd,bhmd->bhpm", q, k)  # (B, H, 2n, N)
    pair = logits[:, :, :n, None, :] + logits[:, :, None, n:, :]  # (B, H, n, n, N)
    return (torch.softmax(pair, dim=-1) * s[:, :, None, None, :]).sum((1, -1))


def _peaked_case(B, H, n, N, margin, bad_heads):
    """q, k, s with one underflowing pair-head (j=0, k=1) in each of the first
    ``bad_heads`` heads of every window: keys are the unit vectors (d = N, scale 1),
    ``u_0`` peaks on key 0 and ``v_1`` on key 1, both by ``margin`` nats; the other rows
    are small."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, 2 * n, N, generator=gen, dtype=torch.float64)
    k = torch.eye(N, dtype=torch.float64).expand(B, H, N, N).clone()
    s = torch.randn(B, H, N, generator=gen, dtype=torch.float64)
    for h in range(bad_heads):
        q[:, h, 0] = -margin
        q[:, h, 0, 0] = 0.0
        q[:, h, n + 1] = -margin
        q[:, h, n + 1, 1] = 0.0
    return q, k, s


@pytest.mark.parametrize("accelerator", [False, True], ids=["cpu-path", "accelerator-path"])
def test_more_underflowing_pairs_than_256_in_a_batch_are_all_exact(monkeypatch, accelerator):
    # two underflowing pair-heads in each of 200 windows: 400 in the call, more than the
    # 256 slots a call had before the slots grew with the batch; all exact, none zeroed
    monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: accelerator)
    B, H, n, N = 200, 2, 3, 6
    q64, k64, s64 = (t.requires_grad_() for t in _peaked_case(B, H, n, N, 60.0, bad_heads=2))
    q, k, s = (t.detach().float().requires_grad_() for t in (q64, k64, s64))
    assert pair_attention._fallback_slots(B, H, n) == 4 * B
    theta, counts, gap, *_ = pair_attention._pair_attention_op(q, k, s, n, 1.0)
    assert counts.tolist() == [2 * B, 0]  # every underflowing pair-head resolved
    # the worst pairs' denominator: two keys, each 60 nats below the rows' maxima
    assert gap.item() == pytest.approx(60 - math.log(2), abs=1e-4)
    ref = _direct_pair_attention(q64, k64, s64, n, 1.0)
    torch.testing.assert_close(theta.double(), ref, rtol=0, atol=1e-6)
    weights = torch.randn_like(ref)
    grads = torch.autograd.grad((theta * weights.float()).sum(), (q, k, s))
    refs = torch.autograd.grad((ref * weights).sum(), (q64, k64, s64))
    for g, r in zip(grads, refs, strict=True):
        torch.testing.assert_close(g.double(), r, rtol=0, atol=1e-5 * r.abs().max().item())


def test_fallback_slots_grow_with_the_batch():
    assert pair_attention._fallback_slots(1, 8, 32) == 256  # the least per call
    assert pair_attention._fallback_slots(1024, 8, 32) == 4096  # 4 per window
    assert pair_attention._fallback_slots(1, 1, 3) == 9  # never more than the pair-heads


def test_decoder_projections_run_in_bf16_under_autocast():
    # the two projections at autocast's precision, the tables in float32: the float32
    # share of the decoder's matrix products (by the FLOP counter) is the operator's
    from torch.utils.flop_counter import FlopCounterMode

    dec = CrossAttentionPairDecoder(64, 8)
    y, idx = _random_case(4, 40, 32, 64, dtype=torch.float32)
    seen = []

    class Dtypes(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.aten.addmm.default, torch.ops.aten.mm.default):
                seen.append(out.dtype)
            return out

    with torch.autocast("cpu", dtype=torch.bfloat16), Dtypes(), FlopCounterMode(display=False):
        out, unresolved, _ = dec.forward_counted(y, idx)
    assert out.dtype == torch.float32 and unresolved.item() == 0
    linears = [d for d in seen]  # the weight folding is float32, the two linears bf16
    assert linears.count(torch.bfloat16) == 2, linears
    with torch.no_grad():  # outside autocast: float32 throughout, as before
        seen.clear()
        with Dtypes():
            dec.forward_counted(y, idx)
    assert torch.bfloat16 not in seen


@pytest.fixture
def matmul_precision_high():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    yield
    torch.set_float32_matmul_precision(before)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("accelerator", [False, True], ids=["cpu-path", "accelerator-path"])
def test_the_operator_is_exact_under_matmul_precision_high(
    monkeypatch, matmul_precision_high, device, accelerator
):
    # "high" makes float32 products TF32 (CUDA) or bf16-based (oneDNN) where the
    # hardware has them; the operator pins IEEE float32 for its own products, and the
    # caller's setting is back afterwards. (The decoder's projections, like the
    # encoder's products, follow the caller's setting.)
    if device == "cpu":
        monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: accelerator)
    elif not accelerator:
        pytest.skip("a GPU takes the accelerator's path only")
    backend = torch.backends.cuda.matmul if device == "cuda" else torch.backends.mkldnn.matmul
    assert backend.fp32_precision == "tf32"
    seen = []
    tables = pair_attention._tables_

    def recording_tables(*args):
        seen.append(backend.fp32_precision)
        return tables(*args)

    monkeypatch.setattr(pair_attention, "_tables_", recording_tables)
    gen = torch.Generator().manual_seed(0)
    B, H, n, N, d = 4, 8, 32, 40, 64
    q64 = torch.randn(B, H, 2 * n, d, generator=gen, dtype=torch.float64).requires_grad_()
    k64 = torch.randn(B, H, N, d, generator=gen, dtype=torch.float64).requires_grad_()
    s64 = torch.randn(B, H, N, generator=gen, dtype=torch.float64).requires_grad_()
    q, k, s = (t.detach().float().to(device).requires_grad_() for t in (q64, k64, s64))
    theta, counts, *_ = pair_attention._pair_attention_op(q, k, s, n, d**-0.5)
    ref = _direct_pair_attention(q64, k64, s64, n, d**-0.5)
    weights = torch.randn_like(ref)
    grads = torch.autograd.grad((theta * weights.float().to(device)).sum(), (q, k, s))
    refs = torch.autograd.grad((ref * weights).sum(), (q64, k64, s64))
    for got, want in zip((theta, *grads), (ref, *refs), strict=True):
        err = (got.double().cpu() - want).abs().max() / want.abs().max()
        assert err < FLOAT32_TOL, err  # TF32 products would be off by about 1e-3
    assert seen and set(seen) == {"ieee"}
    assert backend.fp32_precision == "tf32"  # restored


def test_exact_sections_in_two_threads_keep_ieee_until_the_last_one_ends(
    matmul_precision_high,
):
    # thread A opens a section, then B; A leaves first: B's products must stay IEEE
    # float32 until B leaves, and the caller's "tf32" comes back only then
    backend = torch.backends.mkldnn.matmul
    assert backend.fp32_precision == "tf32"
    a_in, b_in, a_out, b_done = (threading.Event() for _ in range(4))
    seen = {}

    def a():
        with pair_attention._exact_float_arithmetic("cpu"):
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b():
        a_in.wait(5)
        with pair_attention._exact_float_arithmetic("cpu"):
            b_in.set()
            a_out.wait(5)
            seen["inside, after A left"] = backend.fp32_precision
        b_done.set()

    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert b_done.is_set()
    assert seen == {"inside, after A left": "ieee"}
    assert backend.fp32_precision == "tf32"  # restored once both left
    with pair_attention._exact_float_arithmetic("cpu"):  # nested in one thread too
        with pair_attention._exact_float_arithmetic("cpu"):
            pass
        assert backend.fp32_precision == "ieee"
    assert backend.fp32_precision == "tf32"


def test_the_operator_passes_torch_library_checks(monkeypatch):
    # fake (meta) shapes, autograd registration and schema against the real kernels
    dec = _wide(CrossAttentionPairDecoder(16, 2), std=1.0)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    w_uv, b_uv, w_ks, b_ks, _ = dec.folded_weights(torch.float32)
    ks = torch.nn.functional.linear(y, w_ks, b_ks)
    k = ks[..., :16].view(2, 12, 2, 8).transpose(1, 2).contiguous().detach().requires_grad_()
    s = ks[..., 16:].transpose(1, 2).contiguous().detach().requires_grad_()
    q = torch.randn(2, 2, 18, 8, requires_grad=True)
    torch.library.opcheck(pair_attention._pair_attention_op, (q, k, s, 9, 8**-0.5))
    monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: True)
    torch.library.opcheck(pair_attention._pair_attention_op, (q, k, s, 9, 8**-0.5))


def _flops(fn):
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize(
    "accelerator, keep_bytes",
    [(False, None), (True, 0), (True, None)],
    ids=["cpu-path", "accelerator-path-recomputed", "accelerator-path-kept"],
)
def test_flop_counter_counts_the_operator_as_its_products(monkeypatch, accelerator, keep_bytes):
    # the registered formulas (what the counter sees of the opaque operator) against the
    # products the operator's own functions run, counted inside them: forward and
    # backward, the accelerator's backward recomputing the tables, num and den where it
    # keeps none
    monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: accelerator)
    if keep_bytes is not None:
        monkeypatch.setattr(pair_attention, "KEEP_TABLES_BYTES", keep_bytes)
    B, H, n, N, d = 3, 4, 6, 10, 8
    q = torch.randn(B, H, 2 * n, d, requires_grad=True)
    k = torch.randn(B, H, N, d, requires_grad=True)
    s = torch.randn(B, H, N, requires_grad=True)
    registered = _flops(lambda: pair_attention._pair_attention_op(q, k, s, n, 0.3))
    with torch.no_grad():
        inner = _flops(lambda: pair_attention._pair_attention(q, k, s, n, 0.3))
        out = pair_attention._pair_attention(q, k, s, n, 0.3)
        grad = torch.randn(B, n, n)
        _, _, _, bad, slots, tables, den, ratio = out
        args = (grad, q, k, s, bad, slots, tables, den, ratio, n, 0.3)
        inner_backward = _flops(lambda: pair_attention._pair_attention_backward(*args))
    assert registered == inner
    total = _flops(lambda: pair_attention._pair_attention_op(q, k, s, n, 0.3)[0].sum().backward())
    assert total == inner + inner_backward
    # and the closed form of the docstring: logits, num and den; the slots' logits
    slots = pair_attention._fallback_slots(B, H, n)
    assert inner == 2 * B * H * (2 * n * N * d + 2 * n * n * N) + 2 * slots * N * d


@pytest.mark.parametrize("weight_std", [None, 1.0], ids=["default", "underflowing"])
def test_compiled_decoder_equals_eager_with_fullgraph(one_thread, weight_std, bad_pairs):
    # the path a GPU takes: compiled (aot_eager traces it as Inductor would), one graph
    torch.manual_seed(0)
    dec = CrossAttentionPairDecoder(16, 2)
    if weight_std is not None:
        _wide(dec, weight_std)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    torch._dynamo.reset()
    compiled = torch.compile(dec.forward_counted, backend="aot_eager", fullgraph=True)
    out, unresolved, _ = compiled(y, idx)
    ref, ref_unresolved, _ = dec.forward_counted(y, idx)
    assert unresolved.item() == ref_unresolved.item() == 0
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)
    (g,) = torch.autograd.grad(out.pow(2).sum(), y)
    (g_ref,) = torch.autograd.grad(ref.pow(2).sum(), y)
    torch.testing.assert_close(g, g_ref, rtol=0, atol=1e-5)
    if weight_std is not None:
        assert bad_pairs[-1] > 0  # the fallback ran inside the compiled graph too


def test_pars_traces_under_torch_compile_with_no_graph_break(one_thread):
    from braindecode_pars import PARS

    model = PARS(n_times=1000, sfreq=100, emb_dim=32, depth=1, n_heads=4, ff_dim=32)
    X = torch.randn(4, 1, 1000)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda X: model(X)["loss"])(X)
    reasons = [b.reason for b in explained.break_reasons]
    assert explained.graph_break_count == 0, reasons
    assert explained.graph_count == 1


def test_no_host_sync_sees_an_item_call():
    from .._sync import HostSyncError, no_host_sync

    x = torch.randn(3)
    with pytest.raises(HostSyncError), no_host_sync():
        x.sum().item()
    with pytest.raises(HostSyncError), no_host_sync():
        bool(x.amin() > 0)


@pytest.mark.parametrize("weight_std", [None, 1.0], ids=["default", "underflowing"])
def test_the_decoder_step_reads_nothing_on_the_host(weight_std):
    from .._sync import no_host_sync

    dec = CrossAttentionPairDecoder(16, 2)
    if weight_std is not None:
        _wide(dec, weight_std)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    with no_host_sync():
        theta, unresolved, gap = dec.forward_counted(y, idx)
        theta.pow(2).sum().backward()
    assert y.grad is not None and torch.isfinite(y.grad).all()


@pytest.mark.parametrize("accelerator", [False, True], ids=["cpu-path", "accelerator-path"])
def test_the_operators_own_functions_read_nothing_on_the_host(monkeypatch, accelerator):
    # a dispatch mode sees the registered operator as one call: its functions are run
    # here directly, so that the mode sees every product and index inside them
    from .._sync import no_host_sync

    monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: accelerator)
    q, k, s = (t.float() for t in _peaked_case(6, 2, 3, 6, 60.0, bad_heads=1))
    seen = []

    class Seen(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    with no_host_sync(), Seen():
        out = pair_attention._pair_attention(q, k, s, 3, 1.0)
        _, counts, _, bad, slots, tables, den, ratio = out
        grad = torch.ones(6, 3, 3)
        args = (grad, q, k, s, bad, slots, tables, den, ratio, 3, 1.0)
        pair_attention._pair_attention_backward(*args)
    assert torch.ops.aten.bmm.out in seen or torch.ops.aten.bmm.default in seen
    assert torch.ops.aten.searchsorted.Tensor in seen  # the fallback's compaction
    assert counts.tolist() == [6, 0]


def test_a_pars_training_step_reads_nothing_on_the_host(one_thread):
    from braindecode_pars import PARS

    from .._sync import no_host_sync

    model = PARS(n_times=1000, sfreq=100, emb_dim=32, depth=1, n_heads=4, ff_dim=32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    X = torch.randn(4, 1, 1000)
    for _ in range(2):  # AdamW's step count lives on the host: its step is left out
        with no_host_sync():
            out = model(X)
            out["loss"].backward()
        opt.step()
        opt.zero_grad()


def test_predict_shifts_warns_of_pairs_left_unresolved(monkeypatch, caplog):
    from ..test_pars import _tiny_pars

    torch.manual_seed(0)
    model = _tiny_pars()
    for p in model.decoder.parameters():
        torch.nn.init.normal_(p, std=0.5)  # gaps of about 150 nats: float32 tables underflow
    X = torch.randn(3, 1, 300)
    monkeypatch.setattr(pair_attention, "_FALLBACK_PAIRS", 0)  # no fallback slot at all
    monkeypatch.setattr(pair_attention, "_FALLBACK_PAIRS_PER_WINDOW", 0)
    out = model.predict_shifts(X, generator=torch.Generator().manual_seed(0))
    assert out["unresolved_pairs"].item() > 0
    assert "could not compute" in caplog.text and "table_dtype=torch.float64" in caplog.text
    model.decoder.table_dtype = torch.float64  # what the warning says: every pair exact
    caplog.clear()
    out = model.predict_shifts(X, generator=torch.Generator().manual_seed(0))
    assert out["unresolved_pairs"].item() == 0 and "could not compute" not in caplog.text
