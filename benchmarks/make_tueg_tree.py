"""Write a synthetic tree of EDF files laid out as TUEG lays them out, of a chosen size
(:mod:`benchmarks.lib.tueg_tree` says what it holds).

Usage::

    python -m benchmarks.make_tueg_tree --out /var/tmp/tueg --gb 10
"""

from __future__ import annotations

import argparse
import logging

from benchmarks.lib.tueg_tree import add_tree_arguments, make_tree, parse_tree_arguments

logger = logging.getLogger("make_tueg_tree")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder of the tree")
    add_tree_arguments(parser)
    parser.add_argument("--seed", type=int, default=0)
    args = parse_tree_arguments(parser, argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    summary = make_tree(args.out, args.gb, tuple(args.minutes), seed=args.seed)
    logger.info(
        "%d files (%d cut short, %d unreadable) of %d subjects, %.2f GB, in %s",
        summary["files"], len(summary["truncated"]), len(summary["unreadable"]),
        summary["subjects"],
        summary["bytes"] / 1e9, summary["edf"],
    )  # fmt: skip
    return summary


if __name__ == "__main__":
    main()
