"""The scikit-learn estimators: an encoder stage, two heads, and their composition.

:class:`PARSPretrainer` pretrains an encoder; :class:`~braindecode_pars.PARSProbe`
and :class:`PARSFineTuner` classify over one;
:class:`PARSClassifier` composes an encoder stage and a head in one ``fit``.
"""

from ..probe.estimator import PARSProbe
from ..training._finetune import STRATEGIES
from .classifier import PARSClassifier
from .finetuner import PARSFineTuner
from .pretrainer import PARSPretrainer

__all__ = ["PARSClassifier", "PARSFineTuner", "PARSPretrainer", "PARSProbe", "STRATEGIES"]
