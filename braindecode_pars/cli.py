"""The ``braindecode-pars`` command line."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import warnings
from pathlib import Path


def _demo(args):
    """The shipped PARS encoder against scratch and a band-power floor with 1 and 2 labelled
    subjects on bundled EEGMAT (rest vs mental arithmetic)."""
    from .experiments.demo import DemoConfig, format_results, run_demo

    overrides = {
        k: v
        for k, v in dict(
            finetune_epochs=args.finetune_epochs,
            seeds=tuple(args.seeds) if args.seeds else None,
            ks=tuple(args.ks) if args.ks else None,
            device=args.device,
            encoder=args.encoder,
        ).items()
        if v is not None
    }
    config = dataclasses.replace(DemoConfig(), **overrides)
    results = run_demo(args.out, config)
    sys.stdout.write(format_results(results) + "\n")
    sys.stdout.write(f"Tables and figures written to {args.out}/\n")


def _compare(args):
    """Compare scratch, MAE, MP3, DropPos and PARS on the same data, encoder, epochs and seeds;
    writes a table and the label-efficiency figure."""
    from .experiments.comparison import ComparisonConfig, run_comparison

    overrides = {
        k: v
        for k, v in dict(
            methods=tuple(args.methods) if args.methods else None,
            seeds=tuple(args.seeds) if args.seeds else None,
            pretrain_epochs=args.pretrain_epochs,
            finetune_epochs=args.finetune_epochs,
            device=args.device,
            data_path=args.data_path,
        ).items()
        if v is not None
    }
    config = dataclasses.replace(ComparisonConfig(), **overrides)
    run_comparison(args.out, config)
    sys.stdout.write((Path(args.out) / "table.md").read_text())


def _store(args):
    """Write recordings (yours, the shared corpus, YSYW/TUEG or PhysioNet-MI) to a
    memory-mappable window store for pretraining, one recording at a time."""
    import json

    from .datasets import pretraining_corpus, write_window_store

    windows = _recording_windows(args, lazy=True)
    if windows is None and (args.ysyw or args.tueg):
        windows = pretraining_corpus(
            ysyw_path=args.ysyw,
            tueg_path=args.tueg,
            tuab_path=args.tuab,
            tusz_path=args.tusz,
            window_seconds=args.window_seconds,
            allow_test_patients=args.allow_test_patients,
            ysyw_split_file=args.ysyw_split_file,
            lazy=True,
        )
    elif windows is None:
        windows = _physionet_windows(args, runs=args.runs)
    write_window_store(windows, args.out, overwrite=args.overwrite)
    info = json.loads((Path(args.out) / "info.json").read_text())
    n_windows = info.get("n_windows", len(windows))
    sys.stdout.write(f"{n_windows} windows written to {args.out}/\n")


#: The paper's pretraining optimisation (section 2.5), for its 1.5-million-window corpus.
PAPER_PRETRAINING = dict(lr=1e-4, batch_size=512, epochs=1000, window_seconds=30.0)


def _recording_windows(args, lazy=False):
    """Windows of ``--recordings`` or ``--shared-data`` (100 Hz unless ``--sfreq``), or None;
    ``lazy``: a stream that reads one recording at a time (for writing a store)."""
    from .datasets.corpus import shared_corpus
    from .datasets.recordings import load_recordings

    if args.recordings:
        return load_recordings(
            args.recordings,
            sfreq=args.sfreq or 100.0,
            window_seconds=args.window_seconds,
            stride_seconds=args.stride_seconds,
            l_freq=args.l_freq,
            h_freq=args.h_freq,
            notch_freq=args.notch_freq,
            exclude=[] if args.keep_all_channels else (args.exclude or "auto"),
            on_error=args.on_error,
            lazy=lazy,
        )
    if args.shared_data:
        return shared_corpus(
            args.shared_data,
            sfreq=args.sfreq or 100.0,
            window_seconds=args.window_seconds,
            eegmat_subjects=_eegmat_subjects(args.eegmat_subjects),
            muse=args.muse,
        )
    return None


def _eegmat_subjects(names):
    """``--eegmat-subjects``: numbers, or "pool" / "train" (None: the 24 training ones)."""
    from .datasets.eegmat import EEGMAT_TRAIN_SUBJECTS
    from .experiments.dev_tasks import EEGMAT_POOL_SUBJECTS

    named = {"pool": EEGMAT_POOL_SUBJECTS, "train": EEGMAT_TRAIN_SUBJECTS}
    if not names:
        return EEGMAT_TRAIN_SUBJECTS
    subjects = []
    for name in names:
        if name in named:
            subjects += list(named[name])
        elif name.isdigit():
            subjects.append(int(name))
        else:
            raise SystemExit(
                f"braindecode-pars: --eegmat-subjects takes subject numbers, 'pool' or "
                f"'train', but got {name!r}."
            )
    return tuple(sorted(set(subjects)))


def _physionet_windows(args, **options):
    """Continuous windows of PhysioNet-MI's ``--subjects`` (bundled, or in ``--data-path``)."""
    from .datasets import load_physionet_mi_continuous

    return load_physionet_mi_continuous(
        args.subjects,
        path=args.data_path,
        window_seconds=args.window_seconds,
        stride_seconds=args.stride_seconds,
        **options,
    )


def _pretrain_view(args):
    """The pretraining windows the flags name: a store, recordings, the shared corpus, or
    the bundled PhysioNet-MI subject.

    Under torchrun, recordings and the shared corpus are read once: rank 0 writes them
    to a window store inside ``--out`` (one per set of data flags), the other processes
    wait for it, and every process memory-maps it.
    """
    from .datasets import SingleChannelWindows, write_window_store
    from .training.distributed import is_distributed, rank

    if args.store:
        return SingleChannelWindows.from_store(args.store)
    if not (args.recordings or args.shared_data) or not is_distributed():
        windows = _recording_windows(args)
        return SingleChannelWindows(_physionet_windows(args) if windows is None else windows)
    store = Path(args.out) / f"store-{_data_key(args)}"
    if rank() == 0 and not (store / "index.npz").is_file():
        write_window_store(_recording_windows(args, lazy=True), store, overwrite=True)
    _wait_for(store / "index.npz")
    return SingleChannelWindows.from_store(store)


def _data_key(args):
    """A short hash of the flags that choose and preprocess the pretraining data."""
    import hashlib
    import json

    names = ("recordings", "shared_data", "sfreq", "window_seconds", "stride_seconds",
             "l_freq", "h_freq", "notch_freq", "exclude", "keep_all_channels",
             "eegmat_subjects", "muse")  # fmt: skip
    spec = json.dumps({n: getattr(args, n, None) for n in names}, sort_keys=True)
    return hashlib.sha1(spec.encode()).hexdigest()[:10]


def _wait_for(path, poll_seconds=1.0):
    """Wait until ``path`` exists (written by rank 0; torchrun ends every process if one
    fails)."""
    import time

    while not Path(path).is_file():
        time.sleep(poll_seconds)


#: The command-line flag of each setting a resumed run must share.
_FLAGS = {
    "max_epochs": "--epochs / --steps", "batch_size": "--batch-size", "lr": "--lr",
    "n_patches": "--n-patches", "pos_mask_ratio": "--pos-mask-ratio", "sampling": "--sampling",
    "decoder_heads": "--decoder-heads",
    "mask_ratio": "--mask-ratio", "encoder.emb_dim": "--emb-dim", "encoder.depth": "--depth",
    "encoder.n_heads": "--n-heads", "encoder.ff_dim": "--ff-dim", "model": "--method",
    "valid_fraction": "--valid-fraction", "n_times": "--window-seconds / --sfreq",
    "sfreq": "--sfreq", "data.n_windows": "the data (--store, --recordings...)",
    "data.fingerprint": "the data (--store, --recordings...)",
}  # fmt: skip


def _pretrain(args):
    """Pretrain an encoder with one pretext task; resumable; several processes under torchrun
    (torchrun --nproc_per_node N -m braindecode_pars.cli pretrain ...)."""
    import torch

    from ._checks import check_device
    from .models import pretext_params
    from .models.pair_decoders import check_heads
    from .training import RunMismatchError, init_distributed, pretrain
    from .training.distributed import rank, world_size

    try:
        check_device("--device", args.device)
        if args.method == "pars":
            check_heads("--decoder-heads", args.decoder_heads, args.emb_dim)
    except (TypeError, ValueError) as err:
        raise SystemExit(f"braindecode-pars pretrain: {err}") from None
    if args.threads:
        torch.set_num_threads(args.threads)
    device = init_distributed(args.device)
    if args.keep_freed_memory and str(device).startswith("cpu"):
        from .training.memory import keep_freed_memory

        keep_freed_memory()  # steps stop faulting freed pages back in (training/memory.py)
    main_process = rank() == 0  # asked now: the process group ends with this command
    try:
        if args.paper:
            for name, value in PAPER_PRETRAINING.items():
                setattr(args, name, value)
            # the paper's batch of 512 is the global one: shared by the processes
            args.batch_size = max(1, PAPER_PRETRAINING["batch_size"] // world_size())
        torch.manual_seed(args.seed)  # the same model on every process; PretrainNet then
        view = _pretrain_view(args)  # reseeds each process with seed + rank for its draws
        if args.epochs is None:  # the step budget: steps of one process over its share
            from .training.schedule import epochs_for_steps

            args.epochs = epochs_for_steps(
                args.steps, len(view), args.batch_size, args.valid_fraction or None, world_size()
            )
        encoder_kwargs = dict(
            emb_dim=args.emb_dim, depth=args.depth, n_heads=args.n_heads, ff_dim=args.ff_dim
        )
        pretext = pretext_params(args.method, args.n_patches, args.pos_mask_ratio, args.mask_ratio)
        if args.method == "pars":
            pretext.update(sampling=args.sampling, decoder_heads=args.decoder_heads)
        net = pretrain(
            view,
            args.method,
            checkpoint_dir=args.out,
            max_epochs=args.epochs,
            batch_size=args.batch_size,
            lr=args.lr,
            device=device,
            amp=args.amp,
            compile=args.compile,
            num_workers=args.workers,
            valid_fraction=args.valid_fraction or None,
            encoder_kwargs=encoder_kwargs,
            max_minutes=args.max_minutes,
            allow_new_budget=args.extend,
            run_info=_run_info(args),
            **pretext,
        )
    except RunMismatchError as err:
        listed = "; ".join(
            f"{_FLAGS.get(k, k)}: saved {a!r}, now {b!r}" for k, (a, b) in err.differences.items()
        )
        extend = (
            " (--extend resumes with the new epoch budget)"
            if "max_epochs" in err.differences
            else ""
        )
        raise SystemExit(
            f"braindecode-pars pretrain: --out '{args.out}' holds a run with other settings: "
            f"{listed}{extend}. Give another --out, or the run's settings to resume it."
        ) from None
    except KeyboardInterrupt:
        from .hub import run_status

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
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    if main_process:
        _report(net, args)


def _run_info(args):
    """What the model card of a command-line run says of how it was made."""
    import shlex

    info = {"command": shlex.join(["braindecode-pars", *sys.argv[1:]])}
    if args.store:
        from .datasets.store import store_summary

        info["data.store"] = str(args.store)
        summary = store_summary(args.store)
        info["data.channel_hours"] = summary["channel_hours"]
        info["data.hours"] = summary["hours"]
        info["data.people"] = summary["people"]
        info["data.datasets"] = "; ".join(
            f"{name}: {d['n_recordings']} recordings of {d['people']} people, "
            f"{d['channel_hours']} channel-hours"
            for name, d in summary["datasets"].items()
        )
    elif args.recordings:
        info["data.recordings"] = list(args.recordings)
    elif args.shared_data:
        info["data.recordings"] = [str(args.shared_data)]
    else:
        info["data.recordings"] = [f"PhysioNet-MI subjects {args.subjects} (bundled)"]
    if args.recordings or args.shared_data:
        info["data.preprocessing"] = (
            f"resampled to {args.sfreq or 100.0} Hz, high-pass {args.l_freq} Hz, low-pass "
            f"{args.h_freq or 'min(75, 0.45 sfreq)'} Hz, notch {args.notch_freq or 'none'}; "
            f"{args.window_seconds}-s windows every {args.stride_seconds} s"
        )
    return info


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
    from .hub import export_run

    folder = export_run(args.run, args.out)
    sys.stdout.write(f"Encoder of {args.run} written to {folder}/ (load_encoder('{folder}'))\n")


def _read_config(path):
    import json

    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SystemExit(f"braindecode-pars: no configuration file '{path}'") from None
    except json.JSONDecodeError as err:
        raise SystemExit(f"braindecode-pars: '{path}' is not valid JSON: {err}") from None


def _experiment(args):
    """Run a protocol of the paper (label_efficiency, transfer, loso, ablation) from a JSON
    configuration; resumable."""
    from .experiments.protocols import run_experiment

    config = _read_config(args.config)
    frame = run_experiment(config, args.out)
    out = Path(args.out or config.get("out", f"results/{config['protocol']}"))
    sys.stdout.write(f"{len(frame)} results in {out}/results.csv\n")


def _finetune(args):
    """Fine-tune on a recipe's train split (JSON configuration: data, encoder, estimator, seed);
    saves model.pkl."""
    import json
    import pickle

    from .datasets.recipes import load_recipe
    from .experiments.protocols import fit_on, score_windows

    config = _read_config(args.config)
    spec = config["data"]
    split = load_recipe(spec["recipe"], spec.get("path"), **spec.get("options", {}))
    clf = fit_on(
        config.get("encoder"),
        split["train"],
        config.get("seed", 0),
        config.get("estimator", {}),
        valid=split.get("valid"),
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "model.pkl", "wb") as f:
        pickle.dump(clf, f)
    result = score_windows(clf, split["test"])
    (out / "test_scores.json").write_text(json.dumps(result, indent=2))
    sys.stdout.write(json.dumps(result) + "\n")


def _evaluate(args):
    """Score a saved model on a split of a recipe."""
    import json
    import pickle

    from .datasets.recipes import load_recipe
    from .experiments.protocols import score_windows

    with open(args.model, "rb") as f:
        clf = pickle.load(f)
    config = _read_config(args.config)
    spec = config["data"]
    windows = load_recipe(spec["recipe"], spec.get("path"), **spec.get("options", {}))
    result = score_windows(clf, windows[args.split])
    sys.stdout.write(json.dumps(result) + "\n")


def _command(sub, func):
    """The parser of the subcommand that runs ``func(args)``: named as ``func`` without its
    leading underscore, with the first paragraph of its docstring as help."""
    help_text = " ".join((func.__doc__ or "").split("\n\n")[0].split()).rstrip(".")
    command = sub.add_parser(func.__name__.lstrip("_"), help=help_text[:1].lower() + help_text[1:])
    command.set_defaults(func=func)
    return command


def _recording_flags(parser):
    """The flags of ``--recordings`` that choose channels and treat unreadable files, and
    those of ``--shared-data`` that choose its parts."""
    parser.add_argument(
        "--eegmat-subjects",
        nargs="+",
        help="with --shared-data: EEGMAT subjects (numbers, 'pool' for the 12 that no "
        "development split scores, 'train' for the 24 non-test ones; default: train)",
    )
    parser.add_argument(
        "--muse",
        action="store_true",
        help="with --shared-data: add the Muse headband recordings of muse-cueing/",
    )
    parser.add_argument(
        "--exclude",
        nargs="+",
        help="channel names to leave out of --recordings (default: channels named like "
        "ECG/EOG/EMG/respiration or reference derivations such as A1, A2, A2-A1)",
    )
    parser.add_argument(
        "--keep-all-channels",
        action="store_true",
        help="keep every EEG-typed channel of --recordings, ECG-like names included",
    )
    parser.add_argument(
        "--on-error",
        default="raise",
        choices=["raise", "skip"],
        help="a file of --recordings that cannot be read: stop naming it, or skip it "
        "with a warning",
    )


def build_parser():
    parser = argparse.ArgumentParser(
        prog="braindecode-pars",
        description="PARS self-supervised pretraining of EEG transformers.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = _command(sub, _demo)
    demo.add_argument("--out", default="results/demo", help="output folder")
    demo.add_argument("--encoder", help="shipped encoder name or saved encoder (pars-small)")
    demo.add_argument("--ks", nargs="+", type=int, help="labelled subjects (default: 1 2)")
    demo.add_argument("--seeds", nargs="+", type=int, help="draws (default: 0 1 2 3 4)")
    demo.add_argument("--finetune-epochs", type=int)
    demo.add_argument("--device", help="cpu or cuda")

    compare = _command(sub, _compare)
    compare.add_argument("--out", default="results/comparison", help="output folder")
    compare.add_argument("--methods", nargs="+", help="subset of scratch mae mp3 droppos pars")
    compare.add_argument("--seeds", nargs="+", type=int)
    compare.add_argument("--pretrain-epochs", type=int)
    compare.add_argument("--finetune-epochs", type=int)
    compare.add_argument("--device", help="cpu or cuda")
    compare.add_argument("--data-path", help="folder in MNE's eegbci layout (default: bundled)")

    store = _command(sub, _store)
    store.add_argument("--out", required=True, help="store folder")
    store.add_argument("--subjects", nargs="+", type=int, default=[1])
    store.add_argument("--runs", nargs="+", type=int, default=[1, 2, 3, 5, 7, 9, 11, 13])
    store.add_argument("--data-path", help="folder in MNE's eegbci layout (default: bundled)")
    store.add_argument("--window-seconds", type=float, default=30.0)
    store.add_argument("--stride-seconds", type=float, default=5.0)
    store.add_argument("--overwrite", action="store_true")
    store.add_argument("--recordings", nargs="+", help="folders or globs of files MNE reads")
    store.add_argument("--shared-data", help="folder with eegmat/ and sleep-edf-atm/")
    store.add_argument("--sfreq", type=float, help="resample recordings to this rate (100 Hz)")
    store.add_argument("--l-freq", type=float, default=0.3, help="high-pass of recordings (Hz)")
    store.add_argument("--h-freq", type=float, help="low-pass (default: min(75, 0.45 sfreq))")
    store.add_argument("--notch-freq", type=float, help="power-line notch of recordings (50/60)")
    store.add_argument("--ysyw", help="YSYW folder (training/ and test/)")
    store.add_argument("--tueg", help="TUEG edf folder")
    store.add_argument("--tuab", help="TUAB edf folder (its patients are left out of TUEG)")
    store.add_argument("--tusz", help="TUSZ edf folder (its patients are left out of TUEG)")
    store.add_argument(
        "--allow-test-patients",
        action="store_true",
        help="build a TUEG corpus without --tuab/--tusz, keeping their test patients",
    )
    store.add_argument(
        "--ysyw-split-file", help="YSYW split file (default: <ysyw>/splits.json, the recipe's)"
    )
    _recording_flags(store)

    pre = _command(sub, _pretrain)
    pre.add_argument(
        "--config",
        help="JSON file of these options by name (e.g. "
        '{"method": "pars", "epochs": 1000}); flags given here take precedence',
    )
    pre.add_argument("--out", help="checkpoint folder (resumed if it holds a run)")
    pre.add_argument("--method", default="pars", choices=["pars", "mae", "mp3", "droppos"])
    pre.add_argument("--store", help="window store folder (see 'store'); default: bundled EEG")
    pre.add_argument(
        "--recordings",
        nargs="+",
        help="your own recordings: folders or globs of files MNE reads "
        "(EDF, BDF, FIF, BrainVision, EEGLAB...), e.g. 'data/**/*.edf'",
    )
    pre.add_argument(
        "--shared-data",
        help="folder with eegmat/ and sleep-edf-atm/: the shipped encoder's corpus",
    )
    pre.add_argument("--sfreq", type=float, help="resample recordings to this rate (100 Hz)")
    pre.add_argument("--l-freq", type=float, default=0.3, help="high-pass of recordings (Hz)")
    pre.add_argument("--h-freq", type=float, help="low-pass (default: min(75, 0.45 sfreq))")
    pre.add_argument("--notch-freq", type=float, help="power-line notch of recordings (50/60)")
    _recording_flags(pre)
    pre.add_argument("--subjects", nargs="+", type=int, default=[1])
    pre.add_argument("--data-path", help="folder in MNE's eegbci layout (default: bundled)")
    pre.add_argument(
        "--window-seconds", type=float, default=10.0, help="pretraining crops (paper: 30)"
    )
    pre.add_argument("--stride-seconds", type=float, default=5.0)
    pre.add_argument("--epochs", type=int, help="paper: 1000 (default: as many as --steps take)")
    pre.add_argument(
        "--steps",
        type=int,
        default=3000,
        help="optimiser steps (of each process) when --epochs is not given, counted "
        "over the windows a --valid-fraction split by window leaves (a split by "
        "recording can hold out more, so fewer steps run: the log says how many)",
    )
    pre.add_argument(
        "--batch-size", type=int, default=64, help="per process (--paper: 512 shared by all)"
    )
    pre.add_argument("--lr", type=float, default=1e-3, help="paper: 1e-4")
    pre.add_argument(
        "--paper",
        action="store_true",
        help="the paper's optimisation for its 1.5-million-window corpus: lr 1e-4, batch "
        "512, 1000 epochs, 30-s windows (learns nothing in a few thousand steps)",
    )
    pre.add_argument(
        "--valid-fraction", type=float, default=0.1, help="held out for validation skill"
    )
    pre.add_argument("--sampling", default="random", choices=["random", "disjoint", "fixed"])
    pre.add_argument("--threads", type=int, help="torch CPU threads")
    pre.add_argument(
        "--keep-freed-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on a CPU, keep memory that training steps free for the next step instead "
        "of giving it back to the system (glibc's malloc thresholds; faster steps, the "
        "same peak memory)",
    )
    pre.add_argument("--emb-dim", type=int, default=512)
    pre.add_argument("--depth", type=int, default=8)
    pre.add_argument("--n-heads", type=int, default=8)
    pre.add_argument("--ff-dim", type=int, default=512)
    pre.add_argument("--n-patches", type=int, default=40)
    pre.add_argument("--pos-mask-ratio", type=float, default=0.8)
    pre.add_argument(
        "--decoder-heads",
        type=int,
        default=8,
        help="heads of PARS's cross-attention pair decoder (not given by the paper); with "
        "a 64-wide encoder 4 make each step about 6%% cheaper, for a lower skill over "
        "long runs (benchmarks/results/decoder_heads.md, dev_tasks_selection_heads.md)",
    )
    pre.add_argument("--mask-ratio", type=float, default=0.75)
    pre.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    pre.add_argument("--amp", action="store_true", help="bf16 autocast")
    pre.add_argument("--compile", action="store_true", help="torch.compile the model")
    pre.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    pre.add_argument("--seed", type=int, default=0)
    pre.add_argument(
        "--max-minutes",
        type=float,
        help="stop after the epoch in which this many minutes have passed; the run is "
        "saved unfinished and the same command continues it (0: after one epoch)",
    )
    pre.add_argument(
        "--extend",
        action="store_true",
        help="resume a run in --out with another --epochs / --steps (the learning-rate "
        "curve is redrawn for the new budget)",
    )

    exp_ = _command(sub, _export)
    exp_.add_argument("--run", required=True, help="the pretrain --out folder")
    exp_.add_argument("--out", required=True, help="folder to write")

    exp = _command(sub, _experiment)
    exp.add_argument("--config", required=True, help="JSON configuration file")
    exp.add_argument("--out", help="output folder (default: the configuration's 'out')")

    fin = _command(sub, _finetune)
    fin.add_argument("--config", required=True)
    fin.add_argument("--out", required=True)

    ev = _command(sub, _evaluate)
    ev.add_argument("--model", required=True, help="model.pkl written by finetune")
    ev.add_argument("--config", required=True, help="JSON configuration with 'data'")
    ev.add_argument("--split", default="test", help="train, valid, test (or all)")
    return parser


def _parse(argv):
    """Parse, letting a ``--config`` JSON file set the defaults of ``pretrain``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) == "pretrain" and args.config:
        config = _read_config(args.config)
        sub = next(
            a
            for a in parser._subparsers._group_actions
            if isinstance(a, argparse._SubParsersAction)
        ).choices["pretrain"]
        known = {a.dest for a in sub._actions}
        unknown = sorted(set(k.replace("-", "_") for k in config) - known)
        if unknown:
            raise SystemExit(
                f"braindecode-pars pretrain: unknown options {unknown} in "
                f"'{args.config}'; allowed: {sorted(known - {'help', 'config'})}"
            )
        sub.set_defaults(**{k.replace("-", "_"): v for k, v in config.items()})
        args = parser.parse_args(argv)
    if getattr(args, "command", None) == "pretrain" and not args.out:
        raise SystemExit("braindecode-pars pretrain: give --out (or 'out' in --config).")
    return args


def main(argv=None):
    args = _parse(argv)
    # braindecode's model zoo warns about MNE montage names at import; not ours to fix
    warnings.filterwarnings("ignore", category=FutureWarning, module="braindecode")
    warnings.filterwarnings("ignore", message=".*standard_1020.*")
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )
    logging.getLogger("mne").setLevel(logging.ERROR)
    logging.getLogger("braindecode").setLevel(logging.WARNING)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
