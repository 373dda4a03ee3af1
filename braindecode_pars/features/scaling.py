"""What the probe does to each block's raw features before the regression.

- :class:`BlockScaler`: each feature standardised, the block then scaled to a total
  variance of 1;
- group alignment (transductive, labels unused): :class:`AlignFeatures` standardises
  each feature within each group (a subject, a block of runs), :class:`AlignCovariances`
  re-centres each group's covariances on the identity (Zanini et al., IEEE TBME 65(5),
  2018), and :class:`AlignSignals` whitens each group's windows themselves (Euclidean
  alignment, He and Wu, IEEE TBME 67(2), 2020; the fine-tuner's ``align``). Each
  takes ``groups`` in ``fit`` and ``transform``; a group of fewer than
  :data:`ALIGN_MIN_WINDOWS` windows is aligned on statistics shrunk toward those of
  the training groups.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from braindecode_pars._util.logs import warn_once

#: A group of at least this many windows is aligned on its own windows alone; a group
#: of ``n`` fewer on statistics shrunk toward the reference of the training groups,
#: with weight ``n / ALIGN_MIN_WINDOWS`` on its own.
ALIGN_MIN_WINDOWS = 8

#: Columns a :class:`BlockScaler` fits at a time on a wider array.
_FIT_COLUMNS = 128


class BlockScaler(StandardScaler):
    """Standardise each feature, then divide the block by the square root of its number
    of varying features ``p`` (those of nonzero variance on the fitted windows), so that
    a block of any width has a total variance of 1: ``z_j = (x_j - mean_j) / std_j /
    sqrt(p)``. Parameters as :class:`~sklearn.preprocessing.StandardScaler`.

    Attributes
    ----------
    n_varying_ : int
        ``p``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((200, 16)) * 5 + 3
    >>> Z = BlockScaler().fit_transform(X)
    >>> round(float(Z.var(axis=0).sum()), 6)
    1.0
    """

    def fit(self, X, y=None, sample_weight=None):
        if isinstance(X, np.ndarray) and X.ndim == 2 and X.shape[1] > _FIT_COLUMNS:
            self._fit_by_columns(X, y, sample_weight)
        else:
            super().fit(X, y, sample_weight)
        self.n_varying_ = int(np.count_nonzero(self.var_ > 0)) if self.with_std else X.shape[1]
        return self

    def _fit_by_columns(self, X, y, sample_weight):
        """:class:`~sklearn.preprocessing.StandardScaler`'s fit, :data:`_FIT_COLUMNS`
        columns at a time: each feature's mean and variance are its column's alone (the
        same figures as one fit), and what the fit holds beside ``X`` (its float64
        deviations from the mean, and a float64 copy of the NaN mask) is that many
        columns wide, not as wide as ``X`` (11 MiB each for the encoder block of 600
        windows of 19 channels)."""
        params = {k: getattr(self, k) for k in ("copy", "with_mean", "with_std")}
        parts = [
            StandardScaler(**params).fit(X[:, start : start + _FIT_COLUMNS], y, sample_weight)
            for start in range(0, X.shape[1], _FIT_COLUMNS)
        ]
        for name in ("mean_", "var_", "scale_"):
            values = [getattr(part, name) for part in parts]
            setattr(self, name, None if values[0] is None else np.concatenate(values))
        # one count per feature where NaNs make them differ, else one count (sklearn's)
        seen = np.concatenate(
            [np.broadcast_to(part.n_samples_seen_, part.n_features_in_) for part in parts]
        )
        self.n_samples_seen_ = seen if np.ptp(seen) else seen[0]
        self.n_features_in_ = X.shape[1]

    def _factor(self):
        return np.sqrt(max(self.n_varying_, 1))

    def transform(self, X, copy=None):
        out = super().transform(X, copy=copy)
        out /= self._factor()  # in place: no second copy of a wide block
        return out

    def _transform_into(self, X, out):
        """:meth:`transform` of ``X`` written into ``out`` (an array of its shape,
        e.g. a block's columns of a larger matrix), in place: no scaled copy of ``X``
        is made. Returns ``out``."""
        out[...] = X
        scaled = self.transform(out, copy=False)  # in place on out's memory
        if not np.shares_memory(scaled, out):
            out[...] = scaled
        return out

    def inverse_transform(self, X, copy=None):
        return super().inverse_transform(np.asarray(X) * self._factor(), copy=copy)


def _riemann():
    from pyriemann.geometry.base import invsqrtm
    from pyriemann.geometry.geodesic import geodesic_riemann
    from pyriemann.geometry.mean import mean_riemann

    return invsqrtm, geodesic_riemann, mean_riemann


def _large_groups(groups):
    """The groups of at least :data:`ALIGN_MIN_WINDOWS` windows."""
    values, counts = np.unique(groups, return_counts=True)
    return values[counts >= ALIGN_MIN_WINDOWS]


def _check_groups(groups, n, fit=False):
    """``groups`` as an array of one group per window (None: one group); in ``fit`` at
    least one group of :data:`ALIGN_MIN_WINDOWS` windows is needed (the reference)."""
    if groups is None:
        groups = np.zeros(n, dtype=np.int64)
    groups = np.asarray(groups)
    missing = pd.isna(groups) if groups.ndim == 1 else np.zeros(0, dtype=bool)
    if missing.any():
        raise ValueError(
            f"'groups' has {int(missing.sum())} missing value(s) (NaN or None): every "
            "window needs its group (a subject or a block) to be aligned."
        )
    if groups.shape != (n,):
        raise ValueError(
            f"'groups' must give one group per window: {n} windows, {groups.shape[0]} groups."
            if groups.ndim == 1
            else f"'groups' must be 1-D, one group per window; got shape {groups.shape}."
        )
    if fit and not len(_large_groups(groups)):
        counts = np.unique(groups, return_counts=True)[1]
        raise ValueError(
            "Aligning each group on its own windows needs, to fit, at least one group of "
            f"ALIGN_MIN_WINDOWS={ALIGN_MIN_WINDOWS} windows or more (the reference smaller "
            f"groups are shrunk toward); 'groups' has {len(counts)} group(s), the largest "
            f"of {counts.max()} windows. Pass the subject or block of each window, or use "
            "the unaligned probe (PARSProbe's default, align=None)."
        )
    return groups


def check_align_groups(align, data):
    """``align="groups"`` at ``fit``: the groups checked (one per window, one group of
    at least ``ALIGN_MIN_WINDOWS`` windows), and a warning when there are none (the
    training windows are then aligned as one group)."""
    if align is None:
        return
    _check_groups(data.groups, len(data), fit=True)
    if data.groups is None:
        warn_once(
            "align='groups' but fit has no groups: the training windows are aligned "
            "as one group. Pass 'groups' (the subject of each window) to fit, e.g. "
            "cross_val_score(clf, X, y, groups=g, params={'groups': g}), or "
            "braindecode windows with a 'subject' column.",
            UserWarning,
            stacklevel=3,
        )


class _GroupAligner(TransformerMixin, BaseEstimator):
    """``fit(F, groups=)`` keeps the training groups' reference; ``transform(F,
    groups=)`` aligns each group of ``F`` on its own windows (``groups=None``: one
    group). ``fit_transform`` aligns the training windows as ``transform`` would."""

    def fit(self, X, y=None, groups=None):
        X = np.asarray(X, dtype=np.float64)
        groups = _check_groups(groups, len(X), fit=True)
        rows = [X[groups == g] for g in _large_groups(groups)]
        self.reference_ = self._reference(rows)
        return self

    def transform(self, X, groups=None):
        check_is_fitted(self, "reference_")
        X = np.asarray(X, dtype=np.float64)
        groups = _check_groups(groups, len(X))
        out = np.empty_like(X)
        for g in np.unique(groups):
            rows = groups == g
            out[rows] = self._align(X[rows], self.reference_)
        return out

    def fit_transform(self, X, y=None, groups=None):
        return self.fit(X, y, groups).transform(X, groups)


class AlignFeatures(_GroupAligner):
    """Each feature standardised within each group: zero mean, unit standard deviation
    over the group's rows (a feature constant in a group is only centred there).

    A group of ``n`` < :data:`ALIGN_MIN_WINDOWS` windows is standardised with ``w * its
    mean + (1 - w) * the reference mean`` and the same mix of the variances, ``w = n /
    ALIGN_MIN_WINDOWS``; the reference (``reference_``, a (mean, variance) pair) is the
    mean over the training groups of at least :data:`ALIGN_MIN_WINDOWS` windows of their
    per-feature means and variances.

    Examples
    --------
    >>> import numpy as np
    >>> F = np.arange(16.0)[:, None] * [1, 10]
    >>> aligned = AlignFeatures().fit_transform(F, groups=np.repeat([0, 1], 8))
    >>> bool(np.allclose(aligned[:8], aligned[8:]))
    True
    """

    @staticmethod
    def _reference(rows):
        return (
            np.mean([r.mean(axis=0) for r in rows], axis=0),
            np.mean([r.var(axis=0) for r in rows], axis=0),
        )

    @staticmethod
    def _align(block, reference):
        mean, var = block.mean(axis=0), block.var(axis=0)
        n = len(block)
        if n < ALIGN_MIN_WINDOWS:
            w = n / ALIGN_MIN_WINDOWS
            mean = w * mean + (1 - w) * reference[0]
            var = w * var + (1 - w) * reference[1]
        std = np.sqrt(var)
        return (block - mean) / np.where(std > 0, std, 1.0)


class AlignCovariances(_GroupAligner):
    """Riemannian re-centring: each group's covariances moved so that their Riemannian
    mean is the identity, ``M^{-1/2} C M^{-1/2}`` with ``M`` the group's mean.

    A group of ``n`` < :data:`ALIGN_MIN_WINDOWS` windows is re-centred on the point at
    ``w = n / ALIGN_MIN_WINDOWS`` of the geodesic from the reference to its own mean,
    ``R^{1/2} (R^{-1/2} M R^{-1/2})^w R^{1/2}``; the reference ``R`` (``reference_``) is
    the Riemannian mean of the Riemannian means of the training groups of at least
    :data:`ALIGN_MIN_WINDOWS` windows.
    """

    @staticmethod
    def _reference(rows):
        _, _, mean_riemann = _riemann()
        return mean_riemann(np.stack([mean_riemann(r) for r in rows]))

    @staticmethod
    def _align(block, reference):
        invsqrtm, geodesic_riemann, mean_riemann = _riemann()
        M = mean_riemann(block)
        if len(block) < ALIGN_MIN_WINDOWS:
            M = geodesic_riemann(reference, M, len(block) / ALIGN_MIN_WINDOWS)
        W = invsqrtm(M)
        return W @ block @ W


def _mean_covariance(windows):
    """The mean over windows (n, C, T) of ``X X^T / T``, each channel centred within its
    window; float64, accumulated a window at a time (no float64 copy of the windows)."""
    total = np.zeros((windows.shape[1],) * 2)
    for window in windows:
        centred = window - window.mean(axis=1, keepdims=True, dtype=np.float64)
        total += centred @ centred.T
    return total / (len(windows) * windows.shape[2])


def _inverse_sqrt(matrix, floor=1e-6):
    """``matrix^{-1/2}`` of a symmetric positive semi-definite matrix; eigenvalues under
    ``floor`` times their mean are raised to it (a rank-deficient montage, such as one
    re-referenced to the average, is whitened on its signal's subspace without dividing
    by zero)."""
    values, vectors = np.linalg.eigh(matrix)
    values = np.maximum(values, floor * max(values.mean(), np.finfo(float).tiny))
    return (vectors / np.sqrt(values)) @ vectors.T


class AlignSignals(_GroupAligner):
    """Euclidean alignment of multi-channel windows (He and Wu, IEEE TBME 67(2), 2020):
    each group's windows multiplied by ``M^{-1/2}``, ``M`` the arithmetic mean of the
    group's spatial covariances (each channel centred within its window), so that every
    group's windows have the identity as their mean covariance. Labels are not read.

    ``X`` is an array (n_windows, n_chans, n_times); the result has its dtype. A group
    of ``n`` < :data:`ALIGN_MIN_WINDOWS` windows is aligned on ``w M + (1 - w) R``,
    ``w = n / ALIGN_MIN_WINDOWS``, with ``R`` (``reference_``) the mean of the
    training groups' ``M`` over the groups of at least :data:`ALIGN_MIN_WINDOWS` windows.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((16, 3, 200)) * np.array([1.0, 10.0, 100.0])[:, None]
    >>> aligned = AlignSignals().fit_transform(X, groups=np.repeat([0, 1], 8))
    >>> C = np.mean([w @ w.T / 200 for w in aligned[:8] - aligned[:8].mean(2, keepdims=True)], 0)
    >>> bool(np.allclose(C, np.eye(3)))
    True
    """

    def fit(self, X, y=None, groups=None):
        self._fit(X, groups)
        return self

    def _fit(self, X, groups):
        """``reference_`` from the groups of at least :data:`ALIGN_MIN_WINDOWS` windows;
        returns ``X`` and ``groups`` checked and those groups' mean covariances."""
        X = _check_signals(X)
        groups = _check_groups(groups, len(X), fit=True)
        covariances = {g: _mean_covariance(X[groups == g]) for g in _large_groups(groups)}
        self.reference_ = np.mean(list(covariances.values()), axis=0)
        return X, groups, covariances

    def fit_transform(self, X, y=None, groups=None):
        """``fit`` and ``transform`` of the same windows, each group's covariance
        computed once."""
        return self._whiten(*self._fit(X, groups))

    def transform(self, X, groups=None):
        check_is_fitted(self, "reference_")
        X = _check_signals(X)
        if X.shape[1] != len(self.reference_):
            raise ValueError(
                f"'X' has {X.shape[1]} channels, but AlignSignals was fitted on "
                f"{len(self.reference_)}."
            )
        return self._whiten(X, _check_groups(groups, len(X)), {})

    def _whiten(self, X, groups, covariances):
        """Each group of ``X`` whitened by its mean covariance (``covariances[g]`` where
        given, else computed), shrunk toward ``reference_`` for a small group."""
        out = np.empty_like(X)
        for g in np.unique(groups):
            rows = np.flatnonzero(groups == g)
            M = covariances[g] if g in covariances else _mean_covariance(X[rows])
            if len(rows) < ALIGN_MIN_WINDOWS:
                w = len(rows) / ALIGN_MIN_WINDOWS
                M = w * M + (1 - w) * self.reference_
            W = _inverse_sqrt(M).astype(X.dtype)
            for i in rows:
                np.matmul(W, X[i], out=out[i])
        return out


def _check_signals(X):
    X = np.asarray(X)
    if X.ndim != 3 or not np.issubdtype(X.dtype, np.floating):
        raise ValueError(
            "AlignSignals aligns windows: 'X' must be a float array (n_windows, n_chans, "
            f"n_times), but got {X.dtype} of shape {X.shape}."
        )
    return X
