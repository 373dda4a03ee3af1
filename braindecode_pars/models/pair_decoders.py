"""Pair decoders of PARS: predict the shift of every pair of position-masked patches.

Both decoders read the concatenated pair embedding ``[y_j, y_k]`` (2F features) of
every ordered pair of position-masked tokens. Building that (batch, N_m^2, 2F)
tensor costs more than the encoder itself, and neither decoder needs it: every map
from the pair to the first non-linearity is linear, so each token is projected
once and the pair is formed by broadcasting an addition.

- Cross-attention (paper eq. 2): ``A_Q [y_j, y_k] = A1 y_j + A2 y_k + a``, and the
  per-head query projection is linear too, so ``q_jk = u_j + v_k``; the attention
  logits split into two (N_m x N) tables per head, ``U[j, m] + V[k, m]``. The value
  projection, the output projection and the final linear layer to a scalar fold
  into one scalar ``s[h, m]`` per key and head, so
  ``theta_jk = sum_h sum_m softmax_m(U[j, m] + V[k, m]) s[h, m] + c``. Since
  ``exp(U[j, m] + V[k, m]) = exp(U[j, m]) exp(V[k, m])``, the softmax's numerator
  and denominator are matrix products of (N_m x N) tables: no (N_m x N_m x N)
  tensor is formed either, and the decoder's memory grows as N_m * N, not N_m^2 * N.
  The computation is one ``torch.library`` operator, :func:`pair_attention`, with
  its backward written out: the same on every device and under ``torch.compile``
  (no graph break, no host synchronisation, no Python branch on the data). Each row
  of logits is shifted by its maximum, so nothing overflows; the rare pair whose
  denominator underflows is recomputed directly (see :data:`FALLBACK_PAIRS`).
- MLP (ablation, paper appendix A.4): ``W1 [y_j, y_k] + b = W1a y_j + W1b y_k + b``,
  so the hidden layer is ``relu(P_j + Q_k)`` with no 2F-sized tensor per pair.

Each decoder keeps the direct, materialising computation as :meth:`forward_naive`
(the reference the tests compare against, and the baseline of the benchmark).
"""

from __future__ import annotations

import contextlib
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import register_flop_formula

from .._checks import check_heads

#: On a CPU the factor tables are processed this many elements (table entries of one
#: chunk of windows) at a time: about 1 MB of float32, so that a chunk's tables stay in
#: cache between the operations that read them, and the backward pass's scratch memory
#: is reused from chunk to chunk rather than allocated (and page-faulted in) at full
#: size. Other devices take the whole batch at once.
CPU_CHUNK_ELEMENTS = 1 << 18


def _gather_tokens(y, idx):
    """``y[b, idx[b]]``: (batch, N, F) and (batch, n) -> (batch, n, F).

    Rows of the flattened (batch * N, F) tensor are picked with ``index_select``: the
    same values as ``y.gather(1, ...)``, with a backward pass (``index_add``) about
    twice as fast on a CPU as ``gather``'s ``scatter_add``.
    """
    B, N, Fd = y.shape
    rows = idx + N * torch.arange(B, device=idx.device)[:, None]
    return y.reshape(B * N, Fd).index_select(0, rows.reshape(-1)).view(B, idx.shape[1], Fd)


def _pair_embeddings(ym):
    """The materialised pair tensor ``[y_j, y_k]``: (batch, n, F) -> (batch, n * n, 2F)."""
    B, n, Fd = ym.shape
    left = ym[:, :, None, :].expand(B, n, n, Fd)  # y_j along rows
    right = ym[:, None, :, :].expand(B, n, n, Fd)  # y_k along columns
    return torch.cat((left, right), dim=-1).reshape(B, n * n, 2 * Fd)


#: The factor tables are computed as ``2 ** (log2(e) * logits)``, the factor folded
#: into the scale of the logits' product: on a CPU torch's ``exp2`` of float32 runs
#: about three times as fast as its ``exp``, for a relative error of the tables of at
#: most about ``|logit| * 1e-7``, the order of the rounding of the logits themselves.
LOG2_E = math.log2(math.e)

#: Pairs whose factor tables underflow (see :func:`_underflow_threshold`) are
#: recomputed exactly, up to this many per call: a static size, so that the step has
#: no data-dependent shape or branch. Pairs beyond it are counted, never silently
#: wrong: :meth:`CrossAttentionPairDecoder.forward_counted` returns their number.
FALLBACK_PAIRS = 1024


def _underflow_threshold(dtype):
    """Smallest softmax denominator the factor tables are trusted with, in ``dtype``.

    Every term of a denominator that the tables lose to underflow is below
    ``tiny = torch.finfo(dtype).tiny``; with the denominator above ``sqrt(tiny)`` the
    N lost terms change it by at most ``N * sqrt(tiny)`` relatively (1e-19 * N in
    float32), and ``1 / den`` in the backward pass stays far from overflow.
    """
    return torch.finfo(dtype).tiny ** 0.5


def _chunk_size(q, k):
    """Windows per chunk: on a CPU equal chunks of at most :data:`CPU_CHUNK_ELEMENTS`
    table entries, elsewhere the whole batch (a device choice, not a data one)."""
    B, H, n2, _ = q.shape
    if q.device.type != "cpu":
        return B
    n_chunks = math.ceil(B / max(1, CPU_CHUNK_ELEMENTS // (H * n2 * k.shape[2])))
    return math.ceil(B / n_chunks)


def _tables_(out, q3, k3, alpha):
    """``[e_u; e_v] = 2 ** (alpha * q @ k.T - rowmax)`` into ``out``: every entry <= 1.

    The shift of a row by its maximum cancels between the softmax's numerator and
    denominator, so it needs no gradient; with it nothing overflows, whatever the
    logits' range, and only the denominator can underflow.
    """
    torch.baddbmm(out, q3, k3.mT, beta=0, alpha=alpha, out=out)
    return out.sub_(out.amax(dim=-1, keepdim=True)).exp2_()


def _pair_attention(q, k, s, n, scale):
    """Forward of :func:`pair_attention`: the factor tables, chunk by chunk."""
    B, H, n2, d = q.shape
    N, chunk = k.shape[2], _chunk_size(q, k)
    q3, k3, s3 = q.reshape(B * H, n2, d), k.reshape(B * H, N, d), s.reshape(B * H, 1, N)
    num, den = q.new_empty(B * H, n, n), q.new_empty(B * H, n, n)
    tables = q.new_empty(chunk * H, n2, N)
    scratch = q.new_empty(chunk * H, n, N)
    for b0, b1 in _chunks(B, chunk):
        rows, m = slice(b0 * H, b1 * H), (b1 - b0) * H
        e = _tables_(tables[:m], q3[rows], k3[rows], scale * LOG2_E)
        e_u, e_vt = e[:, :n], e[:, n:].mT
        torch.bmm(torch.mul(e_u, s3[rows], out=scratch[:m]), e_vt, out=num[rows])
        torch.bmm(e_u, e_vt, out=den[rows])
    # an underflowing (or NaN) denominator: ratio 0 and den = inf, so that the pair
    # contributes nothing here nor to the gradient (dtheta / den = 0); the caller adds
    # it exactly. Tensor operations only: no host synchronisation.
    bad = ~(den > _underflow_threshold(den.dtype))
    ratio = torch.where(bad, 0.0, num.div_(den))
    den.masked_fill_(bad, math.inf)
    theta = ratio.view(B, H, n, n).sum(dim=1)
    return theta, den.view(B, H, n, n), ratio.view(B, H, n, n)


def _pair_attention_backward(grad, q, k, s, den, ratio, n, scale):
    """Backward of :func:`pair_attention`, the tables recomputed from ``q`` and ``k``.

    With ``A = dtheta / den`` and ``C = -A * theta_h`` per head,
    ``dU = e_u * (s * (A @ e_v) + C @ e_v)``, ``dV = e_v * (s * (A.T @ e_u) + C.T @ e_u)``
    and ``ds = sum_j e_u * (A @ e_v)``; ``[A; C]`` is stacked so that each side is one
    product per head.
    """
    B, H, n2, d = q.shape
    N, chunk = k.shape[2], _chunk_size(q, k)
    q3, k3, s3 = q.reshape(B * H, n2, d), k.reshape(B * H, N, d), s.reshape(B * H, 1, N)
    den3, ratio3 = den.reshape(B * H, n, n), ratio.reshape(B * H, n, n)
    # dq and dk computed transposed, (d x 2n) and (d x N): 2-3 times as fast on a CPU
    # as (2n x d) and (N x d) products with d as small as 8
    dq_t, dk_t = q3.new_empty(B * H, d, n2), k3.new_empty(B * H, d, N)
    ds = torch.empty_like(s3)
    tables = q3.new_empty(chunk * H, n2, N)
    ac = q3.new_empty(chunk * H, n2, n)  # [A; C]
    x = q3.new_empty(chunk * H, n2, N)  # [A @ e_v; C @ e_v], then d loss / d U
    y = q3.new_empty(chunk * H, n2, N)  # [A.T @ e_u; C.T @ e_u], then d loss / d V
    dl = q3.new_empty(chunk * H, n2, N)  # d loss / d [U; V]
    for b0, b1 in _chunks(B, chunk):
        rows, m = slice(b0 * H, b1 * H), (b1 - b0) * H
        e = _tables_(tables[:m], q3[rows], k3[rows], scale * LOG2_E)
        e_u, e_v = e[:, :n], e[:, n:]
        a, c = ac[:m, :n], ac[:m, n:]
        g = grad[b0:b1, None].expand(b1 - b0, H, n, n).reshape(m, n, n)
        torch.div(g, den3[rows], out=a)
        torch.mul(a, ratio3[rows], out=c).neg_()
        xm, ym = x[:m], y[:m]
        torch.bmm(ac[:m], e_v, out=xm)  # rows: A @ e_v, then C @ e_v
        torch.bmm(ac[:m].mT.reshape(m, n, 2, n).transpose(1, 2).reshape(m, n2, n), e_u, out=ym)
        x_a, x_c, y_a, y_c = xm[:, :n], xm[:, n:], ym[:, :n], ym[:, n:]
        x_a.mul_(e_u)
        torch.sum(x_a, dim=1, keepdim=True, out=ds[rows])
        d_l = dl[:m]
        torch.addcmul(x_c.mul_(e_u), x_a, s3[rows], out=d_l[:, :n])
        torch.addcmul(y_c.mul_(e_v), y_a.mul_(e_v), s3[rows], out=d_l[:, n:])
        dq, dk = dq_t[rows], dk_t[rows]
        torch.baddbmm(dq, k3[rows].mT, d_l.mT, beta=0, alpha=scale, out=dq)
        torch.baddbmm(dk, q3[rows].mT, d_l, beta=0, alpha=scale, out=dk)
    dq, dk = dq_t.view(B, H, d, n2).mT, dk_t.view(B, H, d, N).mT
    return dq.contiguous(), dk.contiguous(), ds.view(B, H, N)


@torch.library.custom_op("braindecode_pars::pair_attention", mutates_args=())
def pair_attention(
    q: torch.Tensor, k: torch.Tensor, s: torch.Tensor, n: int, scale: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``theta[b, j, k] = sum_h sum_m softmax_m(U[j, m] + V[k, m]) s[h, m]`` from factor tables.

    ``q`` (batch, H, 2n, d) holds per head the rows ``u_1..u_n`` then ``v_1..v_n``,
    ``k`` (batch, H, N, d) the keys, ``s`` (batch, H, N) the scalar value of each key
    and head, and the logits are ``[U; V] = scale * q @ k.T``. Per head, with
    ``e_u = exp(U - rowmax)`` and ``e_v = exp(V - rowmax)``, ``den = e_u @ e_v.T`` and
    ``num = (e_u * s) @ e_v.T``: two (n x N) @ (N x n) products, memory
    O(batch x H x n x N), and no (n x n x N) tensor.

    Registered as a ``torch.library`` operator with its backward, so ``torch.compile``
    traces it as one opaque node (no graph break) and, with no host synchronisation
    in it, CUDA graphs can capture it.

    Returns ``theta`` (batch, n, n), the sum over heads; ``den`` (batch, H, n, n), the
    denominators, ``inf`` where the tables underflowed (see
    :func:`_underflow_threshold`), pairs that contribute 0 here and that the caller
    adds exactly; ``ratio`` (batch, H, n, n), each head's ``theta``.
    """
    return _pair_attention(q, k, s, n, scale)


@pair_attention.register_fake
def _(q, k, s, n, scale):
    B, H = q.shape[:2]
    return q.new_empty(B, n, n), q.new_empty(B, H, n, n), q.new_empty(B, H, n, n)


@torch.library.custom_op("braindecode_pars::pair_attention_backward", mutates_args=())
def pair_attention_backward(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    s: torch.Tensor,
    den: torch.Tensor,
    ratio: torch.Tensor,
    n: int,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of :func:`pair_attention`'s ``theta`` with respect to ``q``, ``k``, ``s``."""
    return _pair_attention_backward(grad.contiguous(), q, k, s, den, ratio, n, scale)


@pair_attention_backward.register_fake
def _(grad, q, k, s, den, ratio, n, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(s)


def _setup_context(ctx, inputs, output):
    q, k, s, n, scale = inputs
    _, den, ratio = output
    ctx.save_for_backward(q, k, s, den, ratio)
    ctx.n, ctx.scale = n, scale
    ctx.mark_non_differentiable(den, ratio)


def _backward(ctx, grad, _grad_den, _grad_ratio):
    q, k, s, den, ratio = ctx.saved_tensors
    dq, dk, ds = pair_attention_backward(grad, q, k, s, den, ratio, ctx.n, ctx.scale)
    return dq, dk, ds, None, None


pair_attention.register_autograd(_backward, setup_context=_setup_context)


def _pair_attention_flops(q_shape, k_shape, s_shape, n, scale, *args, **kwargs):
    """Multiply-adds times 2 of :func:`pair_attention`: the logits, ``num`` and ``den``."""
    B, H, n2, d = q_shape
    N = k_shape[2]
    return 2 * B * H * (n2 * N * d + 2 * n * n * N)


def _pair_attention_backward_flops(grad_shape, q_shape, k_shape, *args, **kwargs):
    """The tables recomputed, four (n x n) @ (n x N) products, ``dq`` and ``dk``."""
    B, H, n2, d = q_shape
    N, n = k_shape[2], n2 // 2
    return 2 * B * H * (n2 * N * d + 4 * n * n * N + 2 * n2 * N * d)


register_flop_formula(torch.ops.braindecode_pars.pair_attention)(_pair_attention_flops)
register_flop_formula(torch.ops.braindecode_pars.pair_attention_backward)(
    _pair_attention_backward_flops
)


def _exact_pairs(q, k, s, den, n, scale, size=None):
    """The pairs whose denominators underflowed (``den`` is ``inf``), computed directly.

    At most ``size`` pairs (:data:`FALLBACK_PAIRS`): their positions are found with
    ``torch.nonzero_static``, a fixed-size result, so the step keeps static shapes and
    no host synchronisation. Returns the flat indices ``(batch, j, k)`` of the slots,
    their exact per-head values (0 in empty slots) and the number of underflowing
    pairs beyond ``size`` (a 0-d tensor on the device).
    """
    B, H, n2, d = q.shape
    N = k.shape[2]
    bad = den.isinf().view(-1)  # (batch * H * n * n)
    size = min(bad.numel(), FALLBACK_PAIRS if size is None else size)
    flat = torch.nonzero_static(bad, size=size, fill_value=-1)[:, 0]
    filled = flat >= 0
    flat = flat.clamp(min=0)
    bh, jk = flat // (n * n), flat % (n * n)
    j, kk = jk // n, jk % n
    q3, k3, s3 = q.reshape(B * H, n2, d), k.reshape(B * H, N, d), s.reshape(B * H, N)
    query = q3[bh, j] + q3[bh, n + kk]  # (size, d): u_j + v_k
    logits = torch.bmm(k3[bh], query[:, :, None])[..., 0] * scale  # (size, N)
    exact = (torch.softmax(logits, dim=-1) * s3[bh]).sum(-1)
    exact = torch.where(filled, exact, 0.0)
    unresolved = bad.sum() - filled.sum()
    return (bh // H) * (n * n) + jk, exact, unresolved


def _chunks(B, chunk):
    """``(start, stop)`` of the batch's chunks of ``chunk`` windows."""
    return [(b, min(b + chunk, B)) for b in range(0, B, chunk)]


class CrossAttentionPairDecoder(nn.Module):
    """Cross-attention shift decoder, paper eq. 2.

    ``theta_hat = Linear(cross_attention(Q = A_Q Y', K = Y, V = Y))`` with ``Y'`` the
    pair embeddings of the position-masked tokens and ``Y`` all patch embeddings.
    The attention is a standard multi-head attention (``nn.MultiheadAttention``
    holds its weights); the paper does not give its number of heads, ``n_heads``
    defaults to the encoder's 8.

    Parameters
    ----------
    emb_dim : int
        Token size ``F``.
    n_heads : int
        Heads of the cross-attention.
    """

    def __init__(self, emb_dim, n_heads=8):
        super().__init__()
        check_heads("n_heads", n_heads, emb_dim)
        self.emb_dim = emb_dim
        self.n_heads = n_heads
        self.query_proj = nn.Linear(2 * emb_dim, emb_dim)  # A_Q in R^{2F x F}
        self.attn = nn.MultiheadAttention(emb_dim, n_heads, batch_first=True)
        self.head = nn.Linear(emb_dim, 1)  # "a learnable linear layer into the shifts"

    def folded_weights(self, dtype):
        """The decoder's weights folded for :meth:`forward`, in ``dtype``.

        Returns ``w_uv`` (2F, F) and ``b_uv`` (2F,), the maps from a token to ``[u, v]``
        (``W_q A1`` and ``W_q A2``);
        ``w_ks`` (F + H, F) and ``b_ks`` (F + H,), the maps from a token to its key and
        to its ``s`` of every head; ``const``, the constant of the output.
        """
        Fd, H = self.emb_dim, self.n_heads
        d = Fd // H
        w_q, w_k, w_v = self.attn.in_proj_weight.to(dtype).chunk(3)
        b_q, b_k, b_v = self.attn.in_proj_bias.to(dtype).chunk(3)
        a_w, a_b = self.query_proj.weight.to(dtype), self.query_proj.bias.to(dtype)
        # q_jk = W_q (A1 y_j + A2 y_k + a) + b_q = u_j + v_k; W_q A1 and W_q A2 folded once
        w_uv = torch.cat((w_q @ a_w[:, :Fd], w_q @ a_w[:, Fd:]))
        b_u = w_q @ a_b + b_q
        b_uv = torch.cat((b_u, torch.zeros_like(b_u)))
        # head(out_proj(concat_h attn_h V_h)) = sum_h sum_m attn[h, m] s[h, m] + c, where
        # s[h, m] = y_m . (W_v,h^T W_o,h^T w) + b_v,h . (W_o,h^T w): one scalar per key, head
        w_head, b_head = self.head.weight[0].to(dtype), self.head.bias[0].to(dtype)
        w_out = (w_head @ self.attn.out_proj.weight.to(dtype)).view(H, d)  # (H, d)
        w_s = torch.bmm(w_out[:, None, :], w_v.view(H, d, Fd))[:, 0]  # (H, F)
        b_s = (b_v.view(H, d) * w_out).sum(-1)  # (H,)
        const = w_head @ self.attn.out_proj.bias.to(dtype) + b_head
        return w_uv, b_uv, torch.cat((w_k, w_s)), torch.cat((b_k, b_s)), const

    def forward(self, y, idx):
        """Folded computation, exact, with no F-sized tensor per pair.

        The factor tables are float32, or float64 for float64 input; under autocast the
        decoder leaves autocast and computes in float32 too (its products are small
        beside the encoder's, and a softmax ratio of bf16 tables would be off by
        about 1e-2). Every row of logits is shifted by its maximum before it is
        exponentiated; a pair whose denominator still underflows (see
        :func:`_underflow_threshold`: two rows whose maxima lie more than about 40
        nats (float32) or 350 nats (float64) apart at every key) is recomputed exactly
        from its logits, up to :data:`FALLBACK_PAIRS` pairs per call; the number beyond
        that is returned by :meth:`forward_counted`, so the result is never silently
        wrong.

        Parameters
        ----------
        y : torch.Tensor, shape (batch, n_patches, emb_dim)
            All patch embeddings (the keys and values).
        idx : torch.Tensor of long, shape (batch, n_masked)
            Which tokens form the pairs (the position-masked ones).

        Returns
        -------
        theta_hat : torch.Tensor, shape (batch, n_masked, n_masked)
            ``theta_hat[b, j, k]`` estimates ``(t_j - t_k) / T_s``.
        """
        return self.forward_counted(y, idx)[0]

    def forward_counted(self, y, idx):
        """:meth:`forward`, and the number of pairs it could not compute exactly.

        Returns ``theta_hat`` and a 0-d long tensor on ``y``'s device: the pairs whose
        factor tables underflowed beyond the :data:`FALLBACK_PAIRS` recomputed ones
        (0 but for logits spread over tens of nats at every key). It is a device
        tensor, so that a training step need not wait for it: read it at the
        evaluation cadence (:class:`~braindecode_pars.training.callbacks.PretextSkill`
        warns when it is not 0).
        """
        out_dtype = y.dtype
        dtype = torch.float64 if y.dtype == torch.float64 else torch.float32
        no_autocast = contextlib.nullcontext()
        if torch.is_autocast_enabled(y.device.type):
            no_autocast = torch.autocast(y.device.type, enabled=False)
        with no_autocast:
            theta, unresolved = self._forward(y.to(dtype), idx)
        return theta.to(out_dtype), unresolved

    def _check_foldable(self):
        """The fold reads ``attn``'s packed in-projection and its biases and assumes no
        attention dropout, no extra key/value biases and no zero attention; refuse an
        ``attn`` changed otherwise rather than compute something else."""
        attn = self.attn
        changed = [
            name
            for name, bad in (
                ("dropout", attn.dropout != 0.0 and attn.training),
                ("bias_k/bias_v", attn.bias_k is not None or attn.bias_v is not None),
                ("add_zero_attn", attn.add_zero_attn),
                ("separate q/k/v projections", not attn._qkv_same_embed_dim),
                ("in_proj_bias", attn.in_proj_bias is None),
            )
            if bad
        ]
        if changed:
            raise ValueError(
                "The folded cross-attention decoder computes nn.MultiheadAttention with its "
                f"defaults, but 'attn' has {', '.join(changed)} changed; use "
                "decoder_impl='naive' for such an attention."
            )

    def _forward(self, y, idx):
        self._check_foldable()
        B, N, Fd = y.shape  # (batch, n_patches, emb_dim)
        H, n = self.n_heads, idx.shape[1]
        d = Fd // H
        w_uv, b_uv, w_ks, b_ks, const = self.folded_weights(y.dtype)
        ks = F.linear(y, w_ks, b_ks)  # (batch, N, F + H): keys, then s of every head
        k = ks[..., :Fd].view(B, N, H, d).transpose(1, 2).contiguous()  # (batch, H, N, d)
        s = ks[..., Fd:].transpose(1, 2).contiguous()  # (batch, H, N)
        uv = F.linear(_gather_tokens(y, idx), w_uv, b_uv)  # (batch, n, 2F): [u, v]
        q = uv.view(B, n, 2, H, d).permute(0, 3, 2, 1, 4).reshape(B, H, 2 * n, d)
        # logits of pair (j, k) at key m: U[j, m] + V[k, m] = (q[j] + q[n + k]) . k[m]
        scale = d**-0.5
        theta, den, _ = pair_attention(q, k, s, n, scale)
        flat, exact, unresolved = _exact_pairs(q, k, s, den, n, scale)
        theta = theta.reshape(B * n * n).index_add(0, flat, exact).view(B, n, n)
        return theta + const, unresolved

    def forward_naive(self, y, idx):
        """Direct computation on the materialised (batch, n_masked^2, 2F) pair tensor."""
        B, N, Fd = y.shape
        n = idx.shape[1]
        queries = self.query_proj(_pair_embeddings(_gather_tokens(y, idx)))  # (B, n*n, F)
        out, _ = self.attn(queries, y, y, need_weights=False)  # (B, n*n, F)
        return self.head(out).view(B, n, n)


class MLPPairDecoder(nn.Module):
    """Pairwise MLP shift decoder, the ablation of paper appendix A.4.

    Two linear layers with a hidden size of 512 and a ReLU in between, on the
    concatenated pair ``[y_j, y_k]``; each pair is decoded on its own.

    Parameters
    ----------
    emb_dim : int
        Token size ``F``.
    hidden_dim : int
        Hidden size. Paper: 512.
    """

    def __init__(self, emb_dim, hidden_dim=512):
        super().__init__()
        self.emb_dim = emb_dim
        self.hidden_dim = hidden_dim
        self.fc1 = nn.Linear(2 * emb_dim, hidden_dim)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden_dim, 1)

    def forward(self, y, idx):
        """Folded first layer: ``relu(W1a y_j + W1b y_k + b)``; see :meth:`forward_naive`."""
        Fd = y.shape[-1]
        ym = _gather_tokens(y, idx)  # (batch, n_masked, emb_dim)
        left = ym @ self.fc1.weight[:, :Fd].T + self.fc1.bias  # (batch, n, hidden)
        right = ym @ self.fc1.weight[:, Fd:].T  # (batch, n, hidden)
        hidden = self.act(left[:, :, None, :] + right[:, None, :, :])  # (batch, n, n, hidden)
        return self.fc2(hidden)[..., 0]

    def forward_naive(self, y, idx):
        """Direct computation on the materialised (batch, n_masked^2, 2F) pair tensor."""
        B, n = idx.shape
        pairs = _pair_embeddings(_gather_tokens(y, idx))  # (batch, n*n, 2F)
        return self.fc2(self.act(self.fc1(pairs))).view(B, n, n)
