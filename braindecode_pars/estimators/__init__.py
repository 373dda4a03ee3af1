"""The scikit-learn estimators: an encoder stage, two heads, and their composition.

:class:`PARSPretrainer` pretrains an encoder; :class:`PARSProbe` and
:class:`PARSFineTuner` classify over one; :class:`PARSClassifier` composes an encoder
stage and a head in one ``fit``.
"""

from braindecode_pars.estimators.classifier import PARSClassifier
from braindecode_pars.estimators.finetuner import PARSFineTuner
from braindecode_pars.estimators.pretrainer import PARSPretrainer
from braindecode_pars.estimators.probe import PARSProbe

__all__ = ["PARSClassifier", "PARSFineTuner", "PARSPretrainer", "PARSProbe"]
