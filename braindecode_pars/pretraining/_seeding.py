"""Randomness that stays inside a fit: seeded generators, global state left as found."""

from __future__ import annotations

import contextlib
import numbers

import numpy as np
import torch

from braindecode_pars._util.checks import check_none_or_number


def fit_seed(random_state):
    """The seed of one fit: ``random_state``, or fresh entropy from the operating
    system when it is None (numpy's global generator is not touched)."""
    if check_none_or_number("random_state", random_state, numbers.Integral, "an int and None"):
        return int(random_state)
    return int(np.random.SeedSequence().generate_state(1)[0])


@contextlib.contextmanager
def isolated_random_state(seed, device="cpu"):
    """Seed torch's generators with ``seed`` inside the block, and give torch's and
    numpy's global generators back as they were when it ends (also on error).

    Model initialisation, dropout, batch shuffling and the random draws of the
    pretext models and crops inside the block all come from torch's generator,
    seeded here; what the caller's code drew before and draws after is unchanged.
    A CUDA ``device`` on a machine without CUDA forks the CPU generator alone (the
    caller's own device check gives the error).
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
