"""PARS's pair decoder and the pair-attention operator it runs on.

- :mod:`~braindecode_pars.models.pair.decoders`: the cross-attention and MLP decoders;
- :mod:`~braindecode_pars.models.pair.tables`: the pair-attention operator over the
  factor tables (a torch custom op with its own backward, ``kernel="tables"``);
- :mod:`~braindecode_pars.models.pair.triton_fallback`: the Triton kernels of its
  fallback for underflowing pairs;
- :mod:`~braindecode_pars.models.pair.fused`: the same operator as one Triton kernel
  each way, the fallback folded in (``kernel="fused"``);
- :mod:`~braindecode_pars.models.pair.kernels`: which of them runs, and what
  ``"auto"`` takes.
"""

from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder, MLPPairDecoder

__all__ = ["CrossAttentionPairDecoder", "MLPPairDecoder"]
