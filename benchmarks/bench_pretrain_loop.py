"""The pretraining loop against its training step: windows per second of
``PARSPretrainer.fit`` and of ``braindecode-pars pretrain``, each over the bare step.

One command measures, on one device, with one model, batch size, precision and
compilation:

1. the bare training step of ``bench_gpu.py`` (:class:`bench_gpu.TrainingSteps`: PARS's
   forward, backward and AdamW step, fused as in the loops, on one batch already on
   the device), in windows
   per second over ``--repeats`` steps in a row (their windows over their time, as the
   loops' rates are; the first step, which holds any compilation, timed
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

    python -m benchmarks.bench_pretrain_loop --tiny --device cpu
    python -m benchmarks.bench_pretrain_loop --size small --device cpu \
        --out benchmarks/results/pretrain_loop_cpu.md
    python -m benchmarks.bench_pretrain_loop --size paper --device cuda \
        --out benchmarks/results/pretrain_loop_gpu.md
    python -m benchmarks.bench_pretrain_loop --size paper --device cuda \
        --batches device --decoder-kernel fused --compile-mode reduce-overhead
"""

from __future__ import annotations

import argparse
import datetime
import logging
import shlex
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from benchmarks.lib.loops import (
    CONFIGS,
    N_CHANS,
    N_PATCHES,
    SHORT,
    Loops,
    corpus,
    device_name,
    loop_arguments,
    parse_loop_args,
    write_store,
)
from benchmarks.lib.measure import git_commit, machine, write_report

#: Where a profiled function's own time is counted: the first area whose pattern its
#: file name (or, for built-ins, its name) holds.
AREAS = (
    (
        "window store and crops",
        (
            "braindecode_pars/store/",
            "pretraining/views",
            "pretraining/disk_order",
            "memmap",
        ),
    ),
    ("batches (collate, DataLoader)", ("torch/utils/data",)),
    ("checkpoints and saving", ("torch/serialization", "hub/folders", "checkpoint")),
    ("logs, history and JSON", ("logging", "json", "skorch/history", "tqdm")),
    ("skorch loop and callbacks", ("skorch/",)),
    ("braindecode_pars loop", ("braindecode_pars/pretraining",)),
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
    # untimed first: a cold process's first runs pay its imports and first calls, which
    # the short runs would otherwise hold and the long ones not (the whole run's column
    # came out negative in a fresh process)
    loops.estimator(short_steps)
    loops.cli("profiled-warm-up", short_steps)
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


def progress(what, run, since):
    """Print ``what`` (and a run's seconds, windows and epochs) with the seconds since
    ``since``, at once: a run cut short by a time limit still says how far it got and
    what each part (and its compilation) took. Returns ``run``."""
    said = "" if run is None else f": {run[0]:.1f} s, {run[1]:,} windows, {run[2]} epochs"
    print(f"[loop {time.perf_counter() - since:6.1f} s] {what}{said}", flush=True)
    return run


def marginal(short, long):
    """Windows per second between two runs: (windows, seconds) differences."""
    return (long[1] - short[1]) / (long[0] - short[0])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    loop_arguments(parser, "small")
    parser.add_argument("--steps", type=int,
        help="steps of the long runs (default: 300 tiny, 150 otherwise)")  # fmt: skip
    parser.add_argument("--repeats", type=int, default=21, help="timed bare steps (default: 21)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    parser.add_argument("--threads", type=int,
        help="torch CPU threads of all three (default: torch's)")  # fmt: skip
    parser.add_argument("--amp", action=argparse.BooleanOptionalAction,
        help="bf16 (default: on CUDA only)")  # fmt: skip
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction,
        help="torch.compile (default: on CUDA only)")  # fmt: skip
    parser.add_argument("--cli", action=argparse.BooleanOptionalAction, default=True,
        help="time the command line's loop too (default: on; its loop is the estimator's "
        "net, so --no-cli halves a run's time)")  # fmt: skip
    parser.add_argument("--profile", metavar="FILE",
        help="after the rounds, run each loop's short and long runs once more under "
        "cProfile and write where the extra steps' time goes (seconds by area, long run "
        "less short run, and the top functions) to FILE")  # fmt: skip
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
    commit = git_commit(dirty=True)  # of the code the rounds run, read before them
    t_start = time.perf_counter()
    X = corpus(config, batch, batches=args.corpus_batches)

    rounds = []  # each round: the bare step, then both loops, then the bare step again
    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(config, X, Path(tmp) / "store")
        loops = Loops(config, X, store, Path(tmp), batch, device, amp, compiled,
                      args.compile_mode, args.workers, args.batches,
                      args.decoder_kernel)  # fmt: skip
        progress(f"corpus of {len(X)} windows and its store", None, t_start)
        # One short run of each loop first, untimed: a loop's first fit in the process
        # pays the cold compilation of its graphs, which the runs after it reuse, so
        # without it the first timed pair is not like with like (on an H200, a long
        # run faster than its short one).
        progress(f"warm-up fit, {short_steps} steps", loops.estimator(short_steps), t_start)
        if args.cli:
            progress(f"warm-up pretrain, {short_steps} steps",
                     loops.cli("warm-up", short_steps), t_start)  # fmt: skip
        for r in range(args.rounds):
            before, first = loops.bare(args.repeats)
            progress(f"round {r}: bare step, {before:,.0f} windows/s, first step {first:.1f} s",
                     None, t_start)  # fmt: skip
            est = [progress(f"round {r}: fit, {n} steps", loops.estimator(n), t_start)
                   for n in (short_steps, steps)]  # fmt: skip
            cli = None
            if args.cli:
                cli = [progress(f"round {r}: pretrain, {n} steps", loops.cli(f"run{r}-{n}", n),
                                t_start) for n in (short_steps, steps)]  # fmt: skip
            after, _ = loops.bare(args.repeats)
            progress(f"round {r}: bare step again, {after:,.0f} windows/s", None, t_start)
            bare = (before + after) / 2  # the step's rate around the loops it is compared to
            rounds.append(
                dict(bare=bare, first=first, est=marginal(*est),
                     cli=marginal(*cli) if cli else None, est_long=est[1],
                     cli_long=cli[1] if cli else None)
            )  # fmt: skip
        if args.profile:
            profile_report(loops, steps, args.profile)
    mid = sorted(rounds, key=lambda r: r["est"] / r["bare"])[len(rounds) // 2]
    est_ratios = sorted(r["est"] / r["bare"] for r in rounds)
    cli_ratios = sorted(r["cli"] / r["bare"] for r in rounds if r["cli"] is not None)
    est_ratio = statistics.median(est_ratios)
    cli_ratio = statistics.median(cli_ratios) if cli_ratios else None
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
        f"- Commit: {commit} (`+`: with changes to tracked files)",
        "- Command: `python "
        + shlex.join(["-m", "benchmarks.bench_pretrain_loop", *sys.argv[1:]])
        + "`",
        f"- Model: {config.name}; PARS, {N_PATCHES} patches; batch {batch}; {precision}",
        f"- The command line's DataLoader workers: {args.workers}",
        f"- Training batches (both loops): {args.batches}; pair operator (all three): "
        f"{args.decoder_kernel}",
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
        f"({cli_ratios[0]:.2f}-{cli_ratios[-1]:.2f}) | {cli[2]} | {cli[0]:.1f} |"
        if cli_ratio is not None
        else "| `braindecode-pars pretrain` | not run (--no-cli) | | | |",
        "",
        f"estimator/step {est_ratio:.2f}, command line/step "
        + ("n/a" if cli_ratio is None else f"{cli_ratio:.2f}"),
    ]
    write_report(lines, args.out)
    return est_ratio, cli_ratio


if __name__ == "__main__":
    main()
