"""PARSProbe: the probe as a classifier, the default head of
:class:`~braindecode_pars.PARSClassifier`."""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
from collections.abc import Mapping

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, check_memory

from braindecode_pars._util.checks import check_device, check_int, check_option
from braindecode_pars._util.params import fill_doc, store_params
from braindecode_pars._util.threads import with_fit_threads
from braindecode_pars.estimators._inputs import (
    GroupsTransformerMixin,
    WindowsClassifierMixin,
    check_labels,
    check_window_length,
    load_encoder_param,
    say_resampling,
)
from braindecode_pars.features import recipe as _recipe
from braindecode_pars.features.blocks import BLOCKS, DEFAULT_READOUT, block_features
from braindecode_pars.features.recipe import (
    DEFAULT_C,
    LOGO_MAX_GROUPS,
    ProbeRecipe,
    TimeParts,
    beats,
    choose_recipe,
    compare_recipes,
    earn_blocks,
    fit_blocks,
    inner_splitter,
)
from braindecode_pars.features.scaling import check_align_groups
from braindecode_pars.io.estimator_inputs import WindowsInputMixin, read_fitted, read_input
from braindecode_pars.io.windows import window_scale
from braindecode_pars.pretraining.config import DEFAULT_CROP_SECONDS

logger = logging.getLogger(__name__)

#: The fewest groups (and scored folds) an inner comparison of recipes is run on.
_MIN_GROUPS = 3


class PARSProbe(WindowsInputMixin, WindowsClassifierMixin, GroupsTransformerMixin, BaseEstimator):
    """The probe as a classifier: a class-balanced logistic regression over a frozen
    encoder's features, log band power and the Riemannian tangent space.

    The default head of :class:`~braindecode_pars.PARSClassifier`; usable alone.
    Without an encoder (``encoder=None``, the default) it is the same model over the
    classical blocks only, which is what to compare an encoder with: the block of a
    pretrained encoder has to earn its place beside them. ``X`` is read once per call
    (arrays with ``sfreq``, braindecode windows, ``Subset`` and ``SliceDataset`` objects
    of them, ``mne.Epochs``), each block's raw features are computed once
    (:func:`~braindecode_pars.features.blocks.block_features`) and the recipe is fitted
    on them by :func:`~braindecode_pars.features.recipe.fit_blocks`: each block
    standardised and scaled to the same total variance, so that ``C`` means what it
    means for a logistic regression over standardised features whatever the number of
    channels and blocks (:mod:`braindecode_pars.features.recipe` gives the formula).

    **Every block earns its say on your own labels** (``block_weights="auto"``, the
    default). The null is log band power alone, the block a plain band-power logistic
    regression reads. ``fit`` offers the tangent space, then the encoder's block (at
    weights 0.25, 0.5 and 1 of the others' total variance), each beside the blocks
    admitted before it, and fits a block only where inner folds on the labelled windows
    show that it helps by more than two standard errors of its gain (the spread over the
    folds, never less than the binomial standard error of the held-out windows; the
    encoder's three weights share that level, 2.43 standard errors each) and by more
    than :data:`~braindecode_pars.features.recipe.EVIDENCE_DELTA`
    (:func:`~braindecode_pars.features.recipe.earn_blocks`). The inner folds hold out
    whole groups where ``fit`` has three groups (subjects, recordings) or more (folds:
    ``inner_cv``); with one or two, contiguous parts of each group's windows of each
    class, in time order, their neighbours left out of training
    (:class:`~braindecode_pars.features.recipe.TimeParts`; braindecode windows are in
    time order, arrays are taken in the order given). Where too few windows leave too
    few folds to score, band power alone is fitted and a WARNING says which blocks were
    dropped without evidence; otherwise one INFO line gives each block's gain against
    the gain it had to exceed. The comparison runs on the block features computed once
    (the encoder reads each window once), two logistic regressions per fold for the
    tangent space and four for the encoder. Why the default (on the development tasks
    and the main job, band power alone beat the three blocks at equal say with one or
    two labelled subjects): :doc:`/benchmarks/defaults`. ``block_weights=None`` gives
    every block equal say.

    Whether the encoder's block helps, on your own labels: with ``recipe="auto"`` and
    ``groups`` of at least three subjects (or blocks), ``fit`` scores the fixed recipe
    and each candidate recipe (band power alone or with the tangent space, each with
    and without the encoder's block, ``C`` 0.01 or 1) by an inner cross-validation over
    the groups on the same features, keeps the fixed recipe unless a candidate beats it,
    fold by fold, by more than the standard error of its gain, and otherwise fits the
    simplest of those within one standard error of their best on every window (the
    one-standard-error rule, :func:`~braindecode_pars.features.recipe.choose_recipe`),
    keeps the scores
    (``recipe_scores_``, ``encoder_gain_``, ``encoder_gain_std_``, ``inner_folds_``)
    and logs one line: the folds as they ran ("5 folds of GroupKFold over 45 groups
    (9 groups held out in each)"), "the encoder block adds +x.x ± s.s points" with
    whether that is more than its standard error over the folds, and whether the folds
    can tell the best recipe from simpler ones. With fewer groups the fixed recipe is
    fitted and the line says that nothing could be compared.

    Parameters
    ----------
    encoder : str | Path | PatchEncoder | None
        The frozen encoder: a shipped encoder's name (``"pars-small-v2"``), a saved
        encoder's path, an instance (copied), or None for no encoder block (the
        default). Windows at another rate than the encoder's are resampled to it for
        its block alone (as :class:`~braindecode_pars.PARSFineTuner` resamples them),
        and ``fit`` logs both rates.
    recipe : {"fixed", "auto"}
        "fixed": the blocks and ``C`` the parameters give, each earning its say under
        ``block_weights="auto"``. "auto": the fixed recipe (at equal weights, or a dict's
        weights; ``block_weights="auto"`` is not used then)
        (the incumbent) and the candidates
        (:meth:`~braindecode_pars.features.ProbeRecipe.candidates`) scored by their inner
        balanced accuracy over the groups of ``fit`` (folds: ``inner_cv``). A candidate
        replaces the fixed recipe only when its gain over it, fold by fold, exceeds the
        standard error of that gain; of such candidates, the simplest whose score lies
        within one standard error of their best's (the standard deviation of its fold
        scores over the square root of their number, as glmnet's ``lambda.1se``).
        Simplest means: no encoder block before an encoder block, then fewer blocks,
        then the smaller ``C`` (:func:`~braindecode_pars.features.recipe.simplicity`).
        With fewer than three groups, the fixed recipe. Why the incumbent:
        :doc:`/benchmarks/defaults`.
    inner_cv : "auto" | int | splitter
        The folds of ``recipe="auto"``'s inner comparison. ``"auto"``:
        leave-one-group-out up to 20 groups (one fold per subject: 9 regressions per
        subject), ``GroupKFold(5)`` beyond, so that the comparison's cost stops growing
        with the subjects; an int ``k``: ``GroupKFold(k)``; a scikit-learn splitter of
        groups (``split(X, y, groups)``). A comparison projected to take more than 10 s
        logs its first fold's time and the projected total (``logging.INFO``; shown by
        ``PARSClassifier(verbose=1)``). Its cost on the bundled EEGMAT windows:
        :doc:`/usage`.
    encoder_block : bool
        Whether the fixed recipe holds the encoder's block when there is an encoder.
    C : float
        Inverse L2 strength of the logistic regression (of the fixed recipe), over
        features each block of which is standardised and scaled to ``P / B`` (``P``
        features in ``B`` blocks), so that it means the same whatever the number of
        channels and blocks. The default, 3, was chosen on the development tasks'
        selection splits at several label counts (:doc:`/benchmarks/defaults`).
    band_power, tangent_space : bool
        Whether the fixed recipe holds the log band power block and the tangent-space
        block (OAS covariances, reference point the training windows' Riemannian mean).
        Both read a flat channel of a window (a disconnected amplifier, a zero-padded
        end: its variance at most ``features.blocks.FLAT_RATIO`` times its median over
        the fitted windows) as missing, so that every feature stays finite; ``fit``
        warns once when some windows hold flat channels. The covariances read whatever
        band the windows hold: for motor imagery give the probe windows filtered to 8-30
        Hz, as CSP and MOABB's tangent-space pipelines do (:doc:`/usage`).
    block_weights : "auto" | None | dict
        How much say each block of the fixed recipe gets. ``"auto"`` (the default): each
        block beyond band power is fitted only where the inner folds on the labelled
        windows show it helps (above; the encoder's block at the best of
        :data:`~braindecode_pars.features.recipe.ENCODER_WEIGHTS` that passes),
        logged in one line, the scores in ``recipe_scores_``, the encoder's gain over
        the blocks before it in ``encoder_gain_``. None: every block the same total
        variance (``C``'s scaling). A dict ``{block: weight}`` (blocks ``"encoder"``,
        ``"bandpower"``, ``"tangentspace"``; weights >= 0, unnamed blocks 1): each
        block's scaled features multiplied by its weight, so that the L2 penalty holds
        a block of weight ``w`` ``1 / w**2`` times tighter; 0 leaves the block out
        (``{"encoder": 0}`` is the probe without an encoder, exactly); weights of blocks
        the recipe does not hold are ignored. On a one-channel task that the encoder cannot help
        ``"auto"`` keeps ``PARSClassifier()`` within 0.02 of the better probe without an
        encoder, and on a task only the encoder carries it keeps the encoder
        (``tests/test_probe_evidence.py``).
    align : {None, "groups"}
        None: every window as it is. "groups": each group standardised and its
        covariances re-centred on its own windows, at ``fit`` and at ``predict``
        (transductive; the groups are ``groups``, the ``subject`` of braindecode
        windows, or all the windows of the call as one group). Each group should hold
        every class: on a label that is the subject's own it removes the signal.
    readout : {"mean+std", "mean", "blocks"}
        What the encoder's block reads from the tokens
        (:class:`~braindecode_pars.features.EncoderFeatures`).
    bands : str | dict | sequence of (name, low, high) | None
        The band-power block's bands; None: six bands 0.5-45 Hz cut at the Nyquist
        frequency (all six at 100 Hz, five at 50 Hz;
        :data:`~braindecode_pars.features.DEFAULT_BANDS`). A preset's name
        (:data:`~braindecode_pars.features.blocks.BAND_PRESETS`): ``"default"``, or
        ``"sleep"``, with the spindles' sigma band (11-16 Hz) whole, which the default
        bands split between alpha and beta_low. ``fit`` warns when some windows hold no
        power in a band where the others do (windows upsampled from a lower native
        rate; :class:`~braindecode_pars.features.BandPowerFeatures`).
    crop_seconds : float | None
        The encoder's crops (:class:`~braindecode_pars.features.EncoderFeatures`); None:
        whole windows. Windows longer than the 10-s crops the shipped encoders were
        pretrained on (30-s sleep epochs) ask the encoder for positions it never saw
        unless cut (``crop_seconds=10``); ``fit`` logs what the encoder reads of them.
        The default stays None: whether cropping scores better has not been measured
        on the selection splits.
    patch_stride_seconds : float | None
        The step between the encoder's patches
        (:class:`~braindecode_pars.features.EncoderFeatures`); None (the default): half
        the patch, overlapping patches every 0.5 s with the shipped encoders' 1-s
        patches, as PARS pretraining draws patches that overlap (chosen on the selection
        splits: :ref:`patch-density`); the patch length (1.0):
        non-overlapping patches.
    pos_mask_ratio : float
        The share of the encoder's tokens read with the position-mask token in place
        of their positional embedding, as PARS pretraining reads 80 % of its patches
        (:class:`~braindecode_pars.features.EncoderFeatures`); 0 (the default): every
        token with its position; 1: none.
    sfreq : float | None
        Sampling rate of array input; read from windows that carry it.
    batch_size, device
        The encoder's forward passes.
    memory : str | joblib.Memory | None
        The cache of the blocks' features, as ``Pipeline(memory=...)``: None (the
        default), none; a folder or a ``joblib.Memory``: each block's features of each
        set of windows computed once for the same encoder, settings and windows, so
        that ``GridSearchCV`` over ``C`` (or any parameter but the features') runs the
        encoder, band power and covariances once per fold.
    random_state : int | None
        Seed of the logistic regression's solver.

    Attributes
    ----------
    recipe_ : ProbeRecipe
        The recipe fitted; ``str(recipe_)``: ``"bandpower+tangentspace (C=3)"``.
    recipe_scores_ : pandas.DataFrame | None
        The inner comparison, :func:`~braindecode_pars.features.recipe.compare_recipes`'s
        rows: with ``recipe="auto"`` the fixed recipe first, then the candidates; with
        ``block_weights="auto"`` band power alone, with the tangent space, then the
        encoder's block at each weight beside the blocks admitted before it. None when
        nothing was compared.
    encoder_gain_ : float
        The best inner balanced accuracy with the encoder's block minus the best
        without, in percentage points (the mean over the inner folds of the two
        candidates' difference in each; with ``block_weights="auto"``, the encoder's
        weight of the largest mean gain over the blocks admitted before it); NaN when
        nothing was compared (or no encoder). It is the gain of the best candidates,
        whichever recipe was fitted.
    encoder_gain_std_ : float
        The standard deviation (``ddof=0``) over the inner folds of that difference, in
        points: the spread to read ``encoder_gain_`` against (its standard error is
        ``encoder_gain_std_ / sqrt(n_folds - 1)``); NaN when ``encoder_gain_`` is.
    inner_folds_ : str | None
        The inner folds as they ran, e.g. ``"5 folds of GroupKFold over 45 groups (9
        groups held out in each)"``; None when nothing was compared.
    block_weights_ : dict
        The weight of each block the fit considered in the recipe fitted (0: left out),
        e.g. ``{"encoder": 0.5, "bandpower": 1.0, "tangentspace": 1.0}``.
    classes_ : ndarray
    sfreq_, n_chans_, n_times_ : float, int, int
    ch_names_ : list of str | None
        The channel names of fit, where the windows carried them (braindecode windows,
        ``mne.Epochs``; None for arrays): at ``predict``, ``predict_proba``,
        ``transform`` and ``score``, windows of these names in another order are
        reordered, other names are refused naming both lists.
    scale_ : float
        The windows' amplitude at ``fit``; ``predict`` warns when it changes a
        hundredfold (another unit).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 20)
    >>> X = rng.standard_normal((40, 2, 400)) * (1 + y[:, None, None])
    >>> PARSProbe(sfreq=100).fit(X[::2], y[::2]).score(X[1::2], y[1::2])
    1.0
    """

    # groups reach fit, predict and score under metadata routing (PARSClassifier's, or
    # cross_val_score's), for the alignment and the inner comparison
    __metadata_request__fit = {"groups": True}
    __metadata_request__score = {"groups": True}

    def __init__(
        self,
        encoder=None,
        *,
        recipe="fixed",
        inner_cv="auto",
        encoder_block=True,
        C=DEFAULT_C,
        band_power=True,
        tangent_space=True,
        block_weights="auto",
        align=None,
        readout=DEFAULT_READOUT,
        bands=None,
        crop_seconds=None,
        patch_stride_seconds=None,
        pos_mask_ratio=0.0,
        sfreq=None,
        batch_size=8,
        device="cpu",
        memory=None,
        random_state=None,
    ):
        store_params(self, locals())

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags

    def check_params(self):
        """Check the parameters without data (``fit`` does it first); a bad value is
        refused naming the parameter. Returns the fixed recipe, a
        :class:`~braindecode_pars.features.ProbeRecipe` (its blocks as if there were an
        encoder)."""
        check_option("recipe", self.recipe, ("fixed", "auto"))
        inner_splitter(self.inner_cv, LOGO_MAX_GROUPS, name="inner_cv")  # checks it
        for name in ("encoder_block", "band_power", "tangent_space"):
            check_option(name, getattr(self, name), (False, True))
        check_int("batch_size", self.batch_size, 1)
        check_device("device", self.device)
        check_memory(self.memory)
        _check_block_weights(self.block_weights)
        flags = (self.encoder_block, self.band_power, self.tangent_space)
        blocks = tuple(name for name, on in zip(BLOCKS, flags, strict=True) if on)
        if not any(flags):
            _refuse_no_block()
        return ProbeRecipe(
            blocks or ("encoder",), C=self.C, readout=self.readout, bands=self.bands,
            align=self.align, crop_seconds=self.crop_seconds,
            patch_stride_seconds=self.patch_stride_seconds, pos_mask_ratio=self.pos_mask_ratio,
        )  # fmt: skip

    def encoder_unused(self, groups=None):
        """None when ``fit`` with these ``groups`` reads the encoder (its fixed recipe
        holds the encoder's block, or ``recipe="auto"`` has at least three groups to
        compare recipes with and without it); else why not, and what would make it read
        it. :class:`~braindecode_pars.PARSClassifier` skips pretraining when not."""
        n_groups = 0 if groups is None else len(pd.unique(np.asarray(groups)))
        if self.recipe == "auto" and n_groups >= _MIN_GROUPS:
            return None
        others = self.band_power or self.tangent_space
        if self.encoder_block and others and isinstance(self.block_weights, Mapping):
            if self.block_weights.get("encoder", 1) == 0:
                return (
                    "PARSProbe's block_weights give the encoder's block the weight 0; to use "
                    "the encoder, give it a positive weight"
                )
        if self.encoder_block:
            return None
        return (
            f"PARSProbe's fixed recipe has no encoder block (encoder_block=False) and fit "
            f"has {n_groups} group(s), fewer than the {_MIN_GROUPS} a comparison of recipes "
            "with and without the encoder needs; to use the encoder, set encoder_block=True"
        )

    @fill_doc
    @with_fit_threads
    def fit(self, X, y=None, groups=None):
        """Read the windows once, compute the blocks once and fit the recipe.

        Parameters
        ----------
        %(X_y_fit)s
        groups : array-like, shape (n_windows,) | None
            The subject (or block) of each window, for ``align="groups"`` and the
            inner comparisons of ``recipe="auto"`` and ``block_weights="auto"``; None:
            braindecode windows' ``subject``.

        Returns
        -------
        self : PARSProbe
        """
        fixed = self.check_params()
        encoder = load_encoder_param(self.encoder)
        data = read_input(X, y, groups, sfreq=self.sfreq)
        check_labels(data.y)
        if encoder is not None:
            # the encoder block resamples to the encoder's rate: only the length counts
            _, n_chans, n_times = data.X.shape
            check_window_length(n_times, n_chans, encoder.patch_seconds, data.sfreq)
        reads_encoder = encoder is not None and (self.encoder_block or self.recipe == "auto")
        if reads_encoder and abs(encoder.sfreq - data.sfreq) > 1e-6 * encoder.sfreq:
            say_resampling(type(self).__name__, data.sfreq, encoder.sfreq)
        if reads_encoder:
            self._say_long_windows(encoder, data.shape[1] / data.sfreq)
        if encoder is None or not self.encoder_block:
            blocks = tuple(b for b in fixed.blocks if b != "encoder")
            if not blocks:
                _refuse_no_block()
            fixed = dataclasses.replace(fixed, blocks=blocks)
        considered = fixed.blocks
        if isinstance(self.block_weights, Mapping):
            fixed = fixed.weighted(self.block_weights)
        earning = self.recipe == "fixed" and self.block_weights == "auto" and len(fixed.blocks) > 1
        check_align_groups(self.align, data)
        self.sfreq_ = float(data.sfreq)
        self.n_chans_, self.n_times_ = data.shape
        self.ch_names_ = data.ch_names
        self.scale_ = window_scale(data.X)
        self.recipe_, self.recipe_scores_, self.encoder_gain_ = fixed, None, math.nan
        self.encoder_gain_std_, self.inner_folds_ = math.nan, None
        groups = None if data.groups is None else np.asarray(data.groups)
        recipe, candidates = fixed, None
        if self.recipe == "auto":
            candidates = self._candidates(fixed, encoder, groups)
        wanted = candidates or [fixed]
        blocks = tuple(dict.fromkeys(b for r in wanted for b in r.blocks))
        features, extractor = block_features(
            data, dataclasses.replace(fixed, blocks=blocks), sfreq=self.sfreq_,
            encoder=encoder, batch_size=self.batch_size, device=self.device,
            memory=self.memory,
        )  # fmt: skip
        if earning:
            recipe = self._earn(fixed, features, data.y, groups)
        elif candidates:
            recipe = self._compare(candidates, features, data.y, groups, fixed)
        self.recipe_ = recipe
        self.block_weights_ = {name: recipe.weight(name) for name in considered}
        extractor.steps = {name: extractor.steps[name] for name in recipe.blocks}
        self.extractor_ = extractor
        self.model_ = fit_blocks(recipe, features, data.y, groups, random_state=self.random_state)
        self.classes_ = self.model_.classes_
        return self

    def _say_long_windows(self, encoder, seconds):
        """Log (INFO, once per fit) what the encoder reads of windows longer than the
        crops it was pretrained on (:data:`DEFAULT_CROP_SECONDS`, the shipped encoders'
        and ``PARSPretrainer``'s default), and how ``crop_seconds`` changes it."""
        crop = DEFAULT_CROP_SECONDS
        if seconds <= crop + 1e-9:
            return
        patch = float(encoder.patch_seconds)
        stride = patch / 2 if self.patch_stride_seconds is None else self.patch_stride_seconds
        n_crops = math.ceil(seconds / crop - 1e-9)
        if self.crop_seconds is None:
            n_tokens = int((seconds - patch) // stride) + 1
            logger.info(
                "%s: the windows are %g s long, longer than the %g-s crops the shipped "
                "encoders were pretrained on (PARSPretrainer's default): with "
                "crop_seconds=None (the default) the encoder reads each channel's whole "
                "window, %d patches of %g s every %g s at positions 0 to %g s, and those "
                "past %g s are positions it never saw in pretraining. crop_seconds=%g reads "
                "each window as %d consecutive crops of %g s (positions 0 to %g s each, as "
                "pretraining read them), each normalised and encoded on its own, the "
                "readout over all their tokens; which scores better on your labels is not "
                "measured: compare both.",
                type(self).__name__, seconds, crop, n_tokens, patch, stride,
                (n_tokens - 1) * stride, crop, crop, n_crops, crop, crop - patch,
            )  # fmt: skip
        else:
            logger.info(
                "%s: the windows are %g s long; crop_seconds=%g: the encoder reads each as "
                "%d consecutive crops of %g s (the last one shorter when the window is "
                "not a whole number of them), each normalised and encoded on its own, the "
                "readout over all their tokens (crop_seconds=None: the whole window at "
                "once, positions past the %g-s crops of pretraining included).",
                type(self).__name__, seconds, self.crop_seconds,
                math.ceil(seconds / self.crop_seconds - 1e-9), self.crop_seconds, crop,
            )  # fmt: skip

    def _candidates(self, fixed, encoder, groups):
        """The recipes to compare, or None (logged) when fit has too few groups."""
        if groups is not None and pd.isna(groups).any():
            raise ValueError(
                f"'groups' has {int(pd.isna(groups).sum())} missing value(s) (NaN or None): "
                "recipe='auto' holds out whole groups in its inner folds and needs the "
                "group (a subject or a block) of every window."
            )
        n_groups = 0 if groups is None else len(np.unique(groups))
        if n_groups < _MIN_GROUPS:
            logger.info(_fallback_message(n_groups, fixed))
            return None
        grid = fixed.candidates(encoder=encoder is not None)
        return [fixed, *(r for r in grid if r != fixed)]  # the incumbent first

    def _earn(self, fixed, features, y, groups):
        """The recipe :func:`~braindecode_pars.features.recipe.earn_blocks` admits on the
        labelled windows (band power alone where nothing can be compared); logs one line,
        at WARNING when a block is dropped without evidence."""
        if groups is None:
            groups = np.zeros(len(y), dtype=int)
        elif pd.isna(groups).any():
            raise ValueError(
                f"'groups' has {int(pd.isna(groups).sum())} missing value(s) (NaN or None): "
                "block_weights='auto' holds out whole groups (or parts of each group) in its "
                "inner folds and needs the group (a subject, a recording) of every window; "
                "pass groups=None to treat every window as one recording."
            )
        n_groups = len(pd.unique(groups))
        evidence = earn_blocks(
            fixed, features, y, groups, cv=self._evidence_folds(n_groups),
            random_state=self.random_state,
        )  # fmt: skip
        self.recipe_scores_ = evidence.scores
        self.inner_folds_ = None if evidence.folds is None else str(evidence.folds)
        for decision in evidence.decisions:
            if decision.block == "encoder" and decision.evidence:
                best = int(np.argmax(decision.gains))
                per_fold = 100 * decision.per_fold[best]
                self.encoder_gain_ = float(per_fold.mean())
                self.encoder_gain_std_ = float(per_fold.std())
        level = logging.INFO if evidence.compared else logging.WARNING
        logger.log(level, _evidence_message(evidence, n_groups))
        return evidence.recipe

    def _evidence_folds(self, n_groups):
        """The inner folds of ``block_weights="auto"``: ``inner_cv`` over three groups or
        more (a splitter given: always), else :class:`TimeParts`."""
        if not isinstance(self.inner_cv, str | numbers.Integral):  # a splitter: as given
            return self.inner_cv
        if n_groups >= _MIN_GROUPS:
            return inner_splitter(self.inner_cv, n_groups, name="inner_cv")
        return TimeParts(_recipe.TIME_PARTS)

    def _compare(self, candidates, features, y, groups, fixed):
        """The winner of the inner comparison (or ``fixed`` when too few groups could be
        left out); logs one line."""
        scores, folds = compare_recipes(
            candidates, features, y, groups, random_state=self.random_state,
            cv=inner_splitter(self.inner_cv, len(np.unique(groups)), name="inner_cv"),
            return_folds=True,
        )  # fmt: skip
        n_scored, n_groups = int(scores["n_groups"].max()), len(np.unique(groups))
        if n_scored < _MIN_GROUPS:
            why = f"the inner folds were {folds}"
            logger.info(_fallback_message(n_groups, fixed, why=why))
            return fixed
        chosen, best = choose_recipe(scores, candidates, folds.scores, incumbent=0)
        means = scores["mean"].to_numpy()
        has_encoder = np.array([r.encoder for r in candidates])
        gain = None
        if has_encoder.any() and (~has_encoder).any():
            with_ = int(np.flatnonzero(has_encoder)[np.argmax(means[has_encoder])])
            without = int(np.flatnonzero(~has_encoder)[np.argmax(means[~has_encoder])])
            per_fold = 100 * (folds.scores[with_] - folds.scores[without])
            self.encoder_gain_ = float(per_fold.mean())
            self.encoder_gain_std_ = float(per_fold.std())
            gain = _Gain(with_, without, per_fold)
        self.recipe_, self.recipe_scores_ = candidates[chosen], scores
        self.inner_folds_ = str(folds)
        logger.info(
            _comparison_message(scores, candidates, chosen, best, gain, folds, folds.scores)
        )
        return candidates[chosen]

    def _read(self, X, y=None, groups=None):
        check_is_fitted(self, "model_")
        return read_fitted(self, X, y, groups)

    def _proba(self, data):
        features = self.extractor_.transform(data.X)
        return self.model_.predict_proba(features, self._groups(data))

    def transform(self, X, groups=None):
        """The scaled features the logistic regression sees, shape (n_windows,
        n_features), the blocks in ``recipe_.blocks`` order."""
        data = self._read(X, groups=groups)
        return self.model_.transform(self.extractor_.transform(data.X), self._groups(data))

    def _groups(self, data):
        return None if self.align is None else data.groups


def _refuse_no_block():
    raise ValueError(
        "PARSProbe needs at least one block of features: 'encoder' is None (or "
        "'encoder_block' False) and 'band_power' and 'tangent_space' are both False."
    )


@dataclasses.dataclass(frozen=True)
class _Gain:
    """The encoder block's gain: the best candidates with and without it (indices) and
    the difference of their balanced accuracies in each inner fold, in points."""

    with_: int
    without: int
    per_fold: np.ndarray

    @property
    def sem(self):
        n = len(self.per_fold)
        return float(self.per_fold.std(ddof=1) / np.sqrt(n)) if n > 1 else math.nan


def _comparison_message(scores, recipes, chosen, best, gain, folds, fold_scores):
    """The one line the probe logs after a comparison: the folds as they ran, the
    encoder block's gain with its spread (and whether the folds can tell it from none),
    the best recipe, whether any beats the fixed recipe (the first, the incumbent) by
    more than a standard error, and the one fitted."""
    means, stds, sems = (scores[k].to_numpy() for k in ("mean", "std", "sem"))
    head = f"recipe='auto', inner comparison over {folds}: "
    if gain is None:
        what = "no encoder, so no encoder block to compare"
    else:
        mean, spread = gain.per_fold.mean(), gain.per_fold.std()
        verdict = (
            "more than one standard error: the inner folds tell recipes with and without it apart"
            if abs(mean) > gain.sem
            else "within one standard error: the inner folds cannot tell recipes with and "
            "without it apart"
        )
        what = (
            f"the encoder block adds {mean:+.1f} ± {spread:.1f} points of balanced "
            f"accuracy (mean ± std over the folds, standard error {gain.sem:.1f}; best "
            f"with: {recipes[gain.with_]}, {means[gain.with_]:.1%}; best without: "
            f"{recipes[gain.without]}, {means[gain.without]:.1%}), {verdict}"
        )
    top = f"best recipe: {recipes[best]}, {means[best]:.1%} ± {100 * stds[best]:.1f} points"
    fixed = f"the fixed recipe {recipes[0]} ({means[0]:.1%})"
    challengers = [i for i in range(1, len(recipes)) if beats(fold_scores[i], fold_scores[0])]
    if best == 0:
        choice = f"it is {fixed}, kept"
    elif not challengers:
        choice = (
            f"no recipe beats {fixed} by more than the standard error of its gain over "
            "it fold by fold, so the fixed recipe is kept"
        )
    else:
        top_challenger = max(challengers, key=lambda i: (means[i], -i))
        se = 100 * np.nan_to_num(sems[top_challenger])
        choice = (
            f"{len(challengers)} recipe(s) beat {fixed} by more than the standard error of "
            f"their gain over it fold by fold; of these, the simplest within one standard "
            f"error ({se:.1f} points) of their best: {recipes[chosen]} ({means[chosen]:.1%})"
        )
    return f"{head}{what}. The {top}; {choice}; fitted recipe {recipes[chosen]}."


def _evidence_message(evidence, n_groups):
    """The one line ``block_weights="auto"`` logs: the null's inner score, each block's
    gain over the blocks before it against the gain it had to exceed, and the recipe
    fitted; or, where nothing could be compared, that the null was fitted without
    evidence."""
    margin, delta = _recipe.WEIGHT_MARGIN_SE, _recipe.EVIDENCE_DELTA
    rule = (
        f"a block is fitted when its mean gain over the blocks before it exceeds {margin:g} "
        f"standard errors (over the folds, at least the held-out windows' binomial one) "
        f"and {100 * delta:g} points"
    )
    if not evidence.compared:
        dropped = ", ".join(d.block for d in evidence.decisions if not d.evidence)
        groups = f"{n_groups} group{'s' * (n_groups != 1)}"
        return (
            f"block_weights='auto' could not compare the blocks: the inner folds were "
            f"{evidence.folds}, fewer than {_recipe.MIN_SCORED_FOLDS} of them scored, on "
            f"{groups}. Fitted {evidence.recipe}, band power alone (the rule's null), and "
            f"dropped {dropped} without evidence. More labelled windows of each class (in "
            "time order within each group), or groups of three subjects or more, let the "
            "inner folds decide."
        )
    null_score = evidence.scores["mean"].iloc[0]
    parts = []
    for d in evidence.decisions:
        weights = "/".join(f"{w:g}" for w in d.weights)
        gains = "/".join(f"{100 * g:+.1f}" for g in d.gains)
        bars = "/".join(f"{100 * b:.1f}" for b in d.bars)
        at = f" at weight {weights}" if len(d.weights) > 1 else ""
        verdict = f"fitted at weight {d.weight:g}" if d.weight > 0 else "dropped"
        parts.append(f"{d.block}{at} {gains} points, needed more than {bars}: {verdict}")
    return (
        f"block_weights='auto', inner comparison over {evidence.folds}: "
        f"{evidence.null} scored {null_score:.1%}; " + "; ".join(parts) + f" ({rule}). "
        f"Fitted {evidence.recipe}."
    )


def _check_block_weights(value):
    """``block_weights``: None, "auto" or a dict of block names to weights >= 0."""
    if value is None or (isinstance(value, str) and value == "auto"):
        return
    if isinstance(value, Mapping):
        for name, weight in value.items():
            if name not in BLOCKS:
                raise ValueError(
                    f"Invalid key of the 'block_weights' parameter: the blocks are "
                    f"{', '.join(map(repr, BLOCKS))}, but got {name!r}."
                )
            ok = isinstance(weight, numbers.Real) and not isinstance(weight, bool)
            if not ok or not math.isfinite(weight) or weight < 0:
                raise ValueError(
                    f"Invalid value for the 'block_weights' parameter: the weight of "
                    f"{name!r} must be a finite number >= 0 (0 drops the block), but got "
                    f"{weight!r}."
                )
        return
    raise ValueError(
        "Invalid value for the 'block_weights' parameter: None (every block of the same "
        "total variance), 'auto' (the encoder block's weight chosen by inner folds over "
        f"the groups) or a dict of block names ({', '.join(BLOCKS)}) to weights >= 0, but "
        f"got {value!r}."
    )


def _fallback_message(n_groups, fixed, why=None):
    """The one line the probe logs when it could compare nothing."""
    hint = ""
    if why is None and n_groups == 0:
        why = "fit has no groups"
        hint = " Pass 'groups' (the subject of each window) to fit to compare recipes."
    elif why is None:
        why = f"fit has {n_groups} group{'s' * (n_groups != 1)}"
    why += f", fewer than the {_MIN_GROUPS} an inner comparison of recipes needs"
    return (
        f"Nothing could be compared ({why}): fitted the fixed recipe {fixed} (PARSProbe's "
        f"'encoder', 'band_power', 'tangent_space' and 'C').{hint}"
    )
