"""Saving and loading encoders, and crash-safe skorch checkpoints."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch
from skorch.callbacks import Callback, Checkpoint
from torch import nn

from ..models.encoder import PatchEncoder

logger = logging.getLogger(__name__)

#: PatchEncoder settings written beside its weights.
_ENCODER_CONFIG = ("sfreq", "patch_seconds", "emb_dim", "depth", "n_heads", "ff_dim", "drop_prob")


def _atomic_save(obj, path):
    """``torch.save`` to a temporary file, then rename: a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def save_encoder(encoder, path, **extra):
    """Save a :class:`PatchEncoder` with what is needed to rebuild it.

    Parameters
    ----------
    encoder : PatchEncoder
    path : str | Path
        File to write (atomically).
    **extra
        Anything else worth keeping with the weights (e.g. ``epoch``, ``train_loss``).
    """
    config = {name: getattr(encoder, name) for name in _ENCODER_CONFIG}
    activation = type(encoder.blocks[0].ff[1])
    config["activation"] = activation.__name__
    state = {k: v.detach().cpu() for k, v in encoder.state_dict().items()}
    _atomic_save({"config": config, "state_dict": state, **extra}, path)


def load_encoder(path_or_encoder, map_location="cpu"):
    """Load a :class:`PatchEncoder` saved by :func:`save_encoder` (an encoder passes through).

    Returns
    -------
    encoder : PatchEncoder
    """
    if isinstance(path_or_encoder, PatchEncoder):
        return path_or_encoder
    path = Path(path_or_encoder)
    if not path.is_file():
        raise FileNotFoundError(f"No saved encoder at '{path}'.")
    saved = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(saved, dict) or "config" not in saved or "state_dict" not in saved:
        raise ValueError(f"'{path}' is not an encoder saved by braindecode_pars.save_encoder.")
    config = dict(saved["config"])
    config["activation"] = getattr(nn, config.pop("activation"))
    encoder = PatchEncoder(**config)
    encoder.load_state_dict(saved["state_dict"])
    return encoder


class AtomicCheckpoint(Checkpoint):
    """skorch's :class:`~skorch.callbacks.Checkpoint`, each file written atomically.

    A run killed while it writes a checkpoint keeps the previous, complete one.
    """

    def _save_params(self, f, net, f_name, log_name):
        if not isinstance(f, str | Path):
            return super()._save_params(f, net, f_name, log_name)
        tmp = f"{f}.tmp"
        net.save_params(**{f_name: tmp, "use_safetensors": self.use_safetensors})
        os.replace(tmp, f)


class EncoderCheckpoint(Callback):
    """Save the pretext model's encoder after every epoch (last) and when it improves (best).

    Writes ``<dirname>/encoder_last.pt`` and ``<dirname>/encoder_best.pt`` with
    :func:`save_encoder`; load them with :func:`load_encoder`.

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
