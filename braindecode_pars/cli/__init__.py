"""The ``braindecode-pars`` command line: the parser and :func:`main`.

The subcommands live by what they do: :mod:`.pretrain` makes an encoder (``store``,
``pretrain``, ``export``), :mod:`.demo` runs the main job (``demo``); the lab's
commands (the pretext comparison, the paper's protocols) are the repository's
``benchmarks/lab.py``. Building the parser imports nothing beyond the standard library
and those two modules, whose commands import what they need when they run: ``--help``
is fast and prints no warning of the libraries underneath.
"""

from __future__ import annotations

import argparse
import logging
import warnings

from ._commands import CONFIG_ONLY_HELP, SIZES, _export, _pretrain, config_only
from ._demo_command import _demo, read_config
from ._store_command import _store

__all__ = ["build_parser", "main"]


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that ends with ``(default: X)`` for each flag whose help does not already
    speak of its default (switches and flags without a value excepted)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (
            "default" not in text
            and action.option_strings
            and not any(action.default is v for v in (None, False, True, argparse.SUPPRESS))
        ):
            value = action.default
            if isinstance(value, list | tuple):
                value = " ".join(str(v) for v in value)
            text += f" (default: {value})".replace("%", "%%")
        return text


def _command(sub, func):
    """The parser of the subcommand that runs ``func(args)``: named as ``func`` without its
    leading underscore, with the first paragraph of its docstring as help."""
    help_text = " ".join((func.__doc__ or "").split("\n\n")[0].split()).rstrip(".")
    command = sub.add_parser(
        func.__name__.lstrip("_"),
        help=help_text[:1].lower() + help_text[1:],
        formatter_class=_DefaultsFormatter,
    )
    command.set_defaults(func=func)
    return command


def _preprocessing_flags(parser):
    """The flags that resample and filter ``--recordings``."""
    parser.add_argument("--sfreq", type=float, help="resample recordings to this rate (100 Hz)")
    parser.add_argument("--l-freq", type=float, default=0.3, help="high-pass of recordings (Hz)")
    parser.add_argument("--h-freq", type=float, help="low-pass (default: min(75, 0.45 sfreq))")
    parser.add_argument("--notch-freq", type=float, help="power-line notch of recordings (50/60)")


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
        "--channels",
        nargs="+",
        help="the channels of --recordings to keep, by name (default: every EEG-typed "
        "channel); one set for every recording, which a classifier of several channels "
        "needs",
    )
    parser.add_argument(
        "--exclude",
        nargs="+",
        help="channel names of --recordings to leave out, in addition to the automatic "
        "exclusions: channels named like ECG/EOG/EMG/respiration or reference derivations "
        "such as A1, A2, A2-A1 (--no-default-exclude clears those)",
    )
    parser.add_argument(
        "--no-default-exclude",
        action="store_true",
        help="keep the channels the automatic exclusions would leave out (only --exclude's "
        "are left out)",
    )
    parser.add_argument(
        "--keep-all-channels",
        action="store_true",
        help="keep every EEG-typed channel of --recordings, ECG-like names included "
        "(--no-default-exclude without --exclude)",
    )
    parser.add_argument(
        "--on-error",
        default="raise",
        choices=["raise", "skip"],
        help="a recording that cannot be read or stored: stop naming it, or skip it; the "
        "skipped ones are listed with the reason in the store's info.json",
    )


def _demo_parser(sub):
    """The parser of ``demo``."""
    from ..pretrained import DEFAULT_ENCODER  # a name: imports nothing

    demo = _command(sub, _demo)
    demo.add_argument("--out", default="results/demo", help="output folder")
    demo.add_argument(
        "--encoder", help=f"shipped encoder name or saved encoder (default: {DEFAULT_ENCODER})"
    )
    demo.add_argument("--ks", nargs="+", type=int, help="labelled subjects (default: 1 2)")
    demo.add_argument("--seeds", nargs="+", type=int, help="draws (default: 0 1 2 3 4)")
    demo.add_argument(
        "--finetune-epochs", type=int, help="epochs of the trained-from-scratch row's head (40)"
    )
    demo.add_argument("--device", help="cpu or cuda")


def _store_parser(sub):
    store = _command(sub, _store)
    store.add_argument("--out", required=True, help="store folder")
    store.add_argument(
        "--subjects",
        nargs="+",
        type=int,
        default=[1],
        help="PhysioNet-MI subjects when no --recordings, --shared-data, --ysyw or --tueg",
    )
    store.add_argument(
        "--runs",
        nargs="+",
        type=int,
        default=[1, 2, 3, 5, 7, 9, 11, 13],
        help="their runs (the baselines and executed movements: no imagery)",
    )
    store.add_argument("--data-path", help="folder in MNE's eegbci layout (default: bundled)")
    store.add_argument(
        "--window-seconds",
        type=float,
        help="window length (default: 10, the shipped encoders' stores and pretrain's "
        "crops; 30 with --ysyw or --tueg, the paper's windows, which pretrain --paper "
        "crops); pretrain draws its --window-seconds crops inside these windows, so they "
        "must not be shorter",
    )
    store.add_argument(
        "--stride-seconds", type=float, default=5.0, help="step between window starts"
    )
    store.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a store in --out, or start an unfinished build there again (without "
        "it, the same command resumes a stopped build)",
    )
    store.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes that read and preprocess --recordings, --ysyw or --tueg; the store "
        "is the same whatever their number",
    )
    store.add_argument(
        "--stop-signal",
        action="append",
        default=[],
        metavar="SIGNAL",
        help="a signal that, as SIGTERM does, stops the build once the recording being "
        "written is stored, for the same command to resume (e.g. USR1, for SLURM's "
        "--signal=USR1@60); repeat for several",
    )
    store.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "float16"],
        help="stored samples; float16 takes half the disk and page cache, each recording "
        "scaled by a power of two to keep 11 significant bits",
    )
    store.add_argument("--recordings", nargs="+", help="folders or globs of files MNE reads")
    store.add_argument(
        "--braindecode-dataset",
        help="a braindecode BaseConcatDataset saved with its save(folder) (read with "
        "braindecode.datautil.load_concat_dataset): raws, cut into --window-seconds "
        "windows every --stride-seconds, or windows, stored as they are; stored at its "
        "own rate, with no preprocessing (the --sfreq, --l-freq, --h-freq, --notch-freq "
        "and channel flags are for --recordings)",
    )
    store.add_argument("--shared-data", help="folder with eegmat/ and sleep-edf-atm/")
    _preprocessing_flags(store)
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


def _pretrain_parser(sub):
    pre = _command(sub, _pretrain)
    pre.add_argument(
        "--config",
        help="JSON file of these options by name (e.g. "
        '{"method": "pars", "epochs": 1000}), and of the encoder settings that only a '
        f"file sets: {CONFIG_ONLY_HELP}, each in place of --size's; flags given here take "
        "precedence",
    )
    pre.add_argument("--out", help="checkpoint folder (resumed if it holds a run)")
    pre.add_argument(
        "--method",
        default="pars",
        choices=["pars", "mae", "mp3", "droppos"],
        help="the pretext task: PARS or one of the paper's baselines",
    )
    pre.add_argument(
        "--store",
        help="window store folder written by 'store' (your recordings, the shared corpus, "
        "YSYW/TUEG...); default: the bundled EEG, PhysioNet-MI subject 1",
    )
    pre.add_argument(
        "--window-seconds",
        type=float,
        default=10.0,
        help="pretraining crops (paper: 30); without --store also the windows cut from the "
        "bundled EEG, every 5 s; each training example draws one channel and a crop of it",
    )
    pre.add_argument(
        "--epochs",
        type=int,
        help="paper: 1000; an epoch is a shuffled pass over the training windows (each "
        "example a random channel and crop of one), or one step of --batch-size windows "
        "drawn with replacement when there are fewer (default: as many as --steps take)",
    )
    pre.add_argument(
        "--steps",
        type=int,
        default=3000,
        help="optimiser steps (of each process) when --epochs is not given, counted "
        "over the windows that train once --valid-fraction is held out (whole "
        "recordings where it can): the run takes at least this many, at most an "
        "epoch more",
    )
    pre.add_argument(
        "--batch-size", type=int, default=64, help="per process (--paper: 512 shared by all)"
    )
    pre.add_argument("--lr", type=float, default=1e-3, help="paper: 1e-4")
    pre.add_argument(
        "--paper",
        action="store_true",
        help="the paper's optimisation for its 1.5-million-window corpus: lr 1e-4, batch "
        "512, 1000 epochs, 30-s windows (learns nothing in a few thousand steps); the "
        "encoder stays --size's",
    )
    pre.add_argument(
        "--valid-fraction", type=float, default=0.1, help="held out for validation skill"
    )
    pre.add_argument(
        "--sampling",
        default="random",
        choices=["random", "disjoint", "fixed"],
        help="PARS's patch starts: uniform (the paper's), non-overlapping, or on a grid",
    )
    pre.add_argument(
        "--threads",
        type=int,
        help="torch CPU threads (default: the cores not busy when the command starts, "
        "measured over a tenth of a second, at least 1; the estimators' fits choose "
        "theirs the same way)",
    )
    pre.add_argument(
        "--keep-freed-memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="on a CPU, keep memory that training steps free for the next step instead "
        "of giving it back to the system (glibc's malloc thresholds; faster steps, the "
        "same peak memory)",
    )
    pre.add_argument(
        "--size",
        default="small",
        choices=list(SIZES),
        help="encoder size: "
        + ", or ".join(f"'{name}', {text}" for name, text in SIZES.items())
        + " (default: small); emb_dim, depth, n_heads or ff_dim in --config replace one "
        "of its settings",
    )
    pre.add_argument("--n-patches", type=int, default=40, help="PARS's patches per crop")
    pre.add_argument(
        "--pos-mask-ratio",
        type=float,
        default=0.8,
        help="share of PARS's patches without a positional embedding (DropPos's gamma_pos)",
    )
    pre.add_argument(
        "--decoder-heads",
        type=int,
        default=8,
        help="heads of PARS's cross-attention pair decoder (not given by the paper); with "
        "a 64-wide encoder 4 make each step about 6%% cheaper, for a lower skill over "
        "long runs (benchmarks/results/decoder_heads.md, dev_tasks_selection_heads.md)",
    )
    pre.add_argument(
        "--mask-ratio",
        type=float,
        default=0.75,
        help="share of patches removed (MAE, DropPos) or hidden from keys and values (MP3)",
    )
    pre.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    pre.add_argument(
        "--amp",
        action=argparse.BooleanOptionalAction,
        help="bf16 autocast of the forward pass (default: on a GPU, not on a CPU)",
    )
    pre.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        help="torch.compile the model; the first step holds the compilation (default: on "
        "a GPU, not on a CPU)",
    )
    pre.add_argument(
        "--compile-mode",
        choices=("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"),
        help="torch.compile's mode when compiling (default: torch's); reduce-overhead "
        "replays every step as CUDA graphs on a GPU",
    )
    pre.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    pre.add_argument(
        "--read",
        choices=["random", "disk"],
        default="random",
        help="how the --store is read: each batch random windows anywhere in it, or chunks "
        "of windows in the order of its file, in a new order every epoch, shuffled in a "
        "buffer (for a store read from a disk: benchmarks/results/read_scale.md)",
    )
    pre.add_argument(
        "--checkpoint-minutes",
        type=float,
        default=5.0,
        help="save the run's state at the end of the first epoch this many minutes after "
        "the last save (0: every epoch); also at the end and when stopped",
    )
    pre.add_argument("--seed", type=int, default=0, help="seed of the model and every draw")
    pre.add_argument(
        "--max-minutes",
        type=float,
        help="stop after the epoch in which this many minutes have passed; the run is "
        "saved unfinished and the same command continues it (0: after one epoch)",
    )
    pre.add_argument(
        "--stop-signal",
        action="append",
        default=[],
        metavar="SIGNAL",
        help="a signal besides SIGTERM (e.g. USR1, as SLURM's --signal sends) on which the "
        "run saves its state at the next step and exits with 128 + the signal's number "
        "(143 for SIGTERM); the same command continues from that step. May repeat",
    )
    pre.add_argument(
        "--extend",
        action="store_true",
        help="resume a run in --out with another --epochs / --steps (the learning-rate "
        "curve is redrawn for the new budget)",
    )


def build_parser():
    """The parser of ``braindecode-pars`` and its subcommands.

    Returns
    -------
    parser : argparse.ArgumentParser
        Each subcommand's namespace holds ``func``, the function that runs it.
    """
    parser = argparse.ArgumentParser(
        prog="braindecode-pars",
        description="PARS self-supervised pretraining of EEG transformers.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    _demo_parser(sub)
    _store_parser(sub)
    _pretrain_parser(sub)

    exp_ = _command(sub, _export)
    exp_.add_argument("--run", required=True, help="the pretrain --out folder")
    exp_.add_argument("--out", required=True, help="folder to write")

    return parser


def _subparser(parser, name):
    """The parser of subcommand ``name``."""
    action = next(
        a for a in parser._subparsers._group_actions if isinstance(a, argparse._SubParsersAction)
    )
    return action.choices[name]


def _parse(argv):
    """Parse, letting a ``--config`` JSON file set the defaults of ``pretrain``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) == "pretrain" and args.config:
        config = read_config(args.config)
        sub = _subparser(parser, "pretrain")
        known = {a.dest for a in sub._actions} | set(config_only())
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
    """Run the ``braindecode-pars`` command line.

    Parameters
    ----------
    argv : list of str | None
        The arguments; None: ``sys.argv[1:]``.

    Returns
    -------
    status : int
        0 when the command ran (errors exit through :class:`SystemExit`).
    """
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
