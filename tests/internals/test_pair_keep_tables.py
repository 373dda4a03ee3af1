"""The pair operator's tables kept for its backward pass by a byte budget
(models/pair/tables.py: ``KEEP_TABLES_BYTES``, ``_keeps_tables``), on the accelerator's
path forced on this CPU: the kept tables give the recomputed path's values and gradients
bit for bit, both exact against float64, and the budget is a bound in bytes."""

import pytest
import torch

from braindecode_pars.models.pair import tables as pair_attention
from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder

from .test_pair_decoders import (
    FLOAT32_TOL,
    _check_against_float64_naive,
    _random_case,
    _wide,
    bad_pairs,  # noqa: F401  (a fixture)
)


@pytest.fixture
def accelerator(monkeypatch):
    """The accelerator's path on this CPU, and a record of the tables computed: the
    number of rows (windows x heads) of every call of ``_tables_``."""
    monkeypatch.setattr(pair_attention, "_on_accelerator", lambda q: True)
    rows = []
    tables = pair_attention._tables_

    def recording_tables(out, q3, k3, alpha):
        rows.append(out.shape[0])
        return tables(out, q3, k3, alpha)

    monkeypatch.setattr(pair_attention, "_tables_", recording_tables)
    return rows


def _step(dec, y, idx, weights):
    y_r = y.detach().requires_grad_()
    theta = dec(y_r, idx)
    grads = torch.autograd.grad((theta * weights).sum(), [y_r, *dec.parameters()])
    return [theta.detach(), *grads]


def test_kept_tables_give_the_recomputed_values_and_gradients_bit_for_bit(
    accelerator,
    bad_pairs,  # noqa: F811
):
    # logits over ~100 nats: some pair-heads underflow, so the fallback and ``bad`` take
    # part in both passes. 3 windows, 2 heads of 8, 9 masked of 12 patches: 2 chunks
    torch.manual_seed(0)
    dec = _wide(CrossAttentionPairDecoder(16, 2), std=1.0)
    y, idx = _random_case(3, 12, 9, 16, dtype=torch.float32)
    weights = torch.randn(3, 9, 9)
    runs, tables_rows = {}, {}
    for budget in (0, None):  # always recomputed; kept within the default 256 MiB
        dec.keep_tables_bytes = budget
        accelerator.clear()
        runs[budget] = _step(dec, y, idx, weights)
        tables_rows[budget] = sum(accelerator)
    # the forward pass computes every window's tables once; the recomputing backward
    # pass computes them all again, the keeping one none
    assert tables_rows[None] == 3 * 2
    assert tables_rows[0] == 2 * tables_rows[None]
    assert bad_pairs[0] == bad_pairs[1] > 0
    for kept, recomputed in zip(runs[None], runs[0], strict=True):
        assert torch.equal(kept, recomputed)
    for budget in (0, None):  # and each against the float64 naive decoder
        dec.keep_tables_bytes = budget
        _check_against_float64_naive(dec, y, idx, 5 * FLOAT32_TOL)


def _operator_inputs(B=2, H=2, n=3, N=5, d=4, dtype=torch.float32):
    torch.manual_seed(0)
    q = torch.randn(B, H, 2 * n, d, dtype=dtype, requires_grad=True)
    k = torch.randn(B, H, N, d, dtype=dtype, requires_grad=True)
    s = torch.randn(B, H, N, dtype=dtype, requires_grad=True)
    return q, k, s, n


def test_the_budget_is_a_bound_in_bytes_on_the_tables_den_and_ratios(accelerator, monkeypatch):
    q, k, s, n = _operator_inputs()
    # 2 windows x 2 heads x (6 x 5 table entries + 2 x 3 x 3 of den and ratio) x 4 bytes
    size = 2 * 2 * (6 * 5 + 2 * 3 * 3) * 4
    assert pair_attention._kept_bytes(q, k, n) == size == 768

    def kept_rows(*budget):
        return pair_attention._pair_attention_op(q, k, s, n, 0.5, *budget)[5].shape[0]

    assert kept_rows(size) == 2 * 2  # the whole batch's tables, at the budget
    assert kept_rows(size - 1) == 0  # a byte less: none, recomputed in backward
    assert kept_rows(None) == 2 * 2  # the default, 256 MiB
    monkeypatch.setattr(pair_attention, "KEEP_TABLES_BYTES", size - 1)
    assert kept_rows() == kept_rows(None) == 0  # None reads the module's budget per call
    assert kept_rows(size) == 2 * 2  # a caller's own budget wins
    # float64 tables take twice the bytes
    assert pair_attention._kept_bytes(q.double(), k.double(), n) == 2 * size


def test_a_cpu_keeps_the_tables_whatever_the_budget():
    q, k, s, n = _operator_inputs()
    assert pair_attention._pair_attention_op(q, k, s, n, 0.5, 0)[5].shape[0] == 2 * 2


@pytest.mark.parametrize("budget", [0, 768], ids=["recomputed", "kept"])
def test_both_sides_of_the_budget_pass_torch_library_checks(accelerator, budget):
    # the fake kernel's shapes (what a compiled graph allocates) follow the same rule
    q, k, s, n = _operator_inputs()
    torch.library.opcheck(pair_attention._pair_attention_op, (q, k, s, n, 0.5, budget))
    theta = pair_attention._pair_attention_op(q, k, s, n, 0.5, budget)[0]
    assert theta.shape == (2, 3, 3)
