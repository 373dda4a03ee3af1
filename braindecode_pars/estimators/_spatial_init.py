"""Where the fine-tuner's spatial filters start (``PARSFineTuner(spatial_init=...)``):
common spatial patterns computed from the training windows of each fit, so that the
initialisation is safe inside cross-validation."""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh

#: Values of ``PARSFineTuner(spatial_init=...)``.
SPATIAL_INITS = ("identity", "csp")

#: Shrinkage of the class covariances towards a multiple of the identity (their mean
#: eigenvalue), so that 15-30 windows of 64 channels give well-posed eigenproblems.
_SHRINKAGE = 0.1


def _band_limited(X, sfreq, band):
    """``X`` band-passed to ``band`` (zero-phase 4th-order Butterworth), or as it is."""
    if band is None:
        return X
    from scipy.signal import butter, sosfiltfilt

    low, high = band
    high = min(high, 0.99 * sfreq / 2)
    sos = butter(4, [low, high], btype="bandpass", fs=sfreq, output="sos")
    return sosfiltfilt(sos, X, axis=-1)


def _class_covariances(X, y):
    """Each class's mean trace-normalised spatial covariance, shrunk (float64)."""
    X = np.asarray(X, dtype=np.float64)
    X = X - X.mean(-1, keepdims=True)
    covs = np.einsum("nct,ndt->ncd", X, X) / X.shape[-1]
    traces = np.trace(covs, axis1=1, axis2=2)
    covs = covs / np.maximum(traces, np.finfo(float).tiny)[:, None, None]
    n_chans = X.shape[1]
    out = []
    for c in np.unique(y):
        C = covs[y == c].mean(0)
        out.append((1 - _SHRINKAGE) * C + _SHRINKAGE * np.trace(C) / n_chans * np.eye(n_chans))
    return out


def csp_filters(X, y, n_filters, sfreq=None, band=None):
    """Common spatial patterns' filters: (n_filters, n_chans), unit L2 norm each.

    Two classes: the generalised eigenvectors of (C_1, C_1 + C_2), taken from both ends
    of the spectrum in turn (the largest variance ratio for one class, then for the
    other). More classes: one class against the rest for each class, each class's
    eigenvectors ordered by how far their ratio lies from one half, taken round-robin
    over the classes and skipping a filter nearly parallel (|cos| > 0.99) to one taken.

    Parameters
    ----------
    X : array, shape (n_windows, n_chans, n_times)
    y : array of class codes, shape (n_windows,)
    n_filters : int
        At most ``n_chans``.
    sfreq : float | None
    band : (low, high) | None
        Band-pass the windows to this band first (needs ``sfreq``).
    """
    n_chans = X.shape[1]
    if n_filters > n_chans:
        raise ValueError(
            f"'spatial_filters'={n_filters} with spatial_init='csp' must be at most the "
            f"number of channels ({n_chans})."
        )
    y = np.asarray(y)
    covs = _class_covariances(_band_limited(X, sfreq, band), y)
    if len(covs) < 2:
        raise ValueError("spatial_init='csp' needs windows of at least two classes.")
    if len(covs) == 2:
        _, vectors = eigh(covs[0], covs[0] + covs[1])  # eigenvalues ascending
        order = []
        low, high = 0, n_chans - 1
        while low <= high:
            order.append(high)
            if low != high:
                order.append(low)
            high, low = high - 1, low + 1
        filters = vectors[:, order[:n_filters]].T
    else:
        per_class = []
        for c, C in enumerate(covs):
            rest = np.mean([D for d, D in enumerate(covs) if d != c], axis=0)
            values, vectors = eigh(C, C + rest)
            order = np.argsort(-np.abs(values - 0.5))
            per_class.append([vectors[:, i] for i in order])
        filters = []
        for rank in range(n_chans):
            for vectors in per_class:
                w = vectors[rank] / np.linalg.norm(vectors[rank])
                if all(abs(w @ f) < 0.99 for f in filters):
                    filters.append(w)
                if len(filters) == n_filters:
                    break
            if len(filters) == n_filters:
                break
        filters = np.asarray(filters)
    return filters / np.linalg.norm(filters, axis=1, keepdims=True)
