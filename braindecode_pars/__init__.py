"""braindecode-pars: self-supervised pretraining of EEG models with PARS and its baselines."""

import logging
import warnings

with warnings.catch_warnings():
    # braindecode's import announces a change of its standard_1020 montage, which this
    # package does not use: an import of the package prints nothing
    warnings.filterwarnings("ignore", message=".*standard_1020.*", category=FutureWarning)
    # and wfdb, which braindecode imports, uses a pandas argument pandas deprecates
    warnings.filterwarnings("ignore", module=r"wfdb\.")
    from braindecode_pars.estimators import PARSClassifier, PARSFineTuner, PARSPretrainer, PARSProbe
    from braindecode_pars.hub import load_encoder, save_encoder
    from braindecode_pars.models import (
        MAE,
        MP3,
        PARS,
        DropPos,
        MultiChannelClassifier,
        PatchEncoder,
        PatchEncoderConfig,
    )
    from braindecode_pars.pretraining import PretrainNet

__version__ = "0.1.0.dev0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "DropPos",
    "MAE",
    "MP3",
    "MultiChannelClassifier",
    "PARS",
    "PARSClassifier",
    "PARSFineTuner",
    "PARSPretrainer",
    "PARSProbe",
    "PatchEncoder",
    "PatchEncoderConfig",
    "PretrainNet",
    "__version__",
    "load_encoder",
    "save_encoder",
]
