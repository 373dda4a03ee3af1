"""Dropped position prediction baseline, DropPos ([Wang2023]_; paper appendix A.2)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from braindecode_pars._util.checks import check_range
from braindecode_pars.models.pair.decoders import _gather_tokens
from braindecode_pars.models.pretext.base import PretextModel


class DropPos(PretextModel):
    """Reconstruct the positions that were dropped from the visible tokens.

    The window is cut into ``N`` non-overlapping patches; a random ``mask_ratio``
    (``gamma``) of the tokens is removed, as in MAE; of the visible tokens, a share
    ``pos_mask_ratio`` (``gamma_pos``) gets the learnable position-mask token instead
    of its sinusoidal PE. The encoder embeds the visible tokens and a linear head
    classifies each position-dropped token into one of the ``N`` positions
    (cross-entropy over the ``gamma_pos (1 - gamma) N`` position-dropped tokens; the
    paper's "position classes" are these tokens, each classified among ``N``).
    ``label_sigma > 0`` gives the original's Gaussian label smoothing: the target of
    a token at position ``p`` is ``softmax(-(i - p)^2 / (2 sigma^2))`` over positions ``i``.

    Parameters
    ----------
    n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq, encoder
        As in :class:`~braindecode_pars.models.PretextModel`.
    mask_ratio : float
        ``gamma``, share of patches removed, in [0, 1). DropPos's default 0.75.
    pos_mask_ratio : float
        ``gamma_pos``, share of visible tokens whose PE is dropped, in (0, 1].
        DropPos's default 0.75.
    label_sigma : float
        Width, in positions, of the Gaussian label smoothing; 0 for hard labels.
        The original uses smoothing; its width is not given for 1-D signals.
    patch_seconds, emb_dim, depth, n_heads, ff_dim, activation, drop_prob
        Settings of the encoder built when ``encoder`` is None.

    References
    ----------
    .. [Wang2023] Wang, H., et al. DropPos: pre-training vision transformers by
       reconstructing dropped positions. NeurIPS 2023.
    """

    def __init__(
        self,
        *signal,
        mask_ratio=0.75,  # DropPos default patch mask ratio
        pos_mask_ratio=0.75,  # DropPos default position drop ratio
        label_sigma=0.0,
        **kwargs,
    ):
        check_range("mask_ratio", mask_ratio, 0, 1, high_open=True)
        check_range("pos_mask_ratio", pos_mask_ratio, 0, 1, low_open=True)
        check_range("label_sigma", label_sigma, 0, float("inf"))
        super().__init__(*signal, **kwargs)
        self.mask_ratio = mask_ratio
        self.pos_mask_ratio = pos_mask_ratio
        self.label_sigma = label_sigma
        N = self.n_fixed_patches
        self.n_visible = N - int(round(mask_ratio * N))
        self.n_pos_masked = int(round(pos_mask_ratio * self.n_visible))
        if self.n_visible < 1 or self.n_pos_masked < 1:
            raise ValueError(
                f"mask_ratio={mask_ratio} and pos_mask_ratio={pos_mask_ratio} of {N} patches "
                f"leave {self.n_visible} visible and {self.n_pos_masked} position-masked "
                "tokens; both must be at least 1."
            )
        self.head = nn.Linear(self.encoder.emb_dim, N)

    def targets(self, positions, n_positions):
        """Target distributions (..., n_positions): one-hot or Gaussian-smoothed."""
        if self.label_sigma == 0:
            return F.one_hot(positions, n_positions).float()
        grid = torch.arange(n_positions, device=positions.device, dtype=torch.float32)
        dist2 = (grid - positions[..., None].float()) ** 2
        return torch.softmax(-dist2 / (2 * self.label_sigma**2), dim=-1)

    def draw(self, batch_size, device=None, generator=None):
        """The draws of one forward pass: ``visible`` (batch, n_visible) long, the
        patches kept, then ``pos_mask`` (batch, n_visible) bool, True at the visible
        tokens whose PE is dropped; see :meth:`PretextModel.draw`."""
        B, N, n_vis = batch_size, self.n_fixed_patches, self.n_visible
        visible, _, _ = self.random_split(B, N, n_vis, device, generator)
        _, _, pos_mask = self.random_split(B, n_vis, self.n_pos_masked, device, generator)
        return {"visible": visible, "pos_mask": pos_mask}

    def forward(self, X, generator=None, draws=None):
        """Returns ``loss``, ``trivial_loss`` (the loss of the uniform guess), ``logits``
        (batch, n_visible, N), ``target``, ``pos_mask``; the patches kept and the
        dropped positions are ``draws`` (a dict of :meth:`draw`) when given, else drawn
        from ``generator`` (None: torch's global generator)."""
        self.check_input(X)
        draws = self._draws(X, generator, draws)
        visible, pos_mask = draws["visible"], draws["pos_mask"]  # (B, n_vis), (B, n_vis)
        starts = self.fixed_starts(X.device)  # (N,)
        N = len(starts)
        tokens = _gather_tokens(self.encoder.tokenize(X, starts), visible)
        tokens = tokens + self.encoder.position_embedding(starts[visible], pos_mask)
        logits = self.head(self.encoder.encode(tokens))  # (B, n_visible, N)
        target = self.targets(visible, N)  # visible holds each token's true position
        # the mean over the position-dropped tokens, as a masked sum over their count
        # (the same in every window): no data-dependent shape, so no graph break
        per_token = -(target * logits.log_softmax(-1)).sum(-1)  # (B, n_visible)
        loss = torch.where(pos_mask, per_token, 0.0).sum() / pos_mask.sum()
        trivial = loss.new_tensor(math.log(N))  # uniform over N: -sum(t * log(1/N)) = ln N
        return {
            "loss": loss,
            "trivial_loss": trivial,
            "logits": logits,
            "target": visible,
            "pos_mask": pos_mask,
        }
