"""The patch-density selection's rule (``benchmarks/bench_patch_density.py``) on scores
whose answer is known, the runs it asks for and the overlap statistics it reports."""

import numpy as np
import pytest

from benchmarks import bench_patch_density as bd
from benchmarks.lib.selection import best_margin, choose


def test_a_configuration_is_chosen_over_todays_only_beyond_the_larger_spread():
    a = [0.58, 0.60, 0.62]  # mean 0.60, std 0.02
    clear = {"a": a, "b": [0.64, 0.65, 0.66], "c": [0.5, 0.6, 0.7], "d": a}
    assert choose(clear, "a", 3)[0] == "b"
    within = {"a": a, "b": [0.58, 0.63, 0.68], "c": a, "d": a}
    assert choose(within, "a", 3)[0] == "a"  # +0.03 within its own spread of 0.05
    two = {"a": a, "b": [0.64, 0.65, 0.66], "c": a, "d": [0.69, 0.70, 0.71]}
    assert choose(two, "a", 3)[0] == "d"  # both beat it: the higher score
    short = {"a": a, "b": [0.9], "c": a, "d": a}
    assert choose(short, "a", 3)[0] == "a"  # one seed of three is never chosen


def test_every_run_has_its_crop_store_density_and_seed_and_a_reuses_the_history():
    names = bd.runs()
    assert len(names) == len(bd.CONFIGS) * len(bd.SEEDS)
    for name, (config, seed) in names.items():
        settings = bd.CONFIGS[config]
        if config == "a":
            assert str(bd.encoder_path(name)).endswith(bd.A_ENCODERS[seed])
            continue
        run, export, pretext = bd.commands(name)
        assert f"--store {bd.STORES[settings['crop']]}" in run and "--steps 30000" in run
        assert "--size small" in run and "--threads 1" in run
        assert pretext == {"n_patches": settings["n_patches"], "sampling": settings["sampling"],
                           "valid_fraction": 0.1, "seed": seed}  # fmt: skip
        assert export.endswith(f"benchmarks/encoders/density/{name}")
    assert "--window-seconds 30" in bd.STORE_COMMANDS[30]


@pytest.mark.parametrize("config, density, shared, chained", [
    ("a", 4.0, 0.209, 0.66), ("b", 1.3, 0.209, 0.006), ("c", 1.0, 0.0, 0.0),
    ("d", 1.33, 0.068, 0.0),
])  # fmt: skip
def test_the_overlap_statistics_of_each_configuration(config, density, shared, chained):
    stats = bd.overlap(config, n_draws=2048)
    assert stats["patch_seconds_per_second"] == pytest.approx(density, abs=0.01)
    assert stats["shared_pairs"] == pytest.approx(shared, abs=0.01)
    assert stats["chained"] == pytest.approx(chained, abs=0.03)


def test_a_mode_missing_seeds_is_settled_only_when_no_missing_score_could_win():
    a = [0.58, 0.60, 0.62]  # mean 0.60, std 0.02
    # every seed run: the margin is the rule's own, mean - 0.60 - the larger spread
    assert best_margin([0.64, 0.65, 0.66], a, 3) == pytest.approx(0.65 - 0.60 - 0.02)

    def naive(scores, step=0.01):  # every pair of missing scores on a coarse grid
        grid = [i * step for i in range(round(1 / step) + 1)]
        return max(
            np.mean([*scores, x, y]) - 0.60 - max(np.std([*scores, x, y], ddof=1), 0.02)
            for x in grid
            for y in grid
        )

    for scores in ([0.528], [0.70], [0.30]):
        assert best_margin(scores, a, 3) == pytest.approx(naive(scores), abs=0.01)
    assert best_margin([0.528], a, 3) < 0  # no two scores can lift 0.528 past the bar
    assert best_margin([0.70], a, 3) > 0  # two good seeds still could
    assert best_margin([0.46, 0.48], a, 3) < 0
