"""Peak memory of preparing a pretraining corpus and of reading it, against its size.

Writes N synthetic EDF recordings (19 EEG channels, an ECG channel, 256 Hz, 10 min
each by default) to a temporary folder, for several N, and measures, each in a fresh
process, the peak resident memory (``VmHWM`` of ``/proc/self/status``) of:

- ``store, streamed``: ``write_window_store(load_recordings(..., lazy=True), store)``,
  one recording read, preprocessed (0.3 Hz high-pass, 45 Hz low-pass, 100 Hz), windowed
  (30 s) and written at a time;
- ``store, in memory``: ``write_window_store(load_recordings(...), store)``, every
  recording preprocessed in memory first (the path before streaming);
- ``read, store``: ``SingleChannelWindows.from_store(store)`` and ``--draws`` items
  drawn at random in batches of 256 (what each pretraining process does);
- ``read, in memory``: ``SingleChannelWindows(load_recordings(...))`` and the same
  draws (what each process did with ``pretrain --recordings``).

``VmHWM`` counts the pages of the mapped store that the draws touched (file pages,
shared by every process through the page cache and dropped first under pressure);
the table gives them apart (``RssFile`` after the draws) from the peak of the
process's own memory (``RssAnon``, sampled by a thread every 5 ms).

Usage::

    python -m benchmarks.bench_corpus_memory --out benchmarks/results/corpus_memory.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.lib.edf_recordings import N_EEG, SFREQ, write_recordings
from benchmarks.lib.measure import in_child, machine, status_mib, write_report

WINDOW_SECONDS, LOAD = 30.0, dict(sfreq=100.0, window_seconds=30.0)


class PeakSampler(threading.Thread):
    """Samples ``RssAnon`` (the process's own memory) every few milliseconds; keeps the
    largest. ``VmHWM`` also counts mapped file pages; this peak does not."""

    def __init__(self, period=0.005):
        super().__init__(daemon=True)
        self.period, self.peak, self.done = period, status_mib("RssAnon"), threading.Event()

    def run(self):
        while not self.done.wait(self.period):
            self.peak = max(self.peak, status_mib("RssAnon"))

    def stop(self):
        self.done.set()
        self.join()
        return max(self.peak, status_mib("RssAnon"))


def child(step, folder, store, draws):
    """Run one measured step in this (fresh) process; print a JSON line."""
    import numpy as np

    from braindecode_pars.io.recordings import load_recordings
    from braindecode_pars.pretraining.views import SingleChannelWindows
    from braindecode_pars.store.write import write_window_store

    sampler = PeakSampler()
    sampler.start()
    t0 = time.perf_counter()
    extra = {}
    pattern = str(Path(folder) / "*.edf")
    if step == "store, streamed":
        write_window_store(load_recordings(pattern, lazy=True, **LOAD), store, overwrite=True)
    elif step == "store, in memory":
        write_window_store(load_recordings(pattern, **LOAD), store, overwrite=True)
    elif step.startswith("read"):
        if step == "read, store":
            view = SingleChannelWindows.from_store(store)
        else:
            view = SingleChannelWindows(load_recordings(pattern, **LOAD))
        rng = np.random.default_rng(0)
        for _ in range(0, draws, 256):
            batch = view.__getitems__(rng.integers(0, len(view), 256).tolist())
            assert batch[0][0].shape == (1, 3000)
        extra = {"n_windows": len(view)}
    elif step != "import":
        raise ValueError(step)
    seconds = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "VmHWM": status_mib("VmHWM"),
                "peak RssAnon": sampler.stop(),
                "RssAnon": status_mib("RssAnon"),
                "RssFile": status_mib("RssFile"),
                "seconds": seconds,
                **extra,
            }
        )
    )


STEPS = ("store, streamed", "store, in memory", "read, store", "read, in memory")
STORE_STEPS = ("store, streamed", "read, store")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    parser.add_argument("--sizes", nargs="+", type=int, default=[5, 20, 80])
    parser.add_argument(
        "--store-only-sizes",
        nargs="*",
        type=int,
        default=[320],
        help="larger N measured on the store path only (the in-memory path takes N times "
        "the memory)",
    )
    parser.add_argument("--seconds", type=float, default=600.0, help="length of a recording")
    parser.add_argument("--draws", type=int, default=4096, help="items drawn when reading")
    parser.add_argument("--child", nargs=4, metavar=("STEP", "FOLDER", "STORE", "DRAWS"))
    args = parser.parse_args()
    if args.child:
        step, folder, store, draws = args.child
        return child(step, folder, store, int(draws))

    work = Path(tempfile.mkdtemp(prefix="corpus_memory_"))
    script = __spec__.name
    try:
        base = in_child(script, "import", work, work / "none", 0)
        rows = []
        sizes = [(n, STEPS) for n in args.sizes]
        sizes += [(n, STORE_STEPS) for n in args.store_only_sizes]
        for n, steps in sizes:
            folder, store = work / f"edf{n}", work / f"store{n}"
            write_recordings(folder, n, args.seconds)
            for step in steps:
                m = in_child(script, step, folder, store, args.draws)
                rows.append((n, step, m))
                print(n, step, m, flush=True, file=sys.stderr)
            index_kib = os.path.getsize(store / "index.npz") / 1024
            data_mib = os.path.getsize(store / "data.f32") / 2**20
            rows.append((n, "store files", {"index": index_kib, "data": data_mib}))
            shutil.rmtree(folder)
            shutil.rmtree(store)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    with open("/proc/meminfo") as f:
        total_gib = int(f.readline().split()[1]) / 2**20
    lines = [
        "# Peak memory of preparing and reading a pretraining corpus",
        "",
        f"Machine: {machine()}, {os.cpu_count()} cores, {total_gib:.0f} GiB of memory. "
        f"Date: {datetime.date.today().isoformat()}.",
        "",
        "Command: `python -m benchmarks.bench_corpus_memory --out "
        "benchmarks/results/corpus_memory.md`",
        "",
        f"N synthetic EDF recordings of {args.seconds / 60:g} min, {N_EEG} EEG channels and "
        f"an ECG channel at {SFREQ:g} Hz (left out by `load_recordings`), preprocessed to "
        f"100 Hz and cut into {WINDOW_SECONDS:g}-s windows; each figure from a fresh process. "
        f"Reading draws {args.draws} single-channel 30-s crops at random, in batches of 256. "
        f"A process that only imports the package peaks at {base['VmHWM']:.0f} MiB "
        f"(RssAnon {base['peak RssAnon']:.0f} MiB, RssFile {base['RssFile']:.0f} MiB).",
        "",
        "Columns, in MiB: the peak resident memory (`VmHWM`), and above the import-only "
        "process: that peak, the peak of the process's own memory (`RssAnon`, sampled "
        "every 5 ms) and the mapped file pages after the step (`RssFile`: the store's "
        "pages that the draws touched, which every process mapping the store shares "
        "through the page cache).",
        "",
        "| N | step | peak VmHWM | VmHWM above import | own memory (RssAnon) peak above "
        "import | mapped pages (RssFile) above import | time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    files = {}
    for n, step, m in rows:
        if step == "store files":
            files[n] = m
            continue
        lines.append(
            f"| {n} | {step} | {m['VmHWM']:.0f} | {m['VmHWM'] - base['VmHWM']:.0f} "
            f"| {m['peak RssAnon'] - base['peak RssAnon']:.0f} "
            f"| {m['RssFile'] - base['RssFile']:.0f} "
            f"| {m['seconds']:.1f} |"
        )
    lines += [
        "",
        "| N | windows | store index (KiB) | store data (MiB) |",
        "|---|---|---|---|",
    ]
    windows = {n: m["n_windows"] for n, step, m in rows if step == "read, store"}
    for n, m in files.items():
        lines.append(f"| {n} | {windows[n]} | {m['index']:.1f} | {m['data']:.0f} |")
    lines += [
        "",
        "Reading the figures: building a store from a stream holds one recording (as MNE "
        "holds it, float64, while it is filtered and resampled), whatever N; building it "
        "from windows in memory, and the in-memory view, hold every recording. A process "
        "reading the store holds its index and little else of its own; its resident "
        "memory also counts the store's pages it has mapped: the kernel maps the aligned "
        "64 KiB around each page a crop faults in, so a 12-KiB crop maps at most 128 KiB, "
        f"and {args.draws} crops at most {args.draws * 128 / 1024:.0f} MiB, or the whole "
        "store when it is smaller. Over a long run they grow to the part of the store "
        "read, up to its size: page cache that every process mapping the store shares "
        "(counted in each one's resident memory, held once), and the first memory the "
        "kernel takes back.",
    ]
    write_report(lines, args.out)


if __name__ == "__main__":
    main()
