"""PARS's pair decoder and the pair-attention operator it runs on.

- :mod:`~braindecode_pars.models.pair.decoders`: the cross-attention and MLP decoders;
- :mod:`~braindecode_pars.models.pair.attention`: the pair-attention operator (a torch
  custom op with its own backward);
- :mod:`~braindecode_pars.models.pair.fallback`: its Triton kernels for underflowing
  pairs.
"""

from braindecode_pars.models.pair.decoders import CrossAttentionPairDecoder, MLPPairDecoder

__all__ = ["CrossAttentionPairDecoder", "MLPPairDecoder"]
