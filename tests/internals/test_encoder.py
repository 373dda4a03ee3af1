import math

import pytest
import torch
from torch import nn

from braindecode_pars import PatchEncoder
from braindecode_pars.models.encoder import _sinusoidal_embedding, _TransformerBlock


def test_parameter_count_at_paper_defaults():
    enc = PatchEncoder(sfreq=200)  # 1-s patches of 200 samples, F = 512, 8 blocks
    F, M, ff, depth = 512, 200, 512, 8
    block = (F * 3 * F + 3 * F) + (F * F + F) + (F * ff + ff) + (ff * F + F) + 2 * 2 * F
    expected = (M * F + F) + F + depth * block + 2 * F  # tokenizer, mask token, blocks, norm
    n_params = sum(p.numel() for p in enc.parameters())
    assert n_params == expected
    assert abs(n_params - 12.7e6) < 0.05e6  # "a transformer model with 12.7M parameters"


def test_sinusoidal_embedding_matches_formula_at_integer_and_continuous_positions():
    F = 16
    pos = torch.tensor([0.0, 1.0, 2.5, 17.25])
    pe = _sinusoidal_embedding(pos, F)
    for r, p in enumerate(pos.tolist()):
        for i in range(F // 2):
            freq = 1.0 / 10000 ** (2 * i / F)
            assert pe[r, 2 * i].item() == pytest.approx(math.sin(p * freq), abs=1e-6)
            assert pe[r, 2 * i + 1].item() == pytest.approx(math.cos(p * freq), abs=1e-6)


def test_patches_are_cut_where_the_starts_say():
    enc = PatchEncoder(sfreq=10, emb_dim=8, depth=1, n_heads=2, ff_dim=8)  # 10-sample patches
    T = 95
    ramp = torch.arange(T, dtype=torch.float32).repeat(3, 1, 1)  # (3, 1, T), value = index
    starts = torch.tensor([[0, 85, 7], [3, 3, 40], [50, 12, 1]])
    patches = enc.cut_patches(ramp, starts)
    expected = starts[..., None] + torch.arange(10)
    torch.testing.assert_close(patches, expected.to(torch.float32))
    grid = enc.fixed_starts(T)
    torch.testing.assert_close(grid, torch.arange(0, 86, 10))


def test_instance_normalisation_makes_tokens_invariant_to_gain_and_offset():
    enc = PatchEncoder(sfreq=10, emb_dim=8, depth=1, n_heads=2, ff_dim=8).eval()
    X = torch.randn(2, 1, 60)
    torch.testing.assert_close(enc(X), enc(3.5 * X - 20.0), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_windows_in_volts_are_normalised_like_float64(dtype):
    """EEG in volts (about 1e-5) has a variance (1e-10) that float16 cannot hold."""
    enc = PatchEncoder(sfreq=10, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    X = 2e-5 * torch.randn(3, 1, 60, dtype=torch.float64)
    reference = (X - X.mean(-1, keepdim=True)) / X.std(-1, unbiased=False, keepdim=True)
    out = enc.normalize(X.to(dtype))
    assert out.dtype == dtype and out.abs().amax() > 1.0  # not flushed to zero
    torch.testing.assert_close(out.double(), reference, atol=2e-2, rtol=2e-2)


def test_position_mask_token_replaces_the_embedding_only_where_masked():
    enc = PatchEncoder(sfreq=10, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    starts = torch.tensor([[0, 13, 27], [5, 40, 2]])
    pos_mask = torch.tensor([[True, False, True], [False, False, True]])
    pe = enc.position_embedding(starts, pos_mask)
    reference = _sinusoidal_embedding(starts / 10, 8)
    torch.testing.assert_close(pe[~pos_mask], reference[~pos_mask])
    torch.testing.assert_close(pe[pos_mask], enc.pos_mask_token.expand(3, 8))


def test_block_equals_torch_pre_ln_transformer_layer():
    F, H, ff = 16, 4, 24
    ours = _TransformerBlock(F, H, ff).double()
    ref = nn.TransformerEncoderLayer(
        F, H, ff, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
    ).double()
    ref.self_attn.in_proj_weight.data.copy_(ours.qkv.weight)
    ref.self_attn.in_proj_bias.data.copy_(ours.qkv.bias)
    ref.self_attn.out_proj.load_state_dict(ours.proj.state_dict())
    ref.linear1.load_state_dict(ours.ff[0].state_dict())
    ref.linear2.load_state_dict(ours.ff[3].state_dict())
    ref.norm1.load_state_dict(ours.norm1.state_dict())
    ref.norm2.load_state_dict(ours.norm2.state_dict())
    x = torch.randn(3, 7, F, dtype=torch.float64)
    key_mask = torch.zeros(3, 7, dtype=torch.bool)
    key_mask[:, 2] = True
    key_mask[1, 5] = True
    torch.testing.assert_close(ours(x), ref(x))
    torch.testing.assert_close(ours(x, key_mask), ref(x, src_key_padding_mask=key_mask))


def test_tokens_hidden_from_keys_do_not_influence_the_others():
    enc = PatchEncoder(sfreq=10, emb_dim=8, depth=2, n_heads=2, ff_dim=8).eval()
    tokens = torch.randn(2, 6, 8)
    key_mask = torch.zeros(2, 6, dtype=torch.bool)
    key_mask[:, [1, 4]] = True
    changed = tokens.clone()
    changed[:, [1, 4]] = torch.randn(2, 2, 8) * 10
    visible = ~key_mask
    torch.testing.assert_close(
        enc.encode(tokens, key_mask)[visible], enc.encode(changed, key_mask)[visible]
    )
    # without the key mask, the same change does reach the other tokens
    assert not torch.allclose(enc.encode(tokens)[visible], enc.encode(changed)[visible])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        pytest.param(dict(sfreq=10, n_chans=2), "'n_chans' must be 1", id="two-channels"),
        pytest.param(
            dict(sfreq=10, emb_dim=30, n_heads=4),
            "'n_heads' must divide the token size emb_dim=30",
            id="heads",
        ),
        pytest.param(dict(sfreq=10, patch_seconds=0), r"'patch_seconds' must lie in", id="patch"),
        pytest.param(dict(sfreq=10, depth=0), "'depth' must be >= 1", id="depth"),
    ],
)
def test_bad_encoder_arguments_raise(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        PatchEncoder(**kwargs)


@pytest.mark.parametrize(
    "shape, match",
    [
        pytest.param((4, 100), r"shape \(batch, 1, n_times\)", id="2d"),
        pytest.param((4, 3, 100), r"shape \(4, 3, 100\)", id="three-channels"),
        pytest.param((4, 1, 5), "fewer than one patch", id="too-short"),
    ],
)
def test_bad_encoder_input_raises(shape, match):
    enc = PatchEncoder(sfreq=10, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    with pytest.raises(ValueError, match=match):
        enc(torch.randn(*shape))


# -- one definition of the settings: PatchEncoderConfig ------------------------------------


def _near_flat(n=2, n_times=60, ratio=1e-4):
    """Windows whose standard deviation is ``ratio`` times their root mean square: flat
    for ``eps=1e-3`` (normalised to zeros), not for the default ``eps=1e-5``."""
    wiggle = torch.randn(n, 1, n_times)
    wiggle = wiggle / wiggle.std(dim=-1, unbiased=False, keepdim=True)
    return 5.0 + 5.0 * ratio * wiggle


def test_an_encoder_reads_and_gives_back_every_setting_of_its_config():
    from braindecode_pars.models.encoder_config import PatchEncoderConfig

    settings = dict(patch_seconds=2.0, emb_dim=8, depth=2, n_heads=2, ff_dim=12,
                    activation="relu", drop_prob=0.1, eps=1e-3, normalization="window+scale",
                    unit="V", amplitude_scale=2e-5, amplitude_clip=5.0, log_std_mean=-11.0,
                    log_std_std=0.5)  # fmt: skip
    enc = PatchEncoder(sfreq=10, **settings)
    assert enc.config == PatchEncoderConfig(**settings)
    assert enc.config.asdict() == settings
    assert all(isinstance(block.ff[1], nn.ReLU) for block in enc.blocks)
    assert enc.patch_size == 20
    # the class, its name, braindecode's dotted path: one setting
    for given in (nn.ReLU, "ReLU", "torch.nn.modules.activation.ReLU"):
        assert PatchEncoder(sfreq=10, **dict(settings, activation=given)).config == enc.config
    again = PatchEncoder.from_config(enc.config, sfreq=10)
    assert again.config == enc.config and again.sfreq == 10
    assert again.state_dict().keys() == enc.state_dict().keys()
    assert PatchEncoder.from_config(enc.get_config()).config == enc.config  # braindecode's dict
    assert PatchEncoder.from_config(enc.config, sfreq=20).patch_size == 40
    with pytest.raises(ValueError, match="'sfreq' must be given with a PatchEncoderConfig"):
        PatchEncoder.from_config(enc.config)
    with pytest.raises(ValueError, match="Allowed values are 'gelu' and 'relu', but got"):
        PatchEncoder(sfreq=10, activation=nn.SiLU)


def test_eps_decides_which_windows_count_as_flat():
    X = _near_flat()
    strict = PatchEncoder(sfreq=10, emb_dim=8, depth=1, n_heads=2, ff_dim=8, eps=1e-3)
    loose = PatchEncoder(sfreq=10, emb_dim=8, depth=1, n_heads=2, ff_dim=8)
    assert torch.equal(strict.normalize(X), torch.zeros_like(X))
    assert loose.normalize(X).abs().amax() > 1.0  # unit variance: the wiggle, amplified


def test_encoder_size_names_and_dicts_give_checked_configs():
    from braindecode_pars.models.encoder_config import ENCODER_SIZES, PatchEncoderConfig

    def encoder_size(size):
        return PatchEncoderConfig.from_size(size).asdict()

    small = encoder_size("small")
    assert small == PatchEncoderConfig(emb_dim=64, depth=4, n_heads=4, ff_dim=128).asdict()
    assert encoder_size("paper") == PatchEncoderConfig().asdict()  # the paper's defaults
    assert ENCODER_SIZES["paper"].items() <= encoder_size("paper").items()
    assert encoder_size({"depth": 2, "eps": 1e-3}) == dict(small, depth=2, eps=1e-3)
    with pytest.raises(ValueError, match=r"unknown keys \['heads'\]; allowed keys are"):
        encoder_size({"heads": 2})
    with pytest.raises(ValueError, match="Allowed values are 'small', 'paper'"):
        encoder_size("huge")
    with pytest.raises(ValueError, match="'n_heads' must divide the token size emb_dim=64"):
        encoder_size({"n_heads": 3})


def test_a_run_record_of_an_earlier_version_reads_with_the_defaults():
    from braindecode_pars.models.encoder_config import PatchEncoderConfig

    config = PatchEncoderConfig(emb_dim=8, depth=1, n_heads=2, ff_dim=8, activation="relu")
    record = config.record()
    assert record["encoder.activation"] == "relu" and record["encoder.eps"] == 1e-5
    assert PatchEncoderConfig.from_record(record) == config
    with pytest.raises(ValueError, match=r"Unknown encoder settings \['width'\]"):
        PatchEncoderConfig.from_record({**record, "encoder.width": 3})


def _signal_models():
    """Each braindecode model of the package, built without the signal arguments that it
    can do without (the encoder needs no window length; the others do)."""
    from braindecode_pars import MultiChannelClassifier
    from braindecode_pars.models.pretext.pars import PARS
    from braindecode_pars.oeb import PARSBackbone

    from ..conftest import TINY

    encoder = PatchEncoder(sfreq=100, **TINY)
    return {
        "PatchEncoder": encoder,
        "MultiChannelClassifier": MultiChannelClassifier(
            n_chans=2, n_times=200, n_outputs=3, encoder=encoder, n_heads=4
        ),
        "PARS": PARS(n_times=500, encoder=encoder, n_patches=4),
        "PARSBackbone": PARSBackbone(n_chans=2, n_times=200, n_outputs=3, encoder=encoder),
    }


_MISSING = ["n_outputs", "chs_info", "n_times", "input_window_seconds", "input_shape"]


@pytest.mark.parametrize(
    "model_name, missing",
    [
        pytest.param("PatchEncoder", _MISSING, id="encoder"),
        pytest.param("MultiChannelClassifier", ["chs_info"], id="multichannel"),
        pytest.param("PARS", ["n_outputs", "chs_info"], id="pars"),
        pytest.param("PARSBackbone", ["chs_info"], id="backbone"),
    ],
)
def test_signal_attributes_left_undefined_raise_attribute_error(model_name, missing):
    """braindecode's mixin raises ValueError for a signal attribute neither given nor
    inferable; the package's models raise an AttributeError that is also a ValueError,
    so that getattr(model, name, None) is None and code catching ValueError still works,
    with braindecode's message."""
    model = _signal_models()[model_name]
    messages = {
        "n_outputs": "n_outputs not specified",
        "chs_info": "chs_info not specified",
        "n_times": "n_times could not be inferred",
        "input_window_seconds": "input_window_seconds could not be inferred",
        "input_shape": "n_times could not be inferred",
    }
    for name in missing:
        assert getattr(model, name, None) is None, name
        assert not hasattr(model, name), name
        with pytest.raises(AttributeError, match=f"{model_name}: {messages[name]}"):
            getattr(model, name)
        with pytest.raises(ValueError, match=messages[name]):
            getattr(model, name)
    for name in set(_MISSING) - set(missing):  # those given or inferable still read back
        assert getattr(model, name) is not None, name
    assert model.sfreq == 100
    with pytest.raises(AttributeError, match="has no attribute 'not_a_setting'"):
        model.not_a_setting  # noqa: B018  (other missing attributes: torch's own error)
