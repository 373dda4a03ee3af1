"""The baseline pretext tasks (models/mae.py, models/mp3.py, models/droppos.py) and their
pretraining through the estimators."""

import math

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer
from braindecode_pars.models.encoder import _sinusoidal_embedding
from braindecode_pars.models.pretext.droppos import DropPos
from braindecode_pars.models.pretext.mae import MAE
from braindecode_pars.models.pretext.mp3 import MP3

from .._learning import SEED, learned
from ..conftest import SMALL_FINETUNER, SMALL_PRETRAINER, TINY

SIG = dict(n_times=300, sfreq=10)  # 30 patches of 10 samples


def _block_inputs(model):
    """Record what every transformer block of the encoder receives: (tokens, key_mask)."""
    seen = []
    for block in model.encoder.blocks:
        block.register_forward_pre_hook(lambda mod, args: seen.append(args))
    return seen


def _ramp(n=32, T=300):
    t = torch.linspace(0, 1, T)
    return (torch.rand(n, 1, 1) * 4 + 0.5) * t + torch.randn(n, 1, 1) + 0.01 * torch.randn(n, 1, T)


def _train(model, X, steps=120, lr=3e-3):
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = model(X)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# -- MAE -------------------------------------------------------------------------------
def test_mae_encoder_sees_only_visible_tokens_with_their_pe():
    model = MAE(**SIG, mask_ratio=0.6, **TINY)
    seen = _block_inputs(model)
    X = torch.randn(3, 1, 300)
    out = model(X)
    tokens, key_mask = seen[0]
    assert tokens.shape == (3, 12, 32) and key_mask is None  # 18 of 30 masked
    mask = out["mask"]
    assert torch.all(mask.sum(1) == 18)
    starts = torch.arange(0, 300, 10)
    expected = model.encoder.tokenize(X, starts) + _sinusoidal_embedding(starts / 10, 32)
    for b in range(3):  # visible tokens arrive in random order: match them as a set
        dist = torch.cdist(tokens[b], expected[b][~mask[b]])
        assert torch.all(dist.min(dim=1).values < 1e-4)
        assert len(set(dist.argmin(dim=1).tolist())) == 12


def test_mae_loss_counts_masked_patches_only():
    model = MAE(**SIG, **TINY)
    X = torch.randn(2, 1, 300)
    target = model.encoder.cut_patches(model.encoder.normalize(X), torch.arange(0, 300, 10))
    mask = torch.zeros(2, 30, dtype=torch.bool)
    mask[:, :5] = True
    recon = target.clone()
    recon[:, 5:] += 10.0  # wrong only where the patches were visible
    assert model.forward_loss(X, recon, mask).item() == pytest.approx(0.0, abs=1e-10)
    recon[:, :5] += 1.0
    assert model.forward_loss(X, recon, mask).item() == pytest.approx(1.0)
    model.loss_on = "all"
    assert model.forward_loss(X, recon, mask).item() == pytest.approx((5 * 1 + 25 * 100) / 30)


def test_mae_learns_to_fill_in_a_predictable_signal():
    torch.manual_seed(SEED)
    t = torch.arange(300) / 10
    phase = torch.rand(64, 1, 1) * 2 * math.pi
    X = torch.sin(2 * math.pi * 0.3 * t + phase)  # slow sine, random phase
    model = MAE(**SIG, mask_ratio=0.5, **TINY)
    losses = _train(model, X, steps=150)
    zero = model.encoder.normalize(X).pow(2).mean().item()  # the loss of predicting 0
    assert zero == pytest.approx(1.0, abs=1e-3)
    # np.mean(losses[-10:]) < 0.75 * zero (0.19 to 0.63 over seeds 0-9)
    learned(np.mean(losses[-10:]) / zero, below=0.75, what="final loss over predicting 0's")


# -- MP3 -------------------------------------------------------------------------------
def test_mp3_adds_no_positional_embedding_and_hides_tokens_from_every_attention():
    model = MP3(**SIG, mask_ratio=0.5, **TINY | {"depth": 2})

    def forbidden(*args, **kwargs):
        raise AssertionError("MP3 must not add positional embedding")

    model.encoder.position_embedding = forbidden
    seen = _block_inputs(model)
    X = torch.randn(3, 1, 300)
    out = model(X)
    assert len(seen) == 2
    for _tokens, key_mask in seen:  # every block gets the same key mask
        torch.testing.assert_close(key_mask, out["key_mask"])
    assert torch.all(out["key_mask"].sum(1) == 15)
    # the tokens are the patches in the shuffled order that the targets name
    starts = torch.arange(0, 300, 10)
    plain = model.encoder.tokenize(X, starts)
    first = seen[0][0]
    for b in range(3):
        torch.testing.assert_close(first[b], plain[b][out["target"][b]])


def test_mp3_hidden_tokens_do_not_reach_the_others():
    model = MP3(**SIG, mask_ratio=0.5, **TINY).eval()
    X = torch.randn(1, 1, 300)
    torch.manual_seed(3)  # the same shuffle and key mask for both calls
    out_a = model(X)
    hidden = out_a["target"][0][out_a["key_mask"][0]]  # original positions of hidden tokens
    X2 = X.clone()
    for p in hidden.tolist():  # scramble the hidden patches, keep mean and variance
        seg = X2[0, 0, p * 10 : p * 10 + 10]
        X2[0, 0, p * 10 : p * 10 + 10] = seg.flip(0)
    torch.manual_seed(3)
    out_b = model(X2)
    visible = ~out_a["key_mask"][0]
    torch.testing.assert_close(out_a["logits"][0][visible], out_b["logits"][0][visible])


def test_mp3_learns_positions_when_content_reveals_them():
    model = MP3(**SIG, mask_ratio=0.3, **TINY)
    losses = _train(model, _ramp(), steps=150)
    # np.mean(losses[-10:]) < 0.5 * ln 30, the loss of a uniform guess over 30 positions
    ratio = np.mean(losses[-10:]) / math.log(30)
    learned(ratio, below=0.5, what="final loss over a uniform guess's")


# -- DropPos ---------------------------------------------------------------------------
def test_droppos_masks_patches_then_positions_of_the_visible_ones():
    model = DropPos(**SIG, mask_ratio=0.5, pos_mask_ratio=0.6, **TINY)
    seen = _block_inputs(model)
    X = torch.randn(2, 1, 300)
    out = model(X)
    tokens = seen[0][0]
    assert tokens.shape == (2, 15, 32)  # 15 visible of 30
    pos_mask, positions = out["pos_mask"], out["target"]
    assert torch.all(pos_mask.sum(1) == 9)  # 60 % of the visible tokens
    starts = torch.arange(0, 300, 10)
    plain = model.encoder.tokenize(X, starts)
    for b in range(2):
        content = plain[b][positions[b]]
        pe = _sinusoidal_embedding(positions[b].float(), 32)
        expected = torch.where(
            pos_mask[b][:, None], content + model.encoder.pos_mask_token, content + pe
        )
        torch.testing.assert_close(tokens[b], expected, rtol=1e-5, atol=1e-5)


def test_droppos_targets_hard_and_gaussian():
    model = DropPos(**SIG, **TINY)
    hard = model.targets(torch.tensor([3, 0]), 6)
    torch.testing.assert_close(hard, torch.eye(6)[[3, 0]])
    model.label_sigma = 1.0
    soft = model.targets(torch.tensor([3]), 6)[0]
    assert soft.sum().item() == pytest.approx(1.0)
    assert soft.argmax().item() == 3
    assert soft[2].item() == pytest.approx(soft[4].item())
    assert soft[2].item() / soft[3].item() == pytest.approx(math.exp(-0.5))


def test_droppos_loss_is_over_position_masked_tokens_only():
    model = DropPos(**SIG, mask_ratio=0.5, pos_mask_ratio=0.4, **TINY)
    out = model(torch.randn(2, 1, 300))
    logp = out["logits"].log_softmax(-1)
    picked = logp.gather(-1, out["target"][..., None])[..., 0]
    torch.testing.assert_close(out["loss"], -picked[out["pos_mask"]].mean())


def test_droppos_learns_dropped_positions_when_content_reveals_them():
    model = DropPos(**SIG, mask_ratio=0.5, pos_mask_ratio=0.8, **TINY)
    losses = _train(model, _ramp(), steps=150)
    # np.mean(losses[-10:]) < 0.5 * ln 30, the loss of a uniform guess over 30 positions
    ratio = np.mean(losses[-10:]) / math.log(30)
    learned(ratio, below=0.5, what="final loss over a uniform guess's")


@pytest.mark.parametrize(
    "cls, kwargs, match",
    [
        pytest.param(MAE, dict(mask_ratio=1.0), r"'mask_ratio' must lie in \(0, 1\)", id="mae"),
        pytest.param(MP3, dict(mask_ratio=-0.1), r"'mask_ratio' must lie in \[0, 1\)", id="mp3"),
        pytest.param(DropPos, dict(pos_mask_ratio=0), "'pos_mask_ratio' must lie in", id="dp"),
        pytest.param(DropPos, dict(mask_ratio=0.99), "both must be at least 1", id="dp-none"),
    ],
)
def test_baseline_bad_arguments(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**SIG, **TINY, **kwargs)


# -- one interface -----------------------------------------------------------------------
@pytest.mark.parametrize("pretrain", ["pars", "mae", "mp3", "droppos"])
def test_every_pretext_task_pretrains_and_fine_tunes_through_the_estimator(pretrain):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 3, 400)).astype(np.float32)
    y = np.repeat([0, 1], 12)
    clf = PARSClassifier(
        encoder=PARSPretrainer(pretrain, **SMALL_PRETRAINER),
        head=PARSFineTuner(strategy="frozen", **SMALL_FINETUNER),  # the neural head
        sfreq=100,
        random_state=0,
        verbose=0,
    ).fit(X, y)
    assert len(clf.pretrain_history_) == 2
    assert np.isfinite(clf.pretrain_history_[:, "train_loss"]).all()
    assert clf.predict(X).shape == (24,)


def test_unknown_pretext_task_is_refused():
    with pytest.raises(ValueError, match="'method' parameter. Allowed values are 'pars'"):
        PARSClassifier(encoder=PARSPretrainer("simclr"), sfreq=100).fit(
            np.zeros((4, 2, 200)), [0, 1, 0, 1]
        )


@pytest.mark.parametrize("cls", [MAE, MP3, DropPos])
def test_every_baseline_traces_under_torch_compile_with_no_graph_break(cls, one_thread):
    """As PARS (test_pair_decoders.py): each baseline's loss is one graph, so a compiled
    fit on a GPU runs it whole (DropPos's mean over its position-dropped tokens was a
    boolean index, a data-dependent shape that broke the graph)."""
    model = cls(**SIG, label_sigma=1.0, **TINY) if cls is DropPos else cls(**SIG, **TINY)
    X = torch.randn(4, 1, 300)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(lambda X: model(X)["loss"])(X)
    assert explained.graph_break_count == 0, [b.reason for b in explained.break_reasons]
    assert explained.graph_count == 1
