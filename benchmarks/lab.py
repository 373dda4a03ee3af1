"""The lab's command line: the paper's corpora written to window stores and the paper's
protocols from JSON configurations, run from the repository's root (they are not part of
the installed package; their code is in ``benchmarks/lib/``).

Usage::

    python -m benchmarks.lab store --ysyw YSYW --tueg TUEG --tuab TUAB --tusz TUSZ --out S
    python -m benchmarks.lab store --shared-data ../shared/data --muse --out S
    python -m benchmarks.lab experiment --config docs/configs/label_efficiency.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings
from pathlib import Path

from benchmarks.lib.protocols import run_experiment
from braindecode_pars.cli.store import add_store_arguments, refuse_recording_flags, run_store

#: The lab's ``store`` as its messages name it.
STORE = "benchmarks.lab store"
#: ``store --window-seconds``'s default with ``--ysyw`` or ``--tueg``: the paper's 30-s
#: windows, which ``pretrain --paper`` crops (10 s otherwise, the shipped encoders').
PAPER_WINDOW_SECONDS = 30.0
#: ``--stride-seconds``'s default but for ``--shared-data``, whose corpus takes its own.
STRIDE_SECONDS = 5.0
#: The flags of each corpus that need the corpus (by destination).
CORPUS_FLAGS = {
    "shared_data": ("eegmat_subjects", "muse", "unit"),
    "tueg": ("tuab", "tusz", "allow_test_patients"),
    "ysyw": ("ysyw_split_file",),
}
#: PhysioNet-MI's flags (by destination): the source without another one.
PHYSIONET_FLAGS = ("subjects", "runs", "data_path")


def _flag(dest):
    """The flag of the destination ``dest``."""
    return "--" + dest.replace("_", "-")


def _flags_given(args, dests):
    """The flags of ``dests`` given (not None, not False)."""
    return [_flag(d) for d in dests if getattr(args, d, None) not in (None, False)]


def store_source(args):
    """The one source the ``store`` flags name: ``"braindecode_dataset"``,
    ``"recordings"``, ``"shared_data"``, ``"paper_corpus"`` (``--ysyw`` and/or
    ``--tueg``) or ``"physionet_mi"`` (none of them: PhysioNet-MI, by default the bundled
    subject 1). An exit names two sources given together, or a corpus's flag given
    without its corpus."""
    named = _flags_given(args, ("braindecode_dataset", "recordings", "shared_data"))
    corpus = _flags_given(args, ("ysyw", "tueg"))
    if len(named) + bool(corpus) > 1:
        raise SystemExit(
            f"{STORE}: one source of recordings at a time (--ysyw and --tueg together make "
            f"one), but got {', '.join(named + corpus)}."
        )
    for corpus_flag, dests in CORPUS_FLAGS.items():
        if not getattr(args, corpus_flag):
            if given := _flags_given(args, dests):
                raise SystemExit(
                    f"{STORE}: {', '.join(given)}: only with {_flag(corpus_flag)}, which was "
                    "not given."
                )
    if named or corpus:
        if given := _flags_given(args, PHYSIONET_FLAGS):
            raise SystemExit(
                f"{STORE}: {', '.join(given)}: only for PhysioNet-MI, the source when no other "
                f"is given, but got {', '.join(named + corpus)} too."
            )
        return "paper_corpus" if corpus else named[0][2:].replace("-", "_")
    return "physionet_mi"


def eegmat_subjects(names=None, name="--eegmat-subjects"):
    """EEGMAT subjects, sorted, of numbers and the sets "pool" (the 12 that no development
    split scores) and "train" (the 24 non-test ones; no name: these)."""
    from braindecode_pars.datasets.eegmat import EEGMAT_POOL_SUBJECTS, EEGMAT_TRAIN_SUBJECTS

    sets = {"pool": EEGMAT_POOL_SUBJECTS, "train": EEGMAT_TRAIN_SUBJECTS}
    if bad := [v for v in map(str, names or ()) if v not in sets and not v.isdigit()]:
        raise ValueError(f"'{name}' takes subject numbers, 'pool' or 'train', but got {bad[0]!r}.")
    chosen = [sets.get(v) or [int(v)] for v in map(str, names or ["train"])]
    return tuple(sorted({s for subjects in chosen for s in subjects}))


def _resolve_windows(args, source):
    """``--window-seconds`` and ``--stride-seconds`` as the numbers they stand for (recorded
    in the store): 30 s windows for the paper's corpus, 10 s otherwise; a stride of 5 s,
    but the shared corpus's own for ``--shared-data`` (None) and none for the paper's
    corpus, which refuses one."""
    if args.window_seconds is None:
        args.window_seconds = PAPER_WINDOW_SECONDS if source == "paper_corpus" else 10.0
    if source == "paper_corpus" and args.stride_seconds is not None:
        raise SystemExit(
            f"{STORE}: --stride-seconds {args.stride_seconds:g}: the paper's corpus "
            "(--ysyw, --tueg) is cut into windows without overlap by its loaders; give no "
            "--stride-seconds."
        )
    if args.stride_seconds is None and source not in ("shared_data", "paper_corpus"):
        args.stride_seconds = STRIDE_SECONDS


def _source_windows(args, source):
    """The windows of ``source`` (:func:`store_source`; not one of ``braindecode-pars
    store``'s, which :func:`~braindecode_pars.cli.store.run_store` reads), read through
    the library's public loaders; an exit names a flag whose value no loader takes."""
    if source == "shared_data":
        from braindecode_pars.datasets import shared_corpus

        own = "--shared-data (its own preprocessing; --sfreq resamples it)"
        refuse_recording_flags(args, own, STORE, taken=("sfreq",))
        try:
            subjects = eegmat_subjects(args.eegmat_subjects)
            return shared_corpus(
                args.shared_data,
                sfreq=args.sfreq or 100.0,
                window_seconds=args.window_seconds,
                stride_seconds=args.stride_seconds,
                eegmat_subjects=subjects,
                muse=args.muse,
                unit=args.unit,
            )
        except ValueError as err:
            raise SystemExit(f"{STORE}: {err}") from None
    named = {"paper_corpus": "--ysyw/--tueg", "physionet_mi": "PhysioNet-MI"}[source]
    refuse_recording_flags(args, f"{named} (the paper's preprocessing)", STORE)
    if source == "paper_corpus":
        from braindecode_pars.datasets.corpus import pretraining_corpus

        try:
            return pretraining_corpus(
                ysyw_path=args.ysyw,
                tueg_path=args.tueg,
                tuab_path=args.tuab,
                tusz_path=args.tusz,
                window_seconds=args.window_seconds,
                allow_test_patients=args.allow_test_patients,
                ysyw_split_file=args.ysyw_split_file,
                lazy=True,
            )
        except ValueError as err:
            raise SystemExit(f"{STORE}: {err}") from None
    from braindecode_pars.datasets.physionet_mi import load_physionet_mi_continuous

    chosen = {"subjects": args.subjects, "runs": args.runs, "path": args.data_path}
    try:
        return load_physionet_mi_continuous(
            window_seconds=args.window_seconds,
            stride_seconds=args.stride_seconds,
            **{k: v for k, v in chosen.items() if v is not None},
        )
    except (ValueError, TypeError, FileNotFoundError) as err:
        raise SystemExit(f"{STORE}: --subjects, --runs, --data-path: {err}") from None


def _store(args):
    """Write a corpus of the paper (YSYW and TUEG, the shipped encoders' shared corpus,
    PhysioNet-MI), or any source of ``braindecode-pars store``, to a window store."""
    source = store_source(args)
    _resolve_windows(args, source)
    own = source in ("braindecode_dataset", "recordings")  # braindecode-pars store's
    run_store(args, None if own else lambda args: _source_windows(args, source), STORE)


def _experiment(args):
    """Run a protocol of the paper (label_efficiency, transfer, loso, ablation) from a JSON
    configuration; resumable."""
    config = json.loads(Path(args.config).read_text())
    frame = run_experiment(config, args.out)
    out = Path(args.out or config.get("out", f"results/{config['protocol']}"))
    sys.stdout.write(f"{len(frame)} results in {out}/results.csv\n")


def build_parser():
    """The parser of the lab's subcommands; each namespace holds ``func``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.lab", description=" ".join(__doc__.split("\n\n")[0].split())
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(func, help_text):
        cmd = sub.add_parser(func.__name__.lstrip("_"), help=help_text)
        cmd.set_defaults(func=func)
        return cmd

    store = command(_store, "the paper's corpora (or any source of braindecode-pars store)")
    store.description = (
        "braindecode-pars store's flags and the paper's sources: one of --recordings, "
        "--braindecode-dataset, --shared-data, --ysyw/--tueg, or PhysioNet-MI "
        "(--subjects, --runs, --data-path; default: the bundled subject 1). Windows of 30 s "
        "for --ysyw/--tueg, 10 s otherwise; a stride of 5 s but for --shared-data "
        "(its corpus's own) and --ysyw/--tueg (none)."
    )
    add_store_arguments(store)
    store.set_defaults(window_seconds=None, stride_seconds=None)
    corpora = store.add_argument_group("the paper's corpora")
    corpora.add_argument("--shared-data", help="folder with eegmat/ and sleep-edf-atm/")
    corpora.add_argument("--eegmat-subjects", nargs="+",
        help="with --shared-data: EEGMAT subjects (numbers, 'pool' for the 12 that no "
        "development split scores, 'train' for the 24 non-test ones; default: train)")  # fmt: skip
    corpora.add_argument("--muse", action="store_true",
        help="with --shared-data: add the Muse headband recordings of muse-cueing/")  # fmt: skip
    corpora.add_argument("--unit", choices=["uV"],
        help="with --shared-data: every part in microvolts (default: each reader's own "
        "unit, which the scale-invariant 'window' normalisation does not read)")  # fmt: skip
    corpora.add_argument("--ysyw", help="YSYW folder (training/ and test/)")
    corpora.add_argument("--ysyw-split-file",
        help="YSYW split file (default: <ysyw>/splits.json, the recipe's)")  # fmt: skip
    corpora.add_argument("--tueg", help="TUEG edf folder")
    corpora.add_argument("--tuab", help="TUAB edf folder (its patients are left out of TUEG)")
    corpora.add_argument("--tusz", help="TUSZ edf folder (its patients are left out of TUEG)")
    corpora.add_argument("--allow-test-patients", action="store_true",
        help="build a TUEG corpus without --tuab/--tusz, keeping their test patients")  # fmt: skip
    corpora.add_argument("--subjects", nargs="+", type=int,
        help="PhysioNet-MI subjects (default: 1)")  # fmt: skip
    corpora.add_argument("--runs", nargs="+", type=int,
        help="their runs (default: the baselines and executed movements, 1 2 3 5 7 9 11 13: "
        "no imagery)")  # fmt: skip
    corpora.add_argument("--data-path",
        help="PhysioNet-MI folder in MNE's eegbci layout (default: bundled)")  # fmt: skip

    exp = command(_experiment, "a protocol of the paper from a JSON configuration")
    exp.add_argument("--config", required=True, help="JSON configuration file")
    exp.add_argument("--out", help="output folder (default: the configuration's 'out')")
    return parser


def main(argv=None):
    """Run a lab command; 0 when it ran."""
    args = build_parser().parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning, module="braindecode")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s: %(message)s"
    )
    logging.getLogger("mne").setLevel(logging.ERROR)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
