"""braindecode-pars: self-supervised pretraining of EEG models with PARS and its baselines."""

import logging

from .models import PARS, PatchEncoder

__version__ = "0.1.0.dev0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["PARS", "PatchEncoder", "__version__"]
