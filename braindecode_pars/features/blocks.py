"""The probe's blocks of features, each a function of one window alone.

- :class:`EncoderFeatures`: each channel of each window through a frozen single-channel
  encoder (by default 1-s patches every half patch, overlapping as PARS pretraining
  draws them, every one with its positional embedding; withheld positions and other
  strides on request), the mean and the standard deviation of its tokens over patches
  by default;
- :class:`BandPowerFeatures`: log mean power of each channel in frequency bands
  (Welch's method), which gives back the amplitude the encoder's instance normalisation
  removes;
- :class:`WindowCovariances`: the channels' shrunk (OAS) covariances, which the tangent
  space of :mod:`~braindecode_pars.features.scaling` maps to features; they see how
  channels co-vary.

:func:`block_features` computes every block a recipe names from one read of the
windows, in chunks of windows (no float64 copy of the whole array is made).

**Flat channels.** A channel of a window is *flat* when its variance over the window is
at most :data:`FLAT_RATIO` times that channel's reference variance (its median over the
fitted windows' nonzero variances), exactly zero included: a disconnected amplifier, a
zero-padded end, a constant offset, float noise around one. Its covariance is singular
(the tangent space takes the logarithm of a zero eigenvalue) and its log band powers
those of rounding noise, or of 0; the classical blocks read it as missing instead: its
band powers are the channel's median over the fitted windows where it is not flat, and
in the covariances it is an independent channel of its reference variance (the other
channels' covariance is estimated without it). A window without flat channels gets
exactly the features it got without this rule; ``fit`` warns (``UserWarning``, once)
when some fitted windows hold flat channels (:func:`_warn_flat`). The encoder block
needs no rule: its instance normalisation maps a constant channel to zeros and float
noise around a constant to unit noise, finite features either way.
"""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np
import torch
from mne.time_frequency import psd_array_welch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_memory

from braindecode_pars._util.bands import check_named_bands
from braindecode_pars._util.checks import check_device, check_int, check_option, check_range
from braindecode_pars._util.logs import plural, warn_once
from braindecode_pars._util.params import store_params
from braindecode_pars.features._cache import (
    _Extractor,
    cached,
    encoder_digest,
)
from braindecode_pars.features._inputs import WindowsFeaturesMixin, read_array
from braindecode_pars.io import resample_windows
from braindecode_pars.io.estimator_inputs import WindowsInputMixin, read_input
from braindecode_pars.io.windows import read_windows
from braindecode_pars.models.encoder import checked_encoder

#: The readouts of :class:`EncoderFeatures`, and the one read unless another is asked.
_READOUTS = ("mean", "mean+std", "blocks")
DEFAULT_READOUT = "mean+std"
#: The six bands of ``bands=None`` (the preset ``"default"``), ``(name, low, high)`` in
#: Hz, each half-open ``[low, high)``: delta 0.5-4, theta 4-8, alpha 8-13, beta_low
#: 13-20, beta_high 20-30 and gamma 30-45 Hz. Each is cut at the Nyquist frequency of the
#: windows' rate (a band starting at or above it is left out). They split the sleep spindles'
#: 11-16 Hz between alpha and beta_low: for sleep, ``bands="sleep"``
#: (:data:`BAND_PRESETS`).
DEFAULT_BANDS = (
    ("delta", 0.5, 4.0),
    ("theta", 4.0, 8.0),
    ("alpha", 8.0, 13.0),
    ("beta_low", 13.0, 20.0),
    ("beta_high", 20.0, 30.0),
    ("gamma", 30.0, 45.0),
)
#: The named sets of bands that ``bands=`` takes (:class:`BandPowerFeatures`,
#: :func:`~braindecode_pars.features.band_power_pipeline`,
#: :class:`~braindecode_pars.PARSProbe`, so ``PARSClassifier(head=PARSProbe(...))``),
#: each cut at the Nyquist frequency as :data:`DEFAULT_BANDS` is: ``"default"``, those;
#: ``"sleep"``, the sleep-scoring bands with the spindles' sigma band whole, delta
#: 0.5-4, theta 4-8, alpha 8-11, sigma 11-16, beta 16-30 and gamma 30-45 Hz. On a built
#: spindle task (2-s windows, 12-14 Hz bursts in a 1/f background) the band-power floor
#: over the sleep set scored 5.7 and 7.3 points of balanced accuracy above the default
#: bands, at two burst amplitudes (:doc:`/changelog`).
BAND_PRESETS = {
    "default": DEFAULT_BANDS,
    "sleep": (
        ("delta", 0.5, 4.0),
        ("theta", 4.0, 8.0),
        ("alpha", 8.0, 11.0),
        ("sigma", 11.0, 16.0),
        ("beta", 16.0, 30.0),
        ("gamma", 30.0, 45.0),
    ),
}
#: A band whose power, relative to the strongest band of the same window and channel,
#: is this many decades (here 1,000 times) below the other windows' with no window in
#: between, holds no power in those windows: :func:`_warn_empty_bands`. Measured with a
#: Blackman-Harris window (sidelobes 92 dB down) on the bundled EEGMAT windows of seven
#: subjects: the widest gap between two windows' levels was under one decade in every
#: band and channel; with a third of them brought to 50 Hz and back, those sat 4
#: (polyphase) to 8 (FFT, MNE's default) decades below the others in 30-45 Hz. With
#: Welch's usual Hamming window the leakage of delta hides the gap (2 decades).
_EMPTY_BAND_DECADES = 3.0
#: Length of the Welch segments when ``n_per_seg`` is None: 2 s, a 0.5 Hz resolution.
_DEFAULT_SEGMENT_SECONDS = 2.0
#: The blocks a probe can hold, in the order they are stacked.
BLOCKS = ("encoder", "bandpower", "tangentspace")
#: Windows cast to float64 at a time by the classical blocks.
_CHUNK = 8
#: Seed of the draw of the tokens whose position :class:`EncoderFeatures` withholds when
#: ``0 < pos_mask_ratio < 1``: one draw per number of tokens, the same for every window.
_POS_MASK_SEED = 0
#: A channel of a window is flat when its variance over the window (float64, each
#: channel centred) is at most this fraction of the channel's reference variance
#: (:func:`_flat_reference`): a standard deviation 1,000 times below the channel's usual
#: one, 10 nV beside 10 uV of EEG, about the resolution of a 24-bit EEG amplifier. The
#: classical blocks read such a channel as missing (the module's docstring): its
#: covariance is singular and its log band powers those of rounding noise or of 0 (read
#: as -307.7), far outliers that squeeze every other window's standardised features. On
#: a built alpha task (40 training windows of 4 channels, 10 seeds), one window of zeros
#: took the band-power floor from 0.93 to 0.50 balanced accuracy (chance) with
#: ``log10(0)`` read as -307.7, to 0.91 read as missing; the probe without an encoder
#: (band power and tangent space), which raised on it, scores 0.89 with it read as
#: missing and 0.97 with it dropped (as without it): drop flat windows where you can.
FLAT_RATIO = 1e-6

logger = logging.getLogger(__name__)


def _check_bands(bands, sfreq):
    """``bands`` (``bands=``) as a list of ``(name, low, high)``, by the package's one
    band convention (:mod:`braindecode_pars._util.bands`): None or a preset's name of
    :data:`BAND_PRESETS`, its bands starting below the Nyquist frequency of ``sfreq``,
    each cut there; a user's band ending above it cut there, one starting at or above
    it refused. ``sfreq=np.inf`` checks the names and edges only."""
    return check_named_bands("bands", bands, BAND_PRESETS, sfreq)


def _empty_band_windows(X, sfreq, bands, n_per_seg):
    """For each band, the windows that hold no power in it where other windows do.

    Each window's and channel's spectrum is estimated by Welch's method with a
    Blackman-Harris window (whose leakage stays 92 dB down, so that an empty band reads
    empty beside a strong delta), in ``_CHUNK`` windows at a time; each band's mean power
    is taken relative to the strongest band of that window and channel, in decades. A
    band is empty in the windows below the widest gap of these levels over the windows
    when that gap is :data:`_EMPTY_BAND_DECADES` or more (on any channel).

    Returns
    -------
    empty : dict
        ``{band index: bool mask over the windows}``, for the bands empty in some
        windows only.
    """
    from scipy.signal import welch

    levels = np.empty((len(X), X.shape[1], len(bands)))
    for start in range(0, len(X), _CHUNK):
        chunk = np.asarray(X[start : start + _CHUNK], dtype=np.float64)
        freqs, psd = welch(
            chunk, fs=sfreq, window="blackmanharris", nperseg=n_per_seg,
            noverlap=n_per_seg // 2, axis=-1,
        )  # fmt: skip
        power = np.stack(
            [psd[..., (freqs >= lo) & (freqs < hi)].mean(-1) for _, lo, hi in bands], axis=-1
        )
        levels[start : start + len(chunk)] = np.log10(np.maximum(power, np.finfo(float).tiny))
    flat = levels.max(-1) <= np.log10(np.finfo(float).tiny) + 1  # windows of zeros
    levels = levels - levels.max(-1, keepdims=True)
    empty = {}
    for b in range(len(bands)):
        mask = np.zeros(len(X), dtype=bool)
        for c in range(X.shape[1]):
            kept = ~flat[:, c]
            values = np.sort(levels[kept, c, b])
            if len(values) < 2:
                continue
            gaps = np.diff(values)
            k = int(gaps.argmax())
            if gaps[k] >= _EMPTY_BAND_DECADES:
                mask |= kept & (levels[:, c, b] <= values[k])
        if mask.any():
            empty[b] = mask
    return empty


def _warn_empty_bands(X, sfreq, bands, n_per_seg):
    """Warn once when some windows hold no power in bands that others have
    (:func:`_empty_band_windows`): windows upsampled from recordings of a lower native
    rate, whose band powers there are numerical noise that a classifier can learn the
    rates from. Names how many windows (the first few), which bands, and the fixes."""
    empty = _empty_band_windows(X, sfreq, bands, n_per_seg)
    if not empty:
        return
    which = np.zeros(len(X), dtype=bool)
    for mask in empty.values():
        which |= mask
    shown = np.flatnonzero(which)
    first = ", ".join(str(i) for i in shown[:5]) + (", ..." if len(shown) > 5 else "")
    said = ", ".join(
        f"{bands[b][0]} ({bands[b][1]:g}-{bands[b][2]:g} Hz, {int(m.sum())} windows)"
        for b, m in empty.items()
    )
    warnings.warn(
        f"{int(which.sum())} of {len(X)} windows (windows {first}) hold no power in bands "
        f"where the other windows do (over {10**_EMPTY_BAND_DECADES:,.0f} times less, "
        f"relative to each window's strongest band): {said}. Windows upsampled from "
        "recordings of a lower native rate look like this (a recording at 50 Hz holds "
        "nothing above 25 Hz, whatever rate it is brought to): their band powers there are "
        "numerical noise, from which a classifier learns the recordings' rates rather than "
        "their EEG. Band-limit every recording below the lowest native Nyquist frequency "
        "(half the lowest rate recorded; load_recordings and load_labelled_recordings keep "
        "each recording's in the windows' description, 'native_sfreq'), e.g. h_freq=22 "
        "there for recordings at 50 Hz, or choose bands that end below it ('bands').",
        UserWarning,
        stacklevel=2,
    )


def _channel_variances(X):
    """Each channel's variance over each window (``ddof=0``, float64, the mean removed
    first), ``_CHUNK`` windows at a time: shape (n_windows, n_chans)."""
    out = np.empty(X.shape[:2])
    for start in range(0, len(X), _CHUNK):
        out[start : start + _CHUNK] = np.asarray(X[start : start + _CHUNK], np.float64).var(-1)
    return out


def _flat_reference(variances):
    """Each channel's reference variance, which :data:`FLAT_RATIO` is a fraction of.

    The median of the channel's nonzero variances over the windows (so that windows of
    zeros, a zero-padded end, do not drag it down), raised to at least
    :data:`FLAT_RATIO` times the median of the channels' references (so that a channel
    flat in every window, or of float noise alone, counts as flat beside the others);
    1.0 for every channel where no window has a nonzero variance.

    Parameters
    ----------
    variances : ndarray, shape (n_windows, n_chans)
        :func:`_channel_variances` of the windows.

    Returns
    -------
    reference : ndarray, shape (n_chans,)
        Positive, in the windows' unit squared.
    """
    reference = np.zeros(variances.shape[1])
    for c, column in enumerate(variances.T):
        nonzero = column[column > 0]
        if len(nonzero):
            reference[c] = np.median(nonzero)
    known = reference[reference > 0]
    if not len(known):
        return np.ones_like(reference)
    return np.maximum(reference, FLAT_RATIO * float(np.median(known)))


def _flat(variances, reference):
    """Whether each channel of each window is flat: (n_windows, n_chans) bool."""
    return variances <= FLAT_RATIO * reference


def _warn_flat(flat, ch_names=None):
    """Warn (``UserWarning``, once per process for the same text: ``warn_once``) when
    some windows hold flat channels (``flat``, (n_windows, n_chans), :func:`_flat`): how
    many windows are flat in every channel, how many more in some, which channels (the
    first few), what the blocks make of them and the fixes; the first windows' indices
    go to the log (INFO), which a fold's windows would make a new text at every fold."""
    some = flat.any(axis=1)
    if not some.any():
        return
    n_chans = flat.shape[1]
    every = int(flat.all(axis=1).sum())
    names = ch_names or [f"channel {c}" for c in range(n_chans)]
    counts = flat.sum(axis=0)
    order = [c for c in np.argsort(-counts, kind="stable") if counts[c]]
    said = ", ".join(f"{names[c]} in {plural(int(counts[c]), 'window')}" for c in order[:5])
    said += ", ..." if len(order) > 5 else ""
    shown = np.flatnonzero(some)
    logger.info(
        "Flat windows (in every channel or in some): %s%s.",
        ", ".join(str(i) for i in shown[:20]),
        ", ..." if len(shown) > 20 else "",
    )
    warn_once(
        f"Flat windows: {every} flat in every channel, {int(some.sum()) - every} more flat "
        f"in some ({said}). A channel of a window is flat when its variance is at most "
        f"FLAT_RATIO={FLAT_RATIO:g} times that channel's median variance over the fitted "
        "windows (a standard deviation 1,000 times smaller), exactly zero included: a "
        "disconnected amplifier or electrode, a zero-padded end, a constant offset. The "
        "band-power and covariance blocks read a flat channel as missing (its band powers "
        "are the channel's median, its covariance that of an independent channel of its "
        "usual variance), so that every feature stays finite, but those windows carry no "
        "EEG there: drop them (mne.Epochs(..., flat=dict(eeg=...)) rejects flat epochs), "
        "or interpolate the bad channels (mne's interpolate_bads) before windowing.",
        UserWarning,
        stacklevel=3,
    )


def _check_readout_tokens(crop_seconds, patch_stride_seconds, pos_mask_ratio):
    """Refuse, before any work, an encoder readout's crops, patch stride or share of
    withheld positions that no encoder could take (:class:`EncoderFeatures` checks the
    stride against its encoder's patch in ``fit``)."""
    if crop_seconds is not None:
        check_range("crop_seconds", crop_seconds, 0, np.inf, low_open=True)
    if patch_stride_seconds is not None:
        check_range("patch_stride_seconds", patch_stride_seconds, 0, np.inf, low_open=True)
    check_range("pos_mask_ratio", pos_mask_ratio, 0, 1)


class EncoderFeatures(WindowsFeaturesMixin, TransformerMixin, BaseEstimator):
    """Each channel's embedding by a frozen single-channel encoder.

    Every channel of every window goes through the encoder on its own. By default it
    is cut into patches (1 s for the shipped encoders) starting every half patch, each
    with the positional embedding of its start: PARS pretraining draws patches that
    overlap, and this readout scored above non-overlapping patches on the development
    tasks' selection splits (:ref:`patch-density`). ``patch_stride_seconds`` sets
    another stride (the patch length: non-overlapping patches, as fine-tuning reads them), and
    ``pos_mask_ratio`` withholds positions, as pretraining does for 80 % of its
    patches. Nothing is trained: ``fit`` loads and
    checks the encoder, ``transform`` computes the features, under ``torch.no_grad`` in
    float32.

    Parameters
    ----------
    encoder : str | Path | PatchEncoder
        A shipped encoder's name (``"pars-small"``), a folder or file written by the
        package (:func:`~braindecode_pars.hub.folders.load_encoder`), or an encoder (copied in
        ``fit``: the given object is never changed).
    sfreq : float | None
        Sampling rate of the windows (None: read from windows that carry it). Windows
        at another rate than the encoder's (100 Hz for the shipped encoders) are
        resampled to it, a batch at a time, before they are encoded
        (:func:`~braindecode_pars.io.resample_windows`: MNE's resampling,
        anti-aliasing included); the band-power and covariance blocks of a probe keep
        the windows' own rate.
    readout : {"mean+std", "mean", "blocks"}
        What is read from each channel's tokens (``F = emb_dim``): ``"mean+std"``, the
        last block's tokens (after the final LayerNorm) averaged over patches and their
        standard deviation (``ddof=0``), ``2 F`` per channel; ``"mean"``, the mean
        alone, ``F``; ``"blocks"``, every block's output through the final LayerNorm,
        averaged over patches, first to last, ``depth * F`` (its last ``F`` are
        ``"mean"``). ``"mean+std"`` passed the rule set for it on the development
        tasks' selection splits (:doc:`/benchmarks/dev_tasks`); ``"blocks"`` did not.
    crop_seconds : float | None
        None: each channel's whole window through the encoder at once (positions 0, 1,
        2, ...; a window longer than the crops the encoder was pretrained on, 10 s for
        the shipped encoders, reaches positions it never saw). A number: windows cut
        into consecutive crops of that length (a whole number of patches; the last one
        shorter), each normalised and encoded on its own, ``readout`` taken over the
        tokens of all the crops together.
    patch_stride_seconds : float | None
        The step between consecutive patches' starts. None (the default): half the
        encoder's patch (in whole samples), 0.5 s for the shipped encoders' 1-s patches:
        ``2 n - 1`` tokens from a window (or crop) of ``n`` seconds, starting every 0.5 s,
        each with the positional embedding of its start (in patch units: 0, 0.5, 1,
        ...), as PARS's uniform draws start anywhere. The patch length (1.0 for the
        shipped encoders): non-overlapping patches, with half the tokens to compute
        (:ref:`patch-density` says what each costs and scores). It
        must lie in ``(0, patch_seconds]`` and be a whole number of samples at the
        encoder's rate.
    pos_mask_ratio : float
        The share of each window's (each crop's) tokens whose positional embedding is
        replaced by the encoder's position-mask token (``pos_mask`` of
        :meth:`~braindecode_pars.PatchEncoder.forward`), in ``[0, 1]``. 0 (the default):
        every token has its position; 1: none has (the encoder reads the patches as it
        read the masked patches in pretraining); between, ``round(pos_mask_ratio * n)``
        of the ``n`` tokens, as PARS counts them (0.8 in pretraining), chosen uniformly at
        random by a fixed draw (seed :data:`_POS_MASK_SEED`), the same tokens for every
        window and channel, so that a window's features depend on that window alone.
    batch_size : int
        Windows per forward pass (8: the activations of 8 windows of 19 channels x 10 s
        through a 64-wide encoder stay near 5 MiB; raise it on a GPU).
    device : str
        Torch device of the forward passes.
    memory : str | joblib.Memory | None
        A cache, as ``Pipeline(memory=...)``'s (None: none): features read back for
        the same encoder (configuration, weights), settings and windows (every value,
        hashed); a grid over a probe's ``C`` runs the encoder once per fold.

    Attributes
    ----------
    encoder_ : PatchEncoder
        The encoder used, in evaluation mode.
    sfreq_ : float
        The windows' sampling rate.
    resample_ : bool
        Whether windows are resampled to the encoder's rate before encoding.
    n_chans_ : int
    n_tokens_ : int
        The tokens read from each channel of a window (over all its crops).
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
    """

    def __init__(
        self,
        encoder,
        sfreq=None,
        batch_size=8,
        device="cpu",
        *,
        readout=DEFAULT_READOUT,
        crop_seconds=None,
        patch_stride_seconds=None,
        pos_mask_ratio=0.0,
        memory=None,
    ):
        store_params(self, locals())

    def _fit(self, X):
        from braindecode_pars.hub.folders import load_encoder

        check_int("batch_size", self.batch_size, 1)
        check_device("device", self.device)
        check_memory(self.memory)
        check_option("readout", self.readout, _READOUTS)
        _check_readout_tokens(self.crop_seconds, self.patch_stride_seconds, self.pos_mask_ratio)
        windows = read_input(X, sfreq=self.sfreq)  # the one "no sampling rate" refusal
        encoder = copy.deepcopy(load_encoder(self.encoder))
        self.sfreq_ = float(windows.sfreq)
        rate = float(encoder.sfreq)
        self.resample_ = abs(rate - self.sfreq_) > 1e-6 * rate
        n_times = windows.X.shape[-1]
        if self.resample_:
            n_times = int(round(n_times * rate / self.sfreq_))
        self.encoder_ = checked_encoder(encoder, rate, n_times).eval()
        self.crop_size_ = None
        if self.crop_seconds is not None:
            size = int(round(self.crop_seconds * rate))
            patch = self.encoder_.patch_size
            if size < patch or size % patch:
                raise ValueError(
                    f"'crop_seconds'={self.crop_seconds} gives crops of {size} samples at "
                    f"the encoder's sfreq={rate}; they must be a whole number of patches of "
                    f"{patch} samples (patch_seconds={self.encoder_.patch_seconds})."
                )
            self.crop_size_ = size
        self.stride_ = self._stride(rate)
        self.n_tokens_ = sum(
            len(self._starts(min(crop, n_times - s)))
            for s, crop in self._crops(n_times)
        )  # fmt: skip
        self.n_chans_ = windows.X.shape[1]
        per_token = {"mean": 1, "mean+std": 2, "blocks": self.encoder_.depth}[self.readout]
        self.n_features_out_ = self.n_chans_ * self.encoder_.emb_dim * per_token
        return windows.X

    def _stride(self, rate):
        """The patch stride in samples at the encoder's ``rate``, checked against its patch."""
        patch = self.encoder_.patch_size
        if self.patch_stride_seconds is None:
            return max(1, patch // 2)
        stride = self.patch_stride_seconds * rate
        if abs(stride - round(stride)) > 1e-6 or not 1 <= round(stride) <= patch:
            raise ValueError(
                f"Invalid value for the 'patch_stride_seconds' parameter: it must lie in "
                f"(0, {self.encoder_.patch_seconds:g}] (up to the encoder's patch_seconds, "
                f"{patch} samples) and be a whole number of samples at the encoder's "
                f"sfreq={rate:g} Hz, but got {self.patch_stride_seconds!r} "
                f"({stride:g} samples)."
            )
        return int(round(stride))

    def _crops(self, n_times):
        """``(start, length)`` of the crops of a window of ``n_times`` samples (the last
        one possibly shorter, left out when it holds less than a patch)."""
        crop = n_times if self.crop_size_ is None else self.crop_size_
        patch = self.encoder_.patch_size
        return [(s, crop) for s in range(0, n_times, crop) if s == 0 or n_times - s >= patch]

    def _starts(self, n_times, device=None):
        """The patch starts of a crop of ``n_times`` samples, every ``stride_`` samples."""
        return self.encoder_.fixed_starts(n_times, stride=self.stride_, device=device)

    def _pos_mask(self, n_tokens, batch, device):
        """The (batch, n_tokens) position mask of ``pos_mask_ratio``, or None."""
        if self.pos_mask_ratio == 0:
            return None
        mask = torch.zeros(n_tokens, dtype=torch.bool)
        n_masked = int(round(self.pos_mask_ratio * n_tokens))
        generator = torch.Generator().manual_seed(_POS_MASK_SEED)
        mask[torch.randperm(n_tokens, generator=generator)[:n_masked]] = True
        return mask.to(device).expand(batch, -1)

    def transform(self, X):
        """The features of ``X``, shape (n_windows, ``n_features_out_``): for each channel
        in turn, its readout."""
        check_is_fitted(self, "encoder_")
        return self._features(read_windows(X, sfreq=self.sfreq_, name="X").X)

    def _features(self, X):
        if X.shape[1] != self.n_chans_:
            raise ValueError(
                f"'X' has {X.shape[1]} channels but the features were fitted on {self.n_chans_}."
            )
        return cached(self.memory, self._encode, X, key=self._settings_key)

    def _settings_key(self):
        """What the features depend on besides the windows (batch_size aside)."""
        settings = (self.readout, self.crop_size_, self.resample_, self.sfreq_, self.device)
        if self.stride_ != self.encoder_.patch_size or self.pos_mask_ratio:
            settings += (self.stride_, float(self.pos_mask_ratio), _POS_MASK_SEED)
        return encoder_digest(self.encoder_), repr(settings)

    def _encode(self, X):
        """The features of an array of windows, through the encoder."""
        encoder = self.encoder_.to(self.device)
        out = np.empty((len(X), self.n_features_out_))
        try:
            # upsampling for the encoder is said once by the estimators (the windows'
            # rate and the encoder's), not by resample_windows at every batch
            with torch.no_grad(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="resample_windows: upsampling")
                for start in range(0, len(X), self.batch_size):
                    batch = np.asarray(X[start : start + self.batch_size], dtype=np.float32)
                    if self.resample_:
                        batch = resample_windows(batch, self.sfreq_, self.encoder_.sfreq)
                    batch = torch.as_tensor(batch, dtype=torch.float32, device=self.device)
                    out[start : start + len(batch)] = self._batch_features(encoder, batch).cpu()
        finally:
            self.encoder_.cpu()  # kept on the CPU between calls: it pickles anywhere
        return out

    def _batch_features(self, encoder, X):
        """(batch, n_chans, n_times) -> (batch, n_features_out_)."""
        B, C, T = X.shape
        flat = X.reshape(B * C, 1, T)
        crops = []  # each crop's tokens of each block, (B * C, n_patches, emb_dim)
        for s, crop in self._crops(T):
            part = flat[..., s : s + crop]
            starts = self._starts(part.shape[-1], device=X.device)
            pos_mask = self._pos_mask(len(starts), B * C, X.device)
            every = self.readout == "blocks"
            crops.append(_channel_block_tokens(encoder, part, every, starts, pos_mask))
        blocks = [torch.cat(parts, dim=1) for parts in zip(*crops, strict=True)]
        if self.readout == "mean+std":
            (tokens,) = blocks
            read = [tokens.mean(dim=1), tokens.std(dim=1, unbiased=False)]
        else:
            read = [tokens.mean(dim=1) for tokens in blocks]
        return torch.cat(read, dim=-1).view(B, -1)


def _channel_block_tokens(encoder, X, every_block=False, starts=None, pos_mask=None):
    """The tokens of single-channel windows ``X`` (batch, 1, n_times) as
    ``encoder(X, starts=starts, pos_mask=pos_mask)``: a list of one tensor (batch,
    n_patches, emb_dim), or with ``every_block`` one per transformer block, each through
    the encoder's final LayerNorm."""
    if not every_block:
        if pos_mask is None:
            return [encoder(X, starts=starts)]
        return [encoder(X, starts=starts, pos_mask=pos_mask)]
    encoder.check_input(X)
    if starts is None:
        starts = encoder.fixed_starts(X.shape[-1], device=X.device)
    tokens = encoder.tokenize(X, starts) + encoder.position_embedding(starts, pos_mask)
    out = []
    for block in encoder.blocks:
        tokens = block(tokens)
        out.append(encoder.norm(tokens))
    return out


class BandPowerFeatures(WindowsFeaturesMixin, TransformerMixin, BaseEstimator):
    """Log mean power per channel in frequency bands, by Welch's method.

    For each window and channel the power spectral density is estimated with
    :func:`mne.time_frequency.psd_array_welch` (Hamming window, half-overlapping
    segments of ``n_per_seg`` samples, in float64) and averaged over the frequency bins
    of each band; the features are the (base-10) logarithms of these means, channel by
    channel. Scaling the signal by ``a`` shifts every feature by ``2 log10(a)``.

    ``fit`` warns (``UserWarning``, once) when some windows hold no power in a band
    where the others do (at least 1,000 times less, relative to each window's
    strongest band, with no window in between), naming how many windows and which bands: what
    windows upsampled from recordings of a lower native rate look like (a recording at
    50 Hz brought to 100 Hz holds nothing in 25-50 Hz). Their band powers there are
    numerical noise that tells the recordings' rates apart, not their EEG: band-limit
    every recording below the lowest native Nyquist frequency, or choose bands that
    end below it. The check is one more Welch pass over the windows, with a
    Blackman-Harris window.

    A flat channel of a window (its variance at most :data:`FLAT_RATIO` times the
    channel's median over the fitted windows, exactly zero included: a disconnected
    amplifier, a zero-padded end, a constant offset) is read as missing: its band
    powers are the channel's median over the fitted windows where it is not flat
    (``flat_features_``), at ``fit`` and ``transform`` alike, instead of the logarithm
    of rounding noise or of 0 (which read -307.7, a far outlier). Windows without flat
    channels get the same features as without this rule. ``fit`` warns
    (``UserWarning``, once) when some fitted windows hold flat channels.

    Parameters
    ----------
    sfreq : float | None
        Sampling rate of the windows in Hz. None reads it from braindecode windows;
        where both are known they must agree.
    bands : str | dict | sequence of (name, low, high) | None
        Frequency bands in Hz, each half-open ``[low, high)`` with ``0 <= low < high``;
        a band ending above the Nyquist frequency is cut there, one starting at or
        above it is refused (``ValueError``). None:
        :data:`~braindecode_pars.features.DEFAULT_BANDS`,
        delta 0.5-4, theta 4-8, alpha 8-13, beta_low 13-20, beta_high 20-30 and gamma
        30-45 Hz, each cut at the Nyquist frequency. A preset's name
        (:data:`~braindecode_pars.features.blocks.BAND_PRESETS`): ``"default"`` (those),
        ``"sleep"`` (delta 0.5-4, theta 4-8, alpha 8-11, sigma 11-16, beta 16-30 and
        gamma 30-45 Hz: the spindles' band whole), cut the same way.
    n_per_seg : int | None
        Length of Welch's segments in samples; None takes 2 s (a 0.5 Hz resolution),
        or the whole window when it is shorter.
    log : bool
        Whether to return ``log10`` of the band powers (True) or the powers.

    Attributes
    ----------
    sfreq_ : float
    bands_ : list of (name, low, high)
        The bands used.
    n_per_seg_, n_chans_ : int
    ch_names_ : list of str | None
        The channel names of the windows seen in ``fit``, where they carry them.
    n_features_out_ : int
        ``n_chans_ * len(bands_)``.
    flat_reference_ : ndarray, shape (n_chans,)
        Each channel's reference variance, which :data:`FLAT_RATIO` is a fraction of
        (the windows' unit squared).
    flat_features_ : ndarray, shape (n_chans, n_bands)
        The features a flat channel reads as.

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

    def __init__(self, sfreq=None, bands=None, n_per_seg=None, log=True):
        self.sfreq = sfreq
        self.bands = bands
        self.n_per_seg = n_per_seg
        self.log = log

    def _fit_features(self, X, variances=None, compute=True):
        """:meth:`_fit`, and the features of the fitted windows (:meth:`transform`'s);
        with ``compute=False`` none (None), and what flat channels read as is left for
        :meth:`_read_flat` to set from the windows' features."""
        if self.sfreq is not None:
            check_range("sfreq", self.sfreq, 0, np.inf, low_open=True)
        if self.n_per_seg is not None:
            check_int("n_per_seg", self.n_per_seg, 2)
        _check_bands(self.bands, np.inf if self.sfreq is None else self.sfreq)
        windows = read_array(X, self.sfreq)
        X, sfreq = windows.X, windows.sfreq
        n_times = X.shape[-1]
        if self.n_per_seg is None:
            n_per_seg = min(n_times, int(round(_DEFAULT_SEGMENT_SECONDS * sfreq)))
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
        _warn_empty_bands(X, sfreq, bands, n_per_seg)
        if variances is None:
            variances = _channel_variances(X)
            _warn_flat(_flat(variances, _flat_reference(variances)), windows.ch_names)
        self.sfreq_ = sfreq
        self.bands_ = bands
        self.n_per_seg_ = n_per_seg
        self.n_chans_ = X.shape[1]
        self.ch_names_ = windows.ch_names
        self.n_features_out_ = self.n_chans_ * len(bands)
        self.flat_reference_ = _flat_reference(variances)
        self.flat_features_ = None  # _finish reads no channel as missing before it is set
        if not compute:
            return X, None
        return X, self._read_flat(self._features(X), variances)

    def _read_flat(self, features, variances):
        """Set what a flat channel reads as (``flat_features_``) from the features of the
        fitted windows computed without it (``features``, (n_windows, n_features_out_)),
        and return those features with their flat channels read so."""
        flat = _flat(variances, self.flat_reference_)
        features = features.reshape(len(features), self.n_chans_, len(self.bands_)).copy()
        self.flat_features_ = np.stack(
            [np.median(features[~flat[:, c] if (~flat[:, c]).any() else slice(None), c], axis=0)
             for c in range(self.n_chans_)]
        )  # fmt: skip
        features[flat] = self.flat_features_[np.nonzero(flat)[1]]
        return features.reshape(len(features), -1)

    def _fit(self, X, variances=None, compute=True):
        """Check the parameters, read the windows and fit; return the windows' array.
        ``variances``: :func:`_channel_variances` of the windows, computed (and flat
        channels warned of) here when None; ``compute``: as in :meth:`_fit_features`."""
        return self._fit_features(X, variances, compute)[0]

    def fit_transform(self, X, y=None):
        """Fit, then the features of the same windows (computed once in ``fit``).

        Parameters
        ----------
        X, y
            As in :meth:`fit`.

        Returns
        -------
        features : ndarray, shape (n_windows, n_chans * n_bands)
            As :meth:`transform`.
        """
        return self._fit_features(X)[1]

    def transform(self, X):
        """The band powers, shape (n_windows, n_chans * n_bands): for each channel in
        turn, the (log) mean power of each band."""
        check_is_fitted(self, "bands_")
        X = read_array(X, self.sfreq_).X
        return self._finish(X, self._features(X))

    def _features(self, X):
        """The features of an array of windows, ``_CHUNK`` windows in float64 at a time,
        flat channels as they are (:meth:`_finish` reads them as missing): what the
        cache holds."""
        if X.shape[1] != self.n_chans_:
            raise ValueError(
                f"'X' has {X.shape[1]} channels, but the transformer was fitted on {self.n_chans_}."
            )
        if X.shape[2] < self.n_per_seg_:
            raise ValueError(
                f"'X' windows have {X.shape[2]} samples, fewer than the fitted "
                f"n_per_seg={self.n_per_seg_}."
            )
        out = np.empty((len(X), self.n_features_out_))
        for start in range(0, len(X), _CHUNK):
            psd, freqs = psd_array_welch(
                np.asarray(X[start : start + _CHUNK], dtype=np.float64),
                self.sfreq_,
                fmin=min(low for _, low, _ in self.bands_),
                fmax=max(high for _, _, high in self.bands_),
                n_fft=self.n_per_seg_,
                n_per_seg=self.n_per_seg_,
                n_overlap=self.n_per_seg_ // 2,
                verbose=False,
            )  # psd: (n_windows, n_chans, n_freqs)
            power = np.stack(
                [psd[..., (freqs >= lo) & (freqs < hi)].mean(-1) for _, lo, hi in self.bands_],
                axis=-1,
            )  # (n_windows, n_chans, n_bands)
            if self.log:
                power = np.log10(np.maximum(power, np.finfo(np.float64).tiny))
            out[start : start + len(power)] = power.reshape(len(power), -1)
        return out

    def _finish(self, X, features):
        """``features`` (:meth:`_features` of ``X``) with the flat channels of ``X`` read
        as missing (``flat_features_``; as they are before it is set, or in a
        transformer pickled before it)."""
        missing = getattr(self, "flat_features_", None)
        if missing is None:
            return features
        flat = _flat(_channel_variances(X), self.flat_reference_)
        if not flat.any():
            return features
        features = features.reshape(len(features), self.n_chans_, len(self.bands_)).copy()
        features[flat] = missing[np.nonzero(flat)[1]]
        return features.reshape(len(features), -1)

    def _settings_key(self):
        return repr(("bandpower", self.sfreq_, self.bands_, self.n_per_seg_, self.log))

    def get_feature_names_out(self, input_features=None):
        """Feature names ``<channel>_<band>``, in the order of :meth:`transform`."""
        check_is_fitted(self, "bands_")
        chans = self.ch_names_ or [f"ch{c}" for c in range(self.n_chans_)]
        return np.asarray([f"{ch}_{name}" for ch in chans for name, _, _ in self.bands_])


class WindowCovariances(WindowsInputMixin, TransformerMixin, BaseEstimator):
    """The channels' shrunk covariances of windows, flat channels read as missing.

    Each window's covariance as :class:`pyriemann.estimation.Covariances` estimates it
    (OAS shrinkage by default), in float64, ``_CHUNK`` windows at a time. A channel of a
    window that is flat (its variance at most :data:`FLAT_RATIO` times the channel's
    reference variance over the fitted windows, :func:`_flat_reference`; exactly zero
    included) is read as missing: the other channels' covariance is estimated without
    it, and it enters as an independent channel of its reference variance (that
    diagonal entry, zeros beside it). A window flat in every channel is the diagonal
    matrix of the reference variances. Every covariance is then positive definite, so
    that the tangent space's reference (their Riemannian mean) and every window's
    tangent vector are finite, and the flat windows sit near the others instead of
    ``log(0)`` away. A window without flat channels gets the estimator's covariance
    exactly (no ridge is added to it).

    ``fit`` records the reference variances and warns (``UserWarning``, once) when some
    fitted windows hold flat channels; ``transform`` reads the flat channels of any
    windows against those references, silently.

    Parameters
    ----------
    estimator : str | callable
        The covariance estimator, as :class:`pyriemann.estimation.Covariances` takes
        it: ``"oas"`` (Oracle Approximating Shrinkage, the default) and ``"lwf"``
        (Ledoit-Wolf) shrink, which keeps the matrices well conditioned with few
        samples per channel; ``"scm"``, the sample covariance. Another name raises a
        ``ValueError`` in ``fit`` naming the allowed ones.

    Attributes
    ----------
    flat_reference_ : ndarray, shape (n_chans,)
        Each channel's reference variance (the windows' unit squared).
    n_chans_ : int

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).standard_normal((20, 3, 200))
    >>> X[5] = 0.0  # a window of zeros
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as said:
    ...     warnings.simplefilter("always")
    ...     covs = WindowCovariances().fit_transform(X)
    >>> len(said), bool(np.all(np.linalg.eigvalsh(covs) > 0))
    (1, True)
    """

    def __init__(self, estimator="oas"):
        self.estimator = estimator

    def fit(self, X, y=None):
        """Record each channel's reference variance; warn of flat channels.

        Parameters
        ----------
        X : ndarray, shape (n_windows, n_chans, n_times)
            The windows (float; cast to float64 a few at a time).
        y : None
            Ignored.

        Returns
        -------
        self : WindowCovariances
        """
        X = _check_window_array(X)
        self._fit(X)
        return self

    def _fit(self, X, variances=None, ch_names=None):
        """Fit on the array ``X``; ``variances`` (:func:`_channel_variances`), computed
        and warned of here when None."""
        from pyriemann.geometry.covariance import cov_est_functions

        if not callable(self.estimator) and self.estimator not in cov_est_functions:
            allowed = ", ".join(repr(name) for name in cov_est_functions)
            raise ValueError(
                "Invalid value for the 'estimator' parameter. Allowed values are a "
                f"covariance estimator of pyriemann ({allowed}) or a function, but got "
                f"{self.estimator!r} instead."
            )
        if variances is None:
            variances = _channel_variances(X)
            _warn_flat(_flat(variances, _flat_reference(variances)), ch_names)
        self.flat_reference_ = _flat_reference(variances)
        self.n_chans_ = X.shape[1]
        return X

    def transform(self, X):
        """The covariances, shape (n_windows, n_chans, n_chans), float64."""
        check_is_fitted(self, "flat_reference_")
        X = _check_window_array(X)
        if X.shape[1] != self.n_chans_:
            raise ValueError(
                f"'X' has {X.shape[1]} channels, but the covariances were fitted on "
                f"{self.n_chans_}."
            )
        return self._finish(X, self._features(X))

    def _features(self, X):
        """The estimator's covariances of windows, ``_CHUNK`` in float64 at a time,
        whatever the fitted references (what the cache holds): zeros for a window with a
        constant channel, which is flat whatever they are (:meth:`_finish`)."""
        from pyriemann.geometry.covariance import covariances

        out = np.zeros((len(X), X.shape[1], X.shape[1]))
        for start in range(0, len(X), _CHUNK):
            chunk = np.asarray(X[start : start + _CHUNK], dtype=np.float64)
            live = (chunk.var(axis=-1) > 0).all(axis=1)
            if live.any():
                out[start : start + len(chunk)][live] = covariances(
                    chunk[live], estimator=self.estimator
                )
        return out

    def _finish(self, X, covs):
        """``covs`` (:meth:`_features` of ``X``) with each window that holds flat
        channels estimated again without them, each flat channel an independent one of
        its reference variance."""
        from pyriemann.geometry.covariance import covariances

        reference = self.flat_reference_
        flat = _flat(_channel_variances(X), reference)
        rows = np.flatnonzero(flat.any(axis=1))
        if not len(rows):
            return covs
        covs = covs.copy()
        for i in rows:
            keep = ~flat[i]
            covs[i] = np.diag(reference)
            if keep.any():
                window = np.asarray(X[i], dtype=np.float64)[None, keep]
                covs[i][np.ix_(keep, keep)] = covariances(window, estimator=self.estimator)[0]
        return covs

    def _settings_key(self):
        return repr(("covariances", self.estimator))


def _check_window_array(X):
    """``X`` as an array of windows (n_windows, n_chans, n_times) of floats."""
    X = np.asarray(X)
    if X.ndim != 3 or not np.issubdtype(X.dtype, np.floating) or not len(X):
        raise ValueError(
            "'X' must be a float array of windows (n_windows, n_chans, n_times), at "
            f"least one, but got {X.dtype} of shape {X.shape}."
        )
    return X


def block_features(X, recipe, *, sfreq, encoder=None, batch_size=8, device="cpu", memory=None):
    """Each block's raw features of the windows ``X``, computed once.

    The blocks are those of ``recipe.blocks`` (of :data:`BLOCKS`): ``"encoder"``
    (:class:`EncoderFeatures` with the recipe's ``readout``, ``crop_seconds``,
    ``patch_stride_seconds`` and ``pos_mask_ratio``),
    ``"bandpower"`` (:class:`BandPowerFeatures` with its ``bands``), ``"tangentspace"``
    (:class:`WindowCovariances`, the channels' OAS covariances, mapped to the tangent
    space only when a probe is fitted, :func:`~braindecode_pars.features.recipe.fit_blocks`).
    None depends on labels; what a flat channel reads as depends on the windows given
    here (each channel's reference variance and median band powers), which warns
    (``UserWarning``, once) when some of them hold flat channels.

    Parameters
    ----------
    X : ndarray, shape (n_windows, n_chans, n_times) | Windows
        The windows, read once (:func:`~braindecode_pars.io.windows.read_windows`;
        the read windows as they are); never copied whole to float64.
    recipe : ProbeRecipe
    sfreq : float
        Their sampling rate.
    encoder : PatchEncoder | str | Path | None
        The encoder of the ``"encoder"`` block.
    batch_size, device
        The encoder's forward passes.
    memory : str | joblib.Memory | None
        A cache of every block's features (as :class:`EncoderFeatures`'s); None: none.

    Returns
    -------
    features : dict
        ``{name: ndarray}``, float64: (n_windows, n_features) for the feature blocks,
        (n_windows, n_chans, n_chans) for the covariances.
    extractor : object
        Its ``transform(X)`` gives the same dict for other windows of the same shape.
    """
    steps = {}
    for name in recipe.blocks:
        if name == "encoder":
            if encoder is None:
                raise ValueError("The recipe holds the 'encoder' block but 'encoder' is None.")
            step = EncoderFeatures(
                encoder, sfreq=sfreq, batch_size=batch_size, device=device,
                readout=recipe.readout, crop_seconds=recipe.crop_seconds,
                patch_stride_seconds=recipe.patch_stride_seconds,
                pos_mask_ratio=recipe.pos_mask_ratio,
            )  # fmt: skip
        elif name == "bandpower":
            step = BandPowerFeatures(sfreq=sfreq, bands=recipe.bands)
        else:
            step = WindowCovariances()
        steps[name] = step
    windows = read_windows(X, sfreq=sfreq, name="X")  # Windows as they are: read once
    variances = _channel_variances(windows.X)
    _warn_flat(_flat(variances, _flat_reference(variances)), windows.ch_names)
    for step in steps.values():
        if isinstance(step, WindowCovariances):
            step._fit(windows.X, variances)
        elif isinstance(step, BandPowerFeatures):
            step._fit(windows, variances, compute=False)  # from the features below
        else:
            step._fit(windows)
    extractor = _Extractor(steps, memory)
    features = extractor.transform(windows.X)  # each block computed once per window
    for name, step in steps.items():
        if isinstance(step, BandPowerFeatures):
            features[name] = step._read_flat(features[name], variances)
    return features, extractor
