"""Crash-safe skorch checkpoints of a pretraining run: its whole state, and its encoder.

Saving, loading and exporting encoders live in :mod:`braindecode_pars.hub`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from skorch.callbacks import Callback

from ..hub import run_state, save_encoder, unwrapped_state_dict
from . import distributed


class StateCheckpoint(Callback):
    """Save the whole training state after every epoch, crash-safe.

    Each epoch's parameters, optimizer state and history are written into a new
    folder ``<dirname>/state-<epoch>/``: ``params.pt`` holds the *unwrapped* pretext
    model's state dict (``net.pretext_``: no ``module.`` prefix of
    DistributedDataParallel, no ``_orig_mod.`` of ``torch.compile``), and
    ``optimizer.pt`` and ``history.json`` are skorch's (``net.save_params``; the
    optimizer's state is keyed by parameter order, which no wrapper changes). Then the
    pointer file ``<dirname>/state.json`` is replaced atomically to name it, with the
    epoch, the run's epoch budget and how it was launched (processes, compile, amp),
    and older state folders are removed. A run killed at any moment therefore keeps
    one complete, consistent state, which :meth:`load` reads back whatever the number
    of processes or the ``compile`` and ``amp`` settings of the resumed run.
    ``<dirname>/config.json`` (written by
    :class:`~braindecode_pars.training.PretrainNet`) records the settings of the run;
    a finished run also has ``encoder.pt`` (see :func:`~braindecode_pars.training.pretrain`).

    Parameters
    ----------
    dirname : str | Path
        Folder of the state.
    """

    def __init__(self, dirname):
        self.dirname = dirname

    @staticmethod
    def current(dirname):
        """The folder of the last complete state under ``dirname``, or None."""
        return run_state(dirname)

    def on_epoch_end(self, net, **kwargs):
        root = Path(self.dirname)
        name = f"state-{len(net.history):06d}"
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        torch.save(
            {k: v.detach().cpu() for k, v in net.pretext_.state_dict().items()},
            folder / "params.pt",
        )
        net.save_params(f_optimizer=folder / "optimizer.pt", f_history=folder / "history.json")
        pointer = {
            "state": name,
            "epoch": len(net.history),
            "max_epochs": int(net.max_epochs),
            "world_size": distributed.world_size() if net.distributed_ else 1,
            "compile": bool(getattr(net, "compile", False)),
            "amp": bool(getattr(net, "amp", False)),
        }
        tmp = root / "state.json.tmp"
        tmp.write_text(json.dumps(pointer))
        os.replace(tmp, root / "state.json")
        for old in root.glob("state-*"):
            if old.is_dir() and old.name != name:
                shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, net, dirname):
        """Load the last complete state under ``dirname`` into ``net``; its epoch count.

        Parameters saved with the prefixes of DistributedDataParallel or
        ``torch.compile`` (by earlier versions) load too.
        """
        folder = cls.current(dirname)
        if folder is None:
            return 0
        params = torch.load(folder / "params.pt", map_location="cpu", weights_only=True)
        net.pretext_.load_state_dict(unwrapped_state_dict(params))
        net.load_params(f_optimizer=folder / "optimizer.pt", f_history=folder / "history.json")
        return len(net.history)


class EncoderCheckpoint(Callback):
    """Save the pretext model's encoder after every epoch (last) and when it improves (best).

    Writes ``<dirname>/encoder_last.pt`` and ``<dirname>/encoder_best.pt`` with
    :func:`~braindecode_pars.hub.save_encoder`; load them with
    :func:`~braindecode_pars.hub.load_encoder`.

    Parameters
    ----------
    dirname : str | Path
        Folder of the files.
    monitor : str
        History key that is True on an epoch that improved; ``valid_loss_best`` is
        used instead of the default when a validation set exists.
    """

    def __init__(self, dirname, monitor="train_loss_best"):
        self.dirname = dirname
        self.monitor = monitor

    def on_epoch_end(self, net, **kwargs):
        row = net.history[-1]
        monitor = "valid_loss_best" if "valid_loss_best" in row else self.monitor
        info = {"epoch": int(row["epoch"]), "train_loss": float(row.get("train_loss", "nan"))}
        encoder = net.encoder
        save_encoder(encoder, Path(self.dirname) / "encoder_last.pt", **info)
        if row.get(monitor, False):
            save_encoder(encoder, Path(self.dirname) / "encoder_best.pt", **info)
