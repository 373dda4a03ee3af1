"""Masked autoencoder baseline ([He2022]_; paper appendix A.2)."""

from __future__ import annotations

import torch
from torch import nn

from braindecode_pars._util.checks import check_option, check_range
from braindecode_pars.models.encoder import _TransformerBlock, instance_normalize
from braindecode_pars.models.pair.decoders import _gather_tokens
from braindecode_pars.models.pretext.base import PretextModel


class MAE(PretextModel):
    """Masked autoencoder on fixed 1-s patches.

    The window is cut into non-overlapping patches; the sinusoidal PE is added to
    every token before masking; a random ``mask_ratio`` of the tokens is removed and
    the encoder sees the visible tokens only; its outputs are put back in their
    places with a learnable mask token at each masked place, the PE is added again
    (as in the original MAE's decoder), one transformer block and a linear layer
    reconstruct every patch's samples. The loss is the mean squared error on the
    masked patches only, as in the original MAE (``loss_on="all"`` takes every patch);
    targets are the patches of the instance-normalised window
    (:func:`~braindecode_pars.models.encoder.instance_normalize`: zero mean and unit
    variance per window), whatever the encoder's own input ``normalization``: an
    amplitude-aware encoder sees the amplitude, and the reconstruction stays a task on
    the window's shape, its loss on one scale for every window.

    Parameters
    ----------
    n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq, encoder
        As in :class:`~braindecode_pars.models.PretextModel`.
    mask_ratio : float
        Share of patches removed, in (0, 1). The paper tuned it without giving its
        value; the original MAE's 0.75 is the default.
    decoder_depth : int
        Transformer blocks of the decoder. Paper: 1 ("a single-layer transformer
        decoder").
    loss_on : {"masked", "all"}
        Patches whose reconstruction enters the loss.
    patch_seconds, emb_dim, depth, n_heads, ff_dim, activation, drop_prob
        Settings of the encoder built when ``encoder`` is None.

    References
    ----------
    .. [He2022] He, K., et al. Masked autoencoders are scalable vision learners.
       CVPR 2022.
    """

    uses_all_parameters = False  # the encoder's position-mask token is not used

    def __init__(
        self,
        *signal,
        mask_ratio=0.75,  # original MAE; the paper tuned it without giving the value
        decoder_depth=1,  # paper appendix A.2: "a single-layer transformer decoder"
        loss_on="masked",  # original MAE: loss on the masked patches only
        **kwargs,
    ):
        check_range("mask_ratio", mask_ratio, 0, 1, low_open=True, high_open=True)
        check_option("loss_on", loss_on, ("masked", "all"))
        super().__init__(*signal, **kwargs)
        self.mask_ratio = mask_ratio
        self.loss_on = loss_on
        N = self.n_fixed_patches
        self.n_masked = int(round(mask_ratio * N))
        if not 1 <= self.n_masked < N:
            raise ValueError(
                f"mask_ratio={mask_ratio} of {N} patches masks {self.n_masked}; at least one "
                "patch must be masked and one visible."
            )
        enc = self.encoder
        self.mask_token = nn.Parameter(torch.zeros(enc.emb_dim))
        nn.init.normal_(self.mask_token, std=0.02)
        self.decoder = nn.ModuleList(
            _TransformerBlock(enc.emb_dim, enc.n_heads, enc.ff_dim) for _ in range(decoder_depth)
        )
        self.decoder_norm = nn.LayerNorm(enc.emb_dim)
        self.reconstruct = nn.Linear(enc.emb_dim, enc.patch_size)

    def draw(self, batch_size, device=None, generator=None):
        """The draws of one forward pass, the random masking: ``masked`` (batch,
        n_masked) and ``visible`` (batch, n_visible) long, the indices of the masked and
        visible patches, and ``mask`` (batch, n_patches) bool, True where masked; see
        :meth:`PretextModel.draw`."""
        masked, visible, mask = self.random_split(
            batch_size, self.n_fixed_patches, self.n_masked, device, generator
        )
        return {"masked": masked, "visible": visible, "mask": mask}

    def forward_encoder(self, X, generator=None, draws=None):
        """Tokens with PE, random masking (``draws`` of :meth:`draw`, or drawn from
        ``generator``), encoder on the visible ones.

        Returns the encoded visible tokens (batch, n_visible, emb_dim), the indices of
        the visible and masked patches and the (batch, n_patches) mask (True = masked).
        """
        draws = self._draws(X, generator, draws)
        masked, visible, mask = draws["masked"], draws["visible"], draws["mask"]
        starts = self.fixed_starts(X.device)  # (N,)
        tokens = self.encoder.tokenize(X, starts) + self.encoder.position_embedding(starts)
        latent = self.encoder.encode(_gather_tokens(tokens, visible))  # (B, n_visible, F)
        return latent, visible, masked, mask

    def forward_decoder(self, latent, visible, n_patches):
        """Put the visible tokens back among mask tokens, decode every patch's samples."""
        B, _, Fd = latent.shape
        full = self.mask_token.expand(B, n_patches, Fd).clone()
        full = full.scatter(1, visible[..., None].expand(-1, -1, Fd), latent)
        starts = self.fixed_starts(latent.device)
        full = full + self.encoder.position_embedding(starts).to(full.dtype)
        for block in self.decoder:
            full = block(full)
        return self.reconstruct(self.decoder_norm(full))  # (B, N, patch_size)

    def targets(self, X):
        """The patches to reconstruct, (batch, n_patches, patch_size): those of the
        instance-normalised window (per window, whatever the encoder's
        ``normalization``)."""
        normalized = instance_normalize(X, self.encoder.eps)
        return self.encoder.cut_patches(normalized, self.fixed_starts(X.device))

    def forward_loss(self, X, recon, mask, target=None):
        """MSE between reconstruction and the normalised patches (masked ones by default).

        ``target`` (from :meth:`targets`) saves normalising ``X`` again.
        """
        target = self.targets(X) if target is None else target
        return self._patch_mean(((recon - target) ** 2).mean(dim=-1), mask)

    def trivial_loss(self, target, mask):
        """The loss of predicting zero, the mean of the normalised signal, for every sample."""
        return self._patch_mean(target.pow(2).mean(dim=-1), mask)

    def _patch_mean(self, err, mask):
        """Mean of per-patch errors (B, N) over the patches of the loss."""
        if self.loss_on == "masked":
            return (err * mask).sum() / mask.sum()
        return err.mean()

    def forward(self, X, generator=None, draws=None):
        """Returns ``loss``, ``trivial_loss``, ``reconstruction`` (batch, n_patches,
        patch_size) and ``mask``; the masking is ``draws`` (a dict of :meth:`draw`) when
        given, else drawn from ``generator`` (None: torch's global generator)."""
        self.check_input(X)
        latent, visible, _, mask = self.forward_encoder(X, generator, draws)
        recon = self.forward_decoder(latent, visible, mask.shape[1])
        target = self.targets(X)
        return {
            "loss": self.forward_loss(X, recon, mask, target),
            "trivial_loss": self.trivial_loss(target, mask),
            "reconstruction": recon,
            "mask": mask,
        }
