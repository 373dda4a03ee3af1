"""The encoder shipped with the package, the Hugging Face layout, and real EEG in any unit."""

import json

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PatchEncoder
from braindecode_pars.datasets.bundled_eegmat import load_bundled_eegmat
from braindecode_pars.hub import (
    PRETRAINED_ENCODERS,
    export_run,
    load_encoder,
    load_pretext_model,
    pretrained_path,
    save_pretrained_encoder,
)
from braindecode_pars.models import PARS
from braindecode_pars.models.pretext import pretext_skill

from .conftest import TINY


@pytest.fixture(scope="module")
def eegmat_window():
    windows = load_bundled_eegmat(subjects=[1])
    return torch.as_tensor(np.asarray(windows[0][0], dtype=np.float32))  # (19, 1000), volts


def test_the_shipped_encoder_loads_by_name_and_its_card_tells_its_skill():
    assert "pars-small" in PRETRAINED_ENCODERS
    encoder = load_encoder("pars-small")
    assert isinstance(encoder, PatchEncoder) and encoder.sfreq == 100 and encoder.emb_dim == 64
    folder = pretrained_path("pars-small")
    card = (folder / "README.md").read_text()
    for needed in ("Open Data Commons", "skill", "braindecode-pars pretrain", "EEGMAT"):
        assert needed in card
    history = json.loads((folder / "pretrain_history.json").read_text())
    assert history[-1]["valid_skill"] >= 0.3  # the model card's promise
    assert sum(f.stat().st_size for f in folder.iterdir()) < 5e6  # shipped small
    with pytest.raises(ValueError, match="Allowed values are 'pars-small'"):
        pretrained_path("pars-huge")


def test_the_shipped_model_predicts_shifts_on_a_subject_it_never_saw(eegmat_window):
    model = load_pretext_model("pars-small")
    X = eegmat_window[:, None, : model.n_times]  # every channel of a test subject
    with torch.no_grad():
        out = model(X, generator=torch.Generator().manual_seed(0))
    assert float(pretext_skill(out["loss"], out["trivial_loss"])) > 0.2
    untrained = PARS(n_times=model.n_times, sfreq=100, emb_dim=64, depth=4, n_heads=4, ff_dim=128)
    with torch.no_grad():
        out = untrained(X, generator=torch.Generator().manual_seed(0))
    assert float(pretext_skill(out["loss"], out["trivial_loss"])) < 0.05


def test_save_pretrained_round_trips_offline(tmp_path):
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=100, **TINY).eval()
    model = PARS(n_times=500, sfreq=100, n_patches=6, encoder=encoder)
    spec = dict(method="pars", n_times=500, sfreq=100, n_patches=6, **TINY)
    save_pretrained_encoder(encoder, tmp_path / "enc", pretext=model, pretext_spec=spec)
    assert {"config.json", "model.safetensors"} <= {p.name for p in (tmp_path / "enc").iterdir()}
    X = torch.randn(2, 1, 500)
    again = load_encoder(tmp_path / "enc")
    torch.testing.assert_close(again(X), encoder(X))
    same = PatchEncoder.from_pretrained(str(tmp_path / "enc"))  # braindecode's own loader
    torch.testing.assert_close(same.eval()(X), encoder(X))
    pretext = load_pretext_model(tmp_path / "enc")
    g = torch.Generator().manual_seed(3)
    torch.testing.assert_close(
        pretext(X, generator=g)["loss"],
        model.eval()(X, generator=torch.Generator().manual_seed(3))["loss"],
    )
    with pytest.raises(ValueError, match="without config.json"):
        load_encoder(tmp_path)


def test_real_eeg_in_volts_and_microvolts_gives_the_same_tokens(eegmat_window):
    encoder = load_encoder("pars-small")
    volts = eegmat_window[:, None]
    assert 1e-7 < volts.std() < 1e-3  # MNE's unit
    with torch.no_grad():
        torch.testing.assert_close(encoder(volts), encoder(volts * 1e6), rtol=1e-4, atol=1e-4)


def test_the_classifier_trains_alike_in_volts_and_microvolts():
    windows = load_bundled_eegmat(subjects=[0, 2])
    from braindecode_pars.datasets.adapters import read_windows

    data = read_windows(windows)
    X, y, sfreq = data.X, data.y, data.sfreq
    params = dict(
        pretrained_encoder="pars-small", max_epochs=3, sfreq=sfreq, verbose=0, random_state=0
    )
    volts = PARSClassifier(**params).fit(X, y)
    micro = PARSClassifier(**params).fit(X * 1e6, y)
    np.testing.assert_allclose(
        volts.history_[:, "train_loss"], micro.history_[:, "train_loss"], rtol=1e-3
    )
    np.testing.assert_allclose(
        volts.predict_proba(X[:8]), micro.predict_proba(X[:8] * 1e6), atol=1e-4
    )


@pytest.mark.parametrize(
    "prefix",
    [
        pytest.param("", id="plain"),
        pytest.param("_orig_mod.", id="compile"),
        pytest.param("module.", id="ddp"),
        pytest.param("module._orig_mod.", id="ddp-of-compiled"),
    ],
)
def test_a_run_trained_compiled_or_under_torchrun_exports(tmp_path, prefix):
    from braindecode_pars.training import PretrainNet

    torch.manual_seed(1)
    model = PARS(n_times=500, sfreq=100, n_patches=6, **TINY)
    config = PretrainNet(model, progress_bar=False).initialize().run_config()
    run = tmp_path / "run"
    state = run / "state-000002"
    state.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    (run / "state.json").write_text(json.dumps({"state": state.name, "epoch": 2}))
    wrapped = {prefix + k: v.clone() for k, v in model.state_dict().items()}
    torch.save(wrapped, state / "params.pt")
    (state / "history.json").write_text(json.dumps([{"epoch": 1, "batches": [{}]}]))

    folder = export_run(run, tmp_path / "out")

    encoder = load_encoder(folder)
    expected = model.encoder.state_dict()
    assert encoder.state_dict().keys() == expected.keys()
    for name, value in encoder.state_dict().items():
        assert torch.equal(value, expected[name]), name
    pretext = load_pretext_model(folder)
    for name, value in pretext.state_dict().items():
        assert torch.equal(value, model.state_dict()[name]), name
    assert json.loads((folder / "pretrain_history.json").read_text()) == [{"epoch": 1}]


def test_loading_the_shipped_encoder_prints_nothing(capsys):
    from braindecode_pars.hub import load_encoder

    encoder = load_encoder("pars-small")
    assert encoder.emb_dim == 64 and not encoder.training
    assert capsys.readouterr().out == ""
