"""The processes of a distributed run agree on a stop at a cadence in seconds, not in
steps; the command warns when torchrun would not forward a stop signal."""

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from braindecode_pars.pretraining import stopping
from braindecode_pars.pretraining.stopping import _AGREE_SECONDS, _StopAgreement

ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _agreements(monkeypatch, step_seconds, n_steps, seconds=_AGREE_SECONDS):
    """The steps after which a run whose steps take ``step_seconds`` (a list, one per
    step, or one number) agrees, over ``n_steps`` steps, with every boundary asked, as
    the net asks (the run's steps done before each step but the first)."""
    clock = FakeClock()
    monkeypatch.setattr(stopping, "_clock", clock)
    if not isinstance(step_seconds, list):
        step_seconds = [step_seconds] * n_steps
    agreement, at = _StopAgreement(seconds), []
    for step in range(1, n_steps + 1):
        clock.now += step_seconds[step - 1]  # the step just done
        if agreement.due(step):
            # one process: its elapsed is the agreed one (the largest of all)
            agreement.agreed(step, agreement.elapsed())
            at.append(step)
    assert agreement.agreements == len(at)
    return at


def test_one_second_steps_agree_every_five_steps_after_a_ramp(monkeypatch):
    at = _agreements(monkeypatch, 1.0, 60)
    # the first boundary; then the cadence doubles (1, 2, 4) up to 5 s / 1 s = 5 steps
    assert at[:6] == [1, 2, 4, 8, 13, 18]
    assert set(b - a for a, b in zip(at[4:], at[5:], strict=False)) == {5}


def test_ten_millisecond_steps_agree_every_five_seconds_in_few_all_reduces(monkeypatch):
    at = _agreements(monkeypatch, 0.01, 20_000)
    gaps = [b - a for a, b in zip(at, at[1:], strict=False)]
    assert gaps[:9] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # doubling, then 500 steps
    assert set(gaps[10:]) == {500}
    # 20,000 steps (200 s) in about 10 + 200 / 5 all-reduces, not one a step
    assert len(at) < 10 + 200 / _AGREE_SECONDS + 2


def test_a_slower_step_shortens_the_cadence_at_the_next_agreement(monkeypatch):
    # 100 steps of 0.1 s (a cadence of 50 steps), then steps of 2 s
    at = _agreements(monkeypatch, [0.1] * 100 + [2.0] * 100, 200)
    assert at[:8] == [1, 2, 4, 8, 16, 32, 64, 114]
    # 114: 50 steps in 31.6 s, so 8 steps next; then 5 s / 2 s rounds to 2 steps
    assert at[8:12] == [122, 124, 126, 128]


def test_the_bound_on_stop_latency_holds_for_any_step_time(monkeypatch):
    """Once the cadence is measured, two agreements are at most AGREE_SECONDS apart in
    run time, give or take half a step (the cadence is a whole number of steps): a
    signal is seen within that, plus the step under way."""
    for step_seconds in (0.003, 0.05, 0.4, 1.0, 3.0, 12.0):
        at = _agreements(monkeypatch, step_seconds, 4000 if step_seconds < 0.1 else 200)
        later = at[len(at) // 2 :]  # the cadence reached
        worst = max(b - a for a, b in zip(later, later[1:], strict=False)) * step_seconds
        # (a step longer than AGREE_SECONDS: every step)
        assert worst <= max(_AGREE_SECONDS + step_seconds / 2, step_seconds) + 1e-9, step_seconds
        assert worst >= min(_AGREE_SECONDS - step_seconds / 2, step_seconds) - 1e-9


def test_processes_with_other_clocks_take_the_same_cadence(monkeypatch):
    """The cadence follows the agreed (largest) elapsed time only: two processes whose
    own measures differ get the same next step, so both join the same all-reduces."""
    monkeypatch.setattr(stopping, "_clock", FakeClock())
    a, b = _StopAgreement(), _StopAgreement()
    for agreement in (a, b):
        agreement.agreed(1, 0.0)
    for step, elapsed in ((2, 0.2), (4, 0.4), (8, 0.8), (16, 1.6), (32, 3.2)):
        agreed = max(elapsed, elapsed * 1.3)  # the all-reduce's MAX of both measures
        for agreement in (a, b):
            assert agreement.due(step)
            agreement.agreed(step, agreed)
        assert a.next_step == b.next_step


WORKER = """
import json, os, signal, sys
from pathlib import Path

import torch
from skorch.callbacks import Callback

from braindecode_pars.pretraining import PretrainNet, TrainingStopped, stopping
from braindecode_pars.pretraining.distributed import close_distributed, init_distributed, rank
from tests.ramp_fixtures import ramp_dataset, ramp_pars

out, signal_at = Path(sys.argv[1]), int(sys.argv[2])
clock = [0.0]
stopping._clock = lambda: clock[0]  # every step takes one second of this clock


class SlowSteps(Callback):
    steps = 0

    def on_batch_end(self, net, training=False, **kwargs):
        if training:
            clock[0] += 1.0
            SlowSteps.steps += 1
            if rank() == 1 and SlowSteps.steps == signal_at:
                os.kill(os.getpid(), signal.SIGUSR1)  # rank 1 alone gets it


device = init_distributed("cpu")
torch.manual_seed(0)
net = PretrainNet(
    ramp_pars(emb_dim=16, depth=1, n_heads=2, ff_dim=16), max_epochs=50, batch_size=4,
    lr=1e-3, progress_bar=False, device=device, checkpoint_dir=out / "run",
    checkpoint_every_minutes=60, stop_signals=("SIGTERM", "SIGUSR1"),
    callbacks=[("slow", SlowSteps())],
)
try:
    net.fit(ramp_dataset())
    stopped = None
except TrainingStopped as err:
    stopped = [err.epochs, err.steps, err.signal.name]
record = dict(
    stopped=stopped, steps=SlowSteps.steps, per_epoch=net.epoch_steps_,
    agreements=net.stop_agreement_.agreements, every=net.stop_agreement_.every,
)
(out / f"rank{rank()}.json").write_text(json.dumps(record))
close_distributed()
"""


@pytest.mark.serial
@pytest.mark.slow
def test_two_processes_stop_within_seconds_of_a_signal_to_one_of_them(tmp_path):
    """Two CPU processes under torchrun whose steps take 1 s of a fake clock: a SIGUSR1
    to rank 1 alone after step 30 stops both after one step, within 5 steps (5 s) of
    it, where a cadence of eval_every_steps (200) would have run on to step 200; rank 0
    saved that step."""
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1", "PYTHONPATH": str(ROOT)}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                "--nproc_per_node", "2"]  # fmt: skip
    proc = subprocess.run(
        [*torchrun, str(script), str(tmp_path), "30"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["per_epoch"] == 8  # 64 ramps, batch 4, two processes
    assert r0["stopped"] == r1["stopped"] and r0["steps"] == r1["steps"]  # one step
    epochs, steps, name = r0["stopped"]
    assert name == "SIGUSR1"
    assert epochs * 8 + steps == r0["steps"]  # stopped before the next step
    assert 30 <= r0["steps"] <= 30 + _AGREE_SECONDS  # 200 with the old cadence
    # the first boundary, the ramp (1, 2, 4) and every 5 steps: a handful of all-reduces
    assert r0["agreements"] == r1["agreements"] <= 3 + r0["steps"] / 4
    assert r0["every"] == 5
    pointer = json.loads((tmp_path / "run" / "state.json").read_text())
    assert (pointer["epoch"], pointer["steps"]) == (epochs, steps)


def test_the_command_warns_when_torchrun_would_not_forward_a_stop_signal(caplog):
    from types import SimpleNamespace

    from braindecode_pars.cli._encoder_commands import _check_torchrun_forwards

    args = SimpleNamespace(stop_signal=["USR1"])
    caplog.set_level(logging.WARNING)
    assert _check_torchrun_forwards(args, {}) == []  # not under torchrun
    under = {"TORCHELASTIC_RUN_ID": "x", "RANK": "0"}
    assert _check_torchrun_forwards(args, under) == ["SIGUSR1"]  # torchrun's default
    assert "torchrun forwards SIGTERM,SIGINT,SIGHUP,SIGQUIT to this run, not SIGUSR1" in (
        caplog.text
    )
    assert "--signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1" in caplog.text
    told = {**under, "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGUSR1"}
    assert _check_torchrun_forwards(args, told) == []
    caplog.clear()
    assert _check_torchrun_forwards(args, {**under, "RANK": "1"}) == ["SIGUSR1"]
    assert caplog.text == ""  # rank 0 alone says it
    assert _check_torchrun_forwards(SimpleNamespace(stop_signal=[]), under) == []
