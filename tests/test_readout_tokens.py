"""EncoderFeatures reading tokens as PARS pretraining drew them (issue 76, item 2):
positions withheld (the position-mask token in place of the positional embedding) and
overlapping patches (a patch stride shorter than the patch), each checked against the
encoder called by hand or a loop over the patches written out."""

import itertools

import numpy as np
import pytest
import torch
from sklearn.base import clone

from braindecode_pars import PARSClassifier, PARSProbe, PatchEncoder
from braindecode_pars.features.blocks import EncoderFeatures
from braindecode_pars.features.recipe import ProbeRecipe
from braindecode_pars.models.encoder import _sinusoidal_embedding

pytestmark = pytest.mark.usefixtures("one_thread")
SFREQ = 100


def _encoder(depth=2, seed=0):
    torch.manual_seed(seed)
    encoder = PatchEncoder(sfreq=SFREQ, emb_dim=16, depth=depth, n_heads=2, ff_dim=32)
    return encoder.eval()


def _windows(n_windows=4, n_chans=2, seconds=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_windows, n_chans, seconds * SFREQ)).astype(np.float32)


def _mean_std(tokens):
    """(batch, n_tokens, emb_dim) -> the default readout, (batch, 2 emb_dim)."""
    return np.concatenate([tokens.mean(axis=1), tokens.std(axis=1)], axis=1)


def _by_channel(X, read):
    """``read`` of each channel's (batch, 1, n_times) tensor, channels side by side."""
    with torch.no_grad():
        return np.concatenate([read(torch.as_tensor(X[:, [c]])) for c in range(X.shape[1])], 1)


# -- positions withheld ----------------------------------------------------------------
def test_positions_withheld_equal_the_encoder_with_every_position_masked():
    encoder, X = _encoder(), _windows()
    withheld = EncoderFeatures(
        encoder, sfreq=SFREQ, patch_stride_seconds=1.0, pos_mask_ratio=1.0
    ).fit_transform(X)

    def by_hand(x):
        pos_mask = torch.ones(len(x), 4, dtype=torch.bool)  # 4 one-second patches
        return _mean_std(encoder(x, pos_mask=pos_mask).numpy())

    np.testing.assert_allclose(withheld, _by_channel(X, by_hand), rtol=1e-4, atol=1e-5)
    # the positions change the features: the default ratio reads them
    default = EncoderFeatures(encoder, sfreq=SFREQ, patch_stride_seconds=1.0).fit_transform(X)
    assert not np.allclose(default, withheld, atol=1e-3)
    # every block's tokens too, through the final LayerNorm ("blocks")
    blocks = EncoderFeatures(
        encoder, sfreq=SFREQ, readout="blocks", patch_stride_seconds=1.0, pos_mask_ratio=1.0
    )

    def blocks_by_hand(x):
        starts = torch.arange(0, 301, 100)
        tokens = encoder.tokenizer(encoder.cut_patches(encoder.normalize(x), starts))
        tokens = tokens + encoder.pos_mask_token  # no position anywhere
        out = []
        for block in encoder.blocks:
            tokens = block(tokens)
            out.append(encoder.norm(tokens).mean(dim=1).numpy())
        return np.concatenate(out, axis=1)

    np.testing.assert_allclose(
        blocks.fit_transform(X), _by_channel(X, blocks_by_hand), rtol=1e-4, atol=1e-5
    )


def test_a_share_of_positions_withheld_is_one_draw_for_every_window():
    """0.8 of 5 tokens: 4 masked, the same 4 for every window and channel: the features
    equal the encoder's with exactly one of the 5 masks of 4 tokens, and a window's
    features do not depend on the other windows of the call."""
    encoder, X = _encoder(seed=1), _windows(n_windows=5, seconds=5, seed=1)
    step = EncoderFeatures(
        encoder, sfreq=SFREQ, patch_stride_seconds=1.0, pos_mask_ratio=0.8, batch_size=2
    )
    features = step.fit_transform(X)
    matches = []
    for masked in itertools.combinations(range(5), 4):
        pos_mask = torch.zeros(len(X), 5, dtype=torch.bool)
        pos_mask[:, list(masked)] = True
        expected = _by_channel(X, lambda x, m=pos_mask: _mean_std(encoder(x, pos_mask=m).numpy()))
        if np.allclose(features, expected, rtol=1e-4, atol=1e-5):
            matches.append(masked)
    assert len(matches) == 1
    np.testing.assert_allclose(step.transform(X[3:4]), features[3:4], rtol=1e-5, atol=1e-6)
    again = EncoderFeatures(
        encoder, sfreq=SFREQ, patch_stride_seconds=1.0, pos_mask_ratio=0.8
    ).fit_transform(X)
    np.testing.assert_array_equal(again, features)


# -- overlapping patches ---------------------------------------------------------------
def _naive_tokens(encoder, x, stride, every_block=False):
    """Tokens of a (batch, 1, n_times) tensor by a loop over patch starts every
    ``stride`` samples: normalised window, each patch cut and projected, the sinusoidal
    embedding of its start in patch units added, then the blocks."""
    M = encoder.patch_size
    normalized = encoder.normalize(x)[:, 0]
    starts, s = [], 0
    while s + M <= x.shape[-1]:
        starts.append(s)
        s += stride
    patches = torch.stack([normalized[:, s : s + M] for s in starts], dim=1)
    positions = torch.tensor(starts, dtype=torch.float32) / M
    tokens = encoder.tokenizer(patches) + _sinusoidal_embedding(positions, encoder.emb_dim)
    out = []
    for block in encoder.blocks:
        tokens = block(tokens)
        out.append(encoder.norm(tokens))
    return starts, out if every_block else out[-1]


@pytest.mark.parametrize("seconds", [4, 6])
def test_a_half_patch_stride_reads_2n_minus_1_tokens_every_half_second(seconds):
    encoder, X = _encoder(), _windows(seconds=seconds, seed=seconds)
    step = EncoderFeatures(encoder, sfreq=SFREQ, patch_stride_seconds=0.5)
    features = step.fit_transform(X)
    starts, _ = _naive_tokens(encoder, torch.as_tensor(X[:1, :1]), 50)
    assert step.n_tokens_ == len(starts) == 2 * seconds - 1
    np.testing.assert_array_equal(np.diff(starts) / SFREQ, 0.5)
    expected = _by_channel(X, lambda x: _mean_std(_naive_tokens(encoder, x, 50)[1].numpy()))
    np.testing.assert_allclose(features, expected, rtol=1e-4, atol=1e-5)
    # the default stride is half the patch (the patch-density rule's choice): the same
    default = EncoderFeatures(encoder, sfreq=SFREQ).fit(X)
    assert (default.stride_, default.n_tokens_) == (50, 2 * seconds - 1)
    np.testing.assert_array_equal(default.transform(X), features)
    # a one-patch stride: n tokens, one a second, non-overlapping as fine-tuning reads them
    one = EncoderFeatures(encoder, sfreq=SFREQ, patch_stride_seconds=1.0).fit(X)
    by_loop = _by_channel(X, lambda x: _mean_std(_naive_tokens(encoder, x, 100)[1].numpy()))
    assert one.n_tokens_ == seconds
    np.testing.assert_allclose(one.transform(X), by_loop, rtol=1e-4, atol=1e-5)


def test_stride_with_crops_and_every_block():
    """Crops of 2 s of a 4-s window at a 0.5-s stride: 3 tokens in each, 6 in all, the
    crops encoded on their own; "blocks" reads each block's tokens of the same patches."""
    encoder, X = _encoder(), _windows()
    step = EncoderFeatures(
        encoder, sfreq=SFREQ, readout="blocks", crop_seconds=2, patch_stride_seconds=0.5
    )
    features = step.fit_transform(X)
    assert step.n_tokens_ == 6

    def by_hand(x):
        crops = [_naive_tokens(encoder, x[..., s : s + 200], 50, True)[1] for s in (0, 200)]
        per_block = [torch.cat(parts, dim=1).mean(dim=1) for parts in zip(*crops, strict=True)]
        return torch.cat(per_block, dim=1).numpy()

    np.testing.assert_allclose(features, _by_channel(X, by_hand), rtol=1e-4, atol=1e-5)


# -- the parameters' contract ------------------------------------------------------------
@pytest.mark.parametrize(
    "params, error, match",
    [
        (
            {"pos_mask_ratio": 1.5},
            ValueError,
            r"'pos_mask_ratio' must lie in \[0, 1\], but got 1\.5",
        ),
        ({"pos_mask_ratio": "all"}, TypeError, r"'pos_mask_ratio' must be a number, but got str"),
        (
            {"patch_stride_seconds": 0},
            ValueError,
            r"'patch_stride_seconds' must lie in \(0, inf\], but got 0",
        ),
        (
            {"patch_stride_seconds": 1.5},
            ValueError,
            r"'patch_stride_seconds' parameter: it must lie in \(0, 1\] .* whole number of "
            r"samples at the encoder's sfreq=100 Hz, but got 1\.5 \(150 samples\)",
        ),
        (
            {"patch_stride_seconds": 0.255},
            ValueError,
            r"'patch_stride_seconds' parameter: .* but got 0\.255 \(25\.5 samples\)",
        ),
    ],
)
def test_bad_values_are_refused_naming_the_parameter(params, error, match):
    X = _windows()
    with pytest.raises(error, match=match):
        EncoderFeatures(_encoder(), sfreq=SFREQ, **params).fit(X)
    if "pos_mask_ratio" in params or params["patch_stride_seconds"] == 0:
        with pytest.raises(error, match=match):  # before any window is read
            PARSProbe(_encoder(), **params).fit(None)
        with pytest.raises(error, match=match):
            ProbeRecipe(**params)


def test_the_probe_and_the_classifier_reach_the_readout_options():
    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 10)
    X = rng.standard_normal((20, 2, 300)) * (1 + y[:, None, None])
    probe = PARSProbe(
        _encoder(), patch_stride_seconds=0.5, pos_mask_ratio=1.0, block_weights=None, sfreq=SFREQ
    )  # every block fitted
    step = probe.fit(X, y).extractor_.steps["encoder"]
    assert (step.stride_, step.pos_mask_ratio, step.n_tokens_) == (50, 1.0, 5)
    np.testing.assert_array_equal(
        step.transform(X),
        EncoderFeatures(_encoder(), sfreq=SFREQ, patch_stride_seconds=0.5, pos_mask_ratio=1.0)
        .fit_transform(X),
    )  # fmt: skip
    defaults = PARSProbe().get_params()
    assert defaults["patch_stride_seconds"] is None and defaults["pos_mask_ratio"] == 0.0
    clf = PARSClassifier(_encoder(), PARSProbe(), sfreq=SFREQ)
    clf.set_params(head__pos_mask_ratio=0.8, head__patch_stride_seconds=0.5)
    copy = clone(clf)
    params = copy.get_params()
    assert (params["head__pos_mask_ratio"], params["head__patch_stride_seconds"]) == (0.8, 0.5)
