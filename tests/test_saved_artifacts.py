"""What was saved before the package's modules moved still loads: the shipped encoders,
and a pretraining run written at 009646d (tests/data/README.md), which resumes and
exports."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from braindecode_pars import PatchEncoder, load_encoder
from braindecode_pars.cli import main
from braindecode_pars.hub import export_run, list_encoders, load_pretext_model, run_status

RUN = Path(__file__).parent / "data" / "run_009646d"
TINY = {"emb_dim": 16, "depth": 1, "n_heads": 2, "ff_dim": 32}


def same_weights(a, b):
    """Whether the modules ``a`` and ``b`` hold the same tensors under the same names."""
    a, b = a.state_dict(), b.state_dict()
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("name", ["pars-small", "pars-small-v2"])
def test_the_shipped_encoders_load_by_name_and_encode(name):
    assert name in list_encoders()
    encoder = load_encoder(name)
    same = PatchEncoder.from_pretrained(name)
    assert same_weights(encoder, same)
    pretext = load_pretext_model(name)
    assert same_weights(encoder, pretext.encoder)
    x = torch.randn(2, 1, int(encoder.sfreq * 10))
    out = encoder(x)
    assert out.shape[0] == 2 and torch.isfinite(out).all()


def test_a_run_saved_before_the_move_loads_and_exports(tmp_path):
    status = run_status(RUN)
    assert status["epoch"] == 1
    encoder = load_encoder(RUN / "encoder.pt")
    assert encoder.emb_dim == TINY["emb_dim"]
    export_run(RUN, tmp_path / "exported")
    exported = load_encoder(tmp_path / "exported")
    assert same_weights(encoder, exported)


def test_a_run_saved_before_the_move_resumes_where_it_stopped(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps({**TINY, "checkpoint_minutes": 0}))  # a --config setting
    before = json.loads((RUN / "state-000001" / "history.json").read_text())
    main([
        "pretrain", "--config", str(config), "--out", str(run), "--epochs", "2",
        "--batch-size", "8", "--extend",
    ])  # fmt: skip
    state = json.loads((run / "state.json").read_text())
    assert state["epoch"] == 2
    history = json.loads((run / state["state"] / "history.json").read_text())
    assert len(history) == 2
    # the first epoch is the saved one, not trained again
    assert history[0]["train_loss"] == before[0]["train_loss"]
    assert np.isfinite(history[1]["train_loss"])
