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

import faulthandler
import logging
import signal
import sys
import threading

logger = logging.getLogger(__name__)

#: Seconds after a stop signal by which a job must have stopped before every thread's
#: stack is written to stderr (:class:`StopSignals`' ``dump_after``): below the 30 s
#: that torchrun and SLURM's default ``KillWait`` grant before SIGKILL, so that a stop
#: that hangs says where before it is killed.
DUMP_AFTER_SECONDS = 20.0

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
    back on exit. Blocks nest: a block entered inside another (a command's, around the
    whole command; a fit's, around its training) starts with the signal the outer one
    received, and gives the outer one the signal it received, so that a signal is never
    lost between them and a second one never ends a process that is stopping.

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
    dump_after : float | None
        Seconds after the first stop signal at which, if the block has not been left
        by then, every thread's stack is written to stderr
        (``faulthandler.dump_traceback_later``; cancelled when the block is left), so
        that a stop that hangs (a collective another process skipped, a write that
        never ends) says where it waits. None: no such dump.

    Attributes
    ----------
    received : signal.Signals | None
        The first stop signal received, None until one comes.
    """

    def __init__(
        self, signals, message="Received %s: stopping.", ignore_file_size=False, dump_after=None
    ):
        self.signals = tuple(signals)
        self.message = message
        self.ignore_file_size = ignore_file_size
        self.dump_after = dump_after
        self.received = None
        self._previous = {}
        self._armed = False

    def _handle(self, signum, frame):
        if self.received is None:
            self.received = signal.Signals(signum)
            logger.warning(self.message, self.received.name)
            if self.dump_after is not None:
                self._armed = arm_stack_dump(self.dump_after)

    def __enter__(self):
        ignored = [signal.SIGXFSZ] if self.ignore_file_size and hasattr(signal, "SIGXFSZ") else []
        if threading.current_thread() is not threading.main_thread():
            if self.signals or ignored:
                logger.debug("Not in the main thread: %s keep their handlers.", self.signals)
            return self
        for sig in self.signals:
            self._previous[sig] = previous = signal.signal(sig, self._handle)
            outer = getattr(previous, "__self__", None)  # a block of this class around
            if isinstance(outer, StopSignals) and self.received is None:
                self.received = outer.received  # a signal that came before this block
        for sig in ignored:
            self._previous[sig] = signal.signal(sig, signal.SIG_IGN)
        return self

    def __exit__(self, *exc):
        if self._armed:
            faulthandler.cancel_dump_traceback_later()
            self._armed = False
        for sig, previous in self._previous.items():
            outer = getattr(previous, "__self__", None)
            if isinstance(outer, StopSignals) and outer.received is None:
                outer.received = self.received  # the signal this block had, for the outer
            # None: a handler not set from Python, which cannot be put back; the default
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}
        return False


def arm_stack_dump(seconds):
    """Write every thread's stack to stderr in ``seconds`` unless
    ``faulthandler.cancel_dump_traceback_later()`` is called before (one dump; a later
    call replaces an earlier one). Whether it is armed: not where stderr has no file
    descriptor (an embedding that replaced it)."""
    try:
        faulthandler.dump_traceback_later(float(seconds), repeat=False, file=sys.stderr)
    except (ValueError, AttributeError, OSError, RuntimeError):  # no fileno() on stderr
        return False
    return True
