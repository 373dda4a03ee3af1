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
- MLP (ablation, paper appendix A.4): ``W1 [y_j, y_k] + b = W1a y_j + W1b y_k + b``,
  so the hidden layer is ``relu(P_j + Q_k)`` with no 2F-sized tensor per pair.

Each decoder keeps the direct, materialising computation as :meth:`forward_naive`
(the reference the tests compare against, and the baseline of the benchmark).
"""

from __future__ import annotations

import torch
from torch import nn


def gather_tokens(y, idx):
    """``y[b, idx[b]]``: (batch, N, F) and (batch, n) -> (batch, n, F)."""
    return y.gather(1, idx[..., None].expand(-1, -1, y.shape[-1]))


def pair_embeddings(ym):
    """The materialised pair tensor ``[y_j, y_k]``: (batch, n, F) -> (batch, n * n, 2F)."""
    B, n, Fd = ym.shape
    left = ym[:, :, None, :].expand(B, n, n, Fd)  # y_j along rows
    right = ym[:, None, :, :].expand(B, n, n, Fd)  # y_k along columns
    return torch.cat((left, right), dim=-1).reshape(B, n * n, 2 * Fd)


def _exp_shifted(logits):
    """``exp(logits - rowmax)`` in float64 (the shift is a constant: no gradient flows)."""
    logits = logits.to(torch.float64)
    return (logits - logits.amax(dim=-1, keepdim=True).detach()).exp()


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
        self.emb_dim = emb_dim
        self.n_heads = n_heads
        self.query_proj = nn.Linear(2 * emb_dim, emb_dim)  # A_Q in R^{2F x F}
        self.attn = nn.MultiheadAttention(emb_dim, n_heads, batch_first=True)
        self.head = nn.Linear(emb_dim, 1)  # "a learnable linear layer into the shifts"

    def forward(self, y, idx):
        """Folded computation, exact, with no F-sized tensor per pair.

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
        B, N, Fd = y.shape  # (batch, n_patches, emb_dim)
        H, n = self.n_heads, idx.shape[1]
        d = Fd // H
        ym = gather_tokens(y, idx)  # (batch, n_masked, emb_dim)
        w_q, w_k, w_v = self.attn.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.attn.in_proj_bias.chunk(3)
        a_1, a_2 = self.query_proj.weight[:, :Fd], self.query_proj.weight[:, Fd:]

        # q_jk = W_q (A1 y_j + A2 y_k + a) + b_q = u_j + v_k; W_q A1 and W_q A2 folded once
        u = ym @ (w_q @ a_1).T + (w_q @ self.query_proj.bias + b_q)  # (batch, n, F)
        v = ym @ (w_q @ a_2).T  # (batch, n, F)
        k = (y @ w_k.T + b_k).view(B, N, H, d).permute(0, 2, 3, 1)  # (batch, H, d, N)
        scale = d**-0.5
        # logits of pair (j, k) at key m: U[j, m] + V[k, m], two (n x N) tables per head
        logits_u = u.view(B, n, H, d).transpose(1, 2) @ k * scale  # (batch, H, n, N)
        logits_v = v.view(B, n, H, d).transpose(1, 2) @ k * scale  # (batch, H, n, N)

        # head(out_proj(concat_h attn_h V_h)) = sum_h sum_m attn[h, m] s[h, m] + c, where
        # s[h, m] = y_m . (W_v,h^T W_o,h^T w) + b_v,h . (W_o,h^T w): one scalar per key, head
        w_out = (self.head.weight[0] @ self.attn.out_proj.weight).view(H, d)  # (H, d)
        w_s = torch.einsum("hdf,hd->hf", w_v.view(H, d, Fd), w_out)  # (H, F)
        s = (y @ w_s.T + (b_v.view(H, d) * w_out).sum(-1)).transpose(1, 2)  # (batch, H, N)
        const = self.head.weight[0] @ self.attn.out_proj.bias + self.head.bias[0]

        # softmax_m(U[j, m] + V[k, m]) factorises: exp(U[j, m]) exp(V[k, m]), so its
        # numerator against s and its denominator are (n x N) @ (N x n) products per
        # head. Each row is shifted by its own max (the shift cancels in the ratio);
        # the factor tables are float64 so that their product cannot underflow unless
        # the two rows' maxima, taken at different keys, are more than ~700 apart (an
        # attention far harder than a one-hot); the result is then NaN, never a silent 0.
        e_u = _exp_shifted(logits_u)  # (batch, H, n, N)
        e_v = _exp_shifted(logits_v).transpose(-1, -2)  # (batch, H, N, n)
        num = (e_u * s[:, :, None, :].to(e_u.dtype)) @ e_v  # (batch, H, n, n)
        den = e_u @ e_v  # (batch, H, n, n)
        return (num / den).sum(dim=1).to(y.dtype) + const

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
