import pytest
import torch

from braindecode_pars.models.pair_decoders import (
    CrossAttentionPairDecoder,
    MLPPairDecoder,
    pair_embeddings,
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
        q = dec.query_proj(pair_embeddings(y[:, :n])) @ w_q.T + b_q  # (B, n*n, F)
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


def test_float32_folded_decoder_agrees_with_naive():
    dec = CrossAttentionPairDecoder(64, 8)
    y, idx = _random_case(2, 40, 32, 64, dtype=torch.float32)
    torch.testing.assert_close(dec(y, idx), dec.forward_naive(y, idx), rtol=1e-4, atol=1e-5)
