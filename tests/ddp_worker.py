"""Run by tests/test_distributed.py under torchrun: two CPU processes pretrain PARS."""

import sys
from pathlib import Path

import torch

from braindecode_pars import PretrainNet
from braindecode_pars.pretraining.distributed import (
    close_distributed,
    init_distributed,
    rank,
    world_size,
)
from tests._learning import SEED
from tests.ramp_fixtures import ramp_dataset, ramp_pars


def main(out):
    out = Path(out)
    device = init_distributed("cpu")
    torch.manual_seed(SEED)  # every rank seeded alike, as a torchrun script usually is
    data = ramp_dataset()  # 64 windows of 300 samples, as tests/internals/test_training.py
    model = ramp_pars(emb_dim=32, depth=1, n_heads=4, ff_dim=32)
    draws = []  # the patch starts and position masks of this rank's first steps
    model.register_forward_hook(
        lambda m, i, out: (
            draws.append((out["starts"].clone(), out["pos_mask"].clone()))
            if m.training and len(draws) < 3
            else None
        )
    )
    net = PretrainNet(
        model,
        max_epochs=25,
        batch_size=8,
        lr=3e-3,
        progress_bar=False,
        device=device,
        checkpoint_dir=out / "run",
    )
    net.fit(data)
    assert net.distributed_ and world_size() == 2
    torch.save(
        {
            "state_dict": {k: v.cpu() for k, v in net.encoder.state_dict().items()},
            "history": net.history[:, "train_loss"],
            "batches": len(net.history[-1, "batches"]),
            "lrs": [b["event_lr"] for row in net.history for b in row["batches"]],
            "skill": net.history[:, "train_skill"],
            "has_writers": "encoder_checkpoint" in dict(net.callbacks_),
            "draws": draws,
        },
        out / f"rank{rank()}.pt",
    )
    close_distributed()  # after a barrier: no process exits while another still saves


if __name__ == "__main__":
    main(sys.argv[1])
