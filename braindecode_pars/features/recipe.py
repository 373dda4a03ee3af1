"""The probe's recipe, and the one path that fits it from block features.

A :class:`ProbeRecipe` says what the probe is: its blocks, the inverse L2 strength
``C`` of its logistic regression, the encoder's readout, the bands, the alignment
within groups and the encoder's crops. :func:`fit_blocks` fits it on the raw features
of :func:`~braindecode_pars.features.blocks.block_features`, computed once per fit;
:func:`compare_recipes` scores candidate recipes by an inner cross-validation over
groups on the same features, and :func:`choose_recipe` takes the simplest candidate
within one standard error of the best (:func:`simplicity`). Fixed, aligned and
``recipe="auto"`` probes are all fitted by :func:`fit_blocks`.

**What C means.** Each block is standardised feature by feature (after the tangent
space for the covariances; after the alignment within groups with ``align="groups"``),
then scaled so that every block has the same total variance, ``P / B`` (``P`` features
over ``B`` blocks; a feature constant on the training windows is not counted, nor a
block of constant features)::

    z_j = (x_j - mean_j) / std_j * sqrt(P / (B * p_b))      (feature j of block b, p_b wide)

The whole matrix then has the total variance ``P`` of standardised features: ``C``
means what it means for a scikit-learn ``LogisticRegression`` over standardised
features (with one block it *is* that: ``band_power_pipeline``'s scaling), whatever the
number of channels and blocks, and no block outweighs another by its width (the
encoder's 2,432 features of 19 channels would otherwise drown the 114 band powers).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
import time
import warnings

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score, log_loss

from braindecode_pars._util.checks import InvalidParameterError, check_option, check_range
from braindecode_pars._util.logs import warn_once
from braindecode_pars.features.blocks import (
    _READOUTS,
    BLOCKS,
    DEFAULT_READOUT,
    _check_bands,
    _check_readout_tokens,
)
from braindecode_pars.features.scaling import (
    ALIGN_MIN_WINDOWS,
    AlignCovariances,
    AlignFeatures,
    BlockScaler,
)

#: ``max_iter`` of the probe's and the floors' logistic regression.
_LOGISTIC_MAX_ITER = 1000
#: The blocks of the candidate recipes, from the simplest (:func:`simplicity`): band
#: power alone, with the tangent space, and each of these with the encoder's block.
_RECIPE_BLOCKS = (
    ("bandpower",),
    ("bandpower", "tangentspace"),
    ("encoder", "bandpower"),
    ("encoder", "bandpower", "tangentspace"),
)
#: The inverse L2 strengths of the candidates, each with every entry of _RECIPE_BLOCKS.
RECIPE_CS = (0.01, 1.0)
#: The default inverse L2 strength, over standardised features: chosen among 0.01 to 10
#: on the selection splits of the development tasks at 1, 2, 4 and 12 labelled EEGMAT
#: subjects, for both default recipes (``benchmarks/results/probe_c.md``).
DEFAULT_C = 3.0
#: ``PARSProbe(block_weights="auto")``: the encoder block's weights compared by the inner
#: folds, relative to each other block's (0: no encoder block, the probe without an
#: encoder; 1: the fixed recipe's equal total variances), smallest first.
ENCODER_WEIGHTS = (0.0, 0.25, 0.5, 1.0)
#: ``PARSProbe(block_weights="auto")`` with fewer than three groups to compare weights on:
#: the weights fitted (``{block: weight}``, unnamed blocks 1). Set by the rule of
#: ``benchmarks/bench_probe_blocks.py`` (``probe_blocks.md``, decision 1): over the
#: selection cells of one and two labelled units (EEGMAT k = 1 and 2, the four MI tasks
#: with one block), of the twelve weightings of the encoder's block (0, 0.25, 0.5, 1)
#: and the tangent space's (1, 0.5, 0), the best scored 0.616 and today's weights 0.612,
#: within the rule's 0.005 only at the encoder's 1: without groups to compare on, the
#: blocks keep today's weights.
FALLBACK_WEIGHTS = {"encoder": 1.0, "tangentspace": 1.0}
#: ``PARSProbe(block_weights="auto")``: how many standard errors of its gain over weight
#: 0, fold by fold, a weight's gain has to exceed to be fitted (:func:`choose_weight`).
#: Set by the rule of ``benchmarks/bench_probe_blocks.py`` (``probe_blocks.md``, decision
#: 2): on the selection cells of three labelled subjects or more, 2 SE scored 0.634 and
#: 1 SE 0.613.
WEIGHT_MARGIN_SE = 2.0
#: ``inner_cv="auto"``: leave-one-group-out up to this many groups, GroupKFold beyond.
LOGO_MAX_GROUPS = 20
#: ``inner_cv="auto"``'s folds beyond :data:`LOGO_MAX_GROUPS` groups.
_AUTO_FOLDS = 5
#: An inner comparison projected to take longer than this (seconds, from its first
#: fold) logs the projection and, at its end, the time it took.
_PROGRESS_AFTER_SECONDS = 10.0

logger = logging.getLogger(__name__)


def inner_splitter(inner_cv, n_groups, name="inner_cv"):
    """The splitter of an inner comparison over ``n_groups`` groups.

    Parameters
    ----------
    inner_cv : "auto" | int | splitter
        ``"auto"``: leave-one-group-out up to :data:`LOGO_MAX_GROUPS` groups (one fold
        per group), ``GroupKFold(_AUTO_FOLDS)`` beyond; an int ``k >= 2``:
        ``GroupKFold(k)`` (leave-one-group-out when ``k`` is at least the number of
        groups); a scikit-learn splitter (``split(X, y, groups)``), used as it is.
    n_groups : int
    name : str
        The parameter's name, for the error.

    Returns
    -------
    splitter : sklearn.model_selection splitter
    """
    from sklearn.model_selection import GroupKFold, LeaveOneGroupOut

    if isinstance(inner_cv, str):
        check_option(name, inner_cv, ("auto",))
        inner_cv = _AUTO_FOLDS if n_groups > LOGO_MAX_GROUPS else None
    elif isinstance(inner_cv, numbers.Integral) and not isinstance(inner_cv, bool):
        if inner_cv < 2:
            raise InvalidParameterError(
                f"Invalid value for the '{name}' parameter: an int must be at least 2 (the "
                f"folds of a GroupKFold), but got {inner_cv}."
            )
    elif not hasattr(inner_cv, "split"):
        raise InvalidParameterError(
            f"'{name}' must be 'auto', an int of at least 2 or a scikit-learn splitter "
            f"with a split(X, y, groups) method, but got {type(inner_cv).__name__}."
        )
    else:
        return inner_cv
    if inner_cv is None or inner_cv >= n_groups:
        return LeaveOneGroupOut()
    return GroupKFold(n_splits=int(inner_cv))


@dataclasses.dataclass(frozen=True)
class _InnerFolds:
    """The folds an inner comparison ran, as they were, and each candidate's score in
    each.

    Parameters
    ----------
    splitter : str
        The splitter's class name (``"LeaveOneGroupOut"``, ``"GroupKFold"``, ...).
    n_groups : int
        The groups of the windows compared.
    held_out : tuple of int
        The groups each fold held out.
    scored : tuple of bool
        Whether each fold was scored (not when the groups it trains on hold one class).
    scores : ndarray, shape (n_candidates, n_scored)
        Each candidate's balanced accuracy in each scored fold.

    Examples
    --------
    >>> import numpy as np
    >>> str(_InnerFolds("GroupKFold", 45, (9, 9, 9, 9, 9), (True,) * 5, np.zeros((1, 5))))
    '5 folds of GroupKFold over 45 groups (9 groups held out in each)'
    """

    splitter: str
    n_groups: int
    held_out: tuple
    scored: tuple
    scores: np.ndarray = dataclasses.field(repr=False, compare=False)

    def __str__(self):
        low, high = min(self.held_out), max(self.held_out)
        each = f"{low}-{high}" if low != high else f"{low}"
        text = (
            f"{len(self.held_out)} folds of {self.splitter} over {self.n_groups} groups "
            f"({each} group{'s' * (high != 1)} held out in each)"
        )
        n_scored = sum(self.scored)
        if n_scored < len(self.scored):
            text += f", {n_scored} of them scored (the others left one class to train on)"
        return text


def simplicity(recipe):
    """The sort key of a recipe's complexity, simplest first: without the encoder's
    block before with it (the encoder has to earn its place), then fewer blocks, then
    the smaller ``C`` (the stronger L2 penalty). The candidates of
    :meth:`ProbeRecipe.candidates` come in this order."""
    return (recipe.encoder, len(recipe.blocks), recipe.C)


def choose_recipe(scores, candidates, fold_scores=None, incumbent=None):
    """The one-standard-error rule: the simplest candidate whose mean inner score is
    within one standard error of the best's; with an ``incumbent``, only among the
    candidates that beat it by more than a standard error.

    The rule of glmnet's ``lambda.1se`` and of scikit-learn's users (its example
    "balance model complexity and cross-validated score"): the folds' scores of the best
    candidate spread; any candidate within one standard error of it (the standard
    deviation of its fold scores, ``ddof=1``, over the square root of their number:
    the ``sem`` column) is as good as the folds can tell, and the simplest of these
    (:func:`simplicity`; ties to the first) is chosen.

    With ``incumbent`` (the recipe to keep unless the folds show better, the probe's
    fixed recipe) the rule cannot choose a recipe the folds cannot tell from a worse
    one than the incumbent: a candidate is a **challenger** when its mean gain over the
    incumbent, fold by fold, exceeds the standard error of that gain (``ddof=1``, over
    the square root of the folds); without challengers the incumbent is chosen, else
    the one-standard-error rule among the challengers. (The simplest recipe within one
    standard error of the best, among all candidates, was band power at ``C=0.01`` on a
    sleep task where it scored 7 points under the fixed recipe: issue 87.)

    Parameters
    ----------
    scores : pandas.DataFrame
        :func:`compare_recipes`'s, one row per candidate in order.
    candidates : list of ProbeRecipe
    fold_scores : ndarray, shape (n_candidates, n_folds) | None
        Each candidate's score in each inner fold (``compare_recipes(...,
        return_folds=True)[1].scores``); needed with ``incumbent``.
    incumbent : int | None
        The index of the incumbent among the candidates; None: the one-standard-error
        rule among all.

    Returns
    -------
    chosen, best : int
        The index of the candidate chosen, and of the best (the highest mean; ties to
        the first).

    Examples
    --------
    >>> import pandas as pd
    >>> recipes = ProbeRecipe().candidates(encoder=False)[::2]  # bandpower, +tangentspace
    >>> scores = pd.DataFrame({"mean": [0.60, 0.63], "sem": [0.04, 0.02]})
    >>> choose_recipe(scores, recipes)  # 0.60 >= 0.63 - 0.02? no: the best
    (1, 1)
    >>> choose_recipe(scores.assign(sem=[0.04, 0.05]), recipes)  # within 0.05: the simpler
    (0, 1)
    """
    means = scores["mean"].to_numpy(float)
    best = int(np.nanargmax(means))
    pool = range(len(candidates))
    if incumbent is not None:
        pool = [i for i in pool if beats(fold_scores[i], fold_scores[incumbent])]
        if not pool:
            return incumbent, best
    top = max(pool, key=lambda i: (means[i], -i))
    sem = float(scores["sem"].iloc[top])
    floor = means[top] - (0.0 if np.isnan(sem) else sem)
    within = [i for i in pool if means[i] >= floor - 1e-12]
    chosen = min(within, key=lambda i: (simplicity(candidates[i]), i))
    return chosen, best


def beats(scores, incumbent, margin=1.0):
    """Whether fold scores ``scores`` beat ``incumbent``'s by more than ``margin``
    standard errors of their difference fold by fold (``ddof=1``; never with one fold,
    never by a gain of 0)."""
    gain = np.asarray(scores, float) - np.asarray(incumbent, float)
    if len(gain) < 2:
        return False
    sem = gain.std(ddof=1) / np.sqrt(len(gain))
    return bool(gain.mean() > max(margin * sem, 0.0) + 1e-12)


def choose_weight(scores, candidates, fold_scores, margin=None):
    """``PARSProbe(block_weights="auto")``'s choice among recipes that differ in the
    encoder block's weight alone: the encoder block has to earn its weight. A weight
    above 0 is a challenger when its mean gain over weight 0 (no encoder block), fold by
    fold, exceeds ``margin`` standard errors of that gain (as :func:`choose_recipe`'s
    challengers of the fixed recipe exceed one); without challengers weight 0, else the
    challenger of the highest mean inner score, ties (within 1e-12) to the smaller
    weight.

    Parameters
    ----------
    scores : pandas.DataFrame
        :func:`compare_recipes`'s, one row per candidate in order.
    candidates : list of ProbeRecipe
        One of them without the encoder's block (weight 0).
    fold_scores : ndarray, shape (n_candidates, n_folds)
        Each candidate's score in each inner fold.
    margin : float | None
        In standard errors; None: :data:`WEIGHT_MARGIN_SE`.

    Returns
    -------
    chosen : int

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> recipes = [ProbeRecipe(("encoder", "bandpower")).weighted({"encoder": w})
    ...            for w in (0.0, 0.5, 1.0)]
    >>> folds = np.array([[0.6, 0.7, 0.6, 0.7], [0.7, 0.8, 0.7, 0.8], [0.7, 0.8, 0.7, 0.8]])
    >>> choose_weight(pd.DataFrame({"mean": folds.mean(1)}), recipes, folds)  # a tie: 0.5
    1
    >>> folds[1:] += [0.3, -0.3, 0.3, -0.3]  # the same means, a gain within its noise
    >>> choose_weight(pd.DataFrame({"mean": folds.mean(1)}), recipes, folds)
    0
    """
    margin = WEIGHT_MARGIN_SE if margin is None else margin
    means = scores["mean"].to_numpy(float)
    weights = [r.weight("encoder") for r in candidates]
    none = weights.index(0.0)
    challengers = [
        i
        for i in range(len(candidates))
        if i != none and beats(fold_scores[i], fold_scores[none], margin)
    ]
    if not challengers:
        return none
    top = max(means[i] for i in challengers)
    within = [i for i in challengers if means[i] >= top - 1e-12]
    return min(within, key=lambda i: (weights[i], i))


@dataclasses.dataclass(frozen=True)
class ProbeRecipe:
    """What a probe is: its blocks and regression, and how the blocks are read.

    Parameters
    ----------
    blocks : tuple of str
        The blocks, in the order they are stacked: of ``"encoder"``, ``"bandpower"``,
        ``"tangentspace"`` for a probe (:func:`fit_blocks` takes any names of the
        features it is given).
    C : float
        Inverse L2 strength of the class-balanced logistic regression, over features
        scaled as the module says (standardised, blocks of equal total variance).
    readout : {"mean+std", "mean", "blocks"}
        What the encoder's block reads (:class:`~braindecode_pars.features.EncoderFeatures`).
    bands : str | dict | sequence of (name, low, high) | None
        The band-power block's bands; None: six bands 0.5-45 Hz cut at the Nyquist
        frequency (:data:`~braindecode_pars.features.DEFAULT_BANDS`); a preset's name,
        ``"default"`` or ``"sleep"`` (sigma 11-16 Hz whole), of
        :data:`~braindecode_pars.features.blocks.BAND_PRESETS`.
    align : {None, "groups"}
        Align each group on its own windows before the scaling.
    crop_seconds : float | None
        The encoder's crops (:class:`~braindecode_pars.features.EncoderFeatures`).
    patch_stride_seconds : float | None
        The step between the encoder's patches (None: half the patch; the patch
        length: no overlap).
    pos_mask_ratio : float
        The share of the encoder's tokens read without their position (0: none).
    weights : tuple of float | None
        One positive weight per block of ``blocks``, each block's scaled features
        multiplied by it after the scaling to ``P / B`` (a block of weight ``w`` has
        ``w**2`` times the total variance of one of weight 1, so that the L2 penalty
        holds it ``w**2`` times tighter); None: every weight 1. A block of weight 0 is
        not in the recipe at all (:meth:`weighted`).

    Examples
    --------
    >>> str(ProbeRecipe(("encoder", "bandpower"), C=1.0))
    'encoder+bandpower (C=1)'
    >>> str(ProbeRecipe().weighted({"tangentspace": 0.5}))
    'bandpower+tangentspace*0.5 (C=3)'
    >>> ProbeRecipe(("encoder", "bandpower")).weighted({"encoder": 0}).blocks
    ('bandpower',)
    >>> len(ProbeRecipe().candidates(encoder=False))  # 2 block sets x 2 values of C
    4
    """

    blocks: tuple = ("bandpower", "tangentspace")
    C: float = DEFAULT_C
    readout: str = DEFAULT_READOUT
    bands: object = None
    align: str | None = None
    crop_seconds: float | None = None
    patch_stride_seconds: float | None = None
    pos_mask_ratio: float = 0.0
    weights: tuple | None = None

    def __post_init__(self):
        blocks = self.blocks
        if isinstance(blocks, str) or not all(isinstance(b, str) for b in blocks) or not blocks:
            raise ValueError(
                f"'blocks' must be a non-empty sequence of block names (of {BLOCKS}), but "
                f"got {blocks!r}."
            )
        object.__setattr__(self, "blocks", tuple(blocks))
        check_range("C", self.C, 0, math.inf, low_open=True)
        object.__setattr__(self, "C", float(self.C))
        check_option("readout", self.readout, _READOUTS)
        check_option("align", self.align, (None, "groups"))
        _check_bands(self.bands, math.inf)  # the names and edges; Nyquist in fit
        _check_readout_tokens(self.crop_seconds, self.patch_stride_seconds, self.pos_mask_ratio)
        if self.weights is not None:
            weights = tuple(float(w) for w in self.weights)
            if len(weights) != len(self.blocks) or not all(
                math.isfinite(w) and w > 0 for w in weights
            ):
                raise ValueError(
                    f"'weights' must give one positive finite weight per block of "
                    f"{self.blocks}, but got {self.weights!r}."
                )
            object.__setattr__(self, "weights", None if set(weights) == {1.0} else weights)

    def __str__(self):
        weights = self.weights or (1.0,) * len(self.blocks)
        names = [b if w == 1 else f"{b}*{w:g}" for b, w in zip(self.blocks, weights, strict=True)]
        return f"{'+'.join(names)} (C={self.C:g})"

    def weight(self, block):
        """The weight of ``block``: 0 when the recipe does not hold it."""
        if block not in self.blocks:
            return 0.0
        return 1.0 if self.weights is None else self.weights[self.blocks.index(block)]

    def weighted(self, weights):
        """This recipe with the blocks named in ``weights`` (``{block: weight >= 0}``)
        weighted so; a block of weight 0 is dropped, the other blocks keep theirs, and
        names of blocks the recipe does not hold are ignored."""
        new = {b: float(weights.get(b, self.weight(b))) for b in self.blocks}
        blocks = tuple(b for b, w in new.items() if w > 0)
        if not blocks:
            raise ValueError(
                f"'weights' {weights!r} leave no block of {self.blocks} with a positive weight."
            )
        return dataclasses.replace(self, blocks=blocks, weights=tuple(new[b] for b in blocks))

    @property
    def encoder(self):
        """Whether the recipe holds the encoder's block."""
        return "encoder" in self.blocks

    def candidates(self, encoder=True):
        """The recipes ``recipe="auto"`` compares beside the fixed one: this one's readout,
        bands, alignment, crops, patch stride and withheld positions (not its weights)
        with each entry of
        :data:`_RECIPE_BLOCKS` (those with the encoder's block only when ``encoder``) and
        each ``C`` of :data:`RECIPE_CS`, in that order, the simplest first
        (:func:`simplicity`)."""
        return [
            dataclasses.replace(self, blocks=blocks, C=C, weights=None)
            for blocks in _RECIPE_BLOCKS
            if encoder or "encoder" not in blocks
            for C in RECIPE_CS
        ]


def _logistic(C, random_state):
    """The class-balanced logistic regression of the probe and the floors."""
    return LogisticRegression(
        C=C, class_weight="balanced", max_iter=_LOGISTIC_MAX_ITER, random_state=random_state
    )


def _block_steps(name, raw, align):
    """The unfitted steps from a block's raw features to unit total variance: the
    alignment (with ``align``), the tangent space (covariances), :class:`BlockScaler`."""
    covariances = np.ndim(raw) == 3
    steps = []
    if align:
        steps.append(AlignCovariances() if covariances else AlignFeatures())
    if covariances:
        from pyriemann.tangentspace import TangentSpace

        steps.append(TangentSpace(metric="riemann"))
    return steps + [BlockScaler()]


def _run(steps, F, groups, fit):
    for step in steps:
        kwargs = {"groups": groups} if isinstance(step, AlignFeatures | AlignCovariances) else {}
        F = step.fit_transform(F, **kwargs) if fit else step.transform(F, **kwargs)
    return F


def _width(raw):
    """The columns a block's raw features give: theirs, or the tangent space's."""
    return raw.shape[1] * (raw.shape[1] + 1) // 2 if np.ndim(raw) == 3 else raw.shape[1]


def _design(names, features, steps, groups, fit):
    """The matrix of the blocks ``names`` side by side in one preallocated array: each
    block's steps (``steps[name]``, fitted first with ``fit``) run on its raw features,
    the last, its :class:`BlockScaler`, writing the unit-variance features straight into
    the block's columns (no scaled copy of a block is made beside the matrix)."""
    blocks = {}
    for name in names:  # the steps fitted first: their temporaries are freed before X
        *before, scaler = steps[name]
        blocks[name] = _run(before, features[name], groups, fit)
        if fit:
            scaler.fit(blocks[name])
    widths = [_width(features[name]) for name in names]
    X = np.empty((len(features[names[0]]), sum(widths)))
    start = 0
    for name, width in zip(names, widths, strict=True):
        steps[name][-1]._transform_into(blocks[name], X[:, start : start + width])
        start += width
    return X


def _scale(X, scalers, weights=None):
    """``X`` (blocks of unit total variance) with each block scaled, in place, to
    ``P / B``: ``P`` the varying features, ``B`` the blocks with any (their scalers);
    then each block multiplied by its weight of ``weights`` (None: all 1)."""
    widths = [scaler.n_varying_ for scaler in scalers]
    P, B = sum(widths), sum(w > 0 for w in widths)
    X *= np.sqrt(P / max(B, 1))
    if weights is not None:
        start = 0
        for scaler, weight in zip(scalers, weights, strict=True):
            stop = start + scaler.n_features_in_
            X[:, start:stop] *= weight
            start = stop
    return X


class _FittedBlocks:
    """A probe fitted from raw block features: each block's steps, the regression."""

    def __init__(self, recipe, steps, model):
        self.recipe, self.steps, self.model = recipe, steps, model
        self.classes_ = model.classes_

    def transform(self, features, groups=None):
        """The scaled features the regression sees, blocks in the recipe's order."""
        blocks = self.recipe.blocks
        X = _design(blocks, features, self.steps, groups, fit=False)
        return _scale(X, [self.steps[n][-1] for n in blocks], self.recipe.weights)

    def predict_proba(self, features, groups=None):
        return self.model.predict_proba(self.transform(features, groups))


def fit_blocks(recipe, features, y, groups=None, *, random_state=None):
    """The probe of ``recipe`` fitted on raw block features.

    Parameters
    ----------
    recipe : ProbeRecipe
    features : dict
        ``{name: raw features}`` holding every block of ``recipe.blocks``
        (:func:`~braindecode_pars.features.blocks.block_features`): 2-D blocks are
        features, 3-D blocks covariances (through the tangent space).
    y : array-like, shape (n_windows,)
    groups : array-like, shape (n_windows,) | None
        The group of each window, for ``recipe.align``.
    random_state : int | None
        Of the logistic regression's solver.

    Returns
    -------
    fitted : object
        ``transform(features, groups=None)`` (the matrix the regression sees),
        ``predict_proba(features, groups=None)``, ``classes_``, ``model`` (the
        ``LogisticRegression``).
    """
    y = np.asarray(y)
    align = recipe.align is not None
    if align and groups is not None:
        groups = np.asarray(groups)
        if all(len(np.unique(y[groups == g])) == 1 for g in np.unique(groups)):
            warn_once(
                "Every group of 'groups' holds a single class: aligning each group on "
                "itself removes the differences between groups, which is all these labels "
                "vary with (a trait of the subject). Use the unaligned probe (align=None).",
                UserWarning,
                stacklevel=3,
            )
    steps = {name: _block_steps(name, features[name], align) for name in recipe.blocks}
    X = _design(recipe.blocks, features, steps, groups, fit=True)
    X = _scale(X, [steps[n][-1] for n in recipe.blocks], recipe.weights)
    model = _logistic(recipe.C, random_state).fit(X, y)
    return _FittedBlocks(recipe, steps, model)


def compare_recipes(
    candidates, features, y, groups, *, random_state=None, cv=None, return_folds=False
):
    """Each candidate's balanced accuracy in an inner cross-validation over groups
    (leave-one-group-out by default) on raw block features.

    In each fold, what depends on windows (the alignment's reference, the tangent
    space's reference point, the scalers) is fitted on the training groups only, as
    :func:`fit_blocks` fits it; the held-out group is aligned on itself.

    Parameters
    ----------
    candidates : list of ProbeRecipe
        Recipes that differ only in ``blocks``, ``C`` and ``weights``
        (:meth:`ProbeRecipe.candidates`).
    features : dict
        Raw features of every block the candidates name.
    y, groups : ndarray, shape (n_windows,)
    random_state : int | None
        Seed of the logistic regression's solver.
    cv : "auto" | int | splitter | None
        The folds, as :func:`inner_splitter` reads ``PARSProbe(inner_cv=...)``; None:
        leave-one-group-out. The first fold's time and the projected total are logged
        (``logging.INFO``) when that total exceeds :data:`_PROGRESS_AFTER_SECONDS`, and
        the time left again halfway (from the folds done: a machine whose load changes
        moves it), then the whole.
    return_folds : bool
        Whether to return the folds too.

    Returns
    -------
    scores : pandas.DataFrame
        One row per candidate, indexed by ``str(recipe)``: ``blocks``, ``C``, ``mean``
        and ``std`` (``ddof=0``) of the balanced accuracy over the held-out folds,
        ``sem`` its standard error (the standard deviation with ``ddof=1`` over the
        square root of the folds: :func:`choose_recipe`'s), ``log_loss`` (its mean over
        the held-out folds whose classes the fold trained on), ``n_groups`` (the folds
        scored: the groups under leave-one-group-out; a fold whose absence leaves one
        class to train on is not scored).
    folds : _InnerFolds
        With ``return_folds``: the folds as they ran, and each candidate's scores.
    """
    y, groups = np.asarray(y), np.asarray(groups)
    n_groups = len(np.unique(groups))
    if cv is None:
        from sklearn.model_selection import LeaveOneGroupOut

        splitter = LeaveOneGroupOut()
    else:
        splitter = inner_splitter(cv, n_groups)
    folds = [
        (np.isin(np.arange(len(y)), train), np.isin(np.arange(len(y)), test))
        for train, test in splitter.split(np.zeros((len(y), 1)), y, groups)
    ]
    align = candidates[0].align is not None
    names = list(dict.fromkeys(b for r in candidates for b in r.blocks))
    pre = {}  # aligned once when no group is small: each group needs no reference
    if align and np.unique(groups, return_counts=True)[1].min() >= ALIGN_MIN_WINDOWS:
        pre = {n: _run(_block_steps(n, features[n], True)[:1], features[n], groups, True)
               for n in names}  # fmt: skip
    scores = [[] for _ in candidates]
    losses = [[] for _ in candidates]
    start, long, half = time.perf_counter(), False, len(folds) // 2
    for k, (train, test) in enumerate(folds):
        if k == 1:
            first = time.perf_counter() - start
            long = first * len(folds) > _PROGRESS_AFTER_SECONDS
        if k == 1 and long:
            logger.info(
                "Inner comparison: the first of %d inner folds (%s, %d groups) took %.1f s; "
                "all %d: about %.0f s (an estimate from that fold: the folds differ in "
                "size, and a busy machine runs them slower).",
                len(folds), type(splitter).__name__, n_groups, first, len(folds),
                first * len(folds),
            )  # fmt: skip
        elif long and k == half and half > 1:
            elapsed = time.perf_counter() - start
            logger.info(
                "Inner comparison: %d of %d inner folds in %.1f s; all: about %.0f s "
                "(re-estimated).",
                k, len(folds), elapsed, elapsed * len(folds) / k,
            )  # fmt: skip
        if len(np.unique(y[train])) < 2:
            continue
        fold = {}
        for n in names:
            F, steps = pre.get(n, features[n]), _block_steps(n, features[n], align)
            if n in pre:
                steps = steps[1:]
            tr = _run(steps, F[train], groups[train], True)
            fold[n] = (tr, _run(steps, F[test], groups[test], False), steps[-1])
        for i, recipe in enumerate(candidates):
            scalers = [fold[n][2] for n in recipe.blocks]
            weights = recipe.weights
            X_train = _scale(np.hstack([fold[n][0] for n in recipe.blocks]), scalers, weights)
            X_test = _scale(np.hstack([fold[n][1] for n in recipe.blocks]), scalers, weights)
            model = _logistic(recipe.C, random_state).fit(X_train, y[train])
            proba = model.predict_proba(X_test)
            predicted = model.classes_[proba.argmax(axis=1)]
            with warnings.catch_warnings():  # a group of one class: its recall
                warnings.simplefilter("ignore", UserWarning)
                scores[i].append(balanced_accuracy_score(y[test], predicted))
            seen = np.isin(y[test], model.classes_).all()  # else no log loss
            losses[i].append(log_loss(y[test], proba, labels=model.classes_) if seen else np.nan)
    if long:
        logger.info(
            "Inner comparison: %d candidates compared over %d inner folds in %.1f s.",
            len(candidates), len(folds), time.perf_counter() - start,
        )  # fmt: skip
    table = pd.DataFrame(
        {
            "blocks": ["+".join(r.blocks) for r in candidates],
            "C": [r.C for r in candidates],
            "mean": [np.mean(s) if s else np.nan for s in scores],
            "std": [np.std(s) if s else np.nan for s in scores],
            "sem": [np.std(s, ddof=1) / np.sqrt(len(s)) if len(s) > 1 else np.nan
                    for s in scores],
            "log_loss": [_finite_mean(s) for s in losses],
            "n_groups": [len(s) for s in scores],
        },
        index=pd.Index([str(r) for r in candidates], name="recipe"),
    )  # fmt: skip
    if not return_folds:
        return table
    inner = _InnerFolds(
        splitter=type(splitter).__name__,
        n_groups=n_groups,
        held_out=tuple(len(np.unique(groups[test])) for _, test in folds),
        scored=tuple(len(np.unique(y[train])) >= 2 for train, _ in folds),
        scores=np.array(scores, dtype=float).reshape(len(candidates), -1),
    )
    return table, inner


def _finite_mean(values):
    values = [v for v in values if not np.isnan(v)]
    return float(np.mean(values)) if values else np.nan
