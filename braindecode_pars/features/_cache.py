"""The cache of the probe's features (``memory=...``): keys that tell encoders and
windows apart, the call through a ``joblib.Memory``, and the fitted blocks' extractor
that uses it."""

from __future__ import annotations

import hashlib
import json

import numpy as np
from sklearn.utils.validation import check_memory


def encoder_digest(encoder):
    """A hash of an encoder's class, configuration and weights (hex string): equal for
    two encoders that compute the same function of the same settings."""
    digest = hashlib.blake2b(digest_size=16)
    config = encoder.get_config() if hasattr(encoder, "get_config") else {}
    digest.update(type(encoder).__qualname__.encode())
    digest.update(json.dumps(config, sort_keys=True, default=str).encode())
    for name, tensor in encoder.state_dict().items():
        array = tensor.detach().cpu().contiguous().numpy()
        digest.update(f"{name}:{array.dtype}:{array.shape}".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def windows_digest(X):
    """A hash of an array of windows (hex string): its shape, type and every value (a
    few milliseconds per 100 MB, against seconds of encoding)."""
    X = np.ascontiguousarray(X)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{X.dtype}:{X.shape}".encode())
    digest.update(memoryview(X.reshape(-1)).cast("B"))
    return digest.hexdigest()


def _computed(key, compute, X):
    """``compute(X)``: joblib caches it under ``key`` alone."""
    return compute(X)


def cached(memory, compute, X, key):
    """``compute(X)`` through ``memory`` (None, a folder or a ``joblib.Memory``, as
    ``Pipeline(memory=...)`` takes), under ``key()`` and the windows' digest; computed
    directly without a folder."""
    memory = check_memory(memory)
    if getattr(memory, "location", None) is None:
        return compute(X)
    function = memory.cache(_computed, ignore=["compute", "X"])
    return function((key(), windows_digest(X)), compute, X)


class _Extractor:
    """The fitted steps from an array of windows to each block's raw features, through
    the cache ``memory`` (None: none) under each step's ``_settings_key()``, then the
    step's ``_finish(X, features)`` where it has one (outside the cache: what depends
    on the windows fitted, which the key does not name)."""

    def __init__(self, steps, memory=None):
        self.steps = steps  # name -> an object with ``_features(X)``
        self.memory = memory

    def transform(self, X):
        """``{name: raw features of X}``, the blocks in the order of ``steps``."""
        memory = getattr(self, "memory", None)
        out = {}
        for name, step in self.steps.items():
            features = cached(memory, step._features, X, key=step._settings_key)
            finish = getattr(step, "_finish", None)
            out[name] = features if finish is None else finish(X, features)
        return out
