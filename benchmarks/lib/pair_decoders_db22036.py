"""The pair decoder of db22036, kept as it was for an A/B on one GPU (``bench_gpu.py
--decoder db22036``): ``git show db22036:braindecode_pars/models/pair_decoders.py``,
with its one relative import made absolute and this paragraph added; nothing else
changed. Its folded decoder takes the factor tables on every device and in every mode
(with two data-dependent branches that read values on the host, and four graph breaks
under ``torch.compile``), where 32a0262 sent the GPU and compiled paths through
``scaled_dot_product_attention``. Not part of the package; the benchmarks alone import
it.

Pair decoders of PARS: predict the shift of every pair of position-masked patches.

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

from braindecode_pars._checks import check_int

#: On a CPU the factor tables are processed this many elements (table entries of one
#: chunk of windows) at a time: about 1 MB of float32, so that a chunk's tables stay in
#: cache between the operations that read them, and the backward pass's scratch memory
#: is reused from chunk to chunk rather than allocated (and page-faulted in) at full
#: size. Other devices take the whole batch at once.
CPU_CHUNK_ELEMENTS = 1 << 18


def gather_tokens(y, idx):
    """``y[b, idx[b]]``: (batch, N, F) and (batch, n) -> (batch, n, F).

    Rows of the flattened (batch * N, F) tensor are picked with ``index_select``: the
    same values as ``y.gather(1, ...)``, with a backward pass (``index_add``) about
    twice as fast on a CPU as ``gather``'s ``scatter_add``.
    """
    B, N, Fd = y.shape
    rows = idx + N * torch.arange(B, device=idx.device)[:, None]
    return y.reshape(B * N, Fd).index_select(0, rows.reshape(-1)).view(B, idx.shape[1], Fd)


def pair_embeddings(ym):
    """The materialised pair tensor ``[y_j, y_k]``: (batch, n, F) -> (batch, n * n, 2F)."""
    B, n, Fd = ym.shape
    left = ym[:, :, None, :].expand(B, n, n, Fd)  # y_j along rows
    right = ym[:, None, :, :].expand(B, n, n, Fd)  # y_k along columns
    return torch.cat((left, right), dim=-1).reshape(B, n * n, 2 * Fd)


def underflow_threshold(dtype):
    """Smallest softmax denominator the factor tables are trusted with, in ``dtype``.

    Every term of a denominator that the tables lose to underflow is below
    ``tiny = torch.finfo(dtype).tiny``; with the denominator above ``sqrt(tiny)`` the
    N lost terms change it by at most ``N * sqrt(tiny)`` relatively (1e-19 * N in
    float32), and ``1 / den`` in the backward pass stays far from overflow.
    """
    return torch.finfo(dtype).tiny ** 0.5


#: Logits within this bound are exponentiated without a shift: ``exp`` of them and
#: every product of two of them stay far inside float32's range (down to e^-40, above
#: :func:`underflow_threshold`); wider rows are shifted by their maxima.
UNSHIFTED_LOGIT_BOUND = 20.0


#: ``log2(e)``: the factor tables are computed as ``2 ** (log2(e) * logits)``, the
#: factor folded into the scale of the logits' product. On a CPU torch's ``exp2`` of
#: float32 runs about three times as fast as its ``exp`` (33 against 93 us for the
#: 225 k entries of one chunk of tables at 64 x 4), for a relative error of the tables
#: of at most about ``|logit| * 1e-7`` (4e-6 at a logit of 80), the same order as the
#: rounding of the logits themselves.
LOG2_E = math.log2(math.e)


def _factor_tables_(logits2):
    """``2 ** (logits2 - shift)`` in place, the shift 0 or each row's maximum.

    ``logits2`` are the logits in base 2 (times ``log2(e)``); the shift of a row
    cancels between the softmax's numerator and denominator.
    """
    bound = UNSHIFTED_LOGIT_BOUND * LOG2_E
    low, high = torch.aminmax(logits2)
    if not (-bound <= low and high <= bound):  # or NaN
        logits2.sub_(logits2.amax(dim=-1, keepdim=True))
    return logits2.exp2_()


class _FactorisedPairAttention(torch.autograd.Function):
    """``theta[b, j, k] = sum_h sum_m softmax_m(U[j, m] + V[k, m]) s[h, m]`` from factor tables.

    Inputs: ``q`` (batch, H, 2n, d), per head the rows ``u_1..u_n`` then ``v_1..v_n``;
    ``k`` (batch, H, N, d); ``s`` (batch, H, N); ``n``; ``scale`` of the logits
    ``[U; V] = scale * q @ k.T``. Per head, with ``e_u = exp(U - shift)`` and
    ``e_v = exp(V - shift)`` (computed as powers of 2, see :data:`LOG2_E`),
    ``den = e_u @ e_v.T`` and ``num = (e_u * s) @ e_v.T``. The backward pass is
    written out: with ``A = dtheta / den`` and ``C = A * theta_h``,
    ``dU = e_u * (s * (A @ e_v) - C @ e_v)``, ``dV = e_v * (s * (A.T @ e_u) - C.T @ e_u)``
    and ``ds = sum_j e_u * (A @ e_v)``: four products of (n x n) and (n x N) tables,
    a few passes over the tables, no autograd graph of the elementwise steps.

    Returns ``theta`` (batch, n, n) and ``bad``: the (batch, H, n, n) mask of the
    pairs whose denominator fell below :func:`underflow_threshold` (or is not
    finite), which contribute 0 here and are to be added exactly by the caller; an
    empty tensor when there are none.
    """

    @staticmethod
    def forward(ctx, q, k, s, n, scale):
        B, H, n2, d = q.shape
        N = k.shape[2]
        chunk = B
        if q.device.type == "cpu":  # equal chunks of at most CPU_CHUNK_ELEMENTS entries
            n_chunks = math.ceil(B / max(1, CPU_CHUNK_ELEMENTS // (H * n2 * N)))
            chunk = math.ceil(B / n_chunks)
        q3, k3, s3 = q.reshape(B * H, n2, d), k.reshape(B * H, N, d), s.reshape(B * H, 1, N)
        tables = q.new_empty(B * H, n2, N)  # [e_u; e_v] per head, kept for backward
        num, den = q.new_empty(B * H, n, n), q.new_empty(B * H, n, n)
        scratch = q.new_empty(chunk * H, n, N)
        for b0, b1 in _chunks(B, chunk):
            rows = slice(b0 * H, b1 * H)
            logits = tables[rows]
            e = _factor_tables_(  # the logits in base 2: the scale times log2(e)
                torch.baddbmm(
                    logits, q3[rows], k3[rows].mT, beta=0, alpha=scale * LOG2_E, out=logits
                )
            )
            e_u, e_vt = e[:, :n], e[:, n:].mT
            torch.bmm(torch.mul(e_u, s3[rows], out=scratch[: e.shape[0]]), e_vt, out=num[rows])
            torch.bmm(e_u, e_vt, out=den[rows])
        threshold = underflow_threshold(den.dtype)
        bad = None
        if not den.amin() > threshold:  # also catches NaN
            bad = ~(den > threshold)
            num.masked_fill_(bad, 0.0)
            den.masked_fill_(bad, 1.0)
        ratio = num.div_(den)
        ctx.save_for_backward(q3, k3, s3, tables, den, ratio, bad)
        ctx.sizes = (B, H, n, chunk, scale)
        if bad is None:
            bad = torch.zeros(0, dtype=torch.bool, device=q.device)
        else:
            bad = bad.view(B, H, n, n)
        ctx.mark_non_differentiable(bad)
        return ratio.view(B, H, n, n).sum(dim=1), bad

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad, _):
        q3, k3, s3, tables, den, ratio, bad = ctx.saved_tensors
        B, H, n, chunk, scale = ctx.sizes
        n2, d, N = q3.shape[1], q3.shape[2], k3.shape[1]
        # dq and dk computed transposed, (d x 2n) and (d x N): 2-3 times as fast as
        # (2n x d) and (N x d) products with d as small as 8
        dq_t, dk_t = q3.new_empty(B * H, d, n2), k3.new_empty(B * H, d, N)
        ds = torch.empty_like(s3)
        a_buf, c_buf = (q3.new_empty(chunk, H, n, n) for _ in range(2))  # A, -C
        xa_buf, xc_buf, ya_buf, yc_buf = (q3.new_empty(chunk * H, n, N) for _ in range(4))
        dl_buf = q3.new_empty(chunk * H, n2, N)  # d loss / d [U; V]
        den4, ratio4 = den.view(B, H, n, n), ratio.view(B, H, n, n)
        for b0, b1 in _chunks(B, chunk):
            rows, m = slice(b0 * H, b1 * H), (b1 - b0) * H
            e_u, e_v = tables[rows, :n], tables[rows, n:]
            a4, c4 = a_buf[: b1 - b0], c_buf[: b1 - b0]
            torch.div(grad[b0:b1, None], den4[b0:b1], out=a4)
            if bad is not None:
                a4.masked_fill_(bad.view(B, H, n, n)[b0:b1], 0.0)
            torch.mul(a4, ratio4[b0:b1], out=c4).neg_()
            a, c = a4.view(m, n, n), c4.view(m, n, n)
            x_a = torch.bmm(a, e_v, out=xa_buf[:m]).mul_(e_u)  # e_u * (A @ e_v)
            x_c = torch.bmm(c, e_v, out=xc_buf[:m]).mul_(e_u)  # -e_u * (C @ e_v)
            y_a = torch.bmm(a.mT, e_u, out=ya_buf[:m]).mul_(e_v)
            y_c = torch.bmm(c.mT, e_u, out=yc_buf[:m]).mul_(e_v)
            torch.sum(x_a, dim=1, keepdim=True, out=ds[rows])
            dl = dl_buf[:m]
            torch.addcmul(x_c, x_a, s3[rows], out=dl[:, :n])
            torch.addcmul(y_c, y_a, s3[rows], out=dl[:, n:])
            dq, dk = dq_t[rows], dk_t[rows]
            torch.baddbmm(dq, k3[rows].mT, dl.mT, beta=0, alpha=scale, out=dq)
            torch.baddbmm(dk, q3[rows].mT, dl, beta=0, alpha=scale, out=dk)
        dq, dk = dq_t.view(B, H, d, n2).mT, dk_t.view(B, H, d, N).mT
        return dq, dk, ds.view(B, H, N), None, None


def _chunks(B, chunk):
    """``(start, stop)`` of the batch's chunks of ``chunk`` windows."""
    return [(b, min(b + chunk, B)) for b in range(0, B, chunk)]


def check_heads(name, n_heads, emb_dim):
    """Raise unless ``n_heads`` (the parameter ``name``) is a positive int dividing ``emb_dim``."""
    check_int(name, n_heads, 1)
    if emb_dim % n_heads:
        divisors = [h for h in range(1, emb_dim + 1) if emb_dim % h == 0]
        raise ValueError(
            f"'{name}' must divide the token size emb_dim={emb_dim} (one of {divisors}), "
            f"but got {n_heads}."
        )
    return n_heads


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
        about 1e-2). Logits within :data:`UNSHIFTED_LOGIT_BOUND` are exponentiated as
        they are, wider rows after subtracting their maxima; a pair whose denominator
        still underflows (see :func:`underflow_threshold`: two rows whose maxima lie
        more than about 40 nats (float32) or 350 nats (float64) apart at every key) is
        recomputed exactly from its logits, so the result is never silently wrong.

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
        out_dtype = y.dtype
        dtype = torch.float64 if y.dtype == torch.float64 else torch.float32
        no_autocast = contextlib.nullcontext()
        if torch.is_autocast_enabled(y.device.type):
            no_autocast = torch.autocast(y.device.type, enabled=False)
        with no_autocast:
            theta = self._forward(y.to(dtype), idx)
        return theta.to(out_dtype)

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
        uv = F.linear(gather_tokens(y, idx), w_uv, b_uv)  # (batch, n, 2F): [u, v]
        q = uv.view(B, n, 2, H, d).permute(0, 3, 2, 1, 4).reshape(B, H, 2 * n, d)
        # logits of pair (j, k) at key m: U[j, m] + V[k, m] = (q[j] + q[n + k]) . k[m]
        theta, bad = _FactorisedPairAttention.apply(q, k, s, n, d**-0.5)
        if bad.numel():  # the pairs whose factor tables underflowed, computed directly
            b, h, j, kk = bad.nonzero(as_tuple=True)
            logits = q @ k.transpose(-1, -2) * d**-0.5  # (batch, H, 2n, N)
            pair_logits = logits[b, h, j] + logits[b, h, n + kk]  # (n_bad, N)
            exact = (torch.softmax(pair_logits, dim=-1) * s[b, h]).sum(-1)
            theta = theta.index_put((b, j, kk), exact, accumulate=True)
        return theta + const

    def forward_naive(self, y, idx):
        """Direct computation on the materialised (batch, n_masked^2, 2F) pair tensor."""
        B, N, Fd = y.shape
        n = idx.shape[1]
        queries = self.query_proj(pair_embeddings(gather_tokens(y, idx)))  # (B, n*n, F)
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
        ym = gather_tokens(y, idx)  # (batch, n_masked, emb_dim)
        left = ym @ self.fc1.weight[:, :Fd].T + self.fc1.bias  # (batch, n, hidden)
        right = ym @ self.fc1.weight[:, Fd:].T  # (batch, n, hidden)
        hidden = self.act(left[:, :, None, :] + right[:, None, :, :])  # (batch, n, n, hidden)
        return self.fc2(hidden)[..., 0]

    def forward_naive(self, y, idx):
        """Direct computation on the materialised (batch, n_masked^2, 2F) pair tensor."""
        B, n = idx.shape
        pairs = pair_embeddings(gather_tokens(y, idx))  # (batch, n*n, 2F)
        return self.fc2(self.act(self.fc1(pairs))).view(B, n, n)
