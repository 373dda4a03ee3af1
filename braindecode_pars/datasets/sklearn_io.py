"""Window input for scikit-learn estimators: tags, fit/transform plumbing, labels.

The building blocks every estimator of windows in the package shares: the tags of
a step that takes (n_windows, n_chans, n_times) windows (:class:`_WindowsInputMixin`),
``fit``/``fit_transform`` over a reader (:class:`_WindowsFeaturesMixin`), a
:class:`~sklearn.pipeline.Pipeline` that reads the labels windows carry
(:class:`LabelledPipeline`), and :class:`WindowsArray`, the windows of any input as
an array. Every one reads its input through
:func:`~braindecode_pars.datasets.adapters.read_windows`.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import Pipeline, _final_estimator_has
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .datasets.adapters import Windows, _labels_of, read_windows


def _read_array(X, sfreq):
    """Windows of ``X`` through :func:`read_windows`, with a sampling rate.

    An array keeps the caller's own numbers (a float64 array is not cast to float32),
    without a copy; the classical blocks cast a few windows at a time to float64.
    """
    windows = read_windows(X, sfreq=sfreq, name="X")
    if windows.sfreq is None:
        raise ValueError(
            "'X' does not carry its sampling rate (an array, or the list of window items "
            "scikit-learn makes when it splits braindecode windows): set 'sfreq', or pass "
            "braindecode windows or a SliceDataset of them, whose sampling rate is read "
            "from their recordings."
        )
    if isinstance(X, np.ndarray) and np.issubdtype(X.dtype, np.floating):
        windows.X = X
    return windows


class _WindowsInputMixin:
    """scikit-learn tags of a step that takes windows, (n_windows, n_chans, n_times),
    not 2-D feature arrays."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags


class _WindowsFeaturesMixin(_WindowsInputMixin):
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
            :func:`~braindecode_pars.datasets.adapters.read_windows`.
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


class LabelledPipeline(Pipeline):
    """A scikit-learn :class:`~sklearn.pipeline.Pipeline` that reads the labels of windows.

    ``fit`` and ``score`` take ``y=None`` where the windows carry their labels
    (braindecode windows and ``Subset`` objects or skorch ``SliceDataset`` objects of them, lists
    of window items, ``mne.Epochs``): the labels are read through
    :func:`~braindecode_pars.datasets.adapters.read_windows`. A skorch
    ``SliceDataset(windows, idx=1)`` given as ``y`` is read from the windows'
    metadata. Everything else is :class:`~sklearn.pipeline.Pipeline`'s: its
    parameters, ``steps`` and ``named_steps``, cloning, grid search over
    ``<step>__<parameter>``, and pickling.

    Parameters
    ----------
    steps : list of (str, estimator)
        The steps, as for :class:`~sklearn.pipeline.Pipeline`; the first must take
        windows (for example :class:`BandPowerFeatures`).
    **kwargs
        ``memory``, ``verbose`` and ``transform_input``, as for
        :class:`~sklearn.pipeline.Pipeline`.

    See Also
    --------
    band_power_pipeline : the band-power floor as a ``LabelledPipeline``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((20, 2, 400)), np.repeat([0, 1], 10)
    >>> pipe = LabelledPipeline(
    ...     [("features", BandPowerFeatures(sfreq=100)), ("clf", LogisticRegression())]
    ... )
    >>> pipe.fit(X, y).predict(X).shape
    (20,)
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            first = get_tags(self.steps[0][1]).input_tags
            tags.input_tags.two_d_array = first.two_d_array
            tags.input_tags.three_d_array = first.three_d_array
        except (AttributeError, IndexError, TypeError, ValueError):
            pass  # steps not yet valid: Pipeline's own tags
        return tags

    @staticmethod
    def _labels(X, y):
        """``y`` as an array, or the labels the windows ``X`` carry."""
        if y is not None:
            y = _labels_of(y)
            try:
                n_windows = len(X)
            except (TypeError, RuntimeError):  # no length without reading: the steps check
                n_windows = None
            if n_windows is not None and y.shape != (n_windows,):
                raise ValueError(
                    f"'y' must have shape ({n_windows},), one label per window, but got {y.shape}."
                )
            return y
        if isinstance(X, np.ndarray):  # no labels to read: no need to read the windows
            labels = None
        else:
            labels = read_windows(X, name="X").y
        if labels is None:
            raise ValueError(
                "'y' is None and 'X' carries no labels: pass 'y', one label per window, or "
                "braindecode windows (or a Subset or SliceDataset of them) whose metadata "
                "holds a 'target' column."
            )
        return labels

    def fit(self, X, y=None, **params):
        """Fit the steps, reading the labels of the windows when ``y`` is None.

        Parameters
        ----------
        X : ndarray, shape (n_windows, n_chans, n_times) | braindecode windows | \
Subset | SliceDataset | list of window items | mne.Epochs
            The windows.
        y : array-like, shape (n_windows,) | SliceDataset | None
            Labels; None reads those of the windows (an error names 'y' when they
            carry none).
        **params
            Passed to :meth:`sklearn.pipeline.Pipeline.fit`.

        Returns
        -------
        self : LabelledPipeline
        """
        X = _read_once(X)
        return super().fit(X, self._labels(X, y), **params)

    def score(self, X, y=None, sample_weight=None, **params):
        """The final step's score (accuracy for a classifier); ``y`` defaults to the
        labels of the windows.

        Parameters
        ----------
        X, y
            As in :meth:`fit`: the windows and their true labels.
        sample_weight : array-like, shape (n_windows,) | None
            Weights of the windows.
        **params
            Passed to :meth:`sklearn.pipeline.Pipeline.score`.

        Returns
        -------
        score : float
        """
        X = _read_once(X)
        return super().score(X, self._labels(X, y), sample_weight=sample_weight, **params)

    @available_if(_final_estimator_has("predict"))
    def predict(self, X, **params):
        """The final step's predictions; windows are read once."""
        return super().predict(_read_once(X), **params)

    @available_if(_final_estimator_has("predict_proba"))
    def predict_proba(self, X, **params):
        """The final step's class probabilities; windows are read once."""
        return super().predict_proba(_read_once(X), **params)

    @available_if(_final_estimator_has("decision_function"))
    def decision_function(self, X, **params):
        """The final step's decision function; windows are read once."""
        return super().decision_function(_read_once(X), **params)

    @available_if(Pipeline._can_transform)
    def transform(self, X, **params):
        """The steps' transforms; windows are read once."""
        return super().transform(_read_once(X), **params)


def _read_once(X):
    """Windows that are not an array read once, so that every step of a pipeline (each
    block of a ``FeatureUnion``) gets the read :class:`Windows` rather than reading them
    again from their recordings."""
    if isinstance(X, np.ndarray | Windows):
        return X
    return read_windows(X, name="X")


class WindowsArray(TransformerMixin, BaseEstimator):
    """The windows of any input the package takes, as a float64 array.

    The first step of a pipeline whose next step wants ``(n_windows, n_chans,
    n_times)`` arrays (pyriemann's estimators): arrays pass through, braindecode
    windows, ``Subset`` objects, ``SliceDataset`` objects, lists of window items and
    ``mne.Epochs`` are read through
    :func:`~braindecode_pars.datasets.adapters.read_windows`.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate of the windows, checked against the windows' own where they
        carry it (the array itself does not depend on it).
    """

    def __init__(self, sfreq=None):
        self.sfreq = sfreq

    def fit(self, X, y=None):
        self.n_chans_ = read_windows(X, sfreq=self.sfreq, name="X").X.shape[1]
        return self

    def transform(self, X):
        check_is_fitted(self, "n_chans_")
        windows = read_windows(X, sfreq=self.sfreq, name="X")
        X = np.asarray(X if isinstance(X, np.ndarray) else windows.X, dtype=np.float64)
        if X.shape[1] != self.n_chans_:
            raise ValueError(
                f"'X' has {X.shape[1]} channels but the pipeline was fitted on {self.n_chans_}."
            )
        return X
