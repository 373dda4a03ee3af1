"""Progress shown while the package works: bars on a terminal or in a notebook with the
package's log lines written above them, durations in words, and skorch's colour codes
taken out of a log file."""

from __future__ import annotations

import contextlib
import logging
import re
import sys

from braindecode_pars._util.logs import PACKAGE_LOGGER, shows_bars

#: An ANSI escape sequence (skorch's table colours its best values).
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def duration(seconds):
    """``seconds`` in words: "40 s", "12 min", "3.5 h"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class _ThroughBars(logging.Handler):
    """A console handler's records, written by ``tqdm.write`` above the open bars."""

    def __init__(self, handler, tqdm_class):
        super().__init__()
        self.handler = handler
        self.tqdm_class = tqdm_class

    def handle(self, record):
        # the console handler's own level, filters and format
        if record.levelno < self.handler.level or not self.handler.filter(record):
            return False
        try:
            self.tqdm_class.write(self.handler.format(record), file=self.handler.stream)
        except Exception:  # as logging does: a failing handler does not stop the program
            self.handler.handleError(record)
        return True


@contextlib.contextmanager
def logs_above_bars(tqdm_class):
    """Console handlers (streams to stdout, stderr) of the package's loggers and their
    ancestors write through ``tqdm.write`` for the duration; other handlers (files)
    and loggers without a console handler stay as they are."""
    loggers, logger = [], logging.getLogger(PACKAGE_LOGGER)
    while logger is not None:
        loggers.append(logger)
        logger = logger.parent
    saved = [(logger, logger.handlers) for logger in loggers]
    try:
        for logger in loggers:
            logger.handlers = [
                _ThroughBars(h, tqdm_class) if _is_console(h) else h for h in logger.handlers
            ]
        yield
    finally:
        for logger, handlers in saved:
            logger.handlers = handlers


def _is_console(handler):
    return isinstance(handler, logging.StreamHandler) and handler.stream in (
        sys.stdout,
        sys.stderr,
    )


def progress(iterable, desc, enabled=True, total=None):
    """``iterable`` with a progress bar on a terminal or in a notebook, the package's
    console log lines written above it (never glued to it); the plain iterable when
    ``enabled`` is False or stderr is not shown as a terminal (a log file)."""
    if not enabled or not shows_bars(sys.stderr):
        yield from iterable
        return
    from tqdm.auto import tqdm

    with logs_above_bars(tqdm), tqdm(iterable, desc=desc, total=total) as bar:
        yield from bar
