"""PARSClassifier: an encoder stage, then a head, as one scikit-learn classifier."""

from __future__ import annotations

import inspect
import logging
import os

from sklearn import get_config
from sklearn.base import BaseEstimator, clone
from sklearn.utils import Bunch
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    get_routing_for_object,
    process_routing,
)
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from braindecode_pars._util.checks import check_option
from braindecode_pars._util.logs import plural, verbose_logging, warn_once
from braindecode_pars._util.seeding import fit_seed
from braindecode_pars._util.threads import with_fit_threads
from braindecode_pars.estimators._heads import (  # noqa: F401 (takes_windows, named from here too)
    _HEAD_METHODS,
    DEFAULT,
    _head_has,
    _is_default,
    _takes,
    check_encoder_given_once,
    check_head_input,
    takes_windows,
)
from braindecode_pars.estimators._inputs import (
    GroupsTransformerMixin,
    SeededWindowsMixin,
    WindowsClassifierMixin,
    check_labels,
    load_encoder_param,
)
from braindecode_pars.estimators.pretrainer import _as_sources
from braindecode_pars.estimators.probe import PARSProbe
from braindecode_pars.io.estimator_inputs import match_channels, read_input
from braindecode_pars.pretraining.stopping import TrainingStopped
from braindecode_pars.weights import DEFAULT_ENCODER, PRETRAINED_ENCODERS

logger = logging.getLogger(__name__)


class PARSClassifier(
    SeededWindowsMixin,
    WindowsClassifierMixin,
    GroupsTransformerMixin,
    BaseEstimator,
    auto_wrap_output_keys=None,  # set_output's wrapper would hide available_if's check
):
    """Pretrain (or load) a single-channel encoder, then classify multi-channel windows
    with a head over it, in one ``fit``.

    A meta-estimator of two stages, as scikit-learn's ``Pipeline`` composes steps:

    - the **encoder stage**: a :class:`~braindecode_pars.PARSPretrainer` (PARS or a
      baseline pretext task on ``X`` and ``X_unlabeled``), an encoder used as it is (a
      shipped name such as ``"pars-small-v2"``, the newest shipped PARS encoder, a saved
      encoder's path, a :class:`~braindecode_pars.PatchEncoder`), None: no encoder, or
      ``"default"``: the default head's ``"pars-small-v2"``, a given head's own
      ``encoder`` (``"pars-small-v2"`` where that is ``"default"`` too, as
      :class:`~braindecode_pars.PARSFineTuner`'s is);
    - the **head**: a :class:`~braindecode_pars.PARSProbe` (the default: a logistic
      regression over the frozen encoder's features, log band power and the tangent
      space), a :class:`~braindecode_pars.PARSFineTuner` (the paper's fine-tuning, a
      braindecode ``EEGClassifier``), or a classifier of your own.

    **The encoder is given once.** Either by the classifier's ``encoder`` (the head's own
    ``encoder`` left at None, or at ``"default"``, the fine-tuner's default, which gives
    way), or, with the classifier's ``encoder`` left at ``"default"``, by the head's own
    ``encoder`` parameter, which is then honoured:
    ``PARSClassifier(head=PARSProbe(encoder=None))`` has no encoder,
    ``PARSClassifier(head=PARSFineTuner(strategy="full"))`` fine-tunes
    ``"pars-small-v2"`` (the paper's fine-tuning), and a grid over ``head__encoder``
    fits each candidate's. Both set is refused, naming ``encoder``.
    ``PARSClassifier()`` (``head=None``) is ``PARSProbe(encoder="pars-small-v2",
    block_weights="auto")``; to search its parameters, give it as that instance
    (``head__C`` then reaches it).

    **The head contract.** A head is a scikit-learn estimator (``get_params``,
    ``fit``, ``predict``, ``classes_``), with an ``encoder`` parameter if it reads the
    encoder. ``fit`` reads ``X`` once and then calls only public methods of the
    stages: a clone of the head gets the encoder (``set_params(encoder=encoder_)``,
    when it has the parameter) and, when it has an ``sfreq`` parameter left at None,
    the windows' sampling rate; then
    ``head.fit(X, y, **params)`` with ``X`` the windows as a float32 array
    ``(n_windows, n_chans, n_times)`` and ``y`` the labels. ``params`` are routed
    as scikit-learn routes metadata (``Pipeline``, ``TransformedTargetRegressor``):
    with ``sklearn.set_config(enable_metadata_routing=True)``, by each stage's
    requests (``head.set_fit_request(groups=True)``; :class:`PARSProbe`,
    :class:`PARSFineTuner` and :class:`PARSPretrainer` request ``groups`` themselves),
    through ``process_routing``; without, each parameter goes to the stages whose
    ``fit`` takes it by name, and one no stage takes is refused. ``groups`` default to
    braindecode windows' ``subject``. ``predict``, ``predict_proba`` and ``transform``
    call the head's method of that name with the array (and ``groups`` when the
    method takes them); ``score`` is the accuracy of ``predict``. Optional
    methods the classifier uses when a stage has them: ``check_params()`` (the
    parameters checked before any data is read) and, on the head,
    ``encoder_unused(groups)`` (why this fit would not read the encoder, or None;
    pretraining is then skipped and the reason logged). The encoder stage follows
    the same rules, and must set ``encoder_`` in ``fit``.

    Each stage's parameters are reached by scikit-learn's nested names
    (``encoder__steps``, ``head__C``, ``head__max_epochs``), so ``set_params``,
    ``clone`` and ``GridSearchCV`` reach every stage given as an instance; every name
    of both stages is checked before any work starts. ``X`` is an array (set
    ``sfreq``), braindecode windows, a ``Subset`` or skorch ``SliceDataset`` of them,
    the item lists scikit-learn makes of windows, or ``mne.Epochs`` (read in
    microvolts, as braindecode does).

    **What to expect**: ``PARSClassifier()`` is the probe over the shipped PARS encoder
    ``pars-small-v2`` (windows at another rate than its 100 Hz are resampled for it):
    log band power, with the tangent space and the encoder's block only where inner
    folds on the labelled windows (by group with three groups or more, else by time
    within each group) show they help (``block_weights="auto"``,
    :func:`~braindecode_pars.features.recipe.earn_blocks`; :doc:`/benchmarks/defaults`).
    With one to twelve labelled subjects that is rare, and it then scores as a band-power
    logistic regression does. It has not beaten the same probe without an encoder
    on this project's development tasks (:doc:`/benchmarks/dev_tasks`): that probe is
    ``PARSProbe()``, or ``PARSClassifier(encoder=None)``, and is the comparison any
    encoder has to beat. ``encoder=PARSPretrainer()`` pretrains on ``X`` and
    ``X_unlabeled`` for minutes on a CPU (``PARSPretrainer(init_encoder="pars-small-v2")``
    goes on from the shipped weights); with ``head=PARSProbe("pars-small-v2",
    recipe="auto")`` and three subjects or more, ``fit`` says by inner cross-validation
    whether the encoder's block helps on your labels.

    Parameters
    ----------
    encoder : "default" | PARSPretrainer | str | Path | PatchEncoder | None
        ``"default"``: the default head's encoder is ``"pars-small-v2"``, the newest
        shipped PARS encoder, loaded offline; a head given keeps its own ``encoder``
        (``"pars-small-v2"`` where the head's is ``"default"``, as ``PARSFineTuner``'s).
        None: no encoder (the head gets ``encoder=None``; no pretraining).
        ``PARSPretrainer(...)``, or any estimator whose ``fit`` sets ``encoder_``:
        pretraining inside ``fit``. An encoder used as it is: a shipped name, a saved
        encoder's path, a ``PatchEncoder``.
    head : estimator | None
        The head (see the contract above); None: ``PARSProbe(block_weights="auto")`` over
        the encoder (``"pars-small-v2"`` with ``encoder="default"``). Stored as given: to search the
        head's parameters, give it as an instance.
    sfreq : float | None
        Sampling rate of array input; read from windows that carry it.
    random_state : int | None
        The seed of a stage whose own ``random_state`` is None (a stage's own seed is
        never changed).
    verbose : int, default 0
        The package's messages during ``fit``, its stages' included: 0, none (unless
        logging is set up: then they go where it sends them), whatever the stages' own
        ``verbose``; 1, what ``fit`` and each stage are about to do and how they ended
        (``PARSPretrainer``'s plan, "Fitting the head, ...", the fine-tuner's plan);
        2, the pretraining's per-epoch tables too. A stage's progress (the
        pretraining's bar or lines, skorch's table of the fine-tuner's epochs) is the
        stage's own ``verbose``'s: ``encoder=PARSPretrainer(verbose=0)`` leaves its
        progress out, as ``PARSPretrainer``'s default, 1, shows it. Warnings show
        whatever ``verbose`` is, each once per process.

    Attributes
    ----------
    encoder_ : PatchEncoder | None
        The encoder the head got (pretrained here, or the one given; None without).
    pretrainer_ : estimator | None
        The fitted encoder stage (None when an encoder, or none, was given).
    n_target_unlabeled_ : int
        How many ``X_target_unlabeled`` windows pretraining read (0 without them).
    pretrain_history_ : skorch History | None
    head_ : estimator
        The fitted head.
    classes_ : ndarray
    sfreq_, n_chans_, n_times_ : float, int, int
    ch_names_ : list of str | None
        The channel names of fit, where the windows carried them (braindecode windows,
        ``mne.Epochs``; None for arrays): at ``predict``, ``predict_proba``,
        ``transform`` and ``score``, windows of these names in another order are
        reordered, other names are refused naming both lists.

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV, LeaveOneGroupOut
    >>> search = GridSearchCV(
    ...     PARSClassifier(head=PARSProbe(encoder="pars-small-v2")), {"head__C": [0.1, 1.0]},
    ...     scoring="balanced_accuracy", cv=LeaveOneGroupOut())
    >>> search.fit(windows, groups=subjects)  # doctest: +SKIP
    """

    # under metadata routing the classifier asks for the groups itself (it reads the
    # windows with them and hands them on), in fit and in score (an aligned probe aligns
    # each scored group on itself)
    __metadata_request__fit = {"groups": True}
    __metadata_request__score = {"groups": True}

    def __init__(self, encoder="default", head=None, *, sfreq=None, random_state=None, verbose=0):
        self.encoder = encoder
        self.head = head
        self.sfreq = sfreq
        self.random_state = random_state
        self.verbose = verbose

    def set_params(self, **params):
        """scikit-learn's ``set_params``; a nested name (``encoder__depth``,
        ``head__C``) of a stage that is not an estimator (None, the default head; an
        encoder or its name) is refused at once, saying how to give the stage."""
        for key in params:
            stage, nested, name = key.partition("__")
            if not nested or stage not in ("encoder", "head"):
                continue
            value = params.get(stage, getattr(self, stage))
            if hasattr(value, "set_params"):
                continue
            what = repr(value) if value is None or isinstance(value, str) else type(value).__name__
            example = "PARSPretrainer(...)"
            if stage == "head":
                example = "PARSProbe(...)"
                if value is None:  # the default head: the probe over the default encoder
                    example = f"PARSProbe(encoder={DEFAULT_ENCODER!r}, ...) for the default"
            raise ValueError(
                f"Invalid parameter '{key}': '{stage}' is {what}, which has no parameter "
                f"'{name}'; give the stage as an instance to set its parameters, "
                f"{stage}={example}."
            )
        return super().set_params(**params)

    # -- the stages ----------------------------------------------------------------------
    def _stage_estimator(self):
        value = self.encoder
        return value if hasattr(value, "fit") and hasattr(value, "get_params") else None

    def _head_estimator(self):
        value = PARSProbe(block_weights="auto") if self.head is None else self.head
        if not (hasattr(value, "fit") and hasattr(value, "get_params")):
            raise TypeError(
                "'head' must be None or a classifier (e.g. PARSProbe(), PARSFineTuner(), or "
                f"one of your own), but got {type(value).__name__} ({value!r})."
            )
        return value

    def _encoder_value(self, head):
        """What gives this fit's encoder (see ``encoder``): the classifier's ``encoder``,
        or with ``encoder="default"`` the default head's ``"pars-small-v2"`` or a given
        head's own ``encoder`` (``"default"`` there too: ``"pars-small-v2"``); a head whose
        ``encoder`` is set (not ``"default"``) while the classifier's
        is too is refused, as is an encoder for a head with no ``encoder`` parameter."""
        if _is_default(self.encoder):
            own = head.get_params(deep=False).get("encoder")
            if self.head is None or _is_default(own):  # the default head, or a head's default
                return DEFAULT_ENCODER, "head__encoder"
            return own, "head__encoder"
        check_encoder_given_once(self.encoder, head)
        return self.encoder, "encoder"

    def _cloned(self, stage):
        """A clone of ``stage``, seeded with the classifier's ``random_state`` only where
        its own is None."""
        stage = clone(stage)
        own = stage.get_params(deep=False)
        if self.random_state is not None and own.get("random_state", 0) is None:
            stage.set_params(random_state=self.random_state)
        return stage

    def get_metadata_routing(self):
        """The routing of ``fit``'s metadata to the stages (see the head contract):
        the classifier requests ``X_target_unlabeled`` itself (when asked with
        ``set_fit_request``), the encoder stage's ``fit`` and the head's methods get
        what they request."""
        router = MetadataRouter(owner=self).add_self_request(self)
        stage = self._stage_estimator()
        if stage is not None:
            router.add(
                encoder=stage, method_mapping=MethodMapping().add(caller="fit", callee="fit")
            )
        mapping = MethodMapping()
        for method in _HEAD_METHODS:
            mapping.add(caller=method, callee=method)
        return router.add(head=self._head_estimator(), method_mapping=mapping)

    @staticmethod
    def _routing():
        return get_config()["enable_metadata_routing"]

    def _route(self, stage, head, params):
        """``Bunch(encoder=..., head=...)`` of each stage's ``fit`` parameters (checked
        before any window is read)."""
        if self._routing():
            routed = process_routing(self, "fit", **params)
            return Bunch(
                encoder=dict(routed.encoder.fit) if stage is not None else {},
                head=dict(routed.head.fit),
            )
        stages = {"encoder": stage, "head": head}
        out = Bunch(encoder={}, head={})
        for name, value in params.items():
            takers = [k for k, est in stages.items() if _takes(est, name, by_name=True)]
            takers = takers or [k for k, est in stages.items() if _takes(est, name)]
            if not takers and name != "groups":  # groups: the classifier's own too
                names = " or ".join(type(est).__name__ for est in stages.values() if est)
                raise TypeError(
                    f"fit() got the parameter {name!r}, which no stage's fit takes "
                    f"({names}); pass only what the head or the encoder stage takes."
                )
            for key in takers:
                out[key][name] = value
        return out

    def _add_groups(self, routed, stage, head, groups):
        """The windows' own groups to each stage that takes (or requests) ``groups``."""
        for key, est in (("encoder", stage), ("head", head)):
            if est is None:
                continue
            if self._routing():
                takes = get_routing_for_object(est).consumes("fit", ["groups"])
            else:
                takes = _takes(est, "groups", by_name=True)
            if takes:
                routed[key]["groups"] = groups

    def _give_rate(self, stage, sfreq):
        """Set the windows' rate on a stage with an ``sfreq`` parameter left at None."""
        own = stage.get_params(deep=False).get("sfreq", 0)
        if own is None:
            stage.set_params(sfreq=sfreq)
        elif "sfreq" in stage.get_params(deep=False) and abs(own - sfreq) > 1e-6:
            raise ValueError(
                f"The {type(stage).__name__} stage has sfreq={own} but the windows are at "
                f"{sfreq} Hz; leave the stage's 'sfreq' as None."
            )

    # -- fit -----------------------------------------------------------------------------
    @with_fit_threads
    def fit(self, X, y=None, groups=None, *, X_target_unlabeled=None, **fit_params):
        """Read the windows once, fit the encoder stage, then the head over its encoder.

        Parameters
        ----------
        X : windows | ndarray, shape (n_windows, n_chans, n_times)
            Labelled windows.
        y : array-like, shape (n_windows,) | None
            Labels; None: read from the windows.
        groups : array-like, shape (n_windows,) | None
            The subject (or block) of each window, handed to the stages that take (or
            request) them; None: braindecode windows' ``subject``. In
            ``cross_val_score``, pass them to ``fit`` too: ``params={"groups": groups}``.
        X_target_unlabeled : windows | ndarray | None
            Unlabelled windows of the subjects the classifier will be scored on, as
            MOABB's ``CrossSubjectEvaluation`` routes them to ``fit`` in its
            ``cs_mode="train_and_target_unlabeled_*"`` modes (request them with
            ``set_fit_request(X_target_unlabeled=True)``). They join the encoder
            stage's ``X_unlabeled``: **transductive**, the encoder adapts to the test
            subjects' EEG (never to their labels). Without an encoder stage they are
            not used, and the log says so.
        **fit_params
            Routed to the stages (see the head contract): ``X_unlabeled`` (more
            windows for pretraining), ``X_valid`` and
            ``y_valid`` (a fixed validation set of a neural head), or any other
            parameter of a stage's ``fit``.

        Returns
        -------
        self : PARSClassifier
        """
        check_option("verbose", self.verbose, (0, 1, 2, False, True))
        if self.random_state is not None:
            fit_seed(self.random_state)  # type check
        head = self._cloned(self._head_estimator())  # checks that need no data first
        check_head_input(head)
        value, name = self._encoder_value(head)
        stage, encoder = None, None
        if self._stage_estimator() is not None:
            stage = self._cloned(value)
        elif value is not None:
            encoder = load_encoder_param(value, name, allow_none=False)
        for estimator in (stage, head):  # the stages' own parameters, before any work
            if hasattr(estimator, "check_params"):
                estimator.check_params()
        if groups is not None:
            fit_params = {"groups": groups, **fit_params}
        if fit_params.get("X_unlabeled") is not None and stage is None:
            used = "None (no encoder)" if encoder is None else "an encoder used as it is"
            raise ValueError(
                f"'X_unlabeled' feeds pretraining, but 'encoder' is {used}; leave "
                "'X_unlabeled' as None, or set encoder=PARSPretrainer(...)."
            )
        routed = self._route(stage, head, fit_params)
        data = read_input(X, y, fit_params.get("groups"), sfreq=self.sfreq)
        check_labels(data.y)
        if fit_params.get("groups") is None and data.groups is not None:
            self._add_groups(routed, stage, head, data.groups)
        n_target = 0 if X_target_unlabeled is None else len(X_target_unlabeled)
        if X_target_unlabeled is not None and stage is None:
            logger.warning(
                "'X_target_unlabeled' (%s) is not used: 'encoder' is %s; set "
                "encoder=PARSPretrainer(...) to pretrain on them, or "
                "encoder=PARSPretrainer(init_encoder=<this encoder>, steps=500) to adapt it "
                "to them.",
                plural(n_target, "window"),
                "None (no encoder)" if encoder is None else "an encoder used as it is",
            )
        elif X_target_unlabeled is not None:
            unlabeled = routed.encoder.get("X_unlabeled")
            routed.encoder["X_unlabeled"] = [*_as_sources(unlabeled), X_target_unlabeled]
        with verbose_logging(self.verbose):
            history = None
            unused = getattr(head, "encoder_unused", None)
            why = None if stage is None or unused is None else unused(data.groups)
            if why is not None:
                stage = self._skip_pretraining(why, routed.encoder.get("X_unlabeled"))
            if stage is not None:
                self._give_rate(stage, data.sfreq)
                try:
                    stage.fit(data.X, data.y, **routed.encoder)
                except (KeyboardInterrupt, TrainingStopped):
                    self._forget()
                    raise
                encoder = stage.encoder_
                history = getattr(stage, "history_", None)
            if "encoder" in head.get_params(deep=False):
                head.set_params(encoder=encoder)
            self._give_rate(head, data.sfreq)
            logger.info(
                "Fitting the head, %s, %s, on %s of %s x %g s.",
                type(head).__name__, _over(value, stage, encoder), plural(len(data), "window"),
                plural(data.shape[0], "channel"), data.shape[1] / data.sfreq,
            )  # fmt: skip
            try:
                head.fit(data.X, data.y, **routed.head)
            except (KeyboardInterrupt, TrainingStopped):
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
        self.ch_names_ = data.ch_names
        return self

    @staticmethod
    def _skip_pretraining(why, X_unlabeled):
        """No pretraining when the head says it reads no encoder for this fit (its
        ``encoder_unused(groups)`` gives why); says so."""
        if X_unlabeled is not None:
            warn_once(
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
        return match_channels(self, read_input(X, y, groups, sfreq=self.sfreq_, name="X"))

    def _head_call(self, method, data):
        call = getattr(self.head_, method)
        if data.groups is not None and "groups" in inspect.signature(call).parameters:
            return call(data.X, groups=data.groups)
        return call(data.X)

    def _proba(self, data):
        return self._head_call("predict_proba", data)

    def _predict(self, data):
        return self._head_call("predict", data)  # a head needs no predict_proba

    # the head's optional methods exist here only when the head has them (as Pipeline's
    # do), so that soft voting, CalibratedClassifierCV and response_method scorers choose
    # among those that work
    @available_if(_head_has("predict_proba"))
    def predict_proba(self, X, groups=None):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_``
        order (only when the head has ``predict_proba``); ``groups``: the group of each
        window where the head reads them."""
        return self._proba(self._read(X, groups=groups))

    @available_if(_head_has("decision_function"))
    def decision_function(self, X, groups=None):
        """The head's decision function of each window (only when the head has one)."""
        return self._head_call("decision_function", self._read(X, groups=groups))

    @available_if(_head_has("transform"))
    def transform(self, X, groups=None):
        """The head's features of each window (the probe's scaled blocks, or the neural
        head's pooled token; only when the head has ``transform``)."""
        return self._head_call("transform", self._read(X, groups=groups))

    @available_if(_head_has("transform"))
    def fit_transform(self, X, y=None, groups=None, **fit_params):
        """``fit``, then ``transform`` with the same ``groups`` (only when the head has
        ``transform``)."""
        return self.fit(X, y, groups=groups, **fit_params).transform(X, groups=groups)


def _over(value, stage, encoder):
    """The encoder a head is fitted over, in words, for the log: pretrained in this fit
    (``stage``), none, a shipped one, a saved one or an instance (``value``, what gave
    it)."""
    if stage is not None:
        return "over the encoder pretrained in this fit"
    if encoder is None:
        return "without an encoder"
    if isinstance(value, str) and value in PRETRAINED_ENCODERS:
        return f"over the shipped encoder {value!r}"
    if isinstance(value, str | os.PathLike):
        return f"over the encoder {str(value)!r}"
    return "over the PatchEncoder given"
