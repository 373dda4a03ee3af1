"""The encoder's input normalisation (``PatchEncoderConfig.normalization``): each mode
against a reference computed by hand in float64, what a gain change moves, the saved
config (old files read as ``"window"``), the refusal of windows in another unit, the
compiled path, MAE's targets, and the float16 store's scales applied on read."""

import json
import math
from pathlib import Path

import mne
import numpy as np
import pandas as pd
import pytest
import torch
from braindecode.datasets import BaseConcatDataset, RawDataset
from braindecode.preprocessing import create_fixed_length_windows

from braindecode_pars import MAE, MultiChannelClassifier, PatchEncoder, load_encoder, save_encoder
from braindecode_pars.features import EncoderFeatures
from braindecode_pars.models.encoder import instance_normalize, log_std_statistics
from braindecode_pars.models.encoder_config import (
    NORMALIZATION_SETTINGS,
    NORMALIZATIONS,
    PatchEncoderConfig,
)
from braindecode_pars.pretraining import SingleChannelWindows
from braindecode_pars.pretraining.disk_order import DiskOrderBatches
from braindecode_pars.store import write_window_store

pytestmark = pytest.mark.usefixtures("one_thread")

SFREQ = 100.0
SMALL = dict(emb_dim=8, depth=1, n_heads=2, ff_dim=8)
#: The settings of each mode in these tests (the amplitude-aware ones with statistics
#: that are not the defaults, so that a default left in place shows).
MODES = {
    "window": {},
    "window+scale": dict(log_std_mean=math.log(10.0), log_std_std=0.5),
    "fixed": dict(amplitude_scale=10.0, amplitude_clip=2.0),
}
RUN = Path(__file__).parent / "data" / "run_009646d"


def encoder(mode, **settings):
    torch.manual_seed(0)
    return PatchEncoder(sfreq=SFREQ, **SMALL, normalization=mode, **{**MODES[mode], **settings})


def sine_windows(amplitude=30.0, offset=5.0, n_times=400):
    """Two windows (batch, 1, n_times) of whole periods of a 5 Hz and a 2 Hz sine of the
    given amplitude in µV plus an offset: each window's mean is ``offset`` and its
    standard deviation ``amplitude / sqrt(2)``, exactly."""
    t = np.arange(n_times) / SFREQ
    rows = [amplitude * np.sin(2 * np.pi * f * t) + offset for f in (5.0, 2.0)]
    return np.asarray(rows)[:, None, :]  # float64


def expected_tokens(enc, x, mode, amplitude, starts):
    """The tokens of ``x`` (float64 windows) by hand: the normalised window of ``mode``
    from its known mean and standard deviation, cut at ``starts``, through the
    tokenizer's weights, plus the scale embedding of its log standard deviation."""
    std = amplitude / math.sqrt(2.0)
    centred = x - x.mean(axis=-1, keepdims=True)
    if mode == "fixed":
        normalized = np.clip(centred / MODES["fixed"]["amplitude_scale"], -2.0, 2.0)
    else:
        normalized = centred / std
    patches = np.stack([normalized[:, 0, s : s + enc.patch_size] for s in starts], axis=1)
    W = enc.tokenizer.weight.detach().double().numpy()
    b = enc.tokenizer.bias.detach().double().numpy()
    tokens = patches @ W.T + b
    if mode == "window+scale":
        z = (math.log(std) - math.log(10.0)) / 0.5
        w = enc.scale_embedding.weight.detach().double().numpy()[:, 0]
        tokens = tokens + z * w + enc.scale_embedding.bias.detach().double().numpy()
    return tokens


# -- each mode against a reference ---------------------------------------------------------
@pytest.mark.parametrize("mode", NORMALIZATIONS)
def test_a_known_scale_gives_a_known_token_in_every_mode(mode):
    enc = encoder(mode)
    x = sine_windows(amplitude=30.0)
    starts = torch.tensor([0, 37, 150, 300])
    out = enc.tokenize(torch.as_tensor(x, dtype=torch.float32), starts)
    expected = expected_tokens(enc, x, mode, 30.0, starts.tolist())
    np.testing.assert_allclose(out.detach().double().numpy(), expected, rtol=0, atol=2e-5)
    if mode == "fixed":  # 30 µV / 10 µV = 3 clipped at 2: the clip is in the reference
        assert np.isclose(np.abs(enc.normalize(torch.as_tensor(x)).numpy()).max(), 2.0)


def test_a_gain_change_moves_the_amplitude_aware_features_and_not_the_windows():
    x = torch.as_tensor(sine_windows(amplitude=30.0), dtype=torch.float32)
    x = x + 3.0 * torch.randn_like(x)
    moved = {}
    for mode in NORMALIZATIONS:
        enc = encoder(mode).eval()
        with torch.no_grad():
            once, twice = enc(x), enc(2.0 * x)
        moved[mode] = (twice - once).abs().max().item() / once.abs().max().item()
        with torch.no_grad():  # an offset moves no mode: each centres the window
            torch.testing.assert_close(enc(x + 50.0), once, rtol=1e-4, atol=1e-4)
    assert moved["window"] < 1e-5
    assert moved["window+scale"] > 1e-2 and moved["fixed"] > 1e-2, moved


def test_a_flat_window_gets_the_scale_embedding_of_the_corpus_mean():
    """A window without signal (all zeros, as a dropped channel) normalises to zeros and
    stands at the corpus' mean log std (0 after standardising), not at log(0)."""
    enc = encoder("window+scale")
    tokens = enc.tokenize(torch.zeros(1, 1, 400), torch.tensor([0, 100]))
    expected = enc.tokenizer.bias + enc.scale_embedding.bias
    torch.testing.assert_close(tokens, expected.expand(1, 2, -1), rtol=0, atol=1e-6)


def test_log_std_statistics_of_a_corpus_of_known_amplitudes():
    rng = np.random.default_rng(0)
    stds = np.exp(rng.normal(2.0, 0.7, size=400))  # log-normal amplitudes, µV
    X = rng.standard_normal((400, 2000)) * stds[:, None]
    X[:3] = 0.0  # flat windows are left out
    mean, std = log_std_statistics(X)
    sample = np.log(X[3:].std(axis=-1))
    assert mean == pytest.approx(sample.mean(), abs=1e-9)
    assert std == pytest.approx(sample.std(), abs=1e-9)
    with pytest.raises(ValueError, match="no window with signal"):
        log_std_statistics(np.zeros((2, 100)))


# -- the config, saved and loaded ----------------------------------------------------------
@pytest.mark.parametrize("mode", NORMALIZATIONS)
def test_the_mode_and_its_settings_round_trip_through_every_saved_form(mode, tmp_path):
    enc = encoder(mode, unit="uV").eval()
    X = torch.as_tensor(sine_windows(), dtype=torch.float32)
    with torch.no_grad():
        reference = enc(X)
    enc.save_pretrained(tmp_path / "folder")
    config = json.loads((tmp_path / "folder" / "config.json").read_text())
    assert config["normalization"] == mode
    assert config["amplitude_scale"] == enc.config.amplitude_scale  # not None: resolved
    save_encoder(enc, tmp_path / "encoder.pt")
    for loaded in (
        load_encoder(tmp_path / "folder"),
        PatchEncoder.from_pretrained(tmp_path / "folder"),
        load_encoder(tmp_path / "encoder.pt"),
    ):
        assert loaded.config == enc.config
        with torch.no_grad():
            torch.testing.assert_close(loaded(X), reference, rtol=0, atol=0)
    card = (tmp_path / "folder" / "README.md").read_text()
    assert f"| input normalisation (`normalization`) | `{mode}` |" in card
    if mode == "window":
        assert "any unit (per-window normalisation" in card
    else:
        assert "| input unit (`unit`) | uV |" in card and "in uV only" in card
    if mode == "window+scale":
        assert f"(`log_std_mean`, ln uV) | {math.log(10.0):g} |" in card
    # the multi-channel model over it keeps the mode, and saves it
    model = MultiChannelClassifier.from_pretrained(tmp_path / "folder", n_outputs=2, n_chans=3)
    assert model.encoder.config == enc.config
    rebuilt = MultiChannelClassifier.from_config(model.get_config())
    assert rebuilt.encoder.config == enc.config


@pytest.mark.parametrize("name", ["pars-small", "pars-small-v2"])
def test_the_shipped_encoders_saved_before_the_setting_load_as_window(name):
    from braindecode_pars.hub.folders import pretrained_path

    saved = json.loads((pretrained_path(name) / "config.json").read_text())
    assert "normalization" not in saved  # a file written before the setting existed
    enc = load_encoder(name)
    assert enc.normalization == "window" and not hasattr(enc, "scale_embedding")
    x = torch.randn(2, 1, 1000)
    with torch.no_grad():  # blind to gain, in any unit: what the file has always meant
        torch.testing.assert_close(enc(x * 1e-6), enc(x), rtol=1e-4, atol=1e-4)


def test_a_run_saved_before_the_setting_loads_as_window():
    saved = torch.load(RUN / "encoder.pt", weights_only=True)
    assert "normalization" not in saved["config"]
    assert load_encoder(RUN / "encoder.pt").normalization == "window"
    record = json.loads((RUN / "config.json").read_text())
    assert "encoder.normalization" not in record
    assert PatchEncoderConfig.from_record(record).normalization == "window"


def test_bad_settings_are_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="'normalization' parameter. Allowed values are "
                       "'window', 'window\\+scale' and 'fixed', but got 'channels'"):  # fmt: skip
        PatchEncoderConfig(normalization="channels")
    with pytest.raises(ValueError, match="'unit' parameter. Allowed values are 'uV' and 'V'"):
        PatchEncoderConfig(unit="mV")
    with pytest.raises(ValueError, match=r"'amplitude_scale' must lie in \(0, inf\)"):
        PatchEncoderConfig(normalization="fixed", amplitude_scale=-1.0)
    with pytest.raises(ValueError, match="'log_std_std' must be a number, but got nan"):
        PatchEncoderConfig(log_std_std=float("nan"))
    # the unit's defaults: 10 µV
    assert PatchEncoderConfig(unit="V").amplitude_scale == 1e-5
    assert PatchEncoderConfig(unit="V").log_std_mean == pytest.approx(math.log(1e-5))
    # the settings a run comparing normalisations sets: every field after the size's
    assert PatchEncoderConfig.fields()[-len(NORMALIZATION_SETTINGS) :] == NORMALIZATION_SETTINGS


# -- the unit ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["window+scale", "fixed"])
def test_windows_in_another_unit_are_refused(mode):
    micro = torch.as_tensor(sine_windows(amplitude=30.0), dtype=torch.float32)
    reads_micro = encoder(mode)
    reads_micro(micro)  # its unit: accepted
    refused = (
        r"'X' holds windows whose median standard deviation \(2.12e-05, over 2 windows with "
        r"signal\) lies outside \[0.001, 100000\] uV.*They look like 'V': multiply them by 1e\+06"
    )
    with pytest.raises(ValueError, match=refused):
        reads_micro(micro * 1e-6)  # volts, as MNE holds them
    reads_volts = PatchEncoder(sfreq=SFREQ, **SMALL, normalization=mode, unit="V")
    reads_volts(micro * 1e-6)
    with pytest.raises(ValueError, match=r"outside \[1e-09, 0.1\] V.*look like 'uV'"):
        reads_volts(micro)
    # windows without signal (a dropped channel) are not a unit, nor is one dead window
    # (rounding noise, far below the range) among windows with signal: it reads as flat
    zero = torch.zeros(1, 1, micro.shape[-1])
    dead = 1e-15 * torch.randn(1, 1, micro.shape[-1], generator=torch.Generator().manual_seed(0))
    reads_micro.eval()
    with torch.no_grad():
        torch.testing.assert_close(
            reads_micro(torch.cat([micro, dead]))[-1], reads_micro(torch.cat([micro, zero]))[-1]
        )
    with pytest.raises(ValueError, match="They look like 'V'"):  # the typical window decides
        reads_micro(torch.cat([micro * 1e-6, micro * 1e-6, micro]))
    # every caller of the encoder reaches the check: the multi-channel model...
    model = MultiChannelClassifier(n_outputs=2, n_chans=2, sfreq=SFREQ, encoder=reads_micro)
    with pytest.raises(ValueError, match="They look like 'V'"):
        model(micro.reshape(1, 2, -1) * 1e-6)
    # ... and the frozen features
    features = EncoderFeatures(reads_micro, sfreq=SFREQ).fit(micro.numpy())
    with pytest.raises(ValueError, match="They look like 'V'"):
        features.transform(micro.numpy() * 1e-6)


def test_the_window_mode_reads_any_unit():
    enc = encoder("window").eval()
    x = torch.as_tensor(sine_windows(), dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(enc(x * 1e-6), enc(x), rtol=1e-4, atol=1e-4)


# -- the compiled path ---------------------------------------------------------------------
@pytest.mark.parametrize("mode", NORMALIZATIONS)
def test_the_compiled_encoder_gives_the_eager_output_in_one_graph(mode):
    enc = encoder(mode).eval()
    x = torch.as_tensor(sine_windows(), dtype=torch.float32) + torch.randn(2, 1, 400)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(enc)(x)
    assert explained.graph_break_count == 0, [b.reason for b in explained.break_reasons]
    compiled = torch.compile(enc, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), enc(x), rtol=1e-5, atol=1e-5)
    if mode != "window":  # the unit check is in the graph: an assertion, no host read
        with pytest.raises(RuntimeError, match="outside \\[0.001, 100000\\] uV"):
            compiled(x * 1e-6)


# -- MAE's targets ---------------------------------------------------------------------------
def test_mae_targets_are_the_instance_normalised_patches_in_every_mode():
    x = torch.as_tensor(sine_windows(amplitude=30.0), dtype=torch.float32)
    x = x + 2.0 * torch.randn_like(x)
    targets = {}
    for mode in NORMALIZATIONS:
        model = MAE(n_times=400, sfreq=SFREQ, encoder=encoder(mode))
        targets[mode] = model.targets(x)
        out = model(x)  # the loss is taken against the same targets
        assert torch.isfinite(out["loss"])
    assert torch.equal(targets["window"], targets["window+scale"])
    assert torch.equal(targets["window"], targets["fixed"])
    # by hand, in float64: each window zero-mean, unit-variance, cut on the 1-s grid
    xd = x.double().numpy()
    normalized = (xd - xd.mean(-1, keepdims=True)) / xd.std(-1, keepdims=True)
    by_hand = normalized[:, 0].reshape(2, 4, 100)
    np.testing.assert_allclose(targets["fixed"].double().numpy(), by_hand, atol=1e-5)
    torch.testing.assert_close(
        targets["fixed"], instance_normalize(x).reshape(2, 4, 100), rtol=0, atol=0
    )


# -- the float16 store's scales --------------------------------------------------------------
def _windows(amplitudes, n_times=4000, window=400):
    """braindecode windows of single-channel recordings in µV, one amplitude each (their
    float16 scales then differ), non-overlapping 4-s windows."""
    rng = np.random.default_rng(0)
    datasets = []
    for k, amplitude in enumerate(amplitudes):
        info = mne.create_info(["Cz"], SFREQ, "eeg")
        data = amplitude * rng.standard_normal((1, n_times))
        raw = mne.io.RawArray(data, info, verbose=False)
        datasets.append(RawDataset(raw, pd.Series({"subject": k})))
    return create_fixed_length_windows(
        BaseConcatDataset(datasets), window_size_samples=window,
        window_stride_samples=window, on_last_window="drop",
    )  # fmt: skip


def test_a_float16_store_reads_back_the_amplitudes_of_a_float32_one(tmp_path):
    amplitudes = [0.5, 20.0, 3000.0]  # µV: three powers of two apart and more
    windows = _windows(amplitudes)
    write_window_store(windows, tmp_path / "f32", dtype="float32")
    write_window_store(windows, tmp_path / "f16", dtype="float16")
    v32 = SingleChannelWindows.from_store(tmp_path / "f32", max_shift=0)
    v16 = SingleChannelWindows.from_store(tmp_path / "f16", max_shift=0)
    # the file holds each recording scaled by its own power of two ...
    stored = np.load(tmp_path / "f16" / "index.npz")["scales"]
    assert len(set(stored.tolist())) == 3 and all(math.log2(s).is_integer() for s in stored)
    # ... and both ways of reading a store divide it back out
    indices = np.arange(len(v32))
    X32 = v32.fixed_draws(indices).tensors[0]
    X16 = v16.fixed_draws(indices).tensors[0]
    torch.testing.assert_close(X16, X32, rtol=2.0**-10, atol=0)
    disk32 = torch.cat([X for X, _ in DiskOrderBatches(v32, batch_size=8, seed=3)])
    disk16 = torch.cat([X for X, _ in DiskOrderBatches(v16, batch_size=8, seed=3)])
    torch.testing.assert_close(disk16, disk32, rtol=2.0**-10, atol=0)
    # so an amplitude-aware encoder sees the recording's amplitude, not the stored one
    per_window = X16.double().std(dim=-1).squeeze(1).numpy()
    recording = v16.index[:, 0]
    for k, amplitude in enumerate(amplitudes):
        assert np.median(per_window[recording == k]) == pytest.approx(amplitude, rel=0.1)
    for mode in ("window+scale", "fixed"):
        enc = encoder(mode, amplitude_clip=math.inf).eval()
        with torch.no_grad():
            torch.testing.assert_close(enc(X16), enc(X32), rtol=1e-2, atol=1e-2)


# -- the unit checked once by pretraining --------------------------------------------------
@pytest.mark.parametrize("mode", ["window+scale", "fixed"])
def test_the_host_check_refuses_a_sample_in_another_unit_as_the_forward_does(mode):
    micro = sine_windows(amplitude=30.0)
    enc = encoder(mode)
    enc.check_unit(micro)  # its unit: accepted
    with pytest.raises(ValueError, match=r"median standard deviation \(2.12e-05.*look like 'V'"):
        enc.check_unit(micro * 1e-6)
    encoder("window").check_unit(micro * 1e-6)  # reads no amplitude: nothing to refuse
