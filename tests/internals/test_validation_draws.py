"""Validation on the seeded generator's draws, read from the net's private fixed windows."""

import pytest
import torch

from braindecode_pars.pretraining.net import PretrainNet

from ..ramp_fixtures import ramp_dataset
from ..test_validation import MODELS, Draws


@pytest.mark.parametrize(("make", "reference"), MODELS)
def test_validation_evaluates_the_seeded_generators_draws(make, reference):
    """The validation loss of an eager fit is the loss of the model's forward pass given
    a generator seeded with 0 (the validation generator), on the validation windows."""
    torch.manual_seed(0)
    net = PretrainNet(
        make(), max_epochs=1, batch_size=16, progress_bar=False, valid_fraction=0.2,
        device="cpu", callbacks=[("draws", Draws())],
    )  # fmt: skip
    net.fit(ramp_dataset(40))
    X = net._valid_fixed.tensors[0]  # 8 windows: one batch
    with torch.no_grad():
        out = net.pretext_.eval()(X, generator=torch.Generator().manual_seed(0))
    assert net.history[-1, "valid_loss"] == out["loss"].item()
    assert net.history[-1, "valid_trivial"] == out["trivial_loss"].item()
    (seen,) = dict(net.callbacks_)["draws"].valid_
    for key, value in seen.items():
        assert torch.equal(value, out[key]), key
