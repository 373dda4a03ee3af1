"""Encoders on disk: the shipped ones by name, saving, loading, and exporting a run.

- :data:`PRETRAINED_ENCODERS`, :func:`pretrained_path`: the encoders shipped with the
  package, in the package-data folder ``braindecode_pars/weights/<name>/``, and
  :data:`DEFAULT_ENCODER`, the one every default names (both defined in
  :mod:`braindecode_pars.weights`);
- :func:`save_encoder`, :func:`load_encoder`: one :class:`PatchEncoder` in one file,
  or (loading) a shipped name or a folder in braindecode's Hugging Face layout;
- ``encoder.save_pretrained(folder)`` (braindecode's) and :func:`load_encoder` or
  :meth:`PatchEncoder.from_pretrained <braindecode_pars.PatchEncoder>`: that layout
  (``config.json`` and ``model.safetensors``); :func:`load_pretext_model`: a folder
  that also holds the whole pretext model (``pretext.safetensors`` and ``pretext.json``);
- :func:`export_run`: a pretraining run's last state to that layout, for sharing.
- :func:`model_card` (from :mod:`braindecode_pars.models.card`): the ``README.md``
  model card both write.

This module reads the files the training callbacks write; it imports nothing from
:mod:`braindecode_pars.pretraining`.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
from importlib import resources
from pathlib import Path

import torch

from braindecode_pars._util.atomic import atomic_path, save_atomic, write_atomic
from braindecode_pars.models.card import listed_recordings, model_card, public_run_config
from braindecode_pars.models.encoder import PatchEncoder
from braindecode_pars.models.encoder_config import PatchEncoderConfig
from braindecode_pars.models.pretext import PRETEXT_MODELS
from braindecode_pars.models.pretext.base import PRETEXT_SETTINGS
from braindecode_pars.weights import PRETRAINED_ENCODERS

logger = logging.getLogger(__name__)


def pretrained_path(name):
    """Folder of the shipped encoder ``name``."""
    if name not in PRETRAINED_ENCODERS:
        allowed = ", ".join(repr(n) for n in PRETRAINED_ENCODERS)
        raise ValueError(
            f"Invalid value for the encoder name. Allowed values are {allowed}, but got "
            f"{name!r} instead."
        )
    return Path(resources.files("braindecode_pars.weights") / name)  # as from_pretrained


def list_encoders():
    """The names of the encoders shipped with the package, newest last.

    Each loads offline with :func:`load_encoder` or
    :meth:`PatchEncoder.from_pretrained <braindecode_pars.PatchEncoder>`;
    :data:`DEFAULT_ENCODER` is the one every default names.

    Returns
    -------
    names : list of str
    """
    return list(PRETRAINED_ENCODERS)


def save_encoder(encoder, path, **extra):
    """Save a :class:`PatchEncoder` with what is needed to rebuild it.

    The file holds ``config`` (``sfreq`` and every setting of
    :class:`~braindecode_pars.models.encoder_config.PatchEncoderConfig`), ``state_dict`` and
    ``extra``'s entries.

    Parameters
    ----------
    encoder : PatchEncoder
    path : str | Path
        File to write (atomically).
    **extra
        Anything else worth keeping with the weights (e.g. ``epoch``, ``train_loss``).
    """
    config = {"sfreq": encoder.sfreq, **encoder.config.asdict()}
    state = {k: v.detach().cpu() for k, v in encoder.state_dict().items()}
    save_atomic({"config": config, "state_dict": state, **extra}, path)


def _built_to_load(factory, *args, **kwargs):
    """``factory(*args, **kwargs)``, a module whose initial weights are about to be
    overwritten by loaded ones: drawn under ``fork_rng``, so that loading leaves torch's
    global generator as it was (a seeded run draws the same numbers with or without
    loading a model)."""
    with torch.random.fork_rng(devices=[]):
        return factory(*args, **kwargs)


def load_encoder(path_or_encoder, map_location="cpu"):
    """Load a :class:`PatchEncoder` by name, from a folder or from a file.

    Parameters
    ----------
    path_or_encoder : str | Path | PatchEncoder
        - the name of an encoder shipped with the package (``"pars-small"``, see
          :data:`PRETRAINED_ENCODERS`);
        - a folder written by ``encoder.save_pretrained(folder)`` (braindecode's
          Hugging Face layout: ``config.json`` and ``model.safetensors``), e.g. by
          :func:`export_run`;
        - a file written by :func:`save_encoder`;
        - an encoder, returned as it is.

    Returns
    -------
    encoder : PatchEncoder
        In evaluation mode when read from a folder or file (call ``.train()`` to
        train it further); a given encoder is returned as it is.
    """
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
        # huggingface_hub prints "Loading weights from local directory" on every load
        with contextlib.redirect_stdout(io.StringIO()):
            encoder = _built_to_load(
                PatchEncoder.from_pretrained, str(path), map_location=map_location
            )
        return encoder.eval()
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
    config = dict(saved["config"])  # of an earlier save: without eps, activation "GELU"
    encoder = _built_to_load(
        PatchEncoder.from_config, PatchEncoderConfig.of(config), config["sfreq"]
    )
    encoder.load_state_dict(saved["state_dict"])
    return encoder.eval()  # as from a folder: a loaded encoder is for use, not training


def unwrapped_state_dict(state):
    """A state dict without the key prefixes of torch.compile and DistributedDataParallel.

    A module compiled with ``torch.compile`` saves its keys under ``_orig_mod.`` (at
    any depth, where a submodule was compiled); one wrapped in
    ``DistributedDataParallel`` under ``module.``. Every ``_orig_mod`` part is
    dropped, and a leading ``module.`` is dropped while every key has one.
    """
    state = {
        ".".join(part for part in key.split(".") if part != "_orig_mod"): value
        for key, value in state.items()
    }
    while state and all(key.startswith("module.") for key in state):
        state = {key[len("module.") :]: value for key, value in state.items()}
    return state


def load_pretext_model(name_or_path):
    """The whole pretext model (encoder and decoder) saved beside a shipped encoder.

    Parameters
    ----------
    name_or_path : str | Path
        A shipped name (``"pars-small"``) or a folder written by :func:`export_run`
        (the ``export`` command). A folder of ``encoder.save_pretrained`` holds the
        encoder alone, without the decoder: it is refused, naming ``export``.

    Returns
    -------
    model : PARS | MAE | MP3 | DropPos

    Raises
    ------
    FileNotFoundError
        When the folder holds no pretext model (``pretext.json``): an encoder saved
        alone, or no saved model at all.
    """
    from safetensors.torch import load_file

    folder = Path(name_or_path)
    if str(name_or_path) in PRETRAINED_ENCODERS:
        folder = pretrained_path(str(name_or_path))
    if not (folder / "pretext.json").is_file():
        what = (
            "an encoder without its pretext model (config.json but no pretext.json): "
            "encoder.save_pretrained(folder) writes the encoder alone"
            if (folder / "config.json").is_file()
            else "no pretext model (no pretext.json)"
        )
        raise FileNotFoundError(
            f"'{folder}' holds {what}. The decoder is kept by exporting the pretraining "
            "run: the command 'braindecode-pars export --run RUN --out FOLDER', or "
            "braindecode_pars.hub.export_run(RUN, FOLDER), where RUN is a pretrain --out "
            "folder or <checkpoint_dir>/pretrain of PARSPretrainer(checkpoint_dir=...); "
            f"load_pretext_model(FOLDER) then reads it (or a shipped name: "
            f"{', '.join(PRETRAINED_ENCODERS)})."
        )
    spec = json.loads((folder / "pretext.json").read_text())
    method = spec.pop("method")
    model = _built_to_load(PRETEXT_MODELS[method], **spec)
    model.load_state_dict(unwrapped_state_dict(load_file(folder / "pretext.safetensors")))
    return model.eval()


def _save_pretrained_encoder(encoder, folder, pretext=None, pretext_spec=None, license=None):
    """Save an encoder in the Hugging Face layout (and optionally its pretext model).

    ``encoder.save_pretrained(folder)`` writes ``config.json`` and
    ``model.safetensors`` (and no pickled copy of the weights: see
    :meth:`PatchEncoder._save_pretrained <braindecode_pars.PatchEncoder>`). ``pretext``
    (a pretext model) is written as ``pretext.safetensors`` with ``pretext_spec`` (its
    constructor arguments and ``method``) as ``pretext.json``. ``README.md`` is the
    model card of :func:`model_card`: the encoder's size and, with ``pretext_spec``,
    its pretext task (:func:`export_run` writes the card of a whole run).

    Parameters
    ----------
    encoder : PatchEncoder
    folder : str | Path
    pretext : PretextModel | None
    pretext_spec : dict | None
    license : str | None
        The licence of the weights, as a Hugging Face licence identifier
        (``"bsd-3-clause"``, ``"cc-by-4.0"``...), written into the card's header;
        None: not stated.

    Returns
    -------
    folder : Path
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stale = folder / "pytorch_model.bin"  # written by earlier versions: other weights
    if stale.is_file():
        logger.info("Removing '%s', a copy of earlier weights.", stale)
        stale.unlink()
    encoder.save_pretrained(folder)
    if pretext is not None:
        state = {k: v.detach().cpu().contiguous() for k, v in pretext.state_dict().items()}
        with atomic_path(folder / "pretext.safetensors") as tmp:
            save_file(unwrapped_state_dict(state), tmp)
        write_atomic(folder / "pretext.json", json.dumps(pretext_spec, indent=1))
    card = model_card(
        encoder, pretext_spec=pretext_spec, license=license, name=folder.name,
        overlap=_overlap_of(pretext),
    )  # fmt: skip
    write_atomic(folder / "README.md", card)
    return folder


def run_state(run_dir):
    """The folder of the last complete state of a pretraining run, or None.

    The state is written by :class:`~braindecode_pars.pretraining.StateCheckpoint`:
    ``<run_dir>/state.json`` names a folder holding ``params.pt``, ``optimizer.pt``
    and ``history.json``.
    """
    pointer = Path(run_dir) / "state.json"
    if not pointer.is_file():
        return None
    folder = Path(run_dir) / json.loads(pointer.read_text())["state"]
    return folder if (folder / "params.pt").is_file() else None


def run_status(run_dir):
    """How far a pretraining run got: ``{"epoch", "max_epochs", "finished"}``.

    ``epoch`` is the number of epochs of its last complete state (0 if none),
    ``max_epochs`` its budget (None if not recorded) and ``finished`` whether it did
    them all and wrote its final ``encoder.pt``. An interrupted run, or one stopped by
    a time limit, is unfinished until it is resumed to the end.
    """
    run_dir = Path(run_dir)
    pointer = run_dir / "state.json"
    saved = json.loads(pointer.read_text()) if pointer.is_file() else {}
    config_file = run_dir / "config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    epoch = int(saved.get("epoch", 0)) if run_state(run_dir) is not None else 0
    budget = saved.get("max_epochs", config.get("max_epochs"))
    finished = (run_dir / "encoder.pt").is_file() and (budget is None or epoch >= budget)
    return {"epoch": epoch, "max_epochs": budget, "finished": finished}


def export_run(run_dir, folder, license=None, names=None):
    """Export a pretraining run (a :class:`PretrainNet` ``checkpoint_dir``) for sharing.

    Rebuilds the pretext model from the run's ``config.json``, loads the parameters
    of its last complete state (a run trained with ``compile=True`` or under
    ``torchrun`` too: their ``_orig_mod.`` and ``module.`` key prefixes are dropped,
    see :func:`unwrapped_state_dict`), and writes the encoder in the Hugging Face
    layout (:func:`_save_pretrained_encoder`, with the pretext model) plus the run's
    history without its batches (``pretrain_history.json``), settings
    (``run_config.json``: the run's ``config.json``, its recordings counted, never
    named, nothing local: the store and the command's paths as placeholders,
    ``<store>``, unless ``names`` names them, no salt;
    :func:`~braindecode_pars.models.card.public_run_config`) and model card
    (``README.md``, :func:`model_card`: the pretext task, the encoder, the data, the
    budget, the skill reached, whether the run finished, how to load it and the
    command that made it, where the run recorded one in its ``config.json`` or
    ``state.json``). A run of an earlier version that lists its recordings by name is
    exported with their number and a hash instead, with a warning.

    Parameters
    ----------
    run_dir : str | Path
        The run's folder.
    folder : str | Path
        The folder to write.
    license : str | None
        The licence of the weights (a Hugging Face licence identifier, such as
        ``"cc-by-4.0"``) for the card's header; None: not stated.
    names : dict | None
        Public names for the run's paths, which are placeholders otherwise:
        ``{"store": "tuh-abnormal"}`` gives ``--store tuh-abnormal`` in the card's
        command and the store's line; a kind is a path flag without its dashes
        (``"store"``, ``"out"``, ``"config"``...) or ``"path"``, a name is not a path.

    Returns
    -------
    folder : Path
    """
    run_dir = Path(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    state = run_state(run_dir)
    if state is None:
        raise FileNotFoundError(f"'{run_dir}' holds no saved training state.")
    status = run_status(run_dir)
    if not status["finished"]:
        logger.warning(
            "'%s' is an unfinished run (%d of %s epochs); exporting its last saved state.",
            run_dir, status["epoch"], status["max_epochs"],
        )  # fmt: skip
    method = config["model"].lower()
    spec = {"method": method, "n_times": config["n_times"], "sfreq": config["sfreq"]}
    for name, key in PRETEXT_SETTINGS.items():
        if key in config:
            spec[name] = config[key]
    spec.update(PatchEncoderConfig.from_record(config).asdict())
    kwargs = {k: v for k, v in spec.items() if k != "method"}
    model = _built_to_load(PRETEXT_MODELS[method], **kwargs)
    params = torch.load(state / "params.pt", map_location="cpu", weights_only=True)
    model.load_state_dict(unwrapped_state_dict(params))
    folder = _save_pretrained_encoder(model.encoder, folder, pretext=model, pretext_spec=spec)
    history = json.loads((state / "history.json").read_text())
    history = [{k: v for k, v in row.items() if k != "batches"} for row in history]
    write_atomic(folder / "pretrain_history.json", json.dumps(history, indent=1))
    if listed_recordings(config):
        logger.warning(
            "'%s' lists the run's %d recordings by name (a run of an earlier version); the "
            "export holds their number and a hash only. Rewrite the run's record the same "
            "way: python -m braindecode_pars.store.identity '%s' "
            "(braindecode_pars.store.anonymize).",
            run_dir / "config.json", len(config["data.recordings"]), run_dir,
        )  # fmt: skip
    config = public_run_config(config, names)
    write_atomic(folder / "run_config.json", json.dumps(config, indent=1))
    pointer = json.loads((run_dir / "state.json").read_text())
    card = model_card(
        model.encoder,
        pretext_spec=spec,
        run_config=config,
        history=history,
        status=status,
        command=config.get("command", pointer.get("command")),
        license=license,
        name=folder.name,
        overlap=_overlap_of(model),
    )
    write_atomic(folder / "README.md", card)
    return folder


def _overlap_of(pretext):
    """The overlap statistics of a pretext model's patch draws for its card (seeded;
    :meth:`~braindecode_pars.PARS.overlap_statistics`), or None for a model without
    them."""
    statistics = getattr(pretext, "overlap_statistics", None)
    if statistics is None:
        return None
    return statistics(4096, generator=torch.Generator().manual_seed(0))
