"""The subcommands that make an encoder from a store: ``pretrain`` (the run) and
``export`` (its encoder, in braindecode's Hugging Face layout).

``store`` (:mod:`.store`) prepares the data (reads, preprocesses and windows
recordings) and ``pretrain`` reads a store, so that recordings are read once, whatever
the number of runs and processes. ``pretrain`` takes the settings a run is usually
changed by as flags, the tuning of the machine in the "advanced" group, and every other
setting by name in its ``--config`` JSON file
(:data:`~braindecode_pars.pretraining.config.CONFIG_FILE_SETTINGS`,
:data:`_RUN_SETTINGS`, :func:`_config_only`). What a command needs beyond the standard
library is imported when it runs, so that building the parser (and ``--help``) stays
fast.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from braindecode_pars.cli.store import _differences

#: The encoder sizes ``--size`` names (the keys of ``models.encoder_config.ENCODER_SIZES``), with
#: what 3,000 steps of batch 64 cost on a 2-core CPU (measured: the documentation's speed
#: page).
_SIZES = {
    "small": "64 x 4 (4 heads, feed-forward 128), the estimator's and pars-small's: about "
    "3 min of a 2-core CPU for 3,000 steps of batch 64",
    "paper": "512 x 8 (8 heads, feed-forward 512), the paper's: about 70-80 min of that CPU "
    "for those steps, a size for a GPU",
}

#: The PhysioNet-MI subjects ``pretrain`` reads without ``--store`` (bundled with the package).
_BUNDLED_SUBJECTS = (1,)

#: The settings of the run that only ``--config`` sets, with their defaults.
_RUN_SETTINGS = {
    "seed": 0,  # of the model and every draw
    "checkpoint_minutes": 5.0,  # the state saved at the first epoch's end this long after
    # the last save (0: every epoch), at the end, and when stopped
    "stop_signal": [],  # signals besides SIGTERM that save the state at the next step and exit
    "amp": None,  # bf16 autocast (None: on a GPU, not on a CPU)
    "compile": None,  # torch.compile (None: on a GPU, not on a CPU)
    "compile_mode": None,  # torch.compile's mode (None: torch's)
    "batches": "auto",  # how the training batches reach the step (PretrainNet's batches)
    "decoder_kernel": "auto",  # PARS's pair operator (tables or fused; auto: the device's)
    "keep_freed_memory": True,  # on a CPU, glibc keeps memory freed by a step for the next
}  # fmt: skip

#: The settings that only ``--config`` sets, as ``--config``'s help names them.
_CONFIG_ONLY_HELP = (
    "the encoder's emb_dim (token size), depth (transformer blocks), n_heads (attention "
    "heads) and ff_dim (feed-forward width), each in place of --size's; its input "
    "normalization (window, window+scale or fixed; window), the unit (uV or V; uV) the "
    "last two read, fixed's amplitude_scale (10 µV in the unit) and amplitude_clip (20), "
    "window+scale's log_std_mean (drawn from the store) and log_std_std (drawn with "
    "it); the pretext "
    "task's n_patches (PARS's patches per crop, 40), pos_mask_ratio (share of them "
    "without a position, 0.8), mask_ratio (MAE, MP3, DropPos: 0.75), decoder_heads "
    "(PARS's pair decoder, 8) and sampling (PARS's patch starts: random, disjoint or "
    "fixed); the optimisation's lr (1e-3; paper: 1e-4), weight_decay (1e-4) and "
    "valid_fraction (held out for validation skill, 0.1); the run's seed (0), "
    "checkpoint_minutes (5), stop_signal (signals besides SIGTERM that save the run and "
    'exit, e.g. ["USR1"]; under torchrun, name them in its --signals-to-handle too), '
    "amp (bf16 autocast, true or false; default: on a GPU), compile "
    "(torch.compile, true or false; default: on a GPU), compile_mode (torch.compile's; "
    "default: torch's), batches (how the training batches reach the step: host, "
    "read-ahead or device; auto: the device's default), decoder_kernel (PARS's pair "
    "operator: tables or fused; auto: the device's default) and keep_freed_memory (on a "
    "CPU; true)"
)


def _config_only():
    """The names of the encoder settings that only ``--config`` sets: those a size of
    ``models.encoder_config.ENCODER_SIZES`` gives, and the input normalisation's
    (``models.encoder_config.NORMALIZATION_SETTINGS``)."""
    from braindecode_pars.models.encoder_config import ENCODER_SIZES, NORMALIZATION_SETTINGS

    return (*ENCODER_SIZES["small"], *NORMALIZATION_SETTINGS)


def _config_settings():
    """Every setting that only ``--config`` sets, with its value when not given: the
    encoder's (None: ``--size``'s),
    :data:`~braindecode_pars.pretraining.config.CONFIG_FILE_SETTINGS` (``PretrainConfig``'s
    defaults) and :data:`_RUN_SETTINGS`.

    Returns
    -------
    settings : dict
    """
    from braindecode_pars.pretraining.config import CONFIG_FILE_SETTINGS, PretrainConfig

    defaults = PretrainConfig()
    return {
        **dict.fromkeys(_config_only()),
        **{name: getattr(defaults, name) for name in CONFIG_FILE_SETTINGS},
        **{name: list(v) if isinstance(v, list) else v for name, v in _RUN_SETTINGS.items()},
    }


#: The flags of the entries of a run's record whose flag is not ``--<entry>``.
_RECORD_FLAGS = {
    "max_epochs": "--epochs / --steps",
    "model": "--method",
    "n_times": "--window-seconds / the store's sampling rate",
    "sfreq": "the store's sampling rate (--store)",
    "optimizer": "the optimiser (AdamW, not a setting of the command)",
    "warmup_fraction": "the warm-up (not a setting of the command)",
}


def _flag_of(key):
    """The flag (or ``--config`` setting) that sets the entry ``key`` of a run's record
    (``config.json``)."""
    if key in _RECORD_FLAGS:
        return _RECORD_FLAGS[key]
    if key.startswith("data."):
        return "the data (--store)"
    if key.startswith("encoder."):
        return f"--size / '{key.removeprefix('encoder.')}' in --config"
    from braindecode_pars.pretraining.config import CONFIG_FILE_SETTINGS

    if key in CONFIG_FILE_SETTINGS or key in _RUN_SETTINGS:
        return f"'{key}' in --config"
    return "--" + key.replace("_", "-")


def _add_pretrain_arguments(parser):
    """Add the flags of ``pretrain`` to ``parser``: the run's, then those that tune the
    machine in a group titled "advanced".

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser of ``pretrain``.
    """
    parser.add_argument(
        "--config",
        help="JSON file of settings by name: these flags' (e.g. "
        '{"method": "pars", "epochs": 1000}; flags given here take precedence) and those '
        f"only this file sets: {_CONFIG_ONLY_HELP}",
    )
    parser.add_argument("--out", help="checkpoint folder (resumed if it holds a run)")
    parser.add_argument(
        "--store",
        help="window store folder written by 'store' (your recordings, or the paper's "
        "corpus by the lab's store); default: the bundled EEG, PhysioNet-MI subject 1",
    )
    parser.add_argument(
        "--method",
        default="pars",
        choices=["pars", "mae", "mp3", "droppos"],
        help="the pretext task: PARS or one of the paper's baselines",
    )
    parser.add_argument(
        "--size",
        default="small",
        choices=list(_SIZES),
        help="encoder size: "
        + ", or ".join(f"'{name}', {text}" for name, text in _SIZES.items())
        + " (default: small); emb_dim, depth, n_heads or ff_dim in --config replace one "
        "of its settings",
    )
    parser.add_argument(
        "--paper",
        action="store_true",
        help="the paper's optimisation for its 1.5-million-window corpus: lr 1e-4, batch "
        "512, 1000 epochs, 30-s windows (learns nothing in a few thousand steps); the "
        "encoder stays --size's",
    )
    parser.add_argument(
        "--window-seconds",
        type=float,
        default=10.0,
        help="pretraining crops (paper: 30); without --store also the windows cut from the "
        "bundled EEG, every 5 s; each training example draws one channel and a crop of it",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        help="paper: 1000; an epoch is a shuffled pass over the training windows (each "
        "example a random channel and crop of one), or one step of --batch-size windows "
        "drawn with replacement when there are fewer (default: as many as --steps take)",
    )
    parser.add_argument(
        "--steps",
        type=int,
        default=3000,
        help="optimiser steps (of each process) when --epochs is not given, counted "
        "over the windows that train once valid_fraction (in --config, 0.1) is held out "
        "(whole recordings where it can): the run takes at least this many, at most an "
        "epoch more",
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="per process (--paper: 512 shared by all)"
    )
    parser.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    parser.add_argument(
        "--max-minutes",
        type=float,
        help="stop after the epoch in which this many minutes have passed; the run is "
        "saved unfinished and the same command continues it (0: after one epoch)",
    )
    parser.add_argument(
        "--extend",
        action="store_true",
        help="resume a run in --out with another --epochs / --steps (the learning-rate "
        "curve is redrawn for the new budget)",
    )
    advanced = parser.add_argument_group(
        "advanced",
        "The tuning of the machine (threads, DataLoader workers, how the store is read): "
        "the speed of a run, not its task or its optimisation. The settings that are not "
        "flags (the pretext task's, lr, seed, amp, compile...) are set by name in --config.",
    )
    advanced.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: the cores not busy when the command starts, "
        "measured over a tenth of a second, at least 1; the estimators' fits choose "
        "theirs the same way; OMP_NUM_THREADS, when set, is kept: torchrun sets it to 1 "
        "per process). A run resumed on a CPU ends bit for bit as the run never stopped "
        "on the same count only",
    )
    advanced.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    advanced.add_argument(
        "--read",
        choices=["random", "disk"],
        default="random",
        help="how the --store is read: each batch random windows anywhere in it, or chunks "
        "of windows in the order of its file, in a new order every epoch, shuffled in a "
        "buffer (for a store read from a disk; both reads are measured in the "
        "documentation's scaling page)",
    )


def _encoder_settings(args):
    """The encoder of the flags: ``--size``'s, with each of ``emb_dim``, ``depth``,
    ``n_heads`` and ``ff_dim`` that ``--config`` gives in place of the size's, and the
    input normalisation's settings that it gives (``normalization``, ``unit``...; the
    encoder's defaults otherwise).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``pretrain`` flags.

    Returns
    -------
    settings : dict
        ``emb_dim``, ``depth``, ``n_heads`` and ``ff_dim``, and the normalisation's
        settings given.
    """
    from braindecode_pars.models.encoder_config import ENCODER_SIZES

    settings = dict(ENCODER_SIZES[args.size])
    given = {k: getattr(args, k, None) for k in _config_only()}
    settings.update({k: v for k, v in given.items() if v is not None})
    return settings


def _pretrain_settings(args, world_size=1):
    """The :class:`~braindecode_pars.pretraining.config.PretrainConfig` of the flags: theirs,
    or with ``--paper`` the paper's optimisation (its batch of 512 the global one,
    shared by the ``world_size`` processes).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``pretrain`` flags (with the ``--config`` settings; a setting of
        ``PretrainConfig`` missing from them takes its default).
    world_size : int
        Processes of the run.

    Returns
    -------
    config : PretrainConfig
    """
    from braindecode_pars.pretraining.config import PretrainConfig

    config = PretrainConfig.of(args, max_epochs=args.epochs)
    return config.with_paper_optimisation(world_size) if args.paper else config


def _run_threads(args):
    """torch's CPU threads for this command: ``--threads``, else ``OMP_NUM_THREADS`` (or
    ``MKL_NUM_THREADS``) when set (``torchrun`` sets 1 for each process when it is not),
    else the CPU cores not busy now, at least 1 (torch's default, every core, runs many
    times slower when other processes hold some of them: its threads wait on each
    other), as the estimators' fits measure them:
    :func:`braindecode_pars._util.threads.command_threads`. A count the flag or the
    environment fixes is the same at every sitting, so that a run resumed on a CPU ends
    bit for bit as the run never stopped."""
    from braindecode_pars._util.threads import command_threads

    return command_threads(args.threads)


def _pretrain_view(args):
    """The pretraining windows: the ``--store``, memory-mapped (by every process under
    torchrun), or without one the bundled PhysioNet-MI subject 1, cut into
    ``--window-seconds`` windows every 5 s."""
    from braindecode_pars.pretraining import SingleChannelWindows

    if args.store:
        return SingleChannelWindows.from_store(args.store)
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous

    windows = load_physionet_mi_continuous(_BUNDLED_SUBJECTS, window_seconds=args.window_seconds)
    return SingleChannelWindows(windows)


def stop_signals(args):
    """SIGTERM and the ``stop_signal`` of ``--config`` (one signal or a list): the
    command always stops on SIGTERM, whatever the library's ``stop_signals="auto"``."""
    given = args.stop_signal
    return ["SIGTERM", *([given] if isinstance(given, str | int) else given or [])]


#: The signals torchrun's launcher forwards to its processes when its
#: ``--signals-to-handle`` is not given (torch 2.11); it dies of any other, at once.
_TORCHRUN_FORWARDS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT"


def _check_torchrun_forwards(args, environ=None):
    """Under torchrun, the stop signals that its launcher does not forward (its
    ``--signals-to-handle``, which the launcher hands its processes as
    ``TORCHELASTIC_SIGNALS_TO_HANDLE``), named in a warning: such a signal sent to the
    launcher (SLURM's ``--signal=B:USR1@...`` through the batch script) ends it, and its
    processes with it, without a save.

    Returns
    -------
    missing : list of str
        Those signals' names (empty outside torchrun, or when all are forwarded).
    """
    import logging

    from braindecode_pars._jobs.signals import check_stop_signals

    environ = os.environ if environ is None else environ
    if not environ.get("TORCHELASTIC_RUN_ID"):
        return []
    handled = environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE", _TORCHRUN_FORWARDS)
    forwarded = {name.strip().upper() for name in handled.split(",")}
    missing = [
        s.name for s in check_stop_signals("stop_signal", stop_signals(args))
        if s.name not in forwarded
    ]  # fmt: skip
    if missing and environ.get("RANK", "0") == "0":
        logging.getLogger(__name__).warning(
            "torchrun forwards %s to this run, not %s: sent to torchrun, %s would end it "
            "and its processes without saving. Launch it with --signals-to-handle %s.",
            handled, ", ".join(missing), "it" if len(missing) == 1 else "they",
            ",".join([*handled.split(","), *missing]),
        )  # fmt: skip
    return missing


def _check_run_settings(args):
    """Refuse the run settings of ``--config`` (:data:`_RUN_SETTINGS`) that no run takes."""
    from braindecode_pars._jobs.signals import check_stop_signals
    from braindecode_pars._util.checks import check_int, check_option, check_range
    from braindecode_pars.models.pair.kernels import DECODER_KERNEL_OPTIONS
    from braindecode_pars.pretraining.config import COMPILE_MODES
    from braindecode_pars.pretraining.net import BATCHES

    check_int("seed", args.seed, 0)
    if isinstance(args.checkpoint_minutes, bool) or not isinstance(
        args.checkpoint_minutes, int | float
    ):
        raise TypeError(
            f"'checkpoint_minutes' must be a number, but got {args.checkpoint_minutes!r}."
        )
    check_range("checkpoint_minutes", args.checkpoint_minutes, 0, float("inf"))
    for name in ("amp", "compile"):
        check_option(name, getattr(args, name), (None, True, False))
    check_option("keep_freed_memory", args.keep_freed_memory, (True, False))
    check_option("compile_mode", args.compile_mode, COMPILE_MODES)
    check_option("batches", args.batches, BATCHES)
    check_option("decoder_kernel", args.decoder_kernel, DECODER_KERNEL_OPTIONS)
    check_stop_signals("stop_signal", stop_signals(args))


def _check(args):
    """Refuse, before any work, the flags and ``--config`` settings ``pretrain`` cannot
    run with: an exit names them, what they take and what they were given."""
    from braindecode_pars._util.checks import check_device, check_heads
    from braindecode_pars.models.encoder_config import PatchEncoderConfig

    try:
        check_device("--device", args.device)
        for flag, value in (("--threads", args.threads), ("--workers", args.workers)):
            if value is not None and value < (1 if flag == "--threads" else 0):
                raise ValueError(
                    f"'{flag}' must be at least {1 if flag == '--threads' else 0}, but got {value}."
                )
        if args.max_minutes is not None and not args.max_minutes >= 0:
            raise ValueError(f"'--max-minutes' must be at least 0, but got {args.max_minutes}.")
    except (TypeError, ValueError) as err:
        raise SystemExit(f"braindecode-pars pretrain: {err}") from None
    try:
        size = _encoder_settings(args)
        try:
            PatchEncoderConfig(**size)
        except ValueError as err:
            given = ", ".join(
                f"{k} {getattr(args, k)}" for k in size if getattr(args, k, None) is not None
            )
            given = f" with --config's {given}" if given else ""
            raise ValueError(f"the encoder of --size {args.size}{given}: {err}") from None
        if args.method == "pars":
            check_heads("decoder_heads", args.decoder_heads, size["emb_dim"])
        _pretrain_settings(args)  # every pretext and optimisation setting, checked
        _check_run_settings(args)
    except (TypeError, ValueError) as err:
        where = "" if str(err).startswith("the encoder of --size") else "--config: "
        raise SystemExit(f"braindecode-pars pretrain: {where}{err}") from None
    return size


def _pretrain(args):
    """Pretrain an encoder with one pretext task on a window store (see 'store') or the
    bundled EEG; resumable; several processes under torchrun (torchrun --nproc_per_node N
    -m braindecode_pars.cli pretrain ...)."""
    import torch

    from braindecode_pars._jobs.signals import StopSignals, check_stop_signals
    from braindecode_pars.pretraining.distributed import init_distributed

    encoder_kwargs = _check(args)
    _check_torchrun_forwards(args)
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # a torchrun rank ends with its launcher
        from braindecode_pars._jobs.orphans import set_death_signal

        set_death_signal()
    torch.set_num_threads(_run_threads(args))
    # the stop signals are the command's from here to its end: one that comes before the
    # training reaches it at its first step, and one that comes again after it stopped
    # (torchrun forwards the scheduler's SIGTERM to processes that had it already) cannot
    # kill a process that is leaving the process group with the others
    stop = StopSignals(
        check_stop_signals("stop_signal", stop_signals(args)),
        message="Received %s: the run stops at its next step boundary, after saving the state.",
    )
    with stop:
        device = init_distributed(args.device)
        with _out_held(args):
            _pretrain_held(args, encoder_kwargs, device)


@contextlib.contextmanager
def _out_held(args):
    """``--out`` held by this run (rank 0's lock, see
    :func:`~braindecode_pars._jobs.lock.folder_lock`) before any work; a second run into it
    exits naming the process that holds it."""
    from braindecode_pars._jobs.lock import FolderLockedError, LockFileError, folder_lock
    from braindecode_pars.pretraining.distributed import rank

    with contextlib.ExitStack() as stack:
        if rank() == 0:
            try:
                stack.enter_context(folder_lock(args.out, "braindecode-pars pretrain"))
            except (FolderLockedError, LockFileError) as err:
                raise SystemExit(f"braindecode-pars pretrain: --out {err}") from None
        yield


def _pretrain_held(args, encoder_kwargs, device):
    """The run of :func:`_pretrain`, ``--out`` held."""
    import logging

    import torch

    from braindecode_pars.pretraining import run_pretraining
    from braindecode_pars.pretraining.callbacks import shows_bars
    from braindecode_pars.pretraining.checkpoints import CheckpointReadError, CheckpointWriteError
    from braindecode_pars.pretraining.distributed import close_distributed, rank, world_size
    from braindecode_pars.pretraining.net import epoch_logger
    from braindecode_pars.pretraining.resume import RunMismatchError
    from braindecode_pars.pretraining.stopping import TrainingStopped

    on_gpu = torch.device(device).type == "cuda"
    amp = on_gpu if args.amp is None else args.amp
    compile_ = on_gpu if args.compile is None else args.compile
    table_level = epoch_logger.level
    if not shows_bars(sys.stderr):  # a log file: the progress lines say what the table says
        epoch_logger.setLevel(logging.WARNING)
    if args.keep_freed_memory and str(device).startswith("cpu"):
        from braindecode_pars.pretraining.memory import keep_freed_memory

        keep_freed_memory()  # steps stop faulting freed pages back in (training/memory.py)
    main_process = rank() == 0  # asked now: the process group ends with this command
    finished = False
    try:
        settings = _pretrain_settings(args, world_size())
        args.window_seconds = settings.window_seconds  # the crops, and the windows cut
        torch.manual_seed(args.seed)  # the same model on every process; PretrainNet then
        view = _pretrain_view(args)  # reseeds each process with seed + rank for its draws
        if main_process:
            _warn_listed_recordings(args.out)
        args.epochs = settings.max_epochs_for(view, world_size())
        net = run_pretraining(
            view,
            settings.method,
            checkpoint_dir=args.out,
            device=device,
            amp=amp,
            compile=compile_,
            compile_mode=args.compile_mode,
            batches=args.batches,
            decoder_kernel=args.decoder_kernel,
            num_workers=args.workers,
            store_read=args.read,
            checkpoint_every_minutes=args.checkpoint_minutes,
            encoder_kwargs=encoder_kwargs,
            max_minutes=args.max_minutes,
            allow_new_budget=args.extend,
            run_info=_run_info(args),
            stop_signals=stop_signals(args),
            **settings.run_kwargs(args.epochs),
        )
        finished = True
    except RunMismatchError as err:
        listed = _differences(err, _flag_of)
        extend = (
            " (--extend resumes with the new epoch budget)"
            if "max_epochs" in err.differences
            else ""
        )
        raise SystemExit(
            f"braindecode-pars pretrain: --out '{args.out}' holds a run with other settings: "
            f"{listed}{extend}. Give another --out, or the run's settings to resume it."
        ) from None
    except TrainingStopped as err:
        # every process stopped at the step they agreed on: they leave the group together,
        # so that none tears its connections down while rank 0 still writes the state
        finished = err.reason == "signal"
        if main_process:
            where = f"epoch {err.epochs}" + (
                f" and {err.steps} step(s) of epoch {err.epochs + 1}" if err.steps else ""
            )
            sys.stderr.write(
                f"braindecode-pars pretrain: stopped by {err.signal.name}; the state after "
                f"{where} of {args.epochs} is saved in '{args.out}'. Run the same command "
                "to continue from that step.\n"
            )
        raise SystemExit(err.exit_code) from None
    except (CheckpointWriteError, CheckpointReadError, FloatingPointError) as err:
        raise SystemExit(f"braindecode-pars pretrain: {err}") from None
    except KeyboardInterrupt:
        from braindecode_pars.hub.folders import run_status

        status = run_status(args.out)
        saved = (
            f"{status['epoch']} of {status['max_epochs']} epochs are saved in '{args.out}' "
            "(no encoder.pt: the run is unfinished). Run the same command to resume."
            if status["epoch"]
            else "no epoch was saved yet."
        )
        if main_process:
            sys.stderr.write(f"braindecode-pars pretrain: interrupted; {saved}\n")
        raise SystemExit(130) from None
    finally:
        epoch_logger.setLevel(table_level)
        close_distributed(finished)  # once all are done with it: not while rank 0 writes
    if main_process:
        _report(net, args)


def _warn_listed_recordings(out):
    """Warn when the run in ``out`` (resumed) lists its recordings by name, as runs of
    versions before ``subject_from`` did: this sitting records their number and a hash
    instead, but exports made from it before hold the names."""
    import json
    import logging

    from braindecode_pars.models.card import listed_recordings

    saved = Path(out) / "config.json"
    config = json.loads(saved.read_text()) if saved.is_file() else {}
    if isinstance(config, dict) and listed_recordings(config):
        logging.getLogger(__name__).warning(
            "'%s' lists the run's %d recordings by name (a run of an earlier version); "
            "this sitting records their number and a hash instead. An export made from "
            "it before holds the names: rewrite it with python -m "
            "braindecode_pars.store.identity EXPORT.",
            saved, len(config["data.recordings"]),
        )  # fmt: skip


def _run_info(args):
    """What the model card of a command-line run says of how it was made: the command
    as given to :func:`~braindecode_pars.cli.main` (``args.argv``; the process's
    arguments for a namespace parsed elsewhere) and, with a store, its absolute path,
    what it holds and a salted hash of its recordings (the run's local record; an
    export holds placeholders for the paths and drops the salt,
    :func:`~braindecode_pars.models.card.public_run_config`)."""
    import shlex

    argv = getattr(args, "argv", None)
    argv = sys.argv[1:] if argv is None else argv
    info = {"command": shlex.join(["braindecode-pars", *map(str, argv)])}
    if args.store:
        from braindecode_pars.store import store_summary

        info["data.store"] = str(Path(args.store).resolve())
        summary = store_summary(args.store)
        info["data.channel_hours"] = summary["channel_hours"]
        info["data.hours"] = summary["hours"]
        info["data.n_recordings"] = summary["n_recordings"]
        info["data.people"] = summary["people"]
        info["data.people_counted_by"] = _people_basis(summary)
        salt = _run_salt(args.out)
        info["data.recordings_salt"] = salt
        info.update(_store_record(args.store, salt))
        info["data.datasets"] = "; ".join(
            f"{name}: {d['n_recordings']} recordings of {d['people']} people, "
            f"{d['channel_hours']} channel-hours"
            for name, d in summary["datasets"].items()
        )
    else:
        info["data.recordings"] = f"PhysioNet-MI subjects {list(_BUNDLED_SUBJECTS)} (bundled)"
    return info


def _people_basis(summary):
    """How a store's people were counted, in words, for the model card (counts only)."""
    by, unattributed = summary["people_by"], summary["unattributed_recordings"]
    parts = []
    if by["subject"]:
        parts.append(f"the subject of {by['subject']} recordings")
    if by["folder"]:
        parts.append(
            f"the folder of {by['folder']} recordings that name no subject (one folder "
            "may hold several people)"
        )
    if unattributed:
        parts.append(f"{unattributed} recordings name neither and are not counted")
    return "; ".join(parts) or "no recording names its person"


def _run_salt(out):
    """The salt of the run in ``out`` (``data.recordings_salt`` of its ``config.json``,
    so that every sitting hashes alike), or a new random one for a new run (or one
    recorded before runs were salted)."""
    import json
    import secrets

    saved = Path(out) / "config.json"
    try:
        config = json.loads(saved.read_text()) if saved.is_file() else {}
    except (OSError, ValueError):  # an unreadable record: the resume check says so
        config = {}
    salt = config.get("data.recordings_salt") if isinstance(config, dict) else None
    return salt if isinstance(salt, str) and salt else secrets.token_hex(16)


def _store_record(store, salt=None):
    """The card's ``data.recordings_hash`` (:func:`~braindecode_pars.models.card.
    identifiers_hash` of the store's recordings' file names and subjects, salted with
    ``salt``: the run tells datasets apart without naming anyone) and
    ``data.preprocessing`` (what braindecode recorded of it, and the windows), read
    from the store."""
    from braindecode_pars.models.card import identifiers_hash
    from braindecode_pars.store import read_window_store

    _, _, info = read_window_store(store)
    identifiers = []
    for meta in info["recordings"]:
        description = meta.get("description") or {}
        name = description.get("file") or description.get("path")
        identifiers.append([Path(str(name)).name if name else None, description.get("subject")])
    steps = info.get("preprocessing")
    if steps:
        text = "; ".join(
            f"{s['steps']}" + (f" ({s['recordings']} recordings)" if len(steps) > 1 else "")
            for s in steps
        )
    else:
        text = "not recorded (a store of a version before 0.2)"
    settings = (info.get("build") or {}).get("settings") or {}
    window = settings.get("window_seconds")
    if window is not None:
        stride = settings.get("stride_seconds")
        text += f"; {window:g}-s windows" + (f" every {stride:g} s" if stride else "")
    dtype = {"<f4": "float32", "<f2": "float16"}.get(info["dtype"], info["dtype"])
    text += f"; stored as {dtype}"
    return {
        "data.recordings_hash": identifiers_hash(identifiers, salt),
        "data.preprocessing": text,
    }


def _report(net, args):
    """What a pretraining run did, and where its encoder is."""
    last = net.history[-1]
    skill = last.get("valid_skill", last.get("train_skill", float("nan")))
    done = len(net.history)
    if done < args.epochs:
        sys.stdout.write(
            f"Stopped after {done} of {args.epochs} epochs (--max-minutes {args.max_minutes}); "
            f"pretext skill {skill:.3f}. Run the same command to continue.\n"
        )
        return
    sys.stdout.write(
        f"{done} epochs, final loss {last['train_loss']:.4f}, pretext skill "
        f"{skill:.3f}; encoder written to {args.out}/encoder.pt\n"
    )


def _export(args):
    """Write a pretraining run's encoder in braindecode's Hugging Face layout (config.json,
    model.safetensors), with its pretext model and history."""
    from braindecode_pars.hub.folders import export_run

    folder = export_run(args.run, args.out)
    sys.stdout.write(f"Encoder of {args.run} written to {folder}/ (load_encoder('{folder}'))\n")
