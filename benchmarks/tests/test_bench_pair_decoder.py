"""The pair-decoder benchmark's step breakdown and A/B mode: another revision's decoder is
loaded beside this one and both are timed in the same rounds."""

import argparse

import pytest
import torch

from benchmarks import bench_pair_decoder

from .conftest import assert_refused


@pytest.fixture(scope="module")
def bench():
    return bench_pair_decoder


def test_the_step_breakdown_times_every_part_of_a_pars_step(bench):
    tiny = dict(emb_dim=16, depth=1, n_heads=2, ff_dim=16)
    parts = bench.step_breakdown(tiny, batch_size=4, repeats=2, warmup=1)
    timed = ["sampling and masking", "encoder forward", "decoder forward", "targets and loss"]
    assert list(parts) == [*timed, "rest of the forward", "encoder backward",
                           "decoder backward", "AdamW step"]  # fmt: skip
    assert all(parts[name] > 0 for name in timed + ["decoder backward", "AdamW step"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--mode", "ab", "--against", "HEAD", "--runs", "0"], "--runs must be at least 1, got 0"),
        (["--mode", "ab"], "--mode ab needs --against"),
        (["--mode", "ab", "--against", "HEAD", "--rounds", "0"], "--rounds must be at least 1"),
    ],
)
def test_bad_options_are_refused_before_any_work(bench, capsys, argv, message):
    assert_refused(bench.main, argv, message, capsys)


def test_another_revision_is_loaded_as_its_own_module(bench):
    import braindecode_pars.models.pair.decoders as current

    old = bench.load_revision("HEAD")
    assert old is not current and old.__name__.startswith("braindecode_pars.models_")
    assert old.__name__.endswith(".pair_decoders") and bench.load_revision("HEAD") is old
    assert old.CrossAttentionPairDecoder is not current.CrossAttentionPairDecoder
    # its functions read that module's globals, not this revision's
    assert old.CrossAttentionPairDecoder.forward.__globals__ is vars(old)


def test_both_revisions_decoders_compute_their_own_pairs(bench):
    """Loading another revision registers its operators under their own names: this
    revision's decoder and the other's, on the same weights, both equal the direct
    (materialising) computation, in float64."""
    import braindecode_pars.models.pair.decoders as current

    torch.manual_seed(0)
    decoder = current.CrossAttentionPairDecoder(emb_dim=16, n_heads=4).double()
    y = torch.randn(3, 10, 16, dtype=torch.float64)
    idx = torch.stack([torch.randperm(10)[:8] for _ in range(3)])
    expected = decoder.forward_naive(y, idx)
    old = bench.load_revision("HEAD")
    assert torch.allclose(decoder(y, idx), expected, atol=1e-9)
    decoder.__class__ = old.CrossAttentionPairDecoder
    assert torch.allclose(decoder(y, idx), expected, atol=1e-9)


def test_ab_rounds_run_each_revisions_decoder_in_turn_and_restore_this_one(bench, monkeypatch):
    import braindecode_pars.models.pair.decoders as current

    old = bench.load_revision("HEAD")
    ran = []  # whose decoder class each PARS step ran with
    made = []
    make_steps = bench.make_steps

    def recording_make_steps(*args):
        pars_step, encoder_step = make_steps(*args)

        def recorded():
            ran.append(type(pars_step.model.decoder).__module__)
            pars_step()

        recorded.model = pars_step.model
        made.append((recorded, encoder_step))
        return made[-1]

    monkeypatch.setattr(bench, "make_steps", recording_make_steps)
    times = bench.ab_rounds(old.CrossAttentionPairDecoder, rounds=2, warmup=1)
    assert [len(t) for t in times] == [2, 2, 2] and all(x > 0 for t in times for x in t)
    this, other = current.__name__, old.__name__
    # warm-up: other, this; round 0: this, other; round 1: other, this
    assert ran == [other, this, this, other, other, this]
    assert type(made[0][0].model.decoder) is current.CrossAttentionPairDecoder
    # (other, this, encoder alone) per round: each ratio is the median over the rounds
    assert bench.ab_summary(([2.0, 4.0], [3.0, 3.0], [1.0, 2.0])) == (2.0, 2.25, 1.125)


def test_the_ab_report_gives_each_run_and_the_medians(bench):
    results = [(1.31, 1.29, 0.99), (1.33, 1.30, 0.98), (1.30, 1.31, 1.01)]
    args = argparse.Namespace(against="HEAD~1", runs=3, rounds=100, out="x.md")
    text = "\n".join(bench.ab_report(results, args, "This revision: a; against: b."))
    assert "| 1 | 1.310 | 1.290 | 0.990 |" in text
    assert "| median | 1.310 | 1.300 | 0.990 |" in text
    assert "| 2 of 3 |" in text
    assert "--mode ab --against HEAD~1 --runs 3 --rounds 100 --out x.md" in text


def test_an_unknown_revision_is_refused_naming_it(bench):
    with pytest.raises(SystemExit, match="'--against no-such-revision'"):
        bench.load_revision("no-such-revision")
