"""Stopping a pretraining run as a cluster's scheduler does: a signal, then a clean save.

Schedulers end a job with SIGTERM (at its time limit, or to preempt it), some first with
a signal of the job's choosing (SLURM's ``--signal``, often SIGUSR1), and with SIGKILL
after a grace period. While :class:`~braindecode_pars.training.PretrainNet` fits, the
signals of its ``stop_signals`` (read by :func:`check_stop_signals`, of
:mod:`braindecode_pars._signals`) only set a flag (:class:`StopSignals`); the net looks at
it between two steps, saves its state there (the weights and optimizer after the last
step, and how many steps of the current epoch are done) and raises
:class:`TrainingStopped`. Fitting again with the same ``checkpoint_dir`` continues from
that step. Ctrl-C (SIGINT) is not one of them: it interrupts as Python does.

DataLoader worker processes ignore the stop signals (their parent stops at a step
boundary, then ends them) and end when their parent dies, whatever kills it
(:func:`braindecode_pars._orphans.die_with_parent`, Linux's ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import signal

import torch

from .. import _signals
from .._signals import check_stop_signals
from . import distributed

__all__ = ["StopSignals", "TrainingStopped", "check_stop_signals"]


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


class StopSignals(_signals.StopSignals):
    """While entered, the given signals set :attr:`received` instead of ending the
    process (:class:`braindecode_pars._signals.StopSignals`), and the net asks
    :meth:`requested` whether one came.

    Parameters
    ----------
    signals : tuple of signal.Signals
        From :func:`check_stop_signals`.
    """

    def __init__(self, signals):
        super().__init__(
            signals,
            message="Received %s: stopping at the next step boundary, after saving the state.",
        )

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
