"""What the package says while it works, shown without the user configuring logging."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import warnings

#: The package's logger; its children are the modules' loggers.
PACKAGE_LOGGER = "braindecode_pars"


class _NotEpochTables(logging.Filter):
    """Leave out the per-epoch tables (shown at ``verbose=2`` only)."""

    def filter(self, record):
        return not record.name.endswith(".epochs")


#: The ``verbose`` of the fits running in this context, the outermost's or less (None:
#: none runs); see :func:`verbose_logging`.
_VERBOSE = contextvars.ContextVar("braindecode_pars_verbose", default=None)


@contextlib.contextmanager
def verbose_logging(verbose):
    """Show the package's INFO messages on stderr for the duration, when ``verbose``.

    ``verbose=0``: nothing is added. ``verbose=1``: what a fit is about to do and how
    it ended; ``verbose=2``: the per-epoch tables too. Nothing is added either when the
    user has set up logging (a handler on the package's logger or on the root logger),
    so configured logging is left as it is. A fit inside another's (a stage of
    :class:`~braindecode_pars.PARSClassifier`) shows no more than the outer one's
    ``verbose`` does: under an outer ``verbose=0`` its own ``verbose=1`` adds nothing.
    """
    outer = _VERBOSE.get()
    verbose = int(verbose) if outer is None else min(int(verbose), outer)
    token = _VERBOSE.set(verbose)
    try:
        with _shown_on_stderr(verbose):
            yield
    finally:
        _VERBOSE.reset(token)


@contextlib.contextmanager
def _shown_on_stderr(verbose):
    """The package's INFO messages on stderr for the duration (see
    :func:`verbose_logging`)."""
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


#: The warnings :func:`warn_once` has shown, by the key of the filter action that showed
#: them (see :func:`_shown_key`).
_SHOWN = set()


def warn_once(message, category=UserWarning, stacklevel=1):
    """``warnings.warn``, shown once per process as Python's filters mean it to be.

    Python's default filter shows a warning once per location (its text, category,
    file and line), but it forgets what it has shown each time any code changes the
    filters, and scikit-learn's input checks do so on every call (``catch_warnings``
    and ``simplefilter``), so a warning of a fit came back in every fold of a
    cross-validation. This shows a warning as ``warnings.warn`` does, and then not
    again in this process where the filters' action for it is ``"default"`` (the
    same text and category from the same line), ``"module"`` (from the same module)
    or ``"once"`` (anywhere); ``"always"`` shows it every time, ``"error"`` raises
    it every time and ``"ignore"`` hides it, as they do for ``warnings.warn``.

    Parameters
    ----------
    message : str | Warning
        The warning's text (or a warning instance, whose class is then the category).
        Keep numbers that vary from fit to fit out of it (a fold's score, a count of
        windows): they make each fit's text a new warning.
    category : type, default UserWarning
        A subclass of ``Warning``.
    stacklevel : int, default 1
        As ``warnings.warn``'s: 1 names the line that calls ``warn_once``, 2 its caller.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("default")
    ...     for fold in range(3):
    ...         with warnings.catch_warnings():  # as scikit-learn's checks do in a fold
    ...             warnings.simplefilter("ignore", FutureWarning)
    ...         warn_once("said once, not once a fold")
    >>> len(caught)
    1
    """
    if isinstance(message, Warning):
        category = type(message)
    frame = sys._getframe(1)
    for _ in range(stacklevel - 1):
        frame = frame.f_back if frame is not None else None
    if frame is None:  # as warnings.warn names a level above the stack
        where = ("sys", 1, "sys")
    else:
        module = frame.f_globals.get("__name__", "<string>")
        where = (frame.f_code.co_filename, frame.f_lineno, module)
    key = _shown_key(str(message), category, *where)
    if key is not None and key in _SHOWN:
        return
    warnings.warn(message, category, stacklevel=stacklevel + 1)
    if key is not None:
        _SHOWN.add(key)


def _shown_key(text, category, filename, lineno, module):
    """What identifies a warning as already shown under the filters' action for it
    (the first filter that matches, as ``warnings.warn_explicit`` searches them); None
    for the actions that show (or raise) every time or never."""
    action = warnings.defaultaction
    for act, msg, cat, mod, line in warnings.filters:
        if (
            (msg is None or msg.match(text))
            and issubclass(category, cat)
            and (mod is None or mod.match(module))
            and (line == 0 or line == lineno)
        ):
            action = act
            break
    if action == "default":
        return (text, category, filename, lineno)
    if action == "module":
        return (text, category, module)
    if action == "once":
        return (text, category)
    return None


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
