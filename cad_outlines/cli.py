"""The ``cad-outlines`` command line: argument parsing only; the work is done elsewhere.

Each subcommand has an ``_add_<name>`` function that declares its arguments and sets
``func`` to a small runner that calls the library. Errors the user can fix are raised as
:class:`UsageError` (or ``ValueError``/``OSError`` from the library) and printed as one
line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence


class UsageError(Exception):
    """A problem with the command's input that the user can fix."""


def _add_commands(sub: argparse._SubParsersAction) -> None:
    for add in _COMMANDS:
        add(sub)


# --- subcommands (each block: _add_<name> declares arguments, _run_<name> runs) -----


_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def _add_portability(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "portability",
        help="show how the program's literals split into tokens under each tokenizer",
        description="Tokenize the program's structural literals (<, </, \"/>, <gen>, ...) "
                    "with each tokenizer's adapter and show the pieces.")
    p.add_argument("--tokenizer", nargs="+", required=True, metavar="DIR",
                   help="Hugging Face tokenizer folder(s) (tokenizer.json)")
    p.add_argument("--json", action="store_true",
                   help='print {tokenizer: {literal: {"count", "pieces", "ids"}}} as JSON')
    p.set_defaults(func=_run_portability)


def _run_portability(args: argparse.Namespace) -> int:
    import json

    from cad_outlines.adapters.portability import format_table, portability_report

    report = portability_report(args.tokenizer)
    print(json.dumps(report, ensure_ascii=False, indent=2) if args.json else format_table(report))
    return 0


_COMMANDS.append(_add_portability)


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="cad-outlines",
        description="Copy-as-Decode: LLM edits as programs of line copies and new text.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cad-outlines`` script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UsageError, ValueError, OSError) as err:
        print(f"cad-outlines {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
