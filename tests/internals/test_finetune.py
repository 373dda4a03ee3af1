"""What the fine-tuner writes while it trains (training/_finetune.py): its time estimate
after the first epoch, and skorch's epoch table without colour codes in a file."""

import contextlib
import io
import logging
import re

import numpy as np
import pytest
import torch

from braindecode_pars import PARSFineTuner, PatchEncoder
from braindecode_pars._util.progress import duration
from braindecode_pars.estimators._finetune import _seconds

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
