"""PARSProbe: the probe as a classifier, the default head of
:class:`~braindecode_pars.PARSClassifier`."""

from __future__ import annotations

import math
import warnings

from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .._checks import check_device, check_int, check_option, check_range
from ..align import AlignedProbe
from ..datasets.adapters import window_scale
from ..floor import bands_below_nyquist
from ..probe import probe_pipeline
from ..windows_input import WindowsInputMixin
from ._common import (
    check_encoder_rate,
    check_labels,
    read_fit_input,
    read_fitted,
)


class PARSProbe(WindowsInputMixin, ClassifierMixin, TransformerMixin, BaseEstimator):
    """The probe as a classifier: a class-balanced logistic regression over a frozen
    encoder's features, log band power and the Riemannian tangent space.

    The head that :class:`~braindecode_pars.PARSClassifier` puts over its encoder by
    default; usable alone. Without an encoder (``encoder=None``) it is the same
    model over the classical blocks only, which is what to compare an encoder with:
    the block of a pretrained encoder has to earn its place beside them. Each block
    is scaled to the same total variance (:class:`BlockScaler`); with ``align=
    "groups"`` each group (subject, block of runs) is aligned on its own windows
    first (:class:`~braindecode_pars.align.AlignedProbe`). ``X`` is read once per
    call, whatever it is (arrays with ``sfreq``, braindecode windows, ``Subset`` s
    and ``SliceDataset`` s of them, ``mne.Epochs``).

    **What to expect**: seconds per fit on a CPU; how each block scores on the
    development tasks is on the benchmarks page (``docs/benchmarks.rst``).

    Parameters
    ----------
    encoder : str | Path | PatchEncoder | None
        The frozen encoder: a shipped encoder's name (``"pars-small"``), a saved
        encoder's path, an instance (copied), or None for no encoder block.
    C : float
        Inverse L2 strength of the logistic regression.
    band_power, tangent_space : bool
        Whether to add the log band power block
        (:class:`~braindecode_pars.floor.BandPowerFeatures`, the bands below the
        Nyquist frequency) and the tangent-space block (OAS covariances, reference
        point the training windows' Riemannian mean).
    align : {None, "groups"}
        None: every window as it is. "groups": each group standardised and its
        covariances re-centred on its own windows, at ``fit`` and at ``predict``
        (transductive: a prediction depends on the windows predicted with it; the
        groups are ``groups``, the ``subject`` of braindecode windows, or all the
        windows of the call as one group). Each group should hold every class: on a
        label that is the subject's own (patient against control) it removes the
        signal.
    sfreq : float | None
        Sampling rate of array input; read from windows that carry it.
    batch_size, device
        The encoder's forward passes.
    random_state : int | None
        Seed of the logistic regression's solver.

    Attributes
    ----------
    probe_ : LabelledPipeline | AlignedProbe
        The fitted model (:func:`probe_pipeline`, or the aligned probe).
    classes_ : ndarray
    sfreq_, n_chans_, n_times_ : float, int, int
        What ``fit`` saw.
    scale_ : float
        The windows' amplitude at ``fit`` (median standard deviation); ``predict``
        warns when it changes a hundredfold (another unit).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 20)
    >>> X = rng.standard_normal((40, 2, 400)) * (1 + y[:, None, None])
    >>> PARSProbe(sfreq=100).fit(X[::2], y[::2]).score(X[1::2], y[1::2])
    1.0
    """

    # under metadata routing, ``score`` asks for the scored windows' groups (the aligned
    # probe aligns each group on itself)
    __metadata_request__score = {"groups": True}

    def __init__(
        self,
        encoder=None,
        *,
        C=100.0,
        band_power=True,
        tangent_space=True,
        align=None,
        sfreq=None,
        batch_size=256,
        device="cpu",
        random_state=None,
    ):
        self.encoder = encoder
        self.C = C
        self.band_power = band_power
        self.tangent_space = tangent_space
        self.align = align
        self.sfreq = sfreq
        self.batch_size = batch_size
        self.device = device
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags

    def _check_params(self):
        check_range("C", self.C, 0, math.inf, low_open=True)
        check_option("band_power", self.band_power, (False, True))
        check_option("tangent_space", self.tangent_space, (False, True))
        check_option("align", self.align, (None, "groups"))
        check_int("batch_size", self.batch_size, 1)
        check_device("device", self.device)

    def fit(self, X, y=None, groups=None):
        """Read the windows once, compute the blocks and fit the logistic regression.

        Parameters
        ----------
        X : windows | ndarray, shape (n_windows, n_chans, n_times)
        y : array-like, shape (n_windows,) | None
            Labels; None: read from the windows.
        groups : array-like, shape (n_windows,) | None
            The subject (or block) of each window, for ``align="groups"``.

        Returns
        -------
        self : PARSProbe
        """
        encoder, data, _ = read_fit_input(self, X, y, groups)
        if encoder is not None:
            check_encoder_rate(encoder, data.sfreq, data.X.shape[-1])
        if self.align is not None:
            AlignedProbe._groups(data.groups, len(data), fit=True)
            if data.groups is None:
                warnings.warn(
                    "align='groups' but fit has no groups: the training windows are aligned "
                    "as one group. Pass 'groups' (the subject of each window) to fit, e.g. "
                    "cross_val_score(clf, X, y, groups=g, params={'groups': g}), or "
                    "braindecode windows with a 'subject' column.",
                    UserWarning,
                    stacklevel=2,
                )
        self.sfreq_ = float(data.sfreq)
        self.n_chans_, self.n_times_ = data.shape
        self.scale_ = window_scale(data.X)
        make = probe_pipeline if self.align is None else AlignedProbe
        probe = make(
            encoder,
            sfreq=self.sfreq_,
            band_power=self.band_power,
            bands=bands_below_nyquist(self.sfreq_),
            tangent_space=self.tangent_space,
            C=self.C,
            random_state=self.random_state,
            batch_size=self.batch_size,
            device=self.device,
        )
        if self.align is None:
            self.probe_ = probe.fit(data.X, data.y)
        else:
            self.probe_ = probe.fit(data.X, data.y, groups=data.groups)
        self.classes_ = self.probe_.classes_
        return self

    def _read(self, X, y=None, groups=None):
        check_is_fitted(self, "probe_")
        return read_fitted(self, X, y, groups)

    def _call(self, method, data):
        if self.align is not None:
            return getattr(self.probe_, method)(data.X, groups=data.groups)
        if method == "transform":
            return self.probe_[:-1].transform(data.X)
        return getattr(self.probe_, method)(data.X)

    def predict_proba(self, X, groups=None):
        """Class probabilities, shape (n_windows, n_classes), columns in ``classes_``
        order; ``groups`` (None: the windows' own, else one group) with ``align``."""
        return self._call("predict_proba", self._read(X, groups=groups))

    def predict(self, X, groups=None):
        """Predicted labels, shape (n_windows,)."""
        proba = self.predict_proba(X, groups=groups)
        return self.classes_[proba.argmax(axis=1)]

    def transform(self, X, groups=None):
        """The scaled features the logistic regression sees, shape (n_windows,
        n_chans * emb_dim + 6 * n_chans + n_chans * (n_chans + 1) / 2) with every
        block on (fewer bands below a low Nyquist frequency)."""
        return self._call("transform", self._read(X, groups=groups))

    def fit_transform(self, X, y=None, groups=None):
        """``fit``, then ``transform`` of the same windows with the same ``groups`` (the
        aligned probe aligns them as ``fit`` did)."""
        return self.fit(X, y, groups).transform(X, groups=groups)

    def score(self, X, y=None, sample_weight=None, groups=None):
        """Accuracy; labels read from the windows when ``y`` is None."""
        from sklearn.metrics import accuracy_score

        data = self._read(X, y, groups)
        check_labels(data.y, at_least=1)
        predicted = self.classes_[self._call("predict_proba", data).argmax(axis=1)]
        return accuracy_score(data.y, predicted, sample_weight=sample_weight)
