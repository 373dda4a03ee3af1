"""Aligning each group (a subject, a block of runs) on its own windows before the probe.

:func:`align_features` standardises features within each group,
:func:`align_covariances` re-centres each group's channel covariances on their
Riemannian mean; :class:`AlignedProbe` is :func:`~braindecode_pars.probe.probe_pipeline`
with both applied per group, at ``fit`` and at ``predict``. Transductive: a
window's prediction depends on the other windows of its group.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import accuracy_score
from sklearn.pipeline import make_pipeline
from sklearn.utils.validation import check_is_fitted

from .datasets.adapters import read_windows
from .probe import DEFAULT_READOUT, _block_scaling, _logistic, _raw_blocks
from .windows_input import WindowsInputMixin

#: A group of at least this many windows is aligned on its own windows alone; a group
#: of ``n`` fewer is aligned on statistics shrunk toward the reference of the training
#: groups, with weight ``n / ALIGN_MIN_WINDOWS`` on its own (:func:`align_features`,
#: :func:`align_covariances`).
ALIGN_MIN_WINDOWS = 8


def _riemann():
    try:
        from pyriemann.geometry.base import invsqrtm
        from pyriemann.geometry.geodesic import geodesic_riemann
        from pyriemann.geometry.mean import mean_riemann
    except ImportError:  # pyriemann < 0.12
        from pyriemann.utils.base import invsqrtm
        from pyriemann.utils.geodesic import geodesic_riemann
        from pyriemann.utils.mean import mean_riemann
    return invsqrtm, geodesic_riemann, mean_riemann


def _large_groups(groups):
    """The groups of at least :data:`ALIGN_MIN_WINDOWS` windows."""
    values, counts = np.unique(groups, return_counts=True)
    return values[counts >= ALIGN_MIN_WINDOWS]


def _refuse_small_group(groups, name="groups"):
    values, counts = np.unique(groups, return_counts=True)
    small = values[counts < ALIGN_MIN_WINDOWS]
    raise ValueError(
        f"'{name}' has {len(small)} group(s) of fewer than ALIGN_MIN_WINDOWS="
        f"{ALIGN_MIN_WINDOWS} windows ({small[:5].tolist()}{'...' if len(small) > 5 else ''}) "
        "and no reference to shrink them toward: pass 'reference' (the training groups' "
        "statistics), or the windows of a group together."
    )


def feature_reference(F, groups):
    """The statistics a small group's features are shrunk toward: the mean over the
    groups of at least :data:`ALIGN_MIN_WINDOWS` windows of their per-feature means and
    of their per-feature variances.

    Returns
    -------
    reference : tuple of ndarray, (mean, variance), each shape (n_features,)
    """
    F = np.asarray(F, dtype=np.float64)
    large = _large_groups(groups)
    if not len(large):
        _refuse_small_group(groups)
    rows = [F[groups == g] for g in large]
    return np.mean([r.mean(axis=0) for r in rows], axis=0), np.mean(
        [r.var(axis=0) for r in rows], axis=0
    )


def align_features(F, groups, reference=None):
    """Each feature standardised within each group: zero mean, unit standard deviation
    over the group's rows (a feature constant in a group is only centred there).

    A group of ``n`` < :data:`ALIGN_MIN_WINDOWS` windows (a few windows predicted on
    their own) is standardised with ``w * its mean + (1 - w) * the reference mean``
    and the same mix of the variances, ``w = n / ALIGN_MIN_WINDOWS``: one window alone
    is mostly placed by the training groups' statistics.

    Parameters
    ----------
    F : ndarray, shape (n_windows, n_features)
    groups : ndarray, shape (n_windows,)
    reference : tuple of ndarray | None
        ``(mean, variance)`` of :func:`feature_reference` on the training groups;
        needed only when a group is smaller than :data:`ALIGN_MIN_WINDOWS`.

    Returns
    -------
    aligned : ndarray, shape (n_windows, n_features), float64
    """
    F = np.asarray(F, dtype=np.float64)
    out = np.empty_like(F)
    for g in np.unique(groups):
        rows = groups == g
        block = F[rows]
        mean, var = block.mean(axis=0), block.var(axis=0)
        n = len(block)
        if n < ALIGN_MIN_WINDOWS:
            if reference is None:
                _refuse_small_group(groups)
            w = n / ALIGN_MIN_WINDOWS
            mean = w * mean + (1 - w) * reference[0]
            var = w * var + (1 - w) * reference[1]
        std = np.sqrt(var)
        out[rows] = (block - mean) / np.where(std > 0, std, 1.0)
    return out


def covariance_reference(C, groups):
    """The matrix a small group's covariances are re-centred toward: the Riemannian
    mean of the Riemannian means of the groups of at least :data:`ALIGN_MIN_WINDOWS`
    windows.

    Returns
    -------
    reference : ndarray, shape (n_chans, n_chans)
    """
    _, _, mean_riemann = _riemann()
    C = np.asarray(C, dtype=np.float64)
    large = _large_groups(groups)
    if not len(large):
        _refuse_small_group(groups)
    return mean_riemann(np.stack([mean_riemann(C[groups == g]) for g in large]))


def align_covariances(C, groups, reference=None):
    """Riemannian re-centring: each group's covariances moved so that their Riemannian
    mean is the identity, ``M^{-1/2} C M^{-1/2}`` with ``M`` the group's mean (Zanini
    et al., IEEE TBME 65(5), 2018).

    A group of ``n`` < :data:`ALIGN_MIN_WINDOWS` windows is re-centred on the point
    at ``w = n / ALIGN_MIN_WINDOWS`` of the geodesic from ``reference`` to its own
    mean: ``R^{1/2} (R^{-1/2} M R^{-1/2})^w R^{1/2}``.

    Parameters
    ----------
    C : ndarray, shape (n_windows, n_chans, n_chans)
        Symmetric positive definite matrices.
    groups : ndarray, shape (n_windows,)
    reference : ndarray, shape (n_chans, n_chans) | None
        :func:`covariance_reference` of the training groups; needed only when a group
        is smaller than :data:`ALIGN_MIN_WINDOWS`.

    Returns
    -------
    aligned : ndarray, shape (n_windows, n_chans, n_chans)
    """
    invsqrtm, geodesic_riemann, mean_riemann = _riemann()
    C = np.asarray(C, dtype=np.float64)
    out = np.empty_like(C)
    for g in np.unique(groups):
        rows = groups == g
        M = mean_riemann(C[rows])
        n = int(rows.sum())
        if n < ALIGN_MIN_WINDOWS:
            if reference is None:
                _refuse_small_group(groups)
            M = geodesic_riemann(reference, M, n / ALIGN_MIN_WINDOWS)
        W = invsqrtm(M)
        out[rows] = W @ C[rows] @ W
    return out


class AlignedProbe(WindowsInputMixin, ClassifierMixin, BaseEstimator):
    """The probe of :func:`probe_pipeline`, with every group's features aligned to the
    group itself before the model sees them.

    EEG differs more between people (and between sessions of one person) than between
    the conditions a task compares: skull, electrode contact and amplitude move every
    feature of a subject together. Here each **group** (a subject, or a block of runs)
    is put on a common footing with its own windows, labels unused: the encoder's and
    the band-power features are standardised within the group (:func:`align_features`),
    and its channel covariances are re-centred so that their Riemannian mean is the
    identity (:func:`align_covariances`) before the tangent space. The scaling per
    block (:class:`BlockScaler`) and the class-balanced logistic regression follow, as
    in :func:`probe_pipeline`.

    So a prediction depends on the other windows of its group: ``predict(X, groups)``
    aligns each group of ``X`` on its own windows (``groups=None``: all of ``X`` is
    one group, e.g. the held-out subject of a leave-one-subject-out fold). A group
    should hold the conditions in roughly the proportions the task has (a group of
    one class only is centred on that class). A group of fewer than
    :data:`ALIGN_MIN_WINDOWS` windows (a few windows predicted on their own) is
    aligned on statistics shrunk toward those of the training groups (``references_``),
    a single window mostly on the latter; ``fit`` needs at least one group of
    :data:`ALIGN_MIN_WINDOWS` windows or more.

    Parameters
    ----------
    encoder, sfreq, band_power, bands, tangent_space, C, random_state, batch_size, \
device, readout
        As :func:`probe_pipeline`.

    Attributes
    ----------
    blocks_ : list of str
        The feature blocks, of ``"encoder"``, ``"bandpower"``, ``"tangentspace"``.
    feature_steps_ : list of (str, transformer, str)
        Each block's fitted transformer of windows into raw features, and its kind
        (``"features"`` or ``"covariances"``).
    references_ : list
        Each block's reference of the training groups (:func:`feature_reference` or
        :func:`covariance_reference`), toward which small groups are shrunk.
    scalers_ : list of Pipeline
        Each block's fitted scaling (after the tangent space for the covariances).
    sfreq_ : float
        The sampling rate of the windows seen in ``fit``.
    classes_ : ndarray
    logisticregression_ : LogisticRegression

    Examples
    --------
    Two subjects whose amplitudes differ tenfold; the class doubles the amplitude
    within each. Trained on one, the other is scored:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = np.tile([0, 1], 20)
    >>> def subject(scale):
    ...     return scale * rng.standard_normal((40, 2, 400)) * (1 + y[:, None, None])
    >>> probe = AlignedProbe(None, sfreq=100).fit(subject(1.0), y, groups=np.zeros(40))
    >>> float(probe.score(subject(10.0), y))
    1.0
    """

    # under metadata routing, ``score`` asks for the scored windows' groups
    __metadata_request__score = {"groups": True}

    def __init__(
        self,
        encoder="pars-small",
        *,
        sfreq=None,
        band_power=True,
        bands=None,
        tangent_space=False,
        C=1.0,
        random_state=None,
        batch_size=256,
        device="cpu",
        readout=DEFAULT_READOUT,
    ):
        self.encoder = encoder
        self.sfreq = sfreq
        self.band_power = band_power
        self.bands = bands
        self.tangent_space = tangent_space
        self.C = C
        self.random_state = random_state
        self.batch_size = batch_size
        self.device = device
        self.readout = readout

    def _feature_steps(self, sfreq):
        """(name, transformer of windows into raw features, kind) of each block."""
        raw = _raw_blocks(
            "AlignedProbe", self.encoder, sfreq, self.band_power, self.bands,
            self.tangent_space, self.batch_size, self.device, readout=self.readout,
        )  # fmt: skip
        return [(name, make_pipeline(*steps), kind) for name, steps, kind in raw]

    @staticmethod
    def _groups(groups, n, name="groups", fit=False):
        if groups is None:
            groups = np.zeros(n, dtype=np.int64)
        groups = np.asarray(groups)
        missing = pd.isna(groups) if groups.ndim == 1 else np.zeros(0, dtype=bool)
        if missing.any():
            raise ValueError(
                f"'{name}' has {int(missing.sum())} missing value(s) (NaN or None): every "
                "window needs its group (a subject or a block) to be aligned."
            )
        if groups.shape != (n,):
            raise ValueError(
                f"'{name}' must give one group per window: {n} windows, {groups.shape[0]} groups."
                if groups.ndim == 1
                else f"'{name}' must be 1-D, one group per window; got shape {groups.shape}."
            )
        if fit and not len(_large_groups(groups)):
            counts = np.unique(groups, return_counts=True)[1]
            raise ValueError(
                f"AlignedProbe aligns each group on its own windows and, to fit, needs "
                f"at least one group of ALIGN_MIN_WINDOWS={ALIGN_MIN_WINDOWS} windows or "
                f"more (the reference smaller groups are shrunk toward); '{name}' has "
                f"{len(counts)} group(s), the largest of {counts.max()} windows. Pass "
                "the subject or block of each window, or use the unaligned probe "
                "(probe_pipeline, or PARSProbe() whose default is align=None)."
            )
        return groups

    def _aligned(self, raws, groups):
        """Each block's raw features ``raws`` aligned within ``groups``, a group smaller
        than :data:`ALIGN_MIN_WINDOWS` shrunk toward ``references_``."""
        return [
            (align_covariances if kind == "covariances" else align_features)(raw, groups, ref)
            for (_, _, kind), raw, ref in zip(
                self.feature_steps_, raws, self.references_, strict=True
            )
        ]

    def _read(self, X, y=None, groups=None, fitted=False, fit=False):
        """(windows array, labels, groups) of ``X``; groups None: the windows' own
        (the ``subject`` of braindecode windows), else one group."""
        windows = read_windows(X, y, groups, sfreq=self.sfreq_ if fitted else self.sfreq, name="X")
        sfreq = windows.sfreq if windows.sfreq is not None else self.sfreq
        if sfreq is None:
            raise ValueError(
                "'sfreq' is None and the windows do not carry their sampling rate: set "
                "'sfreq' for array input."
            )
        data = np.asarray(X if isinstance(X, np.ndarray) else windows.X)
        return data, windows.y, self._groups(windows.groups, len(data), fit=fit), float(sfreq)

    def fit(self, X, y=None, groups=None):
        """Compute the features, align each group of ``groups`` (None: one group),
        fit the scalers and the logistic regression.

        Parameters
        ----------
        X : windows, as :func:`probe_pipeline` takes them
        y : array-like, shape (n_windows,) | None
            Labels; None: read from the windows.
        groups : array-like, shape (n_windows,) | None
            The subject (or block) of each window.

        Returns
        -------
        self : AlignedProbe
        """
        data, y, groups, self.sfreq_ = self._read(X, y, groups, fit=True)
        if y is None:
            raise ValueError("Labels are missing: pass 'y', or windows that carry their targets.")
        steps = self._feature_steps(self.sfreq_)
        return self._fit_features(
            steps, [step.fit_transform(data) for _, step, _ in steps], y, groups
        )

    def _fit_features(self, steps, raws, y, groups):
        """The fit from each block's fitted steps of :meth:`_feature_steps` (``steps``) and
        the raw features of the training windows they gave (``raws``): the references,
        the alignment, the scalers and the logistic regression. ``sfreq_`` is set."""
        y = np.asarray(y)
        if all(len(np.unique(y[groups == g])) == 1 for g in np.unique(groups)):
            warnings.warn(
                "Every group of 'groups' holds a single class: aligning each group on "
                "itself removes the differences between groups, which is all these labels "
                "vary with (a trait of the subject). Use the unaligned probe "
                "(probe_pipeline, or PARSProbe(align=None)).",
                UserWarning,
                stacklevel=3,
            )
        self.feature_steps_ = steps
        self.references_ = [
            (covariance_reference if kind == "covariances" else feature_reference)(raw, groups)
            for (_, _, kind), raw in zip(steps, raws, strict=True)
        ]
        self.scalers_ = []
        features = []
        for (_, _, kind), F in zip(steps, self._aligned(raws, groups), strict=True):
            scaler = make_pipeline(*_block_scaling(kind))
            features.append(scaler.fit_transform(F))
            self.scalers_.append(scaler)
        self.blocks_ = [name for name, _, _ in steps]
        self.logisticregression_ = _logistic(self.C, self.random_state).fit(
            np.hstack(features), np.asarray(y)
        )
        self.classes_ = self.logisticregression_.classes_
        return self

    def transform(self, X, groups=None):
        """The aligned, scaled features the logistic regression sees, shape
        (n_windows, n_features), blocks in ``blocks_`` order."""
        check_is_fitted(self, "logisticregression_")
        data, _, groups, _ = self._read(X, groups=groups, fitted=True)
        return self._scaled(data, groups)

    def _scaled(self, data, groups):
        blocks = self._aligned([step.transform(data) for _, step, _ in self.feature_steps_], groups)
        return np.hstack(
            [scaler.transform(F) for F, scaler in zip(blocks, self.scalers_, strict=True)]
        )

    def predict_proba(self, X, groups=None):
        """Class probabilities, columns in ``classes_`` order."""
        return self.logisticregression_.predict_proba(self.transform(X, groups))

    def predict(self, X, groups=None):
        """Predicted labels."""
        return self.logisticregression_.predict(self.transform(X, groups))

    def score(self, X, y=None, sample_weight=None, groups=None):
        """Accuracy; labels read from the windows when ``y`` is None."""
        check_is_fitted(self, "logisticregression_")
        data, y, groups, _ = self._read(X, y, groups, fitted=True)
        if y is None:
            raise ValueError("Labels are missing: pass 'y', or windows that carry their targets.")
        predicted = self.logisticregression_.predict(self._scaled(data, groups))
        return accuracy_score(np.asarray(y), predicted, sample_weight=sample_weight)
