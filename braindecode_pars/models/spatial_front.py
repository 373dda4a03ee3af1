"""The spatial front end of :class:`~braindecode_pars.MultiChannelClassifier`: learned
spatial filters that map the input channels to virtual channels before the encoder, and
the band-limited log-variance of those virtual channels.

Motor imagery lives in the difference of band power between electrodes (C3 against C4
in 8-30 Hz). The paper's head normalises each channel alone and averages its tokens over
time before channels meet, once, in an attention-weighted mean: a contrast between two
channels cancels there. These two modules act on the signals instead, as CSP
(Blankertz et al., 2008), ShallowFBCSPNet (Schirrmeister et al., 2017), EEGNet's
depthwise spatial convolution (Lawhern et al., 2018) and EEGPT's adaptive spatial filter
do: a linear map of the channels with a max-norm per filter, then the log-variance of
each virtual channel in a band.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from braindecode_pars._util.bands import check_band_pairs as check_bands
from braindecode_pars._util.bands import cut_at_nyquist, fir_band_pass


class SpatialFilter(nn.Module):
    """A linear map from ``n_chans`` input channels to ``n_filters`` virtual channels,
    each filter's weights renormed to an L2 norm of at most ``max_norm`` before every
    training forward pass (braindecode's ``Conv2dWithConstraint`` and EEGPT's
    ``conv1d_constraint`` do the same).

    Parameters
    ----------
    n_chans : int
    n_filters : int
    max_norm : float | None
        The largest L2 norm of a filter (a row of ``weight``); None: unconstrained.

    Examples
    --------
    >>> f = SpatialFilter(3, 2)
    >>> f(torch.randn(5, 3, 100)).shape
    torch.Size([5, 2, 100])
    """

    def __init__(self, n_chans, n_filters, max_norm=1.0):
        super().__init__()
        self.max_norm = max_norm
        self.weight = nn.Parameter(torch.empty(n_filters, n_chans))
        with torch.no_grad():  # the identity's first rows; more filters than channels:
            if n_filters <= n_chans:  # orthonormal columns, the rows renormed in training
                self.weight.copy_(torch.eye(n_chans)[:n_filters])
            else:
                nn.init.orthogonal_(self.weight)

    def set_filters(self, filters):
        """Set the filters (array of shape (n_filters, n_chans)), each scaled to unit norm
        times ``max_norm`` (1 if None)."""
        filters = torch.as_tensor(np.asarray(filters), dtype=self.weight.dtype)
        if filters.shape != self.weight.shape:
            raise ValueError(
                f"'filters' must have shape {tuple(self.weight.shape)}, but got "
                f"{tuple(filters.shape)}."
            )
        norms = filters.norm(dim=1, keepdim=True).clamp_min(torch.finfo(filters.dtype).tiny)
        with torch.no_grad():
            self.weight.copy_(filters / norms * (self.max_norm or 1.0))

    def forward(self, X):
        """(batch, n_chans, n_times) -> (batch, n_filters, n_times)."""
        if self.training and self.max_norm is not None:
            with torch.no_grad():  # in place only when a filter is over (a second forward
                # before the backward then finds the weight it read)
                if bool((self.weight.norm(dim=1) > self.max_norm * (1 + 1e-6)).any()):
                    self.weight.copy_(torch.renorm(self.weight, p=2, dim=0, maxnorm=self.max_norm))
        return torch.einsum("fc,bct->bft", self.weight.to(X.dtype), X)


class BandLogVariance(nn.Module):
    """The log-variance of each channel in each of ``bands``, relative to the mean over
    the window's channels (blind to the window's gain and the data's unit; a single
    channel keeps its own log-variance), standardised
    by statistics fixed from the training windows (:meth:`set_statistics`; 0 and 1
    before), not by a batch's.

    Each band is a fixed linear-phase FIR band-pass of 0.5 s (scipy's ``firwin``)
    applied where it fits whole in the window (no edge padding). The bands follow the
    package's one convention (``_util/bands.py``): ``0 <= low < high`` in Hz, a band
    ending above the Nyquist frequency cut there, one starting at or above it refused.

    Parameters
    ----------
    n_chans : int
    bands : (low, high) | sequence of (low, high)
        In Hz; the band log-variance's ``bands`` attribute holds them cut at the
        Nyquist frequency.
    sfreq : float
        The rate of the windows the module reads, in Hz.
    name : str
        The parameter the bands were given as, for the error messages (``"bands"``;
        :class:`~braindecode_pars.MultiChannelClassifier` passes ``"band_power"``).

    Raises
    ------
    ValueError
        (``InvalidParameterError``) For bands outside ``0 <= low < high`` or a band
        starting at or above the Nyquist frequency.

    Examples
    --------
    >>> m = BandLogVariance(2, [(8, 30)], sfreq=100)
    >>> m(torch.randn(4, 2, 400)).shape
    torch.Size([4, 2])
    """

    def __init__(self, n_chans, bands, sfreq, name="bands"):
        super().__init__()
        bands = check_bands(name, bands)
        self.bands = cut_at_nyquist(name, bands, float(sfreq), rate="model's rate")
        taps = [fir_band_pass(band, sfreq) for band in self.bands]
        self.register_buffer("taps", torch.as_tensor(np.stack(taps))[:, None], persistent=False)
        n_features = n_chans * len(self.bands)
        self.register_buffer("mean", torch.zeros(n_features))
        self.register_buffer("std", torch.ones(n_features))

    @property
    def n_taps(self):
        return self.taps.shape[-1]

    def log_variance(self, X):
        """(batch, n_chans, n_times) -> (batch, n_chans * n_bands), band-major, before the
        standardisation."""
        B, C, T = X.shape
        if T < self.n_taps:
            raise ValueError(
                f"'X' windows of {T} samples are shorter than the band-pass filter "
                f"({self.n_taps} samples)."
            )
        with torch.autocast(X.device.type, enabled=False):  # volts squared underflow in half
            signal = X.float().reshape(B * C, 1, T)
            filtered = nn.functional.conv1d(signal, self.taps.float())  # (B * C, n_bands, T')
            var = filtered.var(dim=-1, unbiased=False).reshape(B, C, -1).transpose(1, 2)
            # a channel without signal (zeroed by augmentation, a dead electrode) stands at
            # its window's mean, outside it, as the amplitude path's flat channels do
            flat = var <= 1e-12 * var.amax(dim=-1, keepdim=True).clamp_min(1e-30)
            log_var = torch.log(var + torch.finfo(torch.float32).tiny)  # (B, n_bands, C)
            kept = (~flat).float()
            mean = (log_var * kept).sum(-1, keepdim=True) / kept.sum(-1, keepdim=True).clamp(1)
            log_var = torch.where(flat, mean, log_var)
            if C > 1:  # relative to the window's channels; one channel keeps its own
                log_var = log_var - mean
            return log_var.reshape(B, -1)

    @torch.no_grad()
    def set_statistics(self, X, batch_size=64, transform=None):
        """Fix the standardisation from windows ``X`` (an array or tensor, (n_windows,
        n_chans, n_times)), as they reach this module, or through ``transform`` (a
        function of a batch of ``X`` on the module's device: the spatial filters), one
        batch at a time."""
        device = self.mean.device

        def batch(i):
            Xb = torch.as_tensor(np.asarray(X[i : i + batch_size]), dtype=torch.float32)
            Xb = Xb.to(device)
            return self.log_variance(Xb if transform is None else transform(Xb))

        feats = torch.cat([batch(i) for i in range(0, len(X), batch_size)])
        self.mean.copy_(feats.mean(0))
        std = feats.std(0, unbiased=False) if len(feats) > 1 else torch.ones_like(self.std)
        self.std.copy_(torch.where(std > 1e-6, std, torch.ones_like(std)))

    def forward(self, X):
        """(batch, n_chans, n_times) -> (batch, n_chans * n_bands), standardised."""
        return (self.log_variance(X) - self.mean) / self.std
