"""``cad-outlines bench serve | http``: the serving measurements (vLLM, and the
OpenAI-compatible server over loopback HTTP).

Registered by :mod:`cad_outlines.bench.cli` (:data:`COMMANDS`), after the speed measurements.
"""

from __future__ import annotations

import argparse

from cad_outlines.arguments import CommandTable, UsageError, positive

from ._cliargs import emit

COMMANDS = CommandTable()


# --- bench serve (cad_outlines/bench/serve.py, docs/serving.md; needs vLLM) ----------------


@COMMANDS.command
def _add_bench_serve(bench: argparse._SubParsersAction) -> None:
    from cad_outlines.bench.serve import add_arguments  # argparse only; vLLM loads when it runs

    p = bench.add_parser(
        "serve",
        help="N concurrent edits on vLLM: regeneration vs n-gram speculation vs CaD (needs vLLM)",
        description="Edits of a corpus, all submitted at once to vLLM with prefix caching: full "
                    "regeneration (gold forced), vLLM's n-gram speculative decoding (a second engine; "
                    "plus a replay of its drafter on the gold) and CaD continuation requests (oracle "
                    "program forced); see docs/serving.md.")
    add_arguments(p)
    p.set_defaults(func=_run_bench_serve)


def _run_bench_serve(args: argparse.Namespace) -> int:
    from cad_outlines.bench.serve import run_from_args

    try:
        return run_from_args(args)
    except ImportError as err:  # vLLM is an optional dependency
        raise UsageError(str(err)) from None



# --- bench http: the OpenAI-compatible server over loopback (docs/serving.md) ----------------


@COMMANDS.command
def _add_bench_http(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "http",
        help="concurrent clients over loopback HTTP: edits with prediction (CaD) vs plain chat (regeneration)",
        description="Start `cad-outlines serve` (or use --url) and send the same eval edits from N "
                    "concurrent openai clients, as predicted-output edits and as plain chat asking "
                    "for the whole file; p50/p95 latency, time to first token, edits per minute, "
                    "exact matches. See docs/serving.md.")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--preset", default="smollm2-135m", metavar="NAME", help="preset the server loads")
    source.add_argument("--model", metavar="DIR", help="model folder the server loads")
    source.add_argument("--url", metavar="URL", help="a running server's base URL (…/v1) instead")
    p.add_argument("--clients", type=positive, default=8, metavar="N", help="concurrent clients")
    p.add_argument("--edits", type=positive, default=16, metavar="N",
                   help="eval edits (explicit kinds, or the first N of --subset)")
    p.add_argument("--subset", metavar="NAME",
                   help="edits of this subset of the v2 eval cases (bench quality --cases v2), e.g. "
                        "commit_snippets: lazy snippets sent as apply-model messages")
    p.add_argument("--methods", type=lambda text: tuple(m for m in text.split(",") if m), default=("cad", "regen"),
                   metavar="M,M", help="rows to run: cad, regen (default: both)")
    p.add_argument("--max-tokens", type=positive, default=512, metavar="N", help="CaD's program-token budget")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-o", "--output", metavar="OUT.json", help="also write the JSON here (atomically)")
    p.add_argument("--md", dest="markdown", metavar="OUT.md", help="also write the markdown table here")
    p.set_defaults(func=_run_bench_http)


def _run_bench_http(args: argparse.Namespace) -> int:
    from cad_outlines.bench.http import HttpConfig, format_table, run
    from cad_outlines.files import atomic_write

    cfg = HttpConfig(preset=None if (args.model or args.url) else args.preset, model=args.model, url=args.url,
                     clients=args.clients, edits=args.edits, max_tokens=args.max_tokens, subset=args.subset,
                     methods=args.methods)
    report = run(cfg)
    table = format_table(report)
    if args.markdown:
        atomic_write(args.markdown, table + "\n")
    emit(args, report, table)
    return 0
