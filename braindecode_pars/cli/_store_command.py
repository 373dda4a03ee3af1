"""The ``store`` subcommand: recordings (yours, the shared corpus, YSYW/TUEG, a saved
braindecode dataset or PhysioNet-MI) written once to a memory-mappable window store,
which ``pretrain`` reads; the data assembly is
:mod:`braindecode_pars.datasets.pretraining_views`'s.

What the command needs beyond the standard library is imported when it runs, so that
building the parser (and ``--help``) stays fast.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

#: The flags passed as they are to ``recording_windows``, under their own names.
_RECORDING_FLAGS = ("recordings", "shared_data", "sfreq", "window_seconds", "stride_seconds",
                    "l_freq", "h_freq", "notch_freq", "on_error", "muse")  # fmt: skip

#: ``store --window-seconds``'s default: the windows of the shipped encoders' stores, in
#: which ``pretrain`` draws its default 10-s crops.
WINDOW_SECONDS = 10.0
#: Its default with ``--ysyw`` or ``--tueg``: the paper's 30-s windows, which
#: ``pretrain --paper`` crops.
PAPER_WINDOW_SECONDS = 30.0

#: The ``store`` flags that name a source of recordings, one at a time.
_SOURCES = ("braindecode_dataset", "recordings", "shared_data", "ysyw", "tueg")


def _braindecode_dataset_windows(args):
    """The windows of ``--braindecode-dataset`` (a folder of braindecode's ``save``); an
    exit names another source given with it, or a folder that is not one."""
    from ..datasets.saved import load_saved_windows

    others = [name for name in _SOURCES[1:] if getattr(args, name)]
    if others:
        given = ", ".join("--" + name.replace("_", "-") for name in others)
        raise SystemExit(
            f"braindecode-pars store: --braindecode-dataset is one source of recordings; "
            f"give it alone, but got {given} too."
        )
    try:
        return load_saved_windows(
            args.braindecode_dataset, args.window_seconds, args.stride_seconds
        )
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"braindecode-pars store: --braindecode-dataset: {err}") from None


def _differences(err, flag):
    """The settings a resumed store or run refused, "<flag>: saved <a>, now <b>; ...",
    each named by the flag that sets it (``flag(key)``)."""
    return "; ".join(f"{flag(k)}: saved {a!r}, now {b!r}" for k, (a, b) in err.differences.items())


def _store_flag(key):
    """The ``store`` flag of a recorded setting (``source``: the recordings read)."""
    named = {"source": "the recordings read", "dtype": "--dtype", "format": "the store format"}
    return named.get(key, "--" + key.replace("_", "-"))


def _recording_options(args):
    """The arguments of :func:`~braindecode_pars.datasets.pretraining_views.recording_windows`
    that the ``store`` flags give, ``lazy`` aside (``--eegmat-subjects`` checked: an exit
    names it)."""
    from ..datasets.pretraining_views import eegmat_subjects

    subjects = None
    if args.shared_data:
        try:
            subjects = eegmat_subjects(args.eegmat_subjects, name="--eegmat-subjects")
        except ValueError as err:
            raise SystemExit(f"braindecode-pars store: {err}") from None
    options = {name: getattr(args, name) for name in _RECORDING_FLAGS}
    return dict(
        options, exclude=exclusions(args), picks=args.channels or "eeg", eegmat_subjects=subjects
    )


def exclusions(args):
    """``load_recordings``'s ``exclude`` of the flags: the automatic exclusions ("auto")
    and ``--exclude``'s names, without "auto" under ``--no-default-exclude`` or
    ``--keep-all-channels``."""
    automatic = not (args.no_default_exclude or args.keep_all_channels)
    names = list(args.exclude or [])
    if not names:
        return "auto" if automatic else []
    return ["auto", *names] if automatic else names


#: The ``store`` flags that do not change the store (left out of its recorded settings).
_NOT_SETTINGS = ("func", "command", "out", "overwrite", "jobs", "on_error", "verbose",
                 "stop_signal")  # fmt: skip


def store_settings(args):
    """What makes a store, recorded in it: the ``store`` flags but those of
    :data:`_NOT_SETTINGS`; a build resumes only with the same. ``--on-error`` is not one:
    a build stopped by an unreadable recording resumes with ``--on-error skip``."""
    return {k: v for k, v in sorted(vars(args).items()) if k not in _NOT_SETTINGS}


def _store(args):
    """Write recordings (yours, the shared corpus, YSYW/TUEG or PhysioNet-MI) to a
    memory-mappable window store for pretraining, one recording at a time."""
    import json

    from .._lock import FolderLockedError
    from .._signals import check_stop_signals
    from ..datasets import load_physionet_mi_continuous, pretraining_corpus, write_window_store
    from ..datasets.pretraining_views import recording_windows
    from ..datasets.store import (
        StoreBuildStopped,
        StoreDataLostError,
        StoreMismatchError,
        StoreWriteError,
    )

    if args.jobs < 1:
        raise SystemExit(f"braindecode-pars store: --jobs must be at least 1, but got {args.jobs}.")
    try:
        stop_signals = check_stop_signals("--stop-signal", ["SIGTERM", *args.stop_signal])
    except ValueError as err:
        raise SystemExit(f"braindecode-pars store: {err}") from None
    if args.window_seconds is None:  # recorded as the number it stands for
        args.window_seconds = PAPER_WINDOW_SECONDS if args.ysyw or args.tueg else WINDOW_SECONDS
    if args.braindecode_dataset:
        windows = _braindecode_dataset_windows(args)
    else:
        windows = recording_windows(lazy=True, **_recording_options(args))
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
        windows = load_physionet_mi_continuous(
            args.subjects,
            runs=args.runs,
            path=args.data_path,
            window_seconds=args.window_seconds,
            stride_seconds=args.stride_seconds,
        )
    try:
        write_window_store(
            windows,
            args.out,
            overwrite=args.overwrite,
            dtype=args.dtype,
            jobs=args.jobs,
            on_error=args.on_error,
            settings=store_settings(args),
            stop_signals=stop_signals,
        )
    except FolderLockedError as err:
        raise SystemExit(f"braindecode-pars store: --out {err}") from None
    except StoreBuildStopped as err:
        sys.stderr.write(
            f"braindecode-pars store: stopped by {err.signal} after {err.done} recordings; "
            f"they are kept in '{args.out}'. Run the same command to resume.\n"
        )
        raise SystemExit(128 + int(getattr(signal, err.signal))) from None
    except (StoreWriteError, StoreDataLostError) as err:
        raise SystemExit(f"braindecode-pars store: {err}") from None
    except StoreMismatchError as err:
        listed = _differences(err, _store_flag)
        raise SystemExit(
            f"braindecode-pars store: --out '{args.out}' holds an unfinished build with other "
            f"settings: {listed}. Run it with its settings to resume it, --overwrite to "
            "start again, or give another --out."
        ) from None
    except ValueError as err:  # a recording that cannot be stored, with on_error="raise"
        kept = (Path(args.out) / "build.json").is_file()
        then = " What was stored before it is kept: the same command resumes." if kept else ""
        raise SystemExit(f"braindecode-pars store: {err}{then}") from None
    except KeyboardInterrupt:
        sys.stderr.write(
            f"braindecode-pars store: interrupted; the recordings stored so far are kept in "
            f"'{args.out}'. Run the same command to resume.\n"
        )
        raise SystemExit(130) from None
    except FileExistsError:
        raise SystemExit(
            f"braindecode-pars store: --out '{args.out}' holds a store made with other "
            "settings; pass --overwrite to replace it, or give another --out."
        ) from None
    info = json.loads((Path(args.out) / "info.json").read_text())
    skipped = info.get("n_recordings_skipped", 0)
    skipped = f", {skipped} recordings skipped (listed in info.json)" if skipped else ""
    sys.stdout.write(
        f"{info['n_windows']} windows of {info['n_recordings']} recordings written to "
        f"{args.out}/{skipped}\n"
    )
