"""The tree that travels to a GPU machine fits its limit: tracked files plus the wheels.

The device machine takes a copy of the working tree: the tracked files and
``.device-wheels/``, which ``make device-wheels`` fills (``benchmarks/device_check.sh``
installs from it). Together they must stay within :data:`LIMIT` (issue 61); the
recordings and encoders that would not fit are compressed (``data/``) or restored from
the history on demand (``make benchmark-encoders``).
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The most the tracked files and the device wheels may hold together.
LIMIT = 60 * 2**20
WHEELS = REPO / ".device-wheels"
#: The line of ``benchmarks/device_wheels.txt`` recording the wheels' measured size.
RECORDED = re.compile(r"^# .*: (\d+) bytes, measured (\d{4}-\d\d-\d\d)", re.M)


def _tracked_sizes():
    """Bytes of each tracked file present in the working tree, by path."""
    if shutil.which("git") is None:
        pytest.skip("git is absent: the tracked files cannot be listed")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True)
    if listed.returncode != 0 or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing is tracked to add up")
    names = [n for n in listed.stdout.decode().split("\0") if n]
    return {n: (REPO / n).stat().st_size for n in names if (REPO / n).is_file()}


def _wheels_size():
    """``.device-wheels/``'s bytes if it is there, else the size recorded when it was built."""
    if WHEELS.is_dir():
        return sum(p.stat().st_size for p in WHEELS.rglob("*") if p.is_file()), "measured now"
    text = (REPO / "benchmarks" / "device_wheels.txt").read_text()
    found = RECORDED.search(text)
    assert found, "benchmarks/device_wheels.txt records no size of .device-wheels/"
    return int(found.group(1)), f"recorded {found.group(2)}"


def test_the_recorded_wheels_size_is_a_plausible_measure():
    found = RECORDED.search((REPO / "benchmarks" / "device_wheels.txt").read_text())
    assert found and 1_000_000 < int(found.group(1)) < 50_000_000


def test_tracked_files_and_device_wheels_fit_the_travel_limit():
    sizes = _tracked_sizes()
    wheels, how = _wheels_size()
    total = sum(sizes.values()) + wheels
    if total > LIMIT:
        folders = {}
        for name, size in sizes.items():
            parts = name.split("/")
            if len(parts) > 2:  # a file two folders down or deeper: counted in its folder
                top = "/".join(parts[:2]) + "/"
                folders[top] = folders.get(top, 0) + size
        biggest = sorted(
            [*sizes.items(), *folders.items(), (".device-wheels/", wheels)],
            key=lambda item: -item[1],
        )[:15]
        listing = "\n".join(f"  {size / 2**20:8.2f} MiB  {name}" for name, size in biggest)
        pytest.fail(
            f"What travels to a GPU machine holds {total / 2**20:.2f} MiB, over "
            f"{LIMIT / 2**20:.0f} MiB: tracked files {sum(sizes.values()) / 2**20:.2f} MiB "
            f"and .device-wheels/ {wheels / 2**20:.2f} MiB ({how}). The biggest files and "
            f"folders:\n{listing}"
        )
