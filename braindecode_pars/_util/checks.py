"""Argument checks whose messages name the parameter, what is allowed and what was given.

The wording follows MNE-Python's ``_check_option`` and ``_validate_type`` so that
errors read the same as the rest of the user's stack. Every check raises
:class:`InvalidParameterError`, scikit-learn's class of a refused parameter (a
``ValueError`` and a ``TypeError`` at once), so that one ``except`` catches every
parameter mistake whatever its kind.
"""

from __future__ import annotations

import numbers

from sklearn.utils._param_validation import InvalidParameterError as _SklearnInvalidParameterError


class InvalidParameterError(_SklearnInvalidParameterError):
    """A parameter's value refused: a wrong type or a value outside what is allowed.

    A subclass of scikit-learn's ``InvalidParameterError``, itself a ``ValueError``
    and a ``TypeError``: ``except ValueError``, ``except TypeError`` and
    ``except sklearn.utils._param_validation.InvalidParameterError`` all catch it, as
    they catch scikit-learn's own parameter errors. Its message names the parameter,
    what is allowed and what was given.

    Examples
    --------
    >>> try:
    ...     check_int("max_epochs", 0, minimum=1)
    ... except ValueError as err:
    ...     print(isinstance(err, TypeError), err)
    True 'max_epochs' must be >= 1, but got 0.
    """


def check_option(name, value, allowed):
    """Raise :class:`InvalidParameterError` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        allowed = list(allowed)
        if len(allowed) == 1:
            options = repr(allowed[0])
        else:
            options = ", ".join(repr(a) for a in allowed[:-1]) + f" and {allowed[-1]!r}"
        raise InvalidParameterError(
            f"Invalid value for the '{name}' parameter. Allowed values are "
            f"{options}, but got {value!r} instead."
        )
    return value


def check_int(name, value, minimum=None):
    """Raise :class:`InvalidParameterError` unless ``value`` is an integer (not a bool) no
    smaller than ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidParameterError(
            f"'{name}' must be an int, but got {type(value).__name__} ({value!r})."
        )
    if minimum is not None and value < minimum:
        raise InvalidParameterError(f"'{name}' must be >= {minimum}, but got {value}.")
    return int(value)


def check_none_or_number(name, value, kind, allowed):
    """Whether ``value`` is not None; raise :class:`InvalidParameterError`, naming
    ``allowed``, unless it is None or a ``kind`` number (``numbers.Integral``,
    ``numbers.Real``), a bool not counting."""
    if value is None:
        return False
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InvalidParameterError(
            f"Invalid value for the '{name}' parameter. Allowed values are {allowed}, "
            f"but got {value!r} instead."
        )
    return True


def check_range(name, value, low, high, low_open=False, high_open=False):
    """Raise :class:`InvalidParameterError` unless ``low (<|<=) value (<|<=) high``; the
    message gives the interval in maths notation."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidParameterError(
            f"'{name}' must be a number, but got {type(value).__name__} ({value!r})."
        )
    too_low = value <= low if low_open else value < low
    too_high = value >= high if high_open else value > high
    if too_low or too_high:
        interval = f"{'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
        raise InvalidParameterError(f"'{name}' must lie in {interval}, but got {value}.")
    return float(value)


def check_device(name, value):
    """``value`` must name a CPU or an available CUDA device (None: the caller's default).

    Apple's ``mps`` and other backends are refused: the models run there in principle,
    but the package is tested on CPUs and CUDA GPUs only.
    """
    import torch

    if value is None:
        return
    try:
        device = torch.device(value)
    except (RuntimeError, TypeError) as err:
        raise InvalidParameterError(
            f"Invalid value for '{name}': {value!r} is not a torch device ({err})."
        ) from err
    if device.type not in ("cpu", "cuda"):
        raise InvalidParameterError(
            f"Invalid value for '{name}': {value!r}; allowed are 'cpu' and 'cuda' devices, "
            f"the ones the package is tested on ('{device.type}' has never run its tests)."
        )
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidParameterError(
                f"Invalid value for '{name}': {value!r} but torch sees no GPU "
                "(torch.cuda.is_available() is False); use 'cpu'."
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise InvalidParameterError(
                f"Invalid value for '{name}': {value!r} but torch sees "
                f"{torch.cuda.device_count()} GPU(s)."
            )


def check_skorch_names(net, components=("module", "criterion", "optimizer")):
    """skorch's own check of a net's argument names (``NeuralNet._validate_params``),
    before ``initialize``: the prefixes of ``components`` are the ones ``initialize``
    would add. A misspelt nested name (``pretrain__lr``) is refused naming it and the
    prefixes a nested name may start with."""
    from types import SimpleNamespace

    from skorch import NeuralNet

    names = SimpleNamespace(
        prefixes_=[*net.prefixes_, *components],
        _params_to_validate=net._params_to_validate,
        use_caching=net.use_caching,
        iterator_valid__shuffle=getattr(net, "iterator_valid__shuffle", False),
    )
    try:
        NeuralNet._validate_params(names)
    except ValueError as err:
        known = ", ".join(f"{p}__" for p in sorted(names.prefixes_))
        raise InvalidParameterError(
            f"{type(net).__name__}: {err} A nested parameter starts with one of {known}."
        ) from None


def check_heads(name, n_heads, emb_dim):
    """Raise unless ``n_heads`` (the parameter ``name``) is a positive int dividing
    ``emb_dim``: the one check of an attention's heads (the encoder's, PARS's decoder's)."""
    check_int(name, n_heads, 1)
    if emb_dim % n_heads:
        divisors = [h for h in range(1, emb_dim + 1) if emb_dim % h == 0]
        raise InvalidParameterError(
            f"'{name}' must divide the token size emb_dim={emb_dim} (one of {divisors}), "
            f"but got {n_heads}."
        )
    return n_heads


def fewest_patches(pos_mask_ratio):
    """The fewest patches PARS takes at ``pos_mask_ratio``: at least 2, and enough that
    :func:`check_position_masking` finds 2 position-masked ones (with
    ``pos_mask_ratio=1`` none keeps its position, which PARS allows).

    Examples
    --------
    >>> fewest_patches(0.8), fewest_patches(0.5), fewest_patches(0.1)
    (2, 3, 15)
    """
    check_range("pos_mask_ratio", pos_mask_ratio, 0, 1, low_open=True)
    n = max(2, int(1.5 / pos_mask_ratio))  # round(r * n) >= 2 needs r * n >= 1.5
    while int(round(pos_mask_ratio * n)) < 2:
        n += 1
    return n


def check_position_masking(n_patches, pos_mask_ratio):
    """The number of PARS's position-masked patches, ``round(pos_mask_ratio *
    n_patches)``, refused below 2 (a pair needs two): the one check of it, made by
    :class:`~braindecode_pars.PARS` and, before any work, by the pretraining settings."""
    n_masked = int(round(pos_mask_ratio * n_patches))
    if n_masked < 2:
        raise InvalidParameterError(
            f"pos_mask_ratio={pos_mask_ratio} of n_patches={n_patches} masks {n_masked} "
            "patch(es); PARS needs at least 2 position-masked patches to form a pair."
        )
    return n_masked
