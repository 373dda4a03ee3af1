"""Feature transformers (scikit-learn's ``fit``/``transform``) over multi-channel
windows: a frozen encoder's features, log band power, the tangent space, and the
probe's recipe of blocks.

- :mod:`~braindecode_pars.features.blocks`: :class:`EncoderFeatures`,
  :class:`BandPowerFeatures` and the covariances;
- :mod:`~braindecode_pars.features.scaling`: the block scaler and the alignment within
  groups;
- :mod:`~braindecode_pars.features.recipe`: :class:`ProbeRecipe`, the probe's blocks and
  its C;
- :func:`band_power_pipeline` and :func:`riemann_pipeline`: the classical floors as
  pipelines;
- :data:`DEFAULT_BANDS`: the band-power block's bands unless ``bands=`` names others
  (a preset of :data:`~braindecode_pars.features.blocks.BAND_PRESETS`, such as
  ``"sleep"``, or bands of your own).

The probe over them, :class:`~braindecode_pars.PARSProbe`, is an estimator
(:mod:`braindecode_pars.estimators`).
"""

from braindecode_pars.features._baselines import band_power_pipeline, riemann_pipeline
from braindecode_pars.features.blocks import DEFAULT_BANDS, BandPowerFeatures, EncoderFeatures
from braindecode_pars.features.recipe import ProbeRecipe

__all__ = [
    "DEFAULT_BANDS",
    "BandPowerFeatures",
    "EncoderFeatures",
    "ProbeRecipe",
    "band_power_pipeline",
    "riemann_pipeline",
]
