"""Pretraining: the skorch net that trains a pretext model, the single-channel view it
draws its crops from, and the loop around it (schedule, checkpoints, resuming, stops,
distributed data parallel).

- :mod:`~braindecode_pars.pretraining.net`: :class:`PretrainNet`;
- :mod:`~braindecode_pars.pretraining._views`: :class:`SingleChannelWindows`;
- :mod:`~braindecode_pars.pretraining._run`: :func:`run_pretraining`, one call from a view
  to a trained net;
- :mod:`~braindecode_pars.pretraining.stopping`: how a fit ends early
  (:class:`TrainingStopped`, :class:`TimeLimit`) and continues;
- :mod:`~braindecode_pars.pretraining.checkpoints`: :class:`StateCheckpoint`;
- :mod:`~braindecode_pars.pretraining.monitor`: :class:`ProbeMonitor`, a label probe and a
  subject probe of the encoder logged while it pretrains.
"""

from braindecode_pars.pretraining._run import run_pretraining
from braindecode_pars.pretraining._views import SingleChannelWindows
from braindecode_pars.pretraining.checkpoints import StateCheckpoint
from braindecode_pars.pretraining.monitor import ProbeMonitor
from braindecode_pars.pretraining.net import PretrainNet
from braindecode_pars.pretraining.stopping import TimeLimit, TrainingStopped

__all__ = [
    "PretrainNet",
    "ProbeMonitor",
    "SingleChannelWindows",
    "StateCheckpoint",
    "TimeLimit",
    "TrainingStopped",
    "run_pretraining",
]
