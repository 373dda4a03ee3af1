"""The subcommands that make an encoder from a store: ``pretrain`` (the run) and
``export`` (its encoder, in braindecode's Hugging Face layout).

``store`` (:mod:`._store_command`) prepares the data (reads, preprocesses and windows
recordings) and ``pretrain`` reads a store, so that recordings are read once, whatever
the number of runs and processes. What a command needs beyond the
standard library is imported when it runs, so that building the parser (and ``--help``)
stays fast.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from ._store_command import (  # noqa: F401 (named from here too)
    PAPER_WINDOW_SECONDS,
    WINDOW_SECONDS,
    _differences,
    exclusions,
    store_settings,
)

#: The encoder sizes ``--size`` names (the keys of ``models.encoder_config.ENCODER_SIZES``), with
#: what 3,000 steps of batch 64 cost on a 2-core CPU (about 1,300 and 40 windows/s:
#: benchmarks/results/freed_memory.md, pretraining.md).
SIZES = {
    "small": "64 x 4 (4 heads, feed-forward 128), the estimator's and pars-small's: about "
    "3 min of a 2-core CPU for 3,000 steps of batch 64",
    "paper": "512 x 8 (8 heads, feed-forward 512), the paper's: about 70-80 min of that CPU "
    "for those steps, a size for a GPU",
}

#: The PhysioNet-MI subjects ``pretrain`` reads without ``--store`` (bundled with the package).
BUNDLED_SUBJECTS = (1,)

#: The encoder settings that only ``--config`` sets, each in place of ``--size``'s
#: (rarely changed; named sizes keep runs comparable), as ``--config``'s help names them.
CONFIG_ONLY_HELP = (
    "emb_dim (token size), depth (transformer blocks), n_heads (attention heads) and "
    "ff_dim (feed-forward width)"
)


def config_only():
    """The names of the encoder settings that only ``--config`` sets: those a size of
    ``models.encoder_config.ENCODER_SIZES`` gives."""
    from ..models.encoder_config import ENCODER_SIZES

    return tuple(ENCODER_SIZES["small"])


#: The flags of the entries of a run's record whose flag is not ``--<entry>``.
_RECORD_FLAGS = {
    "max_epochs": "--epochs / --steps",
    "model": "--method",
    "n_times": "--window-seconds / the store's sampling rate",
}


def flag_of(key):
    """The flag that sets the entry ``key`` of a run's record (``config.json``)."""
    if key in _RECORD_FLAGS:
        return _RECORD_FLAGS[key]
    if key.startswith("data."):
        return "the data (--store)"
    if key.startswith("encoder."):
        return f"--size / '{key.removeprefix('encoder.')}' in --config"
    return "--" + key.replace("_", "-")


def encoder_settings(args):
    """The encoder of the flags: ``--size``'s, with each of ``emb_dim``, ``depth``,
    ``n_heads`` and ``ff_dim`` that ``--config`` gives in place of the size's.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``pretrain`` flags.

    Returns
    -------
    settings : dict
        ``emb_dim``, ``depth``, ``n_heads`` and ``ff_dim``.
    """
    from ..models.encoder_config import ENCODER_SIZES

    settings = dict(ENCODER_SIZES[args.size])  # the settings of config_only()
    given = {k: getattr(args, k, None) for k in settings}
    settings.update({k: v for k, v in given.items() if v is not None})
    return settings


def pretrain_settings(args, world_size=1):
    """The :class:`~braindecode_pars.training.config.PretrainConfig` of the flags: theirs,
    or with ``--paper`` the paper's optimisation (its batch of 512 the global one,
    shared by the ``world_size`` processes).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed ``pretrain`` flags.
    world_size : int
        Processes of the run.

    Returns
    -------
    config : PretrainConfig
    """
    from ..training.config import PretrainConfig

    config = PretrainConfig.of(args, max_epochs=args.epochs)
    return config.with_paper_optimisation(world_size) if args.paper else config


def idle_cores():
    """The CPU cores not busy now, at least 1 (torch's default, every core, runs many
    times slower when other processes hold some of them: its threads wait on each
    other): :func:`braindecode_pars._threads.idle_cores`, which the estimators' fits
    use too."""
    from .._threads import idle_cores as measured

    return measured()


def _pretrain_view(args):
    """The pretraining windows: the ``--store``, memory-mapped (by every process under
    torchrun), or without one the bundled PhysioNet-MI subject 1, cut into
    ``--window-seconds`` windows every 5 s."""
    from ..datasets import SingleChannelWindows

    if args.store:
        return SingleChannelWindows.from_store(args.store)
    from ..datasets import load_physionet_mi_continuous

    windows = load_physionet_mi_continuous(BUNDLED_SUBJECTS, window_seconds=args.window_seconds)
    return SingleChannelWindows(windows)


def _check(args):
    """Refuse, before any work, the flags ``pretrain`` cannot run with: an exit names them."""
    from .._checks import check_device
    from .._signals import check_stop_signals
    from ..models.encoder_config import PatchEncoderConfig
    from ..models.pair_decoders import check_heads

    try:
        check_device("--device", args.device)
        size = encoder_settings(args)
        try:
            PatchEncoderConfig(**size)
        except ValueError as err:
            given = ", ".join(
                f"{k} {getattr(args, k)}" for k in size if getattr(args, k, None) is not None
            )
            given = f" with --config's {given}" if given else ""
            raise ValueError(f"the encoder of --size {args.size}{given}: {err}") from None
        if args.method == "pars":
            check_heads("--decoder-heads", args.decoder_heads, size["emb_dim"])
        pretrain_settings(args)  # every pretext and optimisation setting, checked
        check_stop_signals("--stop-signal", ["SIGTERM", *args.stop_signal])
    except (TypeError, ValueError) as err:
        raise SystemExit(f"braindecode-pars pretrain: {err}") from None
    return size


def _pretrain(args):
    """Pretrain an encoder with one pretext task on a window store (see 'store') or the
    bundled EEG; resumable; several processes under torchrun (torchrun --nproc_per_node N
    -m braindecode_pars.cli pretrain ...)."""
    import torch

    from ..training import init_distributed

    encoder_kwargs = _check(args)
    if os.environ.get("TORCHELASTIC_RUN_ID"):  # a torchrun rank ends with its launcher
        from .._orphans import set_death_signal

        set_death_signal()
    torch.set_num_threads(args.threads or idle_cores())
    device = init_distributed(args.device)
    with _out_held(args):
        _pretrain_held(args, encoder_kwargs, device)


@contextlib.contextmanager
def _out_held(args):
    """``--out`` held by this run (rank 0's lock, see
    :func:`~braindecode_pars._lock.folder_lock`) before any work; a second run into it
    exits naming the process that holds it."""
    from .._lock import folder_lock
    from ..training.distributed import rank

    with contextlib.ExitStack() as stack:
        if rank() == 0:
            try:
                stack.enter_context(folder_lock(args.out, "braindecode-pars pretrain"))
            except RuntimeError as err:
                raise SystemExit(f"braindecode-pars pretrain: --out {err}") from None
        yield


def _pretrain_held(args, encoder_kwargs, device):
    """The run of :func:`_pretrain`, ``--out`` held."""
    import logging

    import torch

    from ..training import RunMismatchError, pretrain
    from ..training.callbacks import shows_bars
    from ..training.checkpoints import CheckpointReadError, CheckpointWriteError
    from ..training.distributed import rank, world_size
    from ..training.pretrain import epoch_logger
    from ..training.stop import TrainingStopped

    on_gpu = torch.device(device).type == "cuda"
    amp = on_gpu if args.amp is None else args.amp
    compile_ = on_gpu if args.compile is None else args.compile
    table_level = epoch_logger.level
    if not shows_bars(sys.stderr):  # a log file: the progress lines say what the table says
        epoch_logger.setLevel(logging.WARNING)
    if args.keep_freed_memory and str(device).startswith("cpu"):
        from ..training.memory import keep_freed_memory

        keep_freed_memory()  # steps stop faulting freed pages back in (training/memory.py)
    main_process = rank() == 0  # asked now: the process group ends with this command
    finished = False
    try:
        settings = pretrain_settings(args, world_size())
        args.window_seconds = settings.window_seconds  # the crops, and the windows cut
        torch.manual_seed(args.seed)  # the same model on every process; PretrainNet then
        view = _pretrain_view(args)  # reseeds each process with seed + rank for its draws
        args.epochs = settings.max_epochs_for(view, world_size())
        net = pretrain(
            view,
            settings.method,
            checkpoint_dir=args.out,
            device=device,
            amp=amp,
            compile=compile_,
            compile_mode=args.compile_mode,
            num_workers=args.workers,
            store_read=args.read,
            checkpoint_every_minutes=args.checkpoint_minutes,
            encoder_kwargs=encoder_kwargs,
            max_minutes=args.max_minutes,
            allow_new_budget=args.extend,
            run_info=_run_info(args),
            stop_signals=["SIGTERM", *args.stop_signal],
            **settings.run_kwargs(args.epochs),
        )
        finished = True
    except RunMismatchError as err:
        listed = _differences(err, flag_of)
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
        from ..hub import run_status

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
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            if finished:  # every process tears the group down once all are done with it,
                torch.distributed.barrier()  # not while rank 0 still writes its files
            torch.distributed.destroy_process_group()
    if main_process:
        _report(net, args)


def _run_info(args):
    """What the model card of a command-line run says of how it was made."""
    import shlex

    info = {"command": shlex.join(["braindecode-pars", *sys.argv[1:]])}
    if args.store:
        from ..datasets.store import store_summary

        info["data.store"] = str(args.store)
        summary = store_summary(args.store)
        info["data.channel_hours"] = summary["channel_hours"]
        info["data.hours"] = summary["hours"]
        info["data.people"] = summary["people"]
        info["data.people_counted_by"] = _people_basis(summary)
        info.update(_store_record(args.store))
        info["data.datasets"] = "; ".join(
            f"{name}: {d['n_recordings']} recordings of {d['people']} people, "
            f"{d['channel_hours']} channel-hours"
            for name, d in summary["datasets"].items()
        )
    else:
        info["data.recordings"] = [f"PhysioNet-MI subjects {list(BUNDLED_SUBJECTS)} (bundled)"]
    return info


def _people_basis(summary):
    """How a store's people were counted, in words, for the model card."""
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


def _store_record(store):
    """The card's ``data.recordings`` (the store's recordings by file or subject) and
    ``data.preprocessing`` (what braindecode recorded of it, and the windows), read from
    the store."""
    from ..datasets.store import read_window_store

    _, _, info = read_window_store(store)
    names = []
    for meta in info["recordings"]:
        description = meta.get("description") or {}
        name = description.get("file") or description.get("path")
        name = Path(str(name)).name if name else description.get("subject", "?")
        names.append(str(name))
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
    return {"data.recordings": names, "data.preprocessing": text}


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
    from ..hub import export_run

    folder = export_run(args.run, args.out)
    sys.stdout.write(f"Encoder of {args.run} written to {folder}/ (load_encoder('{folder}'))\n")
