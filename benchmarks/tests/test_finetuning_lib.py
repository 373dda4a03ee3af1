"""``benchmarks/lib/finetuning.py``: a recipe's ``warmup`` is the fine-tuner's own
``lr_schedule``, never a scheduler callback beside it (which the fine-tuner refuses)."""

import numpy as np
import pytest

from benchmarks.lib.finetuning import recipe_fine_tuner
from benchmarks.tests.conftest import TINY
from braindecode_pars.models.encoder import PatchEncoder
from braindecode_pars.pretraining.schedule import WarmupCosineLR


@pytest.mark.parametrize(
    "recipe, schedule",
    [
        pytest.param(dict(max_epochs=2, warmup=True), "warmup-cosine", id="warmup"),
        pytest.param(dict(max_epochs=2, warmup=False), "constant", id="no-warmup"),
        pytest.param(dict(max_epochs=2), "constant", id="left-out"),
        pytest.param(dict(max_epochs=2, lr_schedule="warmup-cosine"), "warmup-cosine",
                     id="set-by-the-recipe"),
    ],
)  # fmt: skip
def test_a_recipes_warmup_is_the_fine_tuners_schedule_and_no_callback(one_thread, recipe, schedule):
    clf = recipe_fine_tuner(PatchEncoder(sfreq=100.0, **TINY), recipe, 0, 100.0)
    assert clf.lr_schedule == schedule and not clf.callbacks
    clf.check_params()  # not refused
    rng = np.random.default_rng(0)
    y = np.tile([0, 1], 6)
    X = rng.standard_normal((12, 2, 200)).astype(np.float32)
    clf.fit(X, y)
    schedulers = [cb for _, cb in clf.callbacks_ if isinstance(cb, WarmupCosineLR)]
    assert len(schedulers) == (schedule == "warmup-cosine")  # the fine-tuner's, alone
