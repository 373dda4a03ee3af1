"""A shipped encoder in OpenEEG-Bench, offline: OpenEEG-Bench's own code builds the model
from its class path, loads the checkpoint and runs its strategies on windows built here."""

import numpy as np
import pytest
import torch

pytest.importorskip("open_eeg_bench", reason="needs the [oeb] extra (pip install .[oeb])")

import mne  # noqa: E402
from braindecode.datasets import BaseConcatDataset, RawDataset  # noqa: E402
from braindecode.preprocessing import create_windows_from_events  # noqa: E402
from open_eeg_bench import benchmark  # noqa: E402
from open_eeg_bench.experiment import Experiment  # noqa: E402
from open_eeg_bench.finetuning import Frozen, FullFinetune, LoRA  # noqa: E402
from open_eeg_bench.head import FlattenHead, LinearHead  # noqa: E402
from open_eeg_bench.training import EarlyStopping, RidgeProbingTraining, Training  # noqa: E402

from braindecode_pars import load_encoder  # noqa: E402
from braindecode_pars.features.blocks import EncoderFeatures  # noqa: E402
from braindecode_pars.oeb import (  # noqa: E402
    PARSBackbone,
    benchmark_kwargs,
    local_dataset,
    pretrained_backbone,
    save_checkpoint,
)
from braindecode_pars.weights import DEFAULT_ENCODER  # noqa: E402

from ._learning import SEED, learned  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

SFREQ = 100.0
CHANNELS = ["C3", "Cz", "C4"]
SECONDS = 4
FREQS = (8.0, 20.0)  # class 0: an 8-Hz rhythm, class 1: a 20-Hz one


def subject_recording(subject, n_per_class=12):
    """One subject's recording, in volts: trials of noise plus a rhythm whose frequency is
    the class (instance normalisation removes amplitude, not the spectrum's shape); the
    draws of another learning seed are others for every subject."""
    rng = np.random.default_rng(100 * SEED + subject)
    t = np.arange(int(SECONDS * SFREQ)) / SFREQ
    labels = np.tile([0, 1], n_per_class)
    trials = [
        rng.standard_normal((len(CHANNELS), t.size))
        + 3 * np.sin(2 * np.pi * FREQS[c] * t + rng.uniform(0, 2 * np.pi, (len(CHANNELS), 1)))
        for c in labels
    ]
    raw = mne.io.RawArray(
        np.concatenate(trials, axis=1) * 1e-5,
        mne.create_info(CHANNELS, SFREQ, "eeg"),
        verbose="error",
    )
    onsets = np.arange(len(labels)) * SECONDS
    raw.set_annotations(mne.Annotations(onsets, SECONDS, [str(c) for c in labels]))
    return RawDataset(raw, description={"subject": subject})


@pytest.fixture(scope="module")
def windows():
    """Six subjects' 4-s windows at 100 Hz, as braindecode windows them from events."""
    recordings = BaseConcatDataset([subject_recording(s) for s in range(1, 7)])
    return create_windows_from_events(
        recordings,
        mapping={"0": 0, "1": 1},
        trial_start_offset_samples=0,
        trial_stop_offset_samples=0,
        preload=True,
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_checkpoint("pars-small", tmp_path_factory.mktemp("oeb") / "pars-small.pt")


def windows_array(windows):
    return np.stack([windows[i][0] for i in range(len(windows))]).astype(np.float32)


def test_oeb_builds_the_model_and_loads_the_checkpoint(checkpoint):
    """OpenEEG-Bench's PretrainedBackbone builds PARSBackbone from its class path with the
    signal arguments and loads the weights from the checkpoint: the model starts from an
    untrained encoder of pars-small's size and ends with pars-small's weights."""
    shipped = load_encoder("pars-small")
    backbone = pretrained_backbone(
        "pars-small", checkpoint, model_kwargs={"encoder": shipped.config.asdict()}
    )
    assert backbone.model_cls == "braindecode_pars.oeb.PARSBackbone"
    chs_info = mne.create_info(CHANNELS, SFREQ, "eeg")["chs"]
    model = backbone.build(n_chans=3, n_times=400, n_outputs=2, sfreq=SFREQ, chs_info=chs_info)
    assert isinstance(model, PARSBackbone)
    assert (model.n_chans, model.n_times, model.n_outputs, model.sfreq) == (3, 400, 2, SFREQ)
    assert isinstance(model.final_layer, torch.nn.Linear)
    for name, value in shipped.state_dict().items():
        assert torch.equal(model.encoder.state_dict()[name], value), name


def test_features_equal_the_librarys_encoder_features(windows):
    """Without final_layer (OpenEEG-Bench's ridge probe flattens instead) the model gives
    the features of the library's EncoderFeatures over non-overlapping patches."""
    X = windows_array(windows)[:16]
    expected = EncoderFeatures(
        DEFAULT_ENCODER, sfreq=SFREQ, readout="mean", patch_stride_seconds=1.0
    ).fit_transform(X)  # non-overlapping patches, as the backbone's forward reads them
    model = PARSBackbone(n_outputs=2, n_chans=3, n_times=400, sfreq=SFREQ).eval()
    FlattenHead().apply(model, 2, "final_layer")
    with torch.no_grad():
        features = model(torch.from_numpy(X)).numpy()
    assert features.shape == (16, 3 * 64)
    np.testing.assert_allclose(features, expected, rtol=1e-5, atol=1e-5)


def test_rates_other_than_the_encoders_are_refused():
    with pytest.raises(ValueError, match="sfreq=250"):
        PARSBackbone(n_outputs=2, n_chans=3, n_times=1000, sfreq=250.0)


def sgd(max_epochs, lr):
    """OpenEEG-Bench's gradient training, shortened: no early stopping."""
    return Training(
        max_epochs=max_epochs, lr=lr, batch_size=16, early_stopping=EarlyStopping(enabled=False)
    )


#: OpenEEG-Bench's strategies that need no network: head, fine-tuning, training, and the
#: method its adapter statistics report.
STRATEGIES = {
    "ridge_probe": (FlattenHead(), Frozen(), RidgeProbingTraining(), "frozen"),
    "frozen": (LinearHead(), Frozen(), sgd(15, 1e-2), "frozen"),
    "lora": (LinearHead(), LoRA(), sgd(4, 1e-3), "lora"),
    "full_finetune": (LinearHead(), FullFinetune(), sgd(4, 5e-4), "full"),
}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_oeb_experiment_runs_a_shipped_encoder(
    windows, checkpoint, tmp_path, monkeypatch, strategy
):
    """OpenEEG-Bench's Experiment.run, end to end on local windows (four subjects to train,
    one to validate, one to test): data set-up, model build and checkpoint, head,
    strategy, training and the test balanced accuracy, above chance (0.5)."""
    monkeypatch.chdir(tmp_path)  # where skorch's callbacks would write
    head, finetuning, training, method = STRATEGIES[strategy]
    experiment = Experiment(
        backbone=pretrained_backbone("pars-small", checkpoint),
        dataset=local_dataset(windows, 2, [1, 2, 3, 4], [5], [6]),
        head=head,
        finetuning=finetuning,
        training=training,
        verbose=0,
        seed=SEED,
    )
    result = experiment.run()
    assert result["adapter_stats"]["method"] == method
    learned(result["test_balanced_accuracy"], above=0.75, at_least=True)


def test_benchmark_configures_every_dataset_offline(tmp_path):
    """The documented networked command, up to the point where it would download: the
    experiments OpenEEG-Bench's benchmark() builds with these arguments."""
    kwargs = benchmark_kwargs("pars-small", tmp_path / "pars-small-oeb.pt")
    experiments = benchmark(
        **kwargs,
        datasets=["bcic2a", "physionet"],
        finetuning_strategies=["ridge_probe", "frozen", "lora"],
        n_seeds=1,
        infra={"folder": str(tmp_path / "cache")},
        only_return_configs=True,
    )
    assert len(experiments) == 6
    for experiment in experiments:
        assert experiment.backbone.model_cls == "braindecode_pars.oeb.PARSBackbone"
        assert experiment.backbone.checkpoint_path == kwargs["checkpoint_path"]
        assert experiment.backbone.model_kwargs == {"encoder": "pars-small"}
    model = experiments[0].backbone.build(n_chans=22, n_times=400, n_outputs=4, sfreq=SFREQ)
    for module in kwargs["peft_target_modules"]:
        assert any(name.endswith("." + module) for name, _ in model.named_modules())


def test_benchmark_kwargs_need_a_named_encoder(tmp_path):
    with pytest.raises(TypeError, match=r"encoder\.save_pretrained\(folder\)"):
        benchmark_kwargs(load_encoder("pars-small"), tmp_path / "x.pt")


def test_save_pretrained_and_from_pretrained(tmp_path):
    """braindecode's own loading: a saved PARSBackbone comes back equal, with a new head
    when n_outputs changes."""
    model = PARSBackbone(n_outputs=2, n_chans=3, n_times=400, sfreq=SFREQ).eval()
    model.save_pretrained(tmp_path / "saved")
    again = PARSBackbone.from_pretrained(tmp_path / "saved").eval()
    X = torch.randn(4, 3, 400)
    with torch.no_grad():
        torch.testing.assert_close(again(X), model(X))
    assert PARSBackbone.from_pretrained(tmp_path / "saved", n_outputs=5)(X).shape == (4, 5)
