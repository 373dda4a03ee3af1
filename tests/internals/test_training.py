import io
import json
import logging
import math

import numpy as np
import pytest
import torch
from skorch.callbacks import Callback

from braindecode_pars import PARS, PatchEncoder
from braindecode_pars.hub.folders import load_encoder, run_status, save_encoder
from braindecode_pars.pretraining import run_pretraining
from braindecode_pars.pretraining._views import SingleChannelWindows
from braindecode_pars.pretraining.checkpoints import StateCheckpoint
from braindecode_pars.pretraining.net import PretrainNet
from braindecode_pars.pretraining.resume import RunMismatchError
from braindecode_pars.pretraining.schedule import warmup_cosine_factor

from .._learning import SEED, learned
from ..conftest import TINY, InterruptAt
from ..ramp_fixtures import ramp_dataset, ramp_pars


def _pars():
    return ramp_pars(**TINY)


def test_warmup_then_cosine_matches_the_paper_schedule():
    # 1000 epochs: 10 % of the rate at epoch 0, the full rate at epoch 100, cosine to 0
    assert warmup_cosine_factor(0.0) == pytest.approx(0.1)
    assert warmup_cosine_factor(0.05) == pytest.approx(0.55)
    assert warmup_cosine_factor(0.1) == pytest.approx(1.0)
    assert warmup_cosine_factor(0.55) == pytest.approx(0.5)
    assert warmup_cosine_factor(1.0) == pytest.approx(0.0, abs=1e-12)
    mid = 0.1 + 0.9 * 0.25
    assert warmup_cosine_factor(mid) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.25)))


def test_pretraining_through_skorch_lowers_the_loss_and_follows_the_schedule():
    net = PretrainNet(_pars(), max_epochs=30, batch_size=16, lr=3e-3, progress_bar=False)
    net.fit(ramp_dataset())
    losses = net.history[:, "train_loss"]
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:3]) / 3
    lrs = net.history[:, "lr"]
    assert lrs[0] == pytest.approx(3e-4)  # 10 % of the maximum at the start
    assert max(lrs) <= 3e-3 and lrs[-1] < 0.1 * 3e-3
    # stepped every batch: 4 batches an epoch, 120 in all, on the paper's curve
    batch_lrs = [b["event_lr"] for row in net.history for b in row["batches"] if "event_lr" in b]
    expected = [3e-3 * warmup_cosine_factor(s / 120) for s in range(120)]
    assert batch_lrs == pytest.approx(expected)


def test_an_interrupted_run_resumes_its_loss_curve_from_the_checkpoint(tmp_path):
    data = ramp_dataset()
    torch.manual_seed(1)
    full = PretrainNet(_pars(), max_epochs=8, batch_size=16, lr=3e-3, progress_bar=False)
    full.fit(data)

    torch.manual_seed(1)
    first = PretrainNet(
        _pars(),
        max_epochs=8,
        batch_size=16,
        lr=3e-3,
        progress_bar=False,
        checkpoint_dir=tmp_path,
        callbacks=[("stop", InterruptAt(5))],
    )
    with pytest.raises(KeyboardInterrupt):  # a Ctrl-C stops fit; what was saved stays
        first.fit(data)
    assert len(first.history) == 5
    state = StateCheckpoint.current(tmp_path)
    saved = json.loads((state / "history.json").read_text())
    assert len(saved) == 5
    assert {"encoder_last.pt", "encoder_best.pt", "config.json", "state.json"} <= {
        p.name for p in tmp_path.iterdir()
    }
    assert {"params.pt", "optimizer.pt", "history.json"} <= {p.name for p in state.iterdir()}
    assert len(list(tmp_path.glob("state-*"))) == 1  # older states are removed
    assert not list(tmp_path.glob("*.tmp"))  # every file written whole

    resumed = PretrainNet(
        _pars(), max_epochs=8, batch_size=16, lr=3e-3, progress_bar=False, checkpoint_dir=tmp_path
    )
    resumed.fit(data)
    assert len(resumed.history) == 8  # only the three missing epochs ran
    assert resumed.history[:5, "train_loss"] == [row["train_loss"] for row in saved]
    # the learning rate continues the same curve as an uninterrupted run
    assert resumed.history[:, "lr"] == pytest.approx(full.history[:, "lr"])
    # and the loss goes on from where it stopped rather than starting over
    assert resumed.history[5, "train_loss"] < 0.8 * resumed.history[0, "train_loss"]


def test_encoder_checkpoints_round_trip(tmp_path):
    enc = PatchEncoder(sfreq=10, patch_seconds=2.0, **TINY)
    save_encoder(enc, tmp_path / "enc.pt", epoch=3)
    loaded = load_encoder(tmp_path / "enc.pt")
    assert loaded.sfreq == 10 and loaded.patch_seconds == 2.0 and loaded.emb_dim == 32
    enc.save_pretrained(tmp_path / "folder")
    assert not loaded.training and not load_encoder(tmp_path / "folder").training  # alike
    X = torch.randn(2, 1, 100)
    enc.eval()
    torch.testing.assert_close(enc(X), loaded(X))
    with pytest.raises(FileNotFoundError, match="No saved encoder"):
        load_encoder(tmp_path / "missing.pt")


def test_pretrain_net_and_the_command_line_refuse_an_untested_device_before_any_work(
    monkeypatch,
):
    net = PretrainNet(_pars(), max_epochs=1, progress_bar=False, device="mps")
    with pytest.raises(ValueError, match="'device': 'mps'; allowed are 'cpu' and 'cuda'"):
        net.fit(ramp_dataset(16))
    import braindecode_pars.cli as cli

    monkeypatch.setattr(
        cli._encoder_commands, "_pretrain_view", lambda args: pytest.fail("data were read")
    )
    with pytest.raises(SystemExit, match="'--device': 'mps'; allowed are 'cpu' and 'cuda'"):
        cli.main(["pretrain", "--out", "unused", "--device", "mps"])


def test_the_command_line_passes_decoder_heads_and_refuses_bad_ones_before_any_work(
    monkeypatch, tmp_path
):
    import braindecode_pars.cli as cli
    import braindecode_pars.pretraining as training

    def heads(n):  # decoder_heads is a setting of --config
        (tmp_path / f"heads-{n}.json").write_text(json.dumps({"decoder_heads": n}))
        return ["--config", str(tmp_path / f"heads-{n}.json")]

    monkeypatch.setattr(
        cli._encoder_commands, "_pretrain_view", lambda args: pytest.fail("data were read")
    )
    with pytest.raises(SystemExit, match="'decoder_heads' must divide the token size emb_dim=64"):
        cli.main(["pretrain", "--out", "unused", *heads(3)])
    given = {}

    def fake_pretrain(view, method, **kwargs):
        given[method] = kwargs
        raise SystemExit(0)  # stop before any training

    monkeypatch.setattr(training, "run_pretraining", fake_pretrain)
    monkeypatch.setattr(cli._encoder_commands, "_pretrain_view", lambda args: np.zeros(100))
    run = str(tmp_path / "run")
    for flags in (
        ["--method", "mae", *heads(3)],  # MAE has no pair decoder: not read
        heads(4),
    ):
        with pytest.raises(SystemExit):
            cli.main(["pretrain", "--out", run, *flags])
    assert "decoder_heads" not in given["mae"] and given["pars"]["decoder_heads"] == 4
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--out", run])
    assert given["pars"]["decoder_heads"] == 8


def test_pretrain_net_refuses_a_model_that_is_not_a_pretext_model():
    net = PretrainNet(torch.nn.Linear(3, 3), max_epochs=1, progress_bar=False)
    with pytest.raises(TypeError, match="'module' must be a pretext model"):
        net.initialize()


def test_bf16_autocast_runs_the_encoder_in_bfloat16_and_still_learns():
    net = PretrainNet(_pars(), max_epochs=25, batch_size=16, lr=3e-3, progress_bar=False, amp=True)
    seen = []
    net.initialize()
    net.module_.encoder.tokenizer.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    net.fit(ramp_dataset())
    assert seen and all(dtype == torch.bfloat16 for dtype in seen)
    assert net.module_.encoder.tokenizer.weight.dtype == torch.float32  # master weights
    losses = net.history[:, "train_loss"]
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:3]) / 3


def _ramp_view(n=32, seed=0):
    torch.manual_seed(seed)
    view = SingleChannelWindows(ramp_dataset(n).tensors[0].numpy())
    view.sfreq = 10.0
    return view


def test_a_run_resumed_with_other_settings_is_refused_naming_them(tmp_path, caplog):
    data = _ramp_view()
    PretrainNet(
        _pars(), max_epochs=2, batch_size=16, lr=3e-3, progress_bar=False, checkpoint_dir=tmp_path
    ).fit(data)
    other = PARS(n_times=300, sfreq=10, n_patches=10, pos_mask_ratio=0.75, **TINY)
    net = PretrainNet(
        other, max_epochs=3, batch_size=8, lr=3e-3, progress_bar=False, checkpoint_dir=tmp_path
    )
    with pytest.raises(ValueError, match=r"batch_size: saved 16, now 8; n_patches: saved 12"):
        net.fit(data)
    # another epoch budget would redraw the learning-rate curve mid-run: refused...
    longer = PretrainNet(
        _pars(), max_epochs=3, batch_size=16, lr=3e-3, progress_bar=False, checkpoint_dir=tmp_path
    )
    with pytest.raises(RunMismatchError, match=r"max_epochs: saved 2, now 3.*allow_new_budget"):
        longer.fit(data)
    # ...other data too (the same number of windows, other values)
    other_data = PretrainNet(
        _pars(), max_epochs=2, batch_size=16, lr=3e-3, progress_bar=False, checkpoint_dir=tmp_path
    )
    with pytest.raises(RunMismatchError) as refused:
        other_data.fit(_ramp_view(seed=1))
    assert set(refused.value.differences) == {"data.fingerprint"}
    # ...unless asked, with a warning that says what happens to the rate
    longer.set_params(allow_new_budget=True)
    with caplog.at_level(logging.WARNING, logger="braindecode_pars"):
        more = longer.fit(data)
    assert len(more.history) == 3
    assert "with 3 epochs instead of 2: after epoch 2 the learning rate goes from" in caplog.text


def test_a_run_resumed_with_other_decoder_heads_is_refused_also_when_saved_without_them(
    tmp_path,
):
    # the heads of nn.MultiheadAttention leave its weights' shapes as they are: without
    # the record, 8-head weights would load into 4 heads and the run go on as another
    data = _ramp_view()

    def net(folder=tmp_path, **pars_kwargs):
        model = PARS(n_times=300, sfreq=10, n_patches=12, pos_mask_ratio=0.5, **pars_kwargs, **TINY)
        return PretrainNet(
            model, max_epochs=2, batch_size=16, lr=3e-3, progress_bar=False,
            checkpoint_dir=folder,
        )  # fmt: skip

    net(decoder_heads=2).fit(data)
    config_file = tmp_path / "config.json"
    assert json.loads(config_file.read_text())["decoder_heads"] == 2
    with pytest.raises(RunMismatchError, match=r"decoder_heads: saved 2, now 4"):
        net(decoder_heads=4).fit(data)


def test_a_time_limit_stops_a_run_unfinished_and_the_same_call_finishes_it(tmp_path):
    view = _ramp_view()
    kwargs = dict(
        checkpoint_dir=tmp_path, max_epochs=4, batch_size=16, lr=3e-3, progress_bar=False,
        n_patches=12, pos_mask_ratio=0.5, encoder_kwargs=TINY,
    )  # fmt: skip
    first = run_pretraining(view, max_minutes=0, **kwargs)  # 0 minutes: stop after one epoch
    assert len(first.history) == 1 and not first.interrupted_
    assert run_status(tmp_path) == {"epoch": 1, "max_epochs": 4, "finished": False}
    assert not (tmp_path / "encoder.pt").exists()  # the folder says it is unfinished
    done = run_pretraining(view, **kwargs)
    assert len(done.history) == 4
    assert run_status(tmp_path) == {"epoch": 4, "max_epochs": 4, "finished": True}
    # the learning rate of the resumed epochs is the uninterrupted curve's
    expected = [3e-3 * warmup_cosine_factor(e / 4) for e in range(4)]
    assert done.history[:, "lr"] == pytest.approx(expected)


def test_the_state_holds_the_unwrapped_model_and_older_prefixed_states_load(tmp_path):
    data = ramp_dataset(32)
    net = PretrainNet(
        _pars(), max_epochs=1, batch_size=16, lr=3e-3, progress_bar=False, checkpoint_dir=tmp_path
    ).fit(data)
    params_file = StateCheckpoint.current(tmp_path) / "params.pt"
    params = torch.load(params_file, weights_only=True)
    assert params.keys() == net.pretext_.state_dict().keys()
    # a state saved with DistributedDataParallel's and torch.compile's prefixes loads
    torch.save({f"module._orig_mod.{k}": v + 1 for k, v in params.items()}, params_file)
    fresh = PretrainNet(
        _pars(), max_epochs=1, batch_size=16, lr=3e-3, progress_bar=False, checkpoint_dir=tmp_path
    ).initialize()
    assert StateCheckpoint.load(fresh, tmp_path) == 1
    for name, value in fresh.pretext_.state_dict().items():
        torch.testing.assert_close(value, params[name] + 1)


def test_validation_skill_is_measured_on_the_same_draws_every_epoch():
    torch.manual_seed(SEED)
    net = PretrainNet(
        _pars(), max_epochs=12, batch_size=16, lr=3e-3, progress_bar=False, valid_fraction=0.25
    )
    net.fit(ramp_dataset())
    trivial = net.history[:, "valid_trivial"]
    assert trivial == pytest.approx([trivial[0]] * len(trivial), rel=0, abs=0)
    skill = net.history[:, "valid_skill"]
    # a ramp reveals every patch's place
    learned(skill[-1], above=0.5, what="validation skill")
    assert skill[-1] > skill[0]
    train = net.history[:, "train_skill"]
    learned(train[-1], above=0.5, what="training skill")
    # skill is 1 - loss / trivial loss
    last = net.history[-1]
    assert last["valid_skill"] == pytest.approx(1 - last["valid_loss"] / last["valid_trivial"])


def test_partial_fit_on_other_data_draws_its_validation_windows_from_that_data():
    torch.manual_seed(0)
    net = PretrainNet(_pars(), max_epochs=1, batch_size=16, progress_bar=False, valid_fraction=0.25)
    first, second = ramp_dataset(), ramp_dataset()
    second.tensors = (second.tensors[0] * 0 + 7.0, second.tensors[1])  # constant windows
    net.fit(first)
    drawn = net._valid_fixed.tensors[0].clone()
    net.partial_fit(first)
    assert torch.equal(net._valid_fixed.tensors[0], drawn)  # same data: same draws
    net.partial_fit(second)
    assert torch.all(net._valid_fixed.tensors[0] == 7.0)  # drawn from the new data


def test_validation_holds_out_whole_recordings_when_the_view_knows_them():
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
    from braindecode_pars.pretraining._split import held_out_recordings

    view = SingleChannelWindows(load_physionet_mi_continuous(window_seconds=10, sfreq=100))
    view.sfreq = 100.0
    recording = view.index[:, 0]
    valid = held_out_recordings(view, 0.1)
    train = np.setdiff1d(np.arange(len(view)), valid)
    assert not set(recording[valid]) & set(recording[train])  # no recording on both sides
    assert 0.1 <= len(valid) / len(view) <= 0.2
    net = PretrainNet(
        PARS(n_times=1000, sfreq=100, n_patches=10, pos_mask_ratio=0.5, **TINY),
        max_epochs=1, batch_size=32, progress_bar=False, valid_fraction=0.1,
    )  # fmt: skip
    dataset_train, _ = net.initialize().get_split_datasets(view)
    assert net.valid_split_ == "recordings"
    assert np.array_equal(np.sort(dataset_train.indices), train)
    net.fit(view)  # the split is in the history, and the model card says it
    assert net.history[-1, "valid_split"] == "recordings"
    from braindecode_pars.hub.folders import model_card

    card = model_card(net.encoder, history=net.history.to_list())
    assert "come from whole recordings that pretraining never trained on" in card
    # a step budget counts the windows that will train: whole recordings held out
    from braindecode_pars.pretraining._split import training_windows

    assert training_windows(view, 0.1) == len(train) < len(view) - math.ceil(0.1 * len(view))
    assert training_windows(view, 0) == len(view)
    # windows that stand alone (arrays) are split by window; so is a single recording
    assert held_out_recordings(_ramp_view(), 0.25) is not None
    one = SingleChannelWindows(load_physionet_mi_continuous(runs=[1], window_seconds=10))
    assert held_out_recordings(one, 0.1) is None


def test_isolated_random_state_keeps_the_callers_generators_for_any_device_name():
    from braindecode_pars._util.seeding import isolated_random_state

    torch.manual_seed(5)
    before = torch.get_rng_state()
    for device in ("cpu", "cuda", None):  # "cuda" on a machine without CUDA: the CPU's
        with isolated_random_state(3, device):
            drawn = torch.rand(2)
        assert torch.equal(torch.get_rng_state(), before)
        torch.manual_seed(3)
        assert torch.equal(drawn, torch.rand(2))  # seeded inside
        torch.set_rng_state(before)


def test_adamw_runs_fused_by_default_and_updates_as_the_loop_does():
    from braindecode_pars._util.optim import with_fused_default

    adamw, sgd = torch.optim.AdamW, torch.optim.SGD
    assert with_fused_default(adamw, {"lr": 1.0}, "cpu") == {"lr": 1.0, "fused": True}
    assert with_fused_default(adamw, {}, torch.device("cuda", 0)) == {"fused": True}
    for kwargs in ({"foreach": True}, {"fused": False}, {"differentiable": True}):
        assert with_fused_default(adamw, kwargs, "cpu") == kwargs  # the caller's choice
    assert with_fused_default(sgd, {}, "cpu") == {}
    assert with_fused_default(adamw, {}, "meta") == {}

    class MyAdamW(adamw):  # a subclass may not accept ``fused``
        pass

    assert with_fused_default(MyAdamW, {}, "cpu") == {}

    net = PretrainNet(_pars(), max_epochs=1, batch_size=16, progress_bar=False)
    net.fit(ramp_dataset(32))
    assert net.optimizer_.param_groups[0]["fused"] is True
    net = PretrainNet(
        _pars(), max_epochs=1, batch_size=16, progress_bar=False, optimizer__foreach=True
    ).fit(ramp_dataset(32))
    assert not net.optimizer_.param_groups[0]["fused"]

    # the fused update against torch's loop, three steps on the same gradients, float64
    torch.manual_seed(0)
    weights = [torch.randn(5, 3, dtype=torch.float64) for _ in range(3)]
    grads = [torch.randn_like(w) for w in weights]
    results = []
    for fused in (True, False):
        params = [w.clone().requires_grad_() for w in weights]
        opt = adamw(params, lr=1e-2, weight_decay=1e-4, fused=fused or None)
        for _ in range(3):
            for p, g in zip(params, grads, strict=True):
                p.grad = g.clone()
            opt.step()
        results.append(torch.cat([p.detach().ravel() for p in params]))
    assert not torch.equal(results[1], torch.cat([w.ravel() for w in weights]))
    torch.testing.assert_close(results[0], results[1], rtol=0, atol=1e-12)


# -- the pretext skill reads each batch's output -------------------------------------------


class _KnownTrivial(PARS):
    """PARS whose trivial loss is a known constant: the skill's bookkeeping laid bare."""

    def forward(self, X, generator=None, draws=None):
        out = super().forward(X, generator, draws)
        return dict(out, trivial_loss=torch.tensor(4.0))


def test_the_skill_is_read_from_each_batch_output_with_no_side_channel():
    model = _KnownTrivial(n_times=300, sfreq=10, n_patches=12, pos_mask_ratio=0.5, **TINY)
    net = PretrainNet(model, max_epochs=2, batch_size=16, progress_bar=False, valid_fraction=0.25)
    net.fit(ramp_dataset(32))
    assert not hasattr(net, "trivial_loss_")
    for row in net.history:
        assert row["train_trivial"] == row["valid_trivial"] == 4.0
        assert row["train_skill"] == pytest.approx(1 - row["train_loss"] / 4.0)
        assert row["valid_skill"] == pytest.approx(1 - row["valid_loss"] / 4.0)
        for batch in row["batches"]:
            if "train_loss" in batch:
                assert batch["train_skill"] == pytest.approx(1 - batch["train_loss"] / 4.0)


# -- progress: plain lines off a terminal, log lines never glued to a bar ------------------


class _LogEachEpoch(Callback):
    def on_epoch_end(self, net, **kwargs):
        logging.getLogger("braindecode_pars.pretraining").info("note of epoch %d", len(net.history))


def _progress_net(stream, epochs=3, eval_every_steps=1):
    from braindecode_pars.pretraining.callbacks import EpochProgress

    callbacks = [
        ("progress", EpochProgress("pretraining PARS", stream=stream)),
        ("note", _LogEachEpoch()),
    ]
    return PretrainNet(
        _pars(), max_epochs=epochs, batch_size=16, lr=3e-3, progress_bar=False,
        valid_fraction=0.25, callbacks=callbacks, eval_every_steps=eval_every_steps,
    )  # fmt: skip


@pytest.fixture
def _package_log_to(monkeypatch):
    """Send the package's INFO records (the epoch tables too) to a stream, as
    ``verbose=2`` or a user's logging set-up would."""
    package = logging.getLogger("braindecode_pars")
    level = package.level

    def to(stream):
        handler = logging.StreamHandler(stream)
        monkeypatch.setattr(package, "handlers", [handler])
        package.setLevel(logging.INFO)
        return handler

    yield to
    package.setLevel(level)


class _Terminal(io.StringIO):
    """A stream that says it is a terminal, where tqdm draws its bar."""

    def isatty(self):
        return True


def _stderr_terminal(monkeypatch):
    """Make ``sys.stderr`` a terminal; the terminal, to read what was written. Called in
    a test's body: pytest sets its own ``sys.stderr`` again after the fixtures."""
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    return terminal


def test_off_a_terminal_the_progress_is_one_plain_line_per_epoch(_package_log_to):
    import re

    stream = io.StringIO()  # a log redirected to a file: not a terminal
    _package_log_to(stream)
    net = _progress_net(stream).fit(ramp_dataset(32))
    text = stream.getvalue()
    assert "\r" not in text and "%|" not in text  # no tqdm bar
    lines = [line for line in text.splitlines() if line.startswith("pretraining PARS")]
    others = [line for line in text.splitlines() if line not in lines]
    assert not [line for line in others if "pretraining PARS" in line]  # never glued
    assert [line for line in others if "note" in line] == [f"note of epoch {e}" for e in (1, 2, 3)]
    assert any("train_loss" in line for line in others)  # the epoch table, its own lines
    assert len(lines) == 3
    pattern = (
        r"pretraining PARS: epoch (\d)/3 \| train loss (\S+), skill (\S+) \| "
        r"valid loss (\S+), skill (\S+) \| \d+\.\d s"
    )
    for epoch, (line, row) in enumerate(zip(lines, net.history, strict=True), start=1):
        match = re.match(pattern, line)
        assert match, line
        assert match.group(1) == str(epoch)
        for group, key, digits in ((2, "train_loss", 4), (3, "train_skill", 3),
                                   (4, "valid_loss", 4), (5, "valid_skill", 3)):  # fmt: skip
            assert match.group(group) == f"{row[key]:.{digits}f}"
    assert "left)" in lines[0] and "left)" not in lines[-1]  # a time left until the end


def test_on_a_terminal_log_lines_are_written_above_the_bar(_package_log_to, monkeypatch):
    terminal = _stderr_terminal(monkeypatch)
    handler = _package_log_to(terminal)
    _progress_net(None).fit(ramp_dataset(32))  # None: sys.stderr, at the start of training
    text = terminal.getvalue()
    assert "pretraining PARS: 100%" in text and "3/3" in text  # tqdm's bar
    for epoch in (1, 2, 3):
        start = text.index(f"note of epoch {epoch}")
        assert start == 0 or text[start - 1] in "\r\n"  # not glued after the bar's text
        assert text[start + len(f"note of epoch {epoch}")] == "\n"
    assert logging.getLogger("braindecode_pars").handlers == [handler]  # given back


def test_a_loop_off_a_terminal_has_no_bar_and_its_log_lines_stay_whole(
    _package_log_to, monkeypatch
):
    from braindecode_pars._util.progress import progress

    stream = io.StringIO()  # a log file
    monkeypatch.setattr("sys.stderr", stream)
    _package_log_to(stream)
    log = logging.getLogger("braindecode_pars.demo")
    assert [log.info("fit %d", i) or i for i in progress(range(3), "fits")] == [0, 1, 2]
    assert stream.getvalue() == "fit 0\nfit 1\nfit 2\n"  # no bar, one line each


def test_a_loop_on_a_terminal_writes_its_log_lines_above_the_bar(_package_log_to, monkeypatch):
    from braindecode_pars._util.progress import progress

    terminal = _stderr_terminal(monkeypatch)
    handler = _package_log_to(terminal)
    log = logging.getLogger("braindecode_pars.demo")
    assert [log.info("fit %d", i) or i for i in progress(range(3), "fits")] == [0, 1, 2]
    text = terminal.getvalue()
    assert "fits: 100%" in text and "3/3" in text  # the bar
    for i in range(3):
        start = text.index(f"fit {i}\n")
        assert start == 0 or text[start - 1] in "\r\n"  # never glued after the bar
    assert list(progress(range(2), "fits", enabled=False)) == [0, 1]
    assert logging.getLogger("braindecode_pars").handlers == [handler]  # given back


# -- resuming: the encoder's settings, the data's description ------------------------------


def test_a_run_resumed_with_another_activation_or_eps_is_refused_naming_it(tmp_path):
    data = _ramp_view()

    def net(**encoder):
        model = PARS(n_times=300, sfreq=10, n_patches=12, pos_mask_ratio=0.5, **TINY, **encoder)
        return PretrainNet(
            model, max_epochs=2, batch_size=16, lr=3e-3, progress_bar=False,
            checkpoint_dir=tmp_path,
        )  # fmt: skip

    net().fit(data)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["encoder.activation"] == "gelu" and "activation" not in config
    assert len(net().fit(data).history) == 2  # the same settings: nothing left to run
    with pytest.raises(RunMismatchError, match=r"encoder.activation: saved 'gelu', now 'relu'"):
        net(activation="relu").fit(data)
    with pytest.raises(RunMismatchError, match=r"encoder.eps: saved 1e-05, now 0.001"):
        net(eps=1e-3).fit(data)


def test_a_run_refused_for_other_data_names_what_its_description_says_changed(tmp_path):
    def net(notch):
        preprocessing = (
            f"resampled to 10 Hz, high-pass 0.5 Hz, notch {notch}; 30-s windows every 30 s"
        )
        run_info = {
            "command": f"braindecode-pars pretrain --store notch-{notch}",
            "data.recordings": ["a.edf", "b.edf"],
            "data.preprocessing": preprocessing,
        }
        return PretrainNet(
            _pars(), max_epochs=2, batch_size=16, lr=3e-3, progress_bar=False,
            checkpoint_dir=tmp_path, run_info=run_info,
        )  # fmt: skip

    net("none").fit(_ramp_view())
    with pytest.raises(RunMismatchError) as refused:
        net("50.0").fit(_ramp_view(seed=1))
    differences = refused.value.differences
    assert list(differences) == ["data.preprocessing", "data.fingerprint"]
    assert differences["data.preprocessing"] == ("notch none", "notch 50.0")
    assert "data.preprocessing: saved 'notch none', now 'notch 50.0'; data.fingerprint" in str(
        refused.value
    )
    # the same description and other data: the fingerprint alone says so
    with pytest.raises(RunMismatchError) as refused:
        net("none").fit(_ramp_view(seed=1))
    assert list(refused.value.differences) == ["data.fingerprint"]
    # another description of the same data resumes: only the data are compared
    assert len(net("50.0").fit(_ramp_view()).history) == 2


# -- the loop around the step: full batches, validation and checkpoints on a cadence -------


def test_a_batch_larger_than_the_training_windows_trains_full_batches_drawn_with_replacement():
    # 12 windows, batch 32: each epoch is one step of 32 crops (not one of 12)
    net = PretrainNet(_pars(), max_epochs=3, batch_size=32, lr=3e-3, progress_bar=False)
    net.fit(ramp_dataset(12))
    sizes = [b["train_batch_size"] for row in net.history for b in row["batches"]]
    assert sizes == [32, 32, 32]
    # with enough windows, an epoch is still a shuffled pass over them, in full batches
    # (the short last one is left out)
    net = PretrainNet(_pars(), max_epochs=1, batch_size=16, progress_bar=False)
    net.fit(ramp_dataset(40))
    assert [b["train_batch_size"] for b in net.history[0]["batches"]] == [16, 16]


def test_validation_and_the_progress_lines_come_on_a_cadence_of_steps():
    from braindecode_pars.pretraining.callbacks import _reports_epoch

    # 1-step epochs, a report every 4 steps: epochs 1, 4, 8 and the last, 10
    assert [e for e in range(1, 11) if _reports_epoch(e, 10, 1, 4)] == [1, 4, 8, 10]
    # epochs of 3 steps, every 4 steps: every second epoch; epochs longer than the
    # cadence: every epoch
    assert [e for e in range(1, 8) if _reports_epoch(e, 7, 3, 4)] == [1, 2, 4, 6, 7]
    assert all(_reports_epoch(e, 5, 300, 200) for e in range(1, 6))

    stream = io.StringIO()
    net = _progress_net(stream, epochs=10, eval_every_steps=4)
    net.batch_size = 24  # one step an epoch on the 24 training windows
    net.fit(ramp_dataset(32))
    validated = [row["epoch"] for row in net.history if "valid_loss" in row]
    assert validated == [1, 4, 8, 10]
    assert all("train_loss" in row for row in net.history)  # every epoch trains
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("pretraining")]
    assert [int(line.split("epoch ")[1].split("/")[0]) for line in lines] == [1, 4, 8, 10]


def test_checkpoints_come_on_a_cadence_and_when_training_stops(tmp_path, monkeypatch):
    writes = []
    original = StateCheckpoint.write
    monkeypatch.setattr(
        StateCheckpoint,
        "write",
        lambda self, net: (writes.append(len(net.history)), original(self, net)),
    )
    data = ramp_dataset()
    settings = dict(batch_size=16, lr=3e-3, progress_bar=False, checkpoint_dir=tmp_path)
    first = PretrainNet(
        _pars(), max_epochs=8, checkpoint_every_minutes=60.0,
        callbacks=[("stop", InterruptAt(5))], **settings,
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        first.fit(data)
    assert writes == [5]  # none during the hour's cadence; the stop saves its 5 epochs
    assert json.loads((tmp_path / "state.json").read_text())["epoch"] == 5
    resumed = PretrainNet(_pars(), max_epochs=8, checkpoint_every_minutes=60.0, **settings)
    resumed.fit(data)
    assert writes == [5, 8] and len(resumed.history) == 8  # and the end of the run
    writes.clear()
    every = PretrainNet(_pars(), max_epochs=3, checkpoint_every_minutes=0, **settings)
    every.checkpoint_dir = tmp_path / "every"
    every.fit(data)
    assert writes == [1, 2, 3]


def test_a_stop_within_an_epoch_saves_the_epochs_completed(tmp_path):
    class StopAtBatch(Callback):
        def on_batch_end(self, net, training=False, **kwargs):
            if training and len(net.history) == 3 and len(net.history[-1]["batches"]) == 2:
                raise KeyboardInterrupt

    net = PretrainNet(
        _pars(), max_epochs=6, batch_size=16, progress_bar=False, checkpoint_dir=tmp_path,
        checkpoint_every_minutes=60.0, callbacks=[("stop", StopAtBatch())],
    )  # fmt: skip
    with pytest.raises(KeyboardInterrupt, match="after 2 epoch"):
        net.fit(ramp_dataset())
    saved = json.loads((StateCheckpoint.current(tmp_path) / "history.json").read_text())
    assert len(saved) == 2 and all("train_loss" in row for row in saved)


def test_the_epoch_table_has_no_colour_codes_off_a_terminal(_package_log_to):
    stream = io.StringIO()
    _package_log_to(stream)
    _progress_net(io.StringIO(), epochs=3).fit(ramp_dataset(32))
    text = stream.getvalue()
    assert "train_loss" in text and "\x1b[" not in text


def _count_worker_start(folder, worker_id):
    with open(folder / f"started-{worker_id}", "a") as f:
        f.write("x")


def test_data_loader_workers_start_once_per_fit_and_the_net_pickles_after(tmp_path):
    import functools
    import pickle

    net = PretrainNet(
        _pars(), max_epochs=4, batch_size=8, lr=3e-3, progress_bar=False,
        iterator_train__num_workers=1,
        iterator_train__worker_init_fn=functools.partial(_count_worker_start, tmp_path),
    )  # fmt: skip
    net.fit(_ramp_view())  # 4 epochs of 4 batches
    assert (tmp_path / "started-0").read_text() == "x"  # one start, not one an epoch
    losses = net.history[:, "train_loss"]
    assert losses[-1] < losses[0]
    assert net._train_loader is None  # the fit's loader, and its worker, are let go
    pickle.loads(pickle.dumps(net))
    net.partial_fit(_ramp_view(), epochs=1)  # a new fit starts its own worker
    assert (tmp_path / "started-0").read_text() == "xx"
