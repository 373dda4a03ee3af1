"""The pretraining loop against its training step: windows per second of
``PARSPretrainer.fit`` and of ``braindecode-pars pretrain``, each over the bare step.

One command measures, on one device, with one model, batch size, precision and
compilation:

1. the bare training step of ``bench_gpu.py`` (:class:`bench_gpu.TrainingSteps`: PARS's
   forward, backward and AdamW step, fused as in the loops, on one batch already on
   the device), in windows
   per second (median over repeats; the first step, which holds any compilation, timed
   on its own);
2. ``PARSPretrainer.fit`` on an array corpus of random multi-channel windows, and
3. ``braindecode-pars pretrain`` on the same windows written as a window store;

each of 2 and 3 run twice, with a step budget of ``--steps`` and of a fifth of it, and
its loop rate is the marginal one: ``(windows of the long run - windows of the short
run) / (time of the long run - time of the short run)``. That cancels what a fit pays
once (reading the data, building the model, the validation draws, a compilation) and
leaves what the loop pays per step: loading and moving batches, skorch's callbacks,
validation, checkpoints and logs. Before the rounds, one untimed short run of each
loop pays the process's cold compilations. The corpus holds a few batches, so a run spans many
epochs, as a small corpus does. A round measures the bare step, both loops and the
bare step again, and a loop's ratio is taken within its round, so that a machine whose
speed drifts (a shared CPU) compares like with like; the ratios reported are the
medians over ``--rounds`` rounds. The last line printed gives the two ratios.

Configurations: ``--size small`` (64 x 4, 10-s windows at 100 Hz, batch 64: the
estimator's default on a CPU), ``--size paper`` (512 x 8, 30-s windows at 200 Hz,
batch 256: for a GPU) and ``--tiny`` (32 x 1, batch 8: seconds on a CPU).

Usage::

    python benchmarks/bench_pretrain_loop.py --tiny --device cpu
    python benchmarks/bench_pretrain_loop.py --size small --device cpu \
        --out benchmarks/results/pretrain_loop_cpu.md
    python benchmarks/bench_pretrain_loop.py --size paper --device cuda \
        --out benchmarks/results/pretrain_loop_gpu.md
"""

from __future__ import annotations

import argparse
import datetime
import logging
import math
import shlex
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from _measure import machine, write_report
from bench_gpu import PAPER, TINY, Config, TrainingSteps, synchronize

from braindecode_pars import PARSPretrainer
from braindecode_pars.models.encoder_config import ENCODER_SIZES
from braindecode_pars.training import with_fused_default

#: The estimator's default size on its default windows (10 s at 100 Hz), batch 64.
SMALL = Config(
    "64 x 4 (small), 10-s windows at 100 Hz", dict(ENCODER_SIZES["small"]), 1000, 100.0, (64,)
)
CONFIGS = {"tiny": TINY, "small": SMALL, "paper": PAPER}
#: Channels of the corpus's windows (each example draws one of them).
N_CHANS = 4
#: Training batches the corpus holds (before the validation share is held out).
CORPUS_BATCHES = 3
N_PATCHES = 40
#: The validation share of both loops (their default).
VALID_FRACTION = 0.1
#: The short run's share of the long run's steps.
SHORT = 0.2


def corpus(config, batch_size, seed=0, batches=CORPUS_BATCHES):
    """Random windows, (n, N_CHANS, n_times) float32: ``batches`` full batches once the
    estimator's and the command line's validation share (10 %, rounded up) is held
    out."""
    rng = np.random.default_rng(seed)
    n = batches * batch_size
    while n - math.ceil(VALID_FRACTION * n) < batches * batch_size:
        n += 1
    return rng.standard_normal((n, N_CHANS, config.n_times), dtype=np.float32)


def bare_steps(config, batch_size, device, amp, compiled, mode=None):
    """The bare step (seed 0), its AdamW fused as the loops' is (``with_fused_default``)."""
    torch.manual_seed(0)
    steps = TrainingSteps(
        config, N_PATCHES, batch_size, device, bf16=amp, compiled=compiled, mode=mode
    )
    kwargs = with_fused_default(torch.optim.AdamW, dict(lr=1e-4, weight_decay=1e-4), device)
    steps.opt = torch.optim.AdamW(steps.model.parameters(), **kwargs)
    return steps


def bare_rate(config, batch_size, device, amp, compiled, repeats, mode=None):
    """Windows per second of the bare step, and its first step's time (s); its AdamW
    runs fused, as the loops' does (``with_fused_default``), so that the optimiser is
    the same on both sides; ``mode``: torch.compile's."""
    steps = bare_steps(config, batch_size, device, amp, compiled, mode)
    t0 = time.perf_counter()
    steps.pars_step()
    first = time.perf_counter() - t0
    for _ in range(2):
        steps.pars_step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        steps.pars_step()
        times.append(time.perf_counter() - t0)
    return batch_size / statistics.median(times), first


def _trained_windows(history):
    return sum(
        b["train_batch_size"] for row in history for b in row["batches"] if "train_loss" in b
    )


def estimator_run(config, X, batch_size, device, amp, compiled, steps, mode=None):
    """One ``PARSPretrainer.fit``: (seconds, windows trained, epochs)."""
    stage = PARSPretrainer(
        **config.size, n_patches=N_PATCHES, batch_size=batch_size, steps=steps,
        window_seconds=config.n_times / config.sfreq, sfreq=config.sfreq, device=device,
        amp=amp, compile=compiled, compile_mode=mode, random_state=0, verbose=0,
    )  # fmt: skip
    synchronize(torch.device(device))
    t0 = time.perf_counter()
    stage.fit(X)
    synchronize(torch.device(device))
    return time.perf_counter() - t0, _trained_windows(stage.history_), len(stage.history_)


def write_store(config, X, folder):
    """``X`` as a window store: one recording of its windows laid end to end."""
    import mne
    from braindecode.datasets import BaseConcatDataset, RawDataset
    from braindecode.preprocessing import create_fixed_length_windows

    from braindecode_pars.datasets import write_window_store

    names = [f"EEG{i}" for i in range(X.shape[1])]
    info = mne.create_info(names, config.sfreq, "eeg")
    raw = mne.io.RawArray(np.concatenate(list(X), axis=1) * 1e-6, info, verbose="error")
    windows = create_fixed_length_windows(
        BaseConcatDataset([RawDataset(raw, description={"subject": 0})]),
        window_size_samples=config.n_times, window_stride_samples=config.n_times,
        drop_last_window=True, preload=True,
    )  # fmt: skip
    write_window_store(windows, folder)
    return folder


def cli_run(config, store, out, batch_size, device, amp, compiled, steps, workers=0, mode=None):
    """One ``braindecode-pars pretrain`` on ``store`` (in this process, its batches
    read by ``workers`` DataLoader processes): (seconds, windows trained, epochs)."""
    import json

    from braindecode_pars.cli import main
    from braindecode_pars.cli._commands import config_only
    from braindecode_pars.hub import _run_state

    encoder = Path(f"{out}-encoder.json")  # the encoder's settings are --config's
    encoder.write_text(json.dumps({k: config.size[k] for k in config_only()}))
    flags = [
        "pretrain", "--store", str(store), "--out", str(out), "--n-patches", str(N_PATCHES),
        "--window-seconds", f"{config.n_times / config.sfreq:g}", "--steps", str(steps),
        "--batch-size", str(batch_size), "--device", str(device),
        "--threads", str(torch.get_num_threads()), "--config", str(encoder),
        "--amp" if amp else "--no-amp", "--compile" if compiled else "--no-compile",
        "--workers", str(workers), *(["--compile-mode", mode] if mode else []),
    ]  # fmt: skip
    synchronize(torch.device(device))
    t0 = time.perf_counter()
    main(flags)
    synchronize(torch.device(device))
    seconds = time.perf_counter() - t0
    history = json.loads((_run_state(out) / "history.json").read_text())
    return seconds, _trained_windows(history), len(history)


#: Where a profiled function's own time is counted: the first area whose pattern its
#: file name (or, for built-ins, its name) holds.
AREAS = (
    ("window store and crops", ("datasets/store", "datasets/single_channel", "memmap")),
    ("batches (collate, DataLoader)", ("torch/utils/data",)),
    ("checkpoints and saving", ("torch/serialization", "hub.py", "checkpoint")),
    ("logs, history and JSON", ("logging", "json", "skorch/history", "tqdm")),
    ("skorch loop and callbacks", ("skorch/",)),
    ("braindecode_pars loop", ("braindecode_pars/training",)),
    ("torch (the step, waits on the device)", ("torch", "method 'item'", "method 'to'")),
)


def profile_areas(run):
    """``run()`` under cProfile: (total seconds, {area: own seconds}, top functions as
    (own seconds, calls, name))."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.runcall(run)
    total = time.perf_counter() - t0
    areas = dict.fromkeys([a for a, _ in AREAS] + ["other"], 0.0)
    top = []
    for (file, line, name), (_, calls, own, _, _) in pstats.Stats(profiler).stats.items():
        where = f"{file}:{name}"
        area = next((a for a, keys in AREAS if any(k in where for k in keys)), "other")
        areas[area] += own
        top.append((own, calls, f"{Path(file).name}:{line}({name})"))
    return total, areas, sorted(top, reverse=True)[:12]


def device_name(device):
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


class Loops(NamedTuple):
    """What every timed run of one benchmark shares: the corpus, its store, the settings."""

    config: Config
    X: np.ndarray
    store: Path
    tmp: Path
    batch: int
    device: torch.device
    amp: bool
    compiled: bool
    mode: str | None
    workers: int

    def estimator(self, steps):
        return estimator_run(
            self.config, self.X, self.batch, self.device, self.amp, self.compiled, steps,
            self.mode,
        )  # fmt: skip

    def cli(self, name, steps):
        return cli_run(
            self.config, self.store, self.tmp / name, self.batch, self.device, self.amp,
            self.compiled, steps, self.workers, self.mode,
        )  # fmt: skip

    def bare(self, repeats):
        return bare_rate(
            self.config, self.batch, self.device, self.amp, self.compiled, repeats, self.mode
        )


def profile_report(loops, steps, path):
    """Both loops' short and long runs once more under cProfile, written to ``path`` as
    Markdown: each area's own time in the long run less that in the short run, the
    marginal cost of the extra steps, as the loop rates are marginal."""
    short_steps = max(1, int(steps * SHORT))
    batch = loops.batch

    def runs(n):
        return {
            "`PARSPretrainer.fit`": lambda: loops.estimator(n),
            "`braindecode-pars pretrain`": lambda: loops.cli(f"profiled-{n}", n),
        }

    lines = [
        "# Where the pretraining loops' time goes",
        "",
        "Written by `benchmarks/bench_pretrain_loop.py --profile`: each loop's short "
        f"({short_steps} steps) and long ({steps} steps) runs once more under cProfile, "
        f"batch {batch}; a function's own time is summed by area (the first area whose "
        "pattern its file or name holds), and each column is the long run's less the "
        "short run's: what the extra steps cost. On a GPU the step runs asynchronously, "
        "so the host's wait for it is counted where the host blocks (a loss's `.item()`, "
        "a copy to the host). The profiler slows Python-heavy code more than the step.",
        "",
        f"- Device: {device_name(loops.device)}",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Model: {loops.config.name}; precision as in the rounds above",
        "",
    ]
    short, long = runs(short_steps), runs(steps)
    results = {label: (profile_areas(short[label]), profile_areas(long[label])) for label in long}
    labels = list(results)
    lines += ["| area | " + " | ".join(f"{label}: s" for label in labels) + " |",
              "|---|" + "---|" * len(labels)]  # fmt: skip
    for area in [a for a, _ in AREAS] + ["other"]:
        cells = [f"{b[1][area] - a[1][area]:.2f}" for a, b in results.values()]
        lines.append(f"| {area} | " + " | ".join(cells) + " |")
    cells = [f"{b[0] - a[0]:.2f}" for a, b in results.values()]
    lines += ["| **whole run (wall clock)** | " + " | ".join(cells) + " |", ""]
    for label, (_, (total, _, top)) in results.items():
        lines += [f"Top functions of {label}'s long run ({total:.1f} s, own time):", "",
                  "| own seconds | calls | function |", "|---|---|---|"]  # fmt: skip
        lines += [f"| {own:.2f} | {calls} | `{name}` |" for own, calls, name in top]
        lines.append("")
    write_report(lines, path)


def marginal(short, long):
    """Windows per second between two runs: (windows, seconds) differences."""
    return (long[1] - short[1]) / (long[0] - short[0])


def loop_arguments(parser, size):
    """The arguments this script shares with ``bench_loop_trace.py``: the report, the
    device, the model's size (``size`` by default) and batch, the compile mode, the
    corpus and the command line's workers."""
    parser.add_argument("--out", help="write the Markdown report here (default: stdout only)")
    parser.add_argument("--device", default="cuda", help="torch device (default: cuda)")
    parser.add_argument("--size", default=size, choices=list(CONFIGS), help=f"(default: {size})")
    parser.add_argument("--tiny", action="store_true", help="the tiny size: seconds on a CPU")
    parser.add_argument("--batch-size", type=int, help="default: the size's (8, 64, 256)")
    parser.add_argument(
        "--compile-mode", choices=["default", "reduce-overhead", "max-autotune"],
        help="torch.compile's mode of the bare step and both loops (default: torch's); "
        "reduce-overhead replays the steps as CUDA graphs",
    )  # fmt: skip
    parser.add_argument(
        "--corpus-batches", type=int, default=CORPUS_BATCHES,
        help=f"training batches an epoch (default: {CORPUS_BATCHES}: a run spans many epochs)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=0,
        help="the command line's DataLoader worker processes (default: 0)",
    )  # fmt: skip


def parse_loop_args(parser, argv):
    """``parser``'s arguments, ``--tiny`` read as ``--size tiny``."""
    args = parser.parse_args(argv)
    if args.tiny:
        args.size = "tiny"
    return args


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    loop_arguments(parser, "small")
    parser.add_argument(
        "--steps", type=int, help="steps of the long runs (default: 300 tiny, 150 otherwise)"
    )
    parser.add_argument("--repeats", type=int, default=21, help="timed bare steps (default: 21)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    parser.add_argument(
        "--threads", type=int, help="torch CPU threads of all three (default: torch's)"
    )
    parser.add_argument(
        "--amp", action=argparse.BooleanOptionalAction, help="bf16 (default: on CUDA only)"
    )
    parser.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        help="torch.compile (default: on CUDA only)",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="after the rounds, run each loop's short and long runs once more under "
        "cProfile and write where the extra steps' time goes (seconds by area, long run "
        "less short run, and the top functions) to FILE",
    )
    return parse_loop_args(parser, argv)


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    config = CONFIGS[args.size]
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    amp = on_gpu if args.amp is None else args.amp
    compiled = on_gpu if args.compile is None else args.compile
    batch = args.batch_size or config.batch_sizes[0]
    steps = args.steps or (300 if args.size == "tiny" else 150)
    short_steps = max(1, int(steps * SHORT))
    logging.getLogger("braindecode_pars").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="Pretraining ended with a pretext skill")
    X = corpus(config, batch, batches=args.corpus_batches)

    rounds = []  # each round: the bare step, then both loops, then the bare step again
    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(config, X, Path(tmp) / "store")
        loops = Loops(config, X, store, Path(tmp), batch, device, amp, compiled,
                      args.compile_mode, args.workers)  # fmt: skip
        # One short run of each loop first, untimed: a loop's first fit in the process
        # pays the cold compilation of its graphs, which the runs after it reuse, so
        # without it the first timed pair is not like with like (on an H200, a long
        # run faster than its short one).
        loops.estimator(short_steps)
        loops.cli("warm-up", short_steps)
        for r in range(args.rounds):
            before, first = loops.bare(args.repeats)
            est = [loops.estimator(n) for n in (short_steps, steps)]
            cli = [loops.cli(f"run{r}-{n}", n) for n in (short_steps, steps)]
            after, _ = loops.bare(args.repeats)
            bare = (before + after) / 2  # the step's rate around the loops it is compared to
            rounds.append(
                dict(bare=bare, first=first, est=marginal(*est), cli=marginal(*cli),
                     est_long=est[1], cli_long=cli[1])
            )  # fmt: skip
        if args.profile:
            profile_report(loops, steps, args.profile)
    mid = sorted(rounds, key=lambda r: r["est"] / r["bare"])[len(rounds) // 2]
    est_ratios = sorted(r["est"] / r["bare"] for r in rounds)
    cli_ratios = sorted(r["cli"] / r["bare"] for r in rounds)
    est_ratio, cli_ratio = statistics.median(est_ratios), statistics.median(cli_ratios)
    bare, first, est, cli = mid["bare"], mid["first"], mid["est_long"], mid["cli_long"]
    est_rate, cli_rate = mid["est"], mid["cli"]
    precision = ("bf16 autocast" if amp else "float32") + (
        f" + torch.compile (mode {args.compile_mode or 'default'})" if compiled else ""
    )
    name = torch.cuda.get_device_name(device) if on_gpu else f"CPU ({machine()})"
    lines = [
        "# The pretraining loop against its training step",
        "",
        "Written by `benchmarks/bench_pretrain_loop.py`: windows per second of the bare PARS",
        "training step (`bench_gpu.py`'s), of `PARSPretrainer.fit` and of `braindecode-pars",
        "pretrain`, on the same device, model, batch and precision; the loop rates are",
        "marginal (two runs of each, the difference of their windows over the difference of",
        "their times), over a corpus of a few batches, so that a run spans many epochs.",
        "",
        f"- Device: {name}",
        f"- Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        "- Command: `python "
        + shlex.join(["benchmarks/bench_pretrain_loop.py", *sys.argv[1:]])
        + "`",
        f"- Model: {config.name}; PARS, {N_PATCHES} patches; batch {batch}; {precision}",
        f"- The command line's DataLoader workers: {args.workers}",
        f"- Corpus: {len(X)} windows of {N_CHANS} channels (about {args.corpus_batches} training "
        f"batches an epoch); long runs {steps} steps, short runs {short_steps}",
        "",
        f"- Rounds: {args.rounds}, each the bare step, both loops, the bare step again; a "
        "loop's ratio is taken within its round (over the mean of the two bare rates), "
        "and the ratio given is the median over rounds, with the range",
        "",
        "| what | windows/s (median round) | over the bare step: median (range) | epochs "
        "(long run) | whole long run (s) |",
        "|---|---|---|---|---|",
        f"| bare training step | {bare:,.0f} | 1.00 | | first step {first:.2f} s |",
        f"| `PARSPretrainer.fit` | {est_rate:,.0f} | {est_ratio:.2f} ({est_ratios[0]:.2f}-"
        f"{est_ratios[-1]:.2f}) | {est[2]} | {est[0]:.1f} |",
        f"| `braindecode-pars pretrain` | {cli_rate:,.0f} | {cli_ratio:.2f} "
        f"({cli_ratios[0]:.2f}-{cli_ratios[-1]:.2f}) | {cli[2]} | {cli[0]:.1f} |",
        "",
        f"estimator/step {est_ratio:.2f}, command line/step {cli_ratio:.2f}",
    ]
    write_report(lines, args.out)
    return est_ratio, cli_ratio


if __name__ == "__main__":
    main()
