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

from braindecode_pars._util.checks import (
    InvalidParameterError,
    check_int,
    check_option,
    check_range,
)
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
#: subjects, for both default recipes (:doc:`/benchmarks/defaults`).
DEFAULT_C = 3.0
#: ``PARSProbe(block_weights="auto")``: the encoder block's weights compared by the inner
#: folds, relative to each other block's (0: no encoder block, the probe without an
#: encoder; 1: the fixed recipe's equal total variances), smallest first.
ENCODER_WEIGHTS = (0.0, 0.25, 0.5, 1.0)
#: ``PARSProbe(block_weights="auto")``'s null, ``{block: weight}`` (unnamed blocks 1): band
#: power alone. A block it leaves out is fitted only where the inner folds on the labelled
#: windows show it helps (:func:`earn_blocks`); where nothing can be compared (too few
#: windows), the null is fitted and a warning says so.
FALLBACK_WEIGHTS = {"encoder": 0.0, "tangentspace": 0.0}
#: ``PARSProbe(block_weights="auto")``: how many standard errors of its gain over the blocks
#: without it, fold by fold, a block's gain has to exceed to be fitted (:func:`admits`).
WEIGHT_MARGIN_SE = 2.0
#: ``PARSProbe(block_weights="auto")``: the least gain in balanced accuracy (a fraction) a
#: block has to show over the blocks without it, whatever the spread (:func:`admits`).
#: Set by a rule committed before its runs on the development tasks' selection splits,
#: where no block passed the spread's bar at any of 0 to 0.03, so the rule's tie-break
#: (the largest) chose it (:doc:`/benchmarks/defaults`).
EVIDENCE_DELTA = 0.03
#: ``PARSProbe(block_weights="auto")`` with fewer than three groups: the contiguous parts
#: of each group's windows of each class that the inner folds hold out one at a time
#: (:class:`TimeParts`). Set by the same rule (3 and 5 scored the same; the fewer fits).
TIME_PARTS = 3
#: The fewest scored inner folds a comparison of blocks is decided on.
MIN_SCORED_FOLDS = 3
#: The order in which :func:`earn_blocks` offers the blocks beyond the null: the classical
#: tangent space first, then the encoder's block, which has to earn its say beside the
#: classical blocks admitted.
_EARN_ORDER = ("tangentspace", "encoder")
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


class TimeParts:
    """Inner folds by time within groups: each fold holds out one of ``n_parts``
    contiguous parts of every group's windows of each class, in their order, and leaves
    the windows next to it (``gap`` on each side, in the group's order) out of training.

    The folds of ``PARSProbe(block_weights="auto")`` with fewer than three groups
    (blocked cross-validation; Roberts et al. 2017, *Ecography* 40: 913-929): windows of
    one recording are in time order (braindecode's windows are; plain arrays are taken
    in the order given, group by group), and neighbouring windows share slow drifts, so
    a part held out whole is scored on windows its training windows do not border. The
    parts are cut within each class so that every fold trains and scores on every class
    where each recording holds one class (rest, then a task) as well as where trials of
    the classes alternate (where they alternate, the parts of the classes cover about
    the same stretch of time). A scikit-learn splitter (``split(X, y, groups)``).

    Parameters
    ----------
    n_parts : int
        The parts of each group's windows of each class, at least 2 (a class with fewer
        windows in a group than ``n_parts`` leaves some parts without it).
    gap : int
        The windows on each side of a held-out window, in its group's order, left out of
        training when they are not held out themselves; 0: none.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 1] * 6)
    >>> [test.tolist() for _, test in TimeParts(3).split(y, y)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    >>> [train.tolist() for train, _ in TimeParts(3).split(y, y)][1]  # 3 and 8 border it
    [0, 1, 2, 9, 10, 11]
    """

    def __init__(self, n_parts=TIME_PARTS, gap=1):
        self.n_parts = n_parts
        self.gap = gap

    def __repr__(self):
        return f"TimeParts(n_parts={self.n_parts}, gap={self.gap})"

    def get_n_splits(self, X=None, y=None, groups=None):
        """The number of parts, ``n_parts``."""
        return self.n_parts

    def split(self, X, y, groups=None):
        """Yield ``(train, test)`` index arrays, one fold per part that holds windows.

        Parameters
        ----------
        X : array-like, shape (n_windows, ...)
            Only its length is read.
        y : array-like, shape (n_windows,)
            The labels: the parts are cut within each class.
        groups : array-like, shape (n_windows,) | None
            The group (recording, subject) of each window; None: one group.
        """
        check_int("n_parts", self.n_parts, 2)
        check_int("gap", self.gap, 0)
        y = np.asarray(y)
        n = len(y)
        groups = np.zeros(n) if groups is None else np.asarray(groups)
        if len(groups) != n or len(X) != n:
            raise ValueError(
                f"'X', 'y' and 'groups' must hold one entry per window, but got {len(X)}, "
                f"{n} and {len(groups)}."
            )
        members = [np.flatnonzero(groups == g) for g in pd.unique(groups)]  # in order
        part = np.empty(n, dtype=int)
        for index in members:
            for label in pd.unique(y[index]):
                of_class = index[y[index] == label]
                part[of_class] = np.arange(len(of_class)) * self.n_parts // len(of_class)
        for j in range(self.n_parts):
            test = part == j
            if not test.any():
                continue
            near = np.zeros(n, dtype=bool)
            for index in members:
                held = test[index]
                border = np.zeros(len(index), dtype=bool)
                for step in range(1, self.gap + 1):
                    border[:-step] |= held[step:]
                    border[step:] |= held[:-step]
                near[index] = border & ~held
            yield np.flatnonzero(~test & ~near), np.flatnonzero(test)


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
    #: The windows each scored fold held out (indices into the windows compared), their
    #: labels, and each candidate's predictions of them: ``predictions[i][k]`` is
    #: candidate ``i``'s of scored fold ``k`` (:func:`paired_gain` reads them).
    tests: tuple = dataclasses.field(default=(), repr=False, compare=False)
    labels: tuple = dataclasses.field(default=(), repr=False, compare=False)
    predictions: tuple = dataclasses.field(default=(), repr=False, compare=False)

    def __str__(self):
        if self.splitter == TimeParts.__name__:
            n = len(self.held_out)
            groups = f"{self.n_groups} group{'s' * (self.n_groups != 1)}"
            text = (
                f"{n} folds of TimeParts over {groups} (each holds out one of {n} "
                "contiguous parts of every group's windows of each class, in their order, "
                "and leaves its neighbours out of training)"
            )
        else:
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
    the one-standard-error rule among the challengers (why: :doc:`/benchmarks/defaults`).

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


def paired_gain(folds, challenger, null):
    """A candidate's gain in balanced accuracy over another, fold by fold, and the
    binomial standard error of its mean over the folds' held-out windows.

    In each scored fold the gain is the difference of the two balanced accuracies, which
    is a sum over the fold's held-out windows: ``sum_i w_i (c_i - n_i)``, ``c_i`` and
    ``n_i`` 1 where the challenger and the null predict window ``i`` right (else 0),
    ``w_i = 1 / (n_classes * n_class(i))`` over the classes the fold holds out. Were
    the two interchangeable, each window on which they disagree would count +w_i or
    -w_i at even odds (the sign test behind McNemar's), so the mean gain over ``K``
    folds has the standard error ``sqrt(sum_i w_i**2 (c_i - n_i)**2) / K``: the floor
    the folds' spread is read against (three folds that agree on a one-window gain
    have a spread of 0, not this).

    Parameters
    ----------
    folds : _InnerFolds
        :func:`compare_recipes`'s, with ``return_folds=True``.
    challenger, null : int
        The two candidates' indices.

    Returns
    -------
    gains : ndarray, shape (n_scored_folds,)
        The challenger's balanced accuracy minus the null's, fold by fold (fractions).
    floor : float
        The binomial standard error of their mean (a fraction).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 0, 1, 1])
    >>> folds = _InnerFolds("KFold", 1, (1,), (True,), np.zeros((2, 1)), tests=(np.arange(4),),
    ...                     labels=(y,), predictions=((np.array([0, 0, 1, 0]),), (y,)))
    >>> gains, floor = paired_gain(folds, 1, 0)  # one window of class 1 more right
    >>> float(gains[0]), float(floor)
    (0.25, 0.25)
    """
    gains, variance = [], 0.0
    for k, labels in enumerate(folds.labels):
        classes, counts = np.unique(labels, return_counts=True)
        weight = 1.0 / (len(classes) * counts[np.searchsorted(classes, labels)])
        right = folds.predictions[challenger][k] == labels
        wrong = folds.predictions[null][k] == labels
        change = right.astype(float) - wrong.astype(float)
        gains.append(float(np.sum(weight * change)))
        variance += float(np.sum((weight * change) ** 2))
    n = len(gains)
    return np.array(gains), (math.sqrt(variance) / n if n else math.nan)


def admits(gains, floor, margin=None, delta=None):
    """Whether a block's gains over the blocks without it, fold by fold, admit it: their
    mean exceeds ``max(margin * se, delta)``, ``se`` the standard error of the mean gain
    (the standard deviation over the folds, ``ddof=1``, over the square root of their
    number) but never below ``floor``, the binomial standard error of the held-out
    windows (:func:`paired_gain`). Never with fewer than two folds.

    Parameters
    ----------
    gains : array-like, shape (n_folds,)
        Fractions of balanced accuracy.
    floor : float
        The least standard error (:func:`paired_gain`).
    margin : float | None
        In standard errors; None: :data:`WEIGHT_MARGIN_SE`.
    delta : float | None
        The least gain whatever the spread; None: :data:`EVIDENCE_DELTA`.

    Returns
    -------
    admitted : bool
    bar : float
        The gain the mean had to exceed (NaN with fewer than two folds).

    Examples
    --------
    >>> admits([0.017, 0.017, 0.017], floor=0.02)  # a steady one-window gain: noise
    (False, 0.04)
    >>> admits([0.20, 0.15, 0.05], floor=0.03)  # 13 points, standard error 4.4
    (True, 0.0881...)
    >>> admits([0.20, 0.15, -0.02], floor=0.03)  # 11 points, standard error 6.7
    (False, 0.1331...)
    """
    margin = WEIGHT_MARGIN_SE if margin is None else margin
    delta = EVIDENCE_DELTA if delta is None else delta
    gains = np.asarray(gains, float)
    if len(gains) < 2:
        return False, math.nan
    se = max(gains.std(ddof=1) / math.sqrt(len(gains)), floor)
    bar = max(margin * se, delta)
    return bool(gains.mean() > bar + 1e-12), float(bar)


def corrected_margin(margin, n_challengers):
    """The margin, in standard errors, each of ``n_challengers`` weights of one block is
    held to: the one-sided level of ``margin`` (about 2.3 % at 2) shared among them
    (Bonferroni), so that a block offered at three weights is no likelier to be admitted
    by chance than one offered at one.

    Parameters
    ----------
    margin : float | None
        The margin of one challenger; None: :data:`WEIGHT_MARGIN_SE`.
    n_challengers : int

    Returns
    -------
    margin : float

    Examples
    --------
    >>> round(corrected_margin(2.0, 1), 2), round(corrected_margin(2.0, 3), 2)
    (2.0, 2.43)
    """
    from scipy.stats import norm

    margin = WEIGHT_MARGIN_SE if margin is None else margin
    return float(norm.isf(norm.sf(margin) / max(int(n_challengers), 1)))


@dataclasses.dataclass(frozen=True)
class BlockDecision:
    """How :func:`earn_blocks` decided one block.

    Attributes
    ----------
    block : str
    weights : tuple of float
        The weights above 0 compared.
    gains : tuple of float
        Each weight's mean gain over the recipe without the block (fractions); empty
        when nothing could be compared.
    bars : tuple of float
        The gain each had to exceed (:func:`admits`).
    weight : float
        The weight fitted: 0 when the block was dropped.
    evidence : bool
        Whether inner folds decided it (False: too few to compare; dropped).
    per_fold : tuple of ndarray
        Each weight's gains fold by fold (fractions).
    """

    block: str
    weights: tuple
    gains: tuple
    bars: tuple
    weight: float
    evidence: bool
    per_fold: tuple = dataclasses.field(default=(), repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What :func:`earn_blocks` fitted and why.

    Attributes
    ----------
    recipe : ProbeRecipe
        The recipe to fit.
    null : ProbeRecipe
        Band power alone (or the first block of ``blocks`` there is, without band power).
    decisions : tuple of BlockDecision
        One per block beyond the null, in the order offered.
    folds : _InnerFolds | None
        The inner folds as they ran, too few to decide on included (None when ``fixed``
        holds one block: nothing to compare).
    scores : pandas.DataFrame | None
        :func:`compare_recipes`'s rows of every candidate compared, in order.
    fold_scores : ndarray, shape (n_candidates, n_scored_folds) | None
    """

    recipe: object
    null: object
    decisions: tuple
    folds: object = None
    scores: object = None
    fold_scores: object = None

    @property
    def compared(self):
        """Whether inner folds decided (False: too few windows; the null fitted)."""
        return all(d.evidence for d in self.decisions)


def null_recipe(fixed):
    """The null of :func:`earn_blocks`: ``fixed`` (at equal weights) with the blocks
    :data:`FALLBACK_WEIGHTS` weighs 0 left out, band power alone; where that leaves no
    block (``fixed`` without band power), its first block of the tangent space and the
    encoder's.

    Examples
    --------
    >>> str(null_recipe(ProbeRecipe(("encoder", "bandpower", "tangentspace"))))
    'bandpower (C=3)'
    >>> str(null_recipe(ProbeRecipe(("encoder", "tangentspace"))))
    'tangentspace (C=3)'
    """
    equal = dataclasses.replace(fixed, weights=None)
    try:
        return equal.weighted(FALLBACK_WEIGHTS)
    except ValueError:  # no block left
        first = next(b for b in ("tangentspace", "encoder") if b in fixed.blocks)
        return dataclasses.replace(equal, blocks=(first,))


def _with(recipe, block, weight):
    """``recipe`` with ``block`` added at ``weight``, the blocks in :data:`BLOCKS` order."""
    weights = {b: recipe.weight(b) for b in recipe.blocks}
    weights[block] = weight
    blocks = tuple(b for b in BLOCKS if b in weights)
    return dataclasses.replace(recipe, blocks=blocks, weights=tuple(weights[b] for b in blocks))


def earn_blocks(fixed, features, y, groups, *, cv, random_state=None, margin=None, delta=None):
    """Every block beyond band power earns its say on the labelled windows.

    The null is band power alone (:func:`null_recipe`). The blocks of ``fixed`` beyond
    it are offered one at a time, the tangent space first, then the encoder's block at
    each weight of :data:`ENCODER_WEIGHTS` above 0; each is compared by
    :func:`compare_recipes` with the recipe admitted so far, on the same inner folds
    (``cv``), and admitted when its gain over that recipe, fold by fold, passes
    :func:`admits` (more than ``max(margin * se, delta)``, ``se`` floored at the
    binomial standard error of the held-out windows); of the encoder's weights that
    pass, the one of the highest mean inner score, ties to the smaller. With fewer than
    :data:`MIN_SCORED_FOLDS` scored folds nothing is decided and the null is fitted.

    Three challengers of the encoder's block are each held to the margin: a heuristic,
    not a correction for the multiple comparison. The cost: per fold, the tangent space
    and scalers are fitted once per block and one logistic regression per candidate (2,
    then 4), on the cached block features.

    Parameters
    ----------
    fixed : ProbeRecipe
        The blocks on offer (its weights are not read).
    features : dict
        Raw features of every block of ``fixed``, of the labelled windows.
    y, groups : ndarray, shape (n_windows,)
    cv : splitter
        The inner folds (``split(X, y, groups)``): by group, or :class:`TimeParts`.
    random_state : int | None
    margin, delta : float | None
        :func:`admits`'s; None: :data:`WEIGHT_MARGIN_SE`, :data:`EVIDENCE_DELTA`.

    Returns
    -------
    evidence : Evidence
    """
    null = null_recipe(fixed)
    current, decisions, tables, folds_run, fold_scores = null, [], [], None, []
    for block in _EARN_ORDER:
        if block not in fixed.blocks or block in null.blocks:
            continue
        weights = tuple(w for w in ENCODER_WEIGHTS if w > 0) if block == "encoder" else (1.0,)
        candidates = [current, *(_with(current, block, w) for w in weights)]
        scores, folds = compare_recipes(
            candidates, features, y, groups, random_state=random_state, cv=cv,
            return_folds=True,
        )  # fmt: skip
        folds_run = folds
        if sum(folds.scored) < MIN_SCORED_FOLDS:
            decisions.append(BlockDecision(block, weights, (), (), 0.0, False))
            continue
        tables.append(scores if not tables else scores.iloc[1:])
        fold_scores.append(folds.scores if len(fold_scores) == 0 else folds.scores[1:])
        means = scores["mean"].to_numpy(float)
        gains, bars, passed, each = [], [], [], []
        held_to = corrected_margin(margin, len(weights))
        for i in range(1, len(candidates)):
            per_fold, floor = paired_gain(folds, i, 0)
            ok, bar = admits(per_fold, floor, held_to, delta)
            each.append(per_fold)
            gains.append(float(per_fold.mean()))
            bars.append(bar)
            if ok:
                passed.append(i)
        weight = 0.0
        if passed:
            top = max(means[i] for i in passed)
            chosen = min((i for i in passed if means[i] >= top - 1e-12), key=lambda i: i)
            weight, current = weights[chosen - 1], candidates[chosen]
        decisions.append(
            BlockDecision(block, weights, tuple(gains), tuple(bars), weight, True, tuple(each))
        )
    table = pd.concat(tables) if tables else None
    return Evidence(
        recipe=current, null=null, decisions=tuple(decisions), folds=folds_run, scores=table,
        fold_scores=np.vstack(fold_scores) if fold_scores else None,
    )  # fmt: skip


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
    tests, predictions = [], [[] for _ in candidates]
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
        tests.append(np.flatnonzero(test))
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
            predictions[i].append(predicted)
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
        tests=tuple(tests),
        labels=tuple(y[t] for t in tests),
        predictions=tuple(tuple(p) for p in predictions),
    )
    return table, inner


def _finite_mean(values):
    values = [v for v in values if not np.isnan(v)]
    return float(np.mean(values)) if values else np.nan
