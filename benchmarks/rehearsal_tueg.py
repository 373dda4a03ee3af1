"""A rehearsal of pretraining at TUEG's scale: a synthetic TUEG tree stored by several
processes, killed and resumed, read cold and warm, and pretrained on under torchrun,
killed and resumed.

Stages, each recorded in ``<work>/rehearsal.json`` when done (a stopped rehearsal run
again continues from the first stage not done) and logged, with every command's output,
to ``<work>/rehearsal.log``:

1. ``tree``: a synthetic tree of ``--gb`` GB of EDF files laid out as TUEG
   (``make_tueg_tree.py``: its folders and file names, the three montages, 250 to
   512 Hz, varying channel sets, a few files cut short or unreadable);
2. ``store``: the lab's ``store --tueg ... --jobs N --on-error skip``, killed
   (SIGKILL) once a third of the recordings are in its journal, then the same command
   again, which resumes the build; figures: the time of both sittings, GB of EDF read
   and of store written per second, hours per TB of EDF;
3. ``read``: random 30-s crops per second from the store in one process, one thread,
   cold (its pages evicted with ``posix_fadvise(POSIX_FADV_DONTNEED)``) and warm, read
   at random and in the order of the disk;
4. ``pretrain``: ``torchrun --nproc_per_node 2 -m braindecode_pars.cli pretrain`` on the
   CPU, a small encoder, ``--steps`` steps read in disk order with the state saved every
   epoch, killed (SIGKILL) after its first saved epoch, then the same command again,
   which resumes it; figures: steps per second and crops per second of the two processes;
5. ``report``: the figures in ``--results`` (Markdown) and a CSV beside it, with the
   extrapolation to TUEG.

Usage (the rehearsal at 10 GB; ``--gb 0.05`` proves the script in a minute or two)::

    python -m benchmarks.rehearsal_tueg --work /var/tmp/rehearsal --gb 10 \\
        --results benchmarks/results/rehearsal_tueg.md
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler

from benchmarks.lib.measure import machine
from benchmarks.lib.page_cache import cached_fraction, drop_cached_pages
from benchmarks.lib.tueg_tree import add_tree_arguments, make_tree, parse_tree_arguments
from braindecode_pars.hub.folders import run_state, run_status
from braindecode_pars.pretraining import SingleChannelWindows
from braindecode_pars.pretraining.disk_order import DiskOrderBatches

logger = logging.getLogger("rehearsal_tueg")
STAGES = ("tree", "store", "read", "pretrain", "report")
#: TUEG stored as the paper prepares it (19 channels, 200 Hz, float32): issue 58's figure.
TUEG_STORE_TB = 1.5
#: Windows of the paper's pretraining corpus (YSYW and TUEG), and one H200's compiled PARS
#: step at the paper's size, batch 256, CUDA graphs (results/gpu_h200_cuda_graphs.md).
PAPER_WINDOWS, H200_WINDOWS_PER_S = 1.5e6, 23_086
#: The smallest encoder (the test suite's) and the command line's small one.
ENCODERS = {
    "tiny": {"emb_dim": 16, "depth": 1, "n_heads": 2, "ff_dim": 16},
    "small": {},
}


class Stages:
    """What the rehearsal has done, kept in ``rehearsal.json`` after every stage."""

    def __init__(self, work):
        self.path = Path(work) / "rehearsal.json"
        self.done = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def record(self, stage, figures):
        self.done[stage] = figures
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.done, indent=1))
        os.replace(tmp, self.path)


def _env():
    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": root + (":" + path if path else "")}


def run_sitting(cmd, log, kill_when=None, poll=0.1, timeout=None):
    """Run ``cmd`` (its output appended to ``log``); with ``kill_when``, a function
    polled every ``poll`` s, SIGKILL the command's process group once it says True.

    Returns
    -------
    seconds : float
    killed : bool
    returncode : int
    """
    logger.info("$ %s", shlex.join(map(str, cmd)))
    with open(log, "a") as out:
        out.flush()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(map(str, cmd)), stdout=out, stderr=subprocess.STDOUT, env=_env(),
            start_new_session=True,
        )  # fmt: skip
        killed = False
        while proc.poll() is None:
            if kill_when is not None and not killed and kill_when():
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                logger.info("killed (SIGKILL) after %.1f s", time.perf_counter() - t0)
            if timeout is not None and time.perf_counter() - t0 > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                raise TimeoutError(f"{cmd[:6]} ran past {timeout} s")
            time.sleep(poll)
        seconds = time.perf_counter() - t0
    if proc.returncode != 0 and not killed:
        raise RuntimeError(f"{shlex.join(map(str, cmd))} failed ({proc.returncode}): see {log}")
    return seconds, killed, proc.returncode


def _lab():
    """The lab's command line, which stores the paper's corpora (TUEG among them)."""
    return [sys.executable, "-m", "benchmarks.lab"]


def _journal_lines(store):
    journal = Path(store) / "journal.jsonl"
    if not journal.is_file():
        return 0
    with open(journal, "rb") as f:
        return f.read().count(b"\n")


def stage_store(args, tree, log):
    """Store the tree, killed once partway and resumed: the figures. A store left by a
    rehearsal stopped within this stage is removed first, so that the times are whole."""
    store = Path(args.work) / "store"
    shutil.rmtree(store, ignore_errors=True)
    help_text = subprocess.run(
        [*_lab(), "store", "--help"], capture_output=True, text=True, env=_env()
    ).stdout
    cmd = [*_lab(), "store", "--tueg", tree["edf"], "--allow-test-patients", "--out", store]
    cmd += ["--on-error", "skip"]
    jobs = "--jobs" in help_text
    if jobs:
        cmd += ["--jobs", args.jobs]
    else:
        logger.warning("'store' has no --jobs here: the store is written by one process")
    if args.dtype != "float32":
        cmd += ["--dtype", args.dtype]
    at = max(1, tree["files"] // 3)
    first, killed, _ = run_sitting(cmd, log, kill_when=lambda: _journal_lines(store) >= at)
    stored_at_kill = _journal_lines(store)
    second, _, _ = run_sitting(cmd, log)
    info = json.loads((store / "info.json").read_text())
    data = store / info.get("data_file", "data.f32")
    seconds = first + second
    edf_gb, stored_gb = tree["bytes"] / 1e9, data.stat().st_size / 1e9
    return {
        "command": shlex.join(map(str, cmd)),
        "jobs": args.jobs if jobs else 1,
        "killed": killed,
        "recordings_at_kill": stored_at_kill,
        "first_sitting_s": round(first, 1),
        "second_sitting_s": round(second, 1),
        "seconds": round(seconds, 1),
        "edf_gb": round(edf_gb, 3),
        "stored_gb": round(stored_gb, 3),
        "edf_gb_per_s": round(edf_gb / seconds, 4),
        "stored_gb_per_s": round(stored_gb / seconds, 4),
        "hours_per_tb_edf": round(seconds / 3600 / (edf_gb / 1000), 2),
        "hours_per_tb_stored": round(seconds / 3600 / (stored_gb / 1000), 2),
        "n_recordings": info["n_recordings"],
        "n_windows": info["n_windows"],
        "n_skipped": info.get("n_recordings_skipped", len(info.get("skipped", []))),
        "skipped": [s.get("recording") for s in info.get("skipped", [])],
        "store": str(store),
    }


class BatchedReads(Dataset):
    """Batches of a :class:`~braindecode_pars.pretraining.SingleChannelWindows`
    read whole, as pretraining's DataLoader reads them: ``reads[indices]`` is the view's
    ``batch(indices)`` (one array of crops, no collation), for a DataLoader with
    ``batch_size=None`` and a ``BatchSampler``."""

    def __init__(self, view):
        self.view = view

    def __len__(self):
        return len(self.view)

    def __getitem__(self, indices):
        return self.view.batch(np.asarray(indices, dtype=np.int64))


def random_loader(view, batch_size):
    """Pretraining's read: batches of random windows through :class:`BatchedReads`, endless."""
    sampler = RandomSampler(view, replacement=True, num_samples=1 << 40)
    batches = BatchSampler(sampler, batch_size, drop_last=False)
    return DataLoader(BatchedReads(view), sampler=batches, batch_size=None)


def disk_loader(view, batch_size, prefetch=True, seed=0):
    """The read in the order of the disk; its ``set_epoch`` is the dataset's."""
    batches = DiskOrderBatches(view, batch_size, seed=seed, prefetch=prefetch)
    loader = DataLoader(batches, batch_size=None)
    loader.set_epoch = batches.set_epoch
    return loader


def crops_per_second(loader, n_crops):
    """Crops per second ``loader`` gives over ``n_crops`` after its first batch, epoch
    after epoch (each a new order, for a loader with ``set_epoch``)."""
    count, epoch, seconds, first = 0, 0, 0.0, True
    while count < n_crops:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(epoch)
        it = iter(loader)
        t0 = time.perf_counter()
        for X, _ in it:
            if first:  # first batch read: the clock starts now
                first, t0 = False, time.perf_counter()
                continue
            count += len(X)
            if count >= n_crops:
                break
        seconds += time.perf_counter() - t0
        del it
        epoch += 1
    return count / seconds


def stage_read(args, store, batch_size=256):
    """Crops per second, cold and warm, random and in disk order (one process): rows of
    (read, cache, crops, crops/s, cached share before, after).

    A cold row reads as many crops as the store has windows at most (one epoch of the
    disk-order read, a crop of one channel of each window), so that it reads from the
    disk and not from pages it brought in itself. Every row maps the store anew, after
    the previous row's maps are gone: pages mapped by a live process are not evicted."""
    n_times = int(30.0 * 200.0)  # the paper's pretraining crops: 30 s at 200 Hz
    reads = {
        "random, memory-mapped": lambda v: random_loader(v, batch_size),
        "disk order": lambda v: disk_loader(v, batch_size),
        "disk order, no read-ahead": lambda v: disk_loader(v, batch_size, prefetch=False),
    }
    info = json.loads((Path(store) / "info.json").read_text())
    path = Path(store) / info.get("data_file", "data.f32")
    n_windows = len(SingleChannelWindows.from_store(store, n_times=n_times))
    rows = []
    for cache in ("cold", "warm"):
        for read, make in reads.items():
            gc.collect()
            if cache == "cold":
                drop_cached_pages(path)
            else:
                with open(path, "rb") as f:  # read the whole file once: it is cached
                    while f.read(1 << 24):
                        pass
            before = cached_fraction(path)
            view = SingleChannelWindows.from_store(store, n_times=n_times)
            loader = make(view)
            crops = min(args.crops, n_windows) if cache == "cold" else args.crops
            rate = crops_per_second(loader, crops)
            del loader, view
            gc.collect()
            rows.append(dict(read=read, cache=cache, crops=crops, crops_per_s=round(rate),
                             cached_before=round(before, 3),
                             cached_after=round(cached_fraction(path), 3)))  # fmt: skip
            logger.info("%s", rows[-1])
    return {"rows": rows}


def _run_epoch(run):
    try:
        return run_status(run)["epoch"]
    except (OSError, ValueError):  # being written
        return 0


def stage_pretrain(args, store, log):
    """torchrun, 2 CPU processes, killed after its first saved epoch and resumed (a run
    left by a rehearsal stopped within this stage is removed first)."""
    run = Path(args.work) / "run"
    shutil.rmtree(run, ignore_errors=True)
    config = Path(args.work) / "encoder.json"
    # the settings only --config sets: the encoder's, a state every epoch, no compilation
    settings = dict(checkpoint_minutes=0, compile=False, amp=False)
    config.write_text(json.dumps({**ENCODERS[args.encoder], **settings}))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    cmd += [2, "-m", "braindecode_pars.cli", "pretrain", "--store", store, "--out", run]
    cmd += ["--config", config, "--device", "cpu", "--threads", 1, "--steps", args.steps]
    cmd += ["--batch-size", args.batch_size, "--read", "disk", "--window-seconds", 30]
    first, killed, _ = run_sitting(cmd, log, kill_when=lambda: _run_epoch(run) >= 1)
    epochs_at_kill = _run_epoch(run)
    second, _, _ = run_sitting(cmd, log)
    history = json.loads((run_state(run) / "history.json").read_text())
    steps = sum(row["train_batch_count"] for row in history)
    seconds = sum(row["dur"] for row in history)
    resumed = f"Resuming pretraining from {run}" in Path(log).read_text()
    return {
        "command": shlex.join(map(str, cmd)),
        "killed": killed,
        "epochs_at_kill": epochs_at_kill,
        "resumed": resumed,
        "epochs": len(history),
        "steps": steps,
        "first_sitting_s": round(first, 1),
        "second_sitting_s": round(second, 1),
        "epoch_seconds": round(seconds, 1),
        "steps_per_s": round(steps / seconds, 2),
        "crops_per_s": round(steps * 2 * args.batch_size / seconds, 1),
        "finished": (run / "encoder.pt").is_file(),
        "encoder": args.encoder,
        "final_train_loss": history[-1]["train_loss"],
    }


def extrapolation(store, read):
    """TUEG-sized figures from the rehearsal's, with what they assume."""
    rate = store["stored_gb_per_s"]
    cold = {r["read"]: r["crops_per_s"] for r in read["rows"] if r["cache"] == "cold"}
    warm = {r["read"]: r["crops_per_s"] for r in read["rows"] if r["cache"] == "warm"}
    return {
        "tueg_store_hours": round(TUEG_STORE_TB * 1000 / rate / 3600, 1),
        "cold_disk_order": cold.get("disk order"),
        "cold_random": cold.get("random, memory-mapped"),
        "warm_disk_order": warm.get("disk order"),
        "warm_random": warm.get("random, memory-mapped"),
        "processes_per_h200": round(H200_WINDOWS_PER_S / max(cold.get("disk order", 1), 1), 2),
        "epoch_minutes_one_process_cold": round(
            PAPER_WINDOWS / max(cold.get("disk order", 1), 1) / 60, 1
        ),
    }


def report(args, done):
    """The Markdown lines of the rehearsal's figures."""
    tree, store, read, train = (done[s] for s in ("tree", "store", "read", "pretrain"))
    ext = extrapolation(store, read)
    cores = os.cpu_count()
    lines = [
        "# Rehearsal at TUEG's scale",
        "",
        f"Machine: {machine()}, {cores} cores. Command: `{args.command}`",
        "",
        f"Tree: {tree['files']} EDF files of {tree['subjects']} subjects, "
        f"{tree['bytes'] / 1e9:.2f} GB (montages {tree['montages']}, rates {tree['sfreqs']} "
        f"Hz), {len(tree['truncated'])} cut short in their data and "
        f"{len(tree.get('unreadable', []))} in their header.",
        "",
        "## Store",
        "",
        f"`{store['command']}`",
        "",
        f"- killed (SIGKILL) with {store['recordings_at_kill']} recordings in its journal: "
        f"{store['killed']}; the same command resumed it",
        f"- first sitting {store['first_sitting_s']} s, second {store['second_sitting_s']} s, "
        f"{store['seconds']} s in all with {store['jobs']} processes",
        f"- {store['n_recordings']} recordings stored, {store['n_windows']} windows, "
        f"{store['n_skipped']} skipped (listed in info.json)",
        f"- {store['edf_gb']} GB of EDF read, {store['stored_gb']} GB stored: "
        f"{store['edf_gb_per_s']} GB of EDF and {store['stored_gb_per_s']} GB stored per "
        f"second, {store['hours_per_tb_edf']} hours per TB of EDF "
        f"({store['hours_per_tb_stored']} hours per TB stored)",
        "",
        "## Reading (one process, one thread, 30-s crops at 200 Hz, batch 256)",
        "",
        "| read | cache | crops | crops/s | cached share before | after |",
        "|---|---|---|---|---|---|",
    ]
    for r in read["rows"]:
        lines.append(
            f"| {r['read']} | {r['cache']} | {r['crops']:,} | {r['crops_per_s']:,} | "
            f"{r['cached_before']:.3f} | {r['cached_after']:.3f} |"
        )
    lines += [
        "",
        "*cold*: the store's pages evicted first (`posix_fadvise(POSIX_FADV_DONTNEED)`), at "
        "most one crop per window read; *warm*: the store read once first.",
    ]
    lines += [
        "",
        "## Pretraining",
        "",
        f"`{train['command']}`",
        "",
        f"- killed (SIGKILL) after {train['epochs_at_kill']} saved epochs: {train['killed']}; "
        f"resumed: {train['resumed']}; finished: {train['finished']}",
        f"- {train['steps']} steps of 2 x {args.batch_size} crops in {train['epochs']} epochs, "
        f"{train['epoch_seconds']} s of epochs: {train['steps_per_s']} steps/s, "
        f"{train['crops_per_s']} crops/s ({train['encoder']} encoder, 2 CPU processes)",
        "",
        "## Extrapolation to TUEG",
        "",
        f"- Storing TUEG as the paper prepares it ({TUEG_STORE_TB} TB of float32 at 19 "
        f"channels and 200 Hz) at this rate: {ext['tueg_store_hours']} hours with "
        f"{store['jobs']} processes on this machine. Assumes the time grows with the "
        "bytes stored (EDF read, resampled and filtered per sample), TUEG's mix of "
        "rates, channel counts and lengths as the synthetic tree's, and a disk as fast "
        "as this one's; with N times the cores and --jobs, about N times faster while "
        "the disk keeps up.",
        f"- One process reads {ext['cold_disk_order']} crops/s cold in disk order "
        f"({ext['cold_random']} at random) and {ext['warm_disk_order']} warm: an epoch of "
        f"the paper's {PAPER_WINDOWS:,.0f} windows takes "
        f"{ext['epoch_minutes_one_process_cold']} min of one cold process; one H200's "
        f"compiled paper-size step ({H200_WINDOWS_PER_S:,} windows/s at batch 256, "
        f"gpu_h200_cuda_graphs.md) needs {ext['processes_per_h200']} such processes "
        "(DataLoader workers). Assumes a store larger than memory reads as this one "
        "read with its pages evicted.",
    ]
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", required=True, help="folder of the tree, store, run, log")
    add_tree_arguments(parser, gb_help="size of the EDF tree, GB")
    parser.add_argument("--jobs", type=int, default=2, help="store --jobs")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    parser.add_argument("--crops", type=int, default=100_000, help="crops per read row")
    parser.add_argument("--steps", type=int, default=300, help="pretraining steps")
    parser.add_argument("--batch-size", type=int, default=32, help="per process")
    parser.add_argument("--encoder", default="small", choices=list(ENCODERS))
    parser.add_argument("--results", help="Markdown report")
    args = parse_tree_arguments(parser, argv)
    args.command = shlex.join(
        ["python", "-m", "benchmarks.rehearsal_tueg", *(argv or sys.argv[1:])]
    )
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    log = work / "rehearsal.log"
    handler = logging.FileHandler(log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    torch.set_num_threads(1)
    stages = Stages(work)
    try:
        for stage in STAGES:
            if stage in stages.done:
                logger.info("stage %s: done before, skipped", stage)
                continue
            logger.info("stage %s", stage)
            t0 = time.perf_counter()
            if stage == "tree":
                figures = make_tree(work / "tree", args.gb, tuple(args.minutes))
            elif stage == "store":
                figures = stage_store(args, stages.done["tree"], log)
            elif stage == "read":
                figures = stage_read(args, stages.done["store"]["store"])
            elif stage == "pretrain":
                figures = stage_pretrain(args, stages.done["store"]["store"], log)
            else:
                lines = report(args, stages.done)
                if args.results:
                    Path(args.results).write_text("\n".join(lines) + "\n")
                figures = {"results": args.results}
            figures["stage_seconds"] = round(time.perf_counter() - t0, 1)
            stages.record(stage, figures)
            logger.info("stage %s done in %.1f s", stage, figures["stage_seconds"])
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    return stages.done


if __name__ == "__main__":
    main()
