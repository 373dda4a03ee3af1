"""The fine-tuner's pieces (``estimators/_fit_callbacks.py``, ``_finetuner_params.py``,
``_learning_rates.py``): its time estimate after the first epoch, skorch's epoch table
without colour codes in a file, the refusal of a model setting given twice and of a
learning-rate callback beside its own schedule."""

import contextlib
import io
import logging
import re

import numpy as np
import pytest
import torch
from skorch.callbacks import LRScheduler

from braindecode_pars import PARSFineTuner, PatchEncoder
from braindecode_pars._util.progress import duration
from braindecode_pars.estimators._fit_callbacks import _seconds
from braindecode_pars.pretraining.schedule import WarmupCosineLR

from ..conftest import SMALL_ENCODER

pytestmark = pytest.mark.usefixtures("one_thread")


def _fit(max_epochs=3, **options):
    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 8)  # each of the 4 groups holds both classes
    X = (rng.standard_normal((16, 2, 200)) * (1 + y[:, None, None])).astype(np.float32)
    torch.manual_seed(0)
    encoder = PatchEncoder(sfreq=100, **SMALL_ENCODER)
    clf = PARSFineTuner(
        encoder=encoder, max_epochs=max_epochs, sfreq=100, random_state=0, **options
    )
    return clf.fit(X, y, groups=np.repeat(np.arange(4), 4))


def test_the_first_epoch_gives_the_time_of_the_run(caplog):
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        clf = _fit(max_epochs=3, verbose=0)
    lines = [r.getMessage() for r in caplog.records if "first epoch" in r.getMessage()]
    assert len(lines) == 1  # once, after the first epoch
    found = re.fullmatch(r"The first epoch took (\S+) s; 3 epochs: about (.+) on cpu\.", lines[0])
    assert found, lines[0]
    first = clf.history_[0, "dur"]
    assert float(found[1]) == pytest.approx(first, abs=0.05)
    assert found[2] == duration(3 * first)


def test_durations_in_words():
    assert duration(12.9) == "13 s"
    assert duration(43 * 60 + 10) == "43 min"
    assert duration(200 * 12.9) == "43 min"  # the fine-tuner's defaults on one thread
    assert duration(5 * 3600) == "5.0 h"


def test_a_fast_first_epoch_is_not_said_to_take_zero_seconds():
    # a fast machine's 4-ms epoch once read "took 0.0 s", and the projection beside it
    # could not be checked against it
    assert [_seconds(s) for s in (0.004123, 0.04, 0.9, 12.94, 1234.0)] == [
        "0.0041", "0.04", "0.9", "12.9", "1234.0",
    ]  # fmt: skip


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("terminal", [False, True], ids=["file", "terminal"])
def test_the_epoch_table_has_colour_codes_only_on_a_terminal(tmp_path, terminal):
    path = tmp_path / "fit.log"
    with open(path, "w") as file:
        out = _Terminal() if terminal else file
        with contextlib.redirect_stdout(out):
            _fit(max_epochs=3, verbose=1, min_valid_groups=2)
        text = out.getvalue() if terminal else None
    text = path.read_text() if text is None else text
    assert "train_loss" in text and "valid_loss" in text  # the table was written
    assert len([line for line in text.splitlines() if re.match(r"\s+\d\s", line)]) == 3
    # skorch colours every new best value: epoch 1 is always the best so far
    assert ("\x1b[" in text) is terminal


# -- one spelling per setting, one learning-rate schedule -------------------------------------


@pytest.fixture
def no_reading(monkeypatch):
    """The fine-tuner's reading of the windows fails the test: a refused parameter must
    stop ``fit`` before any work starts."""
    from braindecode_pars.estimators import finetuner

    def read_input(*args, **kwargs):
        raise AssertionError("fit read the windows before refusing the parameters")

    monkeypatch.setattr(finetuner, "read_input", read_input)


def _windows():
    return np.zeros((8, 2, 200), np.float32), np.tile([0, 1], 4)


@pytest.mark.parametrize(
    "params, match",
    [
        pytest.param(
            dict(token_gate=True, module__token_gate=False),
            r"'token_gate' is given twice, as token_gate=True and module__token_gate=False",
            id="token_gate",
        ),
        pytest.param(
            dict(spatial_filters=2, module__spatial_filters=3),
            r"'spatial_filters' is given twice, as spatial_filters=2 and "
            r"module__spatial_filters=3",
            id="spatial_filters",
        ),
        pytest.param(  # the top-level default counts as given: module__ would win over it
            dict(module__band_power=None),
            r"band_power=\(8\.0, 30\.0\) and module__band_power=None",
            id="over-a-default",
        ),
        pytest.param(
            dict(pooling="mean", module__pooling="mean"),  # the same value: still twice
            r"'pooling' is given twice",
            id="same-value",
        ),
        pytest.param(
            dict(module__readout="channels", module__amplitude=True),
            r"'amplitude' and 'readout' are given twice, as amplitude=False and "
            r"module__amplitude=True, and as readout='attention' and "
            r"module__readout='channels'.*Give each once.*amplitude=True, readout='channels'",
            id="two-settings",
        ),
        pytest.param(
            dict(module__n_chans=4),
            r"module__n_chans cannot be given: fit sets the module's n_outputs",
            id="set-by-fit",
        ),
    ],
)
def test_a_model_setting_given_twice_is_refused_naming_both_before_any_work(
    no_reading, params, match
):
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = _windows()
    with pytest.raises(InvalidParameterError, match=match):
        PARSFineTuner(sfreq=100, **params).fit(X, y)


def test_a_model_setting_set_twice_after_fit_is_refused_when_the_module_is_rebuilt():
    clf = _fit(max_epochs=1, spatial_filters=2, band_power=None, token_gate=True)
    assert clf.module_.spatial_filters == 2 and clf.module_.gate is not None
    # skorch rebuilds the module of a fitted net when a module__ parameter is set
    with pytest.raises(ValueError, match=r"given twice, as token_gate=True and module__token"):
        clf.set_params(module__token_gate=False)
    other = _fit(max_epochs=1, module__n_heads=1, token_gate=True)  # not a setting of its own
    assert other.module_.spatial_attn.num_heads == 1 and other.module_.n_heads == 1


@pytest.mark.parametrize(
    "callback, name",
    [
        pytest.param(("warmup_cosine", WarmupCosineLR()), "warmup_cosine", id="named"),
        pytest.param(WarmupCosineLR, "WarmupCosineLR", id="a-class"),
        pytest.param(LRScheduler("CosineAnnealingLR", T_max=5), "LRScheduler", id="skorch"),
    ],
)
def test_a_learning_rate_callback_beside_the_fine_tuners_schedule_is_refused(
    no_reading, callback, name
):
    X, y = _windows()
    with pytest.raises(ValueError) as err:
        PARSFineTuner(sfreq=100, callbacks=[callback]).fit(X, y)
    message = str(err.value)
    assert f"learning-rate scheduler ('{name}')" in message
    assert "lr_schedule='warmup-cosine'" in message and "lr_schedule='constant'" in message
    assert isinstance(err.value, TypeError)  # one parameter-error class


def test_a_learning_rate_callback_with_a_constant_schedule_alone_sets_the_rate():
    scheduler = LRScheduler("StepLR", step_size=1, gamma=0.5)
    clf = _fit(max_epochs=3, lr_schedule="constant", callbacks=[("halve", scheduler)])
    rates = [group["lr"] for group in clf.optimizer_.param_groups]
    assert rates == [pytest.approx(1e-3 * 0.5**3)]  # halved after each of 3 epochs
