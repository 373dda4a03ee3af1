"""``fit`` over a reader, for the feature transformers of windows: :func:`read_array`
(the windows with a rate, an array kept as the caller's) and
:class:`WindowsFeaturesMixin`.

Only :mod:`~braindecode_pars.features.blocks` uses them. A pickled transformer names
its own class, not this base.
"""

from __future__ import annotations

import numpy as np

from braindecode_pars.io.estimator_inputs import WindowsInputMixin, read_input


def read_array(X, sfreq):
    """Windows of ``X`` through :func:`read_input`, with a sampling rate.

    An array keeps the caller's own numbers (a float64 array is not cast to float32),
    without a copy; the classical blocks cast a few windows at a time to float64.
    """
    windows = read_input(X, sfreq=sfreq)
    if isinstance(X, np.ndarray) and np.issubdtype(X.dtype, np.floating):
        windows.X = X
    return windows


class WindowsFeaturesMixin(WindowsInputMixin):
    """``fit`` and ``fit_transform`` of a transformer of windows into features, over
    its ``_fit(X)`` (check, read the windows once, fit; return their array) and
    ``_features(X)`` (the features of an array of windows)."""

    def fit(self, X, y=None):
        """Check the parameters against the windows and fit.

        Parameters
        ----------
        X : ndarray, shape (n_windows, n_chans, n_times) | braindecode windows | \
Subset | SliceDataset | list of window items | mne.Epochs
            The windows, read by
            :func:`~braindecode_pars.io.windows.read_windows`.
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        self._fit(X)
        return self

    def fit_transform(self, X, y=None):
        """Fit, then compute the features of the same windows, read once.

        Parameters
        ----------
        X, y
            As in :meth:`fit`.

        Returns
        -------
        features : ndarray, shape (n_windows, n_features)
            As :meth:`transform`.
        """
        return self._features(self._fit(X))
