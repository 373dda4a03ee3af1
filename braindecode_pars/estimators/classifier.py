"""PARSClassifier: an encoder stage, then a head, as one scikit-learn classifier."""

from __future__ import annotations

import logging
import warnings

from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from .._checks import check_option
from .._logging import verbose_logging
from ..probe.estimator import PARSProbe
from ..training.seeding import fit_seed
from ._common import SeededWindowsMixin, check_labels, load_encoder_param, read_input
from .finetuner import STRATEGIES, PARSFineTuner
from .pretrainer import as_sources

logger = logging.getLogger(__name__)


class PARSClassifier(SeededWindowsMixin, ClassifierMixin, TransformerMixin, BaseEstimator):
    """Pretrain (or load) a single-channel encoder, then classify multi-channel windows
    with a head over it, in one ``fit``.

    A meta-estimator of two stages, as scikit-learn's ``Pipeline`` composes steps:

    - the **encoder stage**: a :class:`~braindecode_pars.PARSPretrainer` (PARS or a
      baseline pretext task on ``X`` and ``X_unlabeled``), an encoder used as it is (a
      shipped name, ``"pars-small"``, a saved encoder's path, a
      :class:`~braindecode_pars.PatchEncoder`), or None (the default): no encoder;
    - the **head**: a :class:`~braindecode_pars.PARSProbe` (a logistic regression over
      the frozen encoder's features, log band power and the tangent space; the
      default) or a :class:`~braindecode_pars.PARSFineTuner` (the paper's fine-tuning,
      a braindecode ``EEGClassifier``), or any classifier with an ``encoder``
      parameter. A clone of it gets the encoder (``set_params(encoder=encoder_)``).

    Each stage's parameters are reached by scikit-learn's nested names
    (``encoder__steps``, ``encoder__depth``, ``head__C``, ``head__max_epochs``), so
    ``set_params``, ``clone`` and ``GridSearchCV`` reach every stage (give the stage
    as an instance to search its parameters) and unknown names are refused. ``X`` is
    read once per call: an array (set ``sfreq``), braindecode windows, a ``Subset``
    or skorch ``SliceDataset`` of them, the item lists scikit-learn makes of
    windows, or ``mne.Epochs`` (read in microvolts, as braindecode does).

    **What to expect**: ``PARSClassifier()`` is the probe over log band power and the
    tangent space, with no encoder: on the development tasks' selection splits, an
    encoder pretrained on the task's own unlabelled data did not raise the probe by a
    point, so the default does not spend minutes pretraining one
    (:doc:`/benchmarks/few_labels`). ``encoder=PARSPretrainer()`` pretrains on
    ``X`` and ``X_unlabeled`` for minutes on a CPU and adds the encoder's block; with
    ``head=PARSProbe(recipe="auto")`` and three subjects or more, ``fit`` says by
    inner cross-validation whether that block helps on your labels.

    Parameters
    ----------
    encoder : PARSPretrainer | str | Path | PatchEncoder | None
        None: no encoder (the head without an encoder block; no pretraining).
        ``PARSPretrainer(...)``, or any estimator whose ``fit(X, groups=...,
        X_unlabeled=...)`` sets ``encoder_``: pretraining inside ``fit``. An encoder
        used as it is: a shipped name, a saved encoder's path, a ``PatchEncoder``.
    head : PARSProbe | PARSFineTuner | {"probe", "full", "frozen", "lp-ft"} | estimator | None
        None or "probe": ``PARSProbe()``; "full", "frozen", "lp-ft":
        ``PARSFineTuner(strategy=...)``; or a classifier taking ``encoder``.
    sfreq : float | None
        Sampling rate of array input; read from windows that carry it.
    random_state : int | None
        When set, given to both stages (their own ``random_state`` otherwise).
    verbose : int
        0: silent, the stages too; 1: what ``fit`` is about to do (the stages say what
        their own ``verbose`` asks).

    Attributes
    ----------
    encoder_ : PatchEncoder | None
        The encoder the head got (pretrained here, or the one given; None without).
    pretrainer_ : estimator | None
        The fitted encoder stage (None when an encoder, or none, was given).
    n_target_unlabeled_ : int
        How many ``X_target_unlabeled`` windows pretraining read (0 without them).
    pretrain_history_ : skorch History | None
        The pretraining history (None without pretraining).
    head_ : estimator
        The fitted head.
    classes_ : ndarray
    sfreq_, n_chans_, n_times_ : float, int, int

    Examples
    --------
    >>> from sklearn.model_selection import LeaveOneGroupOut, cross_val_score
    >>> clf = PARSClassifier(encoder="pars-small")
    >>> cross_val_score(clf, windows, groups=subjects, cv=LeaveOneGroupOut())  # doctest: +SKIP
    """

    # under metadata routing, ``score`` asks for the scored windows' groups (an aligned
    # probe aligns each group on itself)
    __metadata_request__score = {"groups": True}

    def __init__(self, encoder=None, head=None, *, sfreq=None, random_state=None, verbose=1):
        self.encoder = encoder
        self.head = head
        self.sfreq = sfreq
        self.random_state = random_state
        self.verbose = verbose

    def set_params(self, **params):
        """scikit-learn's ``set_params``; a nested name (``encoder__depth``, ``head__C``)
        of a stage that is not an estimator (None; an encoder or its name) is refused at
        once, saying how to give the stage."""
        for key in params:
            stage, nested, name = key.partition("__")
            if not nested or stage not in ("encoder", "head"):
                continue
            value = params.get(stage, getattr(self, stage))
            if hasattr(value, "set_params"):
                continue
            what = repr(value) if value is None or isinstance(value, str) else type(value).__name__
            example = "PARSPretrainer(...)" if stage == "encoder" else "PARSProbe(...)"
            raise ValueError(
                f"Invalid parameter '{key}': '{stage}' is {what}, which has no parameter "
                f"'{name}'; give the stage as an instance to set its parameters, "
                f"{stage}={example}."
            )
        return super().set_params(**params)

    # -- the stages ----------------------------------------------------------------------
    def _encoder_stage(self):
        """(a clone of the pretraining stage, None) or (None, the given encoder)."""
        value = self.encoder
        if value is None:
            return None, None
        if hasattr(value, "fit") and hasattr(value, "get_params"):
            return self._cloned(value), None
        return None, load_encoder_param(value, "encoder", allow_none=False)

    def _head(self):
        value = "probe" if self.head is None else self.head
        if isinstance(value, str):
            check_option("head", value, ("probe", *STRATEGIES))
            value = PARSProbe() if value == "probe" else PARSFineTuner(strategy=value)
        if not (hasattr(value, "fit") and hasattr(value, "get_params")):
            raise TypeError(
                "'head' must be None, 'probe', 'full', 'frozen', 'lp-ft' or a classifier "
                f"with an 'encoder' parameter, but got {type(value).__name__} ({value!r})."
            )
        if "encoder" not in value.get_params(deep=False):
            raise ValueError(
                f"'head' ({type(value).__name__}) has no 'encoder' parameter to receive "
                "the encoder."
            )
        return self._cloned(value)

    def _cloned(self, stage):
        """A clone of ``stage`` with the classifier's ``random_state`` when it is set, and
        silent when the classifier is (``verbose=0``)."""
        stage = clone(stage)
        own = stage.get_params(deep=False)
        if self.random_state is not None and "random_state" in own:
            stage.set_params(random_state=self.random_state)
        if not self.verbose and "verbose" in own:
            stage.set_params(verbose=0)
        return stage

    # -- fit -----------------------------------------------------------------------------
    def fit(
        self,
        X,
        y=None,
        groups=None,
        X_unlabeled=None,
        X_valid=None,
        y_valid=None,
        X_target_unlabeled=None,
    ):
        """Read the windows once, fit the encoder stage, then the head over its encoder.

        Parameters
        ----------
        X : windows | ndarray, shape (n_windows, n_chans, n_times)
            Labelled windows.
        y : array-like, shape (n_windows,) | None
            Labels; None: read from the windows.
        groups : array-like, shape (n_windows,) | None
            The subject (or block) of each window: pretraining validates its skill on
            whole held-out groups, a head that needs groups (an aligned probe, a
            validation split) gets them. braindecode windows give their ``subject``.
            In ``cross_val_score``, pass them to ``fit`` too:
            ``params={"groups": groups}``.
        X_unlabeled : windows | ndarray | list of them | None
            More windows for pretraining only.
        X_valid, y_valid : like ``X`` and ``y`` | None
            A fixed validation set, for a neural head.
        X_target_unlabeled : windows | ndarray | None
            Unlabelled windows of the subjects the classifier will be scored on, as
            MOABB's ``CrossSubjectEvaluation`` routes them to ``fit`` in its
            ``cs_mode="train_and_target_unlabeled_*"`` modes (request them with
            ``set_fit_request(X_target_unlabeled=True)``). They join ``X_unlabeled`` in
            pretraining: **transductive**, the encoder adapts to the test subjects' EEG
            (never to their labels). Their number is kept in ``n_target_unlabeled_``.
            With an encoder used as it is (no pretraining stage) they are not used, and
            the log says so.

        Returns
        -------
        self : PARSClassifier
        """
        check_option("verbose", self.verbose, (0, 1, 2, False, True))
        if self.random_state is not None:
            fit_seed(self.random_state)  # type check
        head = self._head()  # every check that needs no data, before reading it
        stage, encoder = self._encoder_stage()
        for estimator in (stage, head):  # the stages' own parameters, before any work
            if hasattr(estimator, "check_params"):
                estimator.check_params()
            elif hasattr(estimator, "_check_params"):
                estimator._check_params()
        if X_valid is not None and not isinstance(head, PARSFineTuner):
            raise ValueError(
                "'X_valid' chooses the best epoch of a neural head, but the head is a "
                f"{type(head).__name__}: leave 'X_valid' as None, or use "
                "head=PARSFineTuner(...)."
            )
        if X_unlabeled is not None and stage is None:
            used = "None (no encoder)" if encoder is None else "an encoder used as it is"
            raise ValueError(
                f"'X_unlabeled' feeds pretraining, but 'encoder' is {used}; leave "
                "'X_unlabeled' as None, or set encoder=PARSPretrainer(...)."
            )
        n_target = 0 if X_target_unlabeled is None else len(X_target_unlabeled)
        if X_target_unlabeled is not None and stage is None:
            logger.warning(
                "'X_target_unlabeled' (%d windows) is not used: 'encoder' is %s; set "
                "encoder=PARSPretrainer(...) to pretrain on them, or "
                "encoder=PARSPretrainer(init_encoder=<this encoder>, steps=500) to adapt it "
                "to them.",
                n_target,
                "None (no encoder)" if encoder is None else "an encoder used as it is",
            )
        elif X_target_unlabeled is not None:
            X_unlabeled = [*as_sources(X_unlabeled), X_target_unlabeled]
        data = read_input(X, y, groups, sfreq=self.sfreq)
        check_labels(data.y)
        with verbose_logging(self.verbose):
            history = None
            unused = getattr(head, "encoder_unused", None)
            why = None if stage is None or unused is None else unused(data.groups)
            if why is not None:
                stage = self._skip_pretraining(why, X_unlabeled)
            if stage is not None:
                try:
                    stage.fit(data, groups=data.groups, X_unlabeled=X_unlabeled)
                except KeyboardInterrupt:
                    self._forget()
                    raise
                encoder = stage.encoder_
                history = getattr(stage, "history_", None)
            head.set_params(encoder=encoder)
            logger.info(
                "Fitting the head, %s, on %d windows of %d channels x %g s.",
                type(head).__name__, len(data), data.shape[0], data.shape[1] / data.sfreq,
            )  # fmt: skip
            extra = {} if X_valid is None else dict(X_valid=X_valid, y_valid=y_valid)
            try:
                head.fit(data, groups=data.groups, **extra)
            except KeyboardInterrupt:
                self._forget()
                raise
        self.pretrainer_ = stage
        self.n_target_unlabeled_ = n_target if stage is not None else 0
        self.pretrain_history_ = history
        self.encoder_ = encoder
        self.head_ = head
        self.classes_ = head.classes_
        self.sfreq_ = float(data.sfreq)
        self.n_chans_, self.n_times_ = data.shape
        return self

    @staticmethod
    def _skip_pretraining(why, X_unlabeled):
        """No pretraining when the head says it reads no encoder for this fit (its
        ``encoder_unused(groups)`` gives why); says so."""
        if X_unlabeled is not None:
            warnings.warn(
                f"Pretraining skipped, so 'X_unlabeled' is not used: {why}.",
                UserWarning,
                stacklevel=3,
            )
        else:
            logger.info("Pretraining skipped: %s.", why)
        return None

    def _forget(self):
        """Leave the estimator unfitted (an interrupted fit sets nothing, and leaves
        nothing of an earlier fit: every fitted attribute goes)."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            del self.__dict__[name]

    # -- prediction ----------------------------------------------------------------------
    def _read(self, X, y=None, groups=None):
        check_is_fitted(self, "head_")
        return read_input(X, y, groups, sfreq=self.sfreq_, name="X")

    def _head_call(self, method, data, *args, **kwargs):
        if "groups" in _arguments(getattr(self.head_, method)):
            kwargs["groups"] = data.groups
        return getattr(self.head_, method)(data, *args, **kwargs)

    def predict_proba(self, X, groups=None):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_``
        order; ``groups`` as the head reads them (an aligned probe)."""
        return self._head_call("predict_proba", self._read(X, groups=groups))

    def predict(self, X, groups=None):
        """Predicted labels, shape (n_windows,)."""
        proba = self.predict_proba(X, groups=groups)  # NotFittedError before classes_
        return self.classes_[proba.argmax(axis=1)]

    def transform(self, X, groups=None):
        """The head's features of each window (the probe's scaled blocks, or the neural
        head's pooled token)."""
        return self._head_call("transform", self._read(X, groups=groups))

    def fit_transform(self, X, y=None, groups=None, **fit_params):
        """``fit``, then ``transform`` of the same windows with the same ``groups`` (an
        aligned probe then aligns them as ``fit`` did)."""
        return self.fit(X, y, groups=groups, **fit_params).transform(X, groups=groups)

    def score(self, X, y=None, sample_weight=None, groups=None):
        """Accuracy; labels read from the windows when ``y`` is None."""
        data = self._read(X, y, groups)
        return self._head_call("score", data, sample_weight=sample_weight)


def _arguments(method):
    import inspect

    return inspect.signature(method).parameters
