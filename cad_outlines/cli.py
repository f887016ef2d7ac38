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
    p.set_defaults(func=_run_ceiling)


def _run_ceiling(args: argparse.Namespace) -> int:
    import json
    import os

    from cad_outlines.ceiling import ceiling, format_table, load_tokenization
    from cad_outlines.corpus import load_corpus

    cases = load_corpus(args.corpus)
    tokenization = load_tokenization(args.tokenizer,
                                     special_as_text=args.special_tokens == "text")
    stats = ceiling(cases, tokenization, granularity=args.granularity,
                    min_span=args.min_span, progress=True)
    if args.json:
        print(json.dumps(stats.as_dict(), indent=2))
    else:
        name = os.path.splitext(os.path.basename(args.corpus))[0]
        print(format_table(stats, name))
    return 0


_COMMANDS.append(_add_ceiling)


# --- bench: one group, one sub-subcommand per measurement -----------------------------
# Add a measurement with ``_add_bench_<name>(bench)`` + ``_BENCH_COMMANDS.append(...)``;
# the group reads the list when the parser is built, so blocks below it still register.

_BENCH_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="run a measurement (each reports its configuration, machine and versions)",
        description="Measurements behind the figures in docs/.")
    bench = p.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    for add in _BENCH_COMMANDS:
        add(bench)


_COMMANDS.append(_add_bench)


def _add_bench_dccd(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "dccd",
        help="CD vs draft-conditioned CD on a small model trained here (feasible mass, tax, accuracy)",
        description="Train a small transformer (seeded, CPU) to answer arithmetic questions "
                    "in prose, then ask for JSON on held-out questions: plain constrained "
                    "decoding vs DCCD with K drafts; see docs/dccd.md.")
    p.add_argument("--steps", type=int, default=None, metavar="N",
                   help="training steps (default: 900; 60 with --tiny)")
    p.add_argument("--k", default=None, metavar="K1,K2,...",
                   help="numbers of drafts to compare (default: 1,3,5; 1,3 with --tiny)")
    p.add_argument("--eval", type=int, default=None, metavar="N", dest="eval_questions",
                   help="held-out questions to evaluate (default: 200, all; 6 with --tiny)")
    p.add_argument("--seed", type=int, default=0, help="seed of data, weights and sampling")
    p.add_argument("--tiny", action="store_true",
                   help="CI-sized run (well under a minute): small model, few steps")
    p.add_argument("--json", action="store_true", help="print every measurement as JSON")
    p.set_defaults(func=_run_bench_dccd)


def _run_bench_dccd(args: argparse.Namespace) -> int:
    import json

    from cad_outlines.bench.dccd import BenchConfig, format_table, run

    overrides: dict = {"seed": args.seed}
    if args.steps is not None:
        if args.steps < 1:
            raise UsageError(f"--steps must be >= 1, got {args.steps}")
        overrides["steps"] = args.steps
    if args.k is not None:
        try:
            ks = tuple(int(v) for v in args.k.split(","))
        except ValueError:
            raise UsageError(f"--k takes comma-separated integers, got {args.k!r}") from None
        if not ks or min(ks) < 1:
            raise UsageError(f"--k values must be >= 1, got {args.k!r}")
        overrides["ks"] = ks
    if args.eval_questions is not None:
        if args.eval_questions < 1:
            raise UsageError(f"--eval must be >= 1, got {args.eval_questions}")
        overrides["eval_questions"] = args.eval_questions
    cfg = BenchConfig.tiny(**overrides) if args.tiny else BenchConfig(**overrides)
    results = run(cfg, progress=True)
    print(json.dumps(results, indent=2) if args.json else format_table(results))
    return 0


_BENCH_COMMANDS.append(_add_bench_dccd)


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
