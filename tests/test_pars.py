import math

import pytest
import torch

from braindecode_pars import PARS, PatchEncoder
from braindecode_pars.models.pair import CrossAttentionPairDecoder

from ._helpers import naive_overlap
from ._learning import SEED, learned
from .conftest import TINY


def _tiny_pars(**kwargs):
    params = dict(n_times=300, sfreq=10, n_patches=12, pos_mask_ratio=0.75, **TINY)
    params.update(kwargs)
    return PARS(**params)


def test_targets_are_antisymmetric_zero_diagonal_bounded_and_match_the_starts():
    model = _tiny_pars()
    out = model.predict_shifts(torch.randn(5, 1, 300))
    theta = out["theta_true"]
    torch.testing.assert_close(theta, -theta.transpose(1, 2))
    assert torch.all(theta.diagonal(dim1=1, dim2=2) == 0)
    assert theta.abs().max() <= 1
    starts = out["starts"]
    for b in range(5):
        for j in range(12):
            for k in range(12):
                expected = (starts[b, j] - starts[b, k]).item() / 300
                assert theta[b, j, k].item() == pytest.approx(expected, abs=1e-6)


def test_only_pairs_of_position_masked_patches_enter_the_loss():
    model = _tiny_pars()
    out = model.predict_shifts(torch.randn(4, 1, 300))
    pos_mask, pair_mask = out["pos_mask"], out["pair_mask"]
    assert torch.all(pos_mask.sum(1) == 9)  # round(0.75 * 12)
    torch.testing.assert_close(pair_mask, pos_mask[:, :, None] & pos_mask[:, None, :])
    assert torch.all(out["theta_pred"][~pair_mask] == 0)
    masked_mse = ((out["theta_pred"] - out["theta_true"])[pair_mask] ** 2).mean()
    torch.testing.assert_close(out["loss"], masked_mse)


def test_the_loss_ignores_the_positions_of_patches_that_kept_their_pe():
    model = _tiny_pars().eval()
    X = torch.randn(3, 1, 300)
    out = model(X)
    starts, pos_mask = out["starts"], out["pos_mask"]
    masked_idx = torch.stack([torch.nonzero(m).flatten() for m in pos_mask])
    y = model.encoder(X, starts=starts, pos_mask=pos_mask)
    theta_hat = model.decoder(y, masked_idx)
    moved = starts.clone()
    moved[~pos_mask] = 0  # change only the targets of patches with PE
    loss_a = model.forward_loss(theta_hat, model.shift_targets(starts.gather(1, masked_idx)))
    loss_b = model.forward_loss(theta_hat, model.shift_targets(moved.gather(1, masked_idx)))
    assert loss_a == loss_b
    moved_masked = starts.clone()
    moved_masked[pos_mask] = 0  # the same change on the masked patches does matter
    loss_c = model.forward_loss(theta_hat, model.shift_targets(moved_masked.gather(1, masked_idx)))
    assert loss_c != loss_a


def test_random_sampling_covers_the_window_and_fixed_sampling_stays_on_the_grid():
    model = _tiny_pars(n_patches=30, pos_mask_ratio=0.5)
    starts = model.sample_patches(200, "cpu")
    assert starts.min() == 0 and starts.max() == 290  # uniform over [0, T - M]
    fixed = _tiny_pars(sampling="fixed", n_patches=20).sample_patches(50, "cpu")
    assert torch.all(fixed % 10 == 0) and fixed.max() <= 290
    assert all(len(set(row.tolist())) == 20 for row in fixed)  # distinct grid patches
    assert not torch.all(fixed[:, 1:] > fixed[:, :-1])  # shuffled, not chronological


@pytest.mark.parametrize("decoder", ["cross_attention", "mlp"])
def test_folded_and_naive_implementations_give_the_same_step(decoder):
    folded = _tiny_pars(decoder=decoder, decoder_hidden=16)
    naive = _tiny_pars(decoder=decoder, decoder_hidden=16, decoder_impl="naive")
    naive.load_state_dict(folded.state_dict())
    X = torch.randn(3, 1, 300)
    torch.manual_seed(5)
    out_f = folded(X)
    torch.manual_seed(5)
    out_n = naive(X)
    torch.testing.assert_close(out_f["loss"], out_n["loss"], rtol=1e-5, atol=1e-6)
    out_f["loss"].backward()
    out_n["loss"].backward()
    for (name, a), b in zip(folded.named_parameters(), naive.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-3, atol=1e-5, msg=name)


def test_a_decoder_with_only_forward_serves_and_counts_no_unresolved_pair():
    class DotDecoder(torch.nn.Module):  # a user's own decoder: forward(y, idx) only
        def forward(self, y, idx):
            z = y.gather(1, idx[:, :, None].expand(-1, -1, y.shape[-1]))
            return torch.tanh(z @ z.transpose(1, 2) / z.shape[-1])

    model = _tiny_pars()
    model.decoder = DotDecoder()
    X = torch.randn(3, 1, 300)
    out = model(X, generator=torch.Generator().manual_seed(2))
    y = model.encoder(X, starts=out["starts"], pos_mask=out["pos_mask"])
    masked_idx = torch.stack([torch.nonzero(m).flatten() for m in out["pos_mask"]])
    theta = model.shift_targets(out["starts"].gather(1, masked_idx))
    expected = model.forward_loss(DotDecoder()(y, masked_idx), theta)
    torch.testing.assert_close(out["loss"], expected)
    assert out["unresolved_pairs"].item() == 0
    out["loss"].backward()  # the encoder learns through it
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.encoder.parameters())


def test_under_bf16_autocast_the_decoder_projects_in_bf16_and_returns_float32_tables():
    model = _tiny_pars()
    X = torch.randn(3, 1, 300)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = model.encoder(X, starts=model.sample_patches(3, "cpu"))
        idx = torch.stack([torch.randperm(12)[:9] for _ in range(3)])
        theta_amp = model.decoder(y, idx)
        out = model(X)
    assert theta_amp.dtype == y.dtype  # the decoder returns its input's dtype
    # the projections in bf16 (8-bit mantissa), the tables in float32: within bf16's
    # rounding of the float32 computation, not equal to it
    reference = model.decoder(y.float(), idx)
    error = (theta_amp.float() - reference).abs().max() / reference.abs().max()
    assert 0 < error < 2e-2
    out["loss"].backward()
    assert torch.isfinite(out["loss"])
    assert all(torch.isfinite(p.grad).all() for p in model.decoder.parameters())


def _ramp_windows(n, T):
    """Windows whose content gives away the time: a ramp with random gain, offset, noise."""
    t = torch.linspace(0, 1, T)
    gain = torch.rand(n, 1, 1) * 4 + 0.5
    offset = torch.randn(n, 1, 1)
    return gain * t + offset + 0.01 * torch.randn(n, 1, T)


@pytest.mark.parametrize("decoder", ["cross_attention", "mlp"])
def test_loss_falls_well_below_predicting_zero_when_content_reveals_position(decoder):
    model = _tiny_pars(decoder=decoder, decoder_hidden=32)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    X = _ramp_windows(64, 300)
    zero_losses, losses = [], []
    for _ in range(150):
        out = model(X)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        losses.append(out["loss"].item())
        zero_losses.append(out["trivial_loss"].item())
    baseline = sum(zero_losses[-20:]) / 20  # the loss of always predicting 0
    final = sum(losses[-20:]) / 20
    # final < 0.15 * baseline
    learned(final / baseline, below=0.15, what="final loss over predicting 0's")


def test_given_encoder_is_used_unchanged_and_its_sfreq_must_match():
    enc = PatchEncoder(sfreq=10, **TINY)
    model = PARS(n_times=300, encoder=enc, n_patches=8)
    assert model.encoder is enc and model.sfreq == 10
    with pytest.raises(ValueError, match="sfreq=10.*sfreq=20"):
        PARS(n_times=300, sfreq=20, encoder=enc)
    with pytest.raises(ValueError, match="cannot be given together"):
        PARS(n_times=300, encoder=enc, depth=3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        pytest.param(dict(pos_mask_ratio=0.0), r"'pos_mask_ratio' must lie in \(0, 1\]", id="r0"),
        pytest.param(dict(pos_mask_ratio=1.5), r"must lie in \(0, 1\], but got 1.5", id="r>1"),
        pytest.param(dict(n_times=5), r"longer than the window, n_times=5", id="short-window"),
        pytest.param(
            dict(n_patches=2, pos_mask_ratio=0.5), "at least 2 position-masked", id="one-masked"
        ),
        pytest.param(dict(decoder="attn"), "Allowed values are 'cross_attention' and", id="dec"),
        pytest.param(dict(sampling="grid"), "'sampling' parameter", id="sampling"),
        pytest.param(
            dict(sampling="fixed", n_patches=40), "at most 30 non-overlapping", id="fixed-too-many"
        ),
        pytest.param(dict(n_chans=3), "'n_chans' must be 1, but got 3", id="chans"),
        pytest.param(dict(n_patches=1), "'n_patches' must be >= 2", id="n-patches"),
        pytest.param(dict(emb_size=3), "unexpected keyword arguments", id="typo"),
        pytest.param(
            dict(decoder_heads=3),
            r"'decoder_heads' must divide the token size emb_dim=32 \(one of \[1, 2, 4, 8, 16, "
            r"32\]\), but got 3",
            id="heads-not-dividing",
        ),
        pytest.param(dict(decoder_heads=0), "'decoder_heads' must be >= 1, but got 0", id="heads0"),
        pytest.param(dict(decoder_heads=4.0), "'decoder_heads' must be an int", id="heads-float"),
        pytest.param(
            dict(decoder="mlp", decoder_hidden=0), "'decoder_hidden' must be >= 1", id="hidden0"
        ),
        pytest.param(
            dict(decoder_fallback="cuda"),
            r"'decoder_fallback' parameter. Allowed values are 'auto', 'torch' and 'triton', "
            r"but got 'cuda'",
            id="fallback",
        ),
        pytest.param(
            dict(decoder="mlp", decoder_fallback="gpu"), "'decoder_fallback' parameter", id="mlp-fb"
        ),
        pytest.param(
            dict(decoder_keep_tables_bytes=-1),
            "'decoder_keep_tables_bytes' must be >= 0, but got -1",
            id="keep-negative",
        ),
        pytest.param(
            dict(decoder_keep_tables_bytes=1e9),
            r"'decoder_keep_tables_bytes' must be an int, but got float \(1000000000.0\)",
            id="keep-float",
        ),
    ],
)
def test_bad_arguments_raise_naming_the_parameter(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _tiny_pars(**kwargs)


def test_the_decoders_execution_options_reach_it_and_leave_the_values_alone():
    # the fallback's kernels and the tables' byte budget: how the operator runs, not
    # what it computes (on a CPU both take the same path); refused with their names
    default = _tiny_pars()
    chosen = _tiny_pars(decoder_fallback="torch", decoder_keep_tables_bytes=0)
    assert (default.decoder.fallback, default.decoder.keep_tables_bytes) == ("auto", None)
    assert (chosen.decoder.fallback, chosen.decoder.keep_tables_bytes) == ("torch", 0)
    chosen.load_state_dict(default.state_dict())
    X, draws = torch.randn(3, 1, 300), default.draw(3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(default(X, draws=draws)["loss"], chosen(X, draws=draws)["loss"])
    for kwargs, match in [
        (dict(fallback="cuda"), r"'fallback' parameter.*'auto', 'torch' and 'triton'.*'cuda'"),
        (dict(keep_tables_bytes=-1), "'keep_tables_bytes' must be >= 0, but got -1"),
    ]:
        with pytest.raises(ValueError, match=match):
            CrossAttentionPairDecoder(32, 4, **kwargs)


def test_bad_input_raises():
    """The encoder's checks of the shape (test_encoder.py), and exactly n_times samples."""
    model = _tiny_pars()
    with pytest.raises(ValueError, match=r"shape \(batch, 1, n_times\).*\(2, 4, 300\)"):
        model(torch.randn(2, 4, 300))
    with pytest.raises(
        ValueError, match="hold 250 samples but the model was built for n_times=300"
    ):
        model(torch.randn(2, 1, 250))


@pytest.mark.parametrize("n_times, n_patches, sampling", [
    (300, 12, "random"), (300, 4, "random"), (300, 12, "disjoint"), (300, 12, "fixed"),
])  # fmt: skip
def test_overlap_statistics_of_a_draw_match_a_naive_count(n_times, n_patches, sampling):
    from braindecode_pars.models.pretext import patch_overlap

    model = _tiny_pars(n_times=n_times, n_patches=n_patches, sampling=sampling)
    draws = model.draw(200, "cpu", torch.Generator().manual_seed(1))
    stats = patch_overlap(draws["starts"], model.encoder.patch_size, draws["masked_idx"])
    expected = naive_overlap(draws["starts"], model.encoder.patch_size, draws["masked_idx"])
    assert (stats["shared_pairs"], stats["chained"]) == pytest.approx(expected)
    if sampling != "random":  # no two patches share a sample
        assert stats["shared_pairs"] == 0


def test_overlap_statistics_follow_the_density_as_the_paper_and_a_closed_form_say():
    # uniform starts on [0, L]: two share samples with probability 1 - (1 - M / L)^2
    gen = torch.Generator().manual_seed(SEED)
    for seconds, chained in ((30, False), (4, True)):
        model = PARS(n_times=100 * seconds, sfreq=100, n_patches=40, **TINY)
        stats = model.overlap_statistics(n_draws=2000, generator=gen)
        span = 100 * seconds - 100
        # within 0.01, as pytest.approx(abs=0.01) (<=: the next float up, 'below' is strict)
        off = abs(stats["shared_pairs"] - (1 - (1 - 100 / span) ** 2))
        what = f"shared pairs off the closed form, {seconds} s"
        learned(off, below=math.nextafter(0.01, 1), what=what)
        assert stats["patch_seconds_per_second"] == pytest.approx(40 / seconds)
        assert (stats["chained"] > 0.99) is chained and (stats["chained"] < 0.01) is not chained


def test_overlap_statistics_refuse_what_is_not_a_draw():
    from braindecode_pars.models.pretext import patch_overlap

    with pytest.raises(ValueError, match="n_patches >= 2"):
        patch_overlap(torch.zeros(3, dtype=torch.long), 10)
    with pytest.raises(ValueError, match="patch_size"):
        patch_overlap(torch.zeros(3, 4, dtype=torch.long), 0)


def test_a_card_states_the_patch_density_and_the_overlap_of_its_draw():
    from braindecode_pars.models.card import model_card

    spec = {"method": "pars", "n_patches": 40, "pos_mask_ratio": 0.8, "sampling": "random"}
    rows = {}
    for seconds in (10, 30):
        model = PARS(n_times=100 * seconds, sfreq=100, n_patches=40, **TINY)
        card = model_card(model.encoder, spec, {"n_times": 100 * seconds, "model": "PARS"},
                          overlap=model.overlap_statistics())  # fmt: skip
        rows[seconds] = {
            line.split("|")[1].strip(): line.split("|")[2].strip()
            for line in card.splitlines() if line.startswith("| ")
        }  # fmt: skip
    key = "position-masked pairs that share samples"
    assert rows[10]["patch-seconds per second of crop"].startswith("4.00")
    assert rows[30]["patch-seconds per second of crop"].startswith("1.33")
    assert float(rows[10][key].rstrip(" %")) == pytest.approx(20.9, abs=1)
    assert float(rows[30][key].rstrip(" %")) == pytest.approx(6.8, abs=1)
    chained = "crops whose patches chain end to end by shared samples"
    assert float(rows[30][chained].rstrip(" %")) == 0
    assert "share samples" not in model_card(model.encoder, spec, {"n_times": 1000})
