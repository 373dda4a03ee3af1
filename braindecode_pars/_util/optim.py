"""Optimiser settings shared by pretraining and fine-tuning."""

from __future__ import annotations

import torch

#: Optimisers whose ``fused=True`` implementation the nets choose by default.
FUSED_OPTIMIZERS = (torch.optim.AdamW, torch.optim.Adam)

#: Device types with a fused Adam/AdamW kernel in torch.
FUSED_DEVICE_TYPES = ("cpu", "cuda")

#: Keyword arguments that rule ``fused=True`` out (torch refuses the combination).
_NOT_WITH_FUSED = ("fused", "foreach", "differentiable")


def with_fused_default(optimizer, kwargs, device):
    """``kwargs`` of ``optimizer`` with ``fused=True`` added where it applies.

    torch's Adam and AdamW run one loop over all parameters per step when ``fused``
    (one kernel per step instead of about ten operations per parameter tensor), a few
    per cent of a small encoder's training step on a CPU.
    The update is the same up to float rounding.

    ``fused`` is added only for Adam and AdamW, on a CPU or CUDA ``device``, when the
    caller set none of ``fused``, ``foreach`` and ``differentiable`` (an explicit
    ``optimizer__foreach=True`` or ``optimizer__fused=False`` is kept as given).

    Parameters
    ----------
    optimizer : type
        The optimiser class (a net's ``optimizer``).
    kwargs : dict
        Its keyword arguments (a net's ``get_params_for("optimizer")``); not changed.
    device : str | torch.device | None
        Where the parameters live.

    Returns
    -------
    kwargs : dict
    """
    if optimizer not in FUSED_OPTIMIZERS:  # a subclass may not take ``fused``
        return kwargs
    if device is None or torch.device(device).type not in FUSED_DEVICE_TYPES:
        return kwargs
    if any(key in kwargs for key in _NOT_WITH_FUSED):
        return kwargs
    return {**kwargs, "fused": True}
