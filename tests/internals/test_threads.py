"""torch's threads in a fit: the idle cores unless the user chose, a warning when the
machine is busy, torch's count restored; and the measure of idle cores under a second
busy process."""

import logging
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from braindecode_pars import PARSProbe
from braindecode_pars._jobs import threads as _threads
from braindecode_pars._jobs.threads import busy_cores, chosen_threads, fit_threads, usable_cores


@pytest.fixture
def two_threads_by_default(monkeypatch):
    """torch at 2 threads, the count it had at import (no user choice), no environment
    variable fixing them, and 1 idle core; torch's count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(_threads, "_IMPORT_THREADS", 2)
    for name in _threads.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_threads, "idle_cores", lambda interval=0.1: 1)
    yield
    torch.set_num_threads(before)


def test_a_busy_machine_lowers_the_threads_for_the_fit_only(two_threads_by_default, caplog):
    with caplog.at_level(logging.WARNING, logger="braindecode_pars._jobs.threads"):
        with fit_threads("PARSProbe.fit") as n_threads:
            assert n_threads == torch.get_num_threads() == 1
            with fit_threads("inner") as inner:  # a stage inside keeps the outer's count
                assert inner == torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2  # restored
    assert "The machine is busy: 1 of" in caplog.text
    assert "PARSProbe.fit runs on 1 torch threads instead of 2" in caplog.text
    assert caplog.text.count("busy") == 1  # said once, by the outermost


@pytest.mark.parametrize("how", ["set_num_threads", "OMP_NUM_THREADS", "MKL_NUM_THREADS"])
def test_the_users_choice_is_kept(two_threads_by_default, monkeypatch, caplog, how):
    if how == "set_num_threads":
        monkeypatch.setattr(_threads, "_IMPORT_THREADS", 4)  # set since the import
    else:
        monkeypatch.setenv(how, "2")
    with caplog.at_level(logging.WARNING, logger="braindecode_pars._jobs.threads"):
        with fit_threads() as n_threads:
            assert n_threads == torch.get_num_threads() == 2
    assert torch.get_num_threads() == 2 and "busy" not in caplog.text


def test_an_idle_machine_keeps_torchs_threads(two_threads_by_default, monkeypatch):
    monkeypatch.setattr(_threads, "idle_cores", lambda interval=0.1: 8)
    assert chosen_threads() == 2  # never more than torch's own count


def test_the_estimators_fit_under_the_rule(two_threads_by_default, monkeypatch, caplog):
    """A fit runs on the threads of the rule (1 here), then torch's count comes back."""
    calls = []
    set_num_threads = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: calls.append(n) or set_num_threads(n))
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 2, 200)), np.repeat([0, 1], 10)
    with caplog.at_level(logging.WARNING, logger="braindecode_pars._jobs.threads"):
        PARSProbe(sfreq=100.0).fit(X, y)
    assert calls == [1, 2] and torch.get_num_threads() == 2
    assert "PARSProbe.fit runs on 1 torch threads instead of 2" in caplog.text


@pytest.mark.serial
def test_a_second_busy_process_lowers_the_idle_cores():
    """A subprocess spinning on one core: the busy cores measured rise by about one (or
    to all of them on a machine already busy), and the idle cores, the threads the rule
    chooses, drop below the usable cores."""
    if usable_cores() < 2:
        pytest.skip("needs two cores")
    quiet = busy_cores(0.5)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        loaded = busy_cores(0.5)
        idle = _threads.idle_cores(0.5)
    finally:
        spinner.kill()
        spinner.wait()
    # about one core more, or every core when others already held the rest
    assert loaded >= min(quiet + 0.5, usable_cores() - 0.5), (quiet, loaded)
    assert idle <= usable_cores() - 1, (idle, loaded)
