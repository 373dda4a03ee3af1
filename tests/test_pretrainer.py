"""PARSPretrainer's precision and compilation, the batches its steps train on, and the
patches PARS draws per crop."""

import logging
import re
import warnings

import numpy as np
import pytest
import torch

from braindecode_pars import PARSPretrainer

from ._helpers import naive_overlap

pytestmark = pytest.mark.usefixtures("one_thread")


def _windows(n=24, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 2, 600)).astype(np.float32)


SMALL = dict(
    emb_dim=16, depth=1, n_heads=2, ff_dim=16, n_patches=6, batch_size=8, max_epochs=2,
    window_seconds=5.0, sfreq=100.0, valid_fraction=None, random_state=0, verbose=0,
)  # fmt: skip


def _first_losses(**settings):
    stage = PARSPretrainer(**SMALL, **settings).fit(_windows())
    return np.array(stage.history_[:, "train_loss"])


def test_bf16_and_compile_give_the_float32_losses_on_the_same_draws(monkeypatch):
    compiled = []
    compile_ = torch.compile

    def aot_eager(module, **kwargs):  # the test's backend: no C++ build, same graph
        compiled.append(type(module).__name__)
        return compile_(module, backend="aot_eager")

    monkeypatch.setattr(torch, "compile", aot_eager)
    reference = _first_losses(amp=False, compile=False)
    assert compiled == []
    bf16 = _first_losses(amp=True, compile=False)
    np.testing.assert_allclose(bf16, reference, rtol=0.02)
    assert not np.array_equal(bf16, reference)  # bf16 really ran
    both = _first_losses(amp=True, compile=True)
    assert "PARS" in compiled
    np.testing.assert_allclose(both, reference, rtol=0.02)


@pytest.mark.parametrize("name", ["amp", "compile"])
def test_a_bad_precision_setting_is_refused_naming_it(name):
    with pytest.raises(ValueError, match=f"'{name}' parameter.*'auto'.*got 'yes'"):
        PARSPretrainer(**SMALL, **{name: "yes"}).fit(_windows())


def test_a_batch_larger_than_the_windows_trains_full_batches_and_says_so(caplog):
    with caplog.at_level(logging.INFO, logger="braindecode_pars"):
        stage = PARSPretrainer(**dict(SMALL, batch_size=64, max_epochs=2, verbose=1))
        stage.fit(_windows(20))
    sizes = [b["train_batch_size"] for row in stage.history_ for b in row["batches"]]
    assert sizes == [64, 64]
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "64 of the 20 training windows" in said, said


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@needs_cuda
def test_on_a_gpu_the_estimator_runs_bf16_compiled_by_default_within_float32s_losses():
    settings = dict(SMALL, device="cuda", max_epochs=3)
    default = PARSPretrainer(**settings).fit(_windows())  # amp and compile: "auto"
    plain = PARSPretrainer(**settings, amp=False, compile=False).fit(_windows())
    # On an H100 the two runs' per-epoch losses differ by 3-9 % (bf16 tensor cores move
    # a tiny model's trajectory within the first epoch), so the check is that both learn
    # and end together; the CPU test above pins bf16 + compile to float32 on one draw.
    losses = np.array(default.history_[:, "train_loss"])
    plain_losses = np.array(plain.history_[:, "train_loss"])
    assert losses[-1] < losses[0] and plain_losses[-1] < plain_losses[0]
    np.testing.assert_allclose(losses[-1], plain_losses[-1], rtol=0.15)
    assert next(default.encoder_.parameters()).device.type == "cpu"  # handed back


def test_the_batches_and_the_pair_operator_are_parameters_that_reach_the_run(monkeypatch):
    """``batches`` and ``decoder_kernel``: scikit-learn parameters (``get_params``,
    ``clone``), checked before any window is read, and taken by the fit: batches read
    ahead hand every training step its batch (and none the host's), the operator named
    is the decoder's."""
    from sklearn.base import clone

    from braindecode_pars.pretraining import PretrainNet
    from braindecode_pars.pretraining._prefetch import _Prefetched

    stage = PARSPretrainer(**SMALL, batches="read-ahead", decoder_kernel="tables")
    assert stage.get_params()["batches"] == "read-ahead"
    assert stage.get_params()["decoder_kernel"] == "tables"
    copy = clone(stage)
    assert (copy.batches, copy.decoder_kernel) == ("read-ahead", "tables")
    handed, kernels = [], []
    iterate, initialize = _Prefetched.__iter__, PretrainNet.initialize_module

    def counting(self):
        for batch in iterate(self):
            handed.append(batch[0].shape)
            yield batch

    def recording(self):
        initialize(self)
        kernels.append(self.pretext_.decoder.kernel)
        return self

    monkeypatch.setattr(_Prefetched, "__iter__", counting)
    monkeypatch.setattr(PretrainNet, "initialize_module", recording)
    ahead = np.array(copy.fit(_windows()).history_[:, "train_loss"])
    assert len(handed) == 2 * (24 // 8) and set(handed) == {(8, 1, 500)}
    assert kernels == ["tables"]
    host = _first_losses(batches="host", decoder_kernel="fused")  # the tables on a CPU
    assert len(handed) == 6 and kernels[-1] == "fused"
    assert np.isfinite(ahead).all() and np.isfinite(host).all()
    for name, value, allowed in (
        ("batches", "gpu", r"'auto', 'host', 'read-ahead' and 'device'"),
        ("decoder_kernel", "triton", r"'auto', 'tables' and 'fused'"),
    ):
        bad = PARSPretrainer(**SMALL, **{name: value})
        with pytest.raises(ValueError, match=rf"'{name}' parameter. Allowed values are {allowed}"):
            bad.fit(np.zeros((2, 2, 3)))  # refused before the windows are read


def test_run_pretraining_takes_the_batches_and_the_operator_and_refuses_others():
    from braindecode_pars.pretraining import SingleChannelWindows, run_pretraining

    view = SingleChannelWindows(_windows(), n_times=500)
    view.sfreq = 100.0
    small = dict(encoder_kwargs=dict(emb_dim=16, depth=1, n_heads=2, ff_dim=16),
                 max_epochs=1, batch_size=8, progress_bar=False)  # fmt: skip
    net = run_pretraining(view, batches="read-ahead", decoder_kernel="fused", n_patches=6,
                          **small)  # fmt: skip
    assert net.batches_ == "read-ahead" and net.pretext_.decoder.kernel == "fused"
    net = run_pretraining(view, method="mae", batches="host", decoder_kernel="tables", **small)
    assert net.batches_ == "host"  # MAE has no pair operator: the kernel is ignored
    with pytest.raises(ValueError, match=r"'batches' parameter.*but got 'gpu'"):
        run_pretraining(view, batches="gpu", **small)
    with pytest.raises(ValueError, match=r"'decoder_kernel' parameter.*but got 'triton'"):
        run_pretraining(view, decoder_kernel="triton", **small)


# -- n_patches: scaled with the crop, and the overlap of short or dense draws -------------
def _overlap_warnings(record):
    return [str(w.message) for w in record if "PARS draws" in str(w.message)]


def _fit_recording_runs(monkeypatch, X, **settings):
    """Fit, recording the patches of each run's model and of its record (what a resumed
    run checks and the model card states); the warnings raised."""
    from braindecode_pars.pretraining import PretrainNet

    runs, initialize = [], PretrainNet.initialize_module

    def recording(self):
        initialize(self)
        runs.append((getattr(self.pretext_, "n_patches", None), self.run_config().get("n_patches")))
        return self

    monkeypatch.setattr(PretrainNet, "initialize_module", recording)
    stage = PARSPretrainer(**{**SMALL, "max_epochs": 1, "window_seconds": None,
                              "n_patches": None, **settings})  # fmt: skip
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        stage.fit(X)
    return stage, runs, _overlap_warnings(record)


def test_n_patches_none_scales_with_4_s_windows_and_warns_with_the_overlap_of_its_draw(
    monkeypatch,
):
    from braindecode_pars import PARS
    from braindecode_pars.pretraining.config import DEFAULT_CROP_SECONDS, PATCHES_PER_SECOND

    X = _windows(16)[:, :, :400]  # 4-s windows at 100 Hz: 4-s crops
    stage, runs, said = _fit_recording_runs(monkeypatch, X)
    expected = round(PATCHES_PER_SECOND * 4)
    assert stage.n_crop_ == 400 and stage.n_patches_ == expected
    assert runs == [(expected, expected)]
    assert len(said) == 1, said
    (text,) = said
    assert f"{expected} patches of 1 s (n_patches=None) from each 4-s pretraining crop" in text
    assert f"chosen on {DEFAULT_CROP_SECONDS:g}-s crops" in text
    assert "window_seconds" in text and "continuous recordings" in text
    found = re.search(
        r"\((\d+) draws, seed 0\), ([\d.]+) % of the pairs of position-masked patches share "
        r"samples and the patches of ([\d.]+) % of the crops chain",
        text,
    )
    assert found, text
    n_draws, shared, chained = int(found[1]), float(found[2]), float(found[3])
    # the same seeded draw, counted by hand
    model = PARS(n_times=400, sfreq=100, n_patches=expected, emb_dim=8, depth=1, n_heads=1,
                 ff_dim=8)  # fmt: skip
    draws = model.draw(n_draws, "cpu", torch.Generator().manual_seed(0))
    naive = [100 * v for v in naive_overlap(draws["starts"], 100, draws["masked_idx"])]
    assert (shared, chained) == pytest.approx(naive, abs=0.051)
    assert shared > 40 and chained > 90  # 4 patches per second in 4 s: most crops chain


def test_n_patches_none_gives_the_default_in_10_s_crops_and_no_warning(monkeypatch):
    from braindecode_pars.pretraining.config import DEFAULT_CROP_SECONDS, PATCHES_PER_SECOND

    X = np.random.default_rng(0).standard_normal((8, 1, 1200)).astype(np.float32)
    stage, runs, said = _fit_recording_runs(monkeypatch, X)
    expected = round(PATCHES_PER_SECOND * DEFAULT_CROP_SECONDS)
    assert expected == 40 and stage.n_crop_ == 1000 and stage.n_patches_ == expected
    assert runs == [(expected, expected)] and said == []


def test_an_explicit_n_patches_is_taken_as_given_and_warned_about_only_when_denser(
    monkeypatch,
):
    X = _windows(16)[:, :, :400]
    stage, runs, said = _fit_recording_runs(monkeypatch, X, n_patches=6)
    assert stage.n_patches_ == 6 and runs == [(6, 6)] and said == []  # 1.5 per second
    stage, runs, said = _fit_recording_runs(monkeypatch, X, n_patches=40)
    assert stage.n_patches_ == 40 and runs[-1] == (40, 40)
    assert len(said) == 1 and "40 patches of 1 s (given)" in said[0]
    assert "10.00 per second" in said[0], said[0]
    stage, runs, said = _fit_recording_runs(monkeypatch, X, method="mae")
    assert stage.n_patches_ is None and runs[-1] == (None, None) and said == []  # PARS's


def test_the_paper_preset_scales_n_patches_at_the_papers_40_per_30_s():
    from braindecode_pars.pretraining.config import PAPER

    paper = PARSPretrainer(preset="paper")
    assert paper.pretrain_config().n_patches == PAPER.n_patches == 40  # 30-s crops
    assert paper.pretrain_config(crop_seconds=30.0).n_patches == 40
    assert paper.pretrain_config(crop_seconds=15.0).n_patches == 20
    assert PARSPretrainer(preset="paper", n_patches=12).pretrain_config().n_patches == 12


@pytest.mark.parametrize("value, settings, allowed", [
    (1, {}, r"None \(scaled with the pretraining crop\) or an int >= 2 "),
    (2, {"pos_mask_ratio": 0.5}, r"an int >= 3 \(PARS needs 2 position-masked .*=0.5\)"),
    (0, {"method": "mae"}, r"an int >= 1,"),
    (12.0, {}, r"an int >= 2"),
    ("40", {}, r"an int >= 2"),
])  # fmt: skip
def test_an_n_patches_pars_cannot_take_is_refused_before_the_windows_are_read(
    value, settings, allowed
):
    bad = PARSPretrainer(**dict(SMALL, n_patches=value, **settings))
    with pytest.raises(ValueError, match=rf"'n_patches' parameter. Allowed values are .*{allowed}"):
        bad.fit(np.zeros((2, 2, 3)))  # refused before the windows are read
    with pytest.raises(ValueError, match=rf"but got {re.escape(repr(value))} instead"):
        bad.check_params()
