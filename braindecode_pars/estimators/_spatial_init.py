"""Where the fine-tuner's spatial filters start (``PARSFineTuner(spatial_init=...)``):
common spatial patterns computed by MNE from the training windows of each fit, so that
the initialisation is safe inside cross-validation."""

from __future__ import annotations

import numpy as np

from braindecode_pars._util.bands import iir_band_pass

#: Values of ``PARSFineTuner(spatial_init=...)``.
SPATIAL_INITS = ("identity", "csp")

#: Shrinkage of each window's covariance towards a multiple of the identity (its mean
#: eigenvalue), MNE's ``CSP(reg=...)``, so that 15-30 windows of 64 channels give
#: well-posed eigenproblems.
_SHRINKAGE = 0.1


def _unit_power(X):
    """``X`` in float64, each window's channels centred and the window scaled to a
    summed channel variance of 1 (its spatial covariance's trace), so that every
    window weighs the same in its class's covariance whatever its amplitude."""
    X = np.asarray(X, dtype=np.float64)
    X = X - X.mean(-1, keepdims=True)
    power = np.einsum("nct,nct->n", X, X) / X.shape[-1]
    return X / np.sqrt(np.maximum(power, np.finfo(float).tiny))[:, None, None]


def csp_filters(X, y, n_filters, sfreq=None, band=None):
    """Common spatial patterns' filters, computed by MNE's :class:`mne.decoding.CSP`.

    Each window is band-passed to ``band`` (a zero-phase 4th-order Butterworth, MNE's
    ``filter_data``), centred and scaled to a spatial covariance of trace 1; then
    ``mne.decoding.CSP(n_components=n_filters, reg=0.1, cov_est="epoch",
    norm_trace=True, rank="full", component_order=...)`` is fitted: each window's
    covariance shrunk by 0.1 towards its mean eigenvalue times the identity
    (scikit-learn's ``ShrunkCovariance``), averaged per class, and

    - two classes: the generalised eigenvectors of ``(C_1, C_1 + C_2)``,
      ``component_order="alternate"``: the largest eigenvalue's (the largest variance
      ratio for the first class), the smallest's (for the second), the second largest's,
      and so on;
    - more classes: MNE's approximate joint diagonalisation of the class covariances
      (Pham's algorithm), its components ordered by their mutual information with the
      classes (``component_order="mutual_info"``).

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times)
        The training windows (any unit: each window is scaled).
    y : ndarray, shape (n_windows,)
        Class codes, at least two distinct.
    n_filters : int
        The number of filters, at most ``n_chans``.
    sfreq : float | None
        Sampling rate of ``X`` in Hz; needed with ``band``.
    band : (low, high) | None
        Band-pass the windows to this band in Hz first (``0 <= low < high``; a band
        reaching the Nyquist frequency is filtered up to 0.99 of it); None: as they are.

    Returns
    -------
    filters : ndarray, shape (n_filters, n_chans)
        One filter a row, each of unit L2 norm (float64).

    Raises
    ------
    ValueError
        When ``n_filters`` exceeds the number of channels, or ``y`` holds fewer than two
        classes.
    """
    import mne
    from mne.decoding import CSP

    n_chans = X.shape[1]
    if n_filters > n_chans:
        raise ValueError(
            f"'spatial_filters'={n_filters} with spatial_init='csp' must be at most the "
            f"number of channels ({n_chans})."
        )
    if band is not None and sfreq is None:
        raise ValueError(f"'band'={band!r} needs the windows' rate 'sfreq', but got None.")
    y = np.asarray(y)
    classes = np.unique(y)
    if len(classes) < 2:
        raise ValueError("spatial_init='csp' needs windows of at least two classes.")
    csp = CSP(
        n_components=int(n_filters),
        reg=_SHRINKAGE,
        cov_est="epoch",
        norm_trace=True,
        rank="full",
        component_order="alternate" if len(classes) == 2 else "mutual_info",
    )
    with mne.use_log_level("error"):
        csp.fit(_unit_power(iir_band_pass(X, sfreq, band)), y)
    filters = csp.filters_[:n_filters]
    return filters / np.linalg.norm(filters, axis=1, keepdims=True)
