"""Choosing the probe's recipe on the user's own labels.

Whether a pretrained encoder's block helps the probe, and how strongly to penalise
the logistic regression, depends on the task: on the development tasks the probe
without an encoder scores as well as the probe over one (:doc:`/benchmarks`), and
a user's data is another task. With labelled windows of at least :data:`MIN_GROUPS`
groups (subjects, blocks of runs), :func:`compare_recipes` answers on those labels:
each candidate recipe (blocks :data:`RECIPE_BLOCKS` x inverse penalties
:data:`RECIPE_CS`) is scored by an inner leave-one-group-out cross-validation,
balanced accuracy on each held-out group, averaged over the groups.

Every block's raw features of every window (the encoder's features, log band power,
the channels' covariances) are computed once (:func:`block_features`): none depends on
labels or on other windows. What does is refitted within each fold on its training
groups only: the tangent space's reference point, the block scalers, the logistic
regression and, with ``align="groups"``, the reference small groups are shrunk toward.
The winner is then fitted on every window from the same features
(:func:`fit_recipe`). :class:`~braindecode_pars.PARSProbe` does all this with
``recipe="auto"``.
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import pandas as pd
from sklearn.metrics import balanced_accuracy_score, log_loss
from sklearn.pipeline import FeatureUnion, make_pipeline

from .align import (
    ALIGN_MIN_WINDOWS,
    AlignedProbe,
    align_covariances,
    align_features,
    covariance_reference,
    feature_reference,
)
from .floor import _logistic
from .probe import _block_scaling, _raw_blocks
from .windows_input import LabelledPipeline

#: The blocks of the recipes compared, from the fewest: band power alone, with the
#: tangent space, and each of these with the encoder's block (left out without an
#: encoder). Ties go to the first.
RECIPE_BLOCKS = (
    ("bandpower",),
    ("bandpower", "tangentspace"),
    ("encoder", "bandpower"),
    ("encoder", "bandpower", "tangentspace"),
)
#: The inverse L2 strengths compared, each with every entry of :data:`RECIPE_BLOCKS`.
RECIPE_CS = (1.0, 100.0)
#: The fewest groups an inner leave-one-group-out comparison is run on.
MIN_GROUPS = 3


class Recipe(NamedTuple):
    """A probe's recipe: its blocks of features, in the probe's order, and the inverse
    L2 strength ``C`` of its logistic regression.

    Examples
    --------
    >>> str(Recipe(("encoder", "bandpower"), 100.0))
    'encoder+bandpower (C=100)'
    """

    blocks: tuple
    C: float

    def __str__(self):
        return f"{'+'.join(self.blocks)} (C={self.C:g})"

    @property
    def encoder(self):
        """Whether the recipe holds the encoder's block."""
        return "encoder" in self.blocks


def candidate_recipes(encoder=True):
    """Every candidate :class:`Recipe`, in :data:`RECIPE_BLOCKS` then :data:`RECIPE_CS`
    order; those with the encoder's block only when ``encoder``."""
    return [
        Recipe(blocks, float(C))
        for blocks in RECIPE_BLOCKS
        if encoder or "encoder" not in blocks
        for C in RECIPE_CS
    ]


def block_features(X, probe_params):
    """Each block's fitted steps from windows to raw features, and the raw features of
    ``X``, computed once: ``{name: (steps, kind, raw)}`` for ``"encoder"`` (when
    ``encoder`` is not None), ``"bandpower"`` and ``"tangentspace"`` (the channels'
    covariances, kind ``"covariances"``; the others are ``"features"``).
    ``probe_params`` are those of :func:`fit_recipe`.

    The steps are those of :func:`~braindecode_pars.probe.probe_pipeline`, fitted the
    way it fits them, so the numbers are the ones it computes.
    """
    p = probe_params
    blocks = _raw_blocks(
        "PARSProbe", p["encoder"], p["sfreq"], True, p["bands"], True, p["batch_size"],
        p["device"], readout=p["readout"],
    )  # fmt: skip
    out = {}
    for name, steps, kind in blocks:
        step = make_pipeline(*steps)
        out[name] = (step, kind, step.fit_transform(X))
    return out


def _aligned(features, groups, train=None):
    """``{name: (kind, raw)}``, the raw features aligned within each group; a group
    smaller than ALIGN_MIN_WINDOWS is shrunk toward the reference of the groups of
    ``train`` (a boolean mask; None: there is no small group)."""
    out = {}
    for name, (_, kind, raw) in features.items():
        covariances = kind == "covariances"
        align = align_covariances if covariances else align_features
        reference = None
        if train is not None:
            reference = (covariance_reference if covariances else feature_reference)(
                raw[train], groups[train]
            )
        out[name] = (kind, align(raw, groups, reference))
    return out


def _fold(raws, train):
    """``{name: (train features, held-out features)}``, each block scaled (through the
    tangent space for the covariances) as fitted on ``train`` only."""
    out = {}
    for name, (kind, raw) in raws.items():
        scaling = make_pipeline(*_block_scaling(kind))
        out[name] = (scaling.fit_transform(raw[train]), scaling.transform(raw[~train]))
    return out


def compare_recipes(features, y, groups, recipes, *, align=False, random_state=None):
    """Each recipe's balanced accuracy in an inner leave-one-group-out cross-validation.

    Parameters
    ----------
    features : dict
        :func:`block_features` of the windows.
    y, groups : ndarray, shape (n_windows,)
        Their labels and groups.
    recipes : list of Recipe
        The candidates (:func:`candidate_recipes`).
    align : bool
        Align each group on its own windows (``PARSProbe(align="groups")``).
    random_state : int | None
        Of the logistic regression.

    Returns
    -------
    scores : pandas.DataFrame
        One row per recipe, indexed by its name (``str(recipe)``), columns ``blocks``
        (``"bandpower+tangentspace"``), ``C``, ``mean`` and ``std`` (of the balanced
        accuracy over the held-out groups, in [0, 1]; ``mean`` chooses), ``log_loss``
        (its mean over the held-out groups whose classes the fold trained on: finer
        than the accuracy on a few windows)
        and ``n_groups``, the groups left out in turn (a group whose absence leaves one
        class to train on is not).
    """
    y, groups = np.asarray(y), np.asarray(groups)
    fixed = None  # the alignment needs no reference when no group is small
    if align and np.unique(groups, return_counts=True)[1].min() >= ALIGN_MIN_WINDOWS:
        fixed = _aligned(features, groups)
    plain = {name: (kind, raw) for name, (_, kind, raw) in features.items()}
    scores = {recipe: [] for recipe in recipes}
    losses = {recipe: [] for recipe in recipes}
    for group in np.unique(groups):
        train = groups != group
        if len(np.unique(y[train])) < 2:
            continue
        raws = plain
        if align:
            raws = fixed if fixed is not None else _aligned(features, groups, train)
        fold = _fold(raws, train)
        for blocks in dict.fromkeys(recipe.blocks for recipe in recipes):
            X_train = np.hstack([fold[name][0] for name in blocks])
            X_test = np.hstack([fold[name][1] for name in blocks])
            for recipe in [r for r in recipes if r.blocks == blocks]:
                model = _logistic(recipe.C, random_state).fit(X_train, y[train])
                proba = model.predict_proba(X_test)
                predicted = model.classes_[proba.argmax(axis=1)]
                with warnings.catch_warnings():  # a group of one class: its recall
                    warnings.simplefilter("ignore", UserWarning)
                    scores[recipe].append(balanced_accuracy_score(y[~train], predicted))
                seen = np.isin(y[~train], model.classes_).all()  # else no log loss
                loss = log_loss(y[~train], proba, labels=model.classes_) if seen else np.nan
                losses[recipe].append(loss)
    return pd.DataFrame(
        {
            "blocks": ["+".join(r.blocks) for r in recipes],
            "C": [r.C for r in recipes],
            "mean": [np.mean(s) if s else np.nan for s in scores.values()],
            "std": [np.std(s) if s else np.nan for s in scores.values()],
            "log_loss": [_finite_mean(s) for s in losses.values()],
            "n_groups": [len(s) for s in scores.values()],
        },
        index=pd.Index([str(r) for r in recipes], name="recipe"),
    )


def _finite_mean(values):
    values = [v for v in values if not np.isnan(v)]
    return float(np.mean(values)) if values else np.nan


def best_recipe(scores, recipes):
    """The recipe of the best mean score (the first of equals), and the encoder's gain:
    the best mean with the encoder's block minus the best without, in percentage points
    (NaN when either side is missing)."""
    best = recipes[int(np.argmax(scores["mean"].to_numpy()))]
    has_encoder = np.array([r.encoder for r in recipes])
    means = scores["mean"].to_numpy()
    gain = math.nan
    if has_encoder.any() and (~has_encoder).any():
        gain = 100 * (means[has_encoder].max() - means[~has_encoder].max())
    return best, gain


def fit_recipe(recipe, features, y, groups=None, *, align=False, probe_params=None):
    """The probe of ``recipe`` fitted on every window from their :func:`block_features`:
    the model ``PARSProbe(align=...)`` fits with that recipe, without computing the
    features again.

    Parameters
    ----------
    recipe : Recipe
    features : dict
        :func:`block_features` of the training windows.
    y, groups : ndarray
        Their labels and groups (with ``align``).
    align : bool
        Fit the :class:`~braindecode_pars.align.AlignedProbe`, else the pipeline of
        :func:`~braindecode_pars.probe.probe_pipeline`.
    probe_params : dict
        ``encoder``, ``sfreq``, ``bands``, ``random_state``, ``batch_size``,
        ``device`` and ``readout`` of the probe.

    Returns
    -------
    probe : LabelledPipeline | AlignedProbe
    """
    params = dict(probe_params or {})
    if align:
        steps = [(name, features[name][0], features[name][1]) for name in recipe.blocks]
        probe = AlignedProbe(
            params.pop("encoder") if recipe.encoder else None,
            band_power="bandpower" in recipe.blocks,
            tangent_space="tangentspace" in recipe.blocks,
            C=recipe.C,
            **{k: v for k, v in params.items() if k != "encoder"},
        )
        probe.sfreq_ = float(params["sfreq"])
        return probe._fit_features(steps, [features[name][2] for name in recipe.blocks], y, groups)
    union, columns = [], []
    for name in recipe.blocks:
        step, kind, raw = features[name]
        scaling = make_pipeline(*_block_scaling(kind))
        columns.append(scaling.fit_transform(raw))
        fitted = [s for _, s in step.steps] + [s for _, s in scaling.steps]
        union.append((name, make_pipeline(*fitted)))
    model = _logistic(recipe.C, params.get("random_state")).fit(np.hstack(columns), y)
    return LabelledPipeline([("features", FeatureUnion(union)), ("logisticregression", model)])


def comparison_message(scores, recipes, best, gain, fitted):
    """The one line the probe logs after a comparison."""
    n_groups = int(scores["n_groups"].max())
    means = dict(zip(recipes, scores["mean"].to_numpy(), strict=True))
    head = f"Inner leave-one-group-out over {n_groups} groups: "
    if math.isnan(gain):
        what = f"no encoder, so no encoder block to compare (best: {best}, {means[best]:.1%})"
    else:
        with_ = max((r for r in recipes if r.encoder), key=means.get)
        without = max((r for r in recipes if not r.encoder), key=means.get)
        what = (
            f"the encoder block adds {gain:+.1f} points of balanced accuracy (best with: "
            f"{with_}, {means[with_]:.1%}; best without: {without}, {means[without]:.1%})"
        )
    return f"{head}{what}; fitted recipe {fitted}."


def fallback_message(n_groups, fixed, why=None):
    """The one line the probe logs when it could compare nothing: why (by default, too
    few groups) and the fixed recipe fitted."""
    hint = ""
    if why is None and n_groups == 0:
        why = "fit has no groups"
        hint = " Pass 'groups' (the subject of each window) to fit to compare recipes."
    elif why is None:
        why = f"fit has {n_groups} group{'s' * (n_groups != 1)}"
    why += f", fewer than the {MIN_GROUPS} an inner leave-one-group-out comparison needs"
    return (
        f"Nothing could be compared ({why}): fitted the fixed recipe {fixed} (PARSProbe's "
        f"'encoder', 'band_power', 'tangent_space' and 'C').{hint}"
    )
