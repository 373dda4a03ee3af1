"""The pretext models: PARS and the paper's baselines (MAE, MP3, DropPos), each a
braindecode model over one :class:`~braindecode_pars.models.PatchEncoder`."""

from braindecode_pars.models.pretext.base import PretextModel
from braindecode_pars.models.pretext.droppos import DropPos
from braindecode_pars.models.pretext.mae import MAE
from braindecode_pars.models.pretext.mp3 import MP3
from braindecode_pars.models.pretext.pars import PARS, patch_overlap

#: The pretext models by method name, as the command line and the estimators take them.
PRETEXT_MODELS = {"pars": PARS, "mae": MAE, "mp3": MP3, "droppos": DropPos}

__all__ = ["DropPos", "MAE", "MP3", "PARS", "PRETEXT_MODELS", "PretextModel", "patch_overlap"]
