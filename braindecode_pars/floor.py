"""A classical floor for EEG window classification: log band power, then logistic regression.

Any learned model should beat this: the log mean power of each channel in six
frequency bands spanning 0.5-45 Hz (Welch's method), standardised, fed to a
class-balanced logistic regression. It trains in seconds on a CPU, so every
benchmark can report it beside the pretrained models.
"""

from __future__ import annotations

import numbers

import numpy as np
from braindecode.datasets import BaseConcatDataset
from mne.time_frequency import psd_array_welch
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from ._checks import check_int, check_range
from .estimator import windows_to_arrays

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


def _windows_input(X, y, sfreq):
    """Windows as a float array, their labels and sampling rate.

    ``X`` is an array of shape (n_windows, n_chans, n_times) or braindecode windows;
    for windows, ``y`` defaults to their metadata's ``target`` column and ``sfreq`` to
    their sampling rate.
    """
    ch_names = None
    if isinstance(X, BaseConcatDataset):
        if len(X) == 0:
            raise ValueError("'X' holds no window.")
        X_arr, targets, windows_sfreq = windows_to_arrays(X)
        if sfreq is not None and abs(sfreq - windows_sfreq) > 1e-6:
            raise ValueError(
                f"'sfreq'={sfreq} differs from the windows' sampling rate ({windows_sfreq} Hz)."
            )
        first = X.datasets[0]
        info = first.raw.info if getattr(first, "raw", None) is not None else first.windows.info
        ch_names = list(info["ch_names"]) if len(info["ch_names"]) == X_arr.shape[1] else None
        if y is None:
            # as PARSClassifier: the metadata's targets, which also hold a description's
            # 'target' column when the recordings were made without target_name
            metadata = X.get_metadata()
            y = metadata["target"].to_numpy() if "target" in metadata else targets
        return X_arr.astype(np.float64), y, windows_sfreq, ch_names
    X_arr = np.asarray(X, dtype=np.float64)
    if X_arr.ndim != 3:
        raise ValueError(
            "'X' must be braindecode windows or an array of shape (n_windows, n_chans, "
            f"n_times), but got an array of shape {X_arr.shape}."
        )
    if X_arr.shape[0] == 0:
        raise ValueError("'X' holds no window.")
    if sfreq is None:
        raise ValueError(
            "Array input needs the sampling rate: set 'sfreq' (or pass braindecode "
            "windows, whose sampling rate is read from their recordings)."
        )
    return X_arr, y, float(sfreq), ch_names


class BandPowerFeatures(TransformerMixin, BaseEstimator):
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
        (array input then fails).
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
    n_features_out_ : int
        ``n_chans_ * len(bands_)``.

    See Also
    --------
    BandPowerClassifier : these features, standardised, into a logistic regression.

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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags

    def fit(self, X, y=None):
        """Check the parameters against the windows.

        Parameters
        ----------
        X : braindecode BaseConcatDataset | ndarray, shape (n_windows, n_chans, n_times)
            The windows.
        y : None
            Ignored.

        Returns
        -------
        self : BandPowerFeatures
        """
        if self.sfreq is not None:
            check_range("sfreq", self.sfreq, 0, np.inf, low_open=True)
        X, _, sfreq, ch_names = _windows_input(X, None, self.sfreq)
        n_times = X.shape[-1]
        if self.n_per_seg is None:
            n_per_seg = min(n_times, int(round(DEFAULT_SEGMENT_SECONDS * sfreq)))
        else:
            n_per_seg = check_int("n_per_seg", self.n_per_seg, 2)
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
        return self

    def transform(self, X):
        """Compute the band powers.

        Parameters
        ----------
        X : braindecode BaseConcatDataset | ndarray, shape (n_windows, n_chans, n_times)
            The windows, with the channels seen in ``fit``.

        Returns
        -------
        features : ndarray, shape (n_windows, n_chans * n_bands)
            For each channel in turn, the (log) mean power of each band.
        """
        check_is_fitted(self, "bands_")
        X, _, _, _ = _windows_input(X, None, self.sfreq_)
        if X.shape[1] != self.n_chans_:
            raise ValueError(
                f"'X' has {X.shape[1]} channels, but the transformer was fitted on {self.n_chans_}."
            )
        if X.shape[2] < self.n_per_seg_:
            raise ValueError(
                f"'X' windows have {X.shape[2]} samples, fewer than the fitted "
                f"n_per_seg={self.n_per_seg_}."
            )
        if not np.isfinite(X).all():
            raise ValueError("'X' holds NaN or infinite values.")
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


def band_power_pipeline(sfreq=None, bands=DEFAULT_BANDS, n_per_seg=None, C=1.0, random_state=None):
    """Band power, standardisation and logistic regression as a scikit-learn pipeline.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate of the windows in Hz (None: read from braindecode windows).
    bands : dict | sequence of (name, low, high)
        See :class:`BandPowerFeatures`.
    n_per_seg : int | None
        See :class:`BandPowerFeatures`.
    C : float
        Inverse L2 regularisation strength of the logistic regression.
    random_state : int | None
        Seed of the logistic regression's solver.

    Returns
    -------
    pipeline : sklearn.pipeline.Pipeline
        ``BandPowerFeatures -> StandardScaler -> LogisticRegression(class_weight=
        "balanced", max_iter=1000)``. It takes arrays of shape
        (n_windows, n_chans, n_times) and explicit labels; for braindecode windows
        use :class:`BandPowerClassifier`, which reads their labels.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.standard_normal((20, 2, 400)), np.repeat([0, 1], 10)
    >>> pipe = band_power_pipeline(sfreq=100).fit(X, y)
    >>> pipe.predict(X).shape
    (20,)
    """
    return make_pipeline(
        BandPowerFeatures(sfreq=sfreq, bands=bands, n_per_seg=n_per_seg),
        StandardScaler(),
        LogisticRegression(C=C, class_weight="balanced", max_iter=1000, random_state=random_state),
    )


class BandPowerClassifier(ClassifierMixin, BaseEstimator):
    """The classical floor: log band power per channel, standardised, logistic regression.

    :class:`BandPowerFeatures` (the log mean power of each channel in six bands
    spanning 0.5-45 Hz), a :class:`~sklearn.preprocessing.StandardScaler` and a
    class-balanced :class:`~sklearn.linear_model.LogisticRegression`. It takes the
    same input as :class:`~braindecode_pars.PARSClassifier`: arrays, or braindecode
    windows whose labels and sampling rate it reads.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate of the windows in Hz. None reads it from braindecode windows
        (array input then fails).
    bands : dict | sequence of (name, low, high)
        Frequency bands in Hz; see :class:`BandPowerFeatures`.
    n_per_seg : int | None
        Length of Welch's segments in samples (None: 2 s).
    C : float
        Inverse L2 regularisation strength of the logistic regression.
    random_state : int | None
        Seed of the logistic regression's solver.

    Attributes
    ----------
    pipeline_ : sklearn.pipeline.Pipeline
        The fitted pipeline (see :func:`band_power_pipeline`).
    classes_ : ndarray
        The class labels.
    sfreq_ : float
        The sampling rate used.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(500) / 100
    >>> y = np.repeat([0, 1], 20)
    >>> alpha = np.sin(2 * np.pi * 10 * t + rng.uniform(0, 6.3, (40, 1, 1)))
    >>> X = rng.standard_normal((40, 3, 500)) + 2 * y[:, None, None] * alpha
    >>> clf = BandPowerClassifier(sfreq=100).fit(X, y)
    >>> clf.score(X, y)
    1.0
    """

    def __init__(self, sfreq=None, bands=DEFAULT_BANDS, n_per_seg=None, C=1.0, random_state=None):
        self.sfreq = sfreq
        self.bands = bands
        self.n_per_seg = n_per_seg
        self.C = C
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags

    def fit(self, X, y=None):
        """Fit the band-power features' scaler and the logistic regression.

        Parameters
        ----------
        X : braindecode BaseConcatDataset | ndarray, shape (n_windows, n_chans, n_times)
            The windows.
        y : array-like, shape (n_windows,) | None
            Labels; None reads the windows' targets (braindecode windows only).

        Returns
        -------
        self : BandPowerClassifier
        """
        check_range("C", self.C, 0, np.inf, low_open=True)
        if self.sfreq is not None:
            check_range("sfreq", self.sfreq, 0, np.inf, low_open=True)
        X, y, sfreq, _ = _windows_input(X, y, self.sfreq)
        if y is None:
            raise ValueError("'y' is required with array input (braindecode windows carry it).")
        y = np.asarray(y)
        if y.shape != (len(X),):
            raise ValueError(f"'y' must have shape ({len(X)},), but got {y.shape}.")
        self.pipeline_ = band_power_pipeline(
            sfreq, self.bands, self.n_per_seg, self.C, self.random_state
        ).fit(X, y)
        self.classes_ = self.pipeline_.classes_
        self.sfreq_ = sfreq
        return self

    def _features_input(self, X):
        check_is_fitted(self, "pipeline_")
        X, _, _, _ = _windows_input(X, None, self.sfreq_)
        return X

    def predict(self, X):
        """Predict the class of each window.

        Parameters
        ----------
        X : braindecode BaseConcatDataset | ndarray, shape (n_windows, n_chans, n_times)
            The windows.

        Returns
        -------
        y_pred : ndarray, shape (n_windows,)
        """
        return self.pipeline_.predict(self._features_input(X))

    def predict_proba(self, X):
        """Class probabilities of each window, columns in the order of ``classes_``.

        Parameters
        ----------
        X : braindecode BaseConcatDataset | ndarray, shape (n_windows, n_chans, n_times)
            The windows.

        Returns
        -------
        proba : ndarray, shape (n_windows, n_classes)
        """
        return self.pipeline_.predict_proba(self._features_input(X))

    def decision_function(self, X):
        """The logistic regression's decision values.

        Parameters
        ----------
        X : braindecode BaseConcatDataset | ndarray, shape (n_windows, n_chans, n_times)
            The windows.

        Returns
        -------
        scores : ndarray, shape (n_windows,) or (n_windows, n_classes)
        """
        return self.pipeline_.decision_function(self._features_input(X))

    def score(self, X, y=None, sample_weight=None):
        """Accuracy; ``y`` defaults to the targets of braindecode windows.

        Parameters
        ----------
        X : braindecode BaseConcatDataset | ndarray, shape (n_windows, n_chans, n_times)
            The windows.
        y : array-like, shape (n_windows,) | None
            True labels (None: the windows' targets).
        sample_weight : array-like, shape (n_windows,) | None
            Weights of the windows.

        Returns
        -------
        score : float
        """
        check_is_fitted(self, "pipeline_")
        X, y, _, _ = _windows_input(X, y, self.sfreq_)
        if y is None:
            raise ValueError("'y' is required with array input (braindecode windows carry it).")
        return super().score(X, y, sample_weight=sample_weight)
