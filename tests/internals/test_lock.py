"""The folder lock: one holder at a time, named to the next, a dead holder's lock free, a
second holder in the process refused before the file is opened (NFS), and filesystems
without flock (a warning, and the command goes on) or failing otherwise (an error naming
the folder), through the commands too."""

import errno
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading

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


#: Seconds a lock call may take before its test fails: ``folder_lock`` refuses or takes
#: a lock at once; one that blocked would wait for the other holder (sleeping 60 s).
LOCK_SECONDS = 20


def take_lock(folder, what):
    """Take and release the lock of ``folder`` in a thread, the contents of the lock file
    while held; the test fails, rather than hangs, if ``folder_lock`` has not returned
    within :data:`LOCK_SECONDS` (a lock that blocks instead of refusing). Its error, as
    ``FolderLockedError``, is raised here."""
    outcome = {}

    def run():
        try:
            with folder_lock(folder, what) as lock:
                outcome["text"] = lock.read_text()
        except BaseException as err:  # pytest's outcomes too, raised in the test's thread
            outcome["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(LOCK_SECONDS)
    if thread.is_alive():
        pytest.fail(
            f"folder_lock({str(folder)!r}) did not return within {LOCK_SECONDS} s: it "
            "blocked on another holder's lock instead of refusing it"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["text"]


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
            take_lock(folder, "a store build")  # not granted, and not waited for
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
            if pid == 0:  # the worker outlives its parent; it says it runs once its fork
                # handlers have run (the parent writing it raced them on a busy machine)
                pathlib.Path({str(child_pid)!r}).write_text(str(os.getpid()))
                time.sleep(60)
                os._exit(0)
            time.sleep(60)
        """
    process = lock_process(body, child_pid)
    worker = int(child_pid.read_text())
    try:
        process.kill()
        process.wait()
        os.kill(worker, 0)  # the worker is still alive
        assert take_lock(folder, "the rerun") == f"{os.getpid()}\nthe rerun\n"  # not held
    finally:
        os.kill(worker, signal.SIGKILL)


def test_a_second_holder_in_this_process_is_refused_before_opening_and_the_first_holds(
    tmp_path, monkeypatch
):
    """On NFS a second ``flock`` of the file in the same process would be granted, and its
    close would free the first: the second holder is refused from the registry, the lock
    file never opened, and the folder stays locked against another process."""
    folder = tmp_path / "out"
    with folder_lock(folder, "a store build") as lock:
        opened = []
        monkeypatch.setattr(_lock, "open", lambda *a: opened.append(a), raising=False)
        with pytest.raises(FolderLockedError, match=rf"'{folder}' is in use by process") as e:
            with folder_lock(folder, "pretraining"):
                pytest.fail("a second holder entered the block")
        assert opened == [] and (e.value.pid, e.value.holder) == (os.getpid(), "a store build")
        assert "so pretraining cannot start there" in str(e.value)
        monkeypatch.undo()
        assert lock.read_text() == f"{os.getpid()}\na store build\n"
        ready = tmp_path / "refused"
        child = lock_process(
            f"""
            try:
                with lock.folder_lock({str(folder)!r}, "another process"):
                    pathlib.Path({str(ready)!r}).write_text("entered")
            except lock.FolderLockedError as err:
                pathlib.Path({str(ready)!r}).write_text(f"refused: {{err.pid}}")
            """,
            ready,
        )
        assert child.wait() == 0
        assert ready.read_text() == f"refused: {os.getpid()}"
        with folder_lock(folder, "the same run", reentrant=True):  # joins, as before
            pass
        assert lock.exists()  # the join's end leaves the first holder's lock
    assert not lock.exists()


def flock_failing(monkeypatch, code):
    """``fcntl.flock`` raising ``OSError`` of errno ``code`` for a lock (unlocking works)."""
    flock = _lock.fcntl.flock

    def failing(fd, operation):
        if operation & _lock.fcntl.LOCK_EX:
            raise OSError(code, os.strerror(code))
        return flock(fd, operation)

    monkeypatch.setattr(_lock.fcntl, "flock", failing)


@pytest.mark.parametrize("code", sorted(_lock.NO_FLOCK), ids=errno.errorcode.get)
def test_a_filesystem_without_flock_warns_once_and_goes_on(tmp_path, monkeypatch, caplog, code):
    """Lustre without flock (ENOSYS), NFS without lockd (ENOLCK), FUSE (EOPNOTSUPP), EINVAL:
    the block runs, unlocked, with one warning per folder naming it; the lock file it
    opened to try is gone, and the registry still refuses a second holder in the process."""
    flock_failing(monkeypatch, code)
    folder, other = tmp_path / "out", tmp_path / "other"
    with caplog.at_level(logging.WARNING, logger="braindecode_pars._jobs.lock"):
        for _ in range(2):
            with folder_lock(folder, "a store build") as lock:
                assert not lock.exists()
                with pytest.raises(FolderLockedError, match="is in use by process"):
                    with folder_lock(folder, "a second build"):
                        pass
                with folder_lock(folder, "the same run", reentrant=True):
                    pass
        with folder_lock(other, "pretraining"):
            pass
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.args[0] for r in warnings] == [folder, other]  # once per folder
    assert f"errno {code}" in warnings[0].getMessage()
    assert "not locked against other processes" in warnings[0].getMessage()
    assert os.listdir(folder) == [] and not _lock._HELD


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES], ids=errno.errorcode.get)
def test_another_flock_error_is_raised_naming_the_folder(tmp_path, monkeypatch, code):
    flock_failing(monkeypatch, code)
    folder = tmp_path / "out"
    with pytest.raises(_lock.LockFileError, match=rf"'{folder}' cannot be locked for a st") as e:
        with folder_lock(folder, "a store build"):
            pytest.fail("the block ran")
    assert e.value.errno == code and isinstance(e.value, OSError)
    assert f"errno {code}" in str(e.value) and not _lock._HELD
    assert os.listdir(folder) == []  # the lock file tried is removed
    monkeypatch.undo()
    with folder_lock(folder, "the rerun"):  # nothing left held
        pass


def test_the_commands_go_on_without_flock_and_exit_in_one_line_on_a_lock_error(
    tmp_path, monkeypatch, caplog, capsys
):
    """``store`` and ``pretrain`` with ``flock`` raising ENOLCK (NFS without lockd) run, with
    the warning; raising EACCES they exit with one line naming --out, before any work."""
    from braindecode_pars import cli

    from ._stubs import stop_before_pretraining
    from .test_store_build import save_recordings

    pattern = save_recordings(tmp_path / "rec", 1, seconds=20.0)
    store = ["store", "--recordings", pattern, "--sfreq", "100", "--window-seconds", "5"]
    flock_failing(monkeypatch, errno.EACCES)
    with pytest.raises(SystemExit) as refused:
        cli.main([*store, "--out", str(tmp_path / "refused")])
    message = str(refused.value.code)
    assert message.startswith("braindecode-pars store: --out '") and "\n" not in message
    assert "cannot be locked for a store build: Permission denied" in message
    assert os.listdir(tmp_path / "refused") == []
    flock_failing(monkeypatch, errno.ENOLCK)
    with caplog.at_level(logging.WARNING, logger="braindecode_pars._jobs.lock"):
        assert cli.main([*store, "--out", str(tmp_path / "store")]) == 0
    assert "4 windows of 1 recordings written to" in capsys.readouterr().out
    assert f"'{tmp_path / 'store'}' is on a filesystem without flock (No locks" in caplog.text

    given = stop_before_pretraining(monkeypatch)
    flock_failing(monkeypatch, errno.EACCES)
    run = ["pretrain", "--out", str(tmp_path / "run"), "--device", "cpu", "--threads", "1"]
    with pytest.raises(SystemExit, match=r"^braindecode-pars pretrain: --out '.*' cannot be lo"):
        cli.main(run)
    assert given == {}
    flock_failing(monkeypatch, errno.ENOLCK)
    with pytest.raises(SystemExit) as done:  # stop_before_pretraining's, in the run
        cli.main(run)
    assert done.value.code == 0 and "lr" in given


def test_a_reentrant_holder_in_another_thread_keeps_the_lock_after_the_first_leaves(tmp_path):
    # the first holder (a command) leaves while a reentrant one (its training, in another
    # thread) is still inside: the lock stays held until that one leaves too
    import threading

    joined, first_left, check_done = threading.Event(), threading.Event(), threading.Event()
    inside = {}

    def reentrant():
        with folder_lock(tmp_path, "the training", reentrant=True):
            joined.set()
            first_left.wait(5)
            inside["file"] = (tmp_path / LOCK_FILE).is_file()
            try:
                with folder_lock(tmp_path, "a second run"):
                    inside["second"] = "admitted"
            except FolderLockedError:
                inside["second"] = "refused"
            check_done.set()

    with folder_lock(tmp_path, "the command"):
        thread = threading.Thread(target=reentrant)
        thread.start()
        assert joined.wait(5)
    first_left.set()
    assert check_done.wait(5)
    thread.join(5)
    assert inside == {"file": True, "second": "refused"}
    assert not (tmp_path / LOCK_FILE).exists()  # released by the last holder
    with folder_lock(tmp_path, "the next run"):  # and free again
        pass
