"""The pair operator's fallback as two Triton kernels, one program per slot.

:func:`~braindecode_pars.models.pair.tables._pair_attention_op` recomputes the pair-heads
whose factor tables underflow directly from their logits, in a static number of slots
(:func:`~braindecode_pars.models.pair.tables._fallback_slots`). In torch operations
that takes about 30 small kernels each way, whatever the number of pair-heads that
underflowed (usually none): on a GPU, launched one after the other from Python, their
launches leave the GPU waiting. Here each pass is one kernel: a program per slot,
which returns at once for an empty slot and otherwise computes its pair-head's softmax
over the keys and adds its terms (:func:`_forward_` into ``theta``; :func:`_backward_`
into ``dq``, ``dk`` and ``ds``) with atomic additions, as ``index_add_`` does on a GPU.

The arithmetic is the torch path's (``_SlotPairs`` and ``_slot_gradients_``), in the
inputs' dtype (float32, or float64 with float64 tables), with products summed
elementwise (no tensor-core product, so no TF32). Which of the two paths runs, the torch
operations or these kernels, is chosen in :mod:`~braindecode_pars.models.pair.kernels`
(:func:`~braindecode_pars.models.pair.kernels._use_triton`).
"""

from __future__ import annotations

from braindecode_pars.models.pair.kernels import _on_device, tl, triton

if triton is not None:

    @triton.jit
    def _softmax(f, q_ptr, k_ptr, s_ptr, n, N, d, scale, BLOCK_N: tl.constexpr,
                 BLOCK_D: tl.constexpr):  # fmt: skip
        """Pair-head ``f``'s rows of q (u_j, v_k), query, keys, softmax ``p`` over the
        keys, values and ``value = sum p * values``."""
        bh = f // (n * n)
        jk = f % (n * n)
        row_u = bh * 2 * n + jk // n
        row_v = bh * 2 * n + n + jk % n
        offs_d = tl.arange(0, BLOCK_D)
        offs_n = tl.arange(0, BLOCK_N)
        dmask = offs_d < d
        nmask = offs_n < N
        query = tl.load(q_ptr + row_u * d + offs_d, mask=dmask, other=0.0)
        query += tl.load(q_ptr + row_v * d + offs_d, mask=dmask, other=0.0)
        kmask = nmask[:, None] & dmask[None, :]
        keys = tl.load(k_ptr + (bh * N + offs_n[:, None]) * d + offs_d[None, :], mask=kmask,
                       other=0.0)  # fmt: skip
        logits = tl.sum(keys * query[None, :], axis=1) * scale
        logits = tl.where(nmask, logits, -float("inf"))
        e = tl.exp(logits - tl.max(logits, axis=0))
        p = e / tl.sum(e, axis=0)  # 0 at the padding keys
        values = tl.load(s_ptr + bh * N + offs_n, mask=nmask, other=0.0)
        return row_u, row_v, query, keys, p, values, tl.sum(p * values, axis=0)

    @triton.jit
    def _forward_kernel(
        slots_ptr, q_ptr, k_ptr, s_ptr, theta_ptr, numel, n, N, d, H, scale,
        BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        f = tl.load(slots_ptr + tl.program_id(0))
        if f < numel:  # an empty slot holds numel
            _, _, _, _, _, _, value = _softmax(
                f, q_ptr, k_ptr, s_ptr, n, N, d, scale, BLOCK_N, BLOCK_D
            )
            bh, jk = f // (n * n), f % (n * n)
            tl.atomic_add(theta_ptr + (bh // H) * n * n + jk, value)

    @triton.jit
    def _backward_kernel(
        slots_ptr, q_ptr, k_ptr, s_ptr, grad_ptr, dq_ptr, dk_ptr, ds_ptr, numel, n, N, d, H,
        scale, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        f = tl.load(slots_ptr + tl.program_id(0))
        if f < numel:
            row_u, row_v, query, keys, p, values, value = _softmax(
                f, q_ptr, k_ptr, s_ptr, n, N, d, scale, BLOCK_N, BLOCK_D
            )
            bh, jk = f // (n * n), f % (n * n)
            offs_d = tl.arange(0, BLOCK_D)
            offs_n = tl.arange(0, BLOCK_N)
            dmask = offs_d < d
            nmask = offs_n < N
            gp = p * tl.load(grad_ptr + (bh // H) * n * n + jk)  # d loss / d s
            tl.atomic_add(ds_ptr + bh * N + offs_n, gp, mask=nmask)
            dlogit = gp * (values - value) * scale  # d loss / d logit, scaled
            dquery = tl.sum(dlogit[:, None] * keys, axis=0)
            tl.atomic_add(dq_ptr + row_u * d + offs_d, dquery, mask=dmask)
            tl.atomic_add(dq_ptr + row_v * d + offs_d, dquery, mask=dmask)
            dk_rows = dk_ptr + (bh * N + offs_n[:, None]) * d + offs_d[None, :]
            kmask = nmask[:, None] & dmask[None, :]
            tl.atomic_add(dk_rows, dlogit[:, None] * query[None, :], mask=kmask)


def _blocks(N, d):
    return dict(BLOCK_N=triton.next_power_of_2(N), BLOCK_D=triton.next_power_of_2(d))


def _forward_(theta, slots, q3, k3, s3, n, H, scale):
    """Add the fallback slots' pair-heads to ``theta`` (batch, n, n), in place.

    ``slots``: the flat indices of the underflowing pair-heads (``B * H * n * n`` in an
    empty slot); ``q3`` (B * H, 2n, d), ``k3`` (B * H, N, d), ``s3`` (B * H, 1, N): the
    operator's inputs.
    """
    BH, _, d = q3.shape
    N = k3.shape[1]
    with _on_device(q3):
        _forward_kernel[(slots.numel(),)](
            slots, q3.contiguous(), k3.contiguous(), s3.contiguous(), theta, BH * n * n, n,
            N, d, H, scale, **_blocks(N, d),
        )  # fmt: skip
    return theta


def _backward_(dq, dk, ds, grad, slots, q3, k3, s3, n, H, scale):
    """Add the fallback slots' gradients to ``dq`` (B * H, 2n, d), ``dk`` (B * H, N, d)
    and ``ds`` (B * H, 1, N), in place (all contiguous); ``grad``: d loss / d theta."""
    BH, _, d = q3.shape
    N = k3.shape[1]
    with _on_device(q3):
        _backward_kernel[(slots.numel(),)](
            slots, q3.contiguous(), k3.contiguous(), s3.contiguous(), grad.contiguous(), dq,
            dk, ds, BH * n * n, n, N, d, H, scale, **_blocks(N, d),
        )  # fmt: skip
