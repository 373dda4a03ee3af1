"""The pair operator fused into one Triton kernel each way (models/pair/fused.py): exact
against a float64 reference (values, gradients, underflowing pair-heads beyond the
tables operator's slots), reading bf16 and strided inputs as they come, inside the
decoder and a compiled graph; compiled for an H100 without a GPU. On a CPU the kernels
run under Triton's interpreter in a child process (Triton chooses the interpreter when
its kernels are defined, at import)."""

import os
from pathlib import Path

import pytest
import torch

from braindecode_pars.models.pair import fused
from braindecode_pars.models.pair import kernels as pair_kernels
from braindecode_pars.models.pair import tables as pair_attention
from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder
from braindecode_pars.models.pretext.pars import PARS

from ._interpreted import run_interpreted
from .test_pair_decoders import (
    BF16_TOL,
    FLOAT32_TOL,
    _check_against_float64_naive,
    _random_case,
    _wide,
)

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
needs_triton = pytest.mark.skipif(fused.triton is None, reason="needs Triton")
interpreted_only = pytest.mark.skipif(
    not INTERPRETED, reason="run in a child process by test_the_fused_operator_on_a_cpu"
)


def _inputs(B, H, n, N, d, std, seed=0):
    """Random float64 ``q`` (B, H, 2, n, d), ``k`` (B, H, N, d) and ``s`` (B, H, N)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, 2, n, d, generator=g, dtype=torch.float64) * std
    k = torch.randn(B, H, N, d, generator=g, dtype=torch.float64) * std
    s = torch.randn(B, H, N, generator=g, dtype=torch.float64)
    return q, k, s


def _naive(q, k, s, scale):
    """``theta[b, j, k] = sum_h sum_m softmax_m((u_j + v_k) . k_m * scale) s[h, m]``, the
    (n x n x N) tensor materialised, in the inputs' dtype."""
    pair = q[:, :, 0, :, None, :] + q[:, :, 1, None, :, :]  # (B, H, n, n, d)
    p = (torch.einsum("bhjkd,bhmd->bhjkm", pair, k) * scale).softmax(-1)
    return (p * s[:, :, None, None, :]).sum(-1).sum(1)


def _against_float64(q, k, s, double, tol, device="cpu"):
    """The fused operator in float32 (or float64) arithmetic on ``device`` against the
    float64 naive reference on the CPU, values and gradients; returns its counts and gap
    (on the CPU)."""
    scale = q.shape[-1] ** -0.5
    dtype = torch.float64 if double else torch.float32
    inputs = [t.to(device, dtype).requires_grad_() for t in (q, k, s)]
    theta, counts, gap = fused._pair_attention_fused_op(*inputs, scale, double)
    refs = [t.detach().clone().requires_grad_() for t in (q, k, s)]
    ref = _naive(*refs, scale)
    assert theta.dtype == dtype
    torch.testing.assert_close(
        theta.cpu().double(), ref, rtol=tol, atol=tol * ref.abs().max().item()
    )
    weights = torch.randn_like(ref)
    grads = torch.autograd.grad((theta * weights.to(device, dtype)).sum(), inputs)
    grads_ref = torch.autograd.grad((ref * weights).sum(), refs)
    for g, g_ref in zip(grads, grads_ref, strict=True):
        assert g.dtype == dtype
        torch.testing.assert_close(
            g.cpu().double(), g_ref, rtol=tol, atol=tol * g_ref.abs().max().item()
        )
    return counts.cpu(), gap.cpu()


@needs_triton
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("double", [False, True], ids=["float32", "float64"])
def test_on_a_gpu_the_fused_operator_is_exact(double):
    """On a CUDA GPU, with the process's matmul precision at TF32: the kernels' IEEE
    products keep float32 exact; underflowing pair-heads counted and computed. Then the
    decoder with the fused operator, at the matmul precision "highest": its two
    projections and its folded weights are cuBLAS products, which TF32 would round to
    10 bits of mantissa (about 1e-3, where the check allows 5e-5)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        seen_bad = 0
        for std in (0.5, 6.0, 12.0):
            q, k, s = _inputs(3, 2, 9, 12, 8, std)
            counts, _ = _against_float64(q, k, s, double, 1e-12 if double else 5 * FLOAT32_TOL,
                                         "cuda")  # fmt: skip
            assert int(counts[1]) == 0
            seen_bad += int(counts[0])
        assert seen_bad > 0
        torch.backends.cuda.matmul.allow_tf32 = False
        dec = _wide(CrossAttentionPairDecoder(16, 2, kernel="fused"), std=1.0)
        y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
        _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL, False, "cuda")
        _check_against_float64_naive(dec, y, idx, BF16_TOL, True, "cuda")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


@needs_triton
@interpreted_only
@pytest.mark.parametrize("double", [False, True], ids=["float32", "float64"])
def test_interpreted_fused_operator_is_exact_and_counts_as_the_tables_do(double):
    """Logits from a few nats to hundreds: the same values and gradients as float64,
    the same underflowing pair-heads as the tables operator, every one computed (none
    beyond slots, where the tables operator leaves some), and the same gap."""
    dtype = torch.float64 if double else torch.float32
    tol = 1e-12 if double else 5 * FLOAT32_TOL
    seen_bad = 0
    for std in (0.5, 6.0, 12.0):
        q, k, s = _inputs(3, 2, 9, 12, 8, std)
        counts, gap = _against_float64(q, k, s, double, tol)
        tables = pair_attention._pair_attention_op(
            q.reshape(3, 2, 18, 8).to(dtype), k.to(dtype), s.to(dtype), 9, 8**-0.5
        )
        assert int(counts[0]) == int(tables[1][0])  # the same pair-heads underflow
        assert int(counts[1]) == 0  # and every one is computed
        if float(tables[2]) < float("inf"):
            torch.testing.assert_close(gap, tables[2].float(), rtol=1e-5, atol=1e-5)
        else:
            assert gap == float("inf")
        seen_bad += int(counts[0])
    assert seen_bad > 0  # the folded fallback ran
    if not double:  # at std 12 the tables operator's slots overflow; the fused has none
        q, k, s = _inputs(3, 2, 9, 12, 8, 12.0)
        slots = pair_attention._fallback_slots(3, 2, 9)
        assert int(fused._pair_attention_fused_op(q.float(), k.float(), s.float(), 8**-0.5,
                                              False)[1][0]) > slots  # fmt: skip


@needs_triton
@interpreted_only
def test_interpreted_fused_operator_reads_bf16_and_strided_inputs_as_they_come():
    """bf16 inputs in the projections' layout (views, not copies) give exactly the
    values of their float32 copies, contiguous, and bf16 gradients within a bf16 step of
    the float32 ones; padded tiles (n, N, d not powers of two, one head) change nothing."""
    B, H, n, N, d = 2, 3, 5, 7, 4
    g = torch.Generator().manual_seed(1)
    uv = torch.randn(B, n, 2 * H * d, generator=g).bfloat16()  # (batch, n, 2F), as F.linear
    ks = torch.randn(B, N, H * d + H, generator=g).bfloat16()  # keys, then s per head
    q = uv.view(B, n, 2, H, d).permute(0, 3, 2, 1, 4)  # (B, H, 2, n, d), strided
    k = ks[..., : H * d].view(B, N, H, d).transpose(1, 2)
    s = ks[..., H * d :].transpose(1, 2)
    assert not (q.is_contiguous() or k.is_contiguous() or s.is_contiguous())
    views = [t.detach().requires_grad_() for t in (q, k, s)]
    copies = [t.detach().float().contiguous().requires_grad_() for t in (q, k, s)]
    theta_b, counts_b, _ = fused._pair_attention_fused_op(*views, d**-0.5, False)
    theta_f, counts_f, _ = fused._pair_attention_fused_op(*copies, d**-0.5, False)
    assert theta_b.dtype == torch.float32
    assert torch.equal(theta_b, theta_f) and torch.equal(counts_b, counts_f)
    weights = torch.randn(theta_f.shape, generator=g)
    grads_b = torch.autograd.grad((theta_b * weights).sum(), views)
    grads_f = torch.autograd.grad((theta_f * weights).sum(), copies)
    for gb, gf in zip(grads_b, grads_f, strict=True):
        assert gb.dtype == torch.bfloat16
        # within one bf16 step of the float32 gradient (the interpreter's conversion
        # truncates where a GPU's rounds to nearest)
        torch.testing.assert_close(gb.float(), gf, rtol=2**-7, atol=2**-7 * gf.abs().max().item())
    ref = _naive(*(t.double() for t in (q, k, s)), d**-0.5)
    torch.testing.assert_close(theta_f.double(), ref, rtol=1e-5, atol=1e-5)


@needs_triton
@interpreted_only
def test_interpreted_fused_decoder_is_exact_eager_under_autocast_and_compiled(monkeypatch):
    """``CrossAttentionPairDecoder(kernel="fused")`` against the float64 naive decoder,
    with wide weights (pair-heads underflow), under bf16 autocast, and compiled
    (aot_eager, one graph: the operator stays one opaque node)."""
    calls = []
    op = fused._pair_attention_fused_op

    def recording(*args):
        calls.append(args[0].dtype)
        return op(*args)

    monkeypatch.setattr(fused, "_pair_attention_fused_op", recording)
    torch.manual_seed(0)
    dec = _wide(CrossAttentionPairDecoder(16, 2, kernel="fused"), std=1.0)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL)
    assert calls == [torch.float32]
    bad = int(op(*_decoder_inputs(dec, y, idx), 8**-0.5, False)[1][0])
    assert bad > 0  # the folded fallback took part
    calls.clear()
    plain = CrossAttentionPairDecoder(16, 2, kernel="fused")
    _check_against_float64_naive(plain, y, idx, BF16_TOL, autocast=True)
    assert calls == [torch.bfloat16]  # bf16 straight from the projections
    compiled = torch.compile(dec, backend="aot_eager", fullgraph=True)
    outs = []
    for run in (dec, compiled):
        y_r = y.detach().requires_grad_()
        theta = run(y_r, idx)
        outs.append((theta.detach(), torch.autograd.grad(theta.pow(2).sum(), y_r)[0]))
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-5)


def _decoder_inputs(dec, y, idx):
    """The fused operator's inputs inside ``dec``'s forward, float32."""
    B, N, Fd = y.shape
    H, n, d = dec.n_heads, idx.shape[1], Fd // dec.n_heads
    w_uv, b_uv, w_ks, b_ks, _ = dec.folded_weights(torch.float32)
    with torch.no_grad():
        ks = torch.nn.functional.linear(y, w_ks, b_ks)
        ym = y.gather(1, idx[..., None].expand(B, n, Fd))
        uv = torch.nn.functional.linear(ym, w_uv, b_uv)
    q = uv.view(B, n, 2, H, d).permute(0, 3, 2, 1, 4)
    return q, ks[..., :Fd].view(B, N, H, d).transpose(1, 2), ks[..., Fd:].transpose(1, 2)


@needs_triton
@interpreted_only
def test_interpreted_pars_trains_with_the_fused_operator_as_with_the_tables():
    """PARS with ``decoder_kernel="fused"``: the same loss and gradients as the tables
    operator, to float32's rounding."""
    torch.manual_seed(0)
    kw = dict(n_times=300, sfreq=100, emb_dim=16, depth=1, n_heads=2, ff_dim=16,
              n_patches=10, decoder_heads=2)  # fmt: skip
    tables, fused_model = PARS(**kw, decoder_kernel="tables"), PARS(**kw, decoder_kernel="fused")
    fused_model.load_state_dict(tables.state_dict())
    X = torch.randn(3, 1, 300)
    draws = tables.draw(3, generator=torch.Generator().manual_seed(1))
    losses, grads = [], []
    for model in (tables, fused_model):
        loss = model(X, draws=draws)["loss"]
        losses.append(loss.detach())
        grads.append(torch.autograd.grad(loss, list(model.parameters())))
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(grads[1], grads[0], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5 * max(1.0, b.abs().max().item()))


@needs_triton
@pytest.mark.kernels  # make test-kernels; CI when the kernels' files change
@pytest.mark.slow  # 30 to 60 s: Triton's interpreter runs each program in numpy
def test_the_fused_operator_on_a_cpu():
    """The interpreted tests above, on CPU tensors, in a child process."""
    run_interpreted(Path(__file__), passed=5)


def _signature(kernel, pointer, acc):
    """The kernel's argument types for Triton's compiler: ``pointer`` the inputs'
    element type, ``acc`` the arithmetic's."""
    strides = {f"s{t}{i}": "i64" for t, rank in (("q", 5), ("k", 4), ("s", 3)) for i in range(rank)}
    inputs = {"q_ptr": f"*{pointer}", "k_ptr": f"*{pointer}", "s_ptr": f"*{pointer}"}
    if kernel is fused._forward_kernel:
        outputs = {"theta_ptr": f"*{acc}", "counts_ptr": "*i64", "gap_ptr": "*fp32"}
    else:
        outputs = {"grad_ptr": f"*{acc}", **dict.fromkeys(["dq_ptr", "dk_ptr", "ds_ptr"],
                                                          f"*{pointer}")}  # fmt: skip
    constants = dict.fromkeys(["H", "ACC", "BLOCK_M", "BLOCK_N", "BLOCK_D"], "constexpr")
    return {**inputs, **outputs, "constants_ptr": f"*{acc}", **strides,
            **dict.fromkeys(["n", "N", "d"], "i32"), **constants}  # fmt: skip


def _compile_for_an_h100(kernel, pointer, acc, n, N, d=64):
    """``kernel`` compiled by Triton, with no GPU, down to the cubin for sm_90 (its own
    ptxas), at the tiles and warps the operator launches it with."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    blocks, warps = fused._blocks(n, N, d, acc == "fp64")
    constants = {"H": 8, "ACC": fused._acc(acc == "fp64"), **blocks}
    source = ASTSource(kernel, _signature(kernel, pointer, acc), constants)
    return fused.triton.compile(
        source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}
    )


def _spill_bytes(ptx, tmp_path):
    """The bytes of spill stores ptxas reports (``-v``) for ``ptx`` on an H100 (sm_90a),
    with the ptxas Triton ships, and its whole report."""
    import re
    import subprocess

    from triton.backends.nvidia.compiler import get_ptxas

    source = tmp_path / "kernel.ptx"
    source.write_text(ptx)
    done = subprocess.run(
        [get_ptxas(90).path, "-v", "--gpu-name", "sm_90a", str(source), "-o",
         str(tmp_path / "kernel.o")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = done.stdout + done.stderr
    stores = [int(b) for b in re.findall(r"(\d+) bytes spill stores", report)]
    assert stores, report
    return sum(stores), report


@needs_triton
@pytest.mark.skipif(INTERPRETED, reason="the interpreter defines no kernel to compile")
@pytest.mark.kernels  # make test-kernels; CI when the kernels' files change
@pytest.mark.slow  # 20 to 60 s: four compilations (Triton caches them on disk)
@pytest.mark.parametrize(
    "pointer, acc, n, N, spills",
    [("bf16", "fp32", 32, 40, 128), ("fp32", "fp32", 32, 64, 128), ("fp64", "fp64", 16, 32, 144)],
    ids=["bf16-in-fp32-paper", "fp32-largest-tile", "fp64-largest-tile"],
)
def test_the_fused_kernels_compile_to_machine_code_for_an_h100(pointer, acc, n, N, spills,
                                                                tmp_path):  # fmt: skip
    """Triton's compiler, with no GPU, down to the cubin (its own ptxas) for sm_90 at the
    paper's size (8 heads of 64, 40 patches, 32 position-masked) and at the largest
    tiles the kernels take (:data:`~braindecode_pars.models.pair.pair_kernels._MAX_TILE`), in
    an H100's shared memory (227 KiB a block), without spilling registers to local
    memory (ptxas's report: at most 128 bytes of spill stores, where 4 warps at the
    paper's tile spilled kilobytes; float64's forward at its 16 x 32 tile spills 136);
    float32 products in IEEE arithmetic (fused
    multiply-adds, no TF32 tensor-core instruction)."""
    assert pair_kernels._fused_kernels_fit(n, N, 64, acc == "fp64")
    for kernel in (fused._forward_kernel, fused._backward_kernel):
        compiled = _compile_for_an_h100(kernel, pointer, acc, n, N)
        ptx = compiled.asm["ptx"]
        assert len(compiled.asm["cubin"]) > 1000
        assert compiled.metadata.shared <= 227 * 1024
        assert "tf32" not in ptx
        if acc == "fp32":
            assert "fma.rn.f32" in ptx
        if kernel is fused._forward_kernel:
            assert "atom.global" in ptx  # the counts and the gap
        spilled, report = _spill_bytes(ptx, tmp_path)
        assert spilled <= spills, (kernel.fn.__name__, report)


def test_the_implementation_is_chosen_by_name_and_runs_only_where_it_can(monkeypatch):
    cpu = torch.empty(0)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from braindecode_pars._util.device_defaults import _DEVICE_DEFAULTS

    assert _DEVICE_DEFAULTS["cpu"]["decoder_kernel"] == "tables"
    assert _DEVICE_DEFAULTS["cuda"]["decoder_kernel"] == "tables"
    assert pair_kernels.resolve_decoder_kernel("auto", cpu) == "tables"
    assert (
        pair_kernels.resolve_decoder_kernel("fused", cpu) == "tables"
    )  # no Triton for CPU tensors here
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert pair_kernels.resolve_decoder_kernel("fused", cpu) == (
        "fused" if fused.triton is not None else "tables"
    )
    assert pair_kernels.resolve_decoder_kernel("auto", torch.empty(0, device="meta")) == "tables"
    with pytest.raises(
        ValueError,
        match=r"'kernel' parameter. Allowed values are 'auto', 'tables' and 'fused', but got "
        r"'triton'",
    ):
        pair_kernels.resolve_decoder_kernel("triton", cpu)
    with pytest.raises(ValueError, match=r"'kernel' parameter.*but got 'gpu'"):
        CrossAttentionPairDecoder(16, 2, kernel="gpu")
    with pytest.raises(ValueError, match=r"'decoder_kernel' parameter.*but got 'gpu'"):
        PARS(n_times=300, sfreq=100, emb_dim=16, depth=1, n_heads=2, ff_dim=16,
             decoder_kernel="gpu")  # fmt: skip
    assert pair_kernels._triton_runs_here(cpu) == (fused.triton is not None)


def test_the_kernels_constants_keep_float64_and_larger_tiles_take_the_tables(monkeypatch):
    """The scale and the underflow threshold reach the kernels in the arithmetic's dtype
    (a Python float argument would reach them as float32, and float64's threshold of
    about 1.5e-154 as 0); tiles beyond what the kernels were compiled and checked for
    without spills (128 patches, 64 x 64, float64 at the paper's tile), or whose
    ``theta`` tile is, take the tables operator; the paper's tile runs on 8 warps."""
    c64 = fused._constants("cpu", 8**-0.5, True)
    assert c64.dtype == torch.float64 and 1e-155 < float(c64[2]) < 1e-153
    assert float(c64[1]) == 8**-0.5  # not rounded to float32
    assert fused._constants("cpu", 8**-0.5, True) is c64  # made once
    assert fused._constants("cpu", 8**-0.5, False).dtype == torch.float32
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cpu = torch.empty(0)
    expected = "fused" if fused.triton is not None else "tables"
    assert pair_kernels._fused_kernels_fit(32, 40, 64, False) and pair_kernels._fused_kernels_fit(
        16, 32, 64, True
    )
    assert pair_kernels.resolve_decoder_kernel("fused", cpu, (32, 40, 64, False)) == expected
    assert pair_kernels.resolve_decoder_kernel("fused", cpu, (32, 64, 64, False)) == expected
    assert pair_kernels.resolve_decoder_kernel("fused", cpu, (16, 20, 64, True)) == expected
    for shape in [
        (102, 128, 64, False),
        (64, 64, 64, False),  # spills at every warp count
        (32, 40, 64, True),  # float64 at the paper's tile: spills
        (40, 16, 64, False),  # theta's 64 x 64 tile, though 64 x 16 is within _MAX_TILE
        (32, 40, 128, False),
    ]:
        assert not pair_kernels._fused_kernels_fit(*shape), shape
        assert pair_kernels.resolve_decoder_kernel("fused", cpu, shape) == "tables"
    assert fused._blocks(32, 40, 64) == ({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_D": 64}, 8)
    assert fused._blocks(16, 40, 64)[1] == 4 and fused._blocks(16, 32, 64, True)[1] == 8


def test_bad_shapes_are_refused_before_any_kernel():
    q, k, s = (t.float() for t in _inputs(2, 2, 3, 5, 4, 1.0))
    with pytest.raises(ValueError, match=r"q \(batch, H, 2, n, d\).*\(2, 2, 6, 4\)"):
        fused._pair_attention_fused_op(q.reshape(2, 2, 6, 4), k, s, 0.5, False)
    with pytest.raises(ValueError, match=r"s \(batch, H, N\).*\(2, 2, 4\)"):
        fused._pair_attention_fused_op(q, k, s[..., :4], 0.5, False)
