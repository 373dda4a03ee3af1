"""Multi-channel fine-tuning model of PARS (paper section 2.4 and Fig. 2)."""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import numbers
import os
from pathlib import Path

import numpy as np
import torch
from braindecode.models.base import EEGModuleMixin
from torch import nn

from braindecode_pars._util.checks import InvalidParameterError, check_option, check_range
from braindecode_pars._util.signal_attributes import SignalAttributesMixin
from braindecode_pars.models.encoder import PatchEncoder, checked_encoder, encoder_sfreq
from braindecode_pars.models.encoder_config import PatchEncoderConfig
from braindecode_pars.models.spatial_front import BandLogVariance, SpatialFilter, check_bands

#: Values of ``MultiChannelClassifier(pooling=...)``.
POOLINGS = ("mean", "mean+std")

#: Values of ``MultiChannelClassifier(readout=...)``.
READOUTS = ("attention", "channels")

#: Values of ``MultiChannelClassifier(amplitude=...)``.
AMPLITUDES = (False, True, "relative")

#: Values of ``MultiChannelClassifier(token_gate=...)``.
TOKEN_GATES = (False, True, "closed")

#: Keywords of huggingface_hub's ``from_pretrained`` (how to load, not what to build):
#: with an encoder's name or folder, they go to the encoder's loader.
_LOAD_KEYWORDS = (
    "force_download", "resume_download", "proxies", "token", "cache_dir",
    "local_files_only", "revision", "map_location", "strict",
)  # fmt: skip


def _encoder_folder(name_or_path):
    """The folder of the encoder that ``name_or_path`` names, or None: a shipped
    encoder's name (its folder in the package, unless a folder of that name exists
    here, which huggingface_hub would read), or a folder of a saved
    :class:`PatchEncoder` (its ``config.json`` holds only the encoder's arguments)."""
    from importlib import resources

    from braindecode_pars.weights import PRETRAINED_ENCODERS  # (not hub, which imports models)

    name = str(name_or_path)
    if name in PRETRAINED_ENCODERS and not os.path.isdir(name):
        return str(resources.files("braindecode_pars.weights") / name)
    config = Path(name) / "config.json"
    if not config.is_file():
        return None
    try:
        keys = set(json.loads(config.read_text()))
    except (OSError, ValueError):
        return None
    encoder_args = set(inspect.signature(PatchEncoder).parameters) | {"braindecode_version"}
    return name if keys <= encoder_args else None


def check_front_end(spatial_filters, spatial_max_norm, patch_stride):
    """Check ``MultiChannelClassifier``'s front-end parameters (the fine-tuner's too)."""
    integral = isinstance(spatial_filters, numbers.Integral) and not isinstance(
        spatial_filters, bool | np.bool_
    )
    if spatial_filters is not None and (not integral or spatial_filters < 1):
        raise InvalidParameterError(
            f"'spatial_filters' must be None or an int >= 1, but got {spatial_filters!r}."
        )
    if spatial_max_norm is not None:
        check_range("spatial_max_norm", spatial_max_norm, 0, float("inf"), low_open=True)
    if patch_stride is not None:
        check_range("patch_stride", patch_stride, 0, float("inf"), low_open=True)


def channel_tokens(encoder, X, starts=None):
    """(batch, n_chans, n_times) -> (batch, n_chans, emb_dim): each channel through the
    single-channel ``encoder`` (patches at ``starts``, by default non-overlapping 1-s
    patches; full PE), averaged over patches."""
    B, C, T = X.shape
    tokens = encoder(X.reshape(B * C, 1, T), starts=starts)
    return tokens.mean(dim=1).view(B, C, -1)


class MultiChannelClassifier(SignalAttributesMixin, EEGModuleMixin, nn.Module):
    """Every channel through one pretrained PatchEncoder, then spatial cross-attention.

    Each channel is embedded by the same single-channel :class:`PatchEncoder` with
    fixed, non-overlapping 1-s patches and the full sinusoidal PE (no position
    masking); the tokens are averaged over time into one spatial token per channel;
    during training each spatial token is dropped with probability
    ``spatial_drop_prob`` (at least one is kept per example); a learnable query token
    cross-attends to the remaining spatial tokens, and ``final_layer`` maps the result
    to the classes (paper section 2.4, after [Liu2022b]_ and [Chau2025]_).

    The paper does not say whether spatial tokens know their channel. Without that
    the model cannot tell one electrode from another (C3 from C4, say), so by
    default a learnable embedding per channel is added to the spatial tokens, as
    BIOT's channel tokens and PopT's electrode positions do; ``channel_embedding=False``
    gives a model that ignores the channel order and accepts any montage.

    As every braindecode model: ``model(X)`` gives the logits,
    ``model(X, return_features=True)`` the dict ``{"features": ..., "cls_token": None}``
    (the pooled token, shape (batch, emb_dim), that ``final_layer`` reads), and
    ``reset_head(n_outputs)`` a new head. ``MultiChannelClassifier.from_pretrained``
    takes a shipped encoder's name (``"pars-small-v2"``) or a saved encoder's folder,
    and builds the classifier over that encoder with a new head, offline; a folder (or
    Hugging Face Hub repository) of a saved ``MultiChannelClassifier`` loads that
    classifier, as braindecode's ``from_pretrained`` loads any model.

    Parameters
    ----------
    n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq
        braindecode's signal arguments (the multi-channel fine-tuning windows).
        ``n_times`` may be left out: windows of any length of one patch or more are
        then taken. ``sfreq`` left out is the encoder's.
    encoder : PatchEncoder | None
        The pretrained encoder (used as is, not copied). If None, a new one is built
        from ``encoder_kwargs`` at the paper's size: training from scratch.
    spatial_drop_prob : float
        Probability of dropping a spatial token during training. Paper: 0.5
        (section 2.5).
    amplitude : False | True | "relative"
        Give the head what the encoder's instance normalisation (per channel and
        window) removes. ``"relative"``: each channel's log standard deviation minus
        the mean of its window's channels (the relative amplitude across channels,
        blind to the window's overall gain and to the unit), standardised per channel
        (cumulative statistics of the training batches), the vector of the window's
        channels mapped linearly to ``emb_dim`` and added to the pooled token before
        its norm: one map of all channels at once, so a difference between two
        channels reaches ``final_layer``. ``True``: each channel's log standard
        deviation, standardised per channel, projected and added to its spatial token
        before the spatial attention, whose weighted mean over channels mixes the
        channels' values (so it tells two channels' amplitudes apart poorly; see
        :doc:`/benchmarks/finetuning`). False (the default, the paper's model, and
        :class:`~braindecode_pars.PARSFineTuner`'s default): none. The encoder is
        unchanged.
    channel_embedding : bool
        Add a learnable embedding per channel to the spatial tokens.
    n_heads : int
        Heads of the spatial cross-attention (not given by the paper; 8 as the encoder).
    pooling : {"mean", "mean+std"}
        How a channel's tokens become its spatial token: their mean over patches (the
        paper's), or their mean and standard deviation over patches, concatenated and
        mapped back to ``emb_dim`` by a learnable linear layer.
    spatial_filters : int | None
        None (the default, the paper's model): the encoder reads the input channels.
        An int ``K``: a spatial front end
        (:class:`~braindecode_pars.models.spatial_front.SpatialFilter`) first maps the
        ``n_chans`` channels linearly to ``K`` virtual channels (each filter's L2 norm
        at most ``spatial_max_norm``), and everything after it (the encoder, the
        channel embeddings, the amplitude path, the pooling) reads the virtual
        channels as it read channels: the encoder runs on ``K`` sequences per window
        instead of ``n_chans`` (``K < n_chans`` saves that share of its compute). The
        filters start as the identity's first rows;
        :class:`~braindecode_pars.PARSFineTuner` sets them from its training windows
        (``spatial_init``).
    spatial_max_norm : float | None
        The largest L2 norm of a spatial filter (None: unconstrained).
    band_power : None | (low, high) | sequence of (low, high)
        None (the default): nothing. Bands in Hz (``0 <= low < high``; a band ending
        above the Nyquist frequency cut there, one starting at or above it refused with
        ``ValueError``): the log-variance of each virtual
        channel (each channel without ``spatial_filters``) in each band, relative to
        the window's channels and standardised by statistics fixed from the training
        windows (:class:`~braindecode_pars.models.spatial_front.BandLogVariance`,
        whose ``set_statistics`` the fine-tuner calls), concatenated to the normed
        pooled token, so that ``final_layer`` reads them linearly (as LDA reads CSP's
        log-variances): the band power that motor imagery's ERD/ERS is, which the
        encoder's per-channel normalisation removes.
    token_gate : False | True | "closed"
        False (the default, the paper's model): no gate, the pooled token at full
        weight. True: the pooled token times a learnable scalar that starts at 0
        (ReZero's gate), so that training starts from the band-power path. How far
        such a gate opens is set mostly by the number of optimiser steps (Adam moves a
        scalar by about the learning rate a step, whatever its gradient), not by how
        much the token helps: :class:`~braindecode_pars.PARSFineTuner`'s
        ``token_gate="auto"`` decides on held-out windows instead. ``"closed"``: the
        token path removed, its features held at 0 and the encoder not run (nor the
        spatial attention and the amplitude path, which feed it), so that only the
        spatial filters, the band log-variances and ``final_layer`` (the front end
        alone) decide and train; the encoder's weights stay as they were.
    readout : {"attention", "channels"}
        How the channels' tokens become one: the learnable query's cross-attention (the
        paper's), or ``"channels"``: the tokens concatenated in channel order and mapped
        linearly to ``emb_dim`` (a channel-indexed head that keeps channels apart).
    patch_stride : float | None
        Seconds between the starts of the encoder's patches in a window; None: the
        patch length (non-overlapping patches, the paper's).
    **encoder_kwargs
        ``patch_seconds``, ``emb_dim``, ``depth``, ``n_heads`` (as ``encoder_n_heads``),
        ``ff_dim``, ``drop_prob`` for a new encoder.

    References
    ----------
    .. [Liu2022b] Yang, C., Westover, M. B., Sun, J. BIOT: cross-data biosignal
       learning in the wild. NeurIPS 2023.
    .. [Chau2025] Chau, G., et al. Population transformer: learning population-level
       representations of neural activity. ICLR 2025.

    Examples
    --------
    >>> import torch
    >>> model = MultiChannelClassifier(n_outputs=4, n_chans=3, n_times=400, sfreq=100,
    ...                                emb_dim=16, depth=1, encoder_n_heads=2, ff_dim=16,
    ...                                n_heads=2)
    >>> model(torch.randn(5, 3, 400)).shape  # logits, no softmax
    torch.Size([5, 4])
    >>> model(torch.randn(5, 3, 400), return_features=True)["features"].shape
    torch.Size([5, 16])

    Over the shipped encoder, with a new head of two classes, for three channels:

    >>> model = MultiChannelClassifier.from_pretrained("pars-small-v2", n_outputs=2, n_chans=3)
    >>> model(torch.randn(5, 3, 1000)).shape
    torch.Size([5, 2])
    """

    def __init__(
        self,
        n_outputs=None,
        n_chans=None,
        chs_info=None,
        n_times=None,
        input_window_seconds=None,
        sfreq=None,
        encoder=None,
        spatial_drop_prob=0.5,  # paper section 2.5: "dropped with 0.5 probability"
        channel_embedding=True,
        amplitude=False,
        n_heads=8,
        pooling="mean",
        encoder_n_heads=8,
        spatial_filters=None,
        spatial_max_norm=1.0,
        band_power=None,
        token_gate=False,
        readout="attention",
        patch_stride=None,
        **encoder_kwargs,
    ):
        sfreq = encoder_sfreq(encoder, sfreq, input_window_seconds)
        super().__init__(n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq)
        check_range("spatial_drop_prob", spatial_drop_prob, 0, 1, high_open=True)
        check_option("pooling", pooling, POOLINGS)
        check_option("amplitude", amplitude, AMPLITUDES)
        check_option("readout", readout, READOUTS)
        check_option("token_gate", token_gate, TOKEN_GATES)
        check_front_end(spatial_filters, spatial_max_norm, patch_stride)
        spatial_filters = None if spatial_filters is None else int(spatial_filters)
        bands = check_bands("band_power", band_power)
        #: "relative", "token" (True) or None (False)
        self._amplitude_path = (
            "relative" if isinstance(amplitude, str) else ("token" if amplitude else None)
        )
        if encoder is None:
            encoder_kwargs["n_heads"] = encoder_n_heads
        else:
            encoder_kwargs = {}  # settings of a new encoder; a given one is used as it is
        n_times = getattr(self, "n_times", None)  # None: windows of any length
        self.encoder = checked_encoder(encoder, self.sfreq, n_times, **encoder_kwargs)
        self.spatial_drop_prob = spatial_drop_prob
        self.n_heads = n_heads
        emb_dim = self.encoder.emb_dim
        self.pooling = pooling
        self.spatial_filters = spatial_filters
        self.spatial_max_norm = spatial_max_norm
        self.band_power = bands
        self.token_gate = token_gate
        self.readout = readout
        self.patch_stride = patch_stride
        self.spatial_filter = None
        if spatial_filters is not None:
            self.spatial_filter = SpatialFilter(self.n_chans, spatial_filters, spatial_max_norm)
        #: the channels the encoder reads: the virtual channels, or the input's
        n_read = self.n_chans if spatial_filters is None else spatial_filters
        if pooling == "mean+std":
            self.pool_proj = nn.Linear(2 * emb_dim, emb_dim)
        self.amplitude = amplitude
        if self._amplitude_path:
            # each channel's log standard deviation (relative to its window's channels),
            # standardised over the training batches (so the unit of the data does not
            # matter), projected to a token, or read by the final layer
            self.amplitude_norm = nn.BatchNorm1d(n_read, affine=False, momentum=None)
        if self._amplitude_path == "token":
            self.amplitude_proj = nn.Linear(1, emb_dim)
        elif self._amplitude_path == "relative":
            self.amplitude_proj = nn.Linear(n_read, emb_dim)
        self.band_log_variance = None
        if bands is not None:
            self.band_log_variance = BandLogVariance(n_read, bands, self.sfreq, name="band_power")
        self.gate = nn.Parameter(torch.zeros(1)) if token_gate is True else None
        self.channel_embedding = None
        if channel_embedding:
            self.channel_embedding = nn.Parameter(torch.zeros(1, n_read, emb_dim))
            nn.init.normal_(self.channel_embedding, std=0.02)
        self.query = nn.Parameter(torch.zeros(1, 1, emb_dim))
        nn.init.normal_(self.query, std=0.02)
        if readout == "attention":
            self.spatial_attn = nn.MultiheadAttention(emb_dim, n_heads, batch_first=True)
        else:
            self.channel_readout = nn.Linear(n_read * emb_dim, emb_dim)
        self.norm = nn.LayerNorm(emb_dim)
        self.final_layer = nn.Linear(self.n_features, self.n_outputs)

    def spatial_tokens(self, X):
        """(batch, n_chans, n_times) -> (batch, n_chans, emb_dim): per-channel token, the
        mean over patches (``pooling="mean"``) or the mean and standard deviation mapped
        by ``pool_proj`` (``"mean+std"``)."""
        starts = self.patch_starts(X.shape[-1], X.device)
        if self.pooling == "mean":
            return channel_tokens(self.encoder, X, starts)
        B, C, T = X.shape
        tokens = self.encoder(X.reshape(B * C, 1, T), starts=starts)  # (B * C, n_patches, emb_dim)
        std = tokens.std(dim=1, unbiased=False) if tokens.shape[1] > 1 else tokens[:, 0] * 0
        pooled = torch.cat([tokens.mean(dim=1), std], dim=-1)
        return self.pool_proj(pooled).view(B, C, -1)

    def patch_starts(self, n_times, device=None):
        """The encoder's patch starts in a window of ``n_times`` samples (``patch_stride``
        apart; None: the encoder's default, non-overlapping patches)."""
        if self.patch_stride is None:
            return None
        stride = max(1, int(round(self.patch_stride * self.sfreq)))
        return self.encoder.fixed_starts(n_times, stride, device=device)

    def virtual_channels(self, X):
        """(batch, n_chans, n_times) -> what the encoder reads: the spatial filters'
        virtual channels (batch, spatial_filters, n_times), or ``X`` itself."""
        return X if self.spatial_filter is None else self.spatial_filter(X)

    def amplitude_features(self, X):
        """(batch, n_chans, n_times) -> (batch, n_chans): what normalisation took.

        The log standard deviation of every channel (``amplitude="relative"``: minus the
        mean of the window's channels), standardised per channel with cumulative
        statistics of the training batches. A channel without signal (all zeros, as
        braindecode's ``ChannelsDropout`` leaves it) gets the mean, so it neither enters
        the statistics, nor the mean of its window's channels, as an outlier nor carries
        one.
        """
        std = X.float().std(dim=-1)
        log_std = torch.log(std + torch.finfo(torch.float32).tiny)
        flat = std <= 0  # no signal (a channel zeroed by augmentation): no amplitude
        if self._amplitude_path == "relative":
            kept = (~flat).float()
            window = (log_std * kept).sum(-1, keepdim=True) / kept.sum(-1, keepdim=True).clamp(1)
            log_std = log_std - window
        norm = self.amplitude_norm
        if flat.any():  # stands at the mean, outside the statistics (else log(tiny) = -87)
            if norm.training and log_std.shape[0] >= 2:
                kept = (~flat).float()
                fill = (log_std * kept).sum(0) / kept.sum(0).clamp_min(1)
            else:
                fill = norm.running_mean
            log_std = torch.where(flat, fill.expand_as(log_std), log_std)
        if norm.training and log_std.shape[0] < 2:  # one window: no batch statistics
            return (log_std - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps)
        return norm(log_std)  # (batch, n_chans)

    def amplitude_tokens(self, X):
        """(batch, n_chans, n_times) -> (batch, n_chans, emb_dim): ``amplitude=True``'s
        tokens, :meth:`amplitude_features` through a linear map."""
        return self.amplitude_proj(self.amplitude_features(X)[..., None])

    def spatial_dropout(self, B, C, device):
        """Key mask (batch, n_chans), True = dropped; never drops every channel."""
        if not self.training or self.spatial_drop_prob == 0:
            return None
        drop = torch.rand(B, C, device=device) < self.spatial_drop_prob
        keep_one = torch.randint(0, C, (B,), device=device)
        drop[torch.arange(B, device=device), keep_one] = False
        return drop

    def forward(self, X, return_features=False):
        """Logits (batch, n_outputs), or braindecode's dict of features.

        Parameters
        ----------
        X : torch.Tensor, shape (batch, n_chans, n_times)
        return_features : bool
            Return ``{"features": pooled, "cls_token": None}`` instead of logits, as
            every braindecode model does: ``pooled`` (batch, emb_dim) is the query
            token after the spatial cross-attention and its norm, what ``final_layer``
            reads (the query is this model's only summary token, and it is that one;
            with ``amplitude="relative"``, plus the map of the channels' relative
            amplitudes before the norm; with ``readout="channels"``, the channel
            readout's output instead of the query's; with ``token_gate=True``, times
            the gate; with ``token_gate="closed"``, zeros; with ``band_power``, the
            band log-variances concatenated after it: shape (batch,
            :attr:`n_features`)).

        Returns
        -------
        torch.Tensor | dict
        """
        self._check_input(X)
        X = self.virtual_channels(X)  # (batch, C, n_times): C virtual channels or n_chans
        if self.token_gate == "closed":  # the front end alone: the encoder is not run
            features = X.new_zeros((X.shape[0], self.encoder.emb_dim))
        else:
            features = self._token_features(X)
        if self.band_log_variance is not None:  # the channels' band power, read linearly
            bands = self.band_log_variance(X).to(features.dtype)
            features = torch.cat([features, bands], dim=1)  # (batch, n_features)
        if return_features:
            return {"features": features, "cls_token": None}
        return self.final_layer(features)

    def _token_features(self, X):
        """(batch, C, n_times) virtual channels -> (batch, emb_dim): the normed pooled
        token, times the gate with ``token_gate=True``."""
        B, C, _ = X.shape
        spatial = self.spatial_tokens(X)  # (batch, C, emb_dim)
        if self._amplitude_path == "token":
            spatial = spatial + self.amplitude_tokens(X)
        if self.channel_embedding is not None:
            spatial = spatial + self.channel_embedding
        drop = self.spatial_dropout(B, C, X.device)
        if self.readout == "attention":
            query = self.query.expand(B, -1, -1)  # (batch, 1, emb_dim)
            pooled, _ = self.spatial_attn(
                query, spatial, spatial, key_padding_mask=drop, need_weights=False
            )
            pooled = pooled[:, 0]  # (batch, emb_dim)
        else:  # channel-indexed: each channel's token through its own weights
            if drop is not None:
                spatial = spatial * (~drop)[..., None].to(spatial.dtype)
            pooled = self.channel_readout(spatial.flatten(1))
        if self._amplitude_path == "relative":  # the channels' relative amplitudes
            pooled = pooled + self.amplitude_proj(self.amplitude_features(X).to(pooled.dtype))
        features = self.norm(pooled)  # (batch, emb_dim)
        if self.gate is not None:  # after the norm, which a scale before it would not reach
            features = self.gate.to(features.dtype) * features
        return features

    def _check_input(self, X):
        """Refuse windows of another shape than (batch, n_chans, n_times), or, with
        ``n_times`` left out, shorter than one patch."""
        n_times = getattr(self, "n_times", None)
        expected = "n_times" if n_times is None else n_times
        if (
            X.dim() != 3
            or X.shape[1] != self.n_chans
            or (n_times is not None and X.shape[2] != n_times)
        ):
            raise ValueError(
                f"'X' must have shape (batch, {self.n_chans}, {expected}), "
                f"but got {tuple(X.shape)}."
            )
        if X.shape[2] < self.encoder.patch_size:
            raise ValueError(
                f"'X' windows of {X.shape[2]} samples are shorter than one patch of the "
                f"encoder ({self.encoder.patch_size} samples at {self.sfreq:g} Hz)."
            )

    def reset_head(self, n_outputs):
        """Replace ``final_layer`` by a new one with ``n_outputs`` outputs."""
        self._set_n_outputs(n_outputs)
        self.final_layer = nn.Linear(self.n_features, n_outputs).to(self.query.device)

    @property
    def n_features(self):
        """The width of what ``final_layer`` reads: ``emb_dim``, plus the band
        log-variances with ``band_power``."""
        extra = 0
        if self.band_log_variance is not None:
            extra = self.band_log_variance.mean.numel()
        return self.encoder.emb_dim + extra

    # -- saving and loading (braindecode's Hugging Face layout) ----------------------------
    def get_config(self):
        """braindecode's ``get_config()``, with the encoder as its settings.

        The encoder given to ``__init__`` is not serialisable: its settings
        (``emb_dim``, ``depth``, ``encoder_n_heads``...) and the sampling rate take its
        place, so that ``from_config`` builds, and ``from_pretrained`` loads, a model of
        the same shape however its encoder was given.

        Returns
        -------
        config : dict
        """
        config = super().get_config()
        config["encoder"] = None
        if config.get("sfreq") is None and config.get("input_window_seconds") is None:
            config["sfreq"] = float(self.sfreq)  # taken from the encoder
        settings = self.encoder.config.asdict()
        config["encoder_n_heads"] = settings.pop("n_heads")
        config.update(settings)
        return config

    def _save_pretrained(self, save_directory):
        """Write ``config.json`` (:meth:`get_config`) and ``model.safetensors``, as
        braindecode does (its ``pytorch_model.bin`` copy of the same weights aside), so
        that ``from_pretrained`` rebuilds this model."""
        from braindecode import __version__ as braindecode_version
        from huggingface_hub import PyTorchModelHubMixin

        config = dict(self.get_config(), braindecode_version=braindecode_version)
        (Path(save_directory) / "config.json").write_text(json.dumps(config, indent=2))
        PyTorchModelHubMixin._save_pretrained(self, Path(save_directory))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs):
        """The classifier over a pretrained encoder with a new head, or a saved classifier.

        A shipped encoder's name (``"pars-small-v2"``,
        :data:`~braindecode_pars.weights.PRETRAINED_ENCODERS`) or the folder of a
        saved :class:`~braindecode_pars.PatchEncoder` gives a new classifier over
        that encoder (read offline, as :meth:`PatchEncoder.from_pretrained
        <braindecode_pars.PatchEncoder.from_pretrained>` reads it), its head and
        spatial attention new: ``kwargs`` are the classifier's (``n_outputs``, and
        ``n_chans`` or ``chs_info``, at least), and the loading keywords of
        huggingface_hub (``map_location``, ``strict``...) go to the encoder's loader.
        Any other folder or Hugging Face Hub repository is read as a saved
        ``MultiChannelClassifier`` by braindecode's ``from_pretrained`` (a new head
        when ``n_outputs`` differs from the saved one).

        Parameters
        ----------
        pretrained_model_name_or_path : str | Path
            A shipped encoder's name, a saved encoder's folder, or the folder or Hub
            repository of a saved ``MultiChannelClassifier``.
        **kwargs
            The classifier's arguments (``n_outputs``, ``n_chans``, ``chs_info``,
            ``n_times``, ``spatial_drop_prob``, ``pooling``...) and huggingface_hub's.

        Returns
        -------
        model : MultiChannelClassifier
            In evaluation mode, as braindecode's ``from_pretrained`` returns models
            (call ``.train()`` to fine-tune it).

        Examples
        --------
        >>> model = MultiChannelClassifier.from_pretrained(
        ...     "pars-small-v2", n_outputs=2, n_chans=3)
        >>> model.encoder.sfreq, model.n_outputs
        (100.0, 2)
        """
        folder = _encoder_folder(pretrained_model_name_or_path)
        if folder is None and not os.path.isdir(pretrained_model_name_or_path):
            return super().from_pretrained(pretrained_model_name_or_path, **kwargs)
        if folder is None:  # huggingface_hub prints "Loading weights from local directory"
            with contextlib.redirect_stdout(io.StringIO()):
                return super().from_pretrained(pretrained_model_name_or_path, **kwargs)
        fixed = sorted(set(kwargs) & {"encoder", "encoder_n_heads", *PatchEncoderConfig.fields()})
        if fixed:
            raise InvalidParameterError(
                f"{fixed} cannot be given with a pretrained encoder "
                f"({str(pretrained_model_name_or_path)!r}): its settings are its own. Build "
                "MultiChannelClassifier(encoder=None, ...) for a new encoder of other settings."
            )
        if kwargs.get("n_outputs") is None:
            raise InvalidParameterError(
                "'n_outputs' must be given: the number of classes of the new head over "
                f"the encoder {str(pretrained_model_name_or_path)!r}, but got None."
            )
        load = {k: kwargs.pop(k) for k in _LOAD_KEYWORDS if k in kwargs}
        encoder = PatchEncoder.from_pretrained(folder, **load)
        return cls(encoder=encoder, **kwargs).eval()
