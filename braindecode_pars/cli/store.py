"""The ``store`` subcommand: your recordings (files MNE reads, or a saved braindecode
dataset; without either, the bundled PhysioNet-MI subject 1) written once to a
memory-mappable window store, which ``pretrain`` reads.

The paper's corpora (YSYW, TUEG, the shared corpus) are stored by the repository's lab
command, ``python -m benchmarks.lab store``, which takes these flags and its own
(:func:`add_store_arguments`) and writes through :func:`run_store`, as this command
does, given its corpora's windows.

What the command needs beyond the standard library is imported when it runs, so that
building the parser (and ``--help``) stays fast.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

#: ``store --window-seconds``'s default: the windows of the shipped encoders' stores, in
#: which ``pretrain`` draws its default 10-s crops.
_WINDOW_SECONDS = 10.0
#: ``--l-freq``'s value when not given: the high-pass of ``--recordings`` (Hz).
_L_FREQ = 0.3
#: The word of ``--exclude`` that turns the automatic exclusions off.
_NO_AUTOMATIC_EXCLUSIONS = "none"

#: The flags that preprocess and choose the channels of ``--recordings`` (by destination):
#: a source they do not apply to refuses them.
_RECORDING_FLAGS = (
    "sfreq", "l_freq", "h_freq", "notch_freq", "channels", "exclude", "subject_from",
)  # fmt: skip

#: Flags this command does not take, with where their setting is; an exit names it.
#: The paper's corpora and PhysioNet-MI's subjects are the lab's, outside the package.
_FORMER_FLAGS = {
    "--no-default-exclude": "'--exclude none' keeps the channels the automatic exclusions "
    "leave out.",
    "--keep-all-channels": "'--exclude none' keeps every EEG-typed channel.",
    **{
        flag: "the paper's corpora and PhysioNet-MI's subjects are stored by the "
        f"repository's lab command, python -m benchmarks.lab store {flag} ..."
        for flag in (
            "--ysyw", "--tueg", "--tuab", "--tusz", "--allow-test-patients",
            "--ysyw-split-file", "--shared-data", "--eegmat-subjects", "--muse",
            "--subjects", "--runs", "--data-path",
        )
    },
}  # fmt: skip


def add_store_arguments(parser):
    """Add the flags of ``store`` to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser of ``store`` (or of a command that stores other sources the same way).
    """
    parser.add_argument("--out", required=True, help="store folder")
    parser.add_argument(
        "--recordings",
        nargs="+",
        help="folders or globs of files MNE reads (EDF, BDF, FIF, BrainVision...); the "
        "store keeps each one's path and subject (--subject-from), never its header's "
        "patient fields; without it or --braindecode-dataset: the bundled EEG, "
        "PhysioNet-MI subject 1 (its baseline and executed-movement runs, the paper's "
        "preprocessing)",
    )
    parser.add_argument(
        "--braindecode-dataset",
        help="a braindecode BaseConcatDataset saved with its save(folder) (read with "
        "braindecode.datautil.load_concat_dataset): raws, cut into --window-seconds "
        "windows every --stride-seconds, or windows, stored as they are; stored at its "
        "own rate, with no preprocessing (the --sfreq, --l-freq, --h-freq, --notch-freq "
        "and channel flags are for --recordings)",
    )
    parser.add_argument("--sfreq", type=float, help="resample --recordings to this rate (100 Hz)")
    parser.add_argument(
        "--l-freq", type=float, help=f"high-pass of --recordings (default: {_L_FREQ} Hz)"
    )
    parser.add_argument(
        "--h-freq", type=float, help="low-pass of --recordings (default: min(75, 0.45 sfreq))"
    )
    parser.add_argument(
        "--notch-freq", type=float, help="power-line notch of --recordings (50/60; default: none)"
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
        metavar="NAME",
        help="channel names of --recordings to leave out besides the automatic "
        "exclusions (names like ECG/EOG/EMG/respiration, and reference derivations such "
        f"as A1, A2, A2-A1); '{_NO_AUTOMATIC_EXCLUSIONS}' turns the automatic ones off: "
        f"'--exclude {_NO_AUTOMATIC_EXCLUSIONS}' keeps every channel, "
        f"'--exclude {_NO_AUTOMATIC_EXCLUSIONS} X1' leaves out X1 alone "
        "(default: the automatic exclusions)",
    )
    parser.add_argument(
        "--subject-from",
        metavar="file|header|REGEX",
        help="the subject (the group of held-out splits and the people a model card "
        "counts) of each file of --recordings: 'file', each recording its own subject; "
        "a regular expression of the file's name whose first group (or group named "
        "'subject') is the subject, e.g. '(S\\d+)R\\d+' makes S001R04.edf subject S001; "
        "or 'header', the EDF header's patient code, which clinics often fill with a "
        "name. Nothing else of a header (names, birth date, hospital code) is read into "
        "the store (default: file, with a message on how to group by person)",
    )
    parser.add_argument(
        "--window-seconds",
        type=float,
        default=_WINDOW_SECONDS,
        help="window length; pretrain draws its --window-seconds crops (10 s; the "
        "paper's, with pretrain --paper, 30 s) inside these windows, so they must not be "
        "shorter",
    )
    parser.add_argument(
        "--stride-seconds",
        type=float,
        default=5.0,
        help="step between window starts: overlapping windows, so that pretraining's "
        "crops start anywhere (load_recordings strides by the window unless told: "
        "windows one after the other)",
    )
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "float16"],
        help="stored samples; float16 takes half the disk and page cache, each recording "
        "scaled by a power of two to keep 11 significant bits",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes that read and preprocess the recordings; the store is the same "
        "whatever their number",
    )
    parser.add_argument(
        "--on-error",
        default="raise",
        choices=["raise", "skip"],
        help="a recording that cannot be read or stored: stop naming it, or skip it; the "
        "skipped ones are listed with the reason in the store's info.json",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a store in --out, or start an unfinished build there again (without "
        "it, the same command resumes a stopped build)",
    )
    parser.add_argument(
        "--stop-signal",
        action="append",
        default=[],
        metavar="SIGNAL",
        help="a signal that, as SIGTERM does, stops the build once the recording being "
        "written is stored, for the same command to resume (e.g. USR1, for SLURM's "
        "--signal=USR1@60); repeat for several",
    )


def _flag(dest):
    """The flag of the destination ``dest``."""
    return "--" + dest.replace("_", "-")


def _exclusions(names):
    """``load_recordings``'s ``exclude`` of ``--exclude``'s names: the automatic exclusions
    ("auto") and the names, or the names alone when they hold ``"none"``.

    Parameters
    ----------
    names : list of str | None
        ``--exclude``'s names.

    Returns
    -------
    exclude : "auto" | list of str
        ``"auto"`` when no name is given; ``[]`` (every channel kept) for ``["none"]``.
    """
    names = list(names or [])
    if _NO_AUTOMATIC_EXCLUSIONS in names:
        return [n for n in names if n != _NO_AUTOMATIC_EXCLUSIONS]
    return ["auto", *names] if names else "auto"


def _check_store_flags(args, command):
    """Refuse, before any work, the ``store`` flags no store can be built with: an exit
    names the flag, what it takes and what it was given.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags (:func:`add_store_arguments`'s).
    command : str
        The command, which the exit names.

    Returns
    -------
    stop_signals : list of str
        SIGTERM and the ``--stop-signal`` signals, checked.
    """
    from braindecode_pars._jobs.signals import check_stop_signals

    if args.jobs < 1:
        raise SystemExit(f"{command}: --jobs must be at least 1, but got {args.jobs}.")
    for dest in ("window_seconds", "stride_seconds", "sfreq", "h_freq", "notch_freq"):
        value = getattr(args, dest)
        if value is not None and not value > 0:
            raise SystemExit(f"{command}: {_flag(dest)} must be above 0, but got {value:g}.")
    if args.l_freq is not None and not args.l_freq >= 0:
        raise SystemExit(f"{command}: --l-freq must be at least 0, but got {args.l_freq:g}.")
    if getattr(args, "subject_from", None) is not None:
        from braindecode_pars.io.recordings import check_subject_from

        try:
            check_subject_from(args.subject_from)
        except (TypeError, ValueError) as err:
            raise SystemExit(f"{command}: --subject-from: {err}") from None
    if args.recordings and args.braindecode_dataset:
        raise SystemExit(
            f"{command}: --braindecode-dataset is one source of recordings; give it alone, "
            "but got --recordings too."
        )
    try:
        return check_stop_signals("--stop-signal", ["SIGTERM", *args.stop_signal])
    except ValueError as err:
        raise SystemExit(f"{command}: {err}") from None


def refuse_recording_flags(args, source, command="braindecode-pars store", taken=()):
    """Exit naming the flags of ``--recordings`` (by destination) given for another
    source, ``source``, which would not use them: all but those it takes (``taken``)."""
    flags = [dest for dest in _RECORDING_FLAGS if dest not in taken]
    given = [_flag(dest) for dest in flags if getattr(args, dest, None) is not None]
    if given:
        every = ", ".join(_flag(dest) for dest in flags)
        raise SystemExit(
            f"{command}: {source} takes no {', '.join(given)}: {every} are for --recordings."
        )


def _recordings_windows(args):
    """The windows of ``--recordings``, read one recording at a time as they are stored."""
    from braindecode_pars.io.recordings import load_recordings

    args.l_freq = _L_FREQ if args.l_freq is None else args.l_freq  # recorded as applied
    return load_recordings(
        args.recordings,
        sfreq=args.sfreq or 100.0,
        window_seconds=args.window_seconds,
        stride_seconds=args.stride_seconds,
        l_freq=args.l_freq,
        h_freq=args.h_freq,
        notch_freq=args.notch_freq,
        exclude=_exclusions(args.exclude),
        picks=args.channels or "eeg",
        on_error=args.on_error,
        lazy=True,
        subject_from=args.subject_from,
    )


def _braindecode_dataset_windows(args, command):
    """The windows of ``--braindecode-dataset`` (a folder of braindecode's ``save``); an
    exit names a folder that is not one."""
    from braindecode_pars.io.saved import load_saved_windows

    refuse_recording_flags(args, "--braindecode-dataset (stored as saved)", command)
    try:
        return load_saved_windows(
            args.braindecode_dataset, args.window_seconds, args.stride_seconds
        )
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"{command}: --braindecode-dataset: {err}") from None


def _differences(err, flag):
    """The settings a resumed store or run refused, "<flag>: saved <a>, now <b>; ...",
    each named by the flag that sets it (``flag(key)``)."""
    return "; ".join(f"{flag(k)}: saved {a!r}, now {b!r}" for k, (a, b) in err.differences.items())


def _store_flag(key):
    """The ``store`` flag of a recorded setting (``source``: the recordings read)."""
    named = {"source": "the recordings read", "dtype": "--dtype", "format": "the store format"}
    return named.get(key, _flag(key))


#: The ``store`` flags that do not change the store (left out of its recorded settings).
_NOT_SETTINGS = ("func", "command", "argv", "out", "overwrite", "jobs", "on_error", "verbose",
                 "stop_signal")  # fmt: skip


def _store_settings(args):
    """What makes a store, recorded in it: the ``store`` flags but those of
    :data:`_NOT_SETTINGS`; a build resumes only with the same. ``--on-error`` is not one:
    a build stopped by an unreadable recording resumes with ``--on-error skip``."""
    return {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_SETTINGS}


def _write_store(windows, args, stop_signals, command):
    """Write ``windows`` to the store ``--out`` as the flags say, and report it; each
    error of the build exits with a message naming what to do.

    Parameters
    ----------
    windows : braindecode.datasets.BaseConcatDataset | RecordingStream
        The windows, as :func:`~braindecode_pars.store.write_window_store` takes them.
    args : argparse.Namespace
        The parsed flags (:func:`add_store_arguments`'s, and any others that make the
        store: they are recorded in it, :func:`_store_settings`).
    stop_signals : list of str
        The signals that stop the build (:func:`_check_store_flags`).
    command : str
        The command, which messages name.
    """
    import json

    from braindecode_pars._jobs.lock import FolderLockedError, LockFileError
    from braindecode_pars._util.logs import plural
    from braindecode_pars.store import write_window_store
    from braindecode_pars.store.errors import (
        StoreBuildStopped,
        StoreDataLostError,
        StoreMismatchError,
        StoreWriteError,
    )

    try:
        write_window_store(
            windows,
            args.out,
            overwrite=args.overwrite,
            dtype=args.dtype,
            jobs=args.jobs,
            on_error=args.on_error,
            settings=_store_settings(args),
            stop_signals=stop_signals,
        )
    except (FolderLockedError, LockFileError) as err:
        raise SystemExit(f"{command}: --out {err}") from None
    except StoreBuildStopped as err:
        sys.stderr.write(
            f"{command}: stopped by {err.signal} after {plural(err.done, 'recording')}; they "
            f"are kept in '{args.out}'. Run the same command to resume.\n"
        )
        raise SystemExit(128 + int(getattr(signal, err.signal))) from None
    except (StoreWriteError, StoreDataLostError) as err:
        raise SystemExit(f"{command}: {err}") from None
    except StoreMismatchError as err:
        listed = _differences(err, _store_flag)
        raise SystemExit(
            f"{command}: --out '{args.out}' holds an unfinished build with other settings: "
            f"{listed}. Run it with its settings to resume it, --overwrite to start again, "
            "or give another --out."
        ) from None
    except ValueError as err:  # a recording that cannot be stored, with on_error="raise"
        kept = (Path(args.out) / "build.json").is_file()
        then = " What was stored before it is kept: the same command resumes." if kept else ""
        raise SystemExit(f"{command}: {err}{then}") from None
    except KeyboardInterrupt:
        sys.stderr.write(
            f"{command}: interrupted; the recordings stored so far are kept in "
            f"'{args.out}'. Run the same command to resume.\n"
        )
        raise SystemExit(130) from None
    except FileExistsError:
        raise SystemExit(
            f"{command}: --out '{args.out}' holds a store made with other settings; pass "
            "--overwrite to replace it, or give another --out."
        ) from None
    info = json.loads((Path(args.out) / "info.json").read_text())
    skipped = info.get("n_recordings_skipped", 0)
    skipped = f", {skipped} recordings skipped (listed in info.json)" if skipped else ""
    sys.stdout.write(
        f"{info['n_windows']} windows of {info['n_recordings']} recordings written to "
        f"{args.out}/{skipped}\n"
    )


def run_store(args, windows_of=None, command="braindecode-pars store"):
    """The ``store`` command on parsed flags: check them before any work, read the windows
    and write them to ``--out``, each error of the build an exit with a message naming
    what to do.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags (:func:`add_store_arguments`'s, and any others that make the
        store: they are recorded in it).
    windows_of : callable | None
        ``windows_of(args)``: the windows of another source than this command's (the
        lab's corpora), as :func:`~braindecode_pars.store.write_window_store` takes them;
        None: those of ``--braindecode-dataset``, ``--recordings``, or without either the
        bundled PhysioNet-MI subject 1.
    command : str
        The command, which messages name.
    """
    stop_signals = _check_store_flags(args, command)
    if windows_of is not None:
        windows = windows_of(args)
    elif args.braindecode_dataset:
        windows = _braindecode_dataset_windows(args, command)
    elif args.recordings:
        windows = _recordings_windows(args)
    else:
        from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous

        source = "the bundled PhysioNet-MI (the paper's preprocessing)"
        refuse_recording_flags(args, source, command)
        windows = load_physionet_mi_continuous(
            window_seconds=args.window_seconds, stride_seconds=args.stride_seconds
        )
    _write_store(windows, args, stop_signals, command)


def _store(args):
    """Write your recordings (or the bundled PhysioNet-MI subject 1) to a memory-mappable
    window store for pretraining, one recording at a time."""
    run_store(args)
