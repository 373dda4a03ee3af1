"""The ``braindecode-pars`` command line: the parser and :func:`main`.

The subcommands live by what they do: :mod:`.store` writes a window store (``store``),
:mod:`._encoder_commands` makes an encoder from it (``pretrain``, ``export``),
:mod:`._demo_command` runs the main job (``demo``); each module adds its command's
flags. The lab's commands (the paper's corpora stored, the pretext comparison, the
paper's protocols) are the repository's ``python -m benchmarks.lab``. Building the
parser imports nothing beyond the standard library and those modules, whose commands
import what they need when they run: ``--help`` is fast and prints no warning of the
libraries underneath.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings

from braindecode_pars.cli._demo_command import _demo, _read_config
from braindecode_pars.cli._encoder_commands import _add_pretrain_arguments, _export, _pretrain
from braindecode_pars.cli.store import _FORMER_FLAGS, _store, add_store_arguments

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
            and action.default != []
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


def _demo_parser(sub):
    """The parser of ``demo``."""
    from braindecode_pars.weights import DEFAULT_ENCODER  # a name: imports nothing

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
    store = _command(sub, _store)
    store.epilog = (
        "The paper's corpora (YSYW, TUEG, the shipped encoders' shared corpus) and "
        "PhysioNet-MI's other subjects are stored by the repository's lab command, "
        "python -m benchmarks.lab store, which takes these flags too."
    )
    add_store_arguments(store)
    _add_pretrain_arguments(_command(sub, _pretrain))

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


def _not_flags(parser, args, extra):
    """Exit naming the arguments ``extra`` that the command does not take: for a setting
    of ``pretrain --config`` or a former flag of ``store``, where it is set now."""
    command = getattr(args, "command", None)
    text = " ".join(extra)
    first = next((a for a in extra if a.startswith("--")), None)
    name = (first or "").partition("=")[0]
    if command == "store" and name in _FORMER_FLAGS:
        raise SystemExit(
            f"braindecode-pars store: {name} is not a flag of this command (got {text}): "
            f"{_FORMER_FLAGS[name]}"
        )
    if command == "pretrain" and name:
        from braindecode_pars.cli._encoder_commands import _config_settings

        settings = _config_settings()
        key = name[2:].replace("-", "_")
        value = "true"
        if key not in settings and key.startswith("no_") and key[3:] in settings:
            key, value = key[3:], "false"
        if key in settings:
            after = extra[extra.index(first) + 1 :]
            if "=" in first:
                value = first.partition("=")[2]
            elif after and not after[0].startswith("--"):
                value = after[0]
            try:
                value = json.dumps(json.loads(value))
            except ValueError:
                value = json.dumps(value)
            raise SystemExit(
                f"braindecode-pars pretrain: {name} is not a flag (got {text}): set it by "
                f'name in the --config JSON file, e.g. {{"{key}": {value}}}; the settings '
                f"only --config sets: {', '.join(sorted(settings))}."
            )
    parser.error(f"unrecognized arguments: {text}")


def _config_value(action, name, value, path):
    """Refuse the value ``value`` that the ``--config`` file ``path`` gives the flag of
    ``action``, as the flag would: an exit names the setting, what it takes and what it
    got (argparse checks the flags given, not the defaults a file sets)."""
    where = f"braindecode-pars pretrain: '{name}' in '{path}'"
    if action.choices is not None and value not in action.choices:
        allowed = ", ".join(map(repr, action.choices))
        raise SystemExit(f"{where} takes one of {allowed}, but got {value!r}.")
    if isinstance(action, argparse._StoreTrueAction) and not isinstance(value, bool):
        raise SystemExit(f"{where} takes true or false, but got {value!r}.")
    kinds = {int: (int,), float: (int, float), str: (str,)}.get(action.type)
    if (
        kinds
        and not isinstance(value, str)
        and (isinstance(value, bool) or not isinstance(value, kinds))
    ):
        raise SystemExit(f"{where} takes a {action.type.__name__}, but got {value!r}.")


def _pretrain_config(parser, argv, args):
    """The ``pretrain`` flags with the settings only ``--config`` sets, each from the file
    or at its default (:func:`~braindecode_pars.cli._encoder_commands._config_settings`), and the
    file's values of the flags not given."""
    from braindecode_pars.cli._encoder_commands import _config_settings

    settings = _config_settings()
    config = _read_config(args.config) if args.config else {}
    if not isinstance(config, dict):
        raise SystemExit(
            f"braindecode-pars pretrain: --config '{args.config}' must hold a JSON object of "
            f"settings by name, but holds a {type(config).__name__}."
        )
    config = {k.replace("-", "_"): v for k, v in config.items()}
    sub = _subparser(parser, "pretrain")
    flags = {
        a.dest: a for a in sub._actions if a.option_strings and a.dest not in ("help", "config")
    }
    unknown = sorted(set(config) - set(flags) - set(settings))
    if unknown:
        raise SystemExit(
            f"braindecode-pars pretrain: unknown options {unknown} in '{args.config}'; "
            f"allowed: the flags' {sorted(flags)} and the settings only --config sets "
            f"{sorted(settings)}"
        )
    for name, value in config.items():
        if name in flags and value is not None:
            _config_value(flags[name], name, value, args.config)
    sub.set_defaults(**{**settings, **config})
    return parser.parse_args(argv)


def _parse(argv):
    """Parse, letting a ``--config`` JSON file set the settings of ``pretrain``; an
    argument the command does not take exits naming it (and where it is set now)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _not_flags(parser, args, extra)
    if getattr(args, "command", None) == "pretrain":
        args = _pretrain_config(parser, argv, args)
        if not args.out:
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
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(argv)
    args.argv = argv  # the command a run records is the one given (not the process's)
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
