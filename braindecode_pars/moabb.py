"""PARS estimators as MOABB pipelines.

MOABB's paradigms give the trials of a dataset as an array (n_trials, n_chans, n_times)
at the dataset's sampling rate, scaled to microvolts by the dataset's ``unit_factor``
(1e6 for recordings in volts; MOABB 1.7's ``_get_array_pipeline``), or, with
``return_epochs=True``, as ``mne.Epochs`` in MNE's volts. The shipped encoders read
microvolts at 100 Hz. :class:`MOABBAdapter` sits between the two: it resamples the
trials to the encoder's rate (:func:`~braindecode_pars.io.resample_windows`),
brings epochs to microvolts and
hands them to the estimator it wraps, for ``fit``, ``predict`` and ``score`` alike, so
any of MOABB's evaluations can score it::

    from moabb.evaluations import CrossSessionEvaluation
    from braindecode_pars.moabb import moabb_pipeline

    pipelines = {"PARS": moabb_pipeline("pars-small-v2", sfreq=dataset_sfreq)}
    CrossSessionEvaluation(paradigm=paradigm, datasets=[dataset]).process(pipelines)

In ``CrossSubjectEvaluation(cs_mode="train_and_target_unlabeled_20p")`` (and the other
unlabelled-target modes) MOABB routes an unlabelled slice of the held-out subject's
trials to ``fit`` as ``X_target_unlabeled``; the adapter requests it by default and
passes it, resampled and scaled, to the wrapped estimator when its ``fit`` takes it
(:class:`~braindecode_pars.PARSClassifier` pretrains on it: transductive adaptation).

MOABB is an optional dependency (``pip install braindecode-pars[moabb]``); this module
imports without it.
"""

from __future__ import annotations

import inspect
import logging

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from braindecode_pars._util.checks import check_option
from braindecode_pars.weights import DEFAULT_ENCODER

logger = logging.getLogger(__name__)

#: The factor that brings each accepted input unit to microvolts.
_UNITS = {"uV": 1.0, "mV": 1e3, "V": 1e6}


class MOABBAdapter(MetaEstimatorMixin, ClassifierMixin, BaseEstimator):
    """A classifier over MOABB's trials: resample, scale to microvolts, then ``estimator``.

    Parameters
    ----------
    estimator : estimator | None
        The classifier to fit on the prepared trials (any classifier of windows, the
        floors of :mod:`braindecode_pars.features` too). None:
        ``PARSClassifier(encoder=DEFAULT_ENCODER, verbose=0)`` (``"pars-small-v2"``). When
        it, or a step of it, has an ``sfreq`` parameter left as None, the adapter sets it to
        the rate it hands over.
    sfreq : float | None
        Sampling rate of array input (MOABB's ``dataset.interval`` trials keep the
        dataset's rate, e.g. 160 Hz for ``PhysionetMI``); read from ``mne.Epochs``.
    resample_to : float | None
        Rate the estimator reads (100.0: the shipped encoders' rate); None keeps the
        input's rate.
    unit : {"uV", "mV", "V"}
        Unit of array input: "uV" for MOABB's arrays (its paradigms scale them by the
        dataset's ``unit_factor``). ``mne.Epochs`` are always read in volts (MNE's
        unit). The estimator gets microvolts.

    Attributes
    ----------
    estimator_ : estimator
        The fitted clone of ``estimator``.
    classes_ : ndarray
    sfreq_in_, sfreq_ : float
        The input's rate and the rate the estimator read.
    n_target_unlabeled_ : int
        How many ``X_target_unlabeled`` trials reached the estimator's ``fit``.
    """

    # MOABB's unlabelled-target modes route the held-out subject's trials by metadata
    # routing: requested by default, so that no set_fit_request call is needed
    __metadata_request__fit = {"X_target_unlabeled": True}

    def __init__(self, estimator=None, *, sfreq=None, resample_to=100.0, unit="uV"):
        self.estimator = estimator
        self.sfreq = sfreq
        self.resample_to = resample_to
        self.unit = unit

    def _check_params(self):
        check_option("unit", self.unit, tuple(_UNITS))
        for name in ("sfreq", "resample_to"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, int | float) and not isinstance(value, bool) and value > 0
            ):
                raise ValueError(
                    f"'{name}' must be a positive number (Hz) or None, but got {value!r}."
                )

    def _prepare(self, X, sfreq):
        """``X`` (array or ``mne.Epochs``) as a float32 array in microvolts at the rate
        the estimator reads, and that rate."""
        import mne

        from braindecode_pars.io import resample_windows

        factor = _UNITS[self.unit]
        if isinstance(X, mne.BaseEpochs):
            sfreq, factor = float(X.info["sfreq"]), _UNITS["V"]
            X = X.get_data(copy=False)
        X = np.asarray(X)
        if X.ndim != 3:
            raise ValueError(
                "'X' must be MOABB's trials, an array of shape (n_trials, n_chans, n_times) "
                f"or mne.Epochs, but got an array of shape {X.shape}."
            )
        if sfreq is None:
            raise ValueError(
                "'sfreq' must be set (the dataset's sampling rate in Hz) for array input, "
                "but got None; or pass MOABB's epochs (return_epochs=True)."
            )
        X = X.astype(np.float64, copy=False) * factor
        rate = float(sfreq)
        if self.resample_to is not None and not np.isclose(rate, self.resample_to):
            X = resample_windows(X, rate, float(self.resample_to))
            rate = float(self.resample_to)
        return X.astype(np.float32), rate

    def _estimator(self, rate):
        if self.estimator is None:
            from braindecode_pars.estimators.classifier import PARSClassifier

            estimator = PARSClassifier(encoder=DEFAULT_ENCODER, verbose=0)
        else:
            estimator = clone(self.estimator)
        # the estimator's own sfreq, or its steps' (a pipeline: the classical floors)
        unset = {
            name: rate
            for name, value in estimator.get_params(deep=True).items()
            if (name == "sfreq" or name.endswith("__sfreq")) and value is None
        }
        if "sfreq" in unset:
            unset = {"sfreq": rate}
        estimator.set_params(**unset)
        return estimator

    def fit(self, X, y, X_target_unlabeled=None):
        """Prepare the trials and fit a clone of ``estimator`` on them.

        Parameters
        ----------
        X : ndarray, shape (n_trials, n_chans, n_times) | mne.Epochs
            MOABB's trials.
        y : array-like, shape (n_trials,)
        X_target_unlabeled : ndarray | mne.Epochs | None
            Unlabelled trials of the held-out subject, routed by MOABB's
            ``CrossSubjectEvaluation`` in its unlabelled-target modes; prepared like
            ``X`` and given to the estimator's ``fit`` when it takes them (transductive),
            ignored (logged) otherwise.

        Returns
        -------
        self : MOABBAdapter
        """
        self._check_params()
        X, rate = self._prepare(X, self.sfreq)
        self.sfreq_in_ = float(self.sfreq) if self.sfreq is not None else None
        estimator = self._estimator(rate)
        extra, self.n_target_unlabeled_ = {}, 0
        if X_target_unlabeled is not None:
            takes = "X_target_unlabeled" in inspect.signature(estimator.fit).parameters
            if takes:
                extra["X_target_unlabeled"] = self._prepare(X_target_unlabeled, self.sfreq)[0]
                self.n_target_unlabeled_ = len(extra["X_target_unlabeled"])
            else:
                logger.info(
                    "%s.fit takes no 'X_target_unlabeled': the %d target trials are not used.",
                    type(estimator).__name__,
                    len(X_target_unlabeled),
                )
        estimator.fit(X, y, **extra)
        self.estimator_ = estimator
        self.classes_ = estimator.classes_
        self.sfreq_ = rate
        return self

    def _prepared(self, X):
        check_is_fitted(self, "estimator_")
        return self._prepare(X, self.sfreq)[0]

    def predict(self, X):
        """Predicted labels, shape (n_trials,)."""
        return self.estimator_.predict(self._prepared(X))

    def predict_proba(self, X):
        """Class probabilities, shape (n_trials, n_classes), columns in ``classes_`` order."""
        return self.estimator_.predict_proba(self._prepared(X))

    @available_if(lambda self: hasattr(self._estimator(100.0), "decision_function"))
    def decision_function(self, X):
        """The estimator's decision function (when it has one), e.g. for ROC-AUC scoring."""
        return self.estimator_.decision_function(self._prepared(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.input_tags.two_d_array = False
        return tags


def moabb_pipeline(
    encoder=DEFAULT_ENCODER,
    head=None,
    *,
    sfreq=None,
    resample_to=100.0,
    unit="uV",
    random_state=None,
    verbose=0,
):
    """``PARSClassifier(encoder, head)`` ready for MOABB's evaluations.

    Parameters
    ----------
    encoder, head
        As :class:`~braindecode_pars.PARSClassifier` takes them: a shipped name
        (:data:`~braindecode_pars.hub.DEFAULT_ENCODER`, ``"pars-small-v2"``, by default),
        a ``PatchEncoder``, or a ``PARSPretrainer`` (pretraining in
        each fit, on the training trials and, in MOABB's unlabelled-target
        cross-subject modes, the held-out subject's trials).
    sfreq : float | None
        The dataset's sampling rate (None: MOABB's epochs, ``return_epochs=True``).
    resample_to : float | None
        The encoder's rate (100 Hz for the shipped encoders).
    unit : {"uV", "mV", "V"}
        Unit of array input (MOABB's arrays: microvolts); epochs are read in volts.
    random_state : int | None
    verbose : int

    Returns
    -------
    pipeline : MOABBAdapter
        A scikit-learn classifier over MOABB's trials.
    """
    from braindecode_pars.estimators.classifier import PARSClassifier

    classifier = PARSClassifier(
        encoder=encoder, head=head, random_state=random_state, verbose=verbose
    )
    return MOABBAdapter(classifier, sfreq=sfreq, resample_to=resample_to, unit=unit)
