"""What CUDA-graph steps need of the optimiser, checked on a CPU: under a CUDA-graph
compile mode the net gives AdamW its learning rate as a tensor, which the schedule
updates in place, and keeps the gradients in place between steps; eagerly, those
settings train along the same trajectory as a float rate (a captured optimiser step
with a float rate would replay the first step's rate)."""

import numpy as np
import torch
from skorch.callbacks import Callback

from braindecode_pars import PARS
from braindecode_pars.pretraining import PretrainNet


class _Grads(Callback):
    """The storage of the first parameter's gradient after every training step."""

    def __init__(self):
        self.pointers = []

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            grad = next(net.module_.parameters()).grad
            self.pointers.append(None if grad is None else grad.data_ptr())


def _fit(graphs, monkeypatch):
    if graphs:  # the settings a CUDA-graph mode gives, on an eager CPU step

        def check(self):
            self.cuda_graphs_ = True

        monkeypatch.setattr(PretrainNet, "_check_compile_mode", check)
    torch.manual_seed(0)
    model = PARS(n_times=50, sfreq=10, n_patches=4, patch_seconds=1.0, emb_dim=8, depth=1,
                 n_heads=2, ff_dim=8)  # fmt: skip
    grads = _Grads()
    data = torch.utils.data.TensorDataset(torch.randn(32, 1, 50), torch.zeros(32))
    net = PretrainNet(model, max_epochs=3, batch_size=8, lr=3e-3, progress_bar=False,
                      callbacks=[("grads", grads)])  # fmt: skip
    net.fit(data)
    monkeypatch.undo()
    return net, grads.pointers


def test_a_tensor_rate_updated_in_place_trains_as_a_float_rate(monkeypatch):
    plain, plain_grads = _fit(False, monkeypatch)
    graphs, kept_grads = _fit(True, monkeypatch)
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
    # the gradients stay in one place from step to step
    assert len(kept_grads) == 12 and len(set(kept_grads)) == 1
