"""What pretraining checks once rather than at every step: the amplitude-aware
encoder's unit, on the host, on a sample of the data before the first step (its forward
passes then check nothing), and the probe monitor, computed by rank 0 alone."""

import numpy as np
import pytest
import torch

from braindecode_pars import PARS, PatchEncoder
from braindecode_pars.pretraining import PretrainNet, ProbeMonitor, SingleChannelWindows
from braindecode_pars.pretraining.monitor import _MONITOR_SECONDS, MONITOR_KEYS

SFREQ = 10.0
SMALL = dict(emb_dim=8, depth=1, n_heads=2, ff_dim=8)


def labelled_set(n_subjects=3, n_windows=6, n_chans=2, n_times=300):
    rng = np.random.default_rng(0)
    X = 30 * rng.standard_normal((n_subjects * n_windows, n_chans, n_times)).astype(np.float32)
    return X, np.arange(len(X)) % 2, np.repeat(np.arange(n_subjects), n_windows)


def test_pretraining_checks_the_unit_once_on_the_host_and_its_steps_check_nothing(monkeypatch):
    """A fit of an amplitude-aware encoder checks a seeded sample of its windows once,
    eagerly, before the first step (windows in volts for a µV encoder: refused with no
    epoch run), and none of its forward passes checks the unit (no host read per step,
    no assertion in a compiled graph); the encoder checks again after the fit."""
    calls = []
    check = PatchEncoder._check_unit

    def counted(self, std, flat, eager=False):
        calls.append((len(std), eager))
        return check(self, std, flat, eager)

    monkeypatch.setattr(PatchEncoder, "_check_unit", counted)
    rng = np.random.default_rng(0)
    windows = 30.0 * rng.standard_normal((40, 1, 300)).astype(np.float32)  # µV
    data = SingleChannelWindows(windows, n_times=200)  # 40 one-channel windows
    torch.manual_seed(0)
    model = PARS(n_times=200, sfreq=SFREQ, n_patches=6, **SMALL, normalization="fixed",
                 amplitude_scale=10.0)  # fmt: skip
    net = PretrainNet(model, max_epochs=2, batch_size=8, progress_bar=False,
                      valid_fraction=0.2)  # fmt: skip
    net.fit(data)
    assert len(net.history) == 2 and np.isfinite(net.history[:, "train_loss"]).all()
    steps = sum(len(row["batches"]) for row in net.history)
    assert steps >= 8  # training and validation forward passes ran...
    assert calls == [(min(256, len(data)), True)]  # ...and one host check of a sample
    assert not net.encoder._unit_checked
    with pytest.raises(ValueError, match="look like 'V'"):  # inference checks again
        net.encoder(torch.as_tensor(windows[:4, :, :200]) * 1e-6)
    calls.clear()
    volts = SingleChannelWindows(windows * 1e-6, n_times=200)
    again = PretrainNet(PARS(n_times=200, sfreq=SFREQ, n_patches=6, **SMALL,
                             normalization="fixed"), max_epochs=2, batch_size=8,
                        progress_bar=False)  # fmt: skip
    with pytest.raises(ValueError, match=r"outside \[0.001, 100000\] uV.*look like 'V'"):
        again.fit(volts)
    assert len(again.history) == 0 and calls == [(min(256, len(volts)), True)]
    assert not again.encoder._unit_checked


def test_under_ddp_rank_0_alone_probes_and_sends_its_numbers(monkeypatch):
    """A process of rank 1 of a distributed net computes no probe: it records the
    numbers rank 0 broadcasts."""
    from braindecode_pars.pretraining import monitor as monitor_module

    X, y, groups = labelled_set()
    monitor = ProbeMonitor(X, y, groups, sfreq=SFREQ).initialize()
    sent = []

    def broadcast(objects, src):
        assert src == 0 and objects == [None]  # rank 1 sends nothing of its own
        objects[0] = (0.75, 0.5, 2.0)
        sent.append(src)

    monkeypatch.setattr(monitor_module.distributed, "rank", lambda: 1)
    monkeypatch.setattr(monitor_module.distributed, "_is_distributed", lambda: True)
    monkeypatch.setattr(torch.distributed, "broadcast_object_list", broadcast)
    monkeypatch.setattr(ProbeMonitor, "_scores", lambda self, net: pytest.fail("computed"))

    class Net:
        distributed_ = True
        reports_epoch_ = True
        max_epochs = 3
        history = [{"epoch": 1}]

    net = Net()
    monitor.on_epoch_read(net, net.history[-1])
    assert sent == [0]
    assert net.history[-1] == {"epoch": 1, MONITOR_KEYS["label"]: 0.75,
                               MONITOR_KEYS["subject"]: 0.5, _MONITOR_SECONDS: 2.0}  # fmt: skip
