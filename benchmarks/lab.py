"""The lab's command line: the pretext tasks compared on one footing and the paper's
protocols from JSON configurations, run from the repository (they are not part of the
installed package; their code is in ``benchmarks/lib/``).

Usage::

    python benchmarks/lab.py compare --out results/comparison
    python benchmarks/lab.py experiment --config docs/configs/label_efficiency.json
    python benchmarks/lab.py finetune --config CONFIG --out OUT
    python benchmarks/lab.py evaluate --model OUT/model.pkl --config CONFIG
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import warnings
from pathlib import Path

from lib.comparison import ComparisonConfig, run_comparison
from lib.protocols import fit_on, run_experiment, score_windows

from braindecode_pars.cli._demo_command import read_config


def _given(**values):
    """The values that are not None (the flags given on the command line)."""
    return {k: v for k, v in values.items() if v is not None}


def _compare(args):
    """Compare scratch, MAE, MP3, DropPos and PARS on the same data, encoder, epochs and seeds;
    writes a table and the label-efficiency figure."""
    overrides = _given(
        methods=tuple(args.methods) if args.methods else None,
        seeds=tuple(args.seeds) if args.seeds else None,
        pretrain_epochs=args.pretrain_epochs,
        finetune_epochs=args.finetune_epochs,
        device=args.device,
        data_path=args.data_path,
    )
    config = dataclasses.replace(ComparisonConfig(), **overrides)
    run_comparison(args.out, config)
    sys.stdout.write((Path(args.out) / "table.md").read_text())


def _experiment(args):
    """Run a protocol of the paper (label_efficiency, transfer, loso, ablation) from a JSON
    configuration; resumable."""
    config = read_config(args.config)
    frame = run_experiment(config, args.out)
    out = Path(args.out or config.get("out", f"results/{config['protocol']}"))
    sys.stdout.write(f"{len(frame)} results in {out}/results.csv\n")


def _finetune(args):
    """Fine-tune on a recipe's train split (JSON configuration: data, encoder, estimator, seed);
    saves model.pkl."""
    import pickle

    from braindecode_pars.datasets.recipes import load_recipe

    config = read_config(args.config)
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
    import pickle

    from braindecode_pars.datasets.recipes import load_recipe

    with open(args.model, "rb") as f:
        clf = pickle.load(f)
    config = read_config(args.config)
    spec = config["data"]
    windows = load_recipe(spec["recipe"], spec.get("path"), **spec.get("options", {}))
    result = score_windows(clf, windows[args.split])
    sys.stdout.write(json.dumps(result) + "\n")


def build_parser():
    """The parser of the lab's subcommands; each namespace holds ``func``."""
    parser = argparse.ArgumentParser(prog="benchmarks/lab.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(func, help_text):
        cmd = sub.add_parser(func.__name__.lstrip("_"), help=help_text)
        cmd.set_defaults(func=func)
        return cmd

    compare = command(_compare, "scratch, MAE, MP3, DropPos and PARS on one footing")
    compare.add_argument("--out", default="results/comparison", help="output folder")
    compare.add_argument("--methods", nargs="+", help="subset of scratch mae mp3 droppos pars")
    compare.add_argument("--seeds", nargs="+", type=int, help="seeds (default: the config's)")
    compare.add_argument("--pretrain-epochs", type=int, help="(default: the config's)")
    compare.add_argument("--finetune-epochs", type=int, help="(default: the config's)")
    compare.add_argument("--device", help="cpu or cuda")
    compare.add_argument("--data-path", help="folder in MNE's eegbci layout (default: bundled)")

    exp = command(_experiment, "a protocol of the paper from a JSON configuration")
    exp.add_argument("--config", required=True, help="JSON configuration file")
    exp.add_argument("--out", help="output folder (default: the configuration's 'out')")

    fin = command(_finetune, "fine-tune on a recipe's train split; saves model.pkl")
    fin.add_argument("--config", required=True, help="JSON configuration file")
    fin.add_argument("--out", required=True, help="output folder")

    ev = command(_evaluate, "score a saved model on a split of a recipe")
    ev.add_argument("--model", required=True, help="model.pkl written by finetune")
    ev.add_argument("--config", required=True, help="JSON configuration with 'data'")
    ev.add_argument("--split", default="test", help="train, valid, test (or all)")
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
