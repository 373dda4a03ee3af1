"""Stopping a pretraining run as a cluster's scheduler does: a signal, then a clean save.

Schedulers end a job with SIGTERM (at its time limit, or to preempt it), some first with
a signal of the job's choosing (SLURM's ``--signal``, often SIGUSR1), and with SIGKILL
after a grace period. While :class:`~braindecode_pars.training.PretrainNet` fits, the
signals of its ``stop_signals`` only set a flag (:class:`StopSignals`); the net looks at
it between two steps, saves its state there (the weights and optimizer after the last
step, and how many steps of the current epoch are done) and raises
:class:`TrainingStopped`. Fitting again with the same ``checkpoint_dir`` continues from
that step. Ctrl-C (SIGINT) is not one of them: it interrupts as Python does.

DataLoader worker processes ignore the stop signals (their parent stops at a step
boundary, then ends them) and end when their parent dies, whatever kills it
(:func:`braindecode_pars._orphans.die_with_parent`, Linux's ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import logging
import signal
import threading

import torch

from . import distributed

logger = logging.getLogger(__name__)

#: Signals that cannot be a stop signal: SIGINT keeps Python's Ctrl-C, and SIGKILL and
#: SIGSTOP cannot be caught.
_NOT_STOP = {"SIGINT", "SIGKILL", "SIGSTOP"}


class TrainingStopped(KeyboardInterrupt):
    """A pretraining run stopped by one of its ``stop_signals``, its state saved.

    A ``KeyboardInterrupt``, so that what handles an interrupt (skorch's end of
    training, the estimators' clean-up) handles it too; a script that wants its
    scheduler to see the signal's exit status ends with ``sys.exit(err.exit_code)``.

    Attributes
    ----------
    signal : signal.Signals
        The signal received.
    epochs : int
        Epochs complete in the saved state.
    steps : int
        Steps of the next epoch done too (0: it stopped between two epochs).
    folder : Path | None
        Where the state is saved (None: the net had no ``checkpoint_dir``).
    exit_code : int
        ``128 + signal``: the status a shell gives a process that this signal ended
        (143 for SIGTERM, 138 for SIGUSR1 on Linux).
    """

    def __init__(self, sig, epochs, steps, folder):
        self.signal = signal.Signals(sig)
        self.epochs = int(epochs)
        self.steps = int(steps)
        self.folder = folder
        self.exit_code = 128 + int(self.signal)
        where = f"after {self.epochs} epoch(s)"
        if self.steps:
            where += f" and {self.steps} step(s) of epoch {self.epochs + 1}"
        if folder is None:
            saved = "nothing is saved (no checkpoint_dir)"
        else:
            saved = f"its state is saved in '{folder}': fit again with it to continue"
        super().__init__(f"Pretraining stopped by {self.signal.name} {where}; {saved}.")


def check_stop_signals(name, value):
    """``value`` as a tuple of ``signal.Signals``; refuses what cannot stop a run.

    Parameters
    ----------
    name : str
        The parameter's name, for the message.
    value : str | int | sequence of str or int | None
        Signal names (``"SIGTERM"``, ``"USR1"``) or numbers; None or empty: none.
    """
    if value is None:
        return ()
    items = [value] if isinstance(value, str | int) else list(value)
    allowed = sorted(
        s.name for s in signal.Signals if s.name not in _NOT_STOP and s.name != "SIGCHLD"
    )
    signals = []
    for item in items:
        key = item.upper() if isinstance(item, str) else item
        if isinstance(key, str) and not key.startswith("SIG"):
            key = "SIG" + key
        try:
            sig = signal.Signals[key] if isinstance(key, str) else signal.Signals(key)
        except (KeyError, ValueError):
            sig = None
        if sig is None or sig.name not in allowed:
            raise ValueError(
                f"Invalid value for the '{name}' parameter: {item!r} is not a signal that can "
                f"stop a run. Allowed values are signal names or numbers among "
                f"{', '.join(allowed)} (SIGINT stays Ctrl-C's; SIGKILL and SIGSTOP cannot "
                "be caught)."
            )
        if sig not in signals:
            signals.append(sig)
    return tuple(signals)


class StopSignals:
    """While entered, the given signals set :attr:`received` instead of ending the process.

    Handlers can only be set in the main thread; elsewhere (a fit in a thread) the
    signals keep their handlers and a debug message says so. The previous handlers come
    back on exit.

    Parameters
    ----------
    signals : tuple of signal.Signals
        From :func:`check_stop_signals`.
    """

    def __init__(self, signals):
        self.signals = tuple(signals)
        self.received = None
        self._previous = {}

    def _handle(self, signum, frame):
        if self.received is None:
            logger.warning(
                "Received %s: stopping at the next step boundary, after saving the state.",
                signal.Signals(signum).name,
            )
        self.received = signum

    def __enter__(self):
        if self.signals and threading.current_thread() is not threading.main_thread():
            logger.debug("Not in the main thread: %s keep their handlers.", self.signals)
            return self
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}
        return False

    def requested(self, net, collective):
        """The stop signal received by this process or, when ``collective`` under
        DistributedDataParallel, by any process (one all-reduce that every process must
        join at the same step); None if none."""
        received = self.received
        if not (collective and distributed._is_distributed()):
            return received
        device = torch.device(net.device)
        device = device if device.type == "cuda" else torch.device("cpu")
        flag = torch.tensor([float(received or 0)], device=device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        agreed = int(flag.item())  # the one read of the device, on this cadence only
        return agreed or None
