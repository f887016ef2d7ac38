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


# --- model-free: oracle, apply, ceiling ------------------------------------------------


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
    p.add_argument("--min-span", type=int, default=8, metavar="M",
                   help="shortest token copy, in tokens (default: 8)")
    p.add_argument("--cost-aware", action="store_true",
                   help="lines: generate a copy's text when its tag takes more tokens")
    p.set_defaults(func=_run_oracle)


def _run_oracle(args: argparse.Namespace) -> int:
    from cad_outlines.ceiling import load_tokenization, oracle_for
    from cad_outlines.files import read_text
    from cad_outlines.program import render

    if (args.granularity == "tokens" or args.cost_aware) and not args.tokenizer:
        raise UsageError("--granularity tokens and --cost-aware need --tokenizer DIR")
    tokenization = load_tokenization(args.tokenizer) if args.tokenizer else None
    ops, _ = oracle_for(read_text(args.doc), read_text(args.gold), args.granularity,
                        tokenization, min_span=args.min_span, cost_aware=args.cost_aware)
    _write_stdout(render(ops) + "\n")
    return 0


_COMMANDS.append(_add_oracle)


def _add_apply(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "apply",
        help="apply a program to a document",
        description="Resolve PROGRAM (program text, e.g. from `cad-outlines oracle`) "
                    "against DOC and print the edited document, or write it atomically "
                    "to OUT. Token programs (<copy tokens=...>) need --tokenizer.")
    p.add_argument("program", metavar="PROGRAM", help="program text file")
    p.add_argument("doc", metavar="DOC", help="the document the program edits")
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

    from cad_outlines.ceiling import load_tokenization
    from cad_outlines.files import atomic_write, read_text
    from cad_outlines.program import COPY_OPEN, ProgramParseError, parse
    from cad_outlines.resolver import resolve

    text = read_text(args.program)
    # Gen bodies are escaped, so the copy opener can only be an op.
    granularity = "tokens" if COPY_OPEN["tokens"] in text else "lines"
    try:
        ops = parse(text.rstrip(), granularity)  # the trailing newline of a saved program
    except ProgramParseError as err:
        line = text.count("\n", 0, err.offset) + 1
        column = err.offset - (text.rfind("\n", 0, err.offset) + 1) + 1
        raise UsageError(f"{args.program}: line {line}, column {column}: {err}") from None
    doc = read_text(args.doc)
    pieces = None
    if granularity == "tokens":
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


_COMMANDS.append(_add_apply)


def _add_ceiling(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ceiling",
        help="copy-ceiling statistics of an edit corpus",
        description="Build the oracle program of every case of CORPUS and report how "
                    "many gold tokens it copies (T, T_copy, T_gen, f, K, span mean/p50/"
                    "p95, round trips); definitions in docs/ceiling.md.")
    p.add_argument("corpus", metavar="CORPUS.jsonl", help='JSONL of {"id", "doc", "gold"}')
    p.add_argument("--tokenizer", metavar="DIR", required=True,
                   help="Hugging Face tokenizer folder that counts the tokens")
    p.add_argument("--granularity", choices=["lines", "tokens"], default="lines",
                   help="line oracle (default) or greedy token oracle")
    p.add_argument("--min-span", type=int, default=8, metavar="M",
                   help="shortest token copy, in tokens (default: 8)")
    p.add_argument("--special-tokens", choices=["text", "match"], default="text",
                   help="text (default): special-token spellings in the text are plain "
                        "text; match: they become special tokens")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.add_argument("-o", "--output", metavar="OUT.json",
                   help="also write the statistics (and bounds) as JSON here (atomically)")
    p.set_defaults(func=_run_ceiling)


def _run_ceiling(args: argparse.Namespace) -> int:
    import json
    import os

    from cad_outlines.ceiling import ceiling, format_table, load_tokenization
    from cad_outlines.corpus import load_corpus
    from cad_outlines.files import atomic_write

    cases = load_corpus(args.corpus)
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


_COMMANDS.append(_add_ceiling)


# --- demo | edit: the main job ---------------------------------------------------------


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the real decode loop offline on the bundled example edit",
                       description="Teacher-force the oracle program of a bundled edit through the real "
                                   "decode loop of a random-weight preset, next to full regeneration.")
    p.add_argument("--preset", default="tiny-qwen", help="random-weight preset (default: tiny-qwen)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.set_defaults(func=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from cad_outlines import models
    from cad_outlines.demo import run_demo

    model = models.load(args.preset, device=args.device, dtype=args.dtype)
    report = run_demo(model, args.preset)
    print(report.format())
    return 0 if report.matches_gold else 1


_COMMANDS.append(_add_demo)


def _add_edit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("edit", help="edit a file with a model (prints the diff; -o writes atomically)")
    p.add_argument("file", help="file to edit")
    p.add_argument("--instruction", required=True, help="what to change")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="Hugging Face model id or local folder (transformers)")
    source.add_argument("--preset", help="random-weight preset instead of a real model (offline tests)")
    p.add_argument("-o", "--output", help="write the edited file here (atomically; may be FILE itself)")
    p.add_argument("--granularity", choices=["lines", "tokens"], default="lines")
    p.add_argument("--force-program", metavar="PROGRAM",
                   help="teacher-force this program file through the decode loop (tests, benchmarks)")
    p.add_argument("--max-new-tokens", type=int, default=2048)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.set_defaults(func=_run_edit)


def _run_edit(args: argparse.Namespace) -> int:
    import difflib

    from cad_outlines import models
    from cad_outlines.files import atomic_write, read_text
    from cad_outlines.generator import CaDGenerator

    document = read_text(args.file)
    if args.model:
        import outlines
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        hf_model = AutoModelForCausalLM.from_pretrained(
            args.model, dtype=getattr(torch, args.dtype)).to(args.device).eval()
        model = outlines.from_transformers(hf_model, AutoTokenizer.from_pretrained(args.model))
    else:
        model = models.load(args.preset, device=args.device, dtype=args.dtype)
    forced = read_text(args.force_program) if args.force_program else None
    result = CaDGenerator(model, document, granularity=args.granularity, max_new_tokens=args.max_new_tokens,
                          temperature=args.temperature, top_p=args.top_p, seed=args.seed
                          ).run(args.instruction, force_program=forced)
    if result.document is None:
        raise UsageError(f"the program was not finished within --max-new-tokens {args.max_new_tokens} "
                         f"({len(result.ops)} complete op(s)); nothing was written")
    sys.stdout.writelines(difflib.unified_diff(document.splitlines(True), result.document.splitlines(True),
                                               args.file, args.output or args.file))
    if args.output:
        atomic_write(args.output, result.document)
    s = result.stats
    print(f"# {s.decoded_tokens} decoded, {s.forced_tokens} forced, {s.copied_tokens} copied tokens; "
          f"{s.forward_passes} forward passes; {s.total_seconds:.2f} s", file=sys.stderr)
    return 0


_COMMANDS.append(_add_edit)


# --- bench: measurements live in cad_outlines/bench; this only delegates ---------------


def _add_bench(sub: argparse._SubParsersAction) -> None:
    from cad_outlines.bench.cli import add_parser

    add_parser(sub)


_COMMANDS.append(_add_bench)


def _write_stdout(text: str) -> None:
    # Exact bytes: no locale encoding, no newline translation.
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()


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
