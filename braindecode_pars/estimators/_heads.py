"""What :class:`~braindecode_pars.PARSClassifier` asks of a head, checked before any work.

A head is a scikit-learn estimator with ``fit``, ``predict`` and ``classes_`` that takes
3-D windows (:func:`takes_windows`, :func:`check_head_input`) and is given the encoder
once (:func:`check_encoder_given_once`); the classifier's optional methods exist only
when the head has them (:func:`_head_has`), and ``fit``'s parameters go to the stages
whose ``fit`` takes them (:func:`_takes`). The head contract is described in the
package's architecture notes.
"""

from __future__ import annotations

import inspect

from sklearn.dummy import DummyClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from braindecode_pars.estimators.probe import PARSProbe

#: ``encoder``'s default in :class:`~braindecode_pars.PARSClassifier` and
#: :class:`~braindecode_pars.PARSFineTuner`: the shipped
#: :data:`~braindecode_pars.weights.DEFAULT_ENCODER`, unless another stage gives one (a
#: head's ``"default"`` gives way to the classifier's ``encoder``).
DEFAULT = "default"

#: The methods of the head that PARSClassifier's methods of the same name call.
_HEAD_METHODS = ("fit", "predict", "predict_proba", "transform", "score")


def _head_has(method):
    """``available_if``'s check: whether the head (the fitted one, else the one given, or
    the default probe) has ``method``."""

    def check(self):
        head = getattr(self, "head_", None)
        if head is None:
            head = PARSProbe() if self.head is None else self.head
        return hasattr(head, method)

    return check


#: Packages whose estimators take 2-D features only (validated as ``(n_samples,
#: n_features)``), unless their tags say otherwise.
_TWO_D_PACKAGES = ("sklearn",)


def takes_windows(estimator):
    """Whether ``estimator`` can take 3-D windows, shape (n_windows, n_channels, n_times),
    as a :class:`PARSClassifier` head receives them.

    The rule, in order:

    - its scikit-learn tags say so (``input_tags.three_d_array``, as this library's
      window estimators, MNE's and any estimator of your own can declare);
    - a ``Pipeline`` takes what its first step (``"passthrough"`` skipped) takes; a
      meta-estimator with an ``estimator`` parameter (``GridSearchCV``,
      ``CalibratedClassifierCV``...) what its estimator takes;
    - scikit-learn's own estimators take 2-D features only, except
      ``FunctionTransformer(validate=False)`` (a reshape of yours) and
      ``DummyClassifier``, which read any array;
    - any other estimator (yours, pyriemann's ``Covariances``, braindecode's) is
      trusted to take them.
    """
    tags = getattr(estimator, "__sklearn_tags__", None)
    if tags is not None:
        try:
            if tags().input_tags.three_d_array:
                return True
        except (AttributeError, TypeError):
            pass
    if isinstance(estimator, Pipeline):
        steps = [s for _, s in estimator.steps if s not in ("passthrough", None)]
        return not steps or takes_windows(steps[0])
    params = estimator.get_params(deep=False) if hasattr(estimator, "get_params") else {}
    if hasattr(params.get("estimator"), "fit"):
        return takes_windows(params["estimator"])
    if isinstance(estimator, FunctionTransformer):
        return not estimator.validate
    if isinstance(estimator, DummyClassifier):
        return True
    return type(estimator).__module__.split(".")[0] not in _TWO_D_PACKAGES


def check_head_input(head, name="head"):
    """Refuse, before any work, a head that cannot take 3-D windows (see
    :func:`takes_windows`), naming it and showing the fix."""
    if takes_windows(head):
        return
    shown = type(head).__name__
    if isinstance(head, Pipeline):
        first = next(s for _, s in head.steps if s not in ("passthrough", None))
        shown = f"{shown} whose first step is {type(first).__name__}"
        head = first
    what = type(head).__name__
    raise ValueError(
        f"'{name}' ({shown}) cannot take the windows a head receives: 3-D arrays of shape "
        f"(n_windows, n_channels, n_times), while {what} takes 2-D features (n_windows, "
        f"n_features). Put a features step before it, e.g. {name}=make_pipeline("
        f"EncoderFeatures(encoder=...), {what}(...)) or make_pipeline(BandPowerFeatures(), "
        f"{what}(...)) (braindecode_pars.features), or use PARSProbe() (the encoder's "
        "features, band powers and covariances under a logistic regression). An estimator "
        "of your own that takes 3-D input can say so in its tags "
        "(input_tags.three_d_array = True)."
    )


def _takes(estimator, name, by_name=False):
    """Whether ``estimator.fit`` takes the parameter ``name`` (by name; or, unless
    ``by_name``, through ``**kwargs``)."""
    if estimator is None:
        return False
    params = inspect.signature(estimator.fit).parameters
    if name in params:
        return True
    return not by_name and any(p.kind is p.VAR_KEYWORD for p in params.values())


def check_encoder_given_once(encoder, head):
    """Refuse an encoder given twice: the head's own ``encoder`` set while the
    classifier's ``encoder`` (not ``"default"``) is too, or an encoder for a head with no
    ``encoder`` parameter to receive it."""
    params = head.get_params(deep=False)
    own, name = params.get("encoder"), type(head).__name__
    if own is not None and not _is_default(own):  # a head's "default" gives way
        raise ValueError(
            f"Two encoders: the head's own 'encoder' is {_shown(own)} and the "
            f"classifier's 'encoder' is {_shown(encoder)}. Give the encoder once: "
            f"PARSClassifier(encoder=..., head={name}(encoder=None, ...)), or "
            f"PARSClassifier(head={name}(encoder=...)) (the classifier's encoder left "
            "at 'default') to use the head's."
        )
    if "encoder" not in params and encoder is not None:
        raise ValueError(
            f"'head' ({name}) has no 'encoder' parameter to receive the encoder "
            f"{_shown(encoder)}; set encoder=None (or leave it at 'default'), or "
            "give the head an 'encoder' parameter."
        )


def _is_default(value):
    """Whether an ``encoder`` parameter is :data:`DEFAULT` (not an encoder or a path)."""
    return isinstance(value, str) and value == DEFAULT


def _shown(value):
    """A parameter's value as a message shows it: a string or None as written, else its
    type."""
    return repr(value) if value is None or isinstance(value, str) else type(value).__name__
