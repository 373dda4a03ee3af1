"""What a user sees while the library works: progress, plans, and a warning when
pretraining learned nothing."""

import logging
import warnings

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier
from braindecode_pars._logging import _configured
from braindecode_pars.datasets import SingleChannelWindows
from braindecode_pars.training import pretrain

from .conftest import SMALL_CLASSIFIER, TINY
from .ramp_fixtures import ramp_dataset


def _windows(n=48, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3, 400)).astype(np.float32)
    y = np.repeat([0, 1], n // 2)
    X[y == 1, 0] += np.sin(np.linspace(0, 60, 400)).astype(np.float32)
    return X, y


def _no_logging_setup(monkeypatch):
    """A Python session where nobody configured logging: pytest's own capture handlers,
    which it puts on the root logger when a test's call starts, taken away."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    assert not _configured(logging.getLogger("braindecode_pars"))


def test_fit_shows_epoch_k_of_n_skill_time_left_and_its_plan_without_logging_setup(
    capfd, monkeypatch
):
    _no_logging_setup(monkeypatch)
    X, y = _windows()
    handlers = list(logging.getLogger("braindecode_pars").handlers)
    params = dict(SMALL_CLASSIFIER, verbose=1, pretrain_epochs=3, finetune="frozen")
    PARSClassifier(**params, sfreq=40).fit(X, y)
    err = capfd.readouterr().err
    final = err.replace("\r", "\n").split("\n")
    bar = [line for line in final if line.startswith("pretraining PARS: 100%")]
    assert bar and "3/3" in bar[-1] and "train_skill=" in bar[-1]
    assert "<00:00" in bar[-1]  # tqdm's elapsed<left
    assert "Pretraining PARS with a 16 x 1 encoder" in err and "for 3 epochs (" in err
    assert "Fine-tuning (finetune=" in err and "for 4 epochs on cpu" in err
    assert "epoch    train_loss" not in err  # the per-epoch tables wait for verbose=2
    assert logging.getLogger("braindecode_pars").handlers == handlers  # taken back
    PARSClassifier(**dict(SMALL_CLASSIFIER, verbose=1, pretrain_epochs=1), sfreq=40).fit(X, y)
    err = capfd.readouterr().err  # the default, the probe, says what it fits
    assert "Fitting the probe: a class-balanced logistic regression (C=100)" in err


def test_verbose_0_is_silent_and_verbose_2_adds_the_epoch_tables(capfd, monkeypatch):
    _no_logging_setup(monkeypatch)
    X, y = _windows()
    PARSClassifier(**dict(SMALL_CLASSIFIER, verbose=0), sfreq=40).fit(X, y)
    out = capfd.readouterr()
    assert out.err == "" and out.out == ""
    PARSClassifier(**dict(SMALL_CLASSIFIER, verbose=2), sfreq=40).fit(X, y)
    assert "train_skill" in capfd.readouterr().err  # the pretraining epoch table


def test_a_run_that_learned_nothing_warns_what_it_means_and_what_to_try():
    view = SingleChannelWindows(ramp_dataset(32).tensors[0].numpy())
    view.sfreq = 10.0
    kwargs = dict(max_epochs=2, batch_size=16, progress_bar=False, n_patches=12,
                  pos_mask_ratio=0.5, encoder_kwargs=TINY)  # fmt: skip
    with pytest.warns(
        UserWarning, match=r"pretext skill of -?\d\.\d{3} .*learned \(almost\) nothing"
    ):
        pretrain(view, lr=1e-12, **kwargs)  # a learning rate that cannot move the weights
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a run that learns does not warn
        net = pretrain(view, lr=3e-3, **dict(kwargs, max_epochs=30))
    assert net.history[-1, "train_skill"] > 0.3
