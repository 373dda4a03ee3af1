"""The folder lock: one holder at a time, named to the next, and a dead holder's lock free."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from braindecode_pars._jobs import lock as _lock
from braindecode_pars._jobs.lock import LOCK_FILE, FolderLockedError, folder_lock


def test_the_lock_is_held_during_the_block_and_removed_after(tmp_path):
    folder = tmp_path / "new" / "folder"
    with folder_lock(folder, "a store build") as lock:
        assert lock == folder / LOCK_FILE
        assert lock.read_text() == f"{os.getpid()}\na store build\n"
        with pytest.raises(FolderLockedError, match=rf"in use by process {os.getpid()} \(a st"):
            with folder_lock(folder, "a second build"):
                pass
    assert not lock.exists()
    with pytest.raises(KeyError):
        with folder_lock(folder, "a build that fails"):
            raise KeyError("x")
    with folder_lock(folder, "the next build"):  # released by the failure
        pass


def lock_process(body, ready):
    """A Python process that loads the lock module alone (no package import) as ``lock``
    and runs ``body``, which writes the file ``ready`` once it holds what it must; the
    process, once ``ready`` holds something."""
    preamble = f"""
        import importlib.util, os, pathlib, time
        spec = importlib.util.spec_from_file_location("lock", {_lock.__file__!r})
        lock = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(lock)
        """
    script = textwrap.dedent(preamble) + textwrap.dedent(body)
    process = subprocess.Popen([sys.executable, "-c", script])
    for _ in range(1000):
        if ready.exists() and ready.read_text() or process.poll() is not None:
            break
        subprocess.run(["sleep", "0.01"])
    return process


def holder(folder, ready):
    """A process holding the lock of ``folder`` until killed, having written ``ready``."""
    body = f"""
        with lock.folder_lock({str(folder)!r}, "pretraining"):
            pathlib.Path({str(ready)!r}).write_text("ready")
            time.sleep(60)
        """
    process = lock_process(body, ready)
    assert ready.exists(), "the holder did not take the lock"
    return process


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_another_process_is_refused_with_the_pid_and_its_death_frees_the_lock(tmp_path, sig):
    folder = tmp_path / "out"
    process = holder(folder, tmp_path / "ready")
    try:
        with pytest.raises(FolderLockedError, match=rf"process {process.pid} \(pretraining\)") as e:
            with folder_lock(folder, "a store build"):
                pytest.fail("a second holder entered the block")
        assert e.value.pid == process.pid and e.value.holder == "pretraining"
        assert "so a store build cannot start there" in str(e.value)
    finally:
        process.send_signal(sig)
        process.wait()
    assert (folder / LOCK_FILE).read_text().startswith(f"{process.pid}\n")  # left, stale
    with folder_lock(folder, "a store build") as lock:  # a dead holder's lock does not block
        assert lock.read_text() == f"{os.getpid()}\na store build\n"


def test_a_forked_worker_does_not_keep_its_killed_parents_lock(tmp_path):
    # a flock belongs to the open file, which a fork shares: the store's workers (and
    # DataLoader workers) would hold the folder after their parent was killed
    folder, child_pid = tmp_path / "out", tmp_path / "child"
    body = f"""
        with lock.folder_lock({str(folder)!r}, "a store build"):
            pid = os.fork()
            if pid == 0:  # the worker outlives its parent
                time.sleep(60)
                os._exit(0)
            pathlib.Path({str(child_pid)!r}).write_text(str(pid))
            time.sleep(60)
        """
    process = lock_process(body, child_pid)
    worker = int(child_pid.read_text())
    try:
        process.kill()
        process.wait()
        os.kill(worker, 0)  # the worker is still alive
        with folder_lock(folder, "the rerun"):  # and does not hold the folder
            pass
    finally:
        os.kill(worker, signal.SIGKILL)
