"""The subcommands that score encoders: ``demo``, ``compare``, ``experiment``,
``finetune`` and ``evaluate``.

Each takes the parsed arguments; what it needs beyond the standard library is imported
when it runs, so that building the parser (and ``--help``) stays fast.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path


def read_config(path):
    """The JSON configuration file ``path``, or an exit naming it.

    Parameters
    ----------
    path : str | Path
        The file (``--config``).

    Returns
    -------
    config : dict
        Its content.
    """
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SystemExit(f"braindecode-pars: no configuration file '{path}'") from None
    except json.JSONDecodeError as err:
        raise SystemExit(f"braindecode-pars: '{path}' is not valid JSON: {err}") from None


def _given(**values):
    """The values that are not None (the flags given on the command line)."""
    return {k: v for k, v in values.items() if v is not None}


def _demo(args):
    """The shipped PARS encoder against scratch and a band-power floor with 1 and 2 labelled
    subjects on bundled EEGMAT (rest vs mental arithmetic)."""
    from ..experiments.demo import DemoConfig, format_results, run_demo

    overrides = _given(
        finetune_epochs=args.finetune_epochs,
        seeds=tuple(args.seeds) if args.seeds else None,
        ks=tuple(args.ks) if args.ks else None,
        device=args.device,
        encoder=args.encoder,
    )
    config = dataclasses.replace(DemoConfig(), **overrides)
    results = run_demo(args.out, config)
    sys.stdout.write(format_results(results) + "\n")
    sys.stdout.write(f"Tables and figures written to {args.out}/\n")


def _compare(args):
    """Compare scratch, MAE, MP3, DropPos and PARS on the same data, encoder, epochs and seeds;
    writes a table and the label-efficiency figure."""
    from ..experiments.comparison import ComparisonConfig, run_comparison

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
    from ..experiments.protocols import run_experiment

    config = read_config(args.config)
    frame = run_experiment(config, args.out)
    out = Path(args.out or config.get("out", f"results/{config['protocol']}"))
    sys.stdout.write(f"{len(frame)} results in {out}/results.csv\n")


def _finetune(args):
    """Fine-tune on a recipe's train split (JSON configuration: data, encoder, estimator, seed);
    saves model.pkl."""
    import pickle

    from ..datasets.recipes import load_recipe
    from ..experiments.protocols import fit_on, score_windows

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

    from ..datasets.recipes import load_recipe
    from ..experiments.protocols import score_windows

    with open(args.model, "rb") as f:
        clf = pickle.load(f)
    config = read_config(args.config)
    spec = config["data"]
    windows = load_recipe(spec["recipe"], spec.get("path"), **spec.get("options", {}))
    result = score_windows(clf, windows[args.split])
    sys.stdout.write(json.dumps(result) + "\n")
