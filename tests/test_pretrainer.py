"""PARSPretrainer's precision and compilation, and the batches its steps train on."""

import logging

import numpy as np
import pytest
import torch

from braindecode_pars import PARSPretrainer

pytestmark = pytest.mark.usefixtures("one_thread")


def _windows(n=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 2, 600)).astype(np.float32)


SMALL = dict(
    emb_dim=16, depth=1, n_heads=2, ff_dim=16, n_patches=6, batch_size=8, max_epochs=2,
    window_seconds=5.0, sfreq=100.0, valid_fraction=None, random_state=0, verbose=0,
)  # fmt: skip


def _first_losses(**settings):
    stage = PARSPretrainer(**SMALL, **settings).fit(_windows())
    return np.array(stage.history_[:, "train_loss"])


def test_bf16_and_compile_give_the_float32_losses_on_the_same_draws(monkeypatch):
    compiled = []
    compile_ = torch.compile

    def aot_eager(module, **kwargs):  # the test's backend: no C++ build, same graph
        compiled.append(type(module).__name__)
        return compile_(module, backend="aot_eager")

    monkeypatch.setattr(torch, "compile", aot_eager)
    reference = _first_losses(amp=False, compile=False)
    assert compiled == []
    bf16 = _first_losses(amp=True, compile=False)
    np.testing.assert_allclose(bf16, reference, rtol=0.02)
    assert not np.array_equal(bf16, reference)  # bf16 really ran
    both = _first_losses(amp=True, compile=True)
    assert "PARS" in compiled
    np.testing.assert_allclose(both, reference, rtol=0.02)


def test_amp_and_compile_are_on_by_default_on_a_gpu_only(monkeypatch):
    stage = PARSPretrainer()
    assert (stage.amp, stage.compile) == ("auto", "auto")
    assert stage._on_cuda("auto") is False and stage._on_cuda(True) is True
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert PARSPretrainer(device="cuda")._on_cuda("auto") is True


@pytest.mark.parametrize("name", ["amp", "compile"])
def test_a_bad_precision_setting_is_refused_naming_it(name):
    with pytest.raises(ValueError, match=f"'{name}' parameter.*'auto'.*got 'yes'"):
        PARSPretrainer(**SMALL, **{name: "yes"}).fit(_windows())


def test_a_batch_larger_than_the_windows_trains_full_batches_and_says_so(caplog):
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        stage = PARSPretrainer(**dict(SMALL, batch_size=64, max_epochs=2, verbose=1))
        stage.fit(_windows(20))
    sizes = [b["train_batch_size"] for row in stage.history_ for b in row["batches"]]
    assert sizes == [64, 64]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "64 of the 20 training windows" in said, said


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@needs_cuda
def test_on_a_gpu_the_estimator_runs_bf16_compiled_by_default_within_float32s_losses():
    settings = dict(SMALL, device="cuda", max_epochs=3)
    default = PARSPretrainer(**settings).fit(_windows())  # amp and compile: "auto"
    plain = PARSPretrainer(**settings, amp=False, compile=False).fit(_windows())
    # On an H100 the two runs' per-epoch losses differ by 3-9 % (bf16 tensor cores move
    # a tiny model's trajectory within the first epoch), so the check is that both learn
    # and end together; the CPU test above pins bf16 + compile to float32 on one draw.
    losses = np.array(default.history_[:, "train_loss"])
    plain_losses = np.array(plain.history_[:, "train_loss"])
    assert losses[-1] < losses[0] and plain_losses[-1] < plain_losses[0]
    np.testing.assert_allclose(losses[-1], plain_losses[-1], rtol=0.15)
    assert next(default.encoder_.parameters()).device.type == "cpu"  # handed back
