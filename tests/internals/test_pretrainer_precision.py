"""Whether ``PARSPretrainer`` takes bf16 and compilation, read from its private device test."""

import torch

from braindecode_pars import PARSPretrainer


def test_amp_and_compile_are_on_by_default_on_a_gpu_only(monkeypatch):
    stage = PARSPretrainer()
    assert (stage.amp, stage.compile) == ("auto", "auto")
    assert stage._on_cuda("auto") is False and stage._on_cuda(True) is True
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert PARSPretrainer(device="cuda")._on_cuda("auto") is True
