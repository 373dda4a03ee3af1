"""Encoders shipped with the package, loaded by name (``load_encoder("pars-small")``).

Each is a folder in the layout of braindecode's Hugging Face mixin
(``config.json`` and ``model.safetensors``, read by
:meth:`PatchEncoder.from_pretrained <braindecode_pars.PatchEncoder>`), with a model
card (``README.md``: data and licences, preprocessing, settings, skill reached, how
to reproduce) and the whole pretext model (``pretext.safetensors`` and
``pretext.json``), so that its shift predictions can be drawn.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

#: Names of the shipped encoders.
PRETRAINED_ENCODERS = ("pars-small",)


def pretrained_path(name):
    """Folder of the shipped encoder ``name``."""
    if name not in PRETRAINED_ENCODERS:
        allowed = ", ".join(repr(n) for n in PRETRAINED_ENCODERS)
        raise ValueError(
            f"Invalid value for the encoder name. Allowed values are {allowed}, but got "
            f"{name!r} instead."
        )
    return Path(resources.files("braindecode_pars.pretrained") / name)


def load_pretext_model(name_or_path):
    """The whole pretext model (encoder and decoder) saved beside a shipped encoder.

    Parameters
    ----------
    name_or_path : str | Path
        A shipped name (``"pars-small"``) or a folder written by
        :func:`save_pretrained_encoder` with ``pretext=...``.

    Returns
    -------
    model : PARS | MAE | MP3 | DropPos
    """
    from safetensors.torch import load_file

    from ..models import PRETEXT_MODELS

    folder = Path(name_or_path)
    if str(name_or_path) in PRETRAINED_ENCODERS:
        folder = pretrained_path(str(name_or_path))
    spec = json.loads((folder / "pretext.json").read_text())
    method = spec.pop("method")
    model = PRETEXT_MODELS[method](**spec)
    model.load_state_dict(load_file(folder / "pretext.safetensors"))
    return model.eval()


def save_pretrained_encoder(encoder, folder, pretext=None, pretext_spec=None):
    """Save an encoder in the Hugging Face layout (and optionally its pretext model).

    ``encoder.save_pretrained(folder)`` writes ``config.json`` and
    ``model.safetensors``; braindecode's extra ``pytorch_model.bin`` is removed to
    keep the folder small. ``pretext`` (a pretext model) is written as
    ``pretext.safetensors`` with ``pretext_spec`` (its constructor arguments and
    ``method``) as ``pretext.json``.
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    encoder.save_pretrained(folder)
    if (folder / "pytorch_model.bin").is_file():  # the same weights again, as a pickle
        (folder / "pytorch_model.bin").unlink()
    if pretext is not None:
        state = {k: v.detach().cpu().contiguous() for k, v in pretext.state_dict().items()}
        save_file(state, folder / "pretext.safetensors")
        (folder / "pretext.json").write_text(json.dumps(pretext_spec, indent=1))
    return folder


def export_run(run_dir, folder):
    """Export a pretraining run (a :class:`PretrainNet` ``checkpoint_dir``) for sharing.

    Rebuilds the pretext model from the run's ``config.json``, loads the parameters
    of its last complete state, and writes the encoder in the Hugging Face layout
    (:func:`save_pretrained_encoder`, with the pretext model) plus the run's history
    without its batches (``pretrain_history.json``) and settings (``run_config.json``).

    Returns
    -------
    folder : Path
    """
    import torch

    from ..models import PRETEXT_MODELS
    from ..training.checkpoints import StateCheckpoint

    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    state = StateCheckpoint.current(run_dir)
    if state is None:
        raise FileNotFoundError(f"'{run_dir}' holds no saved training state.")
    method = config["model"].lower()
    spec = {"method": method, "n_times": config["n_times"], "sfreq": config["sfreq"]}
    for name, key in (
        ("n_patches", "n_patches"),
        ("pos_mask_ratio", "pos_mask_ratio"),
        ("sampling", "sampling"),
        ("decoder", "decoder_name"),
        ("mask_ratio", "mask_ratio"),
    ):
        if key in config:
            spec[name] = config[key]
    for name in ("patch_seconds", "emb_dim", "depth", "n_heads", "ff_dim", "drop_prob"):
        spec[name] = config[f"encoder.{name}"]
    kwargs = {k: v for k, v in spec.items() if k != "method"}
    model = PRETEXT_MODELS[method](**kwargs)
    model.load_state_dict(torch.load(state / "params.pt", map_location="cpu", weights_only=True))
    folder = save_pretrained_encoder(model.encoder, folder, pretext=model, pretext_spec=spec)
    history = json.loads((state / "history.json").read_text())
    history = [{k: v for k, v in row.items() if k != "batches"} for row in history]
    (folder / "pretrain_history.json").write_text(json.dumps(history, indent=1))
    (folder / "run_config.json").write_text(json.dumps(config, indent=1))
    return folder
