"""Stop signals: a long job (a store build, a pretraining run) stopped cleanly, as a
cluster's scheduler stops it.

Schedulers end a job with SIGTERM (at its time limit, or to preempt it), some first with
a signal of the job's choosing (SLURM's ``--signal``, often SIGUSR1), and with SIGKILL
after a grace period. :func:`check_stop_signals` reads the signals a job stops on, and
:class:`StopSignals` makes them set a flag that the job looks at where it can stop
without losing work (a store build at a recording's end, a pretraining run at a step
boundary). Ctrl-C (SIGINT) is never one: it interrupts as Python does.

This module imports nothing of the package: the store (``datasets``), the pretraining
net (``training``) and the command line all use it. Its companion for worker processes
is :mod:`braindecode_pars._jobs.orphans`.
"""

from __future__ import annotations

import logging
import signal
import threading

logger = logging.getLogger(__name__)

#: Signals that cannot be a stop signal: SIGINT keeps Python's Ctrl-C, SIGKILL and
#: SIGSTOP cannot be caught, and SIGCHLD comes whenever a worker process ends.
_NOT_STOP = ("SIGINT", "SIGKILL", "SIGSTOP", "SIGCHLD")


def _allowed():
    """The names of the signals that can stop a job, sorted."""
    return sorted(s.name for s in signal.Signals if s.name not in _NOT_STOP)


def _parse(item):
    """``item`` (a name such as ``"SIGTERM"`` or ``"usr1"``, a number, or a number
    written as text) as a ``signal.Signals``, or None when it names none."""
    if isinstance(item, bool):
        return None
    if isinstance(item, str):
        text = item.strip().upper()
        if text.isdigit():
            item = int(text)
        else:
            return getattr(signal.Signals, text if text.startswith("SIG") else "SIG" + text, None)
    if not isinstance(item, int):
        return None
    try:
        return signal.Signals(item)
    except ValueError:
        return None


def check_stop_signals(name, value):
    """``value`` as a tuple of ``signal.Signals``; refuses what cannot stop a job.

    Parameters
    ----------
    name : str
        The parameter's name, for the message (``"stop_signals"``, ``"--stop-signal"``).
    value : str | int | sequence of str or int | None
        Signal names (``"SIGTERM"``, ``"USR1"``) or numbers; None or empty: none.

    Returns
    -------
    signals : tuple of signal.Signals
        Each signal once, in the order given.

    Raises
    ------
    ValueError
        Naming ``name``, the allowed values and the value given, for a value that is
        not a signal, or is SIGINT (Ctrl-C's), SIGKILL or SIGSTOP (which no handler
        can catch) or SIGCHLD.

    Examples
    --------
    >>> [s.name for s in check_stop_signals("stop_signals", ["TERM", "usr1", 15])]
    ['SIGTERM', 'SIGUSR1']
    """
    if value is None:
        return ()
    items = [value] if isinstance(value, str | int) else list(value)
    allowed = _allowed()
    signals = []
    for item in items:
        sig = _parse(item)
        if sig is None or sig.name not in allowed:
            raise ValueError(
                f"Invalid value for the '{name}' parameter. Allowed values are signal names "
                f"(SIGTERM, USR1...) or numbers among {', '.join(allowed)} (SIGINT stays "
                "Ctrl-C's; SIGKILL and SIGSTOP cannot be caught; SIGCHLD comes whenever a "
                f"worker process ends), but got {item!r} instead."
            )
        if sig not in signals:
            signals.append(sig)
    return tuple(signals)


class StopSignals:
    """While entered, the given signals set :attr:`received` instead of ending the process.

    Handlers can only be set in the main thread; elsewhere (a job run in a thread) the
    signals keep their handlers and a debug message says so. The previous handlers come
    back on exit.

    Parameters
    ----------
    signals : tuple of signal.Signals
        From :func:`check_stop_signals`.
    message : str
        Logged as a warning when the first signal comes, ``%s`` its name: what the job
        does now.
    ignore_file_size : bool
        Also ignore SIGXFSZ (a file size limit, ``ulimit -f``), so that a write past the
        limit fails with an ``OSError`` the job can report, instead of killing it.

    Attributes
    ----------
    received : signal.Signals | None
        The first stop signal received, None until one comes.
    """

    def __init__(self, signals, message="Received %s: stopping.", ignore_file_size=False):
        self.signals = tuple(signals)
        self.message = message
        self.ignore_file_size = ignore_file_size
        self.received = None
        self._previous = {}

    def _handle(self, signum, frame):
        if self.received is None:
            self.received = signal.Signals(signum)
            logger.warning(self.message, self.received.name)

    def __enter__(self):
        ignored = [signal.SIGXFSZ] if self.ignore_file_size and hasattr(signal, "SIGXFSZ") else []
        if threading.current_thread() is not threading.main_thread():
            if self.signals or ignored:
                logger.debug("Not in the main thread: %s keep their handlers.", self.signals)
            return self
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        for sig in ignored:
            self._previous[sig] = signal.signal(sig, signal.SIG_IGN)
        return self

    def __exit__(self, *exc):
        for sig, previous in self._previous.items():
            # None: a handler not set from Python, which cannot be put back; the default
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}
        return False
