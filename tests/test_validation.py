"""Validation on fixed draws (training/validation.py): the draws are made outside the
module, by the pretext model's ``draw``, and passed to it as tensors, so that a compiled
module validates without a graph break; they are the draws of the seeded validation
generator, as a forward pass given the generator makes them; on CUDA the validation
batches come in pinned memory."""

import pytest
import torch
from skorch.callbacks import Callback
from torch._dynamo.utils import counters

from braindecode_pars.models.pretext.droppos import DropPos
from braindecode_pars.models.pretext.mae import MAE
from braindecode_pars.models.pretext.mp3 import MP3
from braindecode_pars.models.pretext.pars import PARS
from braindecode_pars.pretraining.net import PretrainNet

from .conftest import TINY
from .ramp_fixtures import ramp_dataset

SIG = dict(n_times=300, sfreq=10)  # 30 patches of 10 samples


def _order(g, B, n):
    """A uniformly random order of ``n`` indices per example: ``rand``'s argsort."""
    return torch.rand((B, n), generator=g).argsort(dim=-1)


def _mask(B, n, chosen):
    return torch.zeros(B, n, dtype=torch.bool).scatter_(1, chosen, True)


def _pars_draws(model, g, B):
    """PARS's random sampling: starts uniform, then the position-masked patches."""
    N, high = model.n_patches, model.n_times - model.encoder.patch_size + 1
    starts = torch.randint(0, high, (B, N), generator=g)
    masked_idx = _order(g, B, N)[:, : model.n_masked]
    return {"starts": starts, "pos_mask": _mask(B, N, masked_idx), "masked_idx": masked_idx}


def _mae_draws(model, g, B):
    """MAE's random masking: the first ``n_masked`` of a random order are masked."""
    N = model.n_fixed_patches
    order = _order(g, B, N)
    masked, visible = order[:, : model.n_masked], order[:, model.n_masked :]
    return {"masked": masked, "visible": visible, "mask": _mask(B, N, masked)}


def _mp3_draws(model, g, B):
    """MP3's shuffled order, then the tokens hidden from keys and values."""
    N = model.n_fixed_patches
    perm = _order(g, B, N)
    return {"perm": perm, "key_mask": _mask(B, N, _order(g, B, N)[:, : model.n_hidden])}


def _droppos_draws(model, g, B):
    """DropPos's kept patches, then the visible tokens whose position is dropped."""
    N, n_vis = model.n_fixed_patches, model.n_visible
    visible = _order(g, B, N)[:, :n_vis]
    pos_mask = _mask(B, n_vis, _order(g, B, n_vis)[:, : model.n_pos_masked])
    return {"visible": visible, "pos_mask": pos_mask}


#: Each pretext model (tiny) with the draws its forward pass makes from a generator,
#: written out from the model's description.
MODELS = [
    pytest.param(lambda: PARS(**SIG, n_patches=12, **TINY), _pars_draws, id="pars"),
    pytest.param(lambda: MAE(**SIG, **TINY), _mae_draws, id="mae"),
    pytest.param(lambda: MP3(**SIG, **TINY), _mp3_draws, id="mp3"),
    pytest.param(lambda: DropPos(**SIG, **TINY), _droppos_draws, id="droppos"),
]


@pytest.mark.parametrize(("make", "reference"), MODELS)
def test_draws_made_outside_the_forward_pass_are_its_own_and_give_its_losses(make, reference):
    torch.manual_seed(0)
    model, B = make().eval(), 6
    X = ramp_dataset(B).tensors[0]
    draws = model.draw(B, X.device, torch.Generator().manual_seed(3))
    expected = reference(model, torch.Generator().manual_seed(3), B)
    assert draws.keys() == expected.keys()
    for key, value in expected.items():
        torch.testing.assert_close(draws[key], value, rtol=0, atol=0, msg=key)
    other = model.draw(B, X.device, torch.Generator().manual_seed(4))
    assert not all(torch.equal(draws[k], other[k]) for k in draws)  # another seed, others

    with torch.no_grad():
        given = model(X, draws=draws)
        drawn = model(X, generator=torch.Generator().manual_seed(3))
    assert given.keys() == drawn.keys()
    for key, value in drawn.items():
        assert torch.equal(given[key], value), key  # losses and every output, bit for bit

    # from torch's global generator, drawing first is the forward pass itself: the same
    # draws, the same loss, and the generator left in the same state
    outs, after = [], []
    for separate in (False, True):
        torch.manual_seed(5)
        with torch.no_grad():
            outs.append(model(X, draws=model.draw(B, X.device)) if separate else model(X))
        after.append(torch.rand(3))
    assert torch.equal(outs[0]["loss"], outs[1]["loss"]) and torch.equal(*after)

    with pytest.raises(ValueError, match="takes 'generator' or 'draws', not both"):
        model(X, generator=torch.Generator(), draws=draws)


class Draws(Callback):
    """The draws each validation batch was evaluated on, and the steps' outputs."""

    def initialize(self):
        self.valid_ = []
        return self

    def on_batch_end(self, net, training=None, y_pred=None, **kwargs):
        if not training:
            self.valid_.append({k: v.clone() for k, v in y_pred.items() if v.ndim > 0})


def test_a_compiled_fit_validates_without_a_graph_break():
    """Under torch.compile (aot_eager, on a CPU) a fit validated every epoch compiles one
    graph for the training steps and one for the validation steps, with no break; the
    validation draws are the same at every epoch."""
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    net = PretrainNet(
        PARS(**SIG, n_patches=12, **TINY), max_epochs=3, batch_size=16, lr=3e-3,
        progress_bar=False, valid_fraction=0.2, eval_every_steps=1, device="cpu",
        compile=True, compile__backend="aot_eager", callbacks=[("draws", Draws())],
    )  # fmt: skip
    net.fit(ramp_dataset(40))  # 32 training windows: 2 steps of 16; 8 for validation
    assert hasattr(net.module_, "_orig_mod")
    assert dict(counters["graph_break"]) == {}
    assert counters["stats"]["unique_graphs"] == 2  # training, validation: no recompile
    valid = dict(net.callbacks_)["draws"].valid_
    assert len(valid) == 3 and len(net.history[:, "valid_loss"]) == 3
    for later in valid[1:]:
        for key in ("starts", "pos_mask", "masked_idx"):
            assert torch.equal(later[key], valid[0][key]), key
    assert len(set(net.history[:, "valid_loss"])) == 3  # the weights moved between them


def test_validation_batches_come_in_pinned_memory_on_cuda():
    """As the training batches: on CUDA the validation DataLoader pins its batches, so
    that their non-blocking copy to the GPU waits for nothing; not on a CPU, and not
    when told otherwise."""
    X = ramp_dataset(8)
    for device, pinned in (("cuda", True), ("cuda:1", True), ("cpu", False)):
        net = PretrainNet(PARS(**SIG, n_patches=12, **TINY), device=device)
        assert net.get_iterator(X, training=False).pin_memory is pinned, device
    told = PretrainNet(
        PARS(**SIG, n_patches=12, **TINY), device="cuda", iterator_valid__pin_memory=False
    )
    assert told.get_iterator(X, training=False).pin_memory is False
