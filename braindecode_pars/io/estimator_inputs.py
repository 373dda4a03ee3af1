"""scikit-learn input and output over windows: what every estimator of the package
reads and checks, below :mod:`~braindecode_pars.features` and
:mod:`~braindecode_pars.estimators`.

- reading ``X`` once, with its sampling rate (:func:`read_input`, :func:`read_fitted`,
  :func:`_read_fit_input`) and checking labels (:func:`check_labels`);
- the encoders a parameter names (:func:`load_encoder_param`), checked against the
  windows (:func:`check_encoder_rate`, :func:`check_window_length`);
- the mixins: the tags of a step that takes windows (:class:`WindowsInputMixin`,
  :class:`SeededWindowsMixin`), ``fit``/``fit_transform`` over a reader
  (:class:`WindowsFeaturesMixin`), ``predict``/``score`` of a classifier of windows
  (:class:`WindowsClassifierMixin`), ``fit_transform`` with groups
  (:class:`GroupsTransformerMixin`);
- :class:`LabelledPipeline`, a :class:`~sklearn.pipeline.Pipeline` that reads the
  labels windows carry, and :class:`WindowsArray`, the windows of any input as an array.

Every one reads its input through
:func:`~braindecode_pars.io.windows.read_windows`.
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.metrics import accuracy_score
from sklearn.pipeline import Pipeline, _final_estimator_has
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from braindecode_pars.io.windows import Windows, _check_scale, labels_of, read_windows

logger = logging.getLogger(__name__)


def read_array(X, sfreq):
    """Windows of ``X`` through :func:`read_input`, with a sampling rate.

    An array keeps the caller's own numbers (a float64 array is not cast to float32),
    without a copy; the classical blocks cast a few windows at a time to float64.
    """
    windows = read_input(X, sfreq=sfreq)
    if isinstance(X, np.ndarray) and np.issubdtype(X.dtype, np.floating):
        windows.X = X
    return windows


class WindowsInputMixin:
    """scikit-learn tags of a step that takes windows, (n_windows, n_chans, n_times),
    not 2-D feature arrays."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags


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


def _read_fit_input(estimator, X, y=None, groups=None):
    """What every head's ``fit`` does first: its parameters checked, its ``encoder``
    parameter loaded (:func:`load_encoder_param`: a bad file is refused before reading)
    and ``X`` read at its ``sfreq`` with at least two classes.

    Returns
    -------
    encoder : PatchEncoder | None
        A copy of the encoder the parameter names.
    data : Windows
        ``X`` read (:func:`read_input`).
    classes : ndarray
        The classes of ``data.y``, sorted.
    """
    estimator.check_params()
    encoder = load_encoder_param(estimator.encoder)
    data = read_input(X, y, groups, sfreq=estimator.sfreq)
    return encoder, data, check_labels(data.y)


def read_fitted(estimator, X, y=None, groups=None, name="X"):
    """``X`` read once at ``predict`` / ``transform`` / ``score`` of a fitted estimator
    (attributes ``sfreq_``, ``n_chans_``, ``n_times_``, ``scale_``), checked against
    what ``fit`` saw; a change of amplitude scale by a hundredfold warns
    (:func:`~braindecode_pars.io.windows._check_scale`)."""
    rate = getattr(estimator, "input_sfreq_", estimator.sfreq_)
    data = read_windows(X, y, groups, sfreq=None, name=name)
    if data.sfreq is not None and abs(data.sfreq - rate) > 1e-6:
        raise ValueError(
            f"'{name}' windows are sampled at {data.sfreq} Hz, but the estimator was "
            f"fitted at {rate} Hz."
        )
    data.sfreq = rate
    expected = (estimator.n_chans_, getattr(estimator, "input_n_times_", estimator.n_times_))
    if data.shape != expected:
        raise ValueError(
            f"'{name}' windows have shape {data.shape} (n_chans, n_times), but the "
            f"estimator was fitted on {expected}."
        )
    _check_scale(estimator.scale_, data.X, type(estimator).__name__)
    return at_rate(data, estimator.sfreq_)


def at_rate(data, sfreq):
    """Windows read (:class:`~braindecode_pars.io.windows.Windows`) at ``sfreq``:
    resampled to it (:func:`~braindecode_pars.io.resample_windows`, MNE's
    resampling) when their rate is another, else as they are."""
    if abs(data.sfreq - sfreq) <= 1e-6 * sfreq:
        return data
    from braindecode_pars.io._resample import resample_windows

    X = resample_windows(data.X, data.sfreq, sfreq).astype(np.float32, copy=False)
    return Windows(X, data.y, float(sfreq), data.groups, data.ch_names, data.n_items)


def say_resampling(who, sfreq, encoder_sfreq):
    """Log (``logging.INFO``, once per fit) that windows are resampled for an encoder,
    naming both rates, so that a wrong ``sfreq`` given for arrays shows."""
    logger.info(
        "%s: the windows are at %g Hz (read from them; for arrays, the 'sfreq' given: "
        "check that it is theirs) and the encoder works at %g Hz: they are resampled "
        "from %g Hz to %g Hz for it, at fit and at predict.",
        who, sfreq, encoder_sfreq, sfreq, encoder_sfreq,
    )  # fmt: skip


def check_labels(y, name="y", at_least=2):
    """The sorted classes of ``y``, checked (present, no missing value, enough classes)."""
    if y is None:
        raise ValueError(f"Labels are missing: pass '{name}', or windows that carry their targets.")
    y = np.asarray(y)
    missing = np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in y])
    if missing.any():
        raise ValueError(f"Labels are missing for {int(missing.sum())} window(s) in '{name}'.")
    classes = np.unique(y)
    if len(classes) < at_least:
        raise ValueError(
            f"Classification needs at least two classes, but '{name}' holds only "
            f"{classes.tolist()}."
        )
    return classes


def load_encoder_param(value, name="encoder", allow_none=True):
    """The encoder a parameter names (a copy: the caller's object is never trained), or
    None: a shipped name, a saved file or folder, or a PatchEncoder instance."""
    from braindecode_pars.hub.folders import load_encoder
    from braindecode_pars.models.encoder import PatchEncoder
    from braindecode_pars.weights import PRETRAINED_ENCODERS

    if value is None and allow_none:
        return None
    if isinstance(value, PatchEncoder):
        return copy.deepcopy(value)
    if not isinstance(value, str | os.PathLike):
        raise TypeError(
            f"'{name}' must be the name of a shipped encoder ({', '.join(PRETRAINED_ENCODERS)}), "
            f"the path of a saved encoder, a PatchEncoder"
            + (" or None" if allow_none else "")
            + f", but got {type(value).__name__} ({value!r})."
        )
    if isinstance(value, str) and value in PRETRAINED_ENCODERS:
        return load_encoder(value)
    path = Path(value)
    if not path.exists():
        raise FileNotFoundError(
            f"'{name}': there is no file or folder at '{path}', and it is not the name of a "
            f"shipped encoder ({', '.join(PRETRAINED_ENCODERS)})."
        )
    try:
        return load_encoder(path)
    except Exception as err:  # torch.load's errors say nothing of what was expected
        why = f"{type(err).__name__}: {err}"
        if "is not an encoder saved by" in str(err):
            why = "it holds no 'config' and 'state_dict'"
        raise ValueError(
            f"'{name}': '{path}' is not an encoder saved by braindecode_pars.save_encoder ({why})."
        ) from err


def check_encoder_rate(encoder, sfreq, n_times, name="encoder"):
    """Refuse an encoder whose sampling rate is not the windows' or whose patch is longer
    than a window, with the resampling hint."""
    if abs(encoder.sfreq - sfreq) > 1e-6:
        raise ValueError(
            f"The '{name}' works at sfreq={encoder.sfreq} Hz but the windows are at {sfreq} "
            f"Hz; resample them to {encoder.sfreq} Hz first: "
            f"braindecode_pars.io.resample_windows(X, sfreq={sfreq}, "
            f"new_sfreq={encoder.sfreq}) (arrays, braindecode windows or mne.Epochs)."
        )
    patch = int(round(encoder.patch_seconds * sfreq))
    if n_times < patch:
        raise ValueError(
            f"Windows of {n_times} samples are shorter than one {encoder.patch_seconds}-s "
            f"patch of the '{name}' ({patch} samples at {sfreq} Hz)."
        )


def check_window_length(n_times, n_chans, patch_seconds, sfreq):
    """Refuse windows shorter than one patch, hinting at swapped axes."""
    patch = int(round(patch_seconds * sfreq))
    if n_times < patch:
        hint = ""
        if n_chans >= patch:
            hint = (
                f" The windows are {n_chans} x {n_times}: if that is (n_times, n_chans), the "
                "axes are swapped; windows are (n_windows, n_chans, n_times)."
            )
        raise ValueError(
            f"Windows of {n_times} samples are shorter than one patch of "
            f"patch_seconds={patch_seconds} s ({patch} samples at {sfreq} Hz).{hint}"
        )
    return patch


class WindowsClassifierMixin(ClassifierMixin):
    """``predict_proba``, ``predict`` and ``score`` of a classifier of windows, over two
    hooks: ``_read(X, y=None, groups=None)``, the windows read once and checked against
    ``fit`` (a :class:`~braindecode_pars.io.windows.Windows`), and
    ``_proba(data)``, their class probabilities. ``predict`` is the most probable class
    (``_predict(data)`` for another rule); ``score`` is the accuracy of ``predict``, the
    labels read from the windows when ``y`` is None."""

    def predict_proba(self, X, groups=None):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_``
        order; ``groups``: the group of each window where the estimator reads them (an
        aligned estimator; None: braindecode windows' ``subject``)."""
        return self._proba(self._read(X, groups=groups))

    def predict(self, X, groups=None):
        """Predicted labels, shape (n_windows,)."""
        return self._predict(self._read(X, groups=groups))

    def _predict(self, data):
        return np.asarray(self.classes_)[self._proba(data).argmax(axis=1)]

    def score(self, X, y=None, sample_weight=None, groups=None):
        """Accuracy; labels read from the windows when ``y`` is None."""
        data = self._read(X, y, groups)
        check_labels(data.y, at_least=1)
        return accuracy_score(data.y, self._predict(data), sample_weight=sample_weight)


class GroupsTransformerMixin(TransformerMixin):
    """scikit-learn's ``TransformerMixin`` whose ``fit_transform`` hands ``transform``
    the ``groups`` that ``fit`` had (an aligned estimator then aligns the windows as
    ``fit`` did; scikit-learn's passes ``transform`` no groups)."""

    def fit_transform(self, X, y=None, groups=None, **fit_params):
        return self.fit(X, y, groups=groups, **fit_params).transform(X, groups=groups)


class SeededWindowsMixin(WindowsInputMixin):
    """scikit-learn tags of an estimator of windows (n_windows, n_chans, n_times) whose
    ``fit`` draws at random: non-deterministic unless ``random_state`` is set."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self.random_state is None
        return tags
