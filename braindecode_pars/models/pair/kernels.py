"""Which implementation of the pair operator runs, and what ``"auto"`` takes.

Two choices, each with its own names:

- **the decoder's kernel** (``CrossAttentionPairDecoder(kernel=...)``,
  ``PARS(decoder_kernel=...)``): :data:`_DECODER_KERNELS`, "tables" (torch operations
  over the factor tables, every device: :mod:`~braindecode_pars.models.pair.tables`)
  or "fused" (one Triton kernel each way:
  :mod:`~braindecode_pars.models.pair.fused`), chosen by
  :func:`resolve_decoder_kernel`;
- **the tables operator's fallback** (``CrossAttentionPairDecoder(fallback=...)``,
  ``PARS(decoder_fallback=...)``), the exact recomputation of the pair-heads whose
  tables underflow: :data:`_FALLBACK_KERNELS`, "torch" (torch operations) or "triton"
  (two Triton kernels), chosen by :func:`_resolve_fallback_kernel`, and for a block of
  code by :func:`fallback_kernel` (deprecated: a process-wide choice; the parameter is
  the model's own).

For "auto", each takes the device's default, its ``"decoder_kernel"`` or
``"fallback_kernel"`` in the one table of per-device defaults
(:data:`~braindecode_pars._util.device_defaults._DEVICE_DEFAULTS`). A Triton path runs
only where Triton does (:func:`_triton_runs_here`): a CUDA device, or any device's
tensors under Triton's interpreter (``TRITON_INTERPRET=1``, how the tests check it on a
CPU); elsewhere the torch path runs. The fused kernels also take only the tiles they
compile for (:func:`_fused_kernels_fit`, :data:`_MAX_TILE`); larger calls take the tables.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import torch

from braindecode_pars._util.checks import check_option
from braindecode_pars._util.device_defaults import device_default

try:  # Triton ships with torch's CUDA wheels on Linux; elsewhere the torch paths serve
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - a torch without Triton
    triton = tl = None

#: The pair operator's implementations: "tables" (torch operations over the factor
#: tables, every device; :func:`~braindecode_pars.models.pair.tables._pair_attention_op`)
#: and "fused" (:func:`~braindecode_pars.models.pair.fused._pair_attention_fused_op`, where
#: Triton runs).
_DECODER_KERNELS = ("tables", "fused")

#: What a caller may ask the decoder for: "auto" (the device's ``"decoder_kernel"``,
#: "tables" until a GPU row times "fused" against it) or one of :data:`_DECODER_KERNELS`.
DECODER_KERNEL_OPTIONS = ("auto", *_DECODER_KERNELS)

#: The tables operator's fallback's implementations: "torch" (torch operations, every
#: device) and "triton" (two kernels, :func:`_triton_runs_here`).
_FALLBACK_KERNELS = ("torch", "triton")

#: What a caller may ask the fallback for: "auto" (:func:`_resolve_fallback_kernel`) or
#: one of :data:`_FALLBACK_KERNELS`.
_FALLBACK_KERNEL_OPTIONS = ("auto", *_FALLBACK_KERNELS)

#: The largest tile (``BLOCK_M * BLOCK_N``, the position-masked patches by all the
#: patches, and ``BLOCK_M * BLOCK_M``, the pairs of ``theta``; each side a power of two
#: of at least 16) the fused kernels take, by arithmetic (float64 or not), with a head
#: size of at most :data:`_MAX_HEAD_DIM`: the largest tiles at which both kernels
#: compile for an H100 (sm_90), at the warps :func:`_blocks` gives them, within its
#: shared memory (227 KiB a block) and with at most about 128 bytes of registers
#: spilled to local memory (ptxas's report; the tests compile them there). Float32 at
#: 32 x 64 (the paper's 40 patches, 32 position-masked) spills 60 bytes in the forward,
#: none in the backward; at 64 x 64 it spilled kilobytes at 4, 8 and 16 warps. Float64
#: at 16 x 32 spills 136 bytes in the forward, none in the backward; at 32 x 64 it
#: spilled 1.6 to 23 KB at 8 and 16 warps. Larger calls take the tables.
_MAX_TILE = {False: 32 * 64, True: 16 * 32}

#: The largest head size the fused kernels take (a power of two: the tile's third side).
_MAX_HEAD_DIM = 64

#: By arithmetic (float64 or not), the least tile (``BLOCK_M * BLOCK_N``) that the
#: fused kernels run with 8 warps rather than 4: from it on 4 warps spill registers to
#: local memory (ptxas for sm_90: float32 at the paper's 32 x 64, the forward 1 KB and
#: the backward 2.5 KB; float64 at 16 x 32, 212 and 20 bytes) and 8 do not (60 and 0
#: bytes; 136 and 0).
_EIGHT_WARPS_TILE = {False: 32 * 64, True: 16 * 32}

#: The fallback kernel a :func:`fallback_kernel` block gives "auto" (None outside every
#: block).
_chosen = {"kernel": None}


def _triton_runs_here(x):
    """Whether Triton's kernels run on ``x``'s device: Triton is there, and ``x`` is on
    a CUDA device or Triton's interpreter is on (``TRITON_INTERPRET=1``)."""
    if triton is None:
        return False
    return x.device.type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def _on_device(x):
    """Triton launches on the current CUDA device: make it ``x``'s (a process may hold
    tensors on another GPU than its current one)."""
    if x.device.type == "cuda":
        return torch.cuda.device(x.device)
    return contextlib.nullcontext()


# -- the decoder's kernel ---------------------------------------------------------------


def _next_power_of_2(x):
    return 1 << max(0, int(x) - 1).bit_length()


def _blocks(n, N, d, double=False):
    """The fused kernels' power-of-two tile sizes of at least 16 (``tl.dot``'s least)
    and warps (:data:`_EIGHT_WARPS_TILE`) of float64 (``double``) or float32 arithmetic."""
    next_power_of_2 = triton.next_power_of_2 if triton is not None else _next_power_of_2
    blocks = {
        "BLOCK_M": max(16, next_power_of_2(n)),
        "BLOCK_N": max(16, next_power_of_2(N)),
        "BLOCK_D": max(16, next_power_of_2(d)),
    }
    warps = 8 if blocks["BLOCK_M"] * blocks["BLOCK_N"] >= _EIGHT_WARPS_TILE[bool(double)] else 4
    return blocks, warps


def _fused_kernels_fit(n, N, d, double):
    """Whether the fused kernels take ``n`` position-masked patches of ``N``, heads of
    ``d``: both tiles (:data:`_MAX_TILE`) and the head (:data:`_MAX_HEAD_DIM`)."""
    blocks, _ = _blocks(n, N, d, double)
    largest = _MAX_TILE[bool(double)]
    return (
        blocks["BLOCK_M"] * blocks["BLOCK_N"] <= largest
        and blocks["BLOCK_M"] * blocks["BLOCK_M"] <= largest
        and blocks["BLOCK_D"] <= _MAX_HEAD_DIM
    )


def resolve_decoder_kernel(kernel, x, shape=None):
    """The implementation, one of :data:`_DECODER_KERNELS`, that ``kernel`` (one of
    :data:`DECODER_KERNEL_OPTIONS`) runs on ``x``'s device: "fused" only where
    :func:`_triton_runs_here` and, given ``shape`` (``n, N, d, double``), where the
    kernels take it (:func:`_fused_kernels_fit`), else "tables"; "auto" the device's
    default (:func:`~braindecode_pars._util.device_defaults.device_default`)."""
    check_option("kernel", kernel, DECODER_KERNEL_OPTIONS)
    if kernel == "auto":
        kernel = device_default("decoder_kernel", x.device)
    if kernel == "tables" or not _triton_runs_here(x):
        return "tables"
    return "fused" if shape is None or _fused_kernels_fit(*shape) else "tables"


# -- the tables operator's fallback -----------------------------------------------------


def _chosen_fallback_kernel(device="cpu"):
    """The fallback kernel "auto" takes now on ``device`` (a device or its type): one of
    :data:`_FALLBACK_KERNELS`."""
    return _chosen["kernel"] or device_default("fallback_kernel", device)


@contextlib.contextmanager
def fallback_kernel(kernel):
    """Run the operator's fallback with ``kernel`` (one of :data:`_FALLBACK_KERNELS`)
    inside the block, in this process, wherever its caller asked for "auto" (the default
    of ``CrossAttentionPairDecoder(fallback=...)``); a caller that names a kernel keeps
    it. The previous choice comes back on exit. "triton" is taken only where
    :func:`_triton_runs_here` (elsewhere the torch path runs).

    .. deprecated::
        The choice is the whole process's, every thread's and every model's, while the
        block is open: pass the kernel to the model instead,
        ``PARS(decoder_fallback=kernel)`` or ``CrossAttentionPairDecoder(fallback=kernel)``.
        Entering the block warns (``DeprecationWarning``); it will be removed.
    """
    check_option("kernel", kernel, _FALLBACK_KERNELS)
    warnings.warn(
        "fallback_kernel() is deprecated: it sets the pair operator's fallback for the "
        "whole process (every thread and model) while the block is open. Pass the kernel "
        f"to the model instead: PARS(decoder_fallback={kernel!r}) or "
        f"CrossAttentionPairDecoder(fallback={kernel!r}).",
        DeprecationWarning,
        stacklevel=3,
    )
    before = _chosen["kernel"]
    _chosen["kernel"] = kernel
    try:
        yield
    finally:
        _chosen["kernel"] = before


def _resolve_fallback_kernel(fallback, x):
    """The kernel, one of :data:`_FALLBACK_KERNELS`, that ``fallback`` (one of
    :data:`_FALLBACK_KERNEL_OPTIONS`) names for the operator on ``x``'s device: "auto" is
    the :func:`fallback_kernel` block's choice, else the device's default
    (:func:`~braindecode_pars._util.device_defaults.device_default`)."""
    check_option("fallback", fallback, _FALLBACK_KERNEL_OPTIONS)
    return _chosen_fallback_kernel(x.device) if fallback == "auto" else fallback


def _use_triton(x, fallback="auto"):
    """Whether the operator's fallback on ``x`` takes the Triton kernels now, its caller
    having asked for ``fallback`` (one of :data:`_FALLBACK_KERNEL_OPTIONS`)."""
    return _resolve_fallback_kernel(fallback, x) == "triton" and _triton_runs_here(x)
