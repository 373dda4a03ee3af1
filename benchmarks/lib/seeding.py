"""Seeded randomness inside a block of the lab's code, the caller's generators kept."""

from __future__ import annotations

import contextlib

import numpy as np
import torch


@contextlib.contextmanager
def isolated_random_state(seed, device="cpu"):
    """Seed torch's generators with ``seed`` inside the block, and give torch's and
    numpy's global generators back as they were when it ends (also on error).

    The same rule as the library's estimators follow inside a fit: model
    initialisation, dropout and batch shuffling inside the block come from torch's
    generator, seeded here; what the caller drew before and draws after is unchanged.
    A CUDA ``device`` on a machine without CUDA forks the CPU generator alone.
    """
    device = torch.device(device or "cpu")
    devices = []
    if device.type == "cuda" and torch.cuda.is_available():
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    numpy_state = np.random.get_state()  # noqa: NPY002 (the legacy global is what we keep)
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)  # noqa: NPY002
