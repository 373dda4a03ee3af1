"""braindecode models, nn.Modules only: the shared encoder, the pretext models and the
multi-channel classifier.

- :mod:`~braindecode_pars.models.encoder` (:class:`PatchEncoder`) and
  :mod:`~braindecode_pars.models.encoder_config` (:class:`PatchEncoderConfig`);
- :mod:`~braindecode_pars.models.pretext`: PARS, MAE, MP3 and DropPos;
- :mod:`~braindecode_pars.models.pair`: PARS's pair decoder and its operator;
- :mod:`~braindecode_pars.models.multichannel`: :class:`MultiChannelClassifier`.
"""

from braindecode_pars.models.encoder import PatchEncoder
from braindecode_pars.models.encoder_config import PatchEncoderConfig
from braindecode_pars.models.multichannel import MultiChannelClassifier
from braindecode_pars.models.pretext import MAE, MP3, PARS, DropPos, PretextModel

__all__ = [
    "DropPos",
    "MAE",
    "MP3",
    "MultiChannelClassifier",
    "PARS",
    "PatchEncoder",
    "PatchEncoderConfig",
    "PretextModel",
]
