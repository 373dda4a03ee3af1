"""What a user sees while the library works: progress, plans, and a warning when
pretraining learned nothing."""

import logging
import warnings

import numpy as np
import pytest
import torch

from braindecode_pars import PARSClassifier, PARSFineTuner, PARSPretrainer, PARSProbe
from braindecode_pars._util.logs import _configured
from braindecode_pars.pretraining import run_pretraining
from braindecode_pars.pretraining._views import SingleChannelWindows

from .._learning import SEED, learned
from ..conftest import SMALL_ENCODER
from ..ramp_fixtures import ramp_dataset

pytestmark = pytest.mark.usefixtures("one_thread")
#: A 16-feature, one-block encoder (conftest.SMALL_ENCODER): fits in a fraction of a second.
TINY = SMALL_ENCODER


def small(verbose, head=None, epochs=2):
    """A tiny pretrainer (``epochs`` epochs of batch 16) and ``head`` (None: the probe),
    every one of them that has a ``verbose`` at ``verbose``, at 40 Hz."""
    pretrainer = PARSPretrainer(**TINY, n_patches=6, max_epochs=epochs, batch_size=16)
    clf = PARSClassifier(pretrainer, head, sfreq=40, random_state=0)
    clf.set_params(verbose=verbose, encoder__verbose=verbose)
    if "head__verbose" in clf.get_params():  # the probe has no verbose: it prints nothing
        clf.set_params(head__verbose=verbose)
    return clf


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
    head = PARSFineTuner(strategy="frozen", max_epochs=4, batch_size=16)
    small(1, head, epochs=3).fit(X, y)
    out, err = capfd.readouterr()
    lines = [line for line in err.replace("\r", "\n").split("\n") if line.startswith("pre")]
    bars = [line for line in lines if line.startswith("pretraining PARS: 100%")]
    if bars:  # a terminal: tqdm's bar, elapsed<left
        assert "3/3" in bars[-1] and "train_skill=" in bars[-1] and "<00:00" in bars[-1]
    else:  # captured, as here: one plain line per reported epoch (the first, then every
        # 200 steps, and the last), the time left but at the last
        epochs = [line for line in lines if line.startswith("pretraining PARS: epoch ")]
        assert [line.split()[3] for line in epochs] == ["1/3", "3/3"]
        assert all("skill" in line for line in epochs)
        assert all("s left)" in line for line in epochs[:-1])
    assert "Pretraining PARS with a 16 x 1 encoder" in err and "; 3 epochs x " in err
    assert "Fitting the head, PARSFineTuner, over the encoder pretrained in this fit" in err
    assert (
        "Fine-tuning (strategy='frozen') from the PatchEncoder of its 'encoder' parameter "
        "(16 features" in err
    )
    assert "for 4 epochs on cpu" in err
    assert "epoch    train_skill" not in err  # pretraining's epoch table waits for verbose=2
    assert "train_loss" in out  # the neural head's is skorch's, at its verbose=1
    assert logging.getLogger("braindecode_pars").handlers == handlers  # taken back
    small(1, PARSProbe(), epochs=1).fit(X, y)
    err = capfd.readouterr().err  # the default head, the probe, says what it fits
    assert (
        "Fitting the head, PARSProbe, over the encoder pretrained in this fit, on 48 "
        "windows of 3 channels x 10 s." in err
    )


def test_verbose_0_is_silent_and_verbose_2_adds_the_epoch_tables(capfd, monkeypatch):
    _no_logging_setup(monkeypatch)
    X, y = _windows()
    small(0, PARSFineTuner(strategy="frozen", max_epochs=1)).fit(X, y)
    out = capfd.readouterr()
    assert out.err == "" and out.out == ""
    small(2).fit(X, y)
    assert "train_skill" in capfd.readouterr().err  # the pretraining epoch table


def test_a_run_that_learned_nothing_warns_what_it_means_and_what_to_try():
    view = SingleChannelWindows(ramp_dataset(32).tensors[0].numpy())
    view.sfreq = 10.0
    kwargs = dict(max_epochs=2, batch_size=16, progress_bar=False, n_patches=12,
                  pos_mask_ratio=0.5, encoder_kwargs=TINY)  # fmt: skip
    # weights that never move score the skill of their initial draw, which over torch
    # seeds 0-9 ranged from -1.13 to +0.03: the warning, not learning, is tested here, so
    # this draw is seed 0's (-0.39), whatever PARS_LEARNING_SEED
    torch.manual_seed(0)
    with pytest.warns(
        UserWarning, match=r"pretext skill of 0.02 or less .*learned \(almost\) nothing"
    ):
        run_pretraining(view, lr=1e-12, **kwargs)  # a learning rate that cannot move the weights
    torch.manual_seed(SEED)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a run that learns does not warn
        net = run_pretraining(view, lr=3e-3, **dict(kwargs, max_epochs=30))
    learned(net.history[-1, "train_skill"], above=0.3, what="training skill, a run that learns")
