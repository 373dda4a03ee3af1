"""Saving and loading encoders, and crash-safe skorch checkpoints."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import torch
from skorch.callbacks import Callback
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
    """Load a :class:`PatchEncoder` by name, from a folder or from a file.

    Parameters
    ----------
    path_or_encoder : str | Path | PatchEncoder
        - the name of an encoder shipped with the package (``"pars-small"``, see
          :mod:`braindecode_pars.pretrained`);
        - a folder written by ``encoder.save_pretrained(folder)`` (braindecode's
          Hugging Face layout: ``config.json`` and ``model.safetensors``);
        - a file written by :func:`save_encoder`;
        - an encoder, returned as it is.

    Returns
    -------
    encoder : PatchEncoder
    """
    from ..pretrained import PRETRAINED_ENCODERS, pretrained_path

    if isinstance(path_or_encoder, PatchEncoder):
        return path_or_encoder
    if isinstance(path_or_encoder, str) and path_or_encoder in PRETRAINED_ENCODERS:
        path_or_encoder = pretrained_path(path_or_encoder)
    path = Path(path_or_encoder)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ValueError(
                f"'{path}' is a folder without config.json: not an encoder saved with "
                "save_pretrained."
            )
        return PatchEncoder.from_pretrained(str(path), map_location=map_location).eval()
    if not path.is_file():
        raise FileNotFoundError(
            f"No saved encoder at '{path}' (and it is not one of the shipped encoders: "
            f"{', '.join(PRETRAINED_ENCODERS)})."
        )
    try:
        saved = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # a truncated download, a file of another kind
        raise ValueError(
            f"'{path}' is not an encoder saved by braindecode_pars.save_encoder: torch could "
            f"not read it ({type(err).__name__}: {err})."
        ) from err
    if not isinstance(saved, dict) or "config" not in saved or "state_dict" not in saved:
        raise ValueError(f"'{path}' is not an encoder saved by braindecode_pars.save_encoder.")
    config = dict(saved["config"])
    config["activation"] = getattr(nn, config.pop("activation"))
    encoder = PatchEncoder(**config)
    encoder.load_state_dict(saved["state_dict"])
    return encoder


class StateCheckpoint(Callback):
    """Save the whole training state after every epoch, crash-safe, through skorch's API.

    Each epoch's parameters, optimizer state and history are written with
    ``net.save_params`` into a new folder ``<dirname>/state-<epoch>/``; then the
    pointer file ``<dirname>/state.json`` is replaced atomically to name it, and
    older state folders are removed. A run killed at any moment therefore keeps one
    complete, consistent state (the files of one epoch), which :meth:`load` reads
    back with ``net.load_params``. ``<dirname>/config.json`` (written by
    :class:`~braindecode_pars.training.PretrainNet`) records the settings of the run.

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
        pointer = Path(dirname) / "state.json"
        if not pointer.is_file():
            return None
        folder = Path(dirname) / json.loads(pointer.read_text())["state"]
        return folder if (folder / "params.pt").is_file() else None

    def on_epoch_end(self, net, **kwargs):
        root = Path(self.dirname)
        name = f"state-{len(net.history):06d}"
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        net.save_params(
            f_params=folder / "params.pt",
            f_optimizer=folder / "optimizer.pt",
            f_history=folder / "history.json",
        )
        tmp = root / "state.json.tmp"
        tmp.write_text(json.dumps({"state": name, "epoch": len(net.history)}))
        os.replace(tmp, root / "state.json")
        for old in root.glob("state-*"):
            if old.is_dir() and old.name != name:
                shutil.rmtree(old, ignore_errors=True)

    @classmethod
    def load(cls, net, dirname):
        """Load the last complete state under ``dirname`` into ``net``; its epoch count."""
        folder = cls.current(dirname)
        if folder is None:
            return 0
        net.load_params(
            f_params=folder / "params.pt",
            f_optimizer=folder / "optimizer.pt",
            f_history=folder / "history.json",
        )
        return len(net.history)


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
