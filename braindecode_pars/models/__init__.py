"""braindecode models: the shared encoder, the pretext models, the fine-tuning model."""

from .droppos import DropPos
from .encoder import PatchEncoder
from .encoder_config import ENCODER_SIZES, PatchEncoderConfig
from .mae import MAE
from .mp3 import MP3
from .multichannel import MultiChannelClassifier
from .pair_decoders import CrossAttentionPairDecoder, MLPPairDecoder
from .pars import PARS
from .pretext import PretextModel

#: Pretext models by name, as the estimators and the command line call them.
PRETEXT_MODELS = {"pars": PARS, "mae": MAE, "mp3": MP3, "droppos": DropPos}


def _pretext_params(method, n_patches=40, pos_mask_ratio=0.8, mask_ratio=0.75):
    """The settings that the pretext model ``method`` takes, from one shared set.

    ``pos_mask_ratio`` is PARS's and DropPos's ``gamma_pos``; ``mask_ratio`` is the
    share of patches MAE and DropPos remove and MP3 hides from keys and values.
    """
    return {
        "pars": dict(n_patches=n_patches, pos_mask_ratio=pos_mask_ratio),
        "mae": dict(mask_ratio=mask_ratio),
        "mp3": dict(mask_ratio=mask_ratio),
        "droppos": dict(mask_ratio=mask_ratio, pos_mask_ratio=pos_mask_ratio),
    }[method]


__all__ = [
    "ENCODER_SIZES",
    "PRETEXT_MODELS",
    "CrossAttentionPairDecoder",
    "DropPos",
    "MAE",
    "MLPPairDecoder",
    "MP3",
    "MultiChannelClassifier",
    "PARS",
    "PatchEncoder",
    "PatchEncoderConfig",
    "PretextModel",
]
