"""The per-step seeding of pretraining (``_util.seeding.seed_torch_generators``): the
draws of ``torch.manual_seed``, without the stack traces it formats for backends that
are not initialised (issue 89: about a millisecond a step on a CPU)."""

import traceback

import numpy as np
import pytest
import torch

from braindecode_pars import PARSPretrainer
from braindecode_pars._util.seeding import seed_torch_generators

from ..conftest import SMALL_PRETRAINER

pytestmark = pytest.mark.usefixtures("one_thread")


def _draws():
    dropout = torch.nn.functional.dropout(torch.ones(64), 0.5, training=True)
    return [torch.rand(5), torch.randint(0, 100, (5,)), torch.randperm(20), dropout]


@pytest.mark.parametrize("seed", [0, 1, 2**40 + 7, 2**63 - 1])
def test_the_draws_are_those_of_torch_manual_seed(seed):
    torch.manual_seed(seed)
    expected = _draws()
    torch.manual_seed(12345)  # elsewhere first
    seed_torch_generators(seed)
    assert torch.initial_seed() == seed
    for got, want in zip(_draws(), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_a_seeded_pretraining_step_formats_no_stack(monkeypatch):
    calls = []
    original = traceback.format_stack

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(traceback, "format_stack", counted)
    X = np.random.default_rng(0).standard_normal((32, 1, 300)).astype(np.float32) * 1e-5
    params = dict(SMALL_PRETRAINER, max_epochs=4, batch_size=8)
    pretrainer = PARSPretrainer(**params, sfreq=100, random_state=0).fit(X)
    steps = sum(len(epoch["batches"]) for epoch in pretrainer.history_)
    assert steps >= 8
    # torch.manual_seed formatted three stacks a step here (CUDA, XPU, MTIA uninitialised);
    # what is left is the fit's own seeding at its start and end
    assert len(calls) < steps, (len(calls), steps)
