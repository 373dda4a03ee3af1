"""MultiChannelClassifier (models/multichannel.py): the paper's fine-tuning model."""

import pytest
import torch

from braindecode_pars import MultiChannelClassifier, PatchEncoder

from ._learning import SEED, learned
from .conftest import TINY


def _model(**kwargs):
    params = dict(
        n_outputs=3,
        n_chans=5,
        n_times=300,
        sfreq=100,
        emb_dim=16,
        depth=1,
        encoder_n_heads=2,
        ff_dim=16,
        n_heads=2,
    )
    params.update(kwargs)
    return MultiChannelClassifier(**params)


def test_every_channel_goes_through_the_same_encoder_with_fixed_patches_and_full_pe():
    model = _model().eval()
    X = torch.randn(2, 5, 300)
    tokens = model.spatial_tokens(X)
    for c in range(5):
        expected = model.encoder(X[:, c : c + 1]).mean(dim=1)  # 3 patches of 1 s
        torch.testing.assert_close(tokens[:, c], expected)


def test_spatial_dropout_hides_tokens_only_in_training_and_keeps_one():
    model = _model(n_chans=4, spatial_drop_prob=0.9)
    model.train()
    drops = torch.stack([model.spatial_dropout(64, 4, "cpu") for _ in range(20)])
    assert torch.all((~drops).sum(-1) >= 1)
    assert 0.6 < drops.float().mean() < 0.8  # ~0.9 of 4 minus the one always kept
    model.eval()
    assert model.spatial_dropout(8, 4, "cpu") is None
    X = torch.randn(3, 4, 300)
    torch.testing.assert_close(model(X), model(X))  # deterministic in eval


def test_pretrained_encoder_is_used_and_head_can_be_reset():
    enc = PatchEncoder(sfreq=100, **TINY)
    model = MultiChannelClassifier(n_outputs=2, n_chans=3, n_times=200, encoder=enc, n_heads=4)
    assert model.encoder is enc and model.sfreq == 100
    assert model(torch.randn(4, 3, 200), return_features=True)["features"].shape == (4, 32)
    model.reset_head(6)
    assert model(torch.randn(4, 3, 200)).shape == (4, 6) and model.n_outputs == 6
    with pytest.raises(ValueError, match="pretrained at sfreq=100 Hz but the data has sfreq=200"):
        MultiChannelClassifier(n_outputs=2, n_chans=3, n_times=200, sfreq=200, encoder=enc)


def _which_channel_task(n, T, seed):
    """The class is which of two channels carries a 10 Hz rhythm (the other: 3 Hz)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(T) / 100
    y = torch.randint(0, 2, (n,), generator=g)
    X = torch.randn(n, 2, T, generator=g) * 0.3
    X[torch.arange(n), y] += torch.sin(2 * torch.pi * 10 * t)
    X[torch.arange(n), 1 - y] += torch.sin(2 * torch.pi * 3 * t)
    return X, y


@pytest.mark.slow
def test_channel_embedding_lets_the_model_tell_channels_apart():
    # both classes hold the same set of spatial tokens: only channel identity separates
    # them, so a channel-blind head stays at chance on new data. 150 steps: after 60 the
    # model with the embedding had not found it at half the seeds (0.51 to 1.0 over 0-9)
    X, y = _which_channel_task(256, 200, seed=SEED)
    X_test, y_test = _which_channel_task(256, 200, seed=SEED + 1)
    accs = {}
    for flag in (True, False):
        torch.manual_seed(SEED + 1)
        model = _model(
            n_outputs=2, n_chans=2, n_times=200, channel_embedding=flag, spatial_drop_prob=0.0
        )
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        for _ in range(150):
            loss = torch.nn.functional.cross_entropy(model(X), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            accs[flag] = (model(X_test).argmax(1) == y_test).float().mean().item()
    learned(accs[True], above=0.9, what="with the channel embedding")
    learned(accs[False], below=0.65, what="without it")


def test_bad_input_shapes_raise():
    with pytest.raises(ValueError, match=r"shape \(batch, 5, 300\), but got \(2, 4, 300\)"):
        _model()(torch.randn(2, 4, 300))
    with pytest.raises(ValueError, match="shorter than one patch"):
        _model(n_times=50)


def test_mean_and_std_pooling_maps_both_statistics_of_each_channel():
    model = _model(pooling="mean+std").eval()
    X = torch.randn(2, 5, 300)
    tokens = model.spatial_tokens(X)
    assert tokens.shape == (2, 5, 16)
    for c in range(5):
        patches = model.encoder(X[:, c : c + 1])  # (2, 3 patches, 16)
        pooled = torch.cat([patches.mean(dim=1), patches.std(dim=1, unbiased=False)], dim=-1)
        torch.testing.assert_close(tokens[:, c], model.pool_proj(pooled))
    assert model(X).shape == (2, 3)
    with pytest.raises(ValueError, match=r"'pooling'.*'mean' and 'mean\+std', but got 'max'"):
        _model(pooling="max")
