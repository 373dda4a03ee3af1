"""Masked position prediction baseline, MP3 ([Zhai2022]_; paper appendix A.2)."""

from __future__ import annotations

import math

import torch.nn.functional as F
from torch import nn

from braindecode_pars._util.checks import check_range
from braindecode_pars.models.pair.decoders import _gather_tokens
from braindecode_pars.models.pretext.base import PretextModel


class MP3(PretextModel):
    """Predict each token's absolute position from shuffled tokens without any PE.

    The window is cut into ``N`` non-overlapping patches, tokenized and shuffled; no
    positional embedding is added. A random ``mask_ratio`` of the tokens is hidden
    from the keys and values of every attention layer (they still act as queries,
    so their positions are predicted from the visible context only). A linear head
    classifies every token into one of the ``N`` positions; cross-entropy over all
    tokens, as in the original MP3.

    Parameters
    ----------
    n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq, encoder
        As in :class:`~braindecode_pars.models.PretextModel`.
    mask_ratio : float
        Share of tokens hidden from keys and values, in [0, 1). The paper tuned it
        without giving its value; the original MP3 uses 0.75 for ViT-B.
    patch_seconds, emb_dim, depth, n_heads, ff_dim, activation, drop_prob
        Settings of the encoder built when ``encoder`` is None.

    References
    ----------
    .. [Zhai2022] Zhai, S., et al. Position prediction as an effective pretraining
       strategy. ICML 2022.
    """

    def __init__(
        self,
        *signal,
        mask_ratio=0.75,  # original MP3 (ViT-B); the paper tuned it without giving the value
        **kwargs,
    ):
        check_range("mask_ratio", mask_ratio, 0, 1, high_open=True)
        super().__init__(*signal, **kwargs)
        self.mask_ratio = mask_ratio
        N = self.n_fixed_patches
        if N < 2:
            raise ValueError(f"MP3 needs at least 2 patches per window, but n_times gives {N}.")
        self.n_hidden = min(int(round(mask_ratio * N)), N - 1)  # keep one key visible
        self.head = nn.Linear(self.encoder.emb_dim, N)

    #: the encoder's position-mask token is not used (DDP must know)
    uses_all_parameters = False

    def draw(self, batch_size, device=None, generator=None):
        """The draws of one forward pass: ``perm`` (batch, N) long, the shuffled order of
        the patches, then ``key_mask`` (batch, N) bool, True at the tokens hidden from
        the keys and values; see :meth:`PretextModel.draw`."""
        N = self.n_fixed_patches
        perm = self.rand((batch_size, N), device, generator).argsort(dim=-1)
        _, _, key_mask = self.random_split(batch_size, N, self.n_hidden, device, generator)
        return {"perm": perm, "key_mask": key_mask}

    def forward(self, X, generator=None, draws=None):
        """Returns ``loss``, ``trivial_loss`` (ln N, the uniform guess), ``logits``
        (batch, N, N), ``target`` and ``key_mask``; the order and the hidden tokens are
        ``draws`` (a dict of :meth:`draw`) when given, else drawn from ``generator``
        (None: torch's global generator)."""
        self.check_input(X)
        B = X.shape[0]
        draws = self._draws(X, generator, draws)
        perm, key_mask = draws["perm"], draws["key_mask"]  # (B, N) shuffled order, (B, N)
        starts = self.fixed_starts(X.device)  # (N,)
        N = len(starts)
        tokens = _gather_tokens(self.encoder.tokenize(X, starts), perm)  # no PE
        logits = self.head(self.encoder.encode(tokens, key_mask))  # (B, N, N)
        loss = F.cross_entropy(logits.reshape(B * N, N), perm.reshape(-1))
        trivial = loss.new_tensor(math.log(N))  # cross-entropy of the uniform distribution
        return {
            "loss": loss,
            "trivial_loss": trivial,
            "logits": logits,
            "target": perm,
            "key_mask": key_mask,
        }
