"""Classical floors for EEG window classification: log band power, and Riemannian tangent
space, each into a logistic regression.

Any learned model should beat this: the log mean power of each channel in six
frequency bands spanning 0.5-45 Hz (Welch's method), standardised, fed to a
class-balanced logistic regression. It trains in seconds on a CPU, so every
benchmark can report it beside the pretrained models.

The floor is a plain scikit-learn pipeline, :func:`band_power_pipeline`:
:class:`BandPowerFeatures`, a :class:`~sklearn.preprocessing.StandardScaler` and a
:class:`~sklearn.linear_model.LogisticRegression`, steps named ``"bandpowerfeatures"``,
``"standardscaler"`` and ``"logisticregression"`` (so ``logisticregression__C`` in a
grid search). It reads its input through the package's one adapter,
:func:`~braindecode_pars.datasets.adapters.read_windows`, and so takes what
:class:`~braindecode_pars.PARSClassifier` takes: arrays with ``sfreq``, braindecode
windows (whose labels and sampling rate it reads), ``Subset`` objects and skorch
``SliceDataset`` objects of them, and the lists of window items scikit-learn makes of
windows when it splits them. :class:`LabelledPipeline`, the pipeline it returns,
reads the labels of windows in ``fit`` and ``score`` when ``y`` is None.

The second floor, :func:`riemann_pipeline`, is the standard classical decoder of
multi-channel EEG: shrunk spatial covariance matrices of the windows
(:class:`pyriemann.estimation.Covariances`), mapped to the tangent space at their
Riemannian mean (:class:`pyriemann.tangentspace.TangentSpace`), into the same
logistic regression. Band power sees each channel's spectrum; the tangent space sees
the channels' covariances, which band power cannot (two classes that differ only in
how channels co-vary look alike to it).
"""

from __future__ import annotations

import numbers

import numpy as np
from mne.time_frequency import psd_array_welch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from ._checks import check_int, check_range
from .windows_input import (
    LOGISTIC_MAX_ITER,
    LabelledPipeline,
    WindowsArray,
    WindowsFeaturesMixin,
    read_float64,
)

#: The six bands, ``(name, low, high)`` in Hz, each half-open ``[low, high)``.
DEFAULT_BANDS = (
    ("delta", 0.5, 4.0),
    ("theta", 4.0, 8.0),
    ("alpha", 8.0, 13.0),
    ("beta_low", 13.0, 20.0),
    ("beta_high", 20.0, 30.0),
    ("gamma", 30.0, 45.0),
)
#: Length of the Welch segments when ``n_per_seg`` is None: 2 s, a 0.5 Hz resolution.
DEFAULT_SEGMENT_SECONDS = 2.0


def bands_below_nyquist(sfreq, bands=DEFAULT_BANDS):
    """The ``(name, low, high)`` bands that start below the Nyquist frequency of
    ``sfreq``, each ending at it at the latest (all of :data:`DEFAULT_BANDS` at 100 Hz).

    Examples
    --------
    >>> [name for name, low, high in bands_below_nyquist(100)]
    ['delta', 'theta', 'alpha', 'beta_low', 'beta_high', 'gamma']
    >>> bands_below_nyquist(30)[-1]
    ('beta_low', 13.0, 15.0)
    """
    nyquist = sfreq / 2
    return [(name, low, min(high, nyquist)) for name, low, high in bands if low < nyquist]


def _check_bands(bands, sfreq):
    """``bands`` as a list of ``(name, low, high)``, each below the Nyquist frequency."""
    items = list(bands.items()) if isinstance(bands, dict) else list(bands)
    out = []
    for item in items:
        if isinstance(bands, dict):
            name, edges = item
            item = (name, *tuple(edges))
        if len(item) != 3 or not all(isinstance(e, numbers.Real) for e in item[1:]):
            raise ValueError(
                "'bands' must be a dict name -> (low, high) or a sequence of "
                f"(name, low, high) in Hz, but got the entry {item!r}."
            )
        name, low, high = str(item[0]), float(item[1]), float(item[2])
        if not 0 <= low < high:
            raise ValueError(f"'bands' entry {name!r} must have 0 <= low < high, but got {item!r}.")
        if high > sfreq / 2:
            raise ValueError(
                f"'bands' entry {name!r} ({low:g}-{high:g} Hz) ends above the Nyquist "
                f"frequency {sfreq / 2:g} Hz of sfreq={sfreq:g}; lower the band or "
                "raise the sampling rate."
            )
        out.append((name, low, high))
    if not out:
        raise ValueError("'bands' must hold at least one band, but got none.")
    return out


class BandPowerFeatures(WindowsFeaturesMixin, TransformerMixin, BaseEstimator):
    """Log mean power per channel in frequency bands, by Welch's method.

    For each window and channel the power spectral density is estimated with
    :func:`mne.time_frequency.psd_array_welch` (Hamming window, half-overlapping
    segments of ``n_per_seg`` samples) and averaged over the frequency bins of each
    band; the features are the (base-10) logarithms of these means, channel by
    channel. Scaling the signal by ``a`` shifts every feature by ``2 log10(a)``.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate of the windows in Hz. None reads it from braindecode windows
        (array input then fails); where both are known they must agree. Lists of
        window items (what scikit-learn makes of braindecode windows when it splits
        them) do not carry it: set it for them, or pass a ``SliceDataset``.
    bands : dict | sequence of (name, low, high)
        Frequency bands in Hz, each half-open ``[low, high)``; by default
        :data:`DEFAULT_BANDS`, six bands spanning 0.5-45 Hz (delta, theta, alpha,
        beta-low, beta-high, gamma). Each must end at or below the Nyquist frequency.
    n_per_seg : int | None
        Length of Welch's segments in samples; None takes 2 s (a 0.5 Hz resolution),
        or the whole window when it is shorter.
    log : bool
        Whether to return ``log10`` of the band powers (True) or the powers.

    Attributes
    ----------
    sfreq_ : float
        The sampling rate used.
    bands_ : list of (name, low, high)
        The checked bands.
    n_per_seg_ : int
        The segment length used.
    n_chans_ : int
        The number of channels seen in ``fit``.
    ch_names_ : list of str | None
        The channel names of the windows seen in ``fit``, where they carry them.
    n_features_out_ : int
        ``n_chans_ * len(bands_)``.

    See Also
    --------
    band_power_pipeline : these features, standardised, into a logistic regression.

    Examples
    --------
    >>> import numpy as np
    >>> t = np.arange(1000) / 100
    >>> X = np.sin(2 * np.pi * 10 * t)[None, None, :] * np.ones((4, 2, 1))
    >>> features = BandPowerFeatures(sfreq=100).fit_transform(X)
    >>> features.shape  # 4 windows, 2 channels x 6 bands
    (4, 12)
    >>> int(features[0, :6].argmax())  # 10 Hz lies in alpha, the third band
    2
    """

    def __init__(self, sfreq=None, bands=DEFAULT_BANDS, n_per_seg=None, log=True):
        self.sfreq = sfreq
        self.bands = bands
        self.n_per_seg = n_per_seg
        self.log = log

    def _fit(self, X):
        """Check the parameters, read the windows and fit; return the windows' array."""
        # the parameters first, as far as they can be checked without the windows
        if self.sfreq is not None:
            check_range("sfreq", self.sfreq, 0, np.inf, low_open=True)
        if self.n_per_seg is not None:
            check_int("n_per_seg", self.n_per_seg, 2)
        _check_bands(self.bands, np.inf if self.sfreq is None else self.sfreq)
        windows = read_float64(X, self.sfreq)
        X, sfreq, ch_names = windows.X, windows.sfreq, windows.ch_names
        n_times = X.shape[-1]
        if self.n_per_seg is None:
            n_per_seg = min(n_times, int(round(DEFAULT_SEGMENT_SECONDS * sfreq)))
        else:
            n_per_seg = int(self.n_per_seg)
            if n_per_seg > n_times:
                raise ValueError(
                    f"'n_per_seg'={n_per_seg} exceeds the window length ({n_times} samples)."
                )
        bands = _check_bands(self.bands, sfreq)
        freqs = np.fft.rfftfreq(n_per_seg, 1 / sfreq)
        for name, low, high in bands:
            if not np.any((freqs >= low) & (freqs < high)):
                raise ValueError(
                    f"Band {name!r} ({low:g}-{high:g} Hz) holds no frequency bin at the "
                    f"resolution sfreq / n_per_seg = {sfreq / n_per_seg:g} Hz; raise "
                    "'n_per_seg' (or use longer windows) or widen the band in 'bands'."
                )
        self.sfreq_ = sfreq
        self.bands_ = bands
        self.n_per_seg_ = n_per_seg
        self.n_chans_ = X.shape[1]
        self.ch_names_ = ch_names
        self.n_features_out_ = self.n_chans_ * len(bands)
        return X

    def transform(self, X):
        """Compute the band powers.

        Parameters
        ----------
        X : ndarray, shape (n_windows, n_chans, n_times) | braindecode windows | \
Subset | SliceDataset | list of window items | mne.Epochs
            The windows, with the channels and sampling rate seen in ``fit``.

        Returns
        -------
        features : ndarray, shape (n_windows, n_chans * n_bands)
            For each channel in turn, the (log) mean power of each band.
        """
        check_is_fitted(self, "bands_")
        return self._features(read_float64(X, self.sfreq_).X)

    def _features(self, X):
        """The features of windows read as a float64 array."""
        if X.shape[1] != self.n_chans_:
            raise ValueError(
                f"'X' has {X.shape[1]} channels, but the transformer was fitted on {self.n_chans_}."
            )
        if X.shape[2] < self.n_per_seg_:
            raise ValueError(
                f"'X' windows have {X.shape[2]} samples, fewer than the fitted "
                f"n_per_seg={self.n_per_seg_}."
            )
        psd, freqs = psd_array_welch(
            X,
            self.sfreq_,
            fmin=min(low for _, low, _ in self.bands_),
            fmax=max(high for _, _, high in self.bands_),
            n_fft=self.n_per_seg_,
            n_per_seg=self.n_per_seg_,
            n_overlap=self.n_per_seg_ // 2,
            verbose=False,
        )  # psd: (n_windows, n_chans, n_freqs)
        power = np.stack(
            [psd[..., (freqs >= low) & (freqs < high)].mean(-1) for _, low, high in self.bands_],
            axis=-1,
        )  # (n_windows, n_chans, n_bands)
        if self.log:
            power = np.log10(np.maximum(power, np.finfo(np.float64).tiny))
        return power.reshape(len(power), -1)

    def get_feature_names_out(self, input_features=None):
        """Feature names ``<channel>_<band>``, in the order of :meth:`transform`."""
        check_is_fitted(self, "bands_")
        chans = self.ch_names_ or [f"ch{c}" for c in range(self.n_chans_)]
        return np.asarray([f"{ch}_{name}" for ch in chans for name, _, _ in self.bands_])


def _logistic(C, random_state):
    """The class-balanced logistic regression of the floors and the probe."""
    return LogisticRegression(
        C=C, class_weight="balanced", max_iter=LOGISTIC_MAX_ITER, random_state=random_state
    )


def _floor_pipeline(features, C, random_state):
    """A floor: the named ``features`` steps, then standardisation and :func:`_logistic`."""
    classifier = _logistic(C, random_state)
    return LabelledPipeline(
        [*features, ("standardscaler", StandardScaler()), ("logisticregression", classifier)]
    )


def band_power_pipeline(sfreq=None, bands=DEFAULT_BANDS, n_per_seg=None, C=1.0, random_state=None):
    """The classical floor: log band power, standardised, into a logistic regression.

    :class:`BandPowerFeatures` (the log mean power of each channel in six bands
    spanning 0.5-45 Hz by default), a :class:`~sklearn.preprocessing.StandardScaler`
    and a class-balanced :class:`~sklearn.linear_model.LogisticRegression`, as a
    :class:`LabelledPipeline`. It takes the same input as
    :class:`~braindecode_pars.PARSClassifier`: arrays with ``sfreq``, or braindecode
    windows (and ``Subset`` objects and ``SliceDataset`` objects of them) whose labels and
    sampling rate it reads.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate of the windows in Hz (None: read from the windows; array
        input then fails).
    bands : dict | sequence of (name, low, high)
        Frequency bands in Hz; see :class:`BandPowerFeatures`.
    n_per_seg : int | None
        Length of Welch's segments in samples (None: 2 s); see
        :class:`BandPowerFeatures`.
    C : float
        Inverse L2 regularisation strength of the logistic regression, in (0, inf]
        (checked by scikit-learn in ``fit``).
    random_state : int | None
        Seed of the logistic regression's solver (lbfgs, which is deterministic).

    Returns
    -------
    pipeline : LabelledPipeline
        Steps ``"bandpowerfeatures"`` (:class:`BandPowerFeatures`),
        ``"standardscaler"`` and ``"logisticregression"``
        (``LogisticRegression(C=C, class_weight="balanced", max_iter=1000,
        random_state=random_state)``); search over ``C`` as
        ``logisticregression__C``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(500) / 100
    >>> y = np.repeat([0, 1], 20)
    >>> alpha = np.sin(2 * np.pi * 10 * t + rng.uniform(0, 6.3, (40, 1, 1)))
    >>> X = rng.standard_normal((40, 3, 500)) + 2 * y[:, None, None] * alpha
    >>> floor = band_power_pipeline(sfreq=100).fit(X, y)
    >>> floor.score(X, y)
    1.0
    >>> list(floor.named_steps)
    ['bandpowerfeatures', 'standardscaler', 'logisticregression']

    braindecode windows carry their labels and sampling rate:
    ``band_power_pipeline().fit(windows)``, or ``.fit(SliceDataset(windows))``.
    """
    features = BandPowerFeatures(sfreq=sfreq, bands=bands, n_per_seg=n_per_seg)
    return _floor_pipeline([("bandpowerfeatures", features)], C, random_state)


def riemann_pipeline(sfreq=None, estimator="oas", metric="riemann", C=1.0, random_state=None):
    """The Riemannian floor: shrunk covariances, tangent space, logistic regression.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate of the windows (checked against the windows' own).
    estimator : str
        Covariance estimator of :class:`pyriemann.estimation.Covariances`; ``"oas"``
        (Oracle Approximating Shrinkage) and ``"lwf"`` (Ledoit-Wolf) shrink, which
        keeps the matrices well conditioned with few samples per channel.
    metric : str
        Metric of :class:`pyriemann.tangentspace.TangentSpace` (its reference point
        is the mean of the training covariances in that metric).
    C : float
        Inverse L2 regularisation strength of the logistic regression.
    random_state : int | None
        Seed of the logistic regression's solver.

    Returns
    -------
    pipeline : LabelledPipeline
        Steps ``"windowsarray"`` (:class:`WindowsArray`), ``"covariances"``,
        ``"tangentspace"``, ``"standardscaler"`` and ``"logisticregression"``
        (class-balanced, as in :func:`band_power_pipeline`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 30)
    >>> source = rng.standard_normal((60, 1, 400))
    >>> X = rng.standard_normal((60, 2, 400))
    >>> X[y == 1] += source[y == 1]  # class 1: the two channels share a source
    >>> X[y == 0] += source[y == 0] * np.array([[1.0], [-1.0]])  # class 0: opposite signs
    >>> riemann_pipeline(sfreq=100).fit(X[::2], y[::2]).score(X[1::2], y[1::2]) > 0.9
    True
    """
    from pyriemann.estimation import Covariances
    from pyriemann.tangentspace import TangentSpace

    features = [
        ("windowsarray", WindowsArray(sfreq=sfreq)),
        ("covariances", Covariances(estimator=estimator)),
        ("tangentspace", TangentSpace(metric=metric)),
    ]
    return _floor_pipeline(features, C, random_state)
