"""The decoder A/B benchmark: another revision's decoder loaded beside this one, both
timed in the same rounds, the report's medians and counts."""

import argparse

import pytest

from .conftest import import_benchmark


@pytest.fixture(scope="module")
def bench():
    return import_benchmark("bench_pair_decoder_ab")


def test_another_revision_is_loaded_as_its_own_module(bench):
    import braindecode_pars.models.pair_decoders as current

    old = bench.load_revision("HEAD")
    assert old is not current and old.__name__ == "braindecode_pars.models.pair_decoders_against"
    assert old._FactorisedPairAttention is not current._FactorisedPairAttention
    assert old.CrossAttentionPairDecoder is not current.CrossAttentionPairDecoder


def test_rounds_run_each_revisions_code_in_turn_and_restore_this_one(bench, monkeypatch):
    import braindecode_pars.models.pair_decoders as current

    old = bench.load_revision("HEAD")
    ran = []  # whose factorised attention each PARS step ran
    for module in (old, current):
        function = module._FactorisedPairAttention.apply

        def apply(*args, name=module.__name__, function=function):
            ran.append(name)
            return function(*args)

        monkeypatch.setattr(module._FactorisedPairAttention, "apply", apply)
    made = []
    make_steps = bench.make_steps

    def recording_make_steps(*args):
        made.append(make_steps(*args))
        return made[-1]

    monkeypatch.setattr(bench, "make_steps", recording_make_steps)
    times = bench.ab_rounds(old.CrossAttentionPairDecoder, rounds=2, warmup=1)
    assert [len(t) for t in times] == [2, 2, 2] and all(x > 0 for t in times for x in t)
    this, other = current.__name__, old.__name__
    # warm-up: other, this; round 0: this, other; round 1: other, this
    assert ran == [other, this, this, other, other, this]
    assert type(made[0][0].model.decoder) is current.CrossAttentionPairDecoder
    old_ratio, new_ratio, rel = bench.summary(times)
    assert old_ratio > 1.0 and new_ratio > 1.0  # both add a decoder to the encoder's step


def test_the_report_gives_each_run_and_the_medians(bench):
    results = [(1.31, 1.29, 0.99), (1.33, 1.30, 0.98), (1.30, 1.31, 1.01)]
    args = argparse.Namespace(against="HEAD~1", runs=3, rounds=100, out="x.md")
    text = "\n".join(bench.report(results, args, "This revision: a; against: b."))
    assert "| 1 | 1.310 | 1.290 | 0.990 |" in text
    assert "| median | 1.310 | 1.300 | 0.990 |" in text
    assert "| 2 of 3 |" in text
    assert "--against HEAD~1 --runs 3 --rounds 100 --out x.md" in text


def test_an_unknown_revision_is_refused_naming_it(bench):
    with pytest.raises(SystemExit, match="'--against no-such-revision'"):
        bench.load_revision("no-such-revision")
