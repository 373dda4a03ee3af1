"""braindecode-pars: self-supervised pretraining of EEG models with PARS and its baselines."""

import logging

from .estimator import PARSClassifier
from .hub import load_encoder, save_encoder
from .models import MAE, MP3, PARS, DropPos, MultiChannelClassifier, PatchEncoder
from .training import PretrainNet

__version__ = "0.1.0.dev0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "DropPos",
    "MAE",
    "MP3",
    "MultiChannelClassifier",
    "PARS",
    "PARSClassifier",
    "PatchEncoder",
    "PretrainNet",
    "__version__",
    "load_encoder",
    "save_encoder",
]
