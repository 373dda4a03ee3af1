"""The pair operator's fallback as Triton kernels (models/pair/triton_fallback.py, chosen
in models/pair/kernels.py): exact against float64, forward and backward, on both of the
operator's paths. On a GPU directly; on a CPU through Triton's interpreter, in a child
process (Triton chooses the interpreter when its kernels are defined, at import)."""

import os
from pathlib import Path

import pytest
import torch

from braindecode_pars.models.pair import kernels as pair_kernels
from braindecode_pars.models.pair import tables as pair_attention
from braindecode_pars.models.pair import triton_fallback
from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder

from ._interpreted import run_interpreted
from .test_pair_decoders import (
    FLOAT32_TOL,
    _check_against_float64_naive,
    _random_case,
    _wide,
    bad_pairs,  # noqa: F401  (a fixture)
)

#: fallback_kernel() is deprecated (it warns on entering, tested below); the tests of
#: the Triton kernels still choose them with it.
pytestmark = pytest.mark.filterwarnings("ignore:fallback_kernel\\(\\) is deprecated")

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
needs_triton = pytest.mark.skipif(pair_kernels.triton is None, reason="needs Triton")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
interpreted_only = pytest.mark.skipif(
    not INTERPRETED, reason="run in a child process by test_the_triton_fallback_is_exact_on_a_cpu"
)


@needs_triton
@pytest.mark.parametrize("accelerator", [True, False], ids=["accelerator-path", "cpu-path"])
@pytest.mark.parametrize(
    "device",
    [
        pytest.param("cuda", id="on-a-gpu", marks=needs_cuda),
        pytest.param("cpu", id="interpreted", marks=interpreted_only),
    ],
)
def test_the_triton_fallback_is_exact(monkeypatch, bad_pairs, device, accelerator):  # noqa: F811
    """The underflowing cases of test_pair_decoders.py with the Triton fallback, and the
    fallback's slots overflowing; the same counts as the torch path. On a CUDA GPU, and
    on the CPU under Triton's interpreter."""
    monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: accelerator)
    torch.manual_seed(0)
    with pair_kernels.fallback_kernel("triton"):
        assert pair_kernels._use_triton(torch.empty(0, device=device))
        # float32 tables: logits over ~100 nats, about half the pair-heads underflow
        dec = _wide(CrossAttentionPairDecoder(16, 2), std=1.0)
        y, idx = _random_case(3, 12, 9, 16, dtype=torch.float32)
        _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL, False, device)
        assert bad_pairs and 0 < bad_pairs[0] < 3 * 2 * 9 * 9
        # float64 tables, logits over more than 700 nats
        dec64 = _wide(CrossAttentionPairDecoder(16, 2).double(), std=2.0).to(device)
        y64 = torch.randn(2, 12, 16, dtype=torch.float64, device=device, requires_grad=True)
        idx64 = torch.arange(9, device=device).repeat(2, 1)
        out = dec64(y64, idx64)
        ref = dec64.forward_naive(y64, idx64)
        torch.testing.assert_close(out, ref, rtol=1e-9, atol=1e-9 * ref.abs().max().item())
        g, g_ref = (torch.autograd.grad(t.pow(2).sum(), y64)[0] for t in (out, ref))
        torch.testing.assert_close(g, g_ref, rtol=1e-8, atol=1e-8 * g_ref.abs().max().item())
    # more underflowing pair-heads than slots: the same ones computed, the same counted
    monkeypatch.setattr(pair_attention, "_FALLBACK_PAIRS", 16)
    monkeypatch.setattr(pair_attention, "_FALLBACK_PAIRS_PER_WINDOW", 1)
    results = []
    for kernel in pair_kernels._FALLBACK_KERNELS:
        with pair_kernels.fallback_kernel(kernel):
            y_k = y.detach().to(device).requires_grad_()
            theta, unresolved, _ = dec.to(device).forward_counted(y_k, idx.to(device))
            (grad,) = torch.autograd.grad(theta.pow(2).sum(), y_k)
            results.append((theta.detach(), grad, int(unresolved)))
    (theta_t, grad_t, left_t), (theta_k, grad_k, left_k) = results
    assert left_t == left_k > 0
    torch.testing.assert_close(theta_k, theta_t, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_k, grad_t, rtol=1e-5, atol=1e-5 * grad_t.abs().max().item())


@needs_triton
@interpreted_only
def test_interpreted_triton_fallback_runs_inside_a_compiled_graph(bad_pairs):  # noqa: F811
    """The decoder under torch.compile (aot_eager, one graph) with the Triton fallback:
    the operator stays one opaque node, and the compiled values and gradients are the
    eager ones."""
    torch.manual_seed(0)
    dec = _wide(CrossAttentionPairDecoder(16, 2), std=1.0)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    compiled = torch.compile(dec, backend="aot_eager", fullgraph=True)
    with pair_kernels.fallback_kernel("triton"):
        outs = []
        for run in (dec, compiled):
            y_r = y.detach().requires_grad_()
            theta = run(y_r, idx)
            outs.append((theta.detach(), torch.autograd.grad(theta.pow(2).sum(), y_r)[0]))
    assert bad_pairs and all(count > 0 for count in bad_pairs)  # the fallback ran, twice
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-5)


@needs_triton
@interpreted_only
def test_interpreted_triton_fallback_is_chosen_by_the_decoders_parameter(
    monkeypatch,
    bad_pairs,  # noqa: F811
):
    """``CrossAttentionPairDecoder(fallback="triton")``, outside any fallback_kernel block,
    runs the Triton kernels forward and backward, exactly; "torch" runs none of them,
    even inside a "triton" block."""
    launched = []
    for name in ("_forward_", "_backward_"):
        kernel = getattr(triton_fallback, name)

        def recording(*args, _kernel=kernel, _name=name):
            launched.append(_name)
            return _kernel(*args)

        monkeypatch.setattr(triton_fallback, name, recording)
    torch.manual_seed(0)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    dec = _wide(CrossAttentionPairDecoder(16, 2, fallback="triton"), std=1.0)
    _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL)
    assert launched == ["_forward_", "_backward_"] and bad_pairs[0] > 0
    launched.clear()
    dec.fallback = "torch"
    with pair_kernels.fallback_kernel("triton"):
        _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL)
    assert launched == []


@needs_triton
@pytest.mark.kernels  # make test-kernels; CI when the kernels' files change
@pytest.mark.slow  # 20 to 40 s: Triton's interpreter runs each program in numpy
def test_the_triton_fallback_is_exact_on_a_cpu():
    """The kernels under Triton's interpreter, on CPU tensors, in a child process."""
    run_interpreted(Path(__file__), passed=4)


@needs_triton
@pytest.mark.skipif(INTERPRETED, reason="the interpreter defines no kernel to compile")
@pytest.mark.kernels  # make test-kernels; CI when the kernels' files change
@pytest.mark.slow  # 5 to 40 s: four compilations (Triton caches them on disk)
@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
def test_the_kernels_compile_to_machine_code_for_an_h100(dtype):
    """Triton's compiler, with no GPU, down to the cubin (through its own ptxas) for
    sm_90, the paper's head size and 40 patches."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    tensors = dict.fromkeys(["q_ptr", "k_ptr", "s_ptr"], f"*{dtype}")
    ints = dict.fromkeys(["numel", "n", "N", "d", "H"], "i32")
    blocks = dict.fromkeys(["BLOCK_N", "BLOCK_D"], "constexpr")
    signatures = {
        triton_fallback._forward_kernel: {"slots_ptr": "*i64", **tensors,
                                        "theta_ptr": f"*{dtype}"},
        triton_fallback._backward_kernel: {"slots_ptr": "*i64", **tensors,
                                         **dict.fromkeys(["grad_ptr", "dq_ptr", "dk_ptr",
                                                          "ds_ptr"], f"*{dtype}")},
    }  # fmt: skip
    for kernel, pointers in signatures.items():
        signature = {**pointers, **ints, "scale": "fp32", **blocks}
        source = ASTSource(kernel, signature, {"BLOCK_N": 64, "BLOCK_D": 64})
        compiled = pair_kernels.triton.compile(source, target=GPUTarget("cuda", 90, 32))
        assert len(compiled.asm["cubin"]) > 1000
        assert "atom.global" in compiled.asm["ptx"]  # the atomic additions


def test_the_kernel_is_chosen_by_name_and_runs_only_where_it_can(monkeypatch):
    with pytest.raises(
        ValueError,
        match=r"'kernel' parameter. Allowed values are 'torch' and 'triton', but got 'cuda'",
    ):
        with pair_kernels.fallback_kernel("cuda"):
            pass
    assert pair_kernels._chosen_fallback_kernel() == "torch"  # the default
    with pair_kernels.fallback_kernel("triton"):
        assert pair_kernels._chosen_fallback_kernel() == "triton"
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        # a CPU tensor without the interpreter takes the torch path
        assert not pair_kernels._use_triton(torch.empty(0))
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        assert pair_kernels._use_triton(torch.empty(0)) == (pair_kernels.triton is not None)
    assert pair_kernels._chosen_fallback_kernel() == "torch"  # restored


def test_the_process_wide_block_is_deprecated_for_the_models_parameter():
    """``fallback_kernel`` sets the choice of every thread and model while it is open:
    entering it warns, naming the parameter that replaces it (the caller's line); the
    parameter alone decides where a model names its kernel."""
    import warnings

    with pytest.warns(DeprecationWarning, match=r"PARS\(decoder_fallback='triton'\)") as caught:
        with pair_kernels.fallback_kernel("triton"):
            pass
    assert caught[0].filename == __file__
    assert "CrossAttentionPairDecoder(fallback='triton')" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the parameter does not warn
        decoder = CrossAttentionPairDecoder(16, 2, fallback="triton")
    assert decoder.fallback == "triton"


def test_auto_takes_the_blocks_kernel_else_the_devices_default():
    cpu = torch.empty(0)
    from braindecode_pars._util.device_defaults import _DEVICE_DEFAULTS

    assert _DEVICE_DEFAULTS["cpu"]["fallback_kernel"] == "torch"
    assert pair_kernels._resolve_fallback_kernel("auto", cpu) == "torch"
    assert pair_kernels._resolve_fallback_kernel("triton", cpu) == "triton"
    with pair_kernels.fallback_kernel("triton"):
        assert pair_kernels._resolve_fallback_kernel("auto", cpu) == "triton"
        assert (
            pair_kernels._resolve_fallback_kernel("torch", cpu) == "torch"
        )  # a caller's own choice
    assert pair_kernels._resolve_fallback_kernel("auto", torch.empty(0, device="meta")) == "torch"
    with pytest.raises(ValueError, match=r"'fallback' parameter.*'auto', 'torch' and 'triton'"):
        pair_kernels._resolve_fallback_kernel("cuda", cpu)


@pytest.mark.parametrize("fallback", ["auto", "torch", "triton"])
def test_the_decoders_fallback_reaches_the_operator(monkeypatch, fallback):
    """The decoder's ``fallback`` is what the operator asks for, forward and backward,
    inside a compiled graph too; under a "triton" block "auto" resolves to it."""
    asked = []
    use_triton = pair_kernels._use_triton

    def recording(x, fallback="auto"):
        asked.append((fallback, pair_kernels._resolve_fallback_kernel(fallback, x)))
        return use_triton(x, fallback)

    monkeypatch.setattr(pair_kernels, "_use_triton", recording)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the torch path runs here
    torch.manual_seed(0)
    dec = CrossAttentionPairDecoder(16, 2, fallback=fallback)
    y, idx = _random_case(2, 12, 9, 16, dtype=torch.float32)
    compiled = torch.compile(dec, backend="aot_eager", fullgraph=True)
    with pair_kernels.fallback_kernel("triton"):
        for run in (dec, compiled):
            theta = run(y, idx)
            theta.sum().backward()
    resolved = "triton" if fallback == "auto" else fallback
    assert asked == [(fallback, resolved)] * 4


def test_the_one_table_of_device_defaults_decides_every_auto(monkeypatch):
    """The operator, its fallback and the training batches read their "auto" from one
    table, by device type (a type not named: its row for None); editing a row changes
    what "auto" takes there and nowhere else."""
    from braindecode_pars._util import device_defaults

    table = device_defaults._DEVICE_DEFAULTS
    assert set(table) == {"cpu", "cuda", None}
    settings = {"decoder_kernel", "fallback_kernel", "batches"}
    assert all(set(row) == settings for row in table.values())
    cpu = torch.empty(0)
    meta = torch.empty(0, device="meta")
    monkeypatch.setitem(table, "cpu", {**table["cpu"], "fallback_kernel": "triton"})
    assert pair_kernels._resolve_fallback_kernel("auto", cpu) == "triton"
    assert (
        pair_kernels._resolve_fallback_kernel("auto", meta)
        == table[None]["fallback_kernel"]
        == "torch"
    )
    monkeypatch.setitem(table, None, {**table[None], "decoder_kernel": "fused"})
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert (
        pair_kernels.resolve_decoder_kernel("auto", meta) == "tables"
    )  # no Triton for the meta device
    assert device_defaults.device_default("decoder_kernel", "meta") == "fused"
    assert device_defaults.device_default("batches", "cuda:1") == table["cuda"]["batches"]
    with pytest.raises(ValueError, match=r"'setting' parameter.*but got 'kernel'"):
        device_defaults.device_default("kernel", "cpu")
