"""The single-channel patch transformer shared by PARS and every baseline.

Paper appendix A.1 (a PatchTST-style encoder, [Nie2023]_): instance
normalisation, 1-s patches, a linear tokenizer to 512 features, sinusoidal
positional embedding, 8 pre-LN transformer blocks with 8 heads and a
feed-forward hidden size of 512, GELU.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from braindecode.models.base import EEGModuleMixin
from torch import nn

from braindecode_pars._util.checks import InvalidParameterError
from braindecode_pars._util.signal_attributes import SignalAttributesMixin
from braindecode_pars.models.encoder_config import (
    _ACTIVATIONS,
    _EEG_STD_RANGE,
    _UNITS,
    PatchEncoderConfig,
)


def _sinusoidal_embedding(positions, emb_dim):
    """Sinusoidal positional embedding evaluated at continuous positions.

    The transformer's embedding ([Vaswani2017]_) with ``pos`` a real number:
    ``PE[2i] = sin(pos / 10000^(2i/F))`` and ``PE[2i+1] = cos(pos / 10000^(2i/F))``.

    Parameters
    ----------
    positions : torch.Tensor, shape (...)
        Positions, in patch units (a patch starting ``s`` samples into the window
        with patches of ``M`` samples sits at ``s / M``).
    emb_dim : int
        Embedding size ``F``; must be even.

    Returns
    -------
    pe : torch.Tensor, shape (..., emb_dim)
    """
    half = torch.arange(0, emb_dim, 2, device=positions.device, dtype=torch.float32)
    inv_freq = torch.exp(-math.log(10000.0) * half / emb_dim)  # (F/2,)
    angles = positions.to(torch.float32)[..., None] * inv_freq  # (..., F/2)
    pe = torch.stack((angles.sin(), angles.cos()), dim=-1)  # (..., F/2, 2)
    return pe.flatten(-2)  # (..., F): sin and cos interleaved


def _moments(X, eps):
    """``X`` in float32 (half precision) or its own type, its mean and variance over time
    (biased), and whether each window is flat (its variance at most ``eps**2`` times its
    mean square): each of shape (..., 1)."""
    if X.dtype in (torch.float16, torch.bfloat16):
        X = X.float()  # a variance of volts (1e-10) underflows in float16
    mean = X.mean(dim=-1, keepdim=True)
    var = X.var(dim=-1, keepdim=True, unbiased=False)
    flat = var <= eps**2 * X.pow(2).mean(dim=-1, keepdim=True)
    return X, mean, var, flat


def instance_normalize(X, eps=1e-5):
    """Zero mean and unit variance over time, per window: the ``"window"`` normalisation.

    Invariant to gain and offset, so the same recording in volts (as MNE returns it),
    microvolts or ADC counts gives the same result. A window whose standard deviation
    is below ``eps`` times its root mean square (flat, within float precision) gives
    zeros rather than NaN or amplified rounding noise. Half-precision input is
    normalised in float32 and returned in its own type.

    Parameters
    ----------
    X : torch.Tensor, shape (..., n_times)
    eps : float
        The flat-window floor, relative to the window's root mean square.

    Returns
    -------
    normalized : torch.Tensor, the shape and type of ``X``
    """
    dtype = X.dtype
    X, mean, var, flat = _moments(X, eps)
    tiny = torch.finfo(X.dtype).tiny
    out = (X - mean) / torch.sqrt(var.clamp_min(tiny))
    return torch.where(flat, torch.zeros_like(out), out).to(dtype)


def log_std_statistics(X, eps=1e-5):
    """The mean and standard deviation of the log standard deviation of windows.

    What ``PatchEncoderConfig(normalization="window+scale", log_std_mean=...,
    log_std_std=...)`` takes from a corpus: the natural log of every window's standard
    deviation over time, in the windows' unit, flat windows (as
    :func:`instance_normalize` tells them) left out.

    Parameters
    ----------
    X : array-like | torch.Tensor, shape (..., n_times)
        Windows (any number of leading dimensions: windows, channels), in the unit the
        encoder will read.
    eps : float
        The encoder's flat-window floor.

    Returns
    -------
    mean, std : float
        Over the windows that are not flat (std with ``ddof=0``).

    Examples
    --------
    >>> import numpy as np
    >>> X = 20.0 * np.random.default_rng(0).standard_normal((200, 1000))  # 20 µV
    >>> mean, std = log_std_statistics(X)
    >>> round(float(np.exp(mean)), 1), std < 0.05
    (20.0, True)
    """
    X = torch.as_tensor(X).double()
    _, _, var, flat = _moments(X.reshape(-1, X.shape[-1]), eps)
    kept = var[~flat]
    if kept.numel() == 0:
        raise ValueError("'X' holds no window with signal: every window is flat.")
    log_std = 0.5 * kept.log()
    return float(log_std.mean()), float(log_std.std(unbiased=False))


class _TransformerBlock(nn.Module):
    """Pre-LN block: ``x + MHSA(LN(x))`` then ``x + FF(LN(x))`` (paper eqs. 4-5).

    ``key_mask`` (batch, n_tokens), True where a token must be hidden from the keys
    and values of the attention (used by MP3); hidden tokens still act as queries.
    """

    def __init__(self, emb_dim, n_heads, ff_dim, activation=nn.GELU, drop_prob=0.0):
        super().__init__()
        self.n_heads = n_heads
        self.drop_prob = drop_prob
        self.norm1 = nn.LayerNorm(emb_dim)
        self.qkv = nn.Linear(emb_dim, 3 * emb_dim)
        self.proj = nn.Linear(emb_dim, emb_dim)
        self.norm2 = nn.LayerNorm(emb_dim)
        self.ff = nn.Sequential(
            nn.Linear(emb_dim, ff_dim),
            activation(),
            nn.Dropout(drop_prob),
            nn.Linear(ff_dim, emb_dim),
        )
        self.drop = nn.Dropout(drop_prob)

    def attention(self, x, key_mask=None):
        B, N, Fd = x.shape  # (batch, n_tokens, emb_dim)
        qkv = self.qkv(x).view(B, N, 3, self.n_heads, Fd // self.n_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, n_tokens, head_dim)
        attn_mask = None
        if key_mask is not None:
            attn_mask = ~key_mask[:, None, None, :]  # True = may attend
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.drop_prob if self.training else 0.0
        )
        return self.proj(out.transpose(1, 2).reshape(B, N, Fd))

    def forward(self, x, key_mask=None):
        x = x + self.drop(self.attention(self.norm1(x), key_mask))
        return x + self.drop(self.ff(self.norm2(x)))


class PatchEncoder(SignalAttributesMixin, EEGModuleMixin, nn.Module):
    """Single-channel patch transformer encoder of PARS ([Sandino2025]_, appendix A.1).

    A window is normalised (``normalization``), cut into patches of ``patch_seconds`` at
    arbitrary start times (random, overlapping or on a fixed stride), each patch is
    tokenized by a linear layer, a sinusoidal positional embedding evaluated at the
    patch's continuous start time is added (or, for position-masked tokens, a
    learnable position-mask token instead, as in DropPos [Wang2023]_), and ``depth``
    pre-LN transformer blocks encode the tokens.

    Parameters
    ----------
    n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq
        braindecode's signal arguments. The encoder reads one channel
        (``n_chans=1``) and needs ``sfreq`` to turn ``patch_seconds`` into samples;
        it accepts windows of any length of at least one patch, so the same object
        serves 30-s pretraining windows and 4-s fine-tuning windows.
    patch_seconds : float
        Patch length in seconds. Paper: 1 s (section 2.5).
    emb_dim : int
        Token size ``F``. Paper: 512 (section 2.5).
    depth : int
        Number of transformer blocks. Paper: 8 (section 2.5).
    n_heads : int
        Attention heads per block. Paper: 8 (section 2.5).
    ff_dim : int
        Hidden size of the feed-forward block. Paper: 512 (section 2.5).
    activation : "gelu" | "relu" | nn.GELU | nn.ReLU
        Feed-forward non-linearity, by name or class. Paper: GELU (appendix A.1).
    drop_prob : float
        Dropout in the blocks. The paper does not give one; 0 by default.
    eps : float
        A window whose standard deviation is below ``eps`` times its root mean square
        counts as flat and normalises to zeros (instead of NaN). The ``"window"``
        normalisation is otherwise exactly invariant to gain and offset: volts,
        microvolts and ADC counts give the same tokens.
    normalization : {"window", "window+scale", "fixed"}
        The input normalisation (:meth:`normalize`). ``"window"``, the paper's instance
        normalisation and the default (what every encoder saved before this setting
        existed means): each window zero-mean and unit-variance, so that the encoder
        never sees amplitude. ``"window+scale"``: the same, plus a learned embedding
        (``scale_embedding``, a linear map of one number) of the window's log standard
        deviation, standardised by ``log_std_mean`` and ``log_std_std``, added to every
        token. ``"fixed"``: the window minus its mean, divided by ``amplitude_scale``
        and clipped to ``[-amplitude_clip, amplitude_clip]`` (as LaBraM and CBraMod
        scale by a fixed unit). The last two read windows in ``unit``, and refuse a
        batch whose typical window (the median standard deviation of its windows with
        signal) lies outside the range of EEG in that unit
        (:data:`~braindecode_pars.models.encoder_config._EEG_STD_RANGE`; a window below
        it, a dead channel, reads as flat) with a ``ValueError`` (eagerly: one value read on the
        host per call); under ``torch.compile`` the same check is an asynchronous
        assertion in the graph (no host synchronisation, no graph break), which raises
        a ``RuntimeError`` (on a GPU, a device-side assertion). Pretraining checks the
        unit once, on the host, on a seeded sample of its data before the first step
        (:meth:`check_unit`), and its forward passes then check nothing
        (:class:`~braindecode_pars.pretraining.PretrainNet`). No mode normalises across
        channels: every caller passes the encoder one channel at a time
        (:class:`~braindecode_pars.models.MultiChannelClassifier` reshapes
        (batch, n_chans, n_times) to (batch * n_chans, 1, n_times),
        :class:`~braindecode_pars.features.EncoderFeatures` does the same, and
        pretraining draws one channel per example), so the channels of a window are
        never together where the encoder normalises.
    unit, amplitude_scale, amplitude_clip, log_std_mean, log_std_std
        The settings of the amplitude-aware normalisations (see
        :class:`PatchEncoderConfig`).

    The settings but ``sfreq`` are those of :class:`PatchEncoderConfig`, which checks
    them: ``encoder.config`` gives them back, and ``PatchEncoder.from_config(config,
    sfreq)`` builds an encoder of a config.

    References
    ----------
    .. [Sandino2025] Sandino, C. M., et al. Learning the relative composition of
       EEG signals using pairwise relative shift pretraining. NeurIPS 2025 workshop
       "Foundation Models for the Brain and Body".
    .. [Nie2023] Nie, Y., et al. A time series is worth 64 words: long-term
       forecasting with transformers. ICLR 2023.
    .. [Wang2023] Wang, H., et al. DropPos: pre-training vision transformers by
       reconstructing dropped positions. NeurIPS 2023.
    .. [Vaswani2017] Vaswani, A., et al. Attention is all you need. NeurIPS 2017.

    Examples
    --------
    >>> import torch
    >>> enc = PatchEncoder(sfreq=100, emb_dim=32, depth=2, n_heads=4, ff_dim=64)
    >>> X = torch.randn(2, 1, 1000)  # (batch, 1, n_times): two 10-s windows
    >>> enc(X).shape  # ten non-overlapping 1-s patches
    torch.Size([2, 10, 32])
    """

    def __init__(
        self,
        n_outputs=None,
        n_chans=1,
        chs_info=None,
        n_times=None,
        input_window_seconds=None,
        sfreq=None,
        patch_seconds=1.0,  # paper section 2.5: "small 1-sec patches"
        emb_dim=512,  # paper section 2.5: "tokens of size 512"
        depth=8,  # paper section 2.5: "8 transformer blocks"
        n_heads=8,  # paper section 2.5: "each with 8 heads"
        ff_dim=512,  # paper section 2.5: "feed-forward blocks with a hidden dimension of size 512"
        activation=nn.GELU,  # paper appendix A.1
        drop_prob=0.0,
        eps=1e-5,
        normalization="window",  # the paper's instance normalisation (appendix A.1)
        unit="uV",
        amplitude_scale=None,
        amplitude_clip=20.0,
        log_std_mean=None,
        log_std_std=1.0,
    ):
        super().__init__(n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq)
        del n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq
        if self.n_chans != 1:
            raise ValueError(
                f"PatchEncoder reads a single channel: 'n_chans' must be 1, but got {self.n_chans}."
            )
        settings = locals()  # the arguments left are the encoder's settings, checked there
        config = PatchEncoderConfig(**{k: settings[k] for k in PatchEncoderConfig.fields()})
        for name, value in config.asdict().items():  # activation: its name
            setattr(self, name, value)
        self.patch_size = int(round(config.patch_seconds * self.sfreq))
        if self.patch_size < 1:
            raise ValueError(
                f"'patch_seconds'={patch_seconds} at sfreq={self.sfreq} gives an empty patch."
            )

        emb_dim = config.emb_dim
        self.tokenizer = nn.Linear(self.patch_size, emb_dim)
        self.pos_mask_token = nn.Parameter(torch.zeros(emb_dim))
        nn.init.normal_(self.pos_mask_token, std=0.02)
        self.blocks = nn.ModuleList(
            _TransformerBlock(
                emb_dim, config.n_heads, config.ff_dim, _ACTIVATIONS[config.activation],
                config.drop_prob,
            )
            for _ in range(config.depth)
        )  # fmt: skip
        self.norm = nn.LayerNorm(emb_dim)
        if config.normalization == "window+scale":  # the window's amplitude, as a token offset
            self.scale_embedding = nn.Linear(1, emb_dim)

    # -- settings ------------------------------------------------------------------------
    @property
    def config(self):
        """This encoder's :class:`PatchEncoderConfig` (every setting but ``sfreq``)."""
        return PatchEncoderConfig.of(self)

    def get_config(self):
        """braindecode's ``get_config()`` (the ``__init__`` arguments, what
        ``config.json`` holds), with the settings left None filled in as the encoder
        uses them (``amplitude_scale`` and ``log_std_mean``: their unit's defaults)."""
        config = super().get_config()
        for name, value in self.config.asdict().items():
            if config.get(name, 0) is None:
                config[name] = value
        return config

    @classmethod
    def from_config(cls, config, sfreq=None):
        """A new (untrained) encoder of ``config``.

        Parameters
        ----------
        config : PatchEncoderConfig | dict
            The settings; a dict is braindecode's ``get_config()`` (as
            :meth:`braindecode.models.base.EEGModuleMixin.from_config` reads it), which
            holds ``sfreq``.
        sfreq : float | None
            The sampling rate; needed with a :class:`PatchEncoderConfig`, and replaces
            the dict's.

        Returns
        -------
        encoder : PatchEncoder
        """
        if isinstance(config, PatchEncoderConfig):
            if sfreq is None:
                raise ValueError(
                    "'sfreq' must be given with a PatchEncoderConfig (the config holds no "
                    "sampling rate), but got None."
                )
            return cls(sfreq=sfreq, **config.asdict())
        if not isinstance(config, dict):
            raise TypeError(
                "'config' must be a PatchEncoderConfig or a dict of get_config(), but got "
                f"{type(config).__name__}."
            )
        if sfreq is not None:
            config = dict(config, sfreq=sfreq)
        return super().from_config(config)

    # -- loading and saving (braindecode's Hugging Face layout) ----------------------------
    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """An encoder saved with ``save_pretrained``: a shipped name, a folder or a Hub id.

        braindecode's (huggingface_hub's) ``from_pretrained``, which first reads a shipped
        encoder's name (``"pars-small-v2"``,
        :data:`~braindecode_pars.weights.PRETRAINED_ENCODERS`)
        as the folder shipped with the package, offline and at once, instead of as a Hub
        repository. A folder of that name in the working directory is read instead, as
        huggingface_hub reads any existing folder; every other name is a Hub repository.

        Parameters
        ----------
        pretrained_model_name_or_path : str | Path
            A shipped encoder's name, a folder written by ``save_pretrained`` or a
            Hugging Face Hub repository id.
        *args, **kwargs
            huggingface_hub's (``map_location``, ``strict``, ``revision``...).

        Returns
        -------
        encoder : PatchEncoder
            In evaluation mode, as huggingface_hub and :func:`~braindecode_pars.load_encoder`
            return one (call ``.train()`` to train it further).
        """
        import contextlib
        import io
        import os
        from importlib import resources

        from braindecode_pars.weights import PRETRAINED_ENCODERS  # (not hub, which imports models)

        name = str(pretrained_model_name_or_path)
        if name in PRETRAINED_ENCODERS and not os.path.isdir(name):
            pretrained_model_name_or_path = str(resources.files("braindecode_pars.weights") / name)
        if not os.path.isdir(pretrained_model_name_or_path):
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        # huggingface_hub prints "Loading weights from local directory" on every load
        with contextlib.redirect_stdout(io.StringIO()):
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)

    # -- saving (braindecode's Hugging Face layout) ----------------------------------------
    def _save_pretrained(self, save_directory):
        """Write ``config.json`` and ``model.safetensors``, as braindecode does, and no more.

        Called by ``save_pretrained(folder)`` (huggingface_hub's ``ModelHubMixin``).
        braindecode's ``EEGModuleMixin._save_pretrained`` writes the same two files and
        also ``pytorch_model.bin``, the same weights again as a pickle, which
        ``from_pretrained`` never reads when ``model.safetensors`` is there; this
        override writes braindecode's ``config.json`` (``get_config()`` and the
        ``braindecode_version``) and lets huggingface_hub's ``PyTorchModelHubMixin``
        write the safetensors file.
        """
        import json
        from pathlib import Path

        from braindecode import __version__ as braindecode_version
        from huggingface_hub import PyTorchModelHubMixin

        config = dict(self.get_config(), braindecode_version=braindecode_version)
        (Path(save_directory) / "config.json").write_text(json.dumps(config, indent=2))
        PyTorchModelHubMixin._save_pretrained(self, Path(save_directory))

    def generate_model_card(self, *args, **kwargs):
        """The ``README.md`` that ``save_pretrained`` writes: this encoder's card.

        Instead of huggingface_hub's generic stub, the card of
        :func:`braindecode_pars.hub.folders.model_card` (:mod:`braindecode_pars.models.card`):
        the encoder's size, parameter count,
        sampling rate and patch length and how to load it (an existing ``README.md``
        is kept, as huggingface_hub does; :func:`~braindecode_pars.hub.folders.export_run`
        writes the card of a whole run).
        """
        from huggingface_hub import ModelCard

        from braindecode_pars.models.card import model_card

        return ModelCard(model_card(self))

    # -- steps ---------------------------------------------------------------------------
    def fixed_starts(self, n_times, stride=None, device=None):
        """Start samples of non-overlapping patches on a fixed grid (fine-tuning sampling).

        Returns a (n_patches,) long tensor ``[0, stride, 2 * stride, ...]`` with every patch
        inside the window; ``stride`` defaults to the patch length (a 1-s stride).
        """
        stride = self.patch_size if stride is None else int(stride)
        return torch.arange(0, n_times - self.patch_size + 1, stride, device=device)

    def normalize(self, X):
        """The window as the encoder cuts it into patches, in its ``normalization``.

        ``"window"`` and ``"window+scale"``: :func:`instance_normalize` (zero mean, unit
        variance over time, per window; invariant to gain and offset; flat windows give
        zeros). ``"fixed"``: ``clip((X - mean) / amplitude_scale, -amplitude_clip,
        amplitude_clip)``, the mean over time of each window, after the unit check (see
        the class). Half-precision input is normalised in float32 and returned in its
        own type.

        Parameters
        ----------
        X : torch.Tensor, shape (batch, 1, n_times)

        Returns
        -------
        normalized : torch.Tensor, the shape and type of ``X``
        """
        return self._normalized(X)[0]

    def _normalized(self, X):
        """The normalised window and, in ``"window+scale"``, the standardised log standard
        deviation of each window, (batch, 1) float32 (0 for a flat window); else None."""
        if self.normalization == "window":
            return instance_normalize(X, self.eps), None
        dtype = X.dtype
        Xf, mean, var, flat = _moments(X, self.eps)
        std = torch.sqrt(var)
        if not self._unit_checked:  # pretraining checked a sample of its data once
            self._check_unit(std, flat)
        flat = flat | (std < _EEG_STD_RANGE[self.unit][0])  # a dead window: no signal
        if self.normalization == "fixed":
            out = ((Xf - mean) / self.amplitude_scale).clamp(
                -self.amplitude_clip, self.amplitude_clip
            )
            return out.to(dtype), None
        tiny = torch.finfo(Xf.dtype).tiny
        out = (Xf - mean) / torch.sqrt(var.clamp_min(tiny))  # as instance_normalize
        out = torch.where(flat, torch.zeros_like(out), out)
        log_std = 0.5 * torch.log(var.clamp_min(tiny))
        z = (log_std - self.log_std_mean) / self.log_std_std
        z = torch.where(flat, torch.zeros_like(z), z)
        return out.to(dtype), z.reshape(z.shape[0], 1).float()

    #: Whether the unit was checked on a sample of the data this encoder now reads, so
    #: that its forward passes check nothing (set by pretraining for its fit: a host
    #: wait per eager step, a device-side assertion under ``torch.compile``, otherwise).
    _unit_checked = False

    def check_unit(self, X):
        """Refuse windows whose typical standard deviation lies outside the range of EEG
        in the encoder's ``unit``, as its amplitude-aware normalisations do in every
        forward pass (a ``ValueError`` naming the values and the unit they look like),
        on the host, once: for a sample of the data before training. Nothing is
        checked for ``normalization="window"``, which reads no amplitude.

        Parameters
        ----------
        X : array-like, shape (n_windows, 1, n_times)
            Single-channel windows (any leading dimensions), on the CPU.
        """
        if self.normalization == "window":
            return
        X = torch.as_tensor(X).detach().cpu().float()
        _, _, var, flat = _moments(X.reshape(-1, 1, X.shape[-1]), self.eps)
        self._check_unit(torch.sqrt(var), flat, eager=True)

    def _check_unit(self, std, flat, eager=False):
        """Refuse a batch whose typical window (the median standard deviation ``std`` of
        the windows that are not ``flat``) lies outside the range of EEG in the encoder's
        unit: a unit mistake moves every window by a factor of 1e6, while a dead window
        (below the range: it is then read as flat) or a saturated one among others is
        data, not a mistake. A ``ValueError`` that names the values; under
        ``torch.compile`` an assertion in the graph (no host synchronisation) unless
        ``eager``."""
        low, high = _EEG_STD_RANGE[self.unit]
        typical = std.masked_fill(flat, float("nan")).nanmedian()  # nan: every window flat
        outside = (typical < low) | (typical > high)
        if torch.compiler.is_compiling() and not eager:
            torch._assert_async(
                ~outside,
                f"'X' holds windows whose typical standard deviation lies outside "
                f"[{low:g}, {high:g}] {self.unit}, the range of EEG in the unit this "
                f"encoder reads (normalization={self.normalization!r}, "
                f"unit={self.unit!r}).",
            )
            return
        if not bool(outside):
            return
        typical = float(typical)
        hint = ""
        for other, volts in _UNITS.items():  # the unit the windows look like they are in
            converted = typical * volts / _UNITS[self.unit]
            if other != self.unit and low <= converted <= high:
                factor = volts / _UNITS[self.unit]
                hint = (
                    f" They look like {other!r}: multiply them by {factor:g}, or build the "
                    f"encoder with unit={other!r}."
                )
        raise ValueError(
            f"'X' holds windows whose median standard deviation ({typical:.3g}, over "
            f"{int((~flat).sum())} windows with signal) lies outside [{low:g}, {high:g}] "
            f"{self.unit}, the range of EEG in the unit this encoder reads "
            f"(normalization={self.normalization!r}, unit={self.unit!r}): give the "
            f"windows in {self.unit}.{hint}"
        )

    def cut_patches(self, X, starts):
        """Patches ``X[b, 0, s : s + patch_size]`` for every start ``s`` of ``starts[b]``.

        Parameters
        ----------
        X : torch.Tensor, shape (batch, 1, n_times)
        starts : torch.Tensor, shape (batch, n_patches) or (n_patches,)
            Integer start samples.

        Returns
        -------
        patches : torch.Tensor, shape (batch, n_patches, patch_size)
        """
        B = X.shape[0]
        windows = X[:, 0].unfold(-1, self.patch_size, 1)  # (batch, n_times - M + 1, M), a view
        if starts.dim() == 1:
            return windows[:, starts]
        return windows[torch.arange(B, device=X.device)[:, None], starts]

    def tokenize(self, X, starts):
        """Normalise, cut and project: (batch, 1, n_times) -> (batch, n_patches, emb_dim).

        In ``"window+scale"`` the embedding of each window's standardised log standard
        deviation is added to each of its tokens.
        """
        normalized, log_std = self._normalized(X)
        tokens = self.tokenizer(self.cut_patches(normalized, starts))
        if log_std is None:
            return tokens
        return tokens + self.scale_embedding(log_std.to(tokens.dtype))[:, None, :]

    def position_embedding(self, starts, pos_mask=None):
        """Sinusoidal PE at each patch's start (in patch units), the mask token where masked.

        Returns a tensor of shape (batch, n_patches, emb_dim) (or (n_patches, emb_dim) for
        1-D ``starts`` and no mask) to be added to the tokens.
        """
        pe = _sinusoidal_embedding(starts / self.patch_size, self.emb_dim)
        pe = pe.to(self.pos_mask_token.dtype)
        if pos_mask is None:
            return pe
        if pe.dim() == 2:
            pe = pe.expand(pos_mask.shape[0], -1, -1)
        return torch.where(pos_mask[..., None], self.pos_mask_token, pe)

    def encode(self, tokens, key_mask=None):
        """The transformer blocks and the final LayerNorm on (batch, n_tokens, emb_dim)."""
        for block in self.blocks:
            tokens = block(tokens, key_mask)
        return self.norm(tokens)

    def check_input(self, X, n_times=None):
        """Raise unless ``X`` is a (batch, 1, n_times) tensor at least one patch long.

        With ``n_times`` (a model built for windows of that length), the windows must
        hold exactly ``n_times`` samples.
        """
        if not torch.is_tensor(X) or X.dim() != 3 or X.shape[1] != 1:
            shape = tuple(X.shape) if hasattr(X, "shape") else type(X).__name__
            raise ValueError(
                "'X' must be a tensor of shape (batch, 1, n_times) holding one channel, "
                f"but got shape {shape}."
            )
        if n_times is not None and X.shape[-1] != n_times:
            raise ValueError(
                f"'X' windows hold {X.shape[-1]} samples but the model was built for "
                f"n_times={n_times}."
            )
        if X.shape[-1] < self.patch_size:
            raise ValueError(
                f"'X' holds {X.shape[-1]} samples, fewer than one patch of "
                f"patch_seconds={self.patch_seconds} s ({self.patch_size} samples)."
            )

    def forward(self, X, starts=None, pos_mask=None, key_mask=None, add_pe=True):
        """Encode patches of single-channel windows.

        Parameters
        ----------
        X : torch.Tensor, shape (batch, 1, n_times)
        starts : torch.Tensor, shape (batch, n_patches) or (n_patches,), optional
            Patch start samples; default: non-overlapping patches on a 1-patch stride.
        pos_mask : torch.Tensor of bool, shape (batch, n_patches), optional
            True where the positional embedding is replaced by the position-mask token.
        key_mask : torch.Tensor of bool, shape (batch, n_patches), optional
            True where a token is hidden from the keys and values of every attention.
        add_pe : bool
            If False, no positional information at all is added (MP3).

        Returns
        -------
        tokens : torch.Tensor, shape (batch, n_patches, emb_dim)
        """
        self.check_input(X)
        if starts is None:
            starts = self.fixed_starts(X.shape[-1], device=X.device)
        tokens = self.tokenize(X, starts)  # (batch, n_patches, emb_dim)
        if add_pe:
            tokens = tokens + self.position_embedding(starts, pos_mask)
        return self.encode(tokens, key_mask)


def encoder_sfreq(encoder, sfreq, input_window_seconds):
    """The ``sfreq`` signal argument of a model built on ``encoder``: as given, or the
    encoder's when neither ``sfreq`` nor ``input_window_seconds`` is given."""
    if encoder is not None and sfreq is None and input_window_seconds is None:
        return encoder.sfreq
    return sfreq


def checked_encoder(encoder, sfreq, n_times, **encoder_kwargs):
    """The :class:`PatchEncoder` of a model of windows of ``n_times`` samples at ``sfreq``.

    Builds one from ``encoder_kwargs`` if ``encoder`` is None; otherwise checks that
    ``encoder`` is a PatchEncoder made for ``sfreq`` and returns it unchanged. In both
    cases one patch must fit in a window (``n_times`` None: no window length to check).
    """
    if encoder is None:
        encoder = PatchEncoder(sfreq=sfreq, **encoder_kwargs)
    elif not isinstance(encoder, PatchEncoder):
        raise InvalidParameterError(
            f"'encoder' must be a PatchEncoder or None, but got {type(encoder).__name__}."
        )
    elif encoder_kwargs:
        raise InvalidParameterError(
            f"Encoder settings {sorted(encoder_kwargs)} cannot be given together with "
            "an 'encoder' instance."
        )
    elif abs(encoder.sfreq - sfreq) > 1e-6:
        raise InvalidParameterError(
            f"The encoder was pretrained at sfreq={encoder.sfreq} Hz but the data has "
            f"sfreq={sfreq} Hz; resample the data to {encoder.sfreq} Hz "
            "(braindecode_pars.io.resample_windows) rather than the encoder."
        )
    if n_times is not None and n_times < encoder.patch_size:
        raise InvalidParameterError(
            f"A patch of patch_seconds={encoder.patch_seconds} s ({encoder.patch_size} "
            f"samples) is longer than the window, n_times={n_times}; windows must not be "
            "shorter than one patch."
        )
    return encoder
