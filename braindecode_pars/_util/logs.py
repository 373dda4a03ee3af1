"""What the package says while it works, shown without the user configuring logging."""

from __future__ import annotations

import contextlib
import logging
import sys

#: The package's logger; its children are the modules' loggers.
PACKAGE_LOGGER = "braindecode_pars"


class _NotEpochTables(logging.Filter):
    """Leave out the per-epoch tables (shown at ``verbose=2`` only)."""

    def filter(self, record):
        return not record.name.endswith(".epochs")


@contextlib.contextmanager
def verbose_logging(verbose):
    """Show the package's INFO messages on stderr for the duration, when ``verbose``.

    ``verbose=0``: nothing is added. ``verbose=1``: what a fit is about to do and how
    it ended; ``verbose=2``: the per-epoch tables too. Nothing is added either when the
    user has set up logging (a handler on the package's logger or on the root logger),
    so configured logging is left as it is.
    """
    logger = logging.getLogger(PACKAGE_LOGGER)
    if not verbose or _configured(logger):
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    if verbose < 2:
        handler.addFilter(_NotEpochTables())
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _configured(logger):
    """Whether a handler other than a NullHandler would receive ``logger``'s records."""
    while logger is not None:
        if any(not isinstance(h, logging.NullHandler) for h in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False


def plural(count, noun, nouns=None):
    """A count and its noun as a message writes them: ``"1 recording"``, ``"2 recordings"``.

    Parameters
    ----------
    count : int
    noun : str
        The singular (``"recording"``).
    nouns : str | None
        The plural; None: ``noun`` and an ``s`` (``"people"`` or ``"batches"`` are given).

    Returns
    -------
    text : str
        ``f"{count} {noun}"`` for a count of one, else with the plural.

    Examples
    --------
    >>> plural(1, "unit"), plural(3, "epoch"), plural(0, "person", "people")
    ('1 unit', '3 epochs', '0 people')
    """
    word = noun if count == 1 else (nouns or f"{noun}s")
    return f"{count} {word}"


def shows_bars(stream):
    """Whether ``stream`` shows tqdm's bars: a terminal, or a notebook's output."""
    from tqdm.auto import tqdm

    notebook = any(cls.__module__ == "tqdm.notebook" for cls in tqdm.__mro__)
    if notebook and stream in (sys.stderr, sys.stdout):
        return True  # a notebook: tqdm.auto draws widgets
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False
