"""PARSProbe: the probe as a classifier, the default head of
:class:`~braindecode_pars.PARSClassifier`."""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._checks import check_device, check_int, check_option, check_range
from ..align import AlignedProbe
from ..datasets.adapters import window_scale
from ..floor import bands_below_nyquist
from ..probe import DEFAULT_READOUT, READOUTS, probe_pipeline
from ..recipes import (
    MIN_GROUPS,
    Recipe,
    best_recipe,
    block_features,
    candidate_recipes,
    compare_recipes,
    comparison_message,
    fallback_message,
    fit_recipe,
)
from ..windows_input import WindowsInputMixin
from ._common import (
    check_encoder_rate,
    check_labels,
    read_fit_input,
    read_fitted,
)

logger = logging.getLogger(__name__)


class PARSProbe(WindowsInputMixin, ClassifierMixin, TransformerMixin, BaseEstimator):
    """The probe as a classifier: a class-balanced logistic regression over a frozen
    encoder's features, log band power and the Riemannian tangent space.

    The head that :class:`~braindecode_pars.PARSClassifier` puts over its encoder by
    default; usable alone. Without an encoder (``encoder=None``) it is the same
    model over the classical blocks only, which is what to compare an encoder with:
    the block of a pretrained encoder has to earn its place beside them. Each block
    is scaled to the same total variance (:class:`BlockScaler`); with ``align=
    "groups"`` each group (subject, block of runs) is aligned on its own windows
    first (:class:`~braindecode_pars.align.AlignedProbe`). ``X`` is read once per
    call, whatever it is (arrays with ``sfreq``, braindecode windows, ``Subset`` objects
    and ``SliceDataset`` objects of them, ``mne.Epochs``).

    Whether the encoder's block helps, on your own labels: with ``recipe="auto"`` and
    ``groups`` of at least three subjects (or blocks), ``fit`` scores each candidate
    recipe (band power alone or with the tangent space, each with and without the
    encoder's block, ``C`` 1 or 100: :mod:`braindecode_pars.recipes`) by an inner
    leave-one-group-out cross-validation, fits the best on every window, keeps the
    scores (``recipe_scores_``, ``encoder_gain_``) and logs one line: "the encoder
    block adds +x.x points ...". The features are computed once; what is fitted on
    windows (the tangent space's reference point, the scalers, the alignment's
    reference) is refitted on each fold's training groups. With fewer groups the
    fixed recipe is fitted and the line says that nothing could be compared.

    **What to expect**: seconds per fit on a CPU; how each block scores on the
    development tasks is on the benchmarks page (:doc:`/benchmarks`).
    ``recipe="auto"`` adds 8 logistic regressions per group (4 without an encoder).

    Parameters
    ----------
    encoder : str | Path | PatchEncoder | None
        The frozen encoder: a shipped encoder's name (``"pars-small"``), a saved
        encoder's path, an instance (copied), or None for no encoder block.
    encoder_block : bool
        Whether the fixed recipe holds the encoder's block when there is an encoder
        (``recipe="auto"`` compares recipes with and without it either way).
    recipe : {"fixed", "auto"}
        "fixed": the blocks and ``C`` the parameters give (``encoder``, ``band_power``,
        ``tangent_space``, ``C``). "auto": the recipe of the best inner
        leave-one-group-out balanced accuracy over the groups of ``fit``
        (:data:`~braindecode_pars.recipes.RECIPE_BLOCKS` x
        :data:`~braindecode_pars.recipes.RECIPE_CS`; the recipes with the encoder's
        block only with an encoder; a tie goes to the first: fewer blocks, the smaller
        ``C``); with fewer than three
        groups, the fixed recipe. Parameters of the fixed recipe do not restrict the
        comparison.
    C : float
        Inverse L2 strength of the logistic regression (of the fixed recipe).
    band_power, tangent_space : bool
        Whether the fixed recipe adds the log band power block
        (:class:`~braindecode_pars.floor.BandPowerFeatures`, the bands below the
        Nyquist frequency) and the tangent-space block (OAS covariances, reference
        point the training windows' Riemannian mean).
    align : {None, "groups"}
        None: every window as it is. "groups": each group standardised and its
        covariances re-centred on its own windows, at ``fit`` and at ``predict``
        (transductive: a prediction depends on the windows predicted with it; the
        groups are ``groups``, the ``subject`` of braindecode windows, or all the
        windows of the call as one group). Each group should hold every class: on a
        label that is the subject's own (patient against control) it removes the
        signal.
    readout : {"mean+std", "mean", "blocks"}
        What the encoder's block reads from the tokens
        (:class:`~braindecode_pars.probe.EncoderFeatures`): the mean and the standard
        deviation over patches of the last block's tokens, their mean alone, or every
        block's mean.
    sfreq : float | None
        Sampling rate of array input; read from windows that carry it.
    batch_size, device
        The encoder's forward passes.
    random_state : int | None
        Seed of the logistic regression's solver.

    Attributes
    ----------
    probe_ : LabelledPipeline | AlignedProbe
        The fitted model (:func:`probe_pipeline`, or the aligned probe).
    recipe_ : Recipe
        The recipe fitted, its ``blocks`` (of ``"encoder"``, ``"bandpower"``,
        ``"tangentspace"``) and ``C``; ``str(recipe_)``: ``"bandpower+tangentspace
        (C=1)"``.
    recipe_scores_ : pandas.DataFrame | None
        The inner comparison (``recipe="auto"`` with three groups or more, else None):
        one row per candidate recipe, columns ``blocks``, ``C``, ``mean`` and ``std``
        of the balanced accuracy over the held-out groups, ``log_loss``, ``n_groups``
        (:func:`~braindecode_pars.recipes.compare_recipes`).
    encoder_gain_ : float
        The best inner balanced accuracy with the encoder's block minus the best
        without, in percentage points; NaN when nothing was compared (or no encoder).
    classes_ : ndarray
    sfreq_, n_chans_, n_times_ : float, int, int
        What ``fit`` saw.
    scale_ : float
        The windows' amplitude at ``fit`` (median standard deviation); ``predict``
        warns when it changes a hundredfold (another unit).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 20)
    >>> X = rng.standard_normal((40, 2, 400)) * (1 + y[:, None, None])
    >>> PARSProbe(sfreq=100).fit(X[::2], y[::2]).score(X[1::2], y[1::2])
    1.0
    """

    # under metadata routing, ``score`` asks for the scored windows' groups (the aligned
    # probe aligns each group on itself)
    __metadata_request__score = {"groups": True}

    def __init__(
        self,
        encoder=None,
        *,
        recipe="fixed",
        encoder_block=True,
        C=100.0,
        band_power=True,
        tangent_space=True,
        align=None,
        readout=DEFAULT_READOUT,
        sfreq=None,
        batch_size=256,
        device="cpu",
        random_state=None,
    ):
        self.encoder = encoder
        self.recipe = recipe
        self.encoder_block = encoder_block
        self.C = C
        self.band_power = band_power
        self.tangent_space = tangent_space
        self.align = align
        self.readout = readout
        self.sfreq = sfreq
        self.batch_size = batch_size
        self.device = device
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags

    def _check_params(self):
        check_option("recipe", self.recipe, ("fixed", "auto"))
        check_option("encoder_block", self.encoder_block, (False, True))
        check_range("C", self.C, 0, math.inf, low_open=True)
        check_option("band_power", self.band_power, (False, True))
        check_option("tangent_space", self.tangent_space, (False, True))
        check_option("align", self.align, (None, "groups"))
        check_option("readout", self.readout, READOUTS)
        check_int("batch_size", self.batch_size, 1)
        check_device("device", self.device)

    def fit(self, X, y=None, groups=None):
        """Read the windows once, compute the blocks and fit the logistic regression.

        Parameters
        ----------
        X : windows | ndarray, shape (n_windows, n_chans, n_times)
        y : array-like, shape (n_windows,) | None
            Labels; None: read from the windows.
        groups : array-like, shape (n_windows,) | None
            The subject (or block) of each window, for ``align="groups"`` and the
            inner comparison of ``recipe="auto"``; None: braindecode windows'
            ``subject``.

        Returns
        -------
        self : PARSProbe
        """
        encoder, data, _ = read_fit_input(self, X, y, groups)
        if encoder is not None:
            check_encoder_rate(encoder, data.sfreq, data.X.shape[-1])
        if self.align is not None:
            AlignedProbe._groups(data.groups, len(data), fit=True)
            if data.groups is None:
                warnings.warn(
                    "align='groups' but fit has no groups: the training windows are aligned "
                    "as one group. Pass 'groups' (the subject of each window) to fit, e.g. "
                    "cross_val_score(clf, X, y, groups=g, params={'groups': g}), or "
                    "braindecode windows with a 'subject' column.",
                    UserWarning,
                    stacklevel=2,
                )
        self.sfreq_ = float(data.sfreq)
        self.n_chans_, self.n_times_ = data.shape
        self.scale_ = window_scale(data.X)
        params = dict(
            encoder=encoder,
            sfreq=self.sfreq_,
            bands=bands_below_nyquist(self.sfreq_),
            random_state=self.random_state,
            batch_size=self.batch_size,
            device=self.device,
            readout=self.readout,
        )
        use = encoder is not None and self.encoder_block
        blocks = ("encoder",) * use + ("bandpower",) * self.band_power
        fixed = Recipe(blocks + ("tangentspace",) * self.tangent_space, float(self.C))
        self.recipe_, self.recipe_scores_, self.encoder_gain_ = fixed, None, math.nan
        if self.recipe == "auto":
            self.probe_ = self._fit_auto(data, fixed, params)
        else:
            self.probe_ = self._fit_fixed(data, params)
        self.classes_ = self.probe_.classes_
        return self

    def reads_encoder(self, groups=None):
        """Whether ``fit`` with these ``groups`` reads the encoder: the fixed recipe holds
        its block (``encoder_block``), or ``recipe="auto"`` has at least
        :data:`~braindecode_pars.recipes.MIN_GROUPS` groups to compare recipes with and
        without it. :class:`~braindecode_pars.PARSClassifier` skips pretraining when
        not."""
        if self.encoder_block:
            return True
        n_groups = 0 if groups is None else len(pd.unique(np.asarray(groups)))
        return self.recipe == "auto" and n_groups >= MIN_GROUPS

    def _fit_fixed(self, data, params):
        """The probe of the parameters' recipe, fitted on every window."""
        if not self.encoder_block:
            params = {**params, "encoder": None}
        make = probe_pipeline if self.align is None else AlignedProbe
        tangent_space = self.tangent_space
        probe = make(**params, band_power=self.band_power, tangent_space=tangent_space, C=self.C)
        if self.align is None:
            return probe.fit(data.X, data.y)
        return probe.fit(data.X, data.y, groups=data.groups)

    def _fit_auto(self, data, fixed, params):
        """Compare the candidate recipes in an inner leave-one-group-out over the groups
        of fit (at least MIN_GROUPS), then fit the best on every window; fewer groups:
        the fixed recipe. Logs one line either way."""
        groups = None if data.groups is None else np.asarray(data.groups)
        if groups is not None and pd.isna(groups).any():
            raise ValueError(
                f"'groups' has {int(pd.isna(groups).sum())} missing value(s) (NaN or None): "
                "recipe='auto' leaves out one group at a time and needs the group (a "
                "subject or a block) of every window."
            )
        n_groups = 0 if groups is None else len(np.unique(groups))
        if n_groups < MIN_GROUPS:
            logger.info(fallback_message(n_groups, fixed))
            return self._fit_fixed(data, params)
        features = block_features(data.X, params)
        recipes = candidate_recipes(encoder=params["encoder"] is not None)
        align = self.align is not None
        scores = compare_recipes(
            features, data.y, groups, recipes, align=align, random_state=self.random_state
        )
        n_scored = int(scores["n_groups"].max())
        if n_scored < MIN_GROUPS:
            why = (
                f"of the {n_groups} groups of fit, {n_scored} leave two classes or more "
                "to train on when left out"
            )
            logger.info(fallback_message(n_groups, fixed, why=why))
            recipe = fixed
        else:
            recipe, self.encoder_gain_ = best_recipe(scores, recipes)
            self.recipe_, self.recipe_scores_ = recipe, scores
            logger.info(comparison_message(scores, recipes, recipe, self.encoder_gain_, recipe))
        return fit_recipe(recipe, features, data.y, groups, align=align, probe_params=params)

    def _read(self, X, y=None, groups=None):
        check_is_fitted(self, "probe_")
        return read_fitted(self, X, y, groups)

    def _call(self, method, data):
        if self.align is not None:
            return getattr(self.probe_, method)(data.X, groups=data.groups)
        if method == "transform":
            return self.probe_[:-1].transform(data.X)
        return getattr(self.probe_, method)(data.X)

    def predict_proba(self, X, groups=None):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_``
        order; ``groups`` (None: the windows' own, else one group) with ``align``."""
        return self._call("predict_proba", self._read(X, groups=groups))

    def predict(self, X, groups=None):
        """Predicted labels, shape (n_windows,)."""
        proba = self.predict_proba(X, groups=groups)
        return self.classes_[proba.argmax(axis=1)]

    def transform(self, X, groups=None):
        """The scaled features the logistic regression sees, shape (n_windows,
        2 * n_chans * emb_dim + 6 * n_chans + n_chans * (n_chans + 1) / 2) with every
        block on (fewer bands below a low Nyquist frequency)."""
        return self._call("transform", self._read(X, groups=groups))

    def fit_transform(self, X, y=None, groups=None):
        """``fit``, then ``transform`` of the same windows with the same ``groups`` (the
        aligned probe aligns them as ``fit`` did)."""
        return self.fit(X, y, groups).transform(X, groups=groups)

    def score(self, X, y=None, sample_weight=None, groups=None):
        """Accuracy; labels read from the windows when ``y`` is None."""
        from sklearn.metrics import accuracy_score

        data = self._read(X, y, groups)
        check_labels(data.y, at_least=1)
        predicted = self.classes_[self._call("predict_proba", data).argmax(axis=1)]
        return accuracy_score(data.y, predicted, sample_weight=sample_weight)
