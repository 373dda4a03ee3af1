"""What CUDA-graph steps need of the optimiser, checked on a CPU: under a CUDA-graph
compile mode the net gives AdamW its learning rate as a tensor, which the schedule
updates in place, and sets the gradients to None between steps; eagerly, those settings
train along the same trajectory as a float rate, also when every step's gradients are
rewritten once the next step's forward has begun, as CUDA graph trees free them."""

import math

import numpy as np
import torch
from skorch.callbacks import Callback

from braindecode_pars import PARS
from braindecode_pars.pretraining import PretrainNet


class _GraphPool(Callback):
    """What CUDA graph trees do to a training step's gradients, on a CPU. The first
    backward's gradients are the compiled backward's outputs, in the graphs' memory
    pool, and autograd takes them as the parameters' ``.grad``; the next step's forward
    starts a new generation of graphs, which frees them. Here: the tensors that are
    the gradients at the end of a training step are filled with NaN when the next
    training forward begins (a kept gradient then turns the next step's gradients, and
    the weights, into NaN, where a GPU raises "accessing tensor output of CUDAGraphs
    that has been overwritten by a subsequent run"). Counts the gradients kept into the
    next forward (``kept_``)."""

    def initialize(self):
        self.grads_, self.kept_, self.handle_ = [], 0, None
        return self

    def on_train_begin(self, net, **kwargs):
        self.handle_ = net.pretext_.register_forward_pre_hook(self._new_generation)
        self.params_ = list(net.pretext_.parameters())

    def _new_generation(self, module, args):
        if not module.training:
            return
        live = {id(p.grad) for p in self.params_ if p.grad is not None}
        self.kept_ += sum(id(g) in live for g in self.grads_)
        for grad in self.grads_:
            grad.fill_(math.nan)
        self.grads_ = []

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            self.grads_ = [p.grad for p in self.params_ if p.grad is not None]

    def on_train_end(self, net, **kwargs):
        self.handle_.remove()


def _fit(graphs, monkeypatch):
    if graphs:  # the settings a CUDA-graph mode gives, on an eager CPU step

        def check(self):
            self.cuda_graphs_ = True

        monkeypatch.setattr(PretrainNet, "_check_compile_mode", check)
    torch.manual_seed(0)
    model = PARS(n_times=50, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8, depth=1,
                 n_heads=2, ff_dim=8)  # fmt: skip
    pool = _GraphPool()
    data = torch.utils.data.TensorDataset(torch.randn(32, 1, 50), torch.zeros(32))
    net = PretrainNet(model, max_epochs=3, batch_size=8, lr=3e-3, progress_bar=False,
                      callbacks=[("pool", pool)] if graphs else None)  # fmt: skip
    net.fit(data)
    monkeypatch.undo()
    return net, pool


def test_a_tensor_rate_updated_in_place_trains_as_a_float_rate(monkeypatch):
    plain, _ = _fit(False, monkeypatch)
    graphs, pool = _fit(True, monkeypatch)
    # no gradient outlives its step (a kept one is freed by the next step's graphs: here
    # rewritten with NaN once the next forward began, which would turn the weights NaN)
    assert pool.kept_ == 0
    rate = graphs.optimizer_.param_groups[0]["lr"]
    assert isinstance(rate, torch.Tensor) and rate.dim() == 0
    assert isinstance(plain.optimizer_.param_groups[0]["lr"], float)
    rates = [b["event_lr"] for row in graphs.history for b in row["batches"] if "event_lr" in b]
    assert len(rates) == 12 and len(set(rates)) > 3  # warm-up and cosine: it moved
    assert all(isinstance(r, float) for r in rates)  # the history holds numbers
    assert float(rate) == rates[-1]  # the tensor took every new rate
    assert all(group["lr"] is rate for group in graphs.optimizer_.param_groups[:1])
    assert rates == [
        b["event_lr"] for row in plain.history for b in row["batches"] if "event_lr" in b
    ]
    # the same trajectory, step after step (12 AdamW steps on a changing rate)
    for a, b in zip(graphs.module_.parameters(), plain.module_.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(graphs.history[:, "train_loss"], plain.history[:, "train_loss"],
                               rtol=1e-6)  # fmt: skip
    assert all(np.isfinite(graphs.history[:, "train_loss"]))
