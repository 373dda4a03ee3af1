"""braindecode models: the shared encoder, the pretext models, the fine-tuning model."""

from .classifier import MultiChannelClassifier
from .droppos import DropPos
from .encoder import PatchEncoder, sinusoidal_embedding
from .mae import MAE
from .mp3 import MP3
from .pair_decoders import CrossAttentionPairDecoder, MLPPairDecoder
from .pars import PARS
from .pretext import PretextModel

#: Pretext models by name, as the estimators and the command line call them.
PRETEXT_MODELS = {"pars": PARS, "mae": MAE, "mp3": MP3, "droppos": DropPos}

__all__ = [
    "PRETEXT_MODELS",
    "CrossAttentionPairDecoder",
    "DropPos",
    "MAE",
    "MLPPairDecoder",
    "MP3",
    "MultiChannelClassifier",
    "PARS",
    "PatchEncoder",
    "PretextModel",
    "sinusoidal_embedding",
]
