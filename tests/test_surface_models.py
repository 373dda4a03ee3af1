"""The models keep braindecode's conventions: ``return_features=True`` gives braindecode's
dict, and ``MultiChannelClassifier.from_pretrained`` builds the classifier over a shipped
encoder with a new head, offline; a saved classifier loads back as braindecode's models do.
"""

import json

import mne
import pytest
import torch
from braindecode.models import BIOT

from braindecode_pars import MultiChannelClassifier, PatchEncoder
from braindecode_pars.weights import DEFAULT_ENCODER, PRETRAINED_ENCODERS

from .conftest import TINY


@pytest.fixture
def offline(monkeypatch):
    """No network: huggingface_hub refuses any Hub request (read when it is imported, so
    its constant is set too)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


def _state_equal(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.filterwarnings("ignore:This model has only been trained")  # BIOT's, of its rate
@pytest.mark.filterwarnings("ignore:A window was not provided")  # BIOT's STFT
def test_return_features_gives_the_dict_of_braindecode_models():
    # braindecode's own model with a pooled embedding answers with the same keys
    reference = BIOT(n_chans=3, n_times=200, n_outputs=2, sfreq=200).eval()
    expected = reference(torch.randn(2, 3, 200), return_features=True)
    model = MultiChannelClassifier(
        n_outputs=4, n_chans=3, n_times=200, encoder=PatchEncoder(sfreq=100, **TINY), n_heads=4
    ).eval()
    X = torch.randn(5, 3, 200)
    out = model(X, return_features=True)
    assert isinstance(out, dict) and out.keys() == expected.keys() == {"features", "cls_token"}
    assert out["cls_token"] is None and out["features"].shape == (5, TINY["emb_dim"])
    # the features are what the head reads: the logits are final_layer of them
    torch.testing.assert_close(model.final_layer(out["features"]), model(X))


def test_from_pretrained_builds_the_classifier_over_the_shipped_encoder_offline(offline):
    model = MultiChannelClassifier.from_pretrained(DEFAULT_ENCODER, n_outputs=2, n_chans=3)
    shipped = PatchEncoder.from_pretrained(DEFAULT_ENCODER)
    assert _state_equal(model.encoder.state_dict(), shipped.state_dict())
    assert model.final_layer.out_features == 2 and model.n_outputs == 2
    assert model.n_chans == 3 and model.sfreq == shipped.sfreq == 100
    assert not model.training  # as braindecode's from_pretrained returns models
    # no window length given: windows of any length of one patch or more
    for n_times in (100, 1000, 1234):
        assert model(torch.randn(2, 3, n_times)).shape == (2, 2)
    with pytest.raises(ValueError, match="shorter than one patch of the encoder"):
        model(torch.randn(2, 3, 99))
    # the other shipped encoder, and a montage given as chs_info
    info = mne.create_info(["C3", "Cz", "C4", "Pz"], 100.0, "eeg")
    other = MultiChannelClassifier.from_pretrained(
        PRETRAINED_ENCODERS[0], n_outputs=3, chs_info=info["chs"], n_times=500
    )
    shipped = PatchEncoder.from_pretrained(PRETRAINED_ENCODERS[0])
    assert _state_equal(other.encoder.state_dict(), shipped.state_dict())
    assert other.n_chans == 4 and other(torch.randn(1, 4, 500)).shape == (1, 3)


def test_from_pretrained_refuses_what_the_encoder_fixes_and_a_missing_head_size(offline):
    with pytest.raises(ValueError, match=r"\['emb_dim'\] cannot be given with a pretrained"):
        MultiChannelClassifier.from_pretrained(DEFAULT_ENCODER, n_outputs=2, n_chans=3, emb_dim=8)
    with pytest.raises(ValueError, match="'n_outputs' must be given"):
        MultiChannelClassifier.from_pretrained(DEFAULT_ENCODER, n_chans=3)


def test_a_saved_classifier_loads_back_with_its_weights_and_a_new_head(offline, tmp_path):
    encoder = PatchEncoder(sfreq=50, **TINY)
    model = MultiChannelClassifier(n_outputs=3, n_chans=2, n_times=100, encoder=encoder, n_heads=4)
    model.save_pretrained(tmp_path / "clf")
    config = json.loads((tmp_path / "clf" / "config.json").read_text())
    assert config["encoder"] is None and config["sfreq"] == 50  # the encoder's settings
    assert (config["emb_dim"], config["depth"], config["encoder_n_heads"]) == (32, 1, 4)
    loaded = MultiChannelClassifier.from_pretrained(tmp_path / "clf")
    assert _state_equal(loaded.state_dict(), model.state_dict())
    X = torch.randn(4, 2, 100)
    torch.testing.assert_close(loaded(X), model.eval()(X))
    # a new head of another size, as braindecode's from_pretrained gives one
    resized = MultiChannelClassifier.from_pretrained(tmp_path / "clf", n_outputs=5)
    assert resized(X).shape == (4, 5)
    assert _state_equal(resized.encoder.state_dict(), model.encoder.state_dict())
    # a saved encoder's folder (not a classifier's) gives a classifier over that encoder
    encoder.save_pretrained(tmp_path / "enc")
    over = MultiChannelClassifier.from_pretrained(tmp_path / "enc", n_outputs=2, n_chans=6)
    assert _state_equal(over.encoder.state_dict(), encoder.state_dict())
    assert over(torch.randn(1, 6, 100)).shape == (1, 2)
