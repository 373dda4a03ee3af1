"""The pair operator fused: one Triton kernel forward, one backward.

:func:`~braindecode_pars.models.pair.tables._pair_attention_op` runs the factor tables
as torch operations: about 66 kernel-launching calls forward and 92 backward on an
accelerator, each dispatched from Python even inside a compiled step (a custom operator
is opaque to the compiler). :func:`_pair_attention_fused_op` computes the same ``theta``
with one kernel each way, one program per tile:

- **forward**, a program per window, its heads in turn (so ``theta``, the sum over
  heads, is written once, without atomic additions, and the same from run to run): the
  logits ``[U; V] = scale * q @ k.T`` of a head, the tables ``e_u``, ``e_v`` (each row
  shifted by its maximum), ``den = e_u @ e_v.T`` and ``num = (e_u * s) @ e_v.T``, their
  ratio, all in registers;
- **backward**, a program per (window, head): the same tables recomputed from ``q`` and
  ``k`` (nothing of size n x N is kept between the passes), then
  ``dU = e_u * (s * (A @ e_v) + C @ e_v)``, ``dV``, ``ds``, ``dq = scale * [dU; dV] @ k``
  and ``dk = scale * [dU; dV].T @ [q_u; q_v]``, the formulas of the torch operator's
  backward (``A = dtheta / den``, ``C = -A * ratio``).

**The fallback folded in.** A pair-head whose denominator underflows (below
:func:`~braindecode_pars.models.pair.tables._underflow_threshold`) is computed
directly from its logits ``U[j, m] + V[k, m]`` inside the same program, row ``j`` at a
time, forward and backward, only in a tile that has one (a branch per tile; usually
none). There is no slot limit: every underflowing pair-head is computed exactly, so the
count beyond the slots is always 0.

**Inputs as they come.** ``q``, ``k`` and ``s`` are read through their strides in their
own dtype (bf16 from the projections under autocast, float32, float64): no float32
copy is made before the operator, and the gradients are written in the inputs' dtypes.
The arithmetic is float32, or float64 when ``double`` (float64 tables), with every
product in IEEE arithmetic (``tl.dot(..., input_precision="ieee")``: no TF32, whatever
the process's matmul precision), the logits scaled by ``log2(e)`` and exponentiated by
``exp2`` as the torch operator does.

The kernels run where Triton does (a CUDA device, or CPU tensors under Triton's
interpreter, ``TRITON_INTERPRET=1``, how the tests check them);
:func:`~braindecode_pars.models.pair.kernels._triton_runs_here` says where. The decoder
takes them when its ``kernel`` asks, for the tiles they take
(:func:`~braindecode_pars.models.pair.kernels.resolve_decoder_kernel`).
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch
from torch.utils.flop_counter import register_flop_formula

from braindecode_pars.models.pair.kernels import _blocks, _on_device, tl, triton

if triton is not None:

    @triton.jit
    def _head_tables(q_ptr, k_ptr, s_ptr, b, h, sq, sk, ss, n, N, d, scale2,
                     ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_D: tl.constexpr):  # fmt: skip
        """One (window, head) tile: its rows of ``q`` (``q_u``, ``q_v``), keys, values,
        logits ``U``, ``V`` in log2 units (``-inf`` at the padding keys) and tables."""
        offs_j = tl.arange(0, BLOCK_M)
        offs_m = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        jmask, mmask, dmask = offs_j < n, offs_m < N, offs_d < d
        h = b * 0 + h  # int64, as b: offsets past 2**31 elements stay exact
        q_head = q_ptr + b * sq[0] + h * sq[1]
        qmask = jmask[:, None] & dmask[None, :]
        rows = offs_j[:, None] * sq[3] + offs_d[None, :] * sq[4]
        qu = tl.load(q_head + rows, mask=qmask, other=0.0).to(ACC)
        qv = tl.load(q_head + sq[2] + rows, mask=qmask, other=0.0).to(ACC)
        k_head = k_ptr + b * sk[0] + h * sk[1]
        kmask = mmask[:, None] & dmask[None, :]
        keys = tl.load(k_head + offs_m[:, None] * sk[2] + offs_d[None, :] * sk[3], mask=kmask,
                       other=0.0).to(ACC)  # fmt: skip
        values = tl.load(s_ptr + b * ss[0] + h * ss[1] + offs_m * ss[2], mask=mmask,
                         other=0.0).to(ACC)  # fmt: skip
        u = tl.dot(qu, tl.trans(keys), input_precision="ieee", out_dtype=ACC) * scale2
        v = tl.dot(qv, tl.trans(keys), input_precision="ieee", out_dtype=ACC) * scale2
        u = tl.where(mmask[None, :], u, -float("inf"))
        v = tl.where(mmask[None, :], v, -float("inf"))
        e_u = tl.exp2(u - tl.max(u, axis=1)[:, None])  # every entry <= 1, 0 at padding
        e_v = tl.exp2(v - tl.max(v, axis=1)[:, None])
        return qu, qv, keys, values, u, v, e_u, e_v

    @triton.jit
    def _direct_row(u, v, values, j, BLOCK_M: tl.constexpr):
        """Pair-heads ``(j, k)`` for every ``k``, directly from their logits: the softmax
        ``p`` (BLOCK_M x BLOCK_N) over the keys of ``U[j] + V[k]`` and its value."""
        offs_j = tl.arange(0, BLOCK_M)
        u_j = tl.sum(tl.where(offs_j[:, None] == j, u, 0.0), axis=0)  # row j of U
        logits = u_j[None, :] + v
        p = tl.exp2(logits - tl.max(logits, axis=1)[:, None])
        p = p / tl.sum(p, axis=1)[:, None]
        return p, tl.sum(p * values[None, :], axis=1)

    @triton.jit
    def _ratios(e_u, e_v, values, pmask, threshold, ACC: tl.constexpr):
        """A tile's ``den = e_u @ e_v.T``, which pairs underflow (``den`` below the
        threshold; a NaN ``den`` is not one: its NaN ratio shows) and ``num / den``
        (0 where they do)."""
        den = tl.dot(e_u, tl.trans(e_v), input_precision="ieee", out_dtype=ACC)
        num = tl.dot(e_u * values[None, :], tl.trans(e_v), input_precision="ieee",
                     out_dtype=ACC)  # fmt: skip
        bad = (den < threshold) & pmask
        return den, bad, tl.where(bad, 0.0, num / den)

    @triton.jit
    def _forward_kernel(
        q_ptr, k_ptr, s_ptr, theta_ptr, counts_ptr, gap_ptr, constants_ptr,
        sq0, sq1, sq2, sq3, sq4, sk0, sk1, sk2, sk3, ss0, ss1, ss2,
        n, N, d, H: tl.constexpr,
        ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        b = tl.program_id(0).to(tl.int64)
        sq, sk, ss = (sq0, sq1, sq2, sq3, sq4), (sk0, sk1, sk2, sk3), (ss0, ss1, ss2)
        scale2, threshold = tl.load(constants_ptr), tl.load(constants_ptr + 2)
        offs_j = tl.arange(0, BLOCK_M)
        jmask = offs_j < n
        pmask = jmask[:, None] & jmask[None, :]
        theta = tl.zeros((BLOCK_M, BLOCK_M), dtype=ACC)
        n_bad = tl.zeros((), dtype=tl.int32)
        least = tl.full((), float("inf"), dtype=ACC)
        for h in range(H):
            qu, qv, keys, values, u, v, e_u, e_v = _head_tables(
                q_ptr, k_ptr, s_ptr, b, h, sq, sk, ss, n, N, d, scale2, ACC, BLOCK_M,
                BLOCK_N, BLOCK_D,
            )  # fmt: skip
            den, bad, ratio = _ratios(e_u, e_v, values, pmask, threshold, ACC)
            least = tl.minimum(least, tl.min(tl.where(pmask, den, float("inf")), axis=None))
            head_bad = tl.sum(bad.to(tl.int32), axis=None)
            if head_bad > 0:  # the fallback, folded in: the tile's underflowing pairs
                for j in range(BLOCK_M):  # rows past n hold no bad pair
                    p, value = _direct_row(u, v, values, j, BLOCK_M)
                    at = bad & (offs_j[:, None] == j)
                    ratio = tl.where(at, value[None, :], ratio)
            theta += ratio
            n_bad += head_bad
        at = theta_ptr + b * n * n + offs_j[:, None] * n + offs_j[None, :]
        tl.store(at, theta, mask=pmask)
        tl.atomic_add(counts_ptr, n_bad.to(tl.int64))
        # -log(smallest den) in nats, at least 0 (gap's initial value): the largest over
        # the windows is the call's gap
        tl.atomic_max(gap_ptr, (-tl.log(least)).to(tl.float32))

    @triton.jit
    def _backward_kernel(
        q_ptr, k_ptr, s_ptr, grad_ptr, dq_ptr, dk_ptr, ds_ptr, constants_ptr,
        sq0, sq1, sq2, sq3, sq4, sk0, sk1, sk2, sk3, ss0, ss1, ss2,
        n, N, d, H: tl.constexpr,
        ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        bh = tl.program_id(0).to(tl.int64)
        b, h = bh // H, bh % H
        sq, sk, ss = (sq0, sq1, sq2, sq3, sq4), (sk0, sk1, sk2, sk3), (ss0, ss1, ss2)
        scale2, scale = tl.load(constants_ptr), tl.load(constants_ptr + 1)
        threshold = tl.load(constants_ptr + 2)
        qu, qv, keys, values, u, v, e_u, e_v = _head_tables(
            q_ptr, k_ptr, s_ptr, b, h, sq, sk, ss, n, N, d, scale2, ACC, BLOCK_M, BLOCK_N,
            BLOCK_D,
        )  # fmt: skip
        offs_j = tl.arange(0, BLOCK_M)
        offs_m = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        jmask, mmask, dmask = offs_j < n, offs_m < N, offs_d < d
        pmask = jmask[:, None] & jmask[None, :]
        den, bad, ratio = _ratios(e_u, e_v, values, pmask, threshold, ACC)
        grad = tl.load(grad_ptr + b * n * n + offs_j[:, None] * n + offs_j[None, :],
                       mask=pmask, other=0.0).to(ACC)  # fmt: skip
        a = tl.where(bad | (~pmask), 0.0, grad / den)  # dtheta / den
        c = -a * ratio
        x_a = tl.dot(a, e_v, input_precision="ieee", out_dtype=ACC) * e_u
        x_c = tl.dot(c, e_v, input_precision="ieee", out_dtype=ACC) * e_u
        y_a = tl.dot(tl.trans(a), e_u, input_precision="ieee", out_dtype=ACC) * e_v
        y_c = tl.dot(tl.trans(c), e_u, input_precision="ieee", out_dtype=ACC) * e_v
        ds = tl.sum(x_a, axis=0)
        d_u = x_a * values[None, :] + x_c  # d loss / d U (natural logits)
        d_v = y_a * values[None, :] + y_c  # d loss / d V
        if tl.sum(bad.to(tl.int32), axis=None) > 0:  # the folded fallback's gradients
            for j in range(BLOCK_M):  # rows past n hold no bad pair
                p, value = _direct_row(u, v, values, j, BLOCK_M)
                row = offs_j == j
                g_j = tl.sum(tl.where(row[:, None], grad, 0.0), axis=0)  # grad[j, k]
                bad_j = tl.sum(tl.where(row[:, None], bad.to(tl.int32), 0), axis=0) > 0
                gp = tl.where(bad_j[:, None], p * g_j[:, None], 0.0)  # d loss / d s
                ds += tl.sum(gp, axis=0)
                dlogit = gp * (values[None, :] - value[:, None])
                d_v += dlogit
                d_u = tl.where(row[:, None], d_u + tl.sum(dlogit, axis=0)[None, :], d_u)
        d_u = tl.where(mmask[None, :], d_u, 0.0)
        d_v = tl.where(mmask[None, :], d_v, 0.0)
        dq_u = tl.dot(d_u, keys, input_precision="ieee", out_dtype=ACC) * scale
        dq_v = tl.dot(d_v, keys, input_precision="ieee", out_dtype=ACC) * scale
        dk = tl.dot(tl.trans(d_u), qu, input_precision="ieee", out_dtype=ACC)
        dk = (dk + tl.dot(tl.trans(d_v), qv, input_precision="ieee", out_dtype=ACC)) * scale
        # dq, dk and ds are contiguous, in the layout (batch, H, 2, n, d), (batch, H, N, d)
        # and (batch, H, N), in the inputs' dtypes
        qmask = jmask[:, None] & dmask[None, :]
        dq_head = dq_ptr + bh * 2 * n * d + offs_j[:, None] * d + offs_d[None, :]
        tl.store(dq_head, dq_u.to(dq_ptr.dtype.element_ty), mask=qmask)
        tl.store(dq_head + n * d, dq_v.to(dq_ptr.dtype.element_ty), mask=qmask)
        dk_head = dk_ptr + bh * N * d + offs_m[:, None] * d + offs_d[None, :]
        tl.store(dk_head, dk.to(dk_ptr.dtype.element_ty), mask=mmask[:, None] & dmask[None, :])
        tl.store(ds_ptr + bh * N + offs_m, ds.to(ds_ptr.dtype.element_ty), mask=mmask)


def _acc(double):
    return tl.float64 if double else tl.float32


#: The kernels' constants by (device, scale, dtype): made once, so that a call copies
#: nothing to the device (a CUDA graph replays it as it is).
_CONSTANTS = {}


def _constants(device, scale, double):
    """``[scale * log2(e), scale, underflow threshold]`` on ``device`` in the arithmetic's
    dtype. A tensor, not kernel arguments: Triton passes a Python float as float32, which
    would round float64's scale and turn its threshold (about 1.5e-154) into 0."""
    from braindecode_pars.models.pair.tables import _underflow_threshold

    dtype = torch.float64 if double else torch.float32
    key = (str(device), float(scale), double)
    if key not in _CONSTANTS:
        values = [scale * math.log2(math.e), scale, _underflow_threshold(dtype)]
        _CONSTANTS[key] = torch.tensor(values, dtype=dtype, device=device)
    return _CONSTANTS[key]


def _check(q, k, s):
    """``q`` (batch, H, 2, n, d), ``k`` (batch, H, N, d) and ``s`` (batch, H, N)."""
    if (
        q.dim() != 5
        or q.shape[2] != 2
        or k.dim() != 4
        or k.shape[:2] != q.shape[:2]
        or k.shape[3] != q.shape[4]
        or s.shape != k.shape[:3]
    ):
        raise ValueError(
            "pair_attention_fused takes q (batch, H, 2, n, d), k (batch, H, N, d) and "
            f"s (batch, H, N), but got {tuple(q.shape)}, {tuple(k.shape)} and "
            f"{tuple(s.shape)}."
        )


@torch.library.custom_op("braindecode_pars::pair_attention_fused", mutates_args=())
def _pair_attention_fused_op(
    q: torch.Tensor, k: torch.Tensor, s: torch.Tensor, scale: float, double: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`~braindecode_pars.models.pair.tables._pair_attention_op`'s ``theta``,
    ``counts`` and ``gap`` from one Triton kernel (see the module's text).

    ``q`` (batch, H, 2, n, d) holds per head the rows ``u_1..u_n`` then ``v_1..v_n``,
    ``k`` (batch, H, N, d) the keys and ``s`` (batch, H, N) their values, in any strides
    and floating dtype; the logits are ``scale * q @ k.T``. ``double``: float64
    arithmetic (else float32). Returns ``theta`` (batch, n, n) in the arithmetic's
    dtype, ``counts`` = [pair-heads whose denominators underflowed (each computed
    directly), 0] and ``gap`` (nats, at least 0, float32) as the torch operator
    defines them. Runs where Triton does
    (:func:`~braindecode_pars.models.pair.kernels._triton_runs_here`).
    """
    return _forward(q, k, s, scale, double)


@contextlib.contextmanager
def _observed(wrap):
    """For the block, the operator's bodies and its kernels' launches run as
    ``wrap(name, body)`` returns them: ``"forward"`` and ``"backward"`` (the operator's
    arguments), ``"forward launch"`` and ``"backward launch"`` (a launch's grid and
    arguments): how the lab counts what the operator dispatches apart from the rest of a
    step (:doc:`/benchmarks/speed`)."""
    global _forward, _backward_body, _launch
    saved = _forward, _backward_body, _launch
    kernels = (("forward", _forward_kernel), ("backward", _backward_kernel)) if triton else ()
    launches = {
        id(kernel): wrap(f"{which} launch", functools.partial(saved[2], kernel))
        for which, kernel in kernels
    }
    _forward = wrap("forward", saved[0])
    _backward_body = wrap("backward", saved[1])
    _launch = lambda kernel, grid, *args, **kwargs: launches[id(kernel)](grid, *args, **kwargs)  # noqa: E731
    try:
        yield
    finally:
        _forward, _backward_body, _launch = saved


def _launch(kernel, grid, *args, **kwargs):
    """``kernel[grid](*args, **kwargs)`` on ``args[0]``'s device."""
    with _on_device(args[0]):
        kernel[grid](*args, **kwargs)


def _forward(q, k, s, scale, double):
    """The body of :func:`_pair_attention_fused_op`."""
    _check(q, k, s)
    B, H, _, n, d = q.shape
    N = k.shape[2]
    acc = torch.float64 if double else torch.float32
    theta = q.new_empty(B, n, n, dtype=acc)
    counts = torch.zeros(2, dtype=torch.long, device=q.device)
    gap = torch.zeros((), dtype=torch.float32, device=q.device)
    blocks, warps = _blocks(n, N, d, double)
    _launch(
        _forward_kernel, (B,), q, k, s, theta, counts, gap, _constants(q.device, scale, double),
        *q.stride(), *k.stride(), *s.stride(), n, N, d, H=H, ACC=_acc(double),
        num_warps=warps, **blocks,
    )  # fmt: skip
    return theta, counts, gap


@_pair_attention_fused_op.register_fake
def _(q, k, s, scale, double):
    acc = torch.float64 if double else torch.float32
    return (
        q.new_empty(q.shape[0], q.shape[3], q.shape[3], dtype=acc),
        q.new_empty(2, dtype=torch.long),
        q.new_empty((), dtype=torch.float32),
    )


@torch.library.custom_op("braindecode_pars::pair_attention_fused_backward", mutates_args=())
def _pair_attention_fused_backward_op(
    grad: torch.Tensor, q: torch.Tensor, k: torch.Tensor, s: torch.Tensor, scale: float,
    double: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """Gradients of :func:`_pair_attention_fused_op`'s ``theta`` with respect to ``q``, ``k``
    and ``s``, from one Triton kernel: contiguous, in the inputs' dtypes."""
    return _backward_body(grad, q, k, s, scale, double)


def _backward_body(grad, q, k, s, scale, double):
    """The body of :func:`_pair_attention_fused_backward_op`."""
    B, H, _, n, d = q.shape
    N = k.shape[2]
    grad = grad.contiguous()
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    ds = torch.empty(s.shape, dtype=s.dtype, device=s.device)
    blocks, warps = _blocks(n, N, d, double)
    _launch(
        _backward_kernel, (B * H,), q, k, s, grad, dq, dk, ds,
        _constants(q.device, scale, double), *q.stride(), *k.stride(), *s.stride(), n, N, d,
        H=H, ACC=_acc(double), num_warps=warps, **blocks,
    )  # fmt: skip
    return dq, dk, ds


@_pair_attention_fused_backward_op.register_fake
def _(grad, q, k, s, scale, double):
    return (
        torch.empty(q.shape, dtype=q.dtype, device=q.device),
        torch.empty(k.shape, dtype=k.dtype, device=k.device),
        torch.empty(s.shape, dtype=s.dtype, device=s.device),
    )


def _setup_context(ctx, inputs, output):
    q, k, s, scale, double = inputs
    ctx.save_for_backward(q, k, s)
    ctx.scale, ctx.double = scale, double
    ctx.mark_non_differentiable(output[1], output[2])
    ctx.set_materialize_grads(False)


def _backward(ctx, grad, *_):
    q, k, s = ctx.saved_tensors
    dq, dk, ds = _pair_attention_fused_backward_op(grad, q, k, s, ctx.scale, ctx.double)
    return dq, dk, ds, None, None


_pair_attention_fused_op.register_autograd(_backward, setup_context=_setup_context)


def _fused_flops(q_shape, k_shape, *args, **kwargs):
    """Multiply-adds times 2 of the forward kernel: the logits, ``num`` and ``den``
    (the folded fallback's rare rows not counted)."""
    B, H, _, n, d = q_shape
    N, n2 = k_shape[2], 2 * n
    return 2 * B * H * (n2 * N * d + 2 * n * n * N)


def _fused_backward_flops(grad_shape, q_shape, k_shape, *args, **kwargs):
    """The forward's products recomputed, four (n x n) @ (n x N) products, ``dq`` and ``dk``."""
    B, H, _, n, d = q_shape
    N, n2 = k_shape[2], 2 * n
    return 2 * B * H * (n2 * N * d + 2 * n * n * N + 4 * n * n * N + 2 * n2 * N * d)


register_flop_formula(torch.ops.braindecode_pars.pair_attention_fused)(_fused_flops)
register_flop_formula(torch.ops.braindecode_pars.pair_attention_fused_backward)(
    _fused_backward_flops
)
