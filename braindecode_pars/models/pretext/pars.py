"""PARS: pairwise relative shift pretraining ([Sandino2025]_, section 2)."""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F

from braindecode_pars._util.checks import (
    check_heads,
    check_int,
    check_option,
    check_position_masking,
    check_range,
)
from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder, MLPPairDecoder
from braindecode_pars.models.pair.kernels import _FALLBACK_KERNEL_OPTIONS, DECODER_KERNEL_OPTIONS
from braindecode_pars.models.pretext.base import PretextModel

logger = logging.getLogger(__name__)


def patch_overlap(starts, patch_size, masked_idx=None):
    """How much PARS's patches share: the overlap statistics of a draw.

    Two patches of ``patch_size`` samples starting at ``t_j`` and ``t_k`` share samples
    when ``|t_j - t_k| < patch_size``. Where the patches of a crop chain end to end by
    shared samples, the few that keep a position anchor every other one, and a shift can
    be read by aligning samples rather than from what the signal is (the paper's "the
    pretraining task becomes easier as the number of patches N is increased").

    Parameters
    ----------
    starts : torch.Tensor
        (batch, n_patches) patch start samples (:meth:`PARS.sample_patches`).
    patch_size : int
        Samples per patch.
    masked_idx : torch.Tensor | None
        (batch, n_masked) indices of the position-masked patches, whose pairs the loss
        reads; None: every patch.

    Returns
    -------
    stats : dict
        ``shared_pairs``: the share of unordered pairs of (position-masked) patches that
        share samples; ``chained``: the share of crops whose patches all form one chain
        by shared samples (sorted starts, every gap below ``patch_size``);
        ``patch_seconds_per_second`` is left to the caller, who knows the rate.

    Examples
    --------
    >>> import torch
    >>> stats = patch_overlap(torch.tensor([[0, 50, 100, 300]]), patch_size=100)
    >>> stats["shared_pairs"], stats["chained"]  # (0, 50) and (50, 100) of 6 pairs
    (0.3333333333333333, 0.0)
    """
    check_int("patch_size", patch_size, 1)
    if starts.ndim != 2 or starts.shape[1] < 2:
        raise ValueError(
            f"starts must be (batch, n_patches) with n_patches >= 2, but got shape "
            f"{tuple(starts.shape)}."
        )
    starts = starts.long()
    chosen = starts if masked_idx is None else starts.gather(1, masked_idx.long())
    n = chosen.shape[1]
    close = (chosen[:, :, None] - chosen[:, None, :]).abs() < patch_size
    upper = torch.triu(torch.ones(n, n, dtype=torch.bool, device=starts.device), diagonal=1)
    shared = close[:, upper].double().mean().item()
    gaps = starts.sort(dim=1).values.diff(dim=1)
    chained = (gaps < patch_size).all(dim=1).double().mean().item()
    return {"shared_pairs": shared, "chained": chained}


class PARS(PretextModel):
    """Pairwise relative shift pretext model.

    ``n_patches`` patches are sampled from each single-channel window, the PE of
    ``pos_mask_ratio`` of them is replaced by a learnable position-mask token, the
    encoder embeds all of them, and a pair decoder predicts, for every ordered pair
    ``(j, k)`` of position-masked patches, the normalised shift
    ``theta_jk = (t_j - t_k) / T_s`` (paper eq. 1), with ``t`` the patch start and
    ``T_s`` the window length ``n_times``. Pairs involving a patch that kept its PE
    are left out of the loss: its PE would leak its position (paper section 2.2).
    The loss is the mean squared error over the ``N_m x N_m`` pairs (section 2.3).

    Parameters
    ----------
    n_outputs, n_chans, chs_info, n_times, input_window_seconds, sfreq
        braindecode's signal arguments (single channel, ``n_times`` samples).
    encoder : PatchEncoder | None
        The encoder to pretrain; built from the encoder settings below if None.
    n_patches : int
        Patches per window, ``N``. Paper: 40 (section 2.5, appendix A.4).
    pos_mask_ratio : float
        ``gamma_pos = N_m / N`` in (0, 1]. Paper: 0.8 (section 2.5). ``N_m`` is
        ``round(pos_mask_ratio * n_patches)`` and must be at least 2.
    decoder : {"cross_attention", "mlp"}
        Pair decoder: the cross-attention of eq. 2 (paper default) or the pairwise
        MLP of the ablation (appendix A.4).
    sampling : {"random", "disjoint", "fixed"}
        "random": start times drawn uniformly (patches may overlap), the paper's
        choice; "disjoint": random start times with no two patches overlapping, so a
        shift can never be read off by matching the samples two patches share (a
        check of how much of the task is waveform alignment; needs
        ``n_patches * patch_size <= n_times``); "fixed": ``n_patches`` distinct
        patches of a grid with a stride of one patch (the ablation of appendix A.4),
        in shuffled order.
    decoder_heads : int
        Heads of the cross-attention decoder (not given by the paper; 8 as the paper's
        encoder); must divide the encoder's ``emb_dim``. Fewer heads cost less per step;
        why the default stays 8: :doc:`/benchmarks/pretext`.
    decoder_hidden : int
        Hidden size of the MLP decoder. Paper: 512 (appendix A.4).
    decoder_impl : {"folded", "naive"}
        "folded" computes the decoder exactly without any per-pair tensor of the
        token size; "naive" materialises the (batch, N_m^2, 2F) pair tensor. Both
        give the same result; "naive" is kept for testing and benchmarking.
    decoder_fallback : {"auto", "torch", "triton"}
        The kernels of the cross-attention decoder's rare underflowing pairs
        (``CrossAttentionPairDecoder(fallback=...)``): the same values either way.
    decoder_keep_tables_bytes : int | None
        On an accelerator, the most bytes of factor tables the cross-attention decoder
        keeps from its forward pass for its backward pass, above which it recomputes
        them (``CrossAttentionPairDecoder(keep_tables_bytes=...)``; None: 256 MiB).
    decoder_kernel : {"auto", "tables", "fused"}
        The cross-attention decoder's pair operator (``CrossAttentionPairDecoder(
        kernel=...)``): torch operations over factor tables, or one Triton kernel each
        way where Triton runs; "auto" is "tables" on every device until a GPU timing
        decides.
    patch_seconds, emb_dim, depth, n_heads, ff_dim, activation, drop_prob
        Settings of the encoder built when ``encoder`` is None (see PatchEncoder).

    Returns
    -------
    out : dict
        ``forward(X)`` returns ``loss`` (scalar); ``trivial_loss``, the loss of
        predicting no shift on the same pairs; ``theta_hat`` (batch, n_masked,
        n_masked), the predicted shifts of the pairs of ``masked_idx`` (batch,
        n_masked), the position-masked patches; ``starts`` (batch, n_patches), patch
        start samples; ``pos_mask`` (bool, batch, n_patches), True where the PE was
        masked; ``unresolved_pairs``, a 0-d long tensor on the device: the pairs the
        folded decoder could not compute exactly (0 but for extreme logits; read it at
        the evaluation cadence, not per step); ``pair_gap``, a 0-d device tensor, the
        largest gap in nats between a pair's best common key and its rows' maxima (the
        float32 factor tables underflow from about 43.7). :meth:`predict_shifts` adds the N x N
        grids ``theta_pred``, ``theta_true`` and ``pair_mask``.

    References
    ----------
    .. [Sandino2025] Sandino, C. M., et al. Learning the relative composition of
       EEG signals using pairwise relative shift pretraining. NeurIPS 2025 workshop.

    Examples
    --------
    >>> import torch
    >>> model = PARS(n_times=3000, sfreq=100, emb_dim=32, depth=1, n_heads=4, ff_dim=32)
    >>> out = model.predict_shifts(torch.randn(4, 1, 3000))  # four 30-s windows
    >>> out["theta_pred"].shape, int(out["pair_mask"][0].sum())  # 32 x 32 masked pairs
    (torch.Size([4, 40, 40]), 1024)
    """

    def __init__(
        self,
        *signal,
        n_patches=40,  # paper section 2.5: "the number of patches N is 40"
        pos_mask_ratio=0.8,  # paper section 2.5: "optimal position masking ratio is 0.8"
        decoder="cross_attention",  # paper eq. 2; "mlp" is the ablation of appendix A.4
        sampling="random",  # paper section 2.5: "randomly sampled"; "fixed" is the ablation
        decoder_heads=8,
        decoder_hidden=512,  # paper appendix A.4: "hidden size of 512"
        decoder_impl="folded",
        decoder_fallback="auto",
        decoder_keep_tables_bytes=None,
        decoder_kernel="auto",
        **kwargs,
    ):
        check_int("n_patches", n_patches, 2)
        check_range("pos_mask_ratio", pos_mask_ratio, 0, 1, low_open=True)
        check_option("decoder", decoder, ("cross_attention", "mlp"))
        check_option("sampling", sampling, ("random", "disjoint", "fixed"))
        check_option("decoder_impl", decoder_impl, ("folded", "naive"))
        check_int("decoder_hidden", decoder_hidden, 1)
        check_option("decoder_fallback", decoder_fallback, _FALLBACK_KERNEL_OPTIONS)
        if decoder_keep_tables_bytes is not None:
            check_int("decoder_keep_tables_bytes", decoder_keep_tables_bytes, 0)
        check_option("decoder_kernel", decoder_kernel, DECODER_KERNEL_OPTIONS)
        n_masked = check_position_masking(n_patches, pos_mask_ratio)
        super().__init__(*signal, **kwargs)
        self.n_patches = n_patches
        self.pos_mask_ratio = pos_mask_ratio
        self.n_masked = n_masked
        self.decoder_name = decoder
        self.sampling = sampling
        self.decoder_impl = decoder_impl
        if sampling == "fixed":
            n_grid = len(self.encoder.fixed_starts(self.n_times))
            if n_patches > n_grid:
                raise ValueError(
                    f"sampling='fixed' places at most {n_grid} non-overlapping patches in "
                    f"n_times={self.n_times} samples, but n_patches={n_patches}."
                )
        if sampling == "disjoint" and n_patches * self.encoder.patch_size > self.n_times:
            raise ValueError(
                f"sampling='disjoint' needs n_patches * patch_size <= n_times, but "
                f"{n_patches} patches of {self.encoder.patch_size} samples do not fit in "
                f"n_times={self.n_times}; use fewer patches or longer windows."
            )
        emb_dim = self.encoder.emb_dim
        if decoder == "cross_attention":
            check_heads("decoder_heads", decoder_heads, emb_dim)
            self.decoder = CrossAttentionPairDecoder(
                emb_dim,
                decoder_heads,
                fallback=decoder_fallback,
                keep_tables_bytes=decoder_keep_tables_bytes,
                kernel=decoder_kernel,
            )
        else:
            self.decoder = MLPPairDecoder(emb_dim, decoder_hidden)

    # the decoder's size, read by a resumed run's check of its settings: the heads are
    # not in the parameters' shapes, the hidden size only there (None: the other decoder)
    @property
    def decoder_heads(self):
        return getattr(self.decoder, "n_heads", None)

    @property
    def decoder_hidden(self):
        return getattr(self.decoder, "hidden_dim", None)

    # -- steps ---------------------------------------------------------------------------
    def sample_patches(self, batch_size, device, generator=None):
        """Patch start samples, (batch, n_patches) long, in random order."""
        M, N, shape = self.encoder.patch_size, self.n_patches, (batch_size, self.n_patches)
        if self.sampling == "random":
            return self.randint(self.n_times - M + 1, shape, device, generator)
        if self.sampling == "disjoint":
            # N sorted offsets in [0, n_times - N * M], the i-th pushed right by i
            # patches: starts at least one patch apart, in random order.
            slack = self.randint(self.n_times - N * M + 1, shape, device, generator)
            starts = slack.sort(dim=-1).values + M * torch.arange(N, device=device)
            order = self.rand(shape, device, generator).argsort(dim=-1)
            return starts.gather(1, order)
        grid = self.encoder.fixed_starts(self.n_times, device=device)  # (n_grid,)
        pick = self.rand((batch_size, len(grid)), device, generator).argsort(dim=-1)
        return grid[pick[:, : self.n_patches]]

    def mask_positions(self, batch_size, device, generator=None):
        """Choose the position-masked patches.

        Returns ``pos_mask`` (batch, n_patches) bool and ``masked_idx``
        (batch, n_masked) long, the indices of the masked patches.
        """
        masked_idx, _, pos_mask = self.random_split(
            batch_size, self.n_patches, self.n_masked, device, generator
        )
        return pos_mask, masked_idx

    def overlap_statistics(self, n_draws=4096, generator=None):
        """:func:`patch_overlap` of ``n_draws`` of this model's own draws (its
        ``sampling``, ``n_patches`` and crop of ``n_times`` samples), with
        ``patch_seconds_per_second``, the patches' total length over the crop's.

        Examples
        --------
        >>> model = PARS(n_times=1000, sfreq=100, emb_dim=32, depth=1, n_heads=4, ff_dim=32)
        >>> stats = model.overlap_statistics(generator=torch.Generator().manual_seed(0))
        >>> round(stats["patch_seconds_per_second"], 2), stats["chained"] > 0.5  # 40 in 10 s
        (4.0, True)
        """
        check_int("n_draws", n_draws, 1)
        with torch.no_grad():
            draws = self.draw(n_draws, "cpu", generator)
        stats = patch_overlap(draws["starts"], self.encoder.patch_size, draws["masked_idx"])
        density = self.n_patches * self.encoder.patch_size / self.n_times
        return {**stats, "patch_seconds_per_second": density}

    def forward_encoder(self, X, starts, pos_mask):
        """(batch, 1, n_times) -> (batch, n_patches, emb_dim) with masked PE."""
        return self.encoder(X, starts=starts, pos_mask=pos_mask)

    def forward_decoder(self, y, masked_idx):
        """(batch, n_patches, emb_dim) -> theta_hat (batch, n_masked, n_masked)."""
        return self.forward_decoder_counted(y, masked_idx)[0]

    def forward_decoder_counted(self, y, masked_idx):
        """:meth:`forward_decoder`, the pairs it could not compute exactly (a 0-d long
        device tensor) and the largest gap of its logits in nats (a 0-d device tensor;
        see :meth:`CrossAttentionPairDecoder.forward_counted`). The naive and MLP
        decoders, which have no factor tables, and a decoder put in ``self.decoder``
        that has only ``forward`` count 0 pairs and a gap of 0."""
        counted = getattr(self.decoder, "forward_counted", None)
        if counted is not None and self.decoder_impl != "naive":
            return counted(y, masked_idx)
        # the direct computation, the MLP decoder or one of the user's: every pair exact
        run = self.decoder.forward_naive if self.decoder_impl == "naive" else self.decoder
        zero = torch.zeros((), dtype=torch.long, device=y.device)
        return run(y, masked_idx), zero, zero.float()

    def shift_targets(self, starts):
        """theta_jk = (t_j - t_k) / T_s for every pair: (batch, n) -> (batch, n, n)."""
        t = starts.to(torch.float32)
        return (t[:, :, None] - t[:, None, :]) / self.n_times

    def forward_loss(self, theta_hat, theta):
        """Mean squared error over the N_m x N_m masked pairs (paper section 2.3)."""
        return F.mse_loss(theta_hat, theta.to(theta_hat.dtype))

    def draw(self, batch_size, device=None, generator=None):
        """The draws of one forward pass: ``starts`` (batch, n_patches) long, the patch
        start samples (:meth:`sample_patches`), then ``pos_mask`` (batch, n_patches)
        bool and ``masked_idx`` (batch, n_masked) long (:meth:`mask_positions`); see
        :meth:`PretextModel.draw`."""
        starts = self.sample_patches(batch_size, device, generator)
        pos_mask, masked_idx = self.mask_positions(batch_size, device, generator)
        return {"starts": starts, "pos_mask": pos_mask, "masked_idx": masked_idx}

    def forward(self, X, generator=None, draws=None):
        """Sample, mask, encode, decode; see the class docstring for the returned dict.

        The patches and masks are ``draws`` (a dict of :meth:`draw`) when given, else
        drawn from ``generator`` (None: torch's global generator).
        """
        self.check_input(X)
        draws = self._draws(X, generator, draws)
        starts = draws["starts"]  # (batch, n_patches)
        pos_mask, masked_idx = draws["pos_mask"], draws["masked_idx"]  # (B, N), (B, n_m)
        y = self.forward_encoder(X, starts, pos_mask)  # (batch, n_patches, emb_dim)
        theta_hat, unresolved, gap = self.forward_decoder_counted(y, masked_idx)  # (B, n, n)
        theta = self.shift_targets(starts.gather(1, masked_idx))  # (batch, n_m, n_m)
        loss = self.forward_loss(theta_hat, theta)

        return {
            "loss": loss,
            "trivial_loss": theta.pow(2).mean(),  # predicting no shift for every pair
            "theta_hat": theta_hat,
            "masked_idx": masked_idx,
            "starts": starts,
            "pos_mask": pos_mask,
            "unresolved_pairs": unresolved,  # 0-d, on the device: read it at eval time
            "pair_gap": gap,  # 0-d, on the device: the logits' largest gap, in nats
        }

    def predict_shifts(self, X, generator=None, draws=None):
        """:meth:`forward`'s dict with the shifts as N x N grids, for figures and checks.

        Adds ``theta_pred`` (batch, n_patches, n_patches), the prediction scattered
        into the grid of every ordered pair and zero outside ``pair_mask``;
        ``theta_true``, the target of every pair; ``pair_mask`` (bool), True on the
        pairs of the loss. (Training steps leave these out: a few small kernels each.)
        """
        out = self(X, generator=generator, draws=draws)
        unresolved = int(out["unresolved_pairs"])  # not a training step: a host read is fine
        if unresolved:
            logger.warning(
                "The pair decoder could not compute %d pair-head(s) exactly (largest logit "
                "gap %.1f nats); their terms are 0 in theta_pred. CrossAttentionPairDecoder"
                "(table_dtype=torch.float64) computes them.",
                unresolved, float(out["pair_gap"]),
            )  # fmt: skip
        B, N, n_m = X.shape[0], self.n_patches, self.n_masked
        idx, theta_hat, pos_mask = out["masked_idx"], out["theta_hat"], out["pos_mask"]
        pair = (idx[:, :, None] * N + idx[:, None, :]).view(B, n_m * n_m)
        theta_pred = theta_hat.new_zeros(B, N * N).scatter(1, pair, theta_hat.reshape(B, -1))
        return {
            **out,
            "theta_pred": theta_pred.view(B, N, N),
            "theta_true": self.shift_targets(out["starts"]),
            "pair_mask": pos_mask[:, :, None] & pos_mask[:, None, :],
        }
