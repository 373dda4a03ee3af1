"""The implementations each device type takes when a caller asks for ``"auto"``.

One table, :data:`_DEVICE_DEFAULTS`, holds every per-device choice of an implementation
that a measurement decides rather than a setting of the run: the rule of
:doc:`/benchmarks/speed` edits it, and nothing else does. A caller that names an
implementation (``PretrainNet(batches=...)``, ``PARS(decoder_kernel=...)``,
``run_pretraining``, ``PARSPretrainer``, ``pretrain --config``) keeps it; ``"auto"``
reads :func:`device_default`.
"""

from __future__ import annotations

import torch

from braindecode_pars._util.checks import check_option

#: By device type (``torch.device(...).type``; ``None``: a type not named), what
#: ``"auto"`` takes:
#:
#: - ``"decoder_kernel"``: the cross-attention decoder's pair operator,
#:   ``models.pair.kernels._DECODER_KERNELS`` ("tables": torch operations over the factor tables;
#:   "fused": one Triton kernel each way);
#: - ``"fallback_kernel"``: the tables operator's exact recomputation of underflowing
#:   pair-heads, ``models.pair.kernels._FALLBACK_KERNELS`` ("torch" or "triton");
#: - ``"batches"``: how a view's training batches reach the step,
#:   ``pretraining.net.BATCHES`` ("host": drawn in the loop and copied by the step;
#:   "read-ahead": drawn by a thread and copied on a side stream; "device": crops drawn
#:   on the device from recordings uploaded once, when they take at most 2 GiB, read
#:   ahead otherwise).
#:
#: CUDA keeps the paths of the last GPU record until a GPU row times the others
#: (:doc:`/benchmarks/speed` says how).
_DEVICE_DEFAULTS = {
    "cpu": {"decoder_kernel": "tables", "fallback_kernel": "torch", "batches": "host"},
    "cuda": {"decoder_kernel": "tables", "fallback_kernel": "torch", "batches": "host"},
    None: {"decoder_kernel": "tables", "fallback_kernel": "torch", "batches": "host"},
}


def device_default(setting, device):
    """What ``"auto"`` takes for ``setting`` (a key of :data:`_DEVICE_DEFAULTS`' rows) on
    ``device`` (a device, its name or its type)."""
    check_option("setting", setting, tuple(_DEVICE_DEFAULTS[None]))
    device_type = torch.device(device).type if device is not None else "cpu"
    return _DEVICE_DEFAULTS.get(device_type, _DEVICE_DEFAULTS[None])[setting]
