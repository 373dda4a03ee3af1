"""Every worker process starts the same way, under every start method: it ends with the
job's process and leaves the job's stop signals to it, then runs the user's own init."""

import ctypes
import functools
import multiprocessing
import signal
import sys

import pytest
import torch

from braindecode_pars._jobs.workers import WorkerStart, start_method
from braindecode_pars.pretraining import PretrainNet

from ..conftest import TINY
from ..ramp_fixtures import ramp_dataset, ramp_pars

pytestmark = pytest.mark.usefixtures("one_thread")

_FORKSERVER = "forkserver" in multiprocessing.get_all_start_methods()
linux_forkserver = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and _FORKSERVER),
    reason="the death signal (prctl) and the forkserver are Linux's",
)
PR_GET_PDEATHSIG = 2


def _record_start(folder, worker_id):
    """A user's ``worker_init_fn``: writes what the worker's start set before it ran."""
    libc = ctypes.CDLL(None, use_errno=True)
    death = ctypes.c_int(0)
    libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(death), 0, 0, 0)
    ignored = signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    (folder / f"worker-{worker_id}").write_text(f"{death.value} {int(ignored)}")


class _Items(torch.utils.data.Dataset):
    def __len__(self):
        return 40

    def __getitem__(self, i):
        return torch.tensor([float(i)])


@linux_forkserver
def test_forkserver_workers_iterate_to_the_end_and_run_the_users_init_after_theirs(tmp_path):
    start = WorkerStart(
        start_method("forkserver"),
        ignore=(signal.SIGTERM,),
        then=functools.partial(_record_start, tmp_path),
    )
    loader = torch.utils.data.DataLoader(
        _Items(), batch_size=4, num_workers=2, multiprocessing_context="forkserver",
        worker_init_fn=start,
    )  # fmt: skip
    seen = torch.cat(list(loader)).flatten()
    assert sorted(seen.tolist()) == list(range(40))  # every batch, from both workers
    for worker in (0, 1):  # the death signal set and SIGTERM ignored before the user's
        assert (tmp_path / f"worker-{worker}").read_text() == f"{int(signal.SIGKILL)} 1"


@linux_forkserver
def test_pretraining_trains_with_forkserver_workers_and_a_users_worker_init(tmp_path):
    torch.manual_seed(0)
    net = PretrainNet(
        ramp_pars(**TINY), max_epochs=2, batch_size=16, lr=3e-3, progress_bar=False,
        iterator_train__num_workers=2,
        iterator_train__multiprocessing_context="forkserver",
        iterator_train__worker_init_fn=functools.partial(_record_start, tmp_path),
        checkpoint_dir=tmp_path / "run",
    )  # fmt: skip
    net.fit(ramp_dataset())
    assert len(net.history) == 2 and all("train_loss" in row for row in net.history)
    # kept workers ignore the net's stop signals (SIGTERM by default, with a
    # checkpoint_dir), after their death signal is set; then the user's function ran,
    # once per worker
    for worker in (0, 1):
        assert (tmp_path / f"worker-{worker}").read_text() == f"{int(signal.SIGKILL)} 1"


def test_the_start_method_is_the_one_the_pool_uses():
    assert start_method("forkserver") == "forkserver"
    assert start_method(multiprocessing.get_context("spawn")) == "spawn"
    default = multiprocessing.get_start_method(allow_none=True)
    expected = default or multiprocessing.get_all_start_methods()[0]
    assert start_method(None) == expected
    assert multiprocessing.get_start_method(allow_none=True) == default  # not fixed by asking
    with pytest.raises(ValueError, match=r"'multiprocessing_context' .* but got 'threads'"):
        start_method("threads")
    with pytest.raises(ValueError, match=r"'method' .* but got 'thread'"):
        WorkerStart("thread")
    with pytest.raises(TypeError, match="'then' .* must be callable"):
        WorkerStart("fork", then=3)
