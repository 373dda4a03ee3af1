"""The normalisation selection's rule (``benchmarks/bench_normalization.py``) on scores
whose answer is known, and the runs it asks for."""

import pytest

from benchmarks.bench_normalization import MODES, SEEDS, STORE, choose, commands, runs


def test_an_amplitude_mode_is_chosen_only_beyond_the_larger_spread():
    window = [0.58, 0.60, 0.62]  # mean 0.60, std 0.02
    clear = {"window": window, "window+scale": [0.64, 0.65, 0.66], "fixed": [0.5, 0.6, 0.7]}
    chosen, table = choose(clear)  # +0.05 > 0.02; fixed's +0.0 does not count
    assert chosen == "window+scale"
    assert table["window"][:2] == pytest.approx((0.60, 0.02))
    within = {"window": window, "window+scale": [0.58, 0.63, 0.68], "fixed": window}
    assert choose(within)[0] == "window"  # +0.03 within its own spread of 0.05
    both = {"window": window, "window+scale": [0.64, 0.65, 0.66], "fixed": [0.69, 0.7, 0.71]}
    assert choose(both)[0] == "fixed"  # both beat it: the higher score
    short = {"window": window, "window+scale": [0.9, 0.9], "fixed": window}
    assert choose(short)[0] == "window"  # a mode without its three seeds is never chosen


def test_every_amplitude_run_reads_the_microvolt_store_with_its_mode_and_seed():
    names = runs()
    assert len(names) == len(MODES) * len(SEEDS)
    for name, (mode, seed) in names.items():
        if mode == "window":
            continue
        run, export, config = commands(name, threads=1, max_minutes=30)
        assert f"--store {STORE}" in run and "--steps 30000" in run and "--max-minutes 30" in run
        assert config == {"normalization": mode, "unit": "uV", "n_patches": 40,
                          "valid_fraction": 0.1, "seed": seed}  # fmt: skip
        assert export.endswith(f"benchmarks/encoders/normalization/{name}")
