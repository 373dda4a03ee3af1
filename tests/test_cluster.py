"""Jobs on a shared cluster: the estimators catch SIGTERM only with a folder to save
into; PARS's move to float64 tables outlives a stop; the docs' SLURM batch script,
run as a plain shell script and signalled as a process group, saves and resumes."""

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.base import clone
from skorch.callbacks import Callback

from braindecode_pars import PARSPretrainer
from braindecode_pars.hub import run_status
from braindecode_pars.pretraining import PretrainNet, TimeLimit

from ._helpers import TINY_ENCODER
from .conftest import TINY
from .ramp_fixtures import ramp_dataset, ramp_pars

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
#: The epoch table's logger: it writes during training, at the reported epochs.
TABLE = "braindecode_pars.pretraining.net.epochs"

SMALL = dict(
    emb_dim=16, depth=1, n_heads=2, ff_dim=16, n_patches=6, batch_size=8, max_epochs=2,
    window_seconds=5.0, sfreq=100.0, valid_fraction=None, random_state=0, verbose=0,
)  # fmt: skip


def _windows(n=24, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 2, 600)).astype(np.float32)


class _SigtermHandlers(logging.Handler):
    """Records SIGTERM's handler whenever the epoch table writes: during the fit."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def emit(self, record):
        self.seen.append(signal.getsignal(signal.SIGTERM))


def _sigterm_during_fit(fit):
    """SIGTERM's handlers while ``fit()`` trains, and after it."""
    seen, table = _SigtermHandlers(), logging.getLogger(TABLE)
    level = table.level
    table.addHandler(seen)
    table.setLevel(logging.INFO)
    try:
        fit()
    finally:
        table.removeHandler(seen)
        table.setLevel(level)
    assert seen.seen, "the epoch table wrote nothing during the fit"
    return seen.seen[0], signal.getsignal(signal.SIGTERM)


@pytest.mark.filterwarnings("ignore:Pretraining ended with a pretext skill")
def test_the_estimator_catches_sigterm_only_with_a_folder_to_save_into(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    assert PARSPretrainer().stop_signals == "auto"
    # no checkpoint_dir: SIGTERM keeps its handler (the default: it ends the process)
    during, after = _sigterm_during_fit(lambda: PARSPretrainer(**SMALL).fit(_windows()))
    assert during is before and after is before
    # a checkpoint_dir: SIGTERM saves the state at the next step, during the fit only
    folder = tmp_path / "ckpt"
    during, after = _sigterm_during_fit(
        lambda: PARSPretrainer(**SMALL, checkpoint_dir=folder).fit(_windows())
    )
    assert during is not before and callable(during) and after is before
    assert (folder / "pretrain" / "state.json").is_file()
    # an explicit value is taken as it is: SIGTERM without a folder, none with one
    during, _ = _sigterm_during_fit(
        lambda: PARSPretrainer(**SMALL, stop_signals="SIGTERM").fit(_windows())
    )
    assert during is not before
    during, _ = _sigterm_during_fit(
        lambda: PARSPretrainer(**SMALL, stop_signals=None, checkpoint_dir=tmp_path / "n").fit(
            _windows()
        )
    )
    assert during is before


@pytest.mark.slow
def test_a_sigterm_during_a_fit_without_a_folder_ends_the_process(tmp_path):
    """What a joblib, Dask or Ray worker expects of SIGTERM: a fit without a folder
    leaves it its default action, so the process ends at once, killed by the signal."""
    code = f"""
import logging, os, signal
import numpy as np
from braindecode_pars import PARSPretrainer

class Kill(logging.Handler):  # the epoch table writes during training
    def emit(self, record):
        os.kill(os.getpid(), signal.SIGTERM)

table = logging.getLogger({TABLE!r})
table.setLevel(logging.INFO)
table.addHandler(Kill())
X = np.random.default_rng(0).standard_normal((24, 2, 600)).astype(np.float32)
PARSPretrainer(**{SMALL!r}).fit(X)
print("the fit went on")
"""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -signal.SIGTERM, proc.stderr[-2000:]
    assert "the fit went on" not in proc.stdout


def test_stop_signals_round_trip_through_get_params_and_clone():
    for value in ("auto", "SIGUSR1", ("SIGTERM", "USR1"), None):
        stage = PARSPretrainer(stop_signals=value)
        assert stage.get_params()["stop_signals"] == value
        copy = clone(stage)
        assert copy.get_params()["stop_signals"] == value
        copy.check_params()  # every value accepted
    net = PretrainNet(ramp_pars(**TINY))
    assert net.stop_signals == "auto" and net.get_params()["stop_signals"] == "auto"
    bad = PARSPretrainer(stop_signals="sometimes")
    with pytest.raises(ValueError, match=r"'stop_signals'.*'auto'.*but got 'sometimes'"):
        bad.check_params()


def test_the_net_catches_sigterm_only_with_a_checkpoint_dir(tmp_path):
    before = signal.getsignal(signal.SIGTERM)

    def fit(folder):
        torch.manual_seed(0)
        net = PretrainNet(ramp_pars(**TINY), max_epochs=1, batch_size=16, progress_bar=False,
                          checkpoint_dir=folder)  # fmt: skip
        return lambda: net.fit(ramp_dataset())

    assert _sigterm_during_fit(fit(None))[0] is before
    assert _sigterm_during_fit(fit(tmp_path / "run"))[0] is not before


# -- the float64 escalation, saved and resumed ---------------------------------------


def _unresolved_report(epoch):
    """A read epoch whose training batch left 2 pair-heads unresolved."""
    batch = dict(train_trivial=1.0, train_loss=0.5, train_batch_size=16,
                 train_unresolved_pairs=2, train_pair_gap=50.0)  # fmt: skip
    return {"epoch": epoch, "batches": [batch]}


class Unresolved(Callback):
    """The skill callback reads ``reports`` reports with unresolved pairs: at the end of
    epoch ``epoch``, or at the start of training (``epoch=0``)."""

    def __init__(self, reports, epoch):
        self.reports, self.epoch = reports, epoch

    def _read(self, net):
        skill = dict(net.callbacks_)["pretext_skill"]
        for _ in range(self.reports):
            skill.on_epoch_read(net, _unresolved_report(len(net.history)))

    def on_train_begin(self, net, **kwargs):
        if self.epoch == 0:
            self._read(net)

    def on_epoch_end(self, net, **kwargs):
        if self.epoch and len(net.history) == self.epoch:
            self._read(net)


class AtStart(Callback):
    """The tables' dtype and the count of unresolved reports when training starts (the
    state loaded)."""

    def on_train_begin(self, net, **kwargs):
        skill = dict(net.callbacks_)["pretext_skill"]
        self.dtype = net.pretext_.decoder.table_dtype
        self.reports = getattr(skill, "unresolved_reports_", 0)


def _net(folder, *callbacks):
    torch.manual_seed(0)
    return PretrainNet(
        ramp_pars(**TINY), max_epochs=3, batch_size=16, lr=3e-3, progress_bar=False,
        checkpoint_dir=folder, checkpoint_every_minutes=60, callbacks=list(callbacks),
    )  # fmt: skip


def test_a_run_moved_to_float64_tables_goes_on_in_float64_after_a_stop(tmp_path, caplog):
    folder, data = tmp_path / "run", ramp_dataset()
    # two reports in a row with unresolved pairs (epoch 1), then a stop (time limit)
    first = _net(folder, ("unresolved", Unresolved(2, 1)), ("limit", TimeLimit(0))).fit(data)
    assert first.stopped_.reason == "time" and len(first.history) == 1
    assert first.pretext_.decoder.table_dtype == torch.float64
    assert "float64 for the rest of this run" in caplog.text
    pointer = json.loads((folder / "state.json").read_text())
    assert (pointer["epoch"], pointer["pair_tables"]) == (1, "float64")

    seen = AtStart()
    resumed = _net(folder, ("seen", seen)).fit(data)
    assert len(resumed.history) == 3
    assert seen.dtype == torch.float64  # from its first step on, not float32 again
    assert resumed.pretext_.decoder.table_dtype == torch.float64
    assert json.loads((folder / "state.json").read_text())["pair_tables"] == "float64"
    # a run that was not moved resumes in float32
    other = tmp_path / "other"
    _net(other, ("limit", TimeLimit(0))).fit(data)
    assert json.loads((other / "state.json").read_text())["pair_tables"] == "float32"
    seen = AtStart()
    assert _net(other, ("seen", seen)).fit(data).pretext_.decoder.table_dtype == torch.float32
    assert seen.dtype == torch.float32


def test_one_report_of_unresolved_pairs_before_a_stop_counts_after_it(tmp_path):
    """The count of reports in a row is saved too: one before the stop and one after it
    make the two that move the tables to float64."""
    folder, data = tmp_path / "run", ramp_dataset()
    _net(folder, ("unresolved", Unresolved(1, 1)), ("limit", TimeLimit(0))).fit(data)
    pointer = json.loads((folder / "state.json").read_text())
    assert (pointer["pair_tables"], pointer["unresolved_reports"]) == ("float32", 1)
    seen = AtStart()  # before the report of this sitting: one is counted
    resumed = _net(folder, ("seen", seen), ("unresolved", Unresolved(1, 0))).fit(data)
    assert (seen.dtype, seen.reports) == (torch.float32, 1)
    assert resumed.pretext_.decoder.table_dtype == torch.float64


# -- the docs' SLURM batch script ----------------------------------------------------

SCRIPT = ROOT / "docs" / "cluster" / "pretrain.sbatch"
#: The run's epoch budget: the first sitting is signalled within it (2 s after training
#: starts), the second ends it. 300 epochs ended within those 2 s on an idle 2-core CPU.
EPOCHS = 3000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A window store of PhysioNet-MI subject 1's runs 1 and 2, as
    ``tests/test_distributed.py`` writes it."""
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous
    from braindecode_pars.store import write_window_store

    folder = tmp_path_factory.mktemp("mi") / "store"
    windows = load_physionet_mi_continuous(runs=(1, 2), window_seconds=10, stride_seconds=5)
    write_window_store(windows, folder)
    return folder


def _left(tag):
    """Processes whose command line holds ``tag`` (the run's folder), by id."""
    found = subprocess.run(["pgrep", "-f", tag], capture_output=True, text=True)
    return found.stdout.split()


@pytest.mark.slow
# one process of one thread beside the other tests; under torchrun (two processes, both
# cores): serial, in make test-extended (CI signals a torchrun job in test_distributed.py)
@pytest.mark.parametrize(
    "nproc",
    [1, pytest.param(2, marks=[pytest.mark.extended, pytest.mark.serial])],
    ids=["one-process", "torchrun"],
)
def test_the_docs_slurm_script_saves_at_its_signal_and_a_rerun_finishes(tmp_path, store, nproc):
    """The batch script of docs/cluster.rst run as a plain shell script (no SLURM
    variable: no requeue), its settings from the environment, a tiny run: SIGUSR1 sent
    to its whole process group, as to a job, saves the run at a step, every process
    ends, and the same script run again continues from that step and finishes."""
    config = tmp_path / "pretrain.json"
    config.write_text(json.dumps({**TINY_ENCODER, "n_patches": 10, "stop_signal": ["USR1"]}))
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(
        OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        OUT=str(out), STORE=str(store), CONFIG=str(config), NPROC=str(nproc), DEVICE="cpu",
    )  # fmt: skip
    command = ["bash", str(SCRIPT), "--epochs", str(EPOCHS), "--batch-size", "8"]
    job = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # a group of its own, as a job's
    )  # fmt: skip
    deadline = time.monotonic() + 120  # config.json: training has started
    while not (out / "config.json").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2.0)
    sent = time.monotonic()
    os.killpg(job.pid, signal.SIGUSR1)  # the script's whole process group
    _, err = job.communicate(timeout=120)
    latency = time.monotonic() - sent
    assert "stopped by SIGUSR1" in err, err[-3000:]
    status = run_status(out)
    assert 1 <= status["epoch"] < EPOCHS and not status["finished"], err[-3000:]
    ended = int(err.rsplit("pretrain ended with status ", 1)[1].split()[0])
    if nproc == 1:
        assert job.returncode == ended == 128 + signal.SIGUSR1
    else:  # torchrun ends with the signal's exception, after its processes ended
        assert job.returncode == ended != 0
    assert latency < 30, latency  # within torchrun's (and SLURM's) grace
    time.sleep(1.0)
    assert _left(str(out)) == [], "processes of the run are left"
    saved = json.loads((out / "state.json").read_text())

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = f"Resuming pretraining from {out} after {saved['epoch']} epochs"
    assert resumed in again.stderr, again.stderr[-3000:]
    if saved["steps"]:  # "and 1 step of epoch 8", "and 2 steps of epoch 8"
        assert f" and {saved['steps']} step" in again.stderr
    assert run_status(out)["finished"] and (out / "encoder.pt").is_file()
    assert "pretrain ended with status 0" in again.stderr
