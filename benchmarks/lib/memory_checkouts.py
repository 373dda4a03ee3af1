"""What the before/after memory benchmarks share (``bench_read_memory``,
``bench_fit_memory``): the windows they build, the two checkouts they compare and how a
checkout is named in a report."""

from __future__ import annotations

import argparse
import subprocess

from benchmarks.lib.measure import check_at_least_one, compared_checkouts, report_parser

#: The windows' sampling rate (Hz).
SFREQ = 100.0


def make_windows(n_windows, n_chans, n_times, n_recordings, seed=0):
    """``n_windows`` preloaded braindecode windows of (n_chans, n_times), cut without
    overlap from ``n_recordings`` RawArray recordings of white noise (tens of microvolts,
    in volts as MNE holds EEG)."""
    import mne
    import numpy as np
    from braindecode.datasets import BaseConcatDataset, RawDataset
    from braindecode.preprocessing import create_fixed_length_windows

    if n_windows % n_recordings:
        raise SystemExit(
            f"--windows ({n_windows}) must be a multiple of the number of recordings "
            f"({n_recordings})"
        )
    rng = np.random.default_rng(seed)
    info = mne.create_info(n_chans, SFREQ, "eeg")
    datasets = []
    for subject in range(n_recordings):
        data = 2e-5 * rng.standard_normal((n_chans, n_times * n_windows // n_recordings))
        raw = mne.io.RawArray(data, info, verbose="error")
        datasets.append(RawDataset(raw, {"subject": subject, "label": subject % 2}, "label"))
        del data
    return create_fixed_length_windows(
        BaseConcatDataset(datasets),
        window_size_samples=n_times,
        window_stride_samples=n_times,
        on_last_window="drop",
        preload=True,
    )


#: The files a read runs: ``read_windows``'s module and the package modules it imports.
READ_FILES = ("braindecode_pars/io/windows.py", "braindecode_pars/io/resample.py",
              "braindecode_pars/io/windowing.py", "braindecode_pars/_util/checks.py",
              # the same modules in the layout before the package's subfolders
              "braindecode_pars/datasets/adapters.py", "braindecode_pars/datasets/resample.py",
              "braindecode_pars/datasets/windowing.py", "braindecode_pars/_checks.py")  # fmt: skip


def revision(root):
    """The checkout at ``root``: its commit, the last commit that changed the files a read
    runs (:data:`READ_FILES`), and whether they differ from it there."""

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    last = git("log", "-1", "--format=%h", "--", *READ_FILES)
    changed = git("status", "--porcelain", "--", *READ_FILES)
    return f"{head}, read code of {last}" + (" with uncommitted changes" if changed else "")


def memory_parser(doc, n_child):
    """The command line of a before/after memory benchmark on built windows
    (``bench_read_memory`` and ``bench_fit_memory``): ``--out``, ``--before``, the windows' sizes,
    ``--repeats``, and ``--child`` (``n_child`` values) for its fresh processes."""
    parser = report_parser(doc)
    parser.add_argument("--before", help="a checkout of the other revision (git worktree add)")
    parser.add_argument("--windows", type=int, default=400)
    parser.add_argument("--chans", type=int, default=19)
    parser.add_argument("--times", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="processes per cell")
    parser.add_argument("--child", nargs=n_child, help=argparse.SUPPRESS)
    return parser


def memory_checkouts(parser, args, needs, *counts):
    """The checkouts to measure, by name (see ``compared_checkouts``), once the options of
    :func:`memory_parser` are checked: the sizes, ``--repeats`` and the options
    ``counts`` at least 1, ``--before`` a checkout holding the file ``needs``."""
    check_at_least_one(parser, args, "windows", "chans", "times", "repeats", *counts)
    return compared_checkouts(parser, args.before, needs)
