"""The pair operator of the cross-attention decoder: a softmax over factor tables.

Per head, the logits of pair ``(j, k)`` at key ``m`` split as ``U[j, m] + V[k, m]``
(see :mod:`braindecode_pars.models.pair.decoders`), so
``exp(U[j, m] + V[k, m]) = exp(U[j, m]) exp(V[k, m])`` and the softmax's numerator and
denominator over the keys are products of (n x N) tables. :func:`_pair_attention_op` is
that computation as one ``torch.library`` operator with its backward written out: the
same on every device and under ``torch.compile`` (one opaque node, no graph break), with
no host synchronisation (CUDA graphs can capture it) and no Python branch on the data.
Each row of logits is shifted by its maximum, so nothing overflows; a pair-head whose
denominator underflows takes no part in the tables' products and is computed directly
from its logits inside the operator, in one of :func:`_fallback_slots` slots, forward and
backward. The operator's own products run at the full precision of its inputs' dtype
whatever autocast or the matmul precision say (:func:`_exact_float_arithmetic`).
"""

from __future__ import annotations

import contextlib
import math
import threading

import torch
from torch.utils.flop_counter import register_flop_formula

from braindecode_pars.models.pair import kernels as pair_kernels
from braindecode_pars.models.pair import triton_fallback

#: On a CPU the factor tables are processed this many elements (table entries of one
#: chunk of windows) at a time: about 1 MB of float32, so that a chunk's tables stay in
#: cache between the operations that read them, and the backward pass's scratch memory
#: is reused from chunk to chunk rather than allocated (and page-faulted in) at full
#: size.
_CPU_CHUNK_ELEMENTS = 1 << 18

#: Other devices (a GPU) take chunks of windows whose factor tables are at most this
#: fraction of the size of the pair operator's inputs (see :func:`_chunk_size`).
_ACCELERATOR_SCRATCH_RATIO = 0.25

#: On an accelerator the forward pass keeps the whole batch's factor tables, ``den`` and
#: ratios for the backward pass when they take at most this many bytes, and the backward
#: pass reads them; above it, it recomputes them chunk by chunk (the same values: the
#: same products of the same chunks). 256 MiB holds them at the paper's size (40
#: patches, 32 position-masked, 8 heads) up to a batch of about 1,800 in float32 (151 MB
#: at 1,024); at 128 patches they take about 1.5 GB at 1,024. A caller sets its own
#: budget per call (``CrossAttentionPairDecoder(keep_tables_bytes=...)``); a CPU always
#: keeps them (see :func:`_on_accelerator`).
KEEP_TABLES_BYTES = 256 << 20


#: The factor tables are computed as ``2 ** (log2(e) * logits)``, the factor folded
#: into the scale of the logits' product: on a CPU torch's ``exp2`` of float32 runs
#: about three times as fast as its ``exp``, for a relative error of the tables of at
#: most about ``|logit| * 1e-7``, the order of the rounding of the logits themselves.
_LOG2_E = math.log2(math.e)

#: Pair-heads whose factor tables underflow (see :func:`_underflow_threshold`) are
#: recomputed exactly inside the operator, in a static number of slots per call
#: (:func:`_fallback_slots`): this many per window of the batch, and at least
#: :data:`_FALLBACK_PAIRS`, so that the room grows with the batch while the step keeps
#: static shapes and no data-dependent branch. Pair-heads beyond the slots are counted,
#: never silently wrong: the operator returns their number.
_FALLBACK_PAIRS_PER_WINDOW = 4

#: The least number of fallback slots of a call, whatever the batch.
_FALLBACK_PAIRS = 256


def _fallback_slots(batch_size, n_heads, n):
    """Fallback slots of one call of :func:`_pair_attention_op`: a function of the shapes only."""
    return min(
        batch_size * n_heads * n * n,
        max(_FALLBACK_PAIRS, _FALLBACK_PAIRS_PER_WINDOW * batch_size),
    )


#: The sections of :func:`_exact_float_arithmetic` now open, by setting (a backend's
#: ``fp32_precision``, CUDA's ``allow_tf32``, the process's matmul precision): how many,
#: and the caller's value, put back when the last one ends. Guarded by
#: ``_PRECISION_LOCK``: the setting is the process's, the sections may be any thread's.
_PRECISION_SECTIONS = {}
_PRECISION_LOCK = threading.Lock()


@contextlib.contextmanager
def _precise_setting(key, get, put, precise):
    """While any section on ``key`` is open, the setting (read by ``get``, written by
    ``put``) is ``precise``; the value it had before the first one opened comes back
    when the last one ends, whatever the order in which threads leave theirs."""
    with _PRECISION_LOCK:
        depth, before = _PRECISION_SECTIONS.get(key, (0, None))
        if depth == 0:
            before = get()
            if before != precise:
                put(precise)
        _PRECISION_SECTIONS[key] = (depth + 1, before)
    try:
        yield
    finally:
        with _PRECISION_LOCK:
            depth, before = _PRECISION_SECTIONS.pop(key)
            if depth > 1:
                _PRECISION_SECTIONS[key] = (depth - 1, before)
            elif before != precise:
                put(before)


@contextlib.contextmanager
def _exact_float_arithmetic(device_type):
    """The operator's own products at the full precision of their dtype.

    Inside the operator autocast is off (its body would otherwise run its products in
    bf16 when the caller's autocast is on) and float32 products are IEEE float32 on
    ``device_type``, whatever the process's matmul precision
    (``torch.set_float32_matmul_precision("high")`` or ``allow_tf32`` make them TF32,
    a 10-bit mantissa: softmax ratios off by 1e-3 to 1e-2). The setting is the
    process's: sections open in several threads at once (or nested) share one count,
    and the caller's setting is restored when the last of them ends, never while one
    is still open. So while any section is open, *every* thread's float32 products on
    ``device_type`` run in IEEE float32 too (another model's forward pass, a thread
    that reads ahead, a second training in the process): slower where they ran in
    TF32, never less exact; they go back to the process's setting when the last
    section ends. torch offers no per-thread setting. The operator runs as one opaque
    node even inside a compiled graph, so this holds there too, and a CUDA graph
    captures the kernels chosen here.
    """
    with contextlib.ExitStack() as stack:
        if torch.is_autocast_enabled(device_type):
            stack.enter_context(torch.autocast(device_type, enabled=False))
        backend = _matmul_backend(device_type)
        if hasattr(backend, "fp32_precision"):  # torch >= 2.9: one setting per backend
            stack.enter_context(
                _precise_setting(
                    ("fp32_precision", device_type),
                    lambda: backend.fp32_precision,
                    lambda value: setattr(backend, "fp32_precision", value),
                    "ieee",
                )
            )
        elif device_type == "cuda":
            matmul = torch.backends.cuda.matmul
            stack.enter_context(
                _precise_setting(
                    "allow_tf32",
                    lambda: matmul.allow_tf32,
                    lambda value: setattr(matmul, "allow_tf32", value),
                    False,
                )
            )
        elif _legacy_precision() is not None:  # another device on an older torch
            stack.enter_context(
                _precise_setting(
                    "matmul_precision",
                    torch.get_float32_matmul_precision,
                    torch.set_float32_matmul_precision,
                    "highest",
                )
            )
        yield


def _legacy_precision():
    """``torch.get_float32_matmul_precision()``, or None where torch refuses to say (it
    raises when its per-backend settings disagree)."""
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return None


def _matmul_backend(device_type):
    """The backend object whose ``fp32_precision`` rules float32 products on the device."""
    if device_type == "cuda":
        return torch.backends.cuda.matmul
    if device_type == "cpu":
        return torch.backends.mkldnn.matmul
    return None


def _underflow_threshold(dtype):
    """Smallest softmax denominator the factor tables are trusted with, in ``dtype``.

    Every term of a denominator that the tables lose to underflow is below
    ``tiny = torch.finfo(dtype).tiny``; with the denominator above ``sqrt(tiny)`` the
    N lost terms change it by at most ``N * sqrt(tiny)`` relatively (1e-19 * N in
    float32), and ``1 / den`` in the backward pass stays far from overflow.
    """
    return torch.finfo(dtype).tiny ** 0.5


#: The layout :func:`accelerator_layout` forces (None: each device's own).
_forced_layout = {"accelerator": None}


@contextlib.contextmanager
def accelerator_layout(enabled=True):
    """Run the pair operator in the accelerator's layout (``enabled=True``) or the CPU's
    (False) inside the block, whatever the device: how the benchmarks measure, on a CPU,
    the FLOPs, memory and dispatches of the path a GPU takes. The previous choice comes
    back on exit. Outside such a block each device takes its own (:func:`_on_accelerator`).

    Examples
    --------
    >>> with accelerator_layout():  # a CPU computes as a GPU would
    ...     pass
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"'enabled' must be True or False, but got {enabled!r}.")
    before = _forced_layout["accelerator"]
    _forced_layout["accelerator"] = enabled
    try:
        yield
    finally:
        _forced_layout["accelerator"] = before


def _on_accelerator(q):
    """Whether the operator runs as on an accelerator (any device but the CPU, or any
    inside :func:`accelerator_layout`): chunks sized by :data:`_ACCELERATOR_SCRATCH_RATIO`,
    the tables kept for the backward pass only within a byte budget
    (:func:`_keeps_tables`), and ``dq`` and ``dk`` computed in their own layout. A CPU
    keeps the tables of the whole batch from the forward pass (memory is cheaper there
    than the products, and the backward pass takes half as long) and computes ``dq`` and
    ``dk`` transposed. A choice by device, never by data."""
    forced = _forced_layout["accelerator"]
    return q.device.type != "cpu" if forced is None else forced


def _kept_bytes(q, k, n):
    """Bytes of the tables, ``den`` and ratios of the whole batch of a call."""
    B, H, n2, _ = q.shape
    return B * H * (n2 * k.shape[2] + 2 * n * n) * q.element_size()


def _keeps_tables(q, k, n, keep_bytes):
    """Whether the forward pass keeps its tables for the backward pass: always on a
    CPU; elsewhere when :func:`_kept_bytes` is at most ``keep_bytes`` (None:
    :data:`KEEP_TABLES_BYTES`). A choice by device, shapes and dtype, never data."""
    if not _on_accelerator(q):
        return True
    return _kept_bytes(q, k, n) <= (KEEP_TABLES_BYTES if keep_bytes is None else keep_bytes)


def _chunk_size(q, k):
    """Windows per chunk of the pair operator; a choice by device and shapes, never data.

    On a CPU, equal chunks of at most :data:`_CPU_CHUNK_ELEMENTS` entries of one table.
    Elsewhere, chunks whose table is at most :data:`_ACCELERATOR_SCRATCH_RATIO` times the
    size of the operator's inputs ``q`` and ``k``: a number of chunks set by the
    patches and the head size alone, not by the batch (5 at the paper's size and 128
    patches, 2 at 40), so that the kernels stay large and the scratch memory stays a
    fixed fraction of what the encoder holds.
    """
    B, H, n2, d = q.shape
    N = k.shape[2]
    if not _on_accelerator(q):
        n_chunks = math.ceil(B / max(1, _CPU_CHUNK_ELEMENTS // (H * n2 * N)))
    else:
        n_chunks = min(B, math.ceil(n2 * N / (_ACCELERATOR_SCRATCH_RATIO * (n2 + N) * d)))
    return math.ceil(B / n_chunks)


def _tables_(out, q3, k3, alpha):
    """``[e_u; e_v] = 2 ** (alpha * q @ k.T - rowmax)`` into ``out``: every entry <= 1.

    The shift of a row by its maximum cancels between the softmax's numerator and
    denominator, so it needs no gradient; with it nothing overflows, whatever the
    logits' range, and only the denominator can underflow.
    """
    torch.baddbmm(out, q3, k3.mT, beta=0, alpha=alpha, out=out)
    return out.sub_(out.amax(dim=-1, keepdim=True)).exp2_()


def _ratio_(num, den, e_u, e_vt, s, scratch, bad, least=None):
    """Per head ``num / den`` into ``num`` from the tables; ``den`` is ``inf`` where it
    underflowed (the pair's ratio is then 0). ``scratch`` has ``e_u``'s shape.

    With ``least`` (a 0-d tensor), the pairs that underflow are found and written into
    ``bad`` and ``least`` is lowered to the smallest ``den`` seen; without it (the
    backward pass), ``bad`` is the forward pass's and is read. (A NaN logit gives a
    NaN ``den`` and ratio, as it should.)"""
    torch.bmm(e_u, e_vt, out=den)
    torch.bmm(torch.mul(e_u, s, out=scratch), e_vt, out=num)
    if least is not None:
        torch.minimum(least, den.amin(), out=least)
        torch.lt(den, _underflow_threshold(den.dtype), out=bad)
    den.masked_fill_(bad, math.inf)  # num / inf = 0: num <= den * max |s| stays finite
    return num.div_(den)


@contextlib.contextmanager
def _observed(wrap):
    """For the block, the operator's bodies run as ``wrap(name, body)`` returns them
    (``name``: ``"forward"``, ``"backward"``): how the lab counts what the operator
    dispatches apart from the rest of a step (:doc:`/benchmarks/speed`).
    """
    global _pair_attention, _pair_attention_backward
    saved = _pair_attention, _pair_attention_backward
    _pair_attention = wrap("forward", saved[0])
    _pair_attention_backward = wrap("backward", saved[1])
    try:
        yield
    finally:
        _pair_attention, _pair_attention_backward = saved


def _pair_attention(q, k, s, n, scale, keep_bytes=None, fallback="auto"):
    """Forward of :func:`_pair_attention_op`: the factor tables, chunk by chunk, then the
    pairs they could not resolve, exactly."""
    with _exact_float_arithmetic(q.device.type):
        return _pair_attention_exact(q, k, s, n, scale, keep_bytes, fallback)


def _pair_attention_exact(q, k, s, n, scale, keep_bytes, fallback):
    B, H, n2, d = q.shape
    N, chunk = k.shape[2], _chunk_size(q, k)
    q3, k3, s3 = q.reshape(B * H, n2, d), k.reshape(B * H, N, d), s.reshape(B * H, 1, N)
    theta = q.new_empty(B, n, n)
    bad = torch.empty(B, H, n, n, dtype=torch.bool, device=q.device)
    least = q.new_full((), math.inf)  # the smallest denominator of the call
    keep = _keeps_tables(q, k, n, keep_bytes)
    rows_kept = B * H if keep else 0  # the whole batch's, or nothing
    kept = q.new_empty(rows_kept, n2, N), q.new_empty(rows_kept, n, n), q.new_empty(rows_kept, n, n)
    # kept: the tables, den, and each head's ratio (computed into num's buffer)
    tables, num, den = (kept[0], kept[2], kept[1]) if keep else _chunk_buffers(q, chunk * H, n, N)
    scratch = q.new_empty(chunk * H, n, N)
    for b0, b1 in _chunks(B, chunk):
        rows, m = slice(b0 * H, b1 * H), (b1 - b0) * H
        at = rows if keep else slice(0, m)
        e = _tables_(tables[at], q3[rows], k3[rows], scale * _LOG2_E)
        # an underflowing (or NaN) denominator: ratio 0 and no gradient (dtheta / den
        # = 0); the pair is computed exactly below. Tensor operations only, no host read
        bad_m = bad[b0:b1].view(m, n, n)
        e_u, e_vt = e[:, :n], e[:, n:].mT
        ratio = _ratio_(num[at], den[at], e_u, e_vt, s3[rows], scratch[:m], bad_m, least)
        torch.sum(ratio.view(b1 - b0, H, n, n), dim=1, out=theta[b0:b1])
    with torch.profiler.record_function("pair_attention.fallback"):  # a profiler's label
        slots, counts = _find_slots(bad, _fallback_slots(B, H, n))
        if pair_kernels._use_triton(q, fallback):  # one kernel (triton_fallback.py)
            triton_fallback._forward_(theta, slots, q3, k3, s3, n, H, scale)
        else:
            pairs = _SlotPairs(slots, q3, k3, s3, n, scale)
            value = torch.where(pairs.filled, (pairs.p * pairs.values).sum(-1), 0.0)
            theta.view(-1).index_add_(0, pairs.theta_index(H), value)
    gap = least.log().neg_().clamp_(min=0)  # nats; float32 tables underflow from 43.7
    return theta, counts, gap, bad, slots, *kept


def _find_slots(bad, size):
    """The flat indices of the first ``size`` underflowing pair-heads of ``bad``
    (``bad.numel()`` in empty slots), and ``counts`` = [underflowing pair-heads, those
    beyond the slots] (a long tensor on the device).

    A compaction with static shapes and no host read on every backend: the running count
    of ``bad`` and, for slot ``i``, the first position where it reaches ``i + 1``."""
    flat = bad.view(-1)
    dtype = torch.int32 if flat.numel() < 2**31 else torch.int64
    running = flat.cumsum(0, dtype=dtype)
    wanted = torch.arange(1, size + 1, dtype=dtype, device=bad.device)
    slots = torch.searchsorted(running, wanted)  # int64; numel where no such pair-head
    total = running[-1:].long()
    counts = torch.cat((total, (total - size).clamp_(min=0)))
    return slots, counts


class _SlotPairs:
    """The pair-heads of the fallback slots: their indices, query, keys, values and
    softmax over the keys, computed directly from ``q``, ``k`` and ``s``."""

    def __init__(self, slots, q3, k3, s3, n, scale):
        BH, n2, d = q3.shape
        N = k3.shape[1]
        numel = BH * n * n
        self.n, self.n2 = n, n2
        self.filled = slots < numel
        flat = slots.clamp(max=numel - 1)
        self.bh, self.jk = flat // (n * n), flat % (n * n)
        j, kk = self.jk // n, self.jk % n
        self.row_u, self.row_v = self.bh * n2 + j, self.bh * n2 + n + kk  # rows of q3
        rows = q3.reshape(BH * n2, d)
        self.query = rows.index_select(0, self.row_u) + rows.index_select(0, self.row_v)
        self.keys = k3.index_select(0, self.bh)  # (slots, N, d)
        logits = torch.bmm(self.keys, self.query[:, :, None])[..., 0].mul_(scale)
        self.p = torch.softmax(logits, dim=-1)  # (slots, N)
        self.values = s3.reshape(BH, N).index_select(0, self.bh)

    def theta_index(self, H):
        """Each slot's flat index into ``theta`` (batch, n, n), the sum over heads."""
        return (self.bh // H) * (self.n * self.n) + self.jk


def _chunk_buffers(q, rows, n, N):
    """Per-chunk buffers of the tables, ``num`` and ``den``."""
    return q.new_empty(rows, 2 * n, N), q.new_empty(rows, n, n), q.new_empty(rows, n, n)


def _pair_attention_backward(
    grad, q, k, s, bad, slots, tables, den, ratio, n, scale, fallback="auto"
):
    """Backward of :func:`_pair_attention_op`; see :func:`_pair_attention_backward_exact`."""
    with _exact_float_arithmetic(q.device.type):
        return _pair_attention_backward_exact(
            grad, q, k, s, bad, slots, tables, den, ratio, n, scale, fallback
        )


def _pair_attention_backward_exact(
    grad, q, k, s, bad, slots, tables, den, ratio, n, scale, fallback
):
    """The gradients from the forward pass's ``tables``, ``den`` and ``ratio`` (on a
    CPU, and on an accelerator within the byte budget: :func:`_keeps_tables`) or with
    them recomputed from ``q`` and ``k`` (when they are empty: then nothing of size
    n x N or n x n is kept between the passes but the forward pass's ``bad``, which says
    which pairs the tables left out). Per head,
    with ``A = dtheta / den`` and ``C = -A * theta_h``,
    ``dU = e_u * (s * (A @ e_v) + C @ e_v)``, ``dV = e_v * (s * (A.T @ e_u) + C.T @ e_u)``
    and ``ds = sum_j e_u * (A @ e_v)``; then the pair-heads of the fallback slots,
    directly. Scratch per chunk: the tables, ``num``, ``den``, ``A``, ``C`` and two more
    tables.
    """
    B, H, n2, d = q.shape
    N, chunk = k.shape[2], _chunk_size(q, k)
    q3, k3, s3 = q.reshape(B * H, n2, d), k.reshape(B * H, N, d), s.reshape(B * H, 1, N)
    keep = tables.numel() > 0
    transposed = not _on_accelerator(q)
    if transposed:
        # dq and dk computed transposed, (d x 2n) and (d x N): 2-3 times as fast on a
        # CPU as (2n x d) and (N x d) products with d as small as 8
        dq_t, dk_t = q3.new_empty(B * H, d, n2), k3.new_empty(B * H, d, N)
    else:
        dq, dk = torch.empty_like(q3), torch.empty_like(k3)
    if not keep:
        tables, num, den = _chunk_buffers(q3, chunk * H, n, N)
    ds = torch.empty_like(s3)
    # every output of a product contiguous: torch's CPU bmm into a strided output
    # falls back to one product per matrix
    a, c = q3.new_empty(chunk * H, n, n), q3.new_empty(chunk * H, n, n)
    xa, xc = q3.new_empty(chunk * H, n, N), q3.new_empty(chunk * H, n, N)
    dl = q3.new_empty(chunk * H, n2, N)  # d loss / d [U; V]
    for b0, b1 in _chunks(B, chunk):
        rows, m = slice(b0 * H, b1 * H), (b1 - b0) * H
        s_m = s3[rows]
        if keep:
            e, den_m, ratio_m = tables[rows], den[rows], ratio[rows]
        else:
            e = _tables_(tables[:m], q3[rows], k3[rows], scale * _LOG2_E)
            den_m, bad_m = den[:m], bad[b0:b1].view(m, n, n)
            ratio_m = _ratio_(num[:m], den_m, e[:, :n], e[:, n:].mT, s_m, xa[:m], bad_m)
        e_u, e_v = e[:, :n], e[:, n:]
        a_m, c_m, xa_m, xc_m, dl_m = a[:m], c[:m], xa[:m], xc[:m], dl[:m]
        torch.div(grad[b0:b1, None], den_m.view(-1, H, n, n), out=a_m.view(-1, H, n, n))
        torch.mul(a_m, ratio_m, out=c_m).neg_()
        x_a = torch.bmm(a_m, e_v, out=xa_m).mul_(e_u)  # e_u * (A @ e_v)
        torch.sum(x_a, dim=1, keepdim=True, out=ds[rows])
        x_c = torch.bmm(c_m, e_v, out=xc_m).mul_(e_u)  # e_u * (C @ e_v)
        torch.addcmul(x_c, x_a, s_m, out=dl_m[:, :n])  # d loss / d U
        y_a = torch.bmm(a_m.mT, e_u, out=xa_m).mul_(e_v)  # e_v * (A.T @ e_u)
        y_c = torch.bmm(c_m.mT, e_u, out=xc_m).mul_(e_v)  # e_v * (C.T @ e_u)
        torch.addcmul(y_c, y_a, s_m, out=dl_m[:, n:])  # d loss / d V
        if transposed:
            dq_m, dk_m = dq_t[rows], dk_t[rows]
            torch.baddbmm(dq_m, k3[rows].mT, dl_m.mT, beta=0, alpha=scale, out=dq_m)
            torch.baddbmm(dk_m, q3[rows].mT, dl_m, beta=0, alpha=scale, out=dk_m)
        else:  # directly in the layout of q and k: no copy after the loop
            dq_m, dk_m = dq[rows], dk[rows]
            torch.baddbmm(dq_m, dl_m, k3[rows], beta=0, alpha=scale, out=dq_m)
            torch.baddbmm(dk_m, dl_m.mT, q3[rows], beta=0, alpha=scale, out=dk_m)
    if transposed:
        dq, dk = dq_t.mT.contiguous(), dk_t.mT.contiguous()
    with torch.profiler.record_function("pair_attention.fallback_backward"):
        if pair_kernels._use_triton(q, fallback):
            triton_fallback._backward_(dq, dk, ds, grad, slots, q3, k3, s3, n, H, scale)
        else:
            _slot_gradients_(dq, dk, ds, grad, _SlotPairs(slots, q3, k3, s3, n, scale), H, scale)
    return dq.view(B, H, n2, d), dk.view(B, H, N, d), ds.view(B, H, N)


def _slot_gradients_(dq, dk, ds, grad, pairs, H, scale):
    """Add the gradients of the fallback slots' pair-heads to ``dq``, ``dk`` (B * H rows)
    and ``ds``: per slot, ``value = sum_m p_m s_m`` with ``p = softmax(scale * keys @
    query)``, so ``d value / d s_m = p_m`` and ``d value / d logit_m = p_m (s_m - value)``."""
    d = dq.shape[-1]
    g = torch.where(pairs.filled, grad.reshape(-1).index_select(0, pairs.theta_index(H)), 0.0)
    gp = pairs.p * g[:, None]  # (slots, N): d loss / d s
    ds.view(ds.shape[0], -1).index_add_(0, pairs.bh, gp)
    value = (pairs.p * pairs.values).sum(-1, keepdim=True)
    dlogit = gp.mul_(pairs.values - value).mul_(scale)  # (slots, N), scaled
    dquery = torch.bmm(dlogit[:, None, :], pairs.keys)[:, 0]  # (slots, d)
    rows = dq.view(-1, d)
    rows.index_add_(0, pairs.row_u, dquery)
    rows.index_add_(0, pairs.row_v, dquery)
    dk.index_add_(0, pairs.bh, dlogit[:, :, None] * pairs.query[:, None, :])


@torch.library.custom_op("braindecode_pars::pair_attention", mutates_args=())
def _pair_attention_op(
    q: torch.Tensor,
    k: torch.Tensor,
    s: torch.Tensor,
    n: int,
    scale: float,
    keep_bytes: int | None = None,
    fallback: str = "auto",
) -> tuple[
    torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
    torch.Tensor, torch.Tensor, torch.Tensor,
]:  # fmt: skip
    """``theta[b, j, k] = sum_h sum_m softmax_m(U[j, m] + V[k, m]) s[h, m]`` from factor tables.

    ``q`` (batch, H, 2n, d) holds per head the rows ``u_1..u_n`` then ``v_1..v_n``,
    ``k`` (batch, H, N, d) the keys, ``s`` (batch, H, N) the scalar value of each key
    and head, and the logits are ``[U; V] = scale * q @ k.T``. Per head, with
    ``e_u = exp(U - rowmax)`` and ``e_v = exp(V - rowmax)``, ``den = e_u @ e_v.T`` and
    ``num = (e_u * s) @ e_v.T``: two (n x N) @ (N x n) products, and no (n x n x N)
    tensor. The windows are taken in chunks (see :func:`_chunk_size`); on an
    accelerator the forward pass keeps the tables for the backward pass when they take
    at most ``keep_bytes`` bytes (None: :data:`KEEP_TABLES_BYTES`), and otherwise the
    backward pass recomputes them, keeping only ``q``, ``k``, ``s`` and ``bad`` (see
    :func:`_keeps_tables`). A pair-head whose denominator underflows (see
    :func:`_underflow_threshold`) is computed directly from its logits in one of
    :func:`_fallback_slots` slots, forward and backward, by the kernels ``fallback``
    names (one of :data:`~braindecode_pars.models.pair.kernels._FALLBACK_KERNEL_OPTIONS`; see
    :func:`~braindecode_pars.models.pair.kernels._resolve_fallback_kernel`). The products run at the
    full precision of the inputs' dtype whatever autocast or the matmul precision say
    (:func:`_exact_float_arithmetic`).

    Registered as a ``torch.library`` operator with its backward, so ``torch.compile``
    traces it as one opaque node (no graph break) and, with no host synchronisation
    in it, CUDA graphs can capture it.

    Returns
    -------
    theta : torch.Tensor, shape (batch, n, n)
        The sum over heads.
    counts : torch.Tensor of long, shape (2,)
        The pair-heads whose denominators underflowed, and those of them beyond the
        fallback slots: each of these contributes 0 to ``theta`` and to the gradient.
    gap : torch.Tensor, 0-d
        ``-log`` of the smallest denominator (at least 0), in nats: how far below its
        two rows' maxima the best common key of the worst pair lies (to within
        ``log N``); the float32 tables underflow from about 43.7, float64 from about
        354 (``inf``: a denominator of 0, beyond about 103 nats in float32).
    bad, slots, tables, den, ratio : torch.Tensor
        For the backward pass: where the denominators underflowed, the slots' flat
        indices into ``bad``, and the tables, ``den`` and each head's ratio of the whole
        batch where they are kept (empty tensors where the backward pass recomputes
        them).
    """
    return _pair_attention(q, k, s, n, scale, keep_bytes, fallback)


@_pair_attention_op.register_fake
def _(q, k, s, n, scale, keep_bytes=None, fallback="auto"):
    B, H, n2, _ = q.shape
    rows = B * H if _keeps_tables(q, k, n, keep_bytes) else 0
    return (
        q.new_empty(B, n, n),
        q.new_empty(2, dtype=torch.long),
        q.new_empty(()),
        q.new_empty(B, H, n, n, dtype=torch.bool),
        q.new_empty(_fallback_slots(B, H, n), dtype=torch.long),
        q.new_empty(rows, n2, k.shape[2]),
        q.new_empty(rows, n, n),
        q.new_empty(rows, n, n),
    )


@torch.library.custom_op("braindecode_pars::pair_attention_backward", mutates_args=())
def _pair_attention_backward_op(
    grad: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    s: torch.Tensor,
    bad: torch.Tensor,
    slots: torch.Tensor,
    tables: torch.Tensor,
    den: torch.Tensor,
    ratio: torch.Tensor,
    n: int,
    scale: float,
    fallback: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of :func:`_pair_attention_op`'s ``theta`` with respect to ``q``, ``k``, ``s``."""
    return _pair_attention_backward(
        grad.contiguous(), q, k, s, bad, slots, tables, den, ratio, n, scale, fallback
    )


@_pair_attention_backward_op.register_fake
def _(grad, q, k, s, bad, slots, tables, den, ratio, n, scale, fallback="auto"):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(s)


def _setup_context(ctx, inputs, output):
    q, k, s, n, scale, _, fallback = inputs  # the defaults filled in
    _, counts, gap, bad, slots, tables, den, ratio = output
    ctx.save_for_backward(q, k, s, bad, slots, tables, den, ratio)
    ctx.n, ctx.scale, ctx.fallback = n, scale, fallback
    ctx.mark_non_differentiable(counts, gap, bad, slots, tables, den, ratio)
    ctx.set_materialize_grads(False)  # no zero gradients of the other outputs to fill


def _backward(ctx, grad, *_):
    q, k, s, bad, slots, tables, den, ratio = ctx.saved_tensors
    dq, dk, ds = _pair_attention_backward_op(
        grad, q, k, s, bad, slots, tables, den, ratio, ctx.n, ctx.scale, ctx.fallback
    )
    return dq, dk, ds, None, None, None, None


_pair_attention_op.register_autograd(_backward, setup_context=_setup_context)


def _pair_attention_flops(q_shape, k_shape, s_shape, n, scale, *args, **kwargs):
    """Multiply-adds times 2 of :func:`_pair_attention_op`: the logits, ``num`` and ``den``,
    and the logits of the fallback slots."""
    B, H, n2, d = q_shape
    N = k_shape[2]
    return 2 * B * H * (n2 * N * d + 2 * n * n * N) + 2 * _fallback_slots(B, H, n) * N * d


def _pair_attention_backward_flops(
    grad_shape, q_shape, k_shape, s_shape, bad_shape, slots_shape, tables_shape, *args, **kwargs
):
    """Four (n x n) @ (n x N) products, ``dq`` and ``dk``; the tables, ``num`` and
    ``den`` where they are recomputed (empty ``tables``); the fallback slots' logits
    and query gradients."""
    B, H, n2, d = q_shape
    N, n = k_shape[2], n2 // 2
    recomputed = 0 if tables_shape[0] else n2 * N * d + 2 * n * n * N
    table_flops = 2 * B * H * (recomputed + 4 * n * n * N + 2 * n2 * N * d)
    return table_flops + 4 * slots_shape[0] * N * d


register_flop_formula(torch.ops.braindecode_pars.pair_attention)(_pair_attention_flops)
register_flop_formula(torch.ops.braindecode_pars.pair_attention_backward)(
    _pair_attention_backward_flops
)


def _chunks(B, chunk):
    """``(start, stop)`` of the batch's chunks of ``chunk`` windows."""
    return [(b, min(b + chunk, B)) for b in range(0, B, chunk)]
