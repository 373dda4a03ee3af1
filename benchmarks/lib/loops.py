"""The pretraining loops and their bare step, as the loop benchmarks run them
(``bench_pretrain_loop``, ``bench_loop_trace``): a random corpus and its window store,
``PARSPretrainer.fit`` and ``braindecode-pars pretrain`` on them, the bare training step
(:class:`.device_steps.TrainingSteps`) and the command line the two scripts share."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from benchmarks.lib.device_steps import PAPER, TINY, Config, TrainingSteps, synchronize
from benchmarks.lib.steps import optimiser
from braindecode_pars import PARSPretrainer
from braindecode_pars.models.encoder_config import ENCODER_SIZES

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


def bare_steps(config, batch_size, device, amp, compiled, mode=None, kernel="auto"):
    """The bare step (seed 0), its AdamW fused as the loops' is (:func:`.steps.optimiser`);
    ``kernel``: the pair operator (``PARS(decoder_kernel=...)``)."""
    torch.manual_seed(0)
    steps = TrainingSteps(
        config, N_PATCHES, batch_size, device, bf16=amp, compiled=compiled, mode=mode,
        kernel=kernel,
    )  # fmt: skip
    steps.opt = optimiser(steps.model, device)
    return steps


def bare_rate(config, batch_size, device, amp, compiled, repeats, mode=None, kernel="auto"):
    """Windows per second of the bare step over ``repeats`` steps in a row (their
    windows over their time, as a loop's rate is its windows over its time, so that
    slower steps count on both sides), after a first step, timed on its own and
    returned (s), and two untimed ones; its AdamW runs fused, as the loops' does
    (:func:`.steps.optimiser`), so that the optimiser is the same on both sides;
    ``mode``: torch.compile's."""
    steps = bare_steps(config, batch_size, device, amp, compiled, mode, kernel)
    t0 = time.perf_counter()
    steps.pars_step()
    first = time.perf_counter() - t0
    for _ in range(2):
        steps.pars_step()
    t0 = time.perf_counter()
    for _ in range(repeats):
        steps.pars_step()  # each ends with the device synchronised
    return batch_size * repeats / (time.perf_counter() - t0), first


def trained_windows(history):
    """The windows a fit's ``history`` (skorch's rows) trained on."""
    return sum(
        b["train_batch_size"] for row in history for b in row["batches"] if "train_loss" in b
    )


def estimator_run(
    config, X, batch_size, device, amp, compiled, steps, mode=None, batches="auto",
    kernel="auto",
):  # fmt: skip
    """One ``PARSPretrainer.fit`` (its ``batches`` and ``decoder_kernel``): (seconds,
    windows trained, epochs)."""
    stage = PARSPretrainer(
        **config.size, n_patches=N_PATCHES, batch_size=batch_size, steps=steps,
        window_seconds=config.n_times / config.sfreq, sfreq=config.sfreq, device=device,
        amp=amp, compile=compiled, compile_mode=mode, batches=batches, decoder_kernel=kernel,
        random_state=0, verbose=0,
    )  # fmt: skip
    synchronize(torch.device(device))
    t0 = time.perf_counter()
    stage.fit(X)
    synchronize(torch.device(device))
    return time.perf_counter() - t0, trained_windows(stage.history_), len(stage.history_)


def write_store(config, X, folder):
    """``X`` as a window store: one recording of its windows laid end to end."""
    import mne
    from braindecode.datasets import BaseConcatDataset, RawDataset
    from braindecode.preprocessing import create_fixed_length_windows

    from braindecode_pars.store.write import write_window_store

    names = [f"EEG{i}" for i in range(X.shape[1])]
    info = mne.create_info(names, config.sfreq, "eeg")
    raw = mne.io.RawArray(np.concatenate(list(X), axis=1) * 1e-6, info, verbose="error")
    windows = create_fixed_length_windows(
        BaseConcatDataset([RawDataset(raw, description={"subject": 0})]),
        window_size_samples=config.n_times, window_stride_samples=config.n_times,
        on_last_window="drop", preload=True,
    )  # fmt: skip
    write_window_store(windows, folder)
    return folder


def cli_run(
    config, store, out, batch_size, device, amp, compiled, steps, workers=0, mode=None,
    batches="auto", kernel="auto",
):  # fmt: skip
    """One ``braindecode-pars pretrain`` on ``store`` (in this process, its batches
    read by ``workers`` DataLoader processes; ``batches`` and ``decoder_kernel`` in its
    ``--config``): (seconds, windows trained, epochs)."""
    import json

    from braindecode_pars.cli import main
    from braindecode_pars.hub.folders import run_state

    # the settings only --config sets: the encoder's, the patches, precision, compilation
    settings = {k: config.size[k] for k in ENCODER_SIZES["small"]}
    settings.update(n_patches=N_PATCHES, amp=bool(amp), compile=bool(compiled),
                    batches=batches, decoder_kernel=kernel)  # fmt: skip
    if mode:
        settings["compile_mode"] = mode
    settings_file = Path(f"{out}-config.json")
    settings_file.write_text(json.dumps(settings))
    flags = [
        "pretrain", "--store", str(store), "--out", str(out), "--config", str(settings_file),
        "--window-seconds", f"{config.n_times / config.sfreq:g}", "--steps", str(steps),
        "--batch-size", str(batch_size), "--device", str(device),
        "--threads", str(torch.get_num_threads()), "--workers", str(workers),
    ]  # fmt: skip
    synchronize(torch.device(device))
    t0 = time.perf_counter()
    main(flags)
    synchronize(torch.device(device))
    seconds = time.perf_counter() - t0
    history = json.loads((run_state(out) / "history.json").read_text())
    return seconds, trained_windows(history), len(history)


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
    batches: str = "auto"  # the loops' PretrainNet(batches=...)
    kernel: str = "auto"  # the pair operator of all three, PARS(decoder_kernel=...)

    def estimator(self, steps):
        return estimator_run(
            self.config, self.X, self.batch, self.device, self.amp, self.compiled, steps,
            self.mode, self.batches, self.kernel,
        )  # fmt: skip

    def cli(self, name, steps):
        return cli_run(
            self.config, self.store, self.tmp / name, self.batch, self.device, self.amp,
            self.compiled, steps, self.workers, self.mode, self.batches, self.kernel,
        )  # fmt: skip

    def bare(self, repeats):
        return bare_rate(
            self.config, self.batch, self.device, self.amp, self.compiled, repeats, self.mode,
            self.kernel,
        )  # fmt: skip


def loop_arguments(parser, size):
    """The arguments ``bench_pretrain_loop`` and ``bench_loop_trace`` share: the report, the
    device, the model's size (``size`` by default) and batch, the compile mode, the
    corpus and the command line's workers."""
    parser.add_argument("--out", help="write the Markdown report here (default: stdout only)")
    parser.add_argument("--device", default="cuda", help="torch device (default: cuda)")
    parser.add_argument("--size", default=size, choices=list(CONFIGS), help=f"(default: {size})")
    parser.add_argument("--tiny", action="store_true", help="the tiny size: seconds on a CPU")
    parser.add_argument("--batch-size", type=int, help="default: the size's (8, 64, 256)")
    parser.add_argument("--compile-mode", choices=["default", "reduce-overhead", "max-autotune"],
        help="torch.compile's mode of the bare step and both loops (default: torch's); "
        "reduce-overhead replays the steps as CUDA graphs")  # fmt: skip
    parser.add_argument("--batches", default="auto",
        choices=["auto", "host", "read-ahead", "device"],
        help="how both loops' training batches reach the step (PretrainNet's batches; "
        "default: auto, the device's default)")  # fmt: skip
    parser.add_argument("--decoder-kernel", default="auto", choices=["auto", "tables", "fused"],
        help="the pair operator of the bare step and both loops (PARS's decoder_kernel; "
        "default: auto, the device's default)")  # fmt: skip
    parser.add_argument("--corpus-batches", type=int, default=CORPUS_BATCHES,
        help=f"training batches an epoch (default: {CORPUS_BATCHES}: a run spans many epochs)",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=0,
        help="the command line's DataLoader worker processes (default: 0)")  # fmt: skip


def parse_loop_args(parser, argv):
    """``parser``'s arguments, ``--tiny`` read as ``--size tiny``."""
    args = parser.parse_args(argv)
    if args.tiny:
        args.size = "tiny"
    return args
