"""Argument checks of the lab's code, worded as the library's own (copies of those the
lab uses, and that the pair decoders of old revisions import, so that the lab imports
no private name of ``braindecode_pars``)."""

from __future__ import annotations

import numbers


def check_option(name, value, allowed):
    """Raise ``ValueError`` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        allowed = list(allowed)
        if len(allowed) == 1:
            options = repr(allowed[0])
        else:
            options = ", ".join(repr(a) for a in allowed[:-1]) + f" and {allowed[-1]!r}"
        raise ValueError(
            f"Invalid value for the '{name}' parameter. Allowed values are "
            f"{options}, but got {value!r} instead."
        )
    return value


def check_int(name, value, minimum=None):
    """Raise unless ``value`` is an integer (not a bool) no smaller than ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"'{name}' must be an int, but got {type(value).__name__} ({value!r}).")
    if minimum is not None and value < minimum:
        raise ValueError(f"'{name}' must be >= {minimum}, but got {value}.")
    return int(value)


def check_heads(name, n_heads, emb_dim):
    """Raise unless ``n_heads`` (the parameter ``name``) is a positive int dividing
    ``emb_dim``."""
    check_int(name, n_heads, 1)
    if emb_dim % n_heads:
        divisors = [h for h in range(1, emb_dim + 1) if emb_dim % h == 0]
        raise ValueError(
            f"'{name}' must divide the token size emb_dim={emb_dim} (one of {divisors}), "
            f"but got {n_heads}."
        )
    return n_heads
