"""The amplitude of windows, and the warning when it changes between fit and predict.

Band power and covariances are absolute: windows in volts given to an estimator
fitted on microvolts give predictions unrelated to the fitted ones. The estimators
record :func:`_window_scale` at ``fit`` and call :func:`_check_scale` at ``predict``.
"""

from __future__ import annotations

import warnings

import numpy as np

#: A window scale at ``predict`` this many times larger (or smaller) than at ``fit``
#: warns (:func:`_check_scale`): a factor of 1e6 is volts against microvolts.
SCALE_WARNING_FACTOR = 100.0

#: Samples (windows x channels x times) checked (NaN and inf, scale) or read (preloaded
#: ``mne.Epochs``) at a time, so that the temporary arrays stay small (2 MiB in float64).
_CHUNK_SAMPLES = 1 << 18


def _chunks(n, window_size):
    """Slices of ``n`` windows of ``window_size`` samples, about :data:`_CHUNK_SAMPLES`
    samples each (at least one window)."""
    step = max(1, _CHUNK_SAMPLES // max(1, window_size))
    return [slice(start, min(n, start + step)) for start in range(0, n, step)]


def _window_scale(X):
    """A robust amplitude of windows: the median over windows of each window's standard
    deviation.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times)
        The windows (an array, as :func:`read_windows` gives them in ``Windows.X``).

    Returns
    -------
    scale : float
        0.0 for flat windows; the same unit as ``X`` (about 10 to 100 for EEG in
        microvolts, 1e-5 to 1e-4 in volts).

    Raises
    ------
    ValueError
        For an array that is not 3-D or holds no window.
    """
    X = np.asarray(X)
    if X.ndim != 3 or len(X) == 0:
        raise ValueError(
            "'X' must be windows of shape (n_windows, n_chans, n_times), at least one, but "
            f"got an array of shape {X.shape}."
        )
    per_window = np.concatenate(
        [
            X[part].reshape(-1, X[0].size).std(axis=1, dtype=np.float64)
            for part in _chunks(len(X), X[0].size)
        ]
    )  # a few windows at a time: float64 copies of those only
    return float(np.median(per_window))


def _check_scale(fitted_scale, X, who):
    """Warn when windows at ``predict`` are in another unit than those fitted.

    Band power and covariances are absolute: windows in volts given to an estimator
    fitted in microvolts (or the reverse) give predictions unrelated to the fitted
    ones, without error. This compares :func:`_window_scale` of ``X`` with the scale
    recorded at ``fit`` and warns when they differ by more than
    :data:`SCALE_WARNING_FACTOR` either way.

    Parameters
    ----------
    fitted_scale : float
        :func:`_window_scale` of the windows fitted on.
    X : ndarray, shape (n_windows, n_chans, n_times)
        The windows at ``predict``.
    who : str
        Who is asking (an estimator's name), at the head of the warning.

    Returns
    -------
    factor : float | None
        The scale of ``X`` over ``fitted_scale``; None where either is 0 (flat windows).

    Warns
    -----
    UserWarning
        When the factor is above :data:`SCALE_WARNING_FACTOR` or below its inverse,
        naming the factor and both scales.
    """
    scale = _window_scale(X)
    if not fitted_scale > 0 or not scale > 0:
        return None
    factor = scale / float(fitted_scale)
    if factor > SCALE_WARNING_FACTOR or factor < 1 / SCALE_WARNING_FACTOR:
        warnings.warn(
            f"{who}: the windows at predict are about {factor:.3g} times the amplitude of "
            f"those fitted (median standard deviation per window {scale:.3g} against "
            f"{float(fitted_scale):.3g}); are they in another unit (volts vs microvolts)? "
            "Band power and covariances are absolute: give the windows in the unit of fit "
            "(the package reads MNE and braindecode objects in microvolts).",
            UserWarning,
            stacklevel=2,
        )
    return factor
