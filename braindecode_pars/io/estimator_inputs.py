"""scikit-learn input over windows that the feature transformers and the estimators
both read, below :mod:`~braindecode_pars.features` and
:mod:`~braindecode_pars.estimators`.

- reading ``X`` once, with its sampling rate (:func:`read_input`), and at ``predict``
  against what ``fit`` saw (:func:`read_fitted`, :func:`at_rate`), the channels matched
  by name (:func:`match_channels`);
- the tags of a step that takes windows (:class:`WindowsInputMixin`);
- :class:`LabelledPipeline`, a :class:`~sklearn.pipeline.Pipeline` that reads the
  labels windows carry, and :class:`WindowsArray`, the windows of any input as an array
  (a pickled pipeline names their module).

What only the estimators use (the labels' and the encoder parameter's checks, their
mixins) is theirs, in ``estimators/_inputs.py``; what only the feature transformers use
(``fit`` over a reader), in ``features/_inputs.py``. Every one reads its input through
:func:`~braindecode_pars.io.windows.read_windows`.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import Pipeline, _final_estimator_has
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from braindecode_pars._util.logs import warn_once
from braindecode_pars.io.windows import Windows, _check_scale, labels_of, read_windows

logger = logging.getLogger(__name__)


class WindowsInputMixin:
    """scikit-learn tags of a step that takes windows, (n_windows, n_chans, n_times),
    not 2-D feature arrays."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags


class LabelledPipeline(Pipeline):
    """A scikit-learn :class:`~sklearn.pipeline.Pipeline` that reads the labels of windows.

    ``fit`` and ``score`` take ``y=None`` where the windows carry their labels
    (braindecode windows and ``Subset`` objects or skorch ``SliceDataset`` objects of them, lists
    of window items, ``mne.Epochs``): the labels are read through
    :func:`~braindecode_pars.io.windows.read_windows`. A skorch
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
            y = labels_of(y)
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
    :func:`~braindecode_pars.io.windows.read_windows`.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate of the windows, checked against the windows' own where they
        carry it (the array itself does not depend on it).

    Attributes
    ----------
    n_chans_ : int
        The number of channels of fit.
    ch_names_ : list of str | None
        The channel names of fit, where the windows carried them: windows of these
        names in another order are reordered at ``transform``, other names refused
        (:func:`match_channels`).
    """

    def __init__(self, sfreq=None):
        self.sfreq = sfreq

    def fit(self, X, y=None):
        windows = read_windows(X, sfreq=self.sfreq, name="X")
        self.n_chans_, self.ch_names_ = windows.X.shape[1], windows.ch_names
        return self

    def transform(self, X):
        check_is_fitted(self, "n_chans_")
        windows = match_channels(self, read_windows(X, sfreq=self.sfreq, name="X"))
        same = isinstance(X, np.ndarray) and windows.ch_names is None
        X = np.asarray(X if same else windows.X, dtype=np.float64)
        if X.shape[1] != self.n_chans_:
            raise ValueError(
                f"'X' has {X.shape[1]} channels but the pipeline was fitted on {self.n_chans_}."
            )
        return X


def read_input(X, y=None, groups=None, sfreq=None, name="X"):
    """``X`` read once (:func:`read_windows`), with a sampling rate required."""
    data = read_windows(X, y, groups, sfreq=sfreq, name=name)
    if data.sfreq is None and data.n_items is not None:
        raise ValueError(
            f"'{name}' is a list of {data.n_items} window items (x, y, inds), which carry no "
            "sampling rate: scikit-learn's cross-validation (cross_val_score, "
            "cross_validate, GridSearchCV) makes such a list of braindecode windows when "
            "it splits them. Wrap the windows so that they stay windows when split: "
            "X = skorch.helper.SliceDataset(windows), as braindecode's own examples do "
            "(or set 'sfreq' to their rate in Hz)."
        )
    if data.sfreq is None:
        raise ValueError(
            f"'{name}' does not carry its sampling rate (an array does not): set 'sfreq' "
            "to the windows' rate in Hz, or pass braindecode windows, "
            "skorch.helper.SliceDataset(windows) or mne.Epochs, which carry it."
        )
    return data


def read_fitted(estimator, X, y=None, groups=None, name="X"):
    """``X`` read once at ``predict`` / ``transform`` / ``score`` of a fitted estimator
    (attributes ``sfreq_``, ``n_chans_``, ``n_times_``, ``scale_`` and ``ch_names_``),
    checked against what ``fit`` saw: the rate, the channels by name
    (:func:`match_channels`: the names of fit in another order are reordered, other names
    refused), the shape; a change of amplitude scale by a hundredfold warns
    (:func:`~braindecode_pars.io.windows._check_scale`)."""
    rate = getattr(estimator, "input_sfreq_", estimator.sfreq_)
    data = read_windows(X, y, groups, sfreq=None, name=name)
    if data.sfreq is not None and abs(data.sfreq - rate) > 1e-6:
        raise ValueError(
            f"'{name}' windows are sampled at {data.sfreq} Hz, but the estimator was "
            f"fitted at {rate} Hz."
        )
    data.sfreq = rate
    data = match_channels(estimator, data, name)
    expected = (estimator.n_chans_, getattr(estimator, "input_n_times_", estimator.n_times_))
    if data.shape != expected:
        raise ValueError(
            f"'{name}' windows have shape {data.shape} (n_chans, n_times), but the "
            f"estimator was fitted on {expected}."
        )
    _check_scale(estimator.scale_, data.X, type(estimator).__name__)
    return at_rate(data, estimator.sfreq_)


#: Channel names listed at most in a message of :func:`match_channels` (the rest counted).
_NAMES_SHOWN = 24


def _names(names):
    """Channel names in a message: the first :data:`_NAMES_SHOWN`, the rest counted."""
    shown = ", ".join(names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return f"[{shown}{f', and {more} more' if more > 0 else ''}]"


def match_channels(estimator, data, name="X"):
    """Windows read at ``predict`` with their channels in the order of ``fit``, by name.

    An estimator fitted on windows that name their channels (braindecode windows,
    ``mne.Epochs``, the windows of :func:`~braindecode_pars.io.load_recordings`) keeps
    the names in ``ch_names_`` (None for arrays). At ``predict``, ``predict_proba``,
    ``transform`` and ``score``:

    - the same names in the same order: the windows as they are;
    - the same names in another order: the channels are reordered to those of fit, and
      an INFO line of the log says so (once per call);
    - other names (some missing, others added, or renamed): refused, naming both lists
      and how to give the channels of fit;
    - names at fit but none now (an array), or the reverse: a warning says that the
      channels are taken by position, which the channel count check of the caller
      still guards.

    Parameters
    ----------
    estimator : estimator
        Fitted; its ``ch_names_`` (list of str | None) are the channels of fit. An
        estimator without that attribute (fitted before it was kept) is not checked.
    data : Windows
        The windows read (:func:`~braindecode_pars.io.windows.read_windows`).
    name : str
        The parameter's name in messages.

    Returns
    -------
    data : Windows
        ``data``, or a copy whose ``X`` has its channels in the order of ``ch_names_``
        (and ``ch_names`` those).

    Raises
    ------
    ValueError
        When both name their channels and the names differ other than by order.

    Warns
    -----
    UserWarning
        When only one of fit and predict named the channels.
    """
    if not hasattr(estimator, "ch_names_"):
        return data
    fitted, given = estimator.ch_names_, data.ch_names
    who = type(estimator).__name__
    if fitted is None and given is None:
        return data
    if fitted is None or given is None:
        if fitted is None:
            said = (
                f"{who} was fitted on windows without channel names (an array), so the "
                f"channels of these '{name}' windows, {_names(list(given))}, cannot be "
                "matched by name"
            )
        else:
            said = (
                f"{who} was fitted on the channels {_names(list(fitted))}, but these "
                f"'{name}' windows do not name theirs (an array)"
            )
        warn_once(
            f"{said}: they are taken by position, in the order of fit. Give the windows "
            "their channel names at fit and at predict (braindecode windows, mne.Epochs) "
            "to have them matched by name.",
            UserWarning,
            stacklevel=4,
        )
        return data
    fitted, given = [str(ch) for ch in fitted], [str(ch) for ch in given]
    if given == fitted:
        return data
    if sorted(given) == sorted(fitted) and len(set(given)) == len(given):
        order = [given.index(ch) for ch in fitted]
        logger.info(
            "%s: the '%s' windows list their channels in another order than at fit "
            "(%s, fitted on %s): they are reordered to the order of fit.",
            who, name, _names(given), _names(fitted),
        )  # fmt: skip
        return dataclasses.replace(data, X=data.X[:, order], ch_names=fitted)
    missing = [ch for ch in fitted if ch not in given]
    extra = [ch for ch in given if ch not in fitted]
    diff = "; ".join(
        part
        for part in (
            f"missing: {_names(missing)}" if missing else "",
            f"not fitted on: {_names(extra)}" if extra else "",
        )
        if part
    )
    upper = sorted(ch.upper() for ch in given) == sorted(ch.upper() for ch in fitted)
    hint = " (the names differ in case only)" if upper else ""
    raise ValueError(
        f"'{name}' windows have the channels {_names(given)}, but {who} was fitted on "
        f"{_names(fitted)}{f' ({diff})' if diff else ''}{hint}. Give the windows the "
        "channels of fit, by these names (in any order: they are reordered): mne's "
        f"inst.pick({fitted!r}) or inst.reorder_channels(...) for mne.Epochs and Raw "
        "(inst.rename_channels where the same sites have other names), or braindecode's "
        f"preprocess(recordings, [Preprocessor('pick', picks={fitted!r})]) (or "
        "Preprocessor('reorder_channels', ch_names=...)) before windowing; or fit again "
        "on these channels."
    )


def at_rate(data, sfreq):
    """Windows read (:class:`~braindecode_pars.io.windows.Windows`) at ``sfreq``:
    resampled to it (:func:`~braindecode_pars.io.resample_windows`, MNE's
    resampling) when their rate is another, else as they are. Upsampling to an
    encoder's rate is said by the estimators (the two rates, once per fit), not by
    ``resample_windows`` at every call."""
    if abs(data.sfreq - sfreq) <= 1e-6 * sfreq:
        return data
    from braindecode_pars.io._resample import _UPSAMPLING, resample_windows

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_UPSAMPLING)
        X = resample_windows(data.X, data.sfreq, sfreq).astype(np.float32, copy=False)
    return Windows(X, data.y, float(sfreq), data.groups, data.ch_names, data.n_items)
