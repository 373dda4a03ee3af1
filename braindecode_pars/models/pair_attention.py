"""The pair operator of the cross-attention decoder: a softmax over factor tables.

Per head, the logits of pair ``(j, k)`` at key ``m`` split as ``U[j, m] + V[k, m]``
(see :mod:`braindecode_pars.models.pair_decoders`), so
``exp(U[j, m] + V[k, m]) = exp(U[j, m]) exp(V[k, m])`` and the softmax's numerator and
denominator over the keys are products of (n x N) tables. :func:`pair_attention` is
that computation as one ``torch.library`` operator with its backward written out: the
same on every device and under ``torch.compile`` (one opaque node, no graph break), with
no host synchronisation (CUDA graphs can capture it) and no Python branch on the data.
Each row of logits is shifted by its maximum, so nothing overflows; a pair whose
denominator underflows contributes 0 and is flagged, and :func:`exact_pairs` computes
such pairs directly from their logits.
"""

from __future__ import annotations

import math

import torch
from torch.utils.flop_counter import register_flop_formula

#: On a CPU the factor tables are processed this many elements (table entries of one
#: chunk of windows) at a time: about 1 MB of float32, so that a chunk's tables stay in
#: cache between the operations that read them, and the backward pass's scratch memory
#: is reused from chunk to chunk rather than allocated (and page-faulted in) at full
#: size.
CPU_CHUNK_ELEMENTS = 1 << 18

#: Other devices (a GPU) take chunks of windows whose factor tables are at most this
#: fraction of the size of the pair operator's inputs (see :func:`_chunk_size`).
ACCELERATOR_SCRATCH_RATIO = 0.25


#: The factor tables are computed as ``2 ** (log2(e) * logits)``, the factor folded
#: into the scale of the logits' product: on a CPU torch's ``exp2`` of float32 runs
#: about three times as fast as its ``exp``, for a relative error of the tables of at
#: most about ``|logit| * 1e-7``, the order of the rounding of the logits themselves.
LOG2_E = math.log2(math.e)

#: Pairs whose factor tables underflow (see :func:`_underflow_threshold`) are
#: recomputed exactly, up to this many per call: a static size, so that the step has
#: no data-dependent shape or branch. Pairs beyond it are counted, never silently
#: wrong: the decoder's ``forward_counted`` returns their number.
FALLBACK_PAIRS = 256


def _underflow_threshold(dtype):
    """Smallest softmax denominator the factor tables are trusted with, in ``dtype``.

    Every term of a denominator that the tables lose to underflow is below
    ``tiny = torch.finfo(dtype).tiny``; with the denominator above ``sqrt(tiny)`` the
    N lost terms change it by at most ``N * sqrt(tiny)`` relatively (1e-19 * N in
    float32), and ``1 / den`` in the backward pass stays far from overflow.
    """
    return torch.finfo(dtype).tiny ** 0.5


def _chunk_size(q, k):
    """Windows per chunk of the pair operator; a choice by device and shapes, never data.

    On a CPU, equal chunks of at most :data:`CPU_CHUNK_ELEMENTS` entries of one table.
    Elsewhere, chunks whose table is at most :data:`ACCELERATOR_SCRATCH_RATIO` times the
    size of the operator's inputs ``q`` and ``k``: a number of chunks set by the
    patches and the head size alone, not by the batch (5 at the paper's size and 128
    patches, 2 at 40), so that the kernels stay large and the scratch memory stays a
    fixed fraction of what the encoder holds.
    """
    B, H, n2, d = q.shape
    N = k.shape[2]
    if q.device.type == "cpu":
        n_chunks = math.ceil(B / max(1, CPU_CHUNK_ELEMENTS // (H * n2 * N)))
    else:
        n_chunks = min(B, math.ceil(n2 * N / (ACCELERATOR_SCRATCH_RATIO * (n2 + N) * d)))
    return math.ceil(B / n_chunks)


def _tables_(out, q3, k3, alpha):
    """``[e_u; e_v] = 2 ** (alpha * q @ k.T - rowmax)`` into ``out``: every entry <= 1.

    The shift of a row by its maximum cancels between the softmax's numerator and
    denominator, so it needs no gradient; with it nothing overflows, whatever the
    logits' range, and only the denominator can underflow.
    """
    torch.baddbmm(out, q3, k3.mT, beta=0, alpha=alpha, out=out)
    return out.sub_(out.amax(dim=-1, keepdim=True)).exp2_()


def _ratio_(num, den, e_u, e_vt, s, scratch):
    """Per head ``num / den`` into ``num`` from the tables, and ``den`` (``inf`` where
    it underflowed, or is not finite: the pair's ratio is then 0); ``scratch`` has
    ``e_u``'s shape."""
    torch.bmm(e_u, e_vt, out=den)
    torch.bmm(torch.mul(e_u, s, out=scratch), e_vt, out=num)
    bad = ~(den > _underflow_threshold(den.dtype))
    den.masked_fill_(bad, math.inf)
    return num.div_(den).masked_fill_(bad, 0.0), bad


def _pair_attention(q, k, s, n, scale):
    """Forward of :func:`pair_attention`: the factor tables, chunk by chunk."""
    B, H, n2, d = q.shape
    N, chunk = k.shape[2], _chunk_size(q, k)
    q3, k3, s3 = q.reshape(B * H, n2, d), k.reshape(B * H, N, d), s.reshape(B * H, 1, N)
    theta = q.new_empty(B, n, n)
    bad = torch.empty(B, H, n, n, dtype=torch.bool, device=q.device)
    tables = q.new_empty(chunk * H, n2, N)
    scratch = q.new_empty(chunk * H, n, N)
    num, den = q.new_empty(chunk * H, n, n), q.new_empty(chunk * H, n, n)
    for b0, b1 in _chunks(B, chunk):
        rows, m = slice(b0 * H, b1 * H), (b1 - b0) * H
        e = _tables_(tables[:m], q3[rows], k3[rows], scale * LOG2_E)
        # an underflowing (or NaN) denominator: ratio 0 and no gradient (dtheta / den
        # = 0), the caller adds the pair exactly; tensor operations only, no host read
        ratio, bad_m = _ratio_(num[:m], den[:m], e[:, :n], e[:, n:].mT, s3[rows], scratch[:m])
        torch.sum(ratio.view(b1 - b0, H, n, n), dim=1, out=theta[b0:b1])
        bad[b0:b1] = bad_m.view(b1 - b0, H, n, n)
    return theta, bad


def _pair_attention_backward(grad, q, k, s, n, scale):
    """Backward of :func:`pair_attention`, every table recomputed from ``q`` and ``k``.

    Nothing of size n x N or n x n is kept from the forward pass. Per head, with
    ``A = dtheta / den`` and ``C = -A * theta_h``,
    ``dU = e_u * (s * (A @ e_v) + C @ e_v)``, ``dV = e_v * (s * (A.T @ e_u) + C.T @ e_u)``
    and ``ds = sum_j e_u * (A @ e_v)``; ``[A; C]`` is stacked so that ``U``'s side is
    one product per head. Scratch: the tables, ``num``, ``den``, ``[A; C]`` and one
    more table, per chunk.
    """
    B, H, n2, d = q.shape
    N, chunk = k.shape[2], _chunk_size(q, k)
    q3, k3, s3 = q.reshape(B * H, n2, d), k.reshape(B * H, N, d), s.reshape(B * H, 1, N)
    dq, dk = torch.empty_like(q3), torch.empty_like(k3)
    ds = torch.empty_like(s3)
    tables = q3.new_empty(chunk * H, n2, N)
    num, den = q3.new_empty(chunk * H, n, n), q3.new_empty(chunk * H, n, n)
    ac = q3.new_empty(chunk * H, n2, n)  # [A; C]
    x = q3.new_empty(chunk * H, n2, N)  # [A @ e_v; C @ e_v], then [A.T @ e_u; C.T @ e_u]
    for b0, b1 in _chunks(B, chunk):
        rows, m = slice(b0 * H, b1 * H), (b1 - b0) * H
        e = _tables_(tables[:m], q3[rows], k3[rows], scale * LOG2_E)
        e_u, e_v = e[:, :n], e[:, n:]
        xm = x[:m]
        ratio, _ = _ratio_(num[:m], den[:m], e_u, e_v.mT, s3[rows], xm[:, :n])
        a, c = ac[:m, :n], ac[:m, n:]
        torch.div(grad[b0:b1, None], den[:m].view(b1 - b0, H, n, n), out=a.view(-1, H, n, n))
        torch.mul(a, ratio, out=c).neg_()
        torch.bmm(ac[:m], e_v, out=xm)  # A @ e_v, then C @ e_v
        x_a, x_c = xm[:, :n], xm[:, n:]
        x_a.mul_(e_u)
        torch.sum(x_a, dim=1, keepdim=True, out=ds[rows])
        d_u = x_c.mul_(e_u).addcmul_(x_a, s3[rows])  # d loss / d U
        dq[rows, :n] = torch.bmm(d_u, k3[rows]).mul_(scale)
        dk_rows = torch.bmm(d_u.mT, q3[rows, :n])
        # V's side, into the same buffer: A.T @ e_u, then C.T @ e_u
        y_a, y_c = xm[:, :n], xm[:, n:]
        torch.bmm(a.mT, e_u, out=y_a)
        torch.bmm(c.mT, e_u, out=y_c)
        d_v = y_c.mul_(e_v).addcmul_(y_a.mul_(e_v), s3[rows])  # d loss / d V
        dq[rows, n:] = torch.bmm(d_v, k3[rows]).mul_(scale)
        dk[rows] = dk_rows.baddbmm_(d_v.mT, q3[rows, n:]).mul_(scale)
    return dq.view(B, H, n2, d), dk.view(B, H, N, d), ds.view(B, H, N)


@torch.library.custom_op("braindecode_pars::pair_attention", mutates_args=())
def pair_attention(
    q: torch.Tensor, k: torch.Tensor, s: torch.Tensor, n: int, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``theta[b, j, k] = sum_h sum_m softmax_m(U[j, m] + V[k, m]) s[h, m]`` from factor tables.

    ``q`` (batch, H, 2n, d) holds per head the rows ``u_1..u_n`` then ``v_1..v_n``,
    ``k`` (batch, H, N, d) the keys, ``s`` (batch, H, N) the scalar value of each key
    and head, and the logits are ``[U; V] = scale * q @ k.T``. Per head, with
    ``e_u = exp(U - rowmax)`` and ``e_v = exp(V - rowmax)``, ``den = e_u @ e_v.T`` and
    ``num = (e_u * s) @ e_v.T``: two (n x N) @ (N x n) products, and no (n x n x N)
    tensor. The windows are taken in chunks (see :func:`_chunk_size`), and the
    backward pass recomputes the tables rather than keep them: it keeps only ``q``,
    ``k`` and ``s``.

    Registered as a ``torch.library`` operator with its backward, so ``torch.compile``
    traces it as one opaque node (no graph break) and, with no host synchronisation
    in it, CUDA graphs can capture it.

    Returns ``theta`` (batch, n, n), the sum over heads, and ``bad`` (batch, H, n, n),
    True where a pair's denominator underflowed (see :func:`_underflow_threshold`):
    such a pair contributes 0 here, nor to the gradient, and the caller adds it
    exactly.
    """
    return _pair_attention(q, k, s, n, scale)


@pair_attention.register_fake
def _(q, k, s, n, scale):
    B, H = q.shape[:2]
    return q.new_empty(B, n, n), q.new_empty(B, H, n, n, dtype=torch.bool)


@torch.library.custom_op("braindecode_pars::pair_attention_backward", mutates_args=())
def pair_attention_backward(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    s: torch.Tensor,
    n: int,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of :func:`pair_attention`'s ``theta`` with respect to ``q``, ``k``, ``s``."""
    return _pair_attention_backward(grad.contiguous(), q, k, s, n, scale)


@pair_attention_backward.register_fake
def _(grad, q, k, s, n, scale):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(s)


def _setup_context(ctx, inputs, output):
    q, k, s, n, scale = inputs
    ctx.save_for_backward(q, k, s)
    ctx.n, ctx.scale = n, scale
    ctx.mark_non_differentiable(output[1])


def _backward(ctx, grad, _grad_bad):
    q, k, s = ctx.saved_tensors
    dq, dk, ds = pair_attention_backward(grad, q, k, s, ctx.n, ctx.scale)
    return dq, dk, ds, None, None


pair_attention.register_autograd(_backward, setup_context=_setup_context)


def _pair_attention_flops(q_shape, k_shape, s_shape, n, scale, *args, **kwargs):
    """Multiply-adds times 2 of :func:`pair_attention`: the logits, ``num`` and ``den``."""
    B, H, n2, d = q_shape
    N = k_shape[2]
    return 2 * B * H * (n2 * N * d + 2 * n * n * N)


def _pair_attention_backward_flops(grad_shape, q_shape, k_shape, *args, **kwargs):
    """The tables, ``num`` and ``den`` recomputed, four (n x n) @ (n x N) products,
    ``dq`` and ``dk``."""
    B, H, n2, d = q_shape
    N, n = k_shape[2], n2 // 2
    return 2 * B * H * (n2 * N * d + 6 * n * n * N + 2 * n2 * N * d)


register_flop_formula(torch.ops.braindecode_pars.pair_attention)(_pair_attention_flops)
register_flop_formula(torch.ops.braindecode_pars.pair_attention_backward)(
    _pair_attention_backward_flops
)


def exact_pairs(q, k, s, bad, n, scale, size=None):
    """The pairs whose denominators underflowed (``bad``), computed directly.

    At most ``size`` pairs (:data:`FALLBACK_PAIRS`): their positions are found with
    ``torch.nonzero_static``, a fixed-size result, so the step keeps static shapes and
    no host synchronisation. Returns the flat indices ``(batch, j, k)`` of the slots,
    their exact per-head values (0 in empty slots) and the number of underflowing
    pairs beyond ``size`` (a 0-d tensor on the device).
    """
    B, H, n2, d = q.shape
    N = k.shape[2]
    bad = bad.view(-1)  # (batch * H * n * n)
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
