"""A linear probe of a frozen encoder, with the classical features beside it.

With a few labelled subjects, fine-tuning a transformer (or even training a spatial
head over a frozen one) has many weights and little data to fit them; a logistic
regression over fixed features has few. :func:`probe_pipeline` is that recipe for a
pretrained :class:`~braindecode_pars.PatchEncoder`:

- :class:`EncoderFeatures`: each channel of each window through the frozen encoder
  (fixed 1-s patches, full positional embedding), the mean and the standard deviation
  of its tokens over patches: ``2 * n_chans * emb_dim`` features per window
  (``readout`` reads the mean alone, or every block's; ``crop_seconds`` keeps long
  windows' positions in the range the encoder was pretrained on);
- beside them, optionally, the two classical floors' features: log band power
  (:class:`~braindecode_pars.floor.BandPowerFeatures`), which gives back the absolute
  amplitude that the encoder's instance normalisation removes, and the Riemannian
  tangent space of the channels' shrunk covariances, which sees how channels co-vary;
- each block standardised and divided by the square root of its size
  (:class:`BlockScaler`), so that a block's share of the L2 penalty does not grow
  with its number of features (the encoder's 2,432 features of 19 channels would
  otherwise drown the 114 band powers of the same channels);
- a class-balanced logistic regression.

Every step is a scikit-learn estimator: the pipeline clones, pickles, grid-searches
(``logisticregression__C``) and takes what the floors take (arrays with ``sfreq``,
braindecode windows, ``Subset`` objects and ``SliceDataset`` objects of them, ``mne.Epochs``).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import FeatureUnion, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from ._checks import check_device, check_int, check_option, check_range
from .datasets.adapters import read_windows
from .floor import DEFAULT_BANDS, BandPowerFeatures, _logistic
from .models.encoder import checked_encoder
from .windows_input import (
    LabelledPipeline,
    WindowsArray,
    WindowsFeaturesMixin,
)

#: The readouts of :class:`EncoderFeatures`, and the one read unless another is asked.
READOUTS = ("mean", "mean+std", "blocks")
DEFAULT_READOUT = "mean+std"


class EncoderFeatures(WindowsFeaturesMixin, TransformerMixin, BaseEstimator):
    """Each channel's embedding by a frozen single-channel encoder.

    Every channel of every window goes through the encoder on its own (fixed 1-s
    patches on a one-patch stride, every patch with its positional embedding, as in
    fine-tuning); by default the mean and the standard deviation over patches of its
    last block's tokens are read.
    Nothing is trained: ``fit`` loads and checks the encoder, ``transform`` computes
    the features, under ``torch.no_grad`` in float32.

    Token covariance over patches (``emb_dim ** 2`` numbers per channel) is not
    offered: 4,096 features per channel for a 64-wide encoder, 77,824 for 19 channels,
    against one labelled subject.

    Parameters
    ----------
    encoder : str | Path | PatchEncoder
        A shipped encoder's name (``"pars-small"``), a folder or file written by the
        package (see :func:`~braindecode_pars.hub.load_encoder`), or an encoder. It is
        copied in ``fit``: the given object is never changed.
    sfreq : float | None
        Sampling rate of the windows (None: read from windows that carry it). It must
        be the encoder's; resample other windows first
        (:func:`~braindecode_pars.datasets.adapters.resample_windows`).
    readout : {"mean+std", "mean", "blocks"}
        What is read from each channel's tokens (``F = emb_dim``). The default was
        ``"mean"`` until ``"mean+std"`` passed the rule set for it on the development
        tasks' selection splits (:doc:`/benchmarks/dev_tasks`, "What the probe
        reads from the encoder"); ``"blocks"`` did not:

        - ``"mean"``: the last block's tokens (after the encoder's final LayerNorm)
          averaged over patches, ``F`` features per channel;
        - ``"mean+std"``: their mean and their standard deviation over patches
          (``ddof=0``; 0 for a window of one patch), ``2 F`` per channel;
        - ``"blocks"``: the output of every transformer block, each through the
          encoder's final LayerNorm, averaged over patches and concatenated from the
          first block to the last, ``depth * F`` per channel; its last ``F`` are
          ``"mean"``.
    crop_seconds : float | None
        None: each channel's whole window through the encoder at once, its patches at
        positions 0, 1, 2, ... (a window longer than the crops the encoder was
        pretrained on, 10 s for the shipped encoders, reaches positions it never saw).
        A number: windows longer than that are cut into consecutive crops of
        ``crop_seconds`` (a whole number of patches), the last one shorter if the
        window is not a whole number of crops; each crop is normalised and encoded on
        its own (positions from 0, attention within the crop, as in pretraining) and
        ``readout`` is taken over the tokens of all the crops together. The patches
        are those of the whole window; a window no longer than ``crop_seconds`` gives
        the same features as None.
    batch_size : int
        Windows per forward pass.
    device : str
        Torch device of the forward passes (``"cpu"`` or ``"cuda"``).

    Attributes
    ----------
    encoder_ : PatchEncoder
        The encoder used, in evaluation mode.
    n_chans_ : int
        The number of channels seen in ``fit``.
    n_features_out_ : int
        ``n_chans_ * encoder_.emb_dim`` times 1 (``"mean"``), 2 (``"mean+std"``) or
        ``encoder_.depth`` (``"blocks"``).

    Examples
    --------
    >>> import numpy as np
    >>> from braindecode_pars import PatchEncoder
    >>> encoder = PatchEncoder(sfreq=100, emb_dim=16, depth=1, n_heads=2, ff_dim=32)
    >>> X = np.random.default_rng(0).standard_normal((5, 3, 400))
    >>> EncoderFeatures(encoder, sfreq=100).fit_transform(X).shape  # 3 channels x (16 + 16)
    (5, 96)
    >>> EncoderFeatures(encoder, sfreq=100, readout="mean").fit_transform(X).shape
    (5, 48)
    """

    def __init__(
        self,
        encoder="pars-small",
        sfreq=None,
        batch_size=256,
        device="cpu",
        *,
        readout=DEFAULT_READOUT,
        crop_seconds=None,
    ):
        self.encoder = encoder
        self.sfreq = sfreq
        self.batch_size = batch_size
        self.device = device
        self.readout = readout
        self.crop_seconds = crop_seconds

    def _fit(self, X):
        from .hub import load_encoder

        check_int("batch_size", self.batch_size, 1)
        check_device("device", self.device)
        check_option("readout", self.readout, READOUTS)
        if self.crop_seconds is not None:
            check_range("crop_seconds", self.crop_seconds, 0, np.inf, low_open=True)
        windows = read_windows(X, sfreq=self.sfreq, name="X")
        if windows.sfreq is None:
            raise ValueError(
                "'sfreq' is None and the windows do not carry their sampling rate: set "
                "'sfreq' (the encoder's rate) for array input."
            )
        encoder = copy.deepcopy(load_encoder(self.encoder))
        self.encoder_ = checked_encoder(encoder, windows.sfreq, windows.X.shape[-1]).eval()
        self.sfreq_ = float(windows.sfreq)
        self.crop_size_ = None
        if self.crop_seconds is not None:
            size = int(round(self.crop_seconds * self.sfreq_))
            patch = self.encoder_.patch_size
            if size < patch or size % patch:
                raise ValueError(
                    f"'crop_seconds'={self.crop_seconds} gives crops of {size} samples at "
                    f"sfreq={self.sfreq_}; they must be a whole number of patches of "
                    f"{patch} samples (patch_seconds={self.encoder_.patch_seconds})."
                )
            self.crop_size_ = size
        self.n_chans_ = windows.X.shape[1]
        per_token = {"mean": 1, "mean+std": 2, "blocks": self.encoder_.depth}[self.readout]
        self.n_features_out_ = self.n_chans_ * self.encoder_.emb_dim * per_token
        return windows.X

    def transform(self, X):
        """The features of ``X``.

        Returns
        -------
        features : ndarray, shape (n_windows, n_features)
            For each channel in turn, its readout (``"mean"``: its mean token;
            ``"mean+std"``: the mean token, then the standard deviation; ``"blocks"``:
            the mean token of each block, first to last); ``n_features`` is the fitted
            ``n_features_out_``.
        """
        check_is_fitted(self, "encoder_")
        X = read_windows(X, sfreq=self.sfreq_, name="X").X
        if X.shape[1] != self.n_chans_:
            raise ValueError(
                f"'X' has {X.shape[1]} channels but the features were fitted on {self.n_chans_}."
            )
        return self._features(X)

    def _features(self, X):
        encoder = self.encoder_.to(self.device)
        out = []
        try:
            with torch.no_grad():
                for start in range(0, len(X), self.batch_size):
                    batch = torch.as_tensor(
                        np.asarray(X[start : start + self.batch_size], dtype=np.float32),
                        device=self.device,
                    )
                    out.append(self._batch_features(encoder, batch).cpu().numpy())
        finally:
            self.encoder_.cpu()  # kept on the CPU between calls: it pickles anywhere
        return np.concatenate(out).astype(np.float64)

    def _batch_features(self, encoder, X):
        """(batch, n_chans, n_times) -> (batch, n_features_out_)."""
        B, C, T = X.shape
        flat = X.reshape(B * C, 1, T)
        crop = T if self.crop_size_ is None else self.crop_size_
        # each crop's tokens of each block read, (B * C, n_patches, emb_dim), then the
        # crops' patches side by side
        crops = [
            channel_block_tokens(encoder, flat[..., s : s + crop], self.readout == "blocks")
            for s in range(0, T, crop)
            if s == 0 or T - s >= encoder.patch_size
        ]
        blocks = [torch.cat(parts, dim=1) for parts in zip(*crops, strict=True)]
        if self.readout == "mean+std":
            (tokens,) = blocks
            read = [tokens.mean(dim=1), tokens.std(dim=1, unbiased=False)]
        else:
            read = [tokens.mean(dim=1) for tokens in blocks]
        return torch.cat(read, dim=-1).view(B, -1)


def channel_block_tokens(encoder, X, every_block=False):
    """The tokens of single-channel windows ``X`` (batch, 1, n_times): fixed patches on
    a one-patch stride, the full positional embedding, as ``encoder(X)``; a list of
    one tensor (batch, n_patches, emb_dim), the encoder's output, or with
    ``every_block`` one per transformer block, each through the encoder's final
    LayerNorm (the last is the encoder's output)."""
    if not every_block:
        return [encoder(X)]
    encoder.check_input(X)
    starts = encoder.fixed_starts(X.shape[-1], device=X.device)
    tokens = encoder.tokenize(X, starts) + encoder.position_embedding(starts)
    out = []
    for block in encoder.blocks:
        tokens = block(tokens)
        out.append(encoder.norm(tokens))
    return out


class BlockScaler(StandardScaler):
    """Standardise each feature, then divide all of them by the square root of their
    number, so that a block of features of any size has a total variance of 1.

    In a :class:`~sklearn.pipeline.FeatureUnion` of blocks into an L2-penalised model
    each block then weighs the same whatever its size. Parameters as
    :class:`~sklearn.preprocessing.StandardScaler`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((200, 16)) * 5 + 3
    >>> Z = BlockScaler().fit_transform(X)
    >>> round(float(Z.var(axis=0).sum()), 6)
    1.0
    """

    def transform(self, X, copy=None):
        return super().transform(X, copy=copy) / np.sqrt(self.n_features_in_)

    def inverse_transform(self, X, copy=None):
        return super().inverse_transform(np.asarray(X) * np.sqrt(self.n_features_in_), copy=copy)


def _raw_blocks(
    who, encoder, sfreq, band_power, bands, tangent_space, batch_size, device, **readout
):
    """(name, steps from windows to the block's raw features, kind) of each block on,
    kind "features" or "covariances"; ``who`` names the caller in the error;
    ``readout``: ``readout`` and ``crop_seconds`` of :class:`EncoderFeatures`."""
    blocks = []
    if encoder is not None:
        features = EncoderFeatures(
            encoder, sfreq=sfreq, batch_size=batch_size, device=device, **readout
        )
        blocks.append(("encoder", [features], "features"))
    if band_power:
        bands = DEFAULT_BANDS if bands is None else bands
        blocks.append(("bandpower", [BandPowerFeatures(sfreq=sfreq, bands=bands)], "features"))
    if tangent_space:
        from pyriemann.estimation import Covariances

        covariances = [WindowsArray(sfreq=sfreq), Covariances(estimator="oas")]
        blocks.append(("tangentspace", covariances, "covariances"))
    if not blocks:
        raise ValueError(
            f"{who} needs at least one block of features: 'encoder' is None and "
            "'band_power' and 'tangent_space' are both False."
        )
    return blocks


def _block_scaling(kind):
    """The steps from a block's raw features to what the regression sees: the tangent
    space (covariances), then :class:`BlockScaler`."""
    if kind == "covariances":
        from pyriemann.tangentspace import TangentSpace

        return [TangentSpace(metric="riemann"), BlockScaler()]
    return [BlockScaler()]


def probe_pipeline(
    encoder="pars-small",
    *,
    sfreq=None,
    band_power=True,
    bands=None,
    tangent_space=False,
    C=1.0,
    random_state=None,
    batch_size=256,
    device="cpu",
    readout=DEFAULT_READOUT,
    crop_seconds=None,
):
    """A logistic regression over a frozen encoder's features and classical features.

    Parameters
    ----------
    encoder : str | Path | PatchEncoder | None
        The encoder (see :class:`EncoderFeatures`); None leaves it out, which gives
        the classical features alone through the same scaling and model.
    sfreq : float | None
        Sampling rate of the windows (None: read from the windows).
    band_power : bool
        Add log band power (:class:`~braindecode_pars.floor.BandPowerFeatures`).
    bands : dict | sequence of (name, low, high) | None
        Its bands; None: six bands 0.5-45 Hz
        (:data:`~braindecode_pars.floor.DEFAULT_BANDS`).
    tangent_space : bool
        Add the Riemannian tangent space of the channels' covariances (OAS
        shrinkage, reference point the training windows' Riemannian mean).
    C : float
        Inverse L2 strength of the logistic regression.
    random_state : int | None
        Seed of the logistic regression's solver.
    batch_size, device, readout, crop_seconds
        Of :class:`EncoderFeatures`.

    Returns
    -------
    pipeline : LabelledPipeline
        Steps ``"features"`` (a :class:`~sklearn.pipeline.FeatureUnion` of the blocks
        ``"encoder"``, ``"bandpower"``, ``"tangentspace"`` that are on, each ending in
        a :class:`BlockScaler`) and ``"logisticregression"``
        (``class_weight="balanced"``).

    Examples
    --------
    >>> import numpy as np
    >>> from braindecode_pars import PatchEncoder
    >>> rng = np.random.default_rng(0)
    >>> t = np.arange(400) / 100
    >>> y = np.repeat([0, 1], 20)
    >>> alpha = np.sin(2 * np.pi * 10 * t + rng.uniform(0, 6.3, (40, 1, 1)))
    >>> X = rng.standard_normal((40, 2, 400)) * (1 + y[:, None, None]) + alpha
    >>> encoder = PatchEncoder(sfreq=100, emb_dim=16, depth=1, n_heads=2, ff_dim=32)
    >>> probe = probe_pipeline(encoder, sfreq=100).fit(X[::2], y[::2])
    >>> probe.score(X[1::2], y[1::2])
    1.0
    """
    raw = _raw_blocks(
        "probe_pipeline", encoder, sfreq, band_power, bands, tangent_space, batch_size, device,
        readout=readout, crop_seconds=crop_seconds,
    )  # fmt: skip
    blocks = [(name, make_pipeline(*steps, *_block_scaling(kind))) for name, steps, kind in raw]
    model = _logistic(C, random_state)
    return LabelledPipeline([("features", FeatureUnion(blocks)), ("logisticregression", model)])
