import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from braindecode_pars.training import warmup_cosine_factor

#: Two CPU processes on this machine under torchrun, one thread each, this checkout.
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).parents[1])}


def test_two_cpu_processes_train_identical_weights_and_the_loss_falls(tmp_path):
    worker = Path(__file__).with_name("ddp_worker.py")
    cmd = [*TORCHRUN, str(worker), str(tmp_path)]
    proc = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=False)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=False)
    for name, w0 in r0["state_dict"].items():  # gradients were averaged every step
        torch.testing.assert_close(w0, r1["state_dict"][name], rtol=0, atol=0, msg=name)
    assert r0["history"] == r1["history"]  # batch losses averaged over the ranks
    assert sum(r0["history"][-5:]) / 5 < 0.5 * sum(r0["history"][:3]) / 3
    assert r0["batches"] == 4  # 64 windows, 2 ranks, 8 per step: each rank saw half
    # the schedule counts the batches of one rank: 25 epochs of 4 batches, step for step
    # the curve of a single process that trains on 32 windows
    expected = [3e-3 * warmup_cosine_factor(s / 100) for s in range(100)]
    assert r0["lrs"] == pytest.approx(expected) and r1["lrs"] == r0["lrs"]
    assert r0["skill"] == r1["skill"] and r0["skill"][-1] > 0.3  # averaged over ranks
    assert r0["has_writers"] and not r1["has_writers"]  # only rank 0 writes
    assert (tmp_path / "run" / "encoder_last.pt").is_file()


def test_command_line_pretrains_from_a_store_under_torchrun_and_resumes(tmp_path):
    cli = [sys.executable, "-m", "braindecode_pars.cli"]
    subprocess.run(
        [*cli, "store", "--out", str(tmp_path / "store"), "--runs", "1", "2"],
        env=ENV,
        check=True,
        capture_output=True,
        timeout=300,
    )
    small = [
        "--emb-dim",
        "16",
        "--depth",
        "1",
        "--n-heads",
        "2",
        "--ff-dim",
        "16",
        "--n-patches",
        "10",
        "--batch-size",
        "8",
        "--device",
        "cpu",
    ]
    run = [
        *TORCHRUN,
        "-m",
        "braindecode_pars.cli",
        "pretrain",
        "--out",
        str(tmp_path / "run"),
        "--store",
        str(tmp_path / "store"),
        *small,
    ]
    first = subprocess.run(
        [*run, "--epochs", "2"], env=ENV, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.count("final loss") == 1  # rank 0 reports, rank 1 does not
    again = subprocess.run(
        [*run, "--epochs", "3"], env=ENV, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "3 epochs" in again.stdout and "Resuming pretraining" in again.stderr
    assert (tmp_path / "run" / "encoder.pt").is_file()
    # the run's parameters carry DistributedDataParallel's "module." prefix; export drops it
    from braindecode_pars.cli import main
    from braindecode_pars.hub import load_encoder, run_state

    params = torch.load(run_state(tmp_path / "run") / "params.pt", weights_only=True)
    assert all(key.startswith("module.") for key in params)
    main(["export", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "shared")])
    exported = load_encoder(tmp_path / "shared").state_dict()
    final = load_encoder(tmp_path / "run" / "encoder.pt").state_dict()
    assert exported.keys() == final.keys()
    assert all(torch.equal(exported[k], v) for k, v in final.items())


def test_pretrain_reads_a_configuration_file_and_flags_take_precedence(tmp_path, monkeypatch):
    import json

    import braindecode_pars.training as training
    from braindecode_pars.cli import main

    seen = {}

    def fake_pretrain(view, method, **kwargs):
        seen.update(method=method, **kwargs)
        raise SystemExit(0)  # stop before any training

    monkeypatch.setattr(training, "pretrain", fake_pretrain)
    config = tmp_path / "pre.json"
    config.write_text(
        json.dumps(
            {
                "method": "mae",
                "epochs": 7,
                "out": str(tmp_path / "run"),
                "emb-dim": 16,
                "depth": 1,
                "n_heads": 2,
                "ff_dim": 16,
                "window_seconds": 10,
                "batch_size": 4,
            }
        )
    )
    with pytest.raises(SystemExit):
        main(["pretrain", "--config", str(config), "--epochs", "3", "--device", "cpu"])
    assert seen["method"] == "mae" and seen["max_epochs"] == 3  # the flag wins
    assert seen["encoder_kwargs"]["emb_dim"] == 16 and seen["batch_size"] == 4
    config.write_text(json.dumps({"epoch": 7}))
    with pytest.raises(SystemExit, match=r"unknown options \['epoch'\]"):
        main(["pretrain", "--config", str(config)])
