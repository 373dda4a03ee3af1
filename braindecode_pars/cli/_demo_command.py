"""The ``demo`` subcommand (the main job), and the JSON configuration files that
``pretrain --config`` reads.

What a command needs beyond the standard library is imported when it runs, so that
building the parser (and ``--help``) stays fast.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path


def _read_config(path):
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
    from braindecode_pars.demo.main_job import DemoConfig, format_results, run_demo

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
