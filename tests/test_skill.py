"""Pretext skill (0 = learned nothing, 1 = perfect), seeded draws, disjoint sampling,
and the scale-invariant instance normalisation."""

import math

import pytest
import torch
import torch.nn.functional as F

from braindecode_pars import PARS, PatchEncoder
from braindecode_pars.models.pretext.base import pretext_skill
from braindecode_pars.models.pretext.droppos import DropPos
from braindecode_pars.models.pretext.mae import MAE
from braindecode_pars.models.pretext.mp3 import MP3

from .conftest import TINY

SIG = dict(n_times=300, sfreq=10)  # 30 patches of 10 samples


class _Head(torch.nn.Module):
    """A stand-in classification head returning what ``fn`` makes of the tokens."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, h):
        return self.fn(h)


def _skill(out):
    return float(pretext_skill(out["loss"], out["trivial_loss"]))


def test_pars_skill_is_zero_for_no_shift_and_one_for_the_true_shifts(monkeypatch):
    model = PARS(**SIG, n_patches=12, pos_mask_ratio=0.75, **TINY)
    X = torch.randn(4, 1, 300)
    seen = {}

    def zeros(y, masked_idx):
        seen["masked"] = masked_idx
        n = masked_idx.shape[1]
        return torch.zeros(y.shape[0], n, n), torch.zeros((), dtype=torch.long), torch.zeros(())

    monkeypatch.setattr(model, "forward_decoder_counted", zeros)
    out = model(X, generator=torch.Generator().manual_seed(3))
    assert _skill(out) == pytest.approx(0.0, abs=1e-7)
    # the trivial loss by hand: mean squared normalised shift over the masked pairs
    t = out["starts"].gather(1, seen["masked"]).double()
    theta = (t[:, :, None] - t[:, None, :]) / 300
    assert float(out["trivial_loss"]) == pytest.approx(float(theta.pow(2).mean()), rel=1e-6)

    def oracle(y, masked_idx):
        return theta.float(), torch.zeros((), dtype=torch.long), torch.zeros(())

    monkeypatch.setattr(model, "forward_decoder_counted", oracle)
    out = model(X, generator=torch.Generator().manual_seed(3))  # the same draws
    assert _skill(out) == pytest.approx(1.0, abs=1e-6)


def test_mae_skill_is_zero_for_zero_and_one_for_the_signal(monkeypatch):
    model = MAE(**SIG, mask_ratio=0.5, **TINY)
    X = torch.randn(4, 1, 300) * 3 + 2
    target = model.encoder.cut_patches(model.encoder.normalize(X), model.fixed_starts())
    monkeypatch.setattr(model, "forward_decoder", lambda *a: torch.zeros_like(target))
    out = model(X)
    assert _skill(out) == pytest.approx(0.0, abs=1e-7)
    assert float(out["trivial_loss"]) == pytest.approx(1.0, abs=0.2)  # unit variance
    monkeypatch.setattr(model, "forward_decoder", lambda *a: target)
    assert _skill(model(X)) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("cls", [MP3, DropPos], ids=["mp3", "droppos"])
def test_position_classifiers_skill_is_zero_uniform_and_one_for_the_truth(cls):
    model = cls(**SIG, **TINY)
    X = torch.randn(4, 1, 300)
    N = model.n_fixed_patches
    model.head = _Head(lambda h: torch.zeros(*h.shape[:2], N))
    out = model(X, generator=torch.Generator().manual_seed(1))
    assert float(out["trivial_loss"]) == pytest.approx(math.log(N))
    assert _skill(out) == pytest.approx(0.0, abs=1e-6)
    target = out["target"]  # each token's true position, for the same draws

    model.head = _Head(lambda h: 1e4 * F.one_hot(target, N).float())
    out = model(X, generator=torch.Generator().manual_seed(1))
    assert _skill(out) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: PARS(**SIG, n_patches=12, **TINY), id="pars"),
        pytest.param(lambda: PARS(**SIG, n_patches=12, sampling="disjoint", **TINY), id="disj"),
        pytest.param(lambda: MAE(**SIG, **TINY), id="mae"),
        pytest.param(lambda: MP3(**SIG, **TINY), id="mp3"),
        pytest.param(lambda: DropPos(**SIG, **TINY), id="droppos"),
    ],
)
def test_a_seeded_generator_gives_the_same_draws_and_leaves_torch_alone(make):
    model = make().eval()
    X = torch.randn(3, 1, 300)
    state = torch.get_rng_state()
    a = model(X, generator=torch.Generator().manual_seed(7))
    b = model(X, generator=torch.Generator().manual_seed(7))
    assert torch.equal(torch.get_rng_state(), state)  # the global generator is untouched
    assert float(a["loss"]) == float(b["loss"])
    c = model(X, generator=torch.Generator().manual_seed(8))
    assert float(a["loss"]) != float(c["loss"])


def test_disjoint_sampling_never_overlaps_and_covers_the_window():
    model = PARS(**SIG, n_patches=20, sampling="disjoint", **TINY)
    starts = model.sample_patches(500, "cpu", torch.Generator().manual_seed(0))
    s = starts.sort(dim=-1).values
    assert (s[:, 1:] - s[:, :-1] >= 10).all()  # at least one patch (10 samples) apart
    assert s.min() >= 0 and s.max() <= 290
    assert s[:, 0].min() == 0 and s[:, -1].max() == 290  # both ends are reachable
    assert len(set(starts[:, 0].tolist())) > 50  # random, not a grid
    rand = PARS(**SIG, n_patches=20, **TINY).sample_patches(500, "cpu")
    r = rand.sort(dim=-1).values
    assert (r[:, 1:] - r[:, :-1] < 10).any()  # random sampling does overlap
    with pytest.raises(ValueError, match=r"sampling='disjoint' needs n_patches \* patch_size"):
        PARS(**SIG, n_patches=31, sampling="disjoint", **TINY)
    with pytest.raises(ValueError, match="Allowed values are 'random', 'disjoint' and 'fixed'"):
        PARS(**SIG, sampling="overlap", **TINY)


def test_instance_normalisation_does_not_depend_on_the_unit():
    enc = PatchEncoder(sfreq=100, **TINY).eval()
    uv = torch.randn(3, 1, 1000, dtype=torch.float64) * 20  # microvolts
    volts = uv * 1e-6
    adc = uv * 41.3 + 7.0  # counts with an offset
    ref = (uv - uv.mean(-1, keepdim=True)) / uv.std(-1, unbiased=False, keepdim=True)
    for X in (uv, volts, adc):
        torch.testing.assert_close(enc.normalize(X), ref, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        out_uv, out_v = enc(uv.float()), enc(volts.float())
    torch.testing.assert_close(out_uv, out_v, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("value", [0.0, 3e-5, 250.0], ids=["zero", "volts", "counts"])
def test_a_flat_channel_normalises_to_finite_zeros(value):
    enc = PatchEncoder(sfreq=100, **TINY)
    X = torch.full((2, 1, 500), value)
    Z = enc.normalize(X)
    assert torch.isfinite(Z).all() and torch.equal(Z, torch.zeros_like(Z))
    assert torch.isfinite(enc(X)).all()


def _read_row(epoch, unresolved, gap=50.0):
    batch = dict(
        train_trivial=1.0, train_loss=0.5, train_batch_size=4,
        train_unresolved_pairs=unresolved, train_pair_gap=gap,
    )  # fmt: skip
    return {"epoch": epoch, "batches": [batch]}


def test_pairs_unresolved_at_two_reports_move_the_tables_to_float64_then_stop(caplog):
    import types

    from braindecode_pars.pretraining.callbacks import PretextSkill

    model = PARS(**SIG, n_patches=12, pos_mask_ratio=0.75, **TINY)
    net = types.SimpleNamespace(module_=model)
    skill = PretextSkill()
    row = _read_row(1, 3, gap=47.5)
    skill.on_epoch_read(net, row)
    assert row["train_unresolved_pairs"] == 3 and row["train_pair_gap"] == 47.5
    assert "could not compute 3 pair-head(s)" in caplog.text
    assert model.decoder.table_dtype == torch.float32  # one report: a warning only
    skill.on_epoch_read(net, _read_row(2, 0))  # a clean report in between: start again
    skill.on_epoch_read(net, _read_row(3, 2))
    assert model.decoder.table_dtype == torch.float32
    skill.on_epoch_read(net, _read_row(4, 2))
    assert model.decoder.table_dtype == torch.float64
    assert "float64 for the rest of this run" in caplog.text
    X = torch.randn(2, 1, 300)
    assert torch.isfinite(model(X)["loss"])  # the run goes on, on float64 tables
    skill.on_epoch_read(net, _read_row(5, 1))
    with pytest.raises(RuntimeError, match="even with float64 factor tables"):
        skill.on_epoch_read(net, _read_row(6, 1))
