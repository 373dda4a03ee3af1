"""Stubs of the package's internals that tests of the command line share: a ``pretrain``
stopped before any training, its data read replaced."""

import numpy as np


def stop_before_pretraining(monkeypatch):
    """Make ``braindecode-pars pretrain`` stop before any work: the data it reads become
    100 zeros and ``training.pretrain`` records what it is given and raises
    ``SystemExit(0)``.

    Returns
    -------
    given : dict
        Filled at each call with the keyword arguments of ``pretraining.run_pretraining`` and its
        ``method``.
    """
    import braindecode_pars.cli as cli
    import braindecode_pars.pretraining as training

    given = {}

    def fake_pretrain(view, method, **kwargs):
        given.update(kwargs, method=method)
        raise SystemExit(0)  # stop before any training

    monkeypatch.setattr(training, "run_pretraining", fake_pretrain)
    monkeypatch.setattr(cli._encoder_commands, "_pretrain_view", lambda args: np.zeros(100))
    return given
