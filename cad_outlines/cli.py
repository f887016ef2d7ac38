"""The ``cad-outlines`` command line: argument parsing only; the work is done elsewhere.

Each subcommand has an ``_add_<name>`` function, registered with ``@COMMANDS.command``
(:class:`~cad_outlines.arguments.CommandTable`, the one registration style of every
command line here), that declares its arguments and sets ``func`` to a small runner that
calls the library; :mod:`cad_outlines.cli_edit` (demo, weights, edit, serve) and
:mod:`cad_outlines.cli_train` (sft, train) hold tables of their own, included here. Exit status: 0 done; 1 the model did
not finish or produced an unusable edit (:class:`~cad_outlines.errors.ModelOutputError`);
2 a usage or input error (:class:`UsageError`, the project's
:class:`~cad_outlines.errors.InputError`, an ``OSError`` on a named file), printed as one
line on stderr; 70 (``EX_SOFTWARE``) anything else, which is a bug: its traceback is
printed. Each project error names its status (``exit_status``, :mod:`cad_outlines.errors`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from typing import Sequence

from cad_outlines import cli_edit, cli_train
from cad_outlines.arguments import (CommandTable, HelpFormatter, UsageError, add_ceiling_arguments, load_cases,
                                    positive)
from cad_outlines.arguments import read_input as _read_input, write_stdout as _write_stdout
from cad_outlines.errors import EXIT_INTERNAL, EXIT_MODEL, EXIT_OK, EXIT_USAGE, CaDError
from cad_outlines.language.syntax import COPY_CLOSE, COPY_OPEN, GEN_OPEN, TAG_START


def _add_commands(sub: argparse._SubParsersAction) -> None:
    COMMANDS.add_to(sub)
    for parser in _all_parsers(sub):  # every option shows its default in --help
        if parser.formatter_class is argparse.HelpFormatter:
            parser.formatter_class = HelpFormatter


def _all_parsers(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    parsers = []
    for parser in dict.fromkeys(sub.choices.values()):
        parsers.append(parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(_all_parsers(action))
    return parsers


# --- subcommands (each block: _add_<name> declares arguments, _run_<name> runs) -----


#: The subcommands, in the order ``--help`` lists them.
COMMANDS = CommandTable()


@COMMANDS.command
def _add_portability(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "portability",
        help="show how the program's literals split into tokens under each tokenizer",
        description=f"Tokenize the program's structural literals ({TAG_START}, {TAG_START}/, "
                    f"{COPY_CLOSE}, {GEN_OPEN}, ...) with each tokenizer's adapter and show the pieces.")
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



# --- model-free: oracle, apply, ceiling ------------------------------------------------


@COMMANDS.command
def _add_oracle(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "oracle",
        help="print the oracle program that turns DOC into GOLD",
        description="Diff DOC against GOLD and print the Copy-as-Decode program that "
                    "rebuilds GOLD from DOC (line copies from difflib, or greedy token "
                    "copies). The output feeds `cad-outlines apply`.")
    p.add_argument("doc", metavar="DOC", help="the document before the edit (UTF-8 file)")
    p.add_argument("gold", metavar="GOLD", help="the document after the edit (UTF-8 file)")
    p.add_argument("--granularity", choices=["lines", "tokens"], default="lines",
                   help="copy lines (default) or document tokens (needs --tokenizer)")
    p.add_argument("--tokenizer", metavar="DIR",
                   help="Hugging Face tokenizer folder (tokens granularity, --cost-aware)")
    p.add_argument("--min-span", type=positive, default=8, metavar="M",
                   help="shortest token copy, in tokens (default: 8)")
    p.add_argument("--cost-aware", action="store_true",
                   help="lines: generate a copy's text when its tag takes more tokens")
    p.set_defaults(func=_run_oracle)


def _run_oracle(args: argparse.Namespace) -> int:
    from cad_outlines.training.ceiling import load_tokenization, oracle_for
    from cad_outlines.files import read_text
    from cad_outlines.language.program import render

    if (args.granularity == "tokens" or args.cost_aware) and not args.tokenizer:
        raise UsageError("--granularity tokens and --cost-aware need --tokenizer DIR")
    tokenization = load_tokenization(args.tokenizer) if args.tokenizer else None
    ops, _ = oracle_for(read_text(args.doc), read_text(args.gold), args.granularity,
                        tokenization, min_span=args.min_span, cost_aware=args.cost_aware)
    _write_stdout(render(ops) + "\n")
    return 0



@COMMANDS.command
def _add_apply(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "apply",
        help="apply a program to a document",
        description="Resolve PROGRAM (program text, e.g. from `cad-outlines oracle`) "
                    "against DOC and print the edited document, or write it atomically "
                    f"to OUT. Token programs ({COPY_OPEN['tokens']}...) need --tokenizer.")
    p.add_argument("program", metavar="PROGRAM", nargs="?",
                   help="program text file, '-' for stdin (omit with --from-reply)")
    p.add_argument("doc", metavar="DOC", help="the document the program edits")
    p.add_argument("--from-reply", metavar="REPLY.txt",  # '-': stdin
                   help="read the program from a chat model's reply instead (found and read "
                        "leniently where unambiguous; see docs/text-mode.md)")
    p.add_argument("--mode", choices=["strict", "clipped"], default="strict",
                   help="strict: bad copy ranges are errors (default); clipped: repair "
                        "them with a warning")
    p.add_argument("--tokenizer", metavar="DIR",
                   help="Hugging Face tokenizer folder (token programs)")
    p.add_argument("-o", "--output", metavar="OUT",
                   help="write the result here (atomically) instead of to stdout")
    p.set_defaults(func=_run_apply)


def _run_apply(args: argparse.Namespace) -> int:
    import warnings

    from cad_outlines.training.ceiling import load_tokenization
    from cad_outlines.files import atomic_write, read_text
    from cad_outlines.language.program import read_program
    from cad_outlines.language.resolver import resolve

    if args.from_reply:
        return _run_apply_reply(args)
    if not args.program:
        raise UsageError("give PROGRAM or --from-reply REPLY.txt")
    program = read_program(_read_input(args.program), args.program)
    ops = program.ops
    doc = read_text(args.doc)
    pieces = None
    if program.granularity == "tokens":
        if not args.tokenizer:
            raise UsageError(f"{args.program} copies tokens: pass --tokenizer DIR")
        pieces = load_tokenization(args.tokenizer).token_pieces(doc)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = resolve(ops, doc, args.mode, token_pieces=pieces)
    for warning in caught:  # clipped-mode repairs: one line each, not a traceback-ish dump
        print(f"cad-outlines apply: warning: {warning.message}", file=sys.stderr)
    if args.output:
        atomic_write(args.output, result)
    else:
        _write_stdout(result)
    return 0


def _run_apply_reply(args: argparse.Namespace) -> int:
    from cad_outlines.files import atomic_write, read_text
    from cad_outlines.tools.text import ReplyError, apply_reply

    if args.program:
        raise UsageError("give either PROGRAM or --from-reply, not both")
    try:
        result = apply_reply(_read_input(args.from_reply), read_text(args.doc), args.mode)
    except ReplyError as err:
        raise UsageError(f"{args.from_reply}: {err}") from None
    for note in (*result.repairs, *result.warnings):
        print(f"cad-outlines apply: {args.from_reply}: {note}", file=sys.stderr)
    if args.output:
        atomic_write(args.output, result.document)
    else:
        _write_stdout(result.document)
    return 0



@COMMANDS.command
def _add_ceiling(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ceiling",
        help="copy-ceiling statistics of an edit corpus",
        description="Build the oracle program of every case of CORPUS and report how "
                    "many gold tokens it copies (T, T_copy, T_gen, f, K, span mean/p50/"
                    "p95, round trips); definitions in docs/ceiling.md.")
    add_ceiling_arguments(p)
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.add_argument("-o", "--output", metavar="OUT.json",
                   help="also write the statistics (and bounds) as JSON here (atomically)")
    p.set_defaults(func=_run_ceiling)


def _run_ceiling(args: argparse.Namespace) -> int:
    import json

    from cad_outlines.training.ceiling import ceiling, format_table, load_tokenization
    from cad_outlines.files import atomic_write

    cases = load_cases(args.corpus)
    tokenization = load_tokenization(args.tokenizer,
                                     special_as_text=args.special_tokens == "text")
    stats = ceiling(cases, tokenization, granularity=args.granularity,
                    min_span=args.min_span, progress=True)
    if args.output:
        atomic_write(args.output, json.dumps(stats.as_dict(), indent=2) + "\n")
    if args.json:
        print(json.dumps(stats.as_dict(), indent=2))
    else:
        print(format_table(stats, os.path.splitext(os.path.basename(args.corpus))[0]))
    return 0


COMMANDS.include(cli_train.COMMANDS)  # sft, train
COMMANDS.include(cli_edit.COMMANDS)  # demo, weights, edit, serve


# --- bench: measurements live in cad_outlines/bench; this only delegates ---------------


@COMMANDS.command
def _add_bench(sub: argparse._SubParsersAction) -> None:
    from cad_outlines.bench.cli import add_parser

    add_parser(sub)



def build_parser() -> argparse.ArgumentParser:
    """Return the top-level argument parser with every subcommand."""
    from cad_outlines import __version__

    parser = argparse.ArgumentParser(
        prog="cad-outlines",
        description="Copy-as-Decode: LLM edits as programs of line copies and new text.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_commands(sub)
    return parser


#: Options naming a file a command writes (``train -o`` names a folder; it checks its own).
_OUTPUT_OPTIONS = ("output", "messages", "markdown", "plot")


def _check_outputs(args: argparse.Namespace) -> None:
    """Every output file's folder exists and is writable, before any work is done."""
    from cad_outlines.files import check_writable

    for name in _OUTPUT_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str) and value and value != "-" and args.command != "train":
            check_writable(value)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cad-outlines`` script; returns the exit status."""
    from cad_outlines.files import signals_raise

    parser = build_parser()
    args = parser.parse_args(argv)
    name = f"cad-outlines {args.command}"
    try:
        _check_outputs(args)
        with signals_raise():  # SIGTERM runs the clean-ups (temp files) and exits
            return int(args.func(args) or 0)
    except CaDError as err:  # each error class carries its exit status
        if err.exit_status == EXIT_INTERNAL:
            return _internal_error(name)
        print(f"{name}: {err}" if err.exit_status == EXIT_MODEL else f"{name}: error: {err}", file=sys.stderr)
        return err.exit_status
    except OSError as err:  # a file the user named
        print(f"{name}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as interrupt:
        from cad_outlines.files import WRITTEN

        if WRITTEN and len(getattr(args, "files", None) or [None]) == 1:
            # The one output was already in place: the work is done, say so.
            print(f"{name}: interrupted after writing {', '.join(WRITTEN)} (complete)", file=sys.stderr)
            return EXIT_OK
        written = f" ({len(WRITTEN)} file(s) written: {', '.join(WRITTEN)})" if WRITTEN else ""
        print(f"{name}: interrupted{written}", file=sys.stderr)
        return 128 + getattr(interrupt, "signum", signal.SIGINT)  # 130 for Ctrl-C, 143 for SIGTERM
    except Exception:  # a bug: show where, with a status no other case uses
        return _internal_error(name)


def _internal_error(name: str) -> int:
    """Print the traceback of the exception being handled, as a bug to report."""
    traceback.print_exc()
    print(f"{name}: internal error (exit status {EXIT_INTERNAL}); please report it with the "
          "traceback above", file=sys.stderr)
    return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
