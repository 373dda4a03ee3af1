"""PARS's pair decoder and the pair-attention operator it runs on.

- :mod:`~braindecode_pars.models.pair.decoders`: the cross-attention and MLP decoders;
- :mod:`~braindecode_pars.models.pair.attention`: the pair-attention operator (a torch
  custom op with its own backward);
- :mod:`~braindecode_pars.models.pair.fallback`: its Triton kernels for underflowing
  pairs;
- :mod:`~braindecode_pars.models.pair.fused`: the same operator as one Triton kernel
  each way, the fallback folded in.
"""

from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder, MLPPairDecoder

__all__ = ["CrossAttentionPairDecoder", "MLPPairDecoder"]
