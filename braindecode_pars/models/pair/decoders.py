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
  The computation is one ``torch.library`` operator with its backward written out
  (:mod:`braindecode_pars.models.pair.tables`): the same on every device and under
  ``torch.compile`` (no graph break, no host synchronisation, no Python branch on the
  data). Each row of logits is shifted by its maximum, so nothing overflows; the rare
  pair whose denominator underflows is recomputed directly.
- MLP (ablation, paper appendix A.4): ``W1 [y_j, y_k] + b = W1a y_j + W1b y_k + b``,
  so the hidden layer is ``relu(P_j + Q_k)`` with no 2F-sized tensor per pair.

Each decoder keeps the direct, materialising computation as :meth:`forward_naive`
(the reference the tests compare against, and the baseline of the benchmark).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from braindecode_pars._util.checks import check_heads, check_int, check_option
from braindecode_pars.models.pair import fused as _fused
from braindecode_pars.models.pair import kernels as _kernels
from braindecode_pars.models.pair import tables as _op


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
    table_dtype : torch.dtype
        The dtype of the folded computation's factor tables: ``torch.float32``, or
        ``torch.float64``, whose tables underflow only for logits about 8 times as far
        apart (at about the speed of float32 on an H100 or H200's FP64 tensor cores,
        but at a 64th of it on most other GPUs). Float64 input always gets float64
        tables.
    fallback : {"auto", "torch", "triton"}
        The kernels that compute the rare pair-heads whose factor tables underflow:
        "torch" (about 30 small torch kernels each way, every device), "triton" (one
        Triton kernel each way, where Triton runs: a CUDA device; the torch path
        elsewhere) or "auto": the choice of an enclosing
        :func:`~braindecode_pars.models.pair.kernels.fallback_kernel` block, else the
        device's default (its ``"fallback_kernel"`` in
        :data:`~braindecode_pars._util.device_defaults._DEVICE_DEFAULTS`: "torch" on a
        CPU and, until a GPU timing decides, on CUDA). The values are the same either
        way.
    keep_tables_bytes : int | None
        On an accelerator, the most bytes of factor tables (with their ``den`` and
        ratios) that the forward pass keeps for the backward pass; above it the
        backward pass recomputes them (the same values, more time, less memory). None:
        :data:`~braindecode_pars.models.pair.tables.KEEP_TABLES_BYTES` (256 MiB); 0:
        always recompute. A CPU always keeps them.
    kernel : {"auto", "tables", "fused"}
        The pair operator's implementation: "tables" (torch operations over the factor
        tables, every device: about 66 kernel-launching calls forward and 92 backward on
        an accelerator), "fused" (one Triton kernel each way, the fallback folded in,
        reading the projections' dtype as it comes:
        :mod:`~braindecode_pars.models.pair.fused`; where Triton runs, a CUDA device,
        and for tiles within :data:`~braindecode_pars.models.pair.kernels._MAX_TILE`: the
        paper's 40 patches, not 128; "tables" elsewhere) or "auto": the device's default
        (its ``"decoder_kernel"`` in
        :data:`~braindecode_pars._util.device_defaults._DEVICE_DEFAULTS`: "tables" until
        a GPU timing decides). The values are the same to float32's rounding. ``fallback``
        and ``keep_tables_bytes`` concern "tables" only.
    """

    def __init__(
        self,
        emb_dim,
        n_heads=8,
        table_dtype=torch.float32,
        fallback="auto",
        keep_tables_bytes=None,
        kernel="auto",
    ):
        super().__init__()
        check_heads("n_heads", n_heads, emb_dim)
        check_option("fallback", fallback, _kernels._FALLBACK_KERNEL_OPTIONS)
        check_option("kernel", kernel, _kernels.DECODER_KERNEL_OPTIONS)
        if keep_tables_bytes is not None:
            check_int("keep_tables_bytes", keep_tables_bytes, 0)
        self.emb_dim = emb_dim
        self.n_heads = n_heads
        if table_dtype not in (torch.float32, torch.float64):
            raise ValueError(
                f"table_dtype must be torch.float32 or torch.float64, but got {table_dtype!r}."
            )
        self.table_dtype = table_dtype
        self.fallback = fallback
        self.keep_tables_bytes = keep_tables_bytes
        self.kernel = kernel
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

        The factor tables are float32 (float64 for float64 input, or with
        ``table_dtype=torch.float64``). Under autocast the two projections of the tokens
        (to keys and values, and to the pair queries) run at autocast's precision, as
        the encoder's products do, from weights folded in float32; the tables and their
        softmax ratios are computed in float32 whatever autocast or the matmul
        precision say (a ratio of bf16 tables would be off by about 1e-2). Every row of
        logits is shifted by its maximum before it is exponentiated; a pair whose
        denominator still underflows (two rows whose maxima lie more than about 44 nats
        (float32) or 354 nats (float64) apart at every key) is recomputed exactly from
        its logits inside the operator, in a number of slots that grows with the batch
        (:func:`~braindecode_pars.models.pair.tables._fallback_slots`); the number
        beyond them is returned by :meth:`forward_counted`, so the result is never
        silently wrong.

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
        """:meth:`forward`, the pairs it could not compute exactly, and its largest gap.

        Returns ``theta_hat``; a 0-d long tensor on ``y``'s device, the pair-heads
        whose factor tables underflowed beyond the fallback slots (0 but for logits
        spread over tens of nats at every key); and a 0-d float tensor, the largest
        gap in nats between a pair's best common key and its rows' maxima (the
        operator's ``gap``: the tables underflow from about 43.7 in float32), a health
        figure of the attention's logits; a denominator of exactly 0 (a gap past what
        the tables hold) gives the largest finite value of the gap's dtype, not
        infinity, so that the history JSON it goes into stays strict JSON. Both are
        device tensors, so that a training
        step need not wait for them: read them at the evaluation cadence
        (:class:`~braindecode_pars.pretraining.callbacks.PretextSkill` warns when pairs
        went unresolved, and moves a run whose pairs keep underflowing to float64
        tables).
        """
        out_dtype, device_type = y.dtype, y.device.type
        tables = torch.float64 if torch.float64 in (y.dtype, self.table_dtype) else torch.float32
        no_autocast, projections = contextlib.nullcontext(), tables
        if torch.is_autocast_enabled(device_type):
            no_autocast = torch.autocast(device_type, enabled=False)
            projections = torch.get_autocast_dtype(device_type)
        with no_autocast:
            theta, unresolved, gap = self._forward(y, idx, projections, tables)
        # -log(0) is infinite: strict JSON (the history) has no infinity
        return theta.to(out_dtype), unresolved, gap.clamp(max=torch.finfo(gap.dtype).max)

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

    def _forward(self, y, idx, projections, tables):
        """The folded computation: the projections in ``projections`` (bf16 under
        autocast), the operator in ``tables``."""
        self._check_foldable()
        B, N, Fd = y.shape  # (batch, n_patches, emb_dim)
        H, n = self.n_heads, idx.shape[1]
        d = Fd // H
        folded = self.folded_weights(torch.float64 if tables == torch.float64 else torch.float32)
        w_uv, b_uv, w_ks, b_ks, const = (w.to(projections) for w in folded)
        y = y.to(projections)
        if (
            _kernels.resolve_decoder_kernel(self.kernel, y, (n, N, d, tables == torch.float64))
            == "fused"
        ):
            # the projections' dtype and layout as they come: the kernels read the strides
            ks = F.linear(y, w_ks, b_ks)  # (batch, N, F + H)
            k = ks[..., :Fd].view(B, N, H, d).transpose(1, 2)  # (batch, H, N, d)
            uv = F.linear(_gather_tokens(y, idx), w_uv, b_uv)  # (batch, n, 2F)
            q = uv.view(B, n, 2, H, d).permute(0, 3, 2, 1, 4)  # (batch, H, 2, n, d)
            theta, counts, gap = _fused._pair_attention_fused_op(
                q, k, ks[..., Fd:].transpose(1, 2), d**-0.5, tables == torch.float64
            )
            return theta + const.to(tables), counts[1], gap
        ks = F.linear(y, w_ks, b_ks).to(tables)  # (batch, N, F + H): keys, then s per head
        k = ks[..., :Fd].view(B, N, H, d).transpose(1, 2).contiguous()  # (batch, H, N, d)
        s = ks[..., Fd:].transpose(1, 2).contiguous()  # (batch, H, N)
        uv = F.linear(_gather_tokens(y, idx), w_uv, b_uv).to(tables)  # (batch, n, 2F): [u, v]
        q = uv.view(B, n, 2, H, d).permute(0, 3, 2, 1, 4).reshape(B, H, 2 * n, d)
        # logits of pair (j, k) at key m: U[j, m] + V[k, m] = (q[j] + q[n + k]) . k[m]
        theta, counts, gap, *_ = _op._pair_attention_op(
            q, k, s, n, d**-0.5, self.keep_tables_bytes, self.fallback
        )
        return theta + const.to(tables), counts[1], gap

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
