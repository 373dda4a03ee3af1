"""Whether a group of files changed since its full check last passed.

Four checks are too long for every landing and guard files that change rarely: the
lab's fault harness run for real (``make test-faults``: signals, kills and full disks to
``store`` and ``pretrain`` in processes of their own, about 7 minutes), the docs built
with every example of the gallery run (``make docs-check``), the GPU device check's
dry run on the CPU (``make test-device``, about 2 minutes) and the pair operator's
Triton kernels run under Triton's interpreter and compiled for an H100 (``make
test-kernels``, 1 to 2 minutes). Each target, once it passes,
records the digest of its group's files in ``.ci/checked.json`` (committed with the
change); ``.ci/run`` compares the tree it was given with that record and runs the full
check of a group whose files differ. So a landing that touches
``pretraining/stopping.py`` without the harness having passed on those bytes runs the
harness in CI; one that touches none of a group's files does not.

Usage::

    python .ci/changed.py faults        # exit 0 and say why when the group changed, else 1
    python .ci/changed.py --record faults   # after its full check passed

The digest is SHA-256 over the group's files that git tracks, path and bytes, read from
the working tree (a fresh clone's tree is the commit's).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / ".ci" / "checked.json"

#: Each group's paths (files or folders), relative to the repository's root.
GROUPS = {
    # what the fault harness exercises and the harness itself
    "faults": (
        "braindecode_pars/pretraining/stopping.py",
        "braindecode_pars/_jobs",
        "benchmarks/bench_faults.py",
        "benchmarks/bench_faults_pretrain.py",
        "benchmarks/rehearsal_tueg.py",
        "benchmarks/lib/stop_trigger.py",
        "benchmarks/lib/process_groups.py",
        "benchmarks/lib/page_cache.py",
        "benchmarks/lib/tueg_tree.py",
        "benchmarks/tests/test_pretrain_faults.py",
        "benchmarks/tests/test_store_faults.py",
        "benchmarks/tests/test_rehearsal.py",
    ),
    # the pages and the examples the gallery runs
    "gallery": ("docs", "examples"),
    # the pair operator's Triton kernels, the PARS model that calls them, their tests
    # and the pins of torch and Triton (constraints.txt)
    "kernels": (
        "braindecode_pars/models/pair",
        "braindecode_pars/models/pretext/pars.py",
        "tests/internals/_interpreted.py",
        "tests/internals/test_pair_decoders.py",
        "tests/internals/test_pair_fallback.py",
        "tests/internals/test_pair_fused.py",
        "constraints.txt",
    ),
    # the GPU device check and what its dry run on the CPU runs
    "device": (
        "benchmarks/device_check.py",
        "benchmarks/device_check.sh",
        "benchmarks/bench_gpu.py",
        "benchmarks/bench_pretrain_loop.py",
        "benchmarks/bench_loop_trace.py",
        "benchmarks/lib/device_steps.py",
        "benchmarks/lib/loops.py",
        "benchmarks/lib/steps.py",
        "benchmarks/tests/test_device_check.py",
    ),
}


def tracked(paths):
    """The files git tracks under ``paths``, sorted."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *paths], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return sorted(p for p in out.split("\0") if p)


def digest(group):
    """SHA-256 of the group's tracked files (path and bytes), and how many there are."""
    files = tracked(GROUPS[group])
    h = hashlib.sha256()
    for name in files:
        path = ROOT / name
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"(missing)")
        h.update(b"\0")
    return h.hexdigest(), len(files)


def read_record():
    return json.loads(RECORD.read_text()) if RECORD.is_file() else {}


def changed(group):
    """``(True, why)`` when the group's digest differs from the one recorded, else
    ``(False, when)``."""
    now, n = digest(group)
    seen = read_record().get(group)
    if seen is None:
        return True, f"{group}: no full check recorded in {RECORD.name}"
    if seen["sha256"] != now:
        return True, (
            f"{group}: {n} files differ from those of its last full check "
            f"(at {seen['commit'][:7]}, {seen['date']})"
        )
    return False, f"{group}: unchanged since its full check at {seen['commit'][:7]}"


def record(group):
    now, n = digest(group)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    data = read_record()
    data[group] = {
        "sha256": now,
        "files": n,
        "commit": head,
        "date": datetime.date.today().isoformat(),
    }
    RECORD.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return f"{group}: recorded the digest of {n} files in {RECORD.relative_to(ROOT)}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("group", choices=sorted(GROUPS))
    parser.add_argument("--record", action="store_true", help="record the group's digest")
    args = parser.parse_args(argv)
    if args.record:
        print(record(args.group))
        return 0
    is_changed, why = changed(args.group)
    print(why)
    return 0 if is_changed else 1


if __name__ == "__main__":
    sys.exit(main())
