"""The encoders on disk: the shipped ones by name, saving, loading, exporting a run, and
the model card each folder carries (timm's hub, for EEG).

The shipped weights themselves are package data in :mod:`braindecode_pars.weights`,
which imports nothing, so that a model can resolve a shipped name without importing
this package back.
"""

from braindecode_pars.hub.folders import (
    export_run,
    list_encoders,
    load_encoder,
    load_pretext_model,
    run_status,
    save_encoder,
)
from braindecode_pars.weights import DEFAULT_ENCODER

__all__ = [
    "DEFAULT_ENCODER",
    "export_run",
    "list_encoders",
    "load_encoder",
    "load_pretext_model",
    "run_status",
    "save_encoder",
]
