"""The encoder shipped with the package, the Hugging Face layout, and real EEG in any unit."""

import json

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSProbe, PatchEncoder
from braindecode_pars.datasets import load_bundled_eegmat
from braindecode_pars.hub.folders import (
    _save_pretrained_encoder,
    export_run,
    load_encoder,
    load_pretext_model,
    pretrained_path,
    save_encoder,
)
from braindecode_pars.models.pretext.base import pretext_skill
from braindecode_pars.models.pretext.pars import PARS
from braindecode_pars.weights import PRETRAINED_ENCODERS

from .._learning import SEED, learned
from ..conftest import TINY
from ..ramp_fixtures import ramp_run


@pytest.fixture(scope="module")
def eegmat_window():
    windows = load_bundled_eegmat(subjects=[1])
    return torch.as_tensor(np.asarray(windows[0][0], dtype=np.float32))  # (19, 1000), µV


@pytest.mark.parametrize("name", ["pars-small", "pars-small-v2"])
def test_the_shipped_encoder_loads_by_name_and_its_card_tells_its_skill(name):
    assert name in PRETRAINED_ENCODERS
    encoder = load_encoder(name)
    assert isinstance(encoder, PatchEncoder) and encoder.sfreq == 100 and encoder.emb_dim == 64
    folder = pretrained_path(name)
    card = (folder / "README.md").read_text()
    for needed in ("Open Data Commons", "skill", "braindecode-pars pretrain", "EEGMAT"):
        assert needed in card
    history = json.loads((folder / "pretrain_history.json").read_text())
    assert history[-1]["valid_skill"] >= 0.3  # the model card's promise
    assert sum(f.stat().st_size for f in folder.iterdir()) < 5e6  # shipped small
    with pytest.raises(ValueError, match="Allowed values are 'pars-small', 'pars-small-v2'"):
        pretrained_path("pars-huge")


def test_the_second_encoder_card_states_its_corpus_and_held_out_skill():
    """pars-small-v2 is validated on whole recordings left out of pretraining, on at
    least 85 channel-hours of at least 90 people, and its card says so."""
    folder = pretrained_path("pars-small-v2")
    config = json.loads((folder / "run_config.json").read_text())
    assert config["data.channel_hours"] >= 85 and config["data.people"] >= 90
    history = json.loads((folder / "pretrain_history.json").read_text())
    assert {row["valid_split"] for row in history} == {"recordings"}
    card = (folder / "README.md").read_text()
    for needed in ("BSD", "Muse", "held out by recording", "channel-hours", "94 people"):
        assert needed in card


@pytest.mark.parametrize("name", ["pars-small", "pars-small-v2"])
def test_the_shipped_model_predicts_shifts_on_a_subject_it_never_saw(eegmat_window, name):
    model = load_pretext_model(name)
    X = eegmat_window[:, None, : model.n_times]  # every channel of a test subject
    with torch.no_grad():
        out = model(X, generator=torch.Generator().manual_seed(SEED))
    skill = float(pretext_skill(out["loss"], out["trivial_loss"]))
    learned(skill, above=0.2, what="pretext skill, the shipped model")
    untrained = PARS(n_times=model.n_times, sfreq=100, emb_dim=64, depth=4, n_heads=4, ff_dim=128)
    with torch.no_grad():
        out = untrained(X, generator=torch.Generator().manual_seed(SEED))
    skill = float(pretext_skill(out["loss"], out["trivial_loss"]))
    learned(skill, below=0.05, what="pretext skill, an untrained model")


def test_save_pretrained_round_trips_offline(tmp_path):
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=100, **TINY).eval()
    model = PARS(n_times=500, sfreq=100, n_patches=6, encoder=encoder)
    spec = dict(method="pars", n_times=500, sfreq=100, n_patches=6, **TINY)
    _save_pretrained_encoder(encoder, tmp_path / "enc", pretext=model, pretext_spec=spec)
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
    micro = eegmat_window[:, None]
    assert 1 < micro.std() < 1e3  # microvolts, as the package's readers give them
    with torch.no_grad():
        torch.testing.assert_close(encoder(micro * 1e-6), encoder(micro), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "head",
    # the head's own path in both units; with the default augmentation the losses differ
    # by up to about 1 % after 3 epochs (masked, near-zero patches meet the
    # normalisation's epsilon at different scales)
    [PARSProbe(), PARSFineTuner(strategy="frozen", max_epochs=3, augmentation=None, verbose=0)],
    ids=["probe", "frozen"],
)
def test_the_classifier_trains_alike_in_volts_and_microvolts(head):
    windows = load_bundled_eegmat(subjects=[0, 2])
    from braindecode_pars.io.windows import read_windows

    data = read_windows(windows)
    X, y, sfreq = data.X, data.y, data.sfreq
    params = dict(encoder="pars-small", head=head, sfreq=sfreq, verbose=0, random_state=0)
    volts = PARSClassifier(**params).fit(X, y)
    micro = PARSClassifier(**params).fit(X * 1e6, y)
    if isinstance(volts.head_, PARSFineTuner):
        np.testing.assert_allclose(
            volts.head_.history_[:, "train_loss"], micro.head_.history_[:, "train_loss"], rtol=1e-3
        )
    # the probe: log band power moves by a constant, covariances scale, the encoder
    # normalises each channel; the standardised features are the same up to float32
    # rounding (up to 1.7e-4 in a probability on this project's CPU, by its BLAS kernels)
    np.testing.assert_allclose(
        volts.predict_proba(X[:8]), micro.predict_proba(X[:8] * 1e6), atol=5e-4
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
    from braindecode_pars.pretraining.net import PretrainNet

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


def test_an_exported_run_keeps_its_decoder_heads(tmp_path):
    # nn.MultiheadAttention's weights have the same shapes for any number of heads: a
    # pretext model rebuilt with the default 8 would load these weights and compute
    # something else
    run = tmp_path / "run"
    ramp_run(run, max_epochs=1, valid_fraction=None, decoder_heads=2)
    folder = export_run(run, tmp_path / "out")
    assert json.loads((folder / "pretext.json").read_text())["decoder_heads"] == 2
    assert "| pair decoder's attention heads | 2 |" in (folder / "README.md").read_text()
    model = load_pretext_model(folder)
    assert model.decoder.n_heads == 2
    trained = PARS(n_times=300, sfreq=10.0, n_patches=12, pos_mask_ratio=0.5,
                   decoder_heads=2, **TINY)  # fmt: skip
    pointer = json.loads((run / "state.json").read_text())
    trained.load_state_dict(torch.load(run / pointer["state"] / "params.pt", weights_only=True))
    X = torch.randn(4, 1, 300)
    expected = trained.eval()(X, generator=torch.Generator().manual_seed(0))["theta_hat"]
    got = model(X, generator=torch.Generator().manual_seed(0))["theta_hat"]
    torch.testing.assert_close(got, expected)
    # every shipped PARS encoder records its decoder's heads (the weights' shapes do not)
    for name in ("pars-small", "pars-small-v2"):
        shipped = json.loads((pretrained_path(name) / "pretext.json").read_text())
        assert shipped["decoder_heads"] == load_pretext_model(name).decoder.n_heads == 8


def test_loading_the_shipped_encoder_prints_nothing(capsys):
    from braindecode_pars.hub.folders import load_encoder

    encoder = load_encoder("pars-small")
    assert encoder.emb_dim == 64 and not encoder.training
    assert capsys.readouterr().out == ""


# -- the model card and the files of the Hugging Face layout ------------------------------

#: What huggingface_hub's generic card says, which no card of ours may say.
_STUB = ("More Information Needed", "pushed to the Hub", "PytorchModelHubMixin")


def _saved_history(run_dir):
    """The run's history as its last state saved it, read without the hub module."""
    pointer = json.loads((run_dir / "state.json").read_text())
    return json.loads((run_dir / pointer["state"] / "history.json").read_text())


@pytest.fixture(scope="module")
def exported_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("card")
    ramp_run(root / "run")
    return root / "run", export_run(root / "run", root / "tiny-pars", license="cc-by-4.0")


def test_an_exported_run_gets_a_model_card_with_its_own_numbers(exported_run):
    from huggingface_hub import ModelCard

    run, folder = exported_run
    card = (folder / "README.md").read_text()
    for stub in _STUB:
        assert stub not in card
    header = ModelCard.load(folder / "README.md").data
    assert header.library_name == "braindecode" and header.license == "cc-by-4.0"
    assert {"eeg", "self-supervised", "pars"} <= set(header.tags)

    config = json.loads((run / "config.json").read_text())
    history = _saved_history(run)
    validated = [row for row in history if "valid_skill" in row]  # on the cadence
    valid, epochs = [r["valid_skill"] for r in validated], [r["epoch"] for r in validated]
    encoder = load_encoder(folder)
    n_params = sum(p.numel() for p in encoder.parameters())
    expected = [
        "PARS",  # the pretext task and its settings
        f"| patches per window | {config['n_patches']} |",
        f"| share of patches whose position is masked (gamma_pos) | {config['pos_mask_ratio']} |",
        f"| parameters | {n_params:,} |",  # the encoder
        f"| features (`emb_dim`) | {TINY['emb_dim']} |",
        "| sampling rate | 10 Hz |",
        "| patch length | 1 s (10 samples) |",
        "| window length | 30 s (300 samples) |",
        f"- windows: {config['data.n_windows']} ",  # the data
        f"`{config['data.fingerprint']}`",
        "- recordings: not recorded",
        "- preprocessing: not recorded",
        "- held out for validation: whole recordings, drawn at random until their windows "
        "made at least 25 % of the windows and at most twice that (`valid_fraction` 0.25)",
        "**finished**, 3 of 3 epochs",  # the budget
        f"- learning rate: {config['lr']:g}",
        f"- weight decay: {config['weight_decay']:g}",
        f"- batch size: {config['batch_size']}",
        f"held-out (validation) skill: **{valid[-1]:.3f}** at the last epoch ({epochs[-1]})",
        f"best {max(valid):.3f} (epoch {epochs[int(np.argmax(valid))]})",
        "load_encoder(folder)",  # how to load it
        "PARSClassifier(encoder=folder, sfreq=10)",
        "PARSFineTuner(encoder=folder, sfreq=10)",
        "load_pretext_model(folder)",
        "The command that made this run is not recorded",  # how to reproduce it
        "`cc-by-4.0`",
    ]
    for needed in expected:
        assert needed in card, needed
    assert "training skill" not in card


def test_an_exported_run_holds_one_copy_of_the_weights(exported_run):
    _, folder = exported_run
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md", "config.json", "model.safetensors", "pretext.json",
        "pretext.safetensors", "pretrain_history.json", "run_config.json",
    ]  # fmt: skip


@pytest.mark.filterwarnings("ignore:Pretraining ended with a pretext skill")
def test_the_card_of_an_unfinished_run_says_so_and_names_its_command(tmp_path, caplog):
    run = tmp_path / "run"
    ramp_run(run, max_epochs=4, valid_fraction=None, max_minutes=0)  # stops after epoch 1
    command = "braindecode-pars pretrain --store store --out run --epochs 4"
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "command": command}))
    with caplog.at_level("WARNING", logger="braindecode_pars.hub.folders"):
        folder = export_run(run, tmp_path / "out")
    assert "unfinished run (1 of 4 epochs)" in caplog.text
    card = (folder / "README.md").read_text()
    train = _saved_history(run)[-1]["train_skill"]
    assert "**unfinished**, 1 of 4 epochs done" in card
    assert "training skill (on the training batches: no windows were held out" in card
    assert f"{train:.3f} at the last epoch (1)" in card
    assert "held-out (validation) skill" not in card
    assert "- held out for validation: none" in card
    public = "braindecode-pars pretrain --store <store> --out <out> --epochs 4"  # no paths
    assert f"```bash\n{public}\n```" in card
    assert "license" not in card.split("---")[1]  # not stated, so not in the header
    assert "Not stated for the weights" in card


def test_save_pretrained_writes_no_duplicate_weights_and_a_real_card(tmp_path):
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=100, **TINY).eval()
    encoder.save_pretrained(tmp_path / "direct")  # braindecode's / huggingface_hub's call
    folder = tmp_path / "direct"
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md", "config.json", "model.safetensors",
    ]  # fmt: skip
    card = (folder / "README.md").read_text()
    for stub in _STUB:
        assert stub not in card
    n_params = sum(p.numel() for p in encoder.parameters())
    for needed in (
        "library_name: braindecode", f"| parameters | {n_params:,} |",
        "| sampling rate | 100 Hz |", "load_encoder(folder)", "## Training\n\nNot recorded",
    ):  # fmt: skip
        assert needed in card, needed
    # config.json is braindecode's: its loader and ours read the folder back
    import braindecode

    config = json.loads((folder / "config.json").read_text())
    assert config == {**encoder.get_config(), "braindecode_version": braindecode.__version__}
    X = torch.randn(2, 1, 300)
    torch.testing.assert_close(PatchEncoder.from_pretrained(str(folder)).eval()(X), encoder(X))
    torch.testing.assert_close(load_encoder(folder)(X), encoder(X))


def test_saving_again_removes_the_pickled_weights_of_earlier_versions(tmp_path):
    encoder = PatchEncoder(sfreq=100, **TINY)
    (tmp_path / "pytorch_model.bin").write_bytes(b"weights of an earlier save")
    _save_pretrained_encoder(encoder, tmp_path, license="bsd-3-clause")
    assert not (tmp_path / "pytorch_model.bin").exists()
    card = (tmp_path / "README.md").read_text()
    assert "license: bsd-3-clause" in card and "Not recorded (an encoder saved without" in card


def test_the_aligned_probe_reads_the_subjects_of_braindecode_windows():
    """Windows of four subjects: fit and predict read each window's subject from the
    metadata, as arrays with explicit groups do; all of them as one group differ."""
    from braindecode_pars.io.windows import read_windows

    windows = load_bundled_eegmat(subjects=[0, 2, 3, 5])
    data = read_windows(windows)
    subjects = windows.get_metadata()["subject"].to_numpy()
    params = dict(encoder="pars-small", head=PARSProbe(align="groups"), verbose=0)
    from_windows = PARSClassifier(**params).fit(windows)
    from_arrays = PARSClassifier(sfreq=data.sfreq, **params).fit(data.X, data.y, subjects)
    expected = from_arrays.predict_proba(data.X, groups=subjects)
    np.testing.assert_allclose(from_windows.predict_proba(windows), expected, atol=1e-6)
    one_group = from_arrays.predict_proba(data.X)
    assert np.abs(one_group - expected).max() > 1e-3


# -- every setting of the encoder survives every way of saving it --------------------------


def _windows_where_every_setting_shows(n_times=300):
    """Random windows and near-flat ones: eps=1e-3 zeros the near-flat ones (the default
    1e-5 does not), and ReLU and GELU differ on all of them."""
    rng = torch.Generator().manual_seed(0)
    wiggle = torch.randn(2, 1, n_times, generator=rng)
    near_flat = 5.0 + 5e-4 * wiggle / wiggle.std(dim=-1, keepdim=True)
    return torch.cat([torch.randn(2, 1, n_times, generator=rng), near_flat])


def _relu_eps_encoder(sfreq=10.0):
    torch.manual_seed(2)
    return PatchEncoder(sfreq=sfreq, activation="relu", eps=1e-3, **TINY).eval()


def _assert_same_encoder(loaded, encoder, X):
    assert loaded.config == encoder.config and loaded.sfreq == encoder.sfreq
    assert loaded.config.activation == "relu" and loaded.config.eps == 1e-3
    with torch.no_grad():
        assert torch.equal(loaded.eval()(X), encoder(X))


def test_eps_and_relu_round_trip_through_save_encoder_and_save_pretrained(tmp_path):
    from braindecode_pars.hub.folders import save_encoder

    encoder, X = _relu_eps_encoder(), _windows_where_every_setting_shows()
    # the windows tell the settings apart: the same weights with the defaults differ
    default = PatchEncoder(sfreq=10.0, **TINY).eval()
    default.load_state_dict(encoder.state_dict())
    with torch.no_grad():
        assert not torch.allclose(default(X), encoder(X))
    save_encoder(encoder, tmp_path / "enc.pt")
    saved = torch.load(tmp_path / "enc.pt", weights_only=True)["config"]
    assert saved == {"sfreq": 10.0, **encoder.config.asdict()}
    _assert_same_encoder(load_encoder(tmp_path / "enc.pt"), encoder, X)
    encoder.save_pretrained(tmp_path / "folder")
    _assert_same_encoder(load_encoder(tmp_path / "folder"), encoder, X)
    _assert_same_encoder(PatchEncoder.from_pretrained(str(tmp_path / "folder")), encoder, X)


def test_eps_and_relu_round_trip_through_an_exported_run(tmp_path):
    from braindecode_pars.pretraining.net import PretrainNet

    encoder, X = _relu_eps_encoder(), _windows_where_every_setting_shows()
    model = PARS(n_times=300, n_patches=6, encoder=encoder)
    config = PretrainNet(model, progress_bar=False).initialize().run_config()
    assert config["encoder.activation"] == "relu" and config["encoder.eps"] == 1e-3
    run = tmp_path / "run"
    state = run / "state-000001"
    state.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    (run / "state.json").write_text(json.dumps({"state": state.name, "epoch": 1}))
    torch.save(model.state_dict(), state / "params.pt")
    (state / "history.json").write_text(json.dumps([{"epoch": 1}]))

    folder = export_run(run, tmp_path / "out")
    _assert_same_encoder(load_encoder(folder), encoder, X)
    pretext = load_pretext_model(folder)
    _assert_same_encoder(pretext.encoder, encoder, X)
    assert "| activation | ReLU |" in (folder / "README.md").read_text()


@pytest.mark.parametrize("how", ["name", "file", "pretext model"])
def test_loading_leaves_the_global_generator_as_it_was(tmp_path, how):
    """A seeded run draws the same numbers after loading an encoder or a pretext model
    as without it (the initial weights a new module draws are overwritten by the loaded
    ones)."""
    if how == "file":
        source = tmp_path / "enc.pt"
        save_encoder(load_encoder("pars-small"), source)
    load = {"pretext model": lambda: load_pretext_model("pars-small").encoder}.get(
        how, lambda: load_encoder(source if how == "file" else "pars-small")
    )
    torch.manual_seed(0)
    expected = torch.rand(4)
    torch.manual_seed(0)
    encoder = load()
    np.testing.assert_array_equal(torch.rand(4).numpy(), expected.numpy())
    reference = load_encoder("pars-small").state_dict()
    for key, value in encoder.state_dict().items():  # the weights are still the saved ones
        torch.testing.assert_close(value, reference[key], rtol=0, atol=0)


@pytest.fixture
def hub_unreachable(monkeypatch):
    """The Hugging Face Hub and the network fail the test if asked, with HF_HUB_OFFLINE
    unset (huggingface_hub would otherwise go online and retry for about 30 s)."""
    import socket

    import huggingface_hub
    import huggingface_hub.file_download
    import huggingface_hub.hub_mixin

    def reached(*args, **kwargs):
        pytest.fail(f"the Hub or the network was asked: {args} {kwargs}")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for module in (huggingface_hub, huggingface_hub.file_download, huggingface_hub.hub_mixin):
        monkeypatch.setattr(module, "hf_hub_download", reached)
    monkeypatch.setattr(socket.socket, "connect", reached)


@pytest.mark.parametrize("name", PRETRAINED_ENCODERS)
def test_from_pretrained_reads_a_shipped_name_offline_at_once(hub_unreachable, capsys, name):
    """braindecode's reflex, ``PatchEncoder.from_pretrained(name)``, gives the shipped
    encoder from the package, without the Hub, in well under 5 s and silently."""
    import time

    start = time.perf_counter()
    encoder = PatchEncoder.from_pretrained(name)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0, f"{elapsed:.1f} s"
    assert capsys.readouterr().out == ""
    assert not encoder.training
    reference = load_encoder(name).state_dict()
    assert encoder.state_dict().keys() == reference.keys()
    for key, value in encoder.state_dict().items():
        assert torch.equal(value, reference[key]), key


def test_from_pretrained_reads_a_folder_of_a_shipped_name_first(
    hub_unreachable, tmp_path, monkeypatch
):
    """A folder named like a shipped encoder in the working directory is read instead, as
    huggingface_hub reads any existing folder."""
    torch.manual_seed(0)
    own = PatchEncoder(sfreq=100, **TINY).eval()
    own.save_pretrained(tmp_path / "pars-small-v2")
    monkeypatch.chdir(tmp_path)
    loaded = PatchEncoder.from_pretrained("pars-small-v2")
    assert loaded.emb_dim == TINY["emb_dim"]
    X = torch.randn(2, 1, 300)
    torch.testing.assert_close(loaded(X), own(X))
