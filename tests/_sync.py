"""A check, on any device, that code asks the device for no value on the host.

On a GPU, reading a value back (``.item()``, ``bool(tensor)``, ``int(tensor)``, a
data-dependent shape such as ``nonzero``'s) waits for every queued kernel: a host
synchronisation, which also stops CUDA graphs from capturing the step. Those reads
all go through a few ATen operators, which a dispatch mode sees on a CPU too.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: The operators that hand a device value to the host, or size a result by the data.
SYNCING_OPS = {
    torch.ops.aten._local_scalar_dense.default,  # .item(), bool(), int(), float()
    torch.ops.aten.nonzero.default,
    torch.ops.aten.masked_select.default,
    torch.ops.aten.unique_consecutive.default,
    torch.ops.aten._unique2.default,
    torch.ops.aten.repeat_interleave.Tensor,
}


class HostSyncError(AssertionError):
    """An operator that synchronises the host with the device ran under :class:`no_host_sync`."""


class no_host_sync(TorchDispatchMode):  # noqa: N801 (used as a context manager)
    """Raise :class:`HostSyncError` at the first operator of :data:`SYNCING_OPS`."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in SYNCING_OPS:
            raise HostSyncError(f"{func} reads a device value on the host")
        return func(*args, **(kwargs or {}))
