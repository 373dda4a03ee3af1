"""The probe: a class-balanced logistic regression over blocks of features of
multi-channel windows (a frozen encoder's, log band power, the tangent space).

- :mod:`~braindecode_pars.probe.features`: the blocks, computed once per fit
  (:class:`EncoderFeatures`, :class:`BandPowerFeatures`, the covariances);
- :mod:`~braindecode_pars.probe.scaling`: :class:`BlockScaler` and the alignment within
  groups (:class:`AlignFeatures`, :class:`AlignCovariances`, :class:`AlignSignals`);
- :mod:`~braindecode_pars.probe.recipe`: :class:`ProbeRecipe` and the one fitting path,
  :func:`~braindecode_pars.probe.recipe.fit_blocks`;
- :mod:`~braindecode_pars.probe.estimator`: :class:`PARSProbe`;
- :mod:`~braindecode_pars.probe.baselines`: the classical floors.
"""

from .baselines import band_power_pipeline, riemann_pipeline
from .estimator import PARSProbe
from .features import BandPowerFeatures, EncoderFeatures
from .recipe import ProbeRecipe
from .scaling import AlignCovariances, AlignFeatures, AlignSignals, BlockScaler

__all__ = [
    "AlignCovariances",
    "AlignFeatures",
    "AlignSignals",
    "BandPowerFeatures",
    "BlockScaler",
    "EncoderFeatures",
    "PARSProbe",
    "ProbeRecipe",
    "band_power_pipeline",
    "riemann_pipeline",
]
