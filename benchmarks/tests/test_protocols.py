import json

import numpy as np
import pandas as pd
import pytest
import torch

from benchmarks.lab import main
from benchmarks.lib import protocols
from benchmarks.lib.paper_datasets import load_recipe, subjects_of
from braindecode_pars import PatchEncoder, save_encoder
from tests.bids_fixtures import make_eesm17
from tests.tuh_fixtures import make_tuab, make_tusz
from tests.ysyw_fixtures import make_ysyw

from .conftest import ROOT

TINY = {"emb_dim": 16, "depth": 1, "n_heads": 2, "ff_dim": 16, "max_epochs": 1, "batch_size": 8}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpora")
    enc = PatchEncoder(sfreq=200, emb_dim=16, depth=1, n_heads=2, ff_dim=16)
    save_encoder(enc, root / "encoder.pt")
    return {
        "ysyw": make_ysyw(root / "ysyw")[0],
        "tuab": make_tuab(root / "tuh"),
        "tusz": make_tusz(root / "tuh"),
        "eesm17": make_eesm17(root / "bids")[0],
        "encoder": str(root / "encoder.pt"),
    }


def _refuse_fits(monkeypatch):
    """Make any fit of a classifier the protocols build fail."""
    from braindecode_pars import PARSClassifier, PARSFineTuner, PARSProbe

    def refuse(*args, **kwargs):
        raise AssertionError("a finished job ran again")

    for cls in (PARSClassifier, PARSFineTuner, PARSProbe):
        monkeypatch.setattr(cls, "fit", refuse)


def _run(config, tmp_path, name):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    main(["experiment", "--config", str(path), "--out", str(tmp_path / name)])
    return pd.read_csv(tmp_path / name / "results.csv")


def test_recipes_give_the_paper_splits(data):
    ysyw = load_recipe("ysyw", data["ysyw"])
    assert [len(subjects_of(ysyw[k])) for k in ("train", "valid", "test")] == [3, 1, 1]
    tuab = load_recipe("tuab", data["tuab"])
    assert set(tuab["test"].description.split) == {"eval"}
    assert not set(subjects_of(tuab["train"])) & set(subjects_of(tuab["valid"]))
    assert list(load_recipe("eesm17", data["eesm17"])) == ["all"]
    mi = load_recipe("physionet_mi", None, split={"train": [1], "test": [1]})
    assert len(mi["train"]) == 90
    with pytest.raises(ValueError, match="'name' parameter"):
        load_recipe("sleep-edf")


def test_label_efficiency_end_to_end_and_resumable(data, tmp_path, monkeypatch):
    config = {
        "protocol": "label_efficiency",
        "data": {"recipe": "ysyw", "path": str(data["ysyw"])},
        "methods": {"scratch": None, "pars": data["encoder"]},
        "estimator": TINY,
        "seeds": [0],
        "subject_counts": [1, 3],
    }
    rows = _run(config, tmp_path, "le")
    assert len(rows) == 4 and set(rows.method) == {"scratch", "pars"}
    assert set(rows.n_subjects) == {1, 3} and rows.kappa.notna().all()
    assert (tmp_path / "le" / "label_efficiency.png").is_file()

    _refuse_fits(monkeypatch)
    assert len(_run(config, tmp_path, "le")) == 4  # nothing to do: every job is done
    rows.iloc[:3].to_csv(tmp_path / "le" / "results.csv", index=False)  # as if interrupted
    monkeypatch.undo()
    assert len(_run(config, tmp_path, "le")) == 4  # only the missing job ran
    _refuse_fits(monkeypatch)
    other = {**config, "estimator": {**TINY, "lr": 1e-2}}  # rows keyed by method and seed
    with pytest.raises(
        ValueError,
        match=r"another configuration \(keys that differ from its config.json: estimator\)",
    ):
        _run(other, tmp_path, "le")  # refused before any fit
    assert json.loads((tmp_path / "le" / "config.json").read_text()) == config


def test_transfer_table_over_two_datasets(data, tmp_path):
    config = {
        "protocol": "transfer",
        "methods": {"scratch": None},
        "estimator": TINY,
        "seeds": [0, 1],
        "datasets": {
            "TUAB": {"recipe": "tuab", "path": str(data["tuab"])},
            "TUSZ": {"recipe": "tusz", "path": str(data["tusz"])},
        },
    }
    rows = _run(config, tmp_path, "transfer")
    assert len(rows) == 2 * 2 and set(rows.dataset) == {"TUAB", "TUSZ"}
    table = (tmp_path / "transfer" / "table.md").read_text()
    assert "| TUAB | scratch |" in table and "±" in table


def test_leave_one_subject_out_bars(data, tmp_path, monkeypatch):
    # light (W, N1) against deep (N2, N3) sleep: with two training subjects of four
    # epochs each, every class then has the two windows a stratified split needs
    stages = {"W": 0, "N1": 0, "N2": 1, "N3": 1}
    config = {
        "protocol": "loso",
        "data": {"recipe": "eesm17", "path": str(data["eesm17"]), "options": {"stages": stages}},
        "methods": {"scratch": None},
        "estimator": {**TINY, "valid_fraction": 0.5},
    }

    folds = []  # (subjects trained on, subjects scored) of every fit

    def recording_fit_and_score(encoder, train, test, seed, params):
        folds.append((set(subjects_of(train)), set(subjects_of(test))))
        return fit_and_score(encoder, train, test, seed, params)

    fit_and_score = protocols.fit_and_score
    monkeypatch.setattr(protocols, "fit_and_score", recording_fit_and_score)
    rows = _run(config, tmp_path, "loso")
    assert sorted(rows.subject.astype(str).str.zfill(3)) == ["001", "002", "003"]
    everyone = set.union(*(trained | scored for trained, scored in folds))
    assert len(folds) == 3 and len(everyone) == 3
    for trained, scored in folds:  # each fold scores one subject, trained on the others
        assert len(scored) == 1 and not trained & scored and trained | scored == everyone
    scored_subjects = sorted(str(next(iter(scored))).zfill(3) for _, scored in folds)
    assert scored_subjects == sorted(rows.subject.astype(str).str.zfill(3))
    assert rows.balanced_accuracy.notna().all()
    assert (tmp_path / "loso" / "per_subject_kappa.png").is_file()


def test_ablation_pretrains_each_configuration(data, tmp_path):
    config = {
        "protocol": "ablation",
        "data": {"recipe": "ysyw", "path": str(data["ysyw"])},
        "estimator": TINY,
        "seeds": [0],
        "pretrain": {"max_epochs": 1, "batch_size": 8},
        "configs": {
            "N8-gamma0.75": {"n_patches": 8, "pos_mask_ratio": 0.75},
            "fixed": {"n_patches": 8, "sampling": "fixed"},
            "mlp": {"n_patches": 8, "decoder": "mlp"},
        },
    }
    torch.manual_seed(123)
    before, numpy_before = torch.get_rng_state(), np.random.get_state()[1].copy()  # noqa: NPY002
    rows = _run(config, tmp_path, "ablation")
    # pretraining and fine-tuning are seeded inside; the caller's generators are kept
    assert torch.equal(torch.get_rng_state(), before)
    assert np.array_equal(np.random.get_state()[1], numpy_before)  # noqa: NPY002
    assert list(rows.config) == ["N8-gamma0.75", "fixed", "mlp"]
    # scored on the validation patients by default, as the paper scores its ablations
    n_valid = len(load_recipe("ysyw", data["ysyw"])["valid"])
    assert (rows.n_test + rows.n_test_unseen == n_valid).all()  # every scored epoch
    assert rows.pretrain_loss.notna().all()
    for name in rows.config:
        assert (tmp_path / "ablation" / "pretrain" / f"{name}_seed0" / "encoder.pt").is_file()
    on_test = {
        **config,
        "n_subjects": 2,
        "evaluate_on": "test",
        "configs": {"N8": {"n_patches": 8}},
    }
    rows = _run(on_test, tmp_path, "ablation_test")
    n_test = len(load_recipe("ysyw", data["ysyw"])["test"])
    assert len(rows) == 1 and rows.n_test.iloc[0] + rows.n_test_unseen.iloc[0] == n_test


def test_bad_configuration_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"protocol": "grid"}))
    with pytest.raises(ValueError, match="'protocol' parameter. Allowed values are"):
        main(["experiment", "--config", str(path)])
    path.write_text("{not json")
    with pytest.raises(json.JSONDecodeError):
        main(["experiment", "--config", str(path)])


def test_configurations_name_braindecode_augmentations():
    from braindecode.augmentation import ChannelsDropout

    _augmentations = protocols._augmentations
    transforms = _augmentations({"ChannelsDropout": {"probability": 0.5, "p_drop": 0.3}})
    assert isinstance(transforms[0], ChannelsDropout) and transforms[0].p_drop == 0.3
    assert _augmentations("standard") == "standard"
    with pytest.raises(ValueError, match="'augmentation'.*'FTSurrogate'.*'Bogus'"):
        _augmentations({"Bogus": {}})


def test_configurations_name_the_channel_noise_augmentation():
    from braindecode_pars.datasets.eesm17 import ChannelNoise

    _estimator = protocols._estimator

    clf = _estimator(None, 0, {"augmentation": {"channel_noise": {"std": 0.3}}})
    (aug,) = clf.head.augmentation  # training from scratch: the neural head's
    assert isinstance(aug, ChannelNoise) and aug.std == 0.3
    with pytest.raises(ValueError, match="'augmentation' parameter"):
        _estimator(None, 0, {"augmentation": {"mixup": {}}})


@pytest.mark.parametrize("name", ["label_efficiency", "transfer", "eesm17_loso", "ablation"])
def test_documented_configurations_are_valid(name):
    config = json.loads((ROOT / "docs" / "configs" / f"{name}.json").read_text())
    from braindecode_pars import PARSClassifier

    PROTOCOLS, _estimator = (
        protocols.PROTOCOLS,
        protocols._estimator,
    )

    assert config["protocol"] in PROTOCOLS
    # the paper's datasets are hundreds of GB: each is prepared once to disk and read
    # lazily, never loaded whole into memory
    specs = [config["data"]] if "data" in config else list(config["datasets"].values())
    for spec in specs:
        if spec["recipe"] in ("ysyw", "tuab", "tusz", "eesm17"):
            assert spec["options"]["cache_dir"].startswith("cache/")
    for encoder in config.get("methods", {"x": None}).values():
        estimator = _estimator(encoder, 0, config["estimator"])
        head = estimator.head if isinstance(estimator, PARSClassifier) else estimator
        assert head.device in ("cpu", "cuda")
        head.set_params(device="cpu").check_params()  # names and values, GPU or not
    PARS_KEYS = {"n_patches", "pos_mask_ratio", "sampling", "decoder"}
    for settings in config.get("configs", {}).values():
        assert set(settings) <= PARS_KEYS


def test_a_probe_fits_on_the_training_windows_alone(monkeypatch):
    """The probe has no epochs to choose: ``fit_on`` hands it no validation windows; a
    neural head, alone or under ``PARSClassifier``, gets them."""
    from braindecode_pars import PARSClassifier, PARSFineTuner, PARSProbe

    seen = {}

    def record(self, train, **kwargs):
        seen["kwargs"] = kwargs
        return self

    for cls in (PARSClassifier, PARSFineTuner, PARSProbe):
        monkeypatch.setattr(cls, "fit", record)
    monkeypatch.setattr(protocols, "_keep_classes", lambda valid, classes: valid)
    monkeypatch.setattr(protocols, "_labels", lambda windows: list(windows))
    for encoder, params, kind, passed in (
        ("encoder.pt", {}, PARSProbe, False),  # "auto" over an encoder: the probe
        (None, {"finetune": "probe"}, PARSClassifier, False),  # over a random encoder
        (None, {}, PARSClassifier, True),  # "auto" without an encoder: scratch
        ("encoder.pt", {"finetune": "frozen"}, PARSClassifier, True),
    ):
        clf = protocols.fit_on(encoder, [0, 1], seed=0, params=params, valid=[1, 0])
        assert type(clf) is kind
        assert ("X_valid" in seen["kwargs"]) is passed


def test_configurations_translate_to_the_estimators():
    """A configuration's flat settings: the probe's under their configuration names, the
    encoder size of a scratch encoder, the rest the neural head's."""
    from braindecode_pars import PARSClassifier, PARSFineTuner, PARSProbe

    _estimator = protocols._estimator

    settings = {"probe_C": 10.0, "probe_align": "groups", "probe_readout": "mean", "lr": 1e-2}
    probe = _estimator("enc.pt", 3, settings)
    assert isinstance(probe, PARSProbe) and (probe.encoder, probe.random_state) == ("enc.pt", 3)
    assert (probe.C, probe.align, probe.readout) == (10.0, "groups", "mean")
    scratch = _estimator(None, 3, {"max_epochs": 2, "weight_decay": 0.1})
    assert isinstance(scratch, PARSClassifier) and scratch.encoder is None
    assert isinstance(scratch.head, PARSFineTuner) and scratch.head.encoder is None
    assert (scratch.head.max_epochs, scratch.random_state) == (2, 3)
    assert scratch.get_params()["head__optimizer__weight_decay"] == 0.1
    sized = _estimator(None, 3, {"emb_dim": 16, "depth": 1, "n_heads": 2, "ff_dim": 16})
    assert isinstance(sized, PARSClassifier) and sized.random_state == 3
    assert (sized.encoder.max_epochs, sized.encoder.emb_dim, sized.head.strategy) == (0, 16, "full")
    frozen = _estimator("enc.pt", 3, {"finetune": "frozen", "max_epochs": 2})
    assert (frozen.encoder, frozen.head.strategy, frozen.head.max_epochs) == ("enc.pt", "frozen", 2)
    with pytest.raises(ValueError, match="crop_seconds=2.0: these train the neural head"):
        _estimator("enc.pt", 0, {"crop_seconds": 2.0})
    with pytest.raises(ValueError, match="probe_align='groups': these set the probe, but"):
        _estimator(None, 0, {"probe_align": "groups"})
    with pytest.raises(ValueError, match="probe_C=1.0, probe_readout='mean': these set the"):
        _estimator("enc.pt", 0, {"finetune": "full", "probe_C": 1.0, "probe_readout": "mean"})
    with pytest.raises(ValueError, match="'finetune' parameter"):
        _estimator(None, 0, {"finetune": "linear"})


def test_protocol_functions_refuse_a_log_made_with_other_settings(data, tmp_path, monkeypatch):
    """Called directly (not through the command line's config.json check), a protocol
    refuses an 'out' whose rows came from other settings, before fitting anything."""

    split = load_recipe("ysyw", data["ysyw"])
    methods = {"scratch": None}
    rows = protocols.label_efficiency(split, methods, [1], [0], TINY, tmp_path)
    assert len(rows) == 1

    _refuse_fits(monkeypatch)
    again = protocols.label_efficiency(split, methods, [1], [0], TINY, tmp_path)
    assert again.equals(rows)  # the same settings: the row is reused, nothing refits
    for changed in (
        dict(params={**TINY, "max_epochs": 2}),
        dict(methods={"scratch": data["encoder"]}),
        dict(split={**split, "test": split["valid"]}),
    ):
        args = {**dict(split=split, methods=methods, params=TINY), **changed}
        with pytest.raises(ValueError, match="made with other settings"):
            protocols.label_efficiency(
                args["split"], args["methods"], [1], [0], args["params"], tmp_path
            )


def test_a_run_that_wrote_no_row_does_not_lock_its_out(tmp_path):
    ResultsLog = protocols.ResultsLog

    ResultsLog(tmp_path / "results.csv", ["seed"], {"params": {"lr": 1.0}})  # failed early
    log = ResultsLog(tmp_path / "results.csv", ["seed"], {"params": {"lr": 2.0}})
    log.add({"seed": 0, "score": 0.5})
    with pytest.raises(ValueError, match="made with other settings"):
        ResultsLog(tmp_path / "results.csv", ["seed"], {"params": {"lr": 1.0}})
