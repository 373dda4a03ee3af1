"""PretrainConfig: the one list of a run's pretext and optimisation settings, its paper
preset and its planner, as the estimator and the command line read them."""

import numpy as np
import pytest

from braindecode_pars.pretraining import SingleChannelWindows
from braindecode_pars.pretraining.config import PretrainConfig


def test_the_planner_counts_steps_over_the_windows_that_train():
    view = SingleChannelWindows(np.zeros((50, 2, 300), np.float32))
    # 50 windows, a tenth held out (rounded up: 5): 45 train, 2 full steps of 16 an epoch
    # (the short last batch is left out); 100 steps take 50 epochs
    config = PretrainConfig(steps=100, batch_size=16, valid_fraction=0.1)
    assert config.max_epochs_for(view) == 50
    # 3 steps of 50: 34 epochs (102 steps, at most an epoch more)
    assert config.replace(valid_fraction=None).max_epochs_for(view) == 34
    assert config.max_epochs_for(view, world_size=2) == 100  # 23 windows each: 1 step
    assert config.replace(max_epochs=7).max_epochs_for(view) == 7  # given: kept


def test_each_method_gets_its_own_pretext_settings():
    config = PretrainConfig(n_patches=12, pos_mask_ratio=0.5, mask_ratio=0.6, decoder_heads=4)
    assert config.pretext_kwargs() == dict(
        n_patches=12, pos_mask_ratio=0.5, decoder_heads=4, sampling="random"
    )
    assert config.replace(method="mae").pretext_kwargs() == dict(mask_ratio=0.6)
    assert config.replace(method="mp3").pretext_kwargs() == dict(mask_ratio=0.6)
    assert config.replace(method="droppos").pretext_kwargs() == dict(
        mask_ratio=0.6, pos_mask_ratio=0.5
    )


def test_the_run_gets_the_optimisation_and_the_pretext_settings_from_one_place():
    config = PretrainConfig(method="mae", mask_ratio=0.6, batch_size=16, valid_fraction=0.0)
    assert config.run_kwargs(7) == dict(
        max_epochs=7, batch_size=16, lr=1e-3, weight_decay=1e-4, valid_fraction=None, mask_ratio=0.6
    )


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(method="simclr"), r"'method' parameter.*'pars'.*got 'simclr'"),
        (dict(batch_size=0), "batch_size"),
        (dict(lr=0.0), "lr"),
        (dict(valid_fraction=1.0), "valid_fraction"),
        (dict(sampling="grid"), r"'sampling' parameter.*got 'grid'"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(change, message):
    with pytest.raises(ValueError, match=message):
        PretrainConfig(**change)
