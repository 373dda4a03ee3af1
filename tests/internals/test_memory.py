"""keep_freed_memory: glibc's malloc thresholds set from inside the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from braindecode_pars.pretraining.memory import _MAX_MMAP_THRESHOLD, _glibc, keep_freed_memory

from .._helpers import tiny_config
from ._stubs import stop_before_pretraining

#: A child process: from glibc's lowest thresholds (every block of 128 KiB or more
#: mapped and unmapped, the heap trimmed past 128 KiB free), the minor page faults
#: of allocating, touching and freeing twelve blocks of 900 kB, per round, before and
#: after ``keep_freed_memory()``.
_CHILD = textwrap.dedent(
    """
    import ctypes, resource
    from braindecode_pars.pretraining.memory import _glibc, keep_freed_memory

    libc = _glibc()
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    assert libc.mallopt(-3, 128 * 1024) == 1 and libc.mallopt(-1, 128 * 1024) == 1

    def faults_per_round(rounds=20):
        def one_round():
            blocks = [libc.malloc(900_000) for _ in range(12)]
            for block in blocks:
                ctypes.memset(block, 1, 900_000)
            for block in blocks:
                libc.free(block)
        one_round()
        start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(rounds):
            one_round()
        return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start) / rounds

    before = faults_per_round()
    applied = keep_freed_memory()
    print(before, faults_per_round(), applied)
    """
)


@pytest.mark.serial
@pytest.mark.slow
@pytest.mark.extended  # measures the machine's page faults: make test-extended
@pytest.mark.skipif(_glibc() is None, reason="glibc's malloc only; elsewhere see the next test")
def test_freed_memory_is_reused_instead_of_faulted_in_again():
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True
    ).stdout.split()
    before, after, applied = float(out[0]), float(out[1]), out[2]
    # 12 blocks of 900 kB are about 2,640 pages: all faulted in again at each round
    # under the lowest thresholds, none once freed memory is kept
    assert applied == "True"
    assert before > 2000
    assert after < 10


def test_without_glibc_nothing_is_changed(monkeypatch):
    import braindecode_pars.pretraining.memory as memory

    monkeypatch.setattr(memory, "_glibc", lambda: None)
    assert keep_freed_memory() is False


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(mmap_threshold=_MAX_MMAP_THRESHOLD + 1), ValueError, "'mmap_threshold' must be <= "),
        (dict(mmap_threshold=-1), ValueError, "'mmap_threshold' must be >= 0"),
        (dict(trim_threshold=2**31), ValueError, "'trim_threshold' must be <= "),
        (dict(trim_threshold="256M"), TypeError, "'trim_threshold' must be an int"),
    ],
)
def test_bad_thresholds_are_refused_before_anything_is_set(kwargs, error, match, monkeypatch):
    import braindecode_pars.pretraining.memory as memory

    def no_call():
        raise AssertionError("the allocator was reached")

    monkeypatch.setattr(memory, "_glibc", no_call)
    with pytest.raises(error, match=match):
        keep_freed_memory(**kwargs)


@pytest.mark.parametrize("flags, device, called", [
    ([], "cpu", True),
    ([], "cpu:0", True),
    ({"keep_freed_memory": False}, "cpu", False),
    ([], "cuda", False),
])  # fmt: skip
def test_pretrain_command_keeps_freed_memory_on_a_cpu(flags, device, called, monkeypatch, tmp_path):
    import braindecode_pars.cli as cli
    import braindecode_pars.pretraining.distributed as distributed
    import braindecode_pars.pretraining.memory as memory

    calls = []
    monkeypatch.setattr(memory, "keep_freed_memory", lambda: calls.append(1))
    monkeypatch.setattr(distributed, "init_distributed", lambda device_arg: device)
    stop_before_pretraining(monkeypatch)
    flags = tiny_config(tmp_path, **flags) if flags else flags  # a setting of --config
    with pytest.raises(SystemExit):
        cli.main(["pretrain", "--out", str(tmp_path / "run"), "--device", "cpu", *flags])
    assert bool(calls) is called
