"""torch's threads in a fit: the idle cores unless the user chose, a warning when the
process's cores are busy, torch's count restored; the idle cores counted over the
process's own cores (a fake ``/proc/stat`` of 8 cores, an affinity of 2), a measurement
reused for a few seconds, and the measure under a second busy process."""

import logging
import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from braindecode_pars import PARSProbe
from braindecode_pars._util import threads as _threads
from braindecode_pars._util.threads import busy_cores, chosen_threads, fit_threads, usable_cores


@pytest.fixture
def two_threads_by_default(monkeypatch):
    """torch at 2 threads, the count it had at import (no user choice), no environment
    variable fixing them, and 1 idle core; torch's count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(_threads, "_IMPORT_THREADS", 2)
    for name in _threads.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_threads, "idle_cores", lambda interval=0.1, max_age=5.0: 1)
    yield
    torch.set_num_threads(before)


def test_a_busy_machine_lowers_the_threads_for_the_fit_only(two_threads_by_default, caplog):
    with caplog.at_level(logging.WARNING, logger="braindecode_pars._util.threads"):
        with fit_threads("PARSProbe.fit") as n_threads:
            assert n_threads == torch.get_num_threads() == 1
            with fit_threads("inner") as inner:  # a stage inside keeps the outer's count
                assert inner == torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2  # restored
    assert "This process's cores are busy: 1 of" in caplog.text
    assert "PARSProbe.fit runs on 1 torch threads instead of 2" in caplog.text
    assert caplog.text.count("busy") == 1  # said once, by the outermost


@pytest.mark.parametrize("how", ["set_num_threads", "OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_the_users_choice_is_kept(two_threads_by_default, monkeypatch, caplog, how):
    if how == "set_num_threads":
        monkeypatch.setattr(_threads, "_IMPORT_THREADS", 4)  # set since the import
    else:
        monkeypatch.setenv(how, "2")
    with caplog.at_level(logging.WARNING, logger="braindecode_pars._util.threads"):
        with fit_threads() as n_threads:
            assert n_threads == torch.get_num_threads() == 2
    assert torch.get_num_threads() == 2 and "busy" not in caplog.text


@pytest.mark.parametrize("how", ["flag", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "idle"])
def test_the_command_takes_its_flag_then_the_environment_then_the_idle_cores(
    two_threads_by_default, monkeypatch, how
):
    """``pretrain``'s threads: ``--threads``; else the count the environment set (torchrun
    sets OMP_NUM_THREADS=1 per process), the same at every sitting of a run; else the
    idle cores (1 here)."""
    from braindecode_pars._util.threads import command_threads

    if how not in ("flag", "idle"):
        monkeypatch.setenv(how, "2")
    assert command_threads(3 if how == "flag" else None) == {"flag": 3, "idle": 1}.get(how, 2)


def test_an_idle_machine_keeps_torchs_threads(two_threads_by_default, monkeypatch):
    monkeypatch.setattr(_threads, "idle_cores", lambda interval=0.1, max_age=5.0: 8)
    assert chosen_threads() == 2  # never more than torch's own count


def test_the_estimators_fit_under_the_rule(two_threads_by_default, monkeypatch, caplog):
    """A fit runs on the threads of the rule (1 here), then torch's count comes back."""
    calls = []
    set_num_threads = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.append(n) or set_num_threads(n))
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 2, 200)), np.repeat([0, 1], 10)
    with caplog.at_level(logging.WARNING, logger="braindecode_pars._util.threads"):
        PARSProbe(sfreq=100.0).fit(X, y)
    assert calls == [1, 2] and torch.get_num_threads() == 2
    assert "PARSProbe.fit runs on 1 torch threads instead of 2" in caplog.text


@pytest.mark.serial
@pytest.mark.extended  # measures the machine's cores: make test-extended
def test_a_second_busy_process_lowers_the_idle_cores():
    """A subprocess spinning on one core, pinned to the quietest of this process's cores,
    measured over that core alone (this process's affinity narrowed to it): a core
    measured quiet before (at most half busy; on a machine where every core is busier
    there is nothing to measure, and the test says so) is measured busy with it, and the
    idle cores of both cores, the threads the rule chooses, drop by one."""
    if not hasattr(os, "sched_setaffinity") or usable_cores() < 2:
        pytest.skip("needs two cores and CPU affinity")
    mine = os.sched_getaffinity(0)
    try:
        quiet = {}
        for core in sorted(mine):
            os.sched_setaffinity(0, {core})
            quiet[core] = busy_cores(0.3, max_age=0)
        core = min(quiet, key=quiet.get)
        if quiet[core] > 0.5:
            pytest.skip(f"every core of this process is busy (the quietest: {quiet[core]:.2f})")
        other = min((c for c in quiet if c != core), key=quiet.get)
        pinned = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
        spinner = subprocess.Popen([sys.executable, "-c", pinned])
        try:
            time.sleep(0.5)
            os.sched_setaffinity(0, {core})
            loaded = busy_cores(0.5, max_age=0)
            os.sched_setaffinity(0, {core, other})
            idle = _threads.idle_cores(0.5, max_age=0)
        finally:
            spinner.kill()
            spinner.wait()
    finally:
        os.sched_setaffinity(0, mine)
    assert loaded >= 0.8, (quiet[core], loaded)  # the spinner's core, quiet before
    assert idle <= 1, (idle, quiet)  # of the two cores, one is the spinner's


def proc_stat(busy, idle):
    """The text of a ``/proc/stat`` of 8 cores: the aggregate ``cpu`` line (their sum),
    then a ``cpuN`` line each with ``busy[N]`` jiffies of user time and ``idle[N]`` of
    idle time, and the lines that follow the cores."""

    def line(name, b, i):
        return f"{name} {b} 0 0 {i} 0 0 0 0 0 0"

    cores = [line(f"cpu{n}", b, i) for n, (b, i) in enumerate(zip(busy, idle, strict=True))]
    return "\n".join(
        [line("cpu ", sum(busy), sum(idle)), *cores, "intr 12345 0 0", "ctxt 678", "btime 1"]
    )


@pytest.fixture
def eight_cores_two_own(monkeypatch):
    """A host of 8 cores of which this process may run on cores 6 and 7, its own CPU
    time not moving, and a ``/proc/stat`` that each read takes the first of the samples
    returned from (each read counted in ``reads``), the last one staying; the cache
    emptied."""
    samples, reads = [], []

    def read():
        reads.append(1)
        return samples.pop(0) if len(samples) > 1 else samples[0]

    monkeypatch.setattr(_threads, "_read_proc_stat", read)
    monkeypatch.setattr(_threads.os, "sched_getaffinity", lambda pid: {6, 7}, raising=False)
    monkeypatch.setattr(_threads.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(_threads, "_own_seconds", lambda: 0.0)
    monkeypatch.setattr(_threads, "_last", None)
    return samples, reads


def test_the_other_cores_of_the_host_do_not_count(eight_cores_two_own):
    """Cores 0-5 fully busy, this process's 6 and 7 idle, over one interval: 2 idle cores.
    (The host's aggregate line, 6 of 8 cores busy, scaled to the host, would leave
    max(1, 2 - 6) = 1.)"""
    samples, _ = eight_cores_two_own
    interval = [proc_stat([0] * 8, [0] * 8), proc_stat([100] * 6 + [0, 0], [0] * 6 + [100] * 2)]
    samples[:] = interval
    assert usable_cores() == 2
    assert busy_cores(0, max_age=0) == 0.0
    samples[:] = interval
    assert _threads.idle_cores(0, max_age=0) == 2


def test_the_own_cores_busy_leave_one_thread(eight_cores_two_own):
    """This process's two cores busy (one fully, one three quarters), the others idle:
    1.75 cores busy, and at least one thread is left."""
    samples, _ = eight_cores_two_own
    interval = [proc_stat([0] * 8, [0] * 8), proc_stat([0] * 6 + [100, 75], [100] * 6 + [0, 25])]
    samples[:] = interval
    assert busy_cores(0, max_age=0) == pytest.approx(1.75)
    samples[:] = interval
    assert _threads.idle_cores(0, max_age=0) == 1


def test_a_measurement_is_reused_for_a_few_seconds(eight_cores_two_own, monkeypatch):
    """Two calls within :data:`REUSE_SECONDS` read ``/proc/stat`` once (two reads, before
    and after the interval); a call after it measures again, and sees the change."""
    samples, reads = eight_cores_two_own
    now = [1000.0]
    monkeypatch.setattr(_threads, "_clock", lambda: now[0])
    samples += [proc_stat([0] * 8, [0] * 8), proc_stat([0] * 8, [100] * 8)]
    assert _threads.idle_cores(0) == 2 and len(reads) == 2
    now[0] += _threads.REUSE_SECONDS - 0.5
    assert _threads.idle_cores(0) == 2 and busy_cores(0) == 0.0 and len(reads) == 2
    samples += [proc_stat([100] * 8, [100] * 8)]  # the next interval: every core busy
    now[0] += 1.0
    assert _threads.idle_cores(0) == 1 and len(reads) == 4
    assert busy_cores(0) == 2.0 and len(reads) == 4  # reused again
    assert busy_cores(0, max_age=0) == 0.0 and len(reads) == 6  # forced (the last sample, twice)


def test_without_proc_stat_the_load_average_share_of_the_own_cores_counts(
    eight_cores_two_own, monkeypatch
):
    """No ``/proc/stat`` (a restricted container): the host's load average of 2 on 8
    cores puts 0.5 on this process's 2, leaving 2 idle (the whole load would leave 1);
    without an affinity either (macOS) it is the host's: 8 - 2 = 6 idle cores."""

    def unreadable():
        raise PermissionError(13, "Permission denied", "/proc/stat")

    monkeypatch.setattr(_threads, "_read_proc_stat", unreadable)
    monkeypatch.setattr(_threads.os, "getloadavg", lambda: (2.0, 1.0, 1.0))
    assert busy_cores(0, max_age=0) == 0.5 and _threads.idle_cores(0, max_age=0) == 2
    monkeypatch.delattr(_threads.os, "sched_getaffinity")
    assert usable_cores() == 8 and _threads.idle_cores(0, max_age=0) == 6


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux's /proc/stat")
def test_the_real_proc_stat_gives_between_one_and_the_own_cores():
    busy = busy_cores(0.1, max_age=0)
    assert 0.0 <= busy <= len(os.sched_getaffinity(0))
    assert 1 <= _threads.idle_cores(0.1, max_age=0) <= len(os.sched_getaffinity(0))
