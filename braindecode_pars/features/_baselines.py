"""Classical floors for EEG window classification: log band power, and Riemannian tangent
space, each into a logistic regression.

Any learned model should beat this: the log mean power of each channel in six
frequency bands spanning 0.5-45 Hz (Welch's method), standardised, fed to a
class-balanced logistic regression. It trains in seconds on a CPU, so every
benchmark can report it beside the pretrained models.

With one block, the probe's scaling is standardisation, so this floor is
``PARSProbe(tangent_space=False)`` (the same features, scaling and regression).

The floor is a plain scikit-learn pipeline, :func:`band_power_pipeline`:
:class:`BandPowerFeatures`, a :class:`~sklearn.preprocessing.StandardScaler` and a
:class:`~sklearn.linear_model.LogisticRegression`, steps named ``"bandpowerfeatures"``,
``"standardscaler"`` and ``"logisticregression"`` (so ``logisticregression__C`` in a
grid search). It reads its input through the package's one adapter,
:func:`~braindecode_pars.io.windows.read_windows`, and so takes what
:class:`~braindecode_pars.PARSClassifier` takes: arrays with ``sfreq``, braindecode
windows (whose labels and sampling rate it reads), ``Subset`` objects and skorch
``SliceDataset`` objects of them, and the lists of window items scikit-learn makes of
windows when it splits them. :class:`LabelledPipeline`, the pipeline it returns,
reads the labels of windows in ``fit`` and ``score`` when ``y`` is None.

The second floor, :func:`riemann_pipeline`, is the standard classical decoder of
multi-channel EEG: shrunk spatial covariance matrices of the windows (as
:class:`pyriemann.estimation.Covariances` estimates them, flat channels read as
missing: ``braindecode_pars.features.blocks.WindowCovariances``), mapped to the
tangent space at their
Riemannian mean (:class:`pyriemann.tangentspace.TangentSpace`), into the same
logistic regression. Band power sees each channel's spectrum; the tangent space sees
the channels' covariances, which band power cannot (two classes that differ only in
how channels co-vary look alike to it).
"""

from __future__ import annotations

from sklearn.preprocessing import StandardScaler

from braindecode_pars.features.blocks import BandPowerFeatures, WindowCovariances
from braindecode_pars.features.recipe import _logistic
from braindecode_pars.io.estimator_inputs import LabelledPipeline, WindowsArray


def _floor_pipeline(features, C, random_state):
    """A floor: the named ``features`` steps, then standardisation and :func:`_logistic`."""
    classifier = _logistic(C, random_state)
    return LabelledPipeline(
        [*features, ("standardscaler", StandardScaler()), ("logisticregression", classifier)]
    )


def band_power_pipeline(sfreq=None, bands=None, n_per_seg=None, C=1.0, random_state=None):
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
    bands : str | dict | sequence of (name, low, high) | None
        Frequency bands in Hz; None: six bands 0.5-45 Hz cut at the Nyquist frequency
        (:data:`~braindecode_pars.features.DEFAULT_BANDS`); a preset's name of
        :data:`~braindecode_pars.features.blocks.BAND_PRESETS`, ``"default"`` or
        ``"sleep"`` (sigma 11-16 Hz whole, for sleep spindles); see
        :class:`BandPowerFeatures`.
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
        keeps the matrices well conditioned with few samples per channel. A flat
        channel of a window (a disconnected amplifier, a zero-padded end: its variance
        at most ``braindecode_pars.features.blocks.FLAT_RATIO`` times its median
        over the fitted windows) enters as an independent channel of its usual
        variance, so that every covariance stays positive definite; ``fit`` warns
        when some windows hold flat channels.
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
        Steps ``"windowsarray"`` (:class:`WindowsArray`), ``"covariances"``
        (``braindecode_pars.features.blocks.WindowCovariances``),
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
    from pyriemann.tangentspace import TangentSpace

    features = [
        ("windowsarray", WindowsArray(sfreq=sfreq)),
        ("covariances", WindowCovariances(estimator=estimator)),
        ("tangentspace", TangentSpace(metric=metric)),
    ]
    return _floor_pipeline(features, C, random_state)
