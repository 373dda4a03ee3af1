"""The ``braindecode-pars`` command line."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path


def _demo(args):
    from .experiments.demo import DemoConfig, format_results, run_demo

    config = DemoConfig()
    if args.paper_size:
        config = config.paper_size()
    overrides = {
        k: v
        for k, v in dict(
            pretrain_epochs=args.pretrain_epochs,
            finetune_epochs=args.finetune_epochs,
            seed=args.seed,
            device=args.device,
            data_path=args.data_path,
        ).items()
        if v is not None
    }
    config = dataclasses.replace(config, **overrides)
    results = run_demo(args.out, config)
    sys.stdout.write(format_results(results) + "\n")
    sys.stdout.write(f"Tables and figures written to {args.out}/\n")


def _compare(args):
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


def build_parser():
    parser = argparse.ArgumentParser(
        prog="braindecode-pars",
        description="PARS self-supervised pretraining of EEG transformers.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="pretrain PARS on bundled PhysioNet-MI EEG and compare it with training from "
        "scratch on the 4-class motor-imagery task",
    )
    demo.add_argument("--out", default="results/demo", help="output folder")
    demo.add_argument(
        "--paper-size",
        action="store_true",
        help="the paper's encoder (512 features, 8 blocks) instead of a small one",
    )
    demo.add_argument("--pretrain-epochs", type=int)
    demo.add_argument("--finetune-epochs", type=int)
    demo.add_argument("--seed", type=int)
    demo.add_argument("--device", help="cpu or cuda")
    demo.add_argument("--data-path", help="folder in MNE's eegbci layout (default: bundled)")
    demo.set_defaults(func=_demo)

    compare = sub.add_parser(
        "compare",
        help="compare scratch, MAE, MP3, DropPos and PARS on the same data, encoder, epochs "
        "and seeds; writes a table and the label-efficiency figure",
    )
    compare.add_argument("--out", default="results/comparison", help="output folder")
    compare.add_argument("--methods", nargs="+", help="subset of scratch mae mp3 droppos pars")
    compare.add_argument("--seeds", nargs="+", type=int)
    compare.add_argument("--pretrain-epochs", type=int)
    compare.add_argument("--finetune-epochs", type=int)
    compare.add_argument("--device", help="cpu or cuda")
    compare.add_argument("--data-path", help="folder in MNE's eegbci layout (default: bundled)")
    compare.set_defaults(func=_compare)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s: %(message)s",
    )
    logging.getLogger("mne").setLevel(logging.ERROR)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
