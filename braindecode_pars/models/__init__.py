"""braindecode models: the shared encoder and the pretext models."""

from .classifier import MultiChannelClassifier
from .encoder import PatchEncoder, sinusoidal_embedding
from .pair_decoders import CrossAttentionPairDecoder, MLPPairDecoder
from .pars import PARS
from .pretext import PretextModel

__all__ = [
    "MultiChannelClassifier",
    "PatchEncoder",
    "PARS",
    "PretextModel",
    "CrossAttentionPairDecoder",
    "MLPPairDecoder",
    "sinusoidal_embedding",
]
