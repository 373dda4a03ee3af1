"""The pair operator's fallback as two Triton kernels, one program per slot.

:func:`~braindecode_pars.models.pair.attention.pair_attention` recomputes the pair-heads
whose factor tables underflow directly from their logits, in a static number of slots
(:func:`~braindecode_pars.models.pair.attention.fallback_slots`). In torch operations
that takes about 30 small kernels each way, whatever the number of pair-heads that
underflowed (usually none): on a GPU, launched one after the other from Python, their
launches leave the GPU waiting. Here each pass is one kernel: a program per slot,
which returns at once for an empty slot and otherwise computes its pair-head's softmax
over the keys and adds its terms (:func:`forward_` into ``theta``; :func:`backward_`
into ``dq``, ``dk`` and ``ds``) with atomic additions, as ``index_add_`` does on a GPU.

The arithmetic is the torch path's (``_SlotPairs`` and ``_slot_gradients_``), in the
inputs' dtype (float32, or float64 with float64 tables), with products summed
elementwise (no tensor-core product, so no TF32). :data:`KERNELS` are the two paths;
the operator takes the one its caller names (:data:`FALLBACKS`:
``CrossAttentionPairDecoder(fallback=...)``, ``PARS(decoder_fallback=...)``), and for
"auto" the one :func:`fallback_kernel` chose for a block of code, else the device's
default (its ``"fallback_kernel"`` in
:data:`~braindecode_pars._util.device_defaults._DEVICE_DEFAULTS`). The Triton path
runs where Triton and the device allow (:func:`runs_here`): CUDA, or any device's
tensors under Triton's interpreter (``TRITON_INTERPRET=1``, how the tests check it on a
CPU); elsewhere the torch path runs.
"""

from __future__ import annotations

import contextlib
import os

import torch

from braindecode_pars._util.checks import check_option
from braindecode_pars._util.device_defaults import device_default

#: The fallback's implementations: "torch" (torch operations, every device) and
#: "triton" (two kernels, :func:`runs_here`).
KERNELS = ("torch", "triton")

#: What a caller may ask the operator for: "auto" (:func:`resolve`) or one of :data:`KERNELS`.
FALLBACKS = ("auto", *KERNELS)

#: The kernel a :func:`fallback_kernel` block gives "auto" (None outside every block).
_chosen = {"kernel": None}

try:  # Triton ships with torch's CUDA wheels on Linux; elsewhere the torch path serves
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - a torch without Triton
    triton = tl = None


def chosen_kernel(device="cpu"):
    """The kernel "auto" takes now on ``device`` (a device or its type): one of :data:`KERNELS`."""
    return _chosen["kernel"] or device_default("fallback_kernel", device)


@contextlib.contextmanager
def fallback_kernel(kernel):
    """Run the operator's fallback with ``kernel`` (one of :data:`KERNELS`) inside the
    block, in this process, wherever its caller asked for "auto" (the default of
    ``CrossAttentionPairDecoder(fallback=...)``); a caller that names a kernel keeps it.
    The previous choice comes back on exit. "triton" is taken only where
    :func:`runs_here` (elsewhere the torch path runs)."""
    check_option("kernel", kernel, KERNELS)
    before = _chosen["kernel"]
    _chosen["kernel"] = kernel
    try:
        yield
    finally:
        _chosen["kernel"] = before


def resolve(fallback, x):
    """The kernel, one of :data:`KERNELS`, that ``fallback`` (one of :data:`FALLBACKS`)
    names for the operator on ``x``'s device: "auto" is the :func:`fallback_kernel`
    block's choice, else the device's default
    (:func:`~braindecode_pars._util.device_defaults.device_default`)."""
    check_option("fallback", fallback, FALLBACKS)
    return chosen_kernel(x.device) if fallback == "auto" else fallback


def runs_here(x):
    """Whether the Triton kernels run on ``x``'s device: Triton is there, and ``x`` is
    on a CUDA device or Triton's interpreter is on (``TRITON_INTERPRET=1``)."""
    if triton is None:
        return False
    return x.device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def use_triton(x, fallback="auto"):
    """Whether the operator's fallback on ``x`` takes the Triton kernels now, its caller
    having asked for ``fallback`` (one of :data:`FALLBACKS`)."""
    return resolve(fallback, x) == "triton" and runs_here(x)


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


def _on_device(x):
    """Triton launches on the current CUDA device: make it ``x``'s (a process may hold
    tensors on another GPU than its current one)."""
    if x.device.type == "cuda":
        return torch.cuda.device(x.device)
    return contextlib.nullcontext()


def _blocks(N, d):
    return dict(BLOCK_N=triton.next_power_of_2(N), BLOCK_D=triton.next_power_of_2(d))


def forward_(theta, slots, q3, k3, s3, n, H, scale):
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


def backward_(dq, dk, ds, grad, slots, q3, k3, s3, n, H, scale):
    """Add the fallback slots' gradients to ``dq`` (B * H, 2n, d), ``dk`` (B * H, N, d)
    and ``ds`` (B * H, 1, N), in place (all contiguous); ``grad``: d loss / d theta."""
    BH, _, d = q3.shape
    N = k3.shape[1]
    with _on_device(q3):
        _backward_kernel[(slots.numel(),)](
            slots, q3.contiguous(), k3.contiguous(), s3.contiguous(), grad.contiguous(), dq,
            dk, ds, BH * n * n, n, N, d, H, scale, **_blocks(N, d),
        )  # fmt: skip
