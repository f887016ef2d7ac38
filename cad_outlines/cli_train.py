"""``cad-outlines sft build`` and ``cad-outlines train``: training data and fine-tuning.

Registered by :mod:`cad_outlines.cli` (:data:`COMMANDS`), which owns the exit statuses.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from cad_outlines.arguments import CommandTable, UsageError, add_verbosity, positive
from cad_outlines.arguments import status as _status
from cad_outlines.errors import InputError

COMMANDS = CommandTable()


@COMMANDS.command
def _add_sft(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sft", help="training data in the decode layout",
                       description="Supervised fine-tuning data for Copy-as-Decode.")
    sft = p.add_subparsers(dest="sft_command", required=True, metavar="ACTION")
    b = sft.add_parser(
        "build",
        help="one training row per corpus case: prompt + oracle program with spliced copies",
        description="For each case of CORPUS: the adapter's prompt for (doc, instruction), the "
                    "oracle program, and the exact ids the decode loop feeds a model for them "
                    "(copy spans spliced after their tags) with labels -100 on prompt and spliced "
                    "tokens. Writes JSONL of {id, instruction, prompt, program, input_ids, labels} "
                    "atomically; see docs/sft.md.")
    b.add_argument("corpus", metavar="CORPUS.jsonl",
                   help='JSONL of {"id", "doc", "gold"} (+ "instruction", used when present)')
    b.add_argument("--tokenizer", metavar="DIR", required=True, help="Hugging Face tokenizer folder")
    b.add_argument("--granularity", choices=["lines", "tokens"], default="lines")
    b.add_argument("--cost-aware", action="store_true",
                   help="lines: generate a copy's text when its tag takes more tokens")
    b.add_argument("--max-tokens", type=positive, default=None, metavar="N",
                   help="skip cases whose row is longer than N ids")
    b.add_argument("--max-positions", type=positive, default=None, metavar="N",
                   help="the model's context: rows longer than N ids are dropped and counted (default: "
                        "max_position_embeddings of a config.json in the --tokenizer folder, else no limit)")
    from cad_outlines.adapters import ADAPTERS  # no torch import

    b.add_argument("--adapter", default=None, choices=list(ADAPTERS), metavar="NAME",
                   help=f"adapter family: {', '.join(ADAPTERS)} (default: detect)")
    b.add_argument("-o", "--output", required=True, metavar="OUT.jsonl", help="rows (written atomically)")
    b.add_argument("--messages", metavar="OUT.jsonl",
                   help='also write {"messages": [user, assistant]} rows for TRL\'s SFTTrainer')
    b.set_defaults(func=_run_sft_build)


def _run_sft_build(args: argparse.Namespace) -> int:
    from cad_outlines.adapters import load_tokenizer
    from cad_outlines.training.corpus import load_corpus
    from cad_outlines.training.sft import RowBuilder, build_rows, model_context, write_rows

    if args.cost_aware and args.granularity != "lines":
        raise UsageError("--cost-aware is for --granularity lines only")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise UsageError(f"--max-tokens must be >= 1, got {args.max_tokens}")
    positions = args.max_positions or model_context(args.tokenizer)
    cases = load_corpus(args.corpus)
    builder = RowBuilder(load_tokenizer(args.tokenizer), args.granularity, args.adapter)
    rows, skipped, too_long = [], [], 0
    for item in build_rows(cases, builder, cost_aware=args.cost_aware, max_tokens=args.max_tokens,
                           progress=True):
        if not isinstance(item, tuple) and positions is not None and len(item.input_ids) > positions:
            item, too_long = (item.id, f"{len(item.input_ids)} ids > the model's {positions} positions"), too_long + 1
        (skipped if isinstance(item, tuple) else rows).append(item)
    write_rows(rows, args.output, args.messages)
    for case_id, reason in skipped:
        print(f"cad-outlines sft build: skipped {case_id}: {reason}", file=sys.stderr)
    context = f" ({too_long} past the model's context of {positions} positions)" if positions else ""
    print(f"{len(rows)} row(s) written to {args.output}; {len(skipped)} skipped{context}", file=sys.stderr)
    return 0



@COMMANDS.command
def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="LoRA-fine-tune a real-weight preset on edits of real files (resumable)",
        description="Build the training mix (--mix 1: explicit edits on windows of the corpora's "
                    "train-split files, plus real commits; --mix 2: whole files up to 400 lines, "
                    "edits in many phrasings, lazy update snippets and real commits; "
                    "training/edits.py) and LoRA-fine-tune a real-weight "
                    "preset on it, in the CaD layout (sft rows: prompt + program with spliced "
                    "copies) or the regeneration layout (plain prompt + edited file). Checkpoints "
                    "every --checkpoint-every steps; run the same command again to resume. "
                    "See docs/learn.md for the shipped adapters' command.")
    p.add_argument("--corpus", nargs="+", required=True, metavar="CORPUS.jsonl",
                   help="corpora of real commits (commits_*.jsonl: id, doc, gold, instruction, source, path)")
    p.add_argument("--layout", choices=["cad", "regen"], default="cad", help="what the model learns to write")
    p.add_argument("--prompt-style", choices=["full", "compact"], default="full",
                   help="the prompt: full (instruction first; cad: format statement, lines numbered "
                        "'i| ') or compact (instruction last, after the file; cad: short statement, "
                        "lines numbered 'i ')")
    p.add_argument("--base", default="smollm2-135m-base", metavar="PRESET", help="the real-weight preset to tune")
    p.add_argument("--cases", type=positive, default=600, metavar="N", help="edits in the training mix")
    p.add_argument("--mix", type=int, choices=[1, 2], default=1,
                   help="the training mix: 1 (windows, one sentence per kind) or 2 (whole files, own words, snippets)")
    p.add_argument("--buckets", type=_shares, default=None, metavar="LO-HI:W,...",
                   help="--mix 2: document length buckets and their weights (default: 8-50:0.45,51-150:0.3,151-400:0.25)")
    p.add_argument("--forms", type=_shares, default=None, metavar="FORM:W,...",
                   help="--mix 2: how edits are asked (words, templated, snippet, subject) and the weights "
                        "(default: words:0.45,templated:0.1,snippet:0.3,subject:0.15)")
    p.add_argument("--commit-share", type=float, default=None, metavar="P",
                   help="--mix 2: share of edits that are real commits (default: 0.25)")
    p.add_argument("--kinds", type=_shares, default=None, metavar="KIND:W,...",
                   help="--mix 2: weights of synthetic edit kinds other than the v2 mix's (e.g. rename:0.12,swap:0.08)")
    p.add_argument("--init-adapter", default="", metavar="NAME|DIR",
                   help="start from this adapter's weights (a shipped adapter's name, e.g. qwen2.5-coder-0.5b-cad, "
                        "or a folder) instead of a fresh LoRA; its rank and layers must be the run's")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                   help="the frozen base weights' dtype (bfloat16: ~2x faster steps on CPUs with AVX512-BF16)")
    p.add_argument("--lora-layers", type=int, default=0, metavar="N",
                   help="LoRA on the top N decoder layers only (0: all; fewer layers, cheaper backward)")
    p.add_argument("--sparse-logits", action="store_true",
                   help="compute the output layer only at labelled positions (same loss, cheaper step)")
    p.add_argument("--long-tokens", type=int, default=0, metavar="N",
                   help="length curriculum: no row over N ids in the first third of the steps (0: off)")
    p.add_argument("--steps", type=positive, default=600, metavar="N", help="optimiser steps")
    p.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (warm-up, cosine to 10%%)")
    p.add_argument("--rank", type=positive, default=8, metavar="R", help="LoRA rank (alpha = 2R)")
    p.add_argument("--max-tokens", type=positive, default=1024, metavar="N", help="drop rows longer than N ids")
    p.add_argument("--checkpoint-every", type=positive, default=25, metavar="N", help="steps between checkpoints")
    p.add_argument("--threads", type=positive, default=1, metavar="N", help="torch intra-op threads")
    p.add_argument("--seed", type=int, default=0, help="seed of the mix, the order and the LoRA init")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="run folder: checkpoint/, log.jsonl, then adapter/ and record.json")
    add_verbosity(p)
    p.set_defaults(func=_run_train)


def _shares(text: str) -> tuple[tuple[str, float], ...]:
    """``"a:0.5,b:0.25"`` -> ``(("a", 0.5), ("b", 0.25))``; weights finite and >= 0."""
    out = []
    for item in text.split(","):
        name, sep, weight = item.strip().rpartition(":")
        try:
            value = float(weight)
        except ValueError:
            value = -1.0
        if not sep or not name or not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"{item.strip()!r} is not NAME:WEIGHT with a weight >= 0")
        out.append((name, value))
    return tuple(out)


def _mix_settings(args: argparse.Namespace) -> dict:
    """The v2 mix's settings given on the command line, checked (one line per mistake)."""
    from cad_outlines.training.edits import FORMS_V2
    from cad_outlines.training.phrasings import kind_weights

    settings: dict = {}
    if args.buckets is not None:
        buckets = []
        for name, weight in args.buckets:
            lo, _, hi = name.partition("-")
            if not (lo.isdigit() and hi.isdigit() and 1 <= int(lo) <= int(hi)):
                raise UsageError(f"--buckets: {name!r} is not LO-HI lines with 1 <= LO <= HI")
            buckets.append((int(lo), int(hi), weight))
        settings["buckets"] = tuple(buckets)
    if args.forms is not None:
        unknown = [f for f, _ in args.forms if f not in FORMS_V2]
        if unknown:
            raise UsageError(f"--forms: unknown form {unknown[0]!r} (known: {', '.join(FORMS_V2)})")
        settings["forms"] = args.forms
    if args.commit_share is not None:
        if not 0 <= args.commit_share <= 1:
            raise UsageError(f"--commit-share must be within 0..1, got {args.commit_share}")
        settings["commit_share"] = args.commit_share
    if args.kinds is not None:
        try:
            kind_weights(args.kinds)
        except ValueError as e:
            raise UsageError(f"--kinds: {e}") from None
        settings["kinds"] = args.kinds
    for key, pairs in (("buckets", settings.get("buckets", ())), ("forms", settings.get("forms", ()))):
        if pairs and not sum(p[-1] for p in pairs) > 0:
            raise UsageError(f"--{key}: the weights sum to 0")
    if settings and args.mix != 2:
        raise UsageError("--buckets, --forms, --commit-share and --kinds shape the v2 mix: add --mix 2")
    return settings


def _run_train(args: argparse.Namespace) -> int:
    from cad_outlines.tools.presets import REAL_PRESETS
    from cad_outlines.training.train import TrainConfig, train_from_corpora

    if args.base not in REAL_PRESETS:
        raise UsageError(f"--base must be a real-weight preset ({', '.join(REAL_PRESETS)}), got {args.base!r}")
    if not math.isfinite(args.lr) or args.lr <= 0:
        raise UsageError(f"--lr must be a finite number > 0, got {args.lr}")
    for path in args.corpus:
        if not os.path.isfile(path):
            raise UsageError(f"--corpus {path}: no such file")
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise UsageError(f"--output {args.output}: exists and is not a folder")
    cfg = TrainConfig(base=args.base, layout=args.layout, prompt_style=args.prompt_style, steps=args.steps, lr=args.lr, rank=args.rank,
                      alpha=2 * args.rank, seed=args.seed, max_tokens=args.max_tokens,
                      checkpoint_every=args.checkpoint_every, threads=args.threads, dtype=args.dtype,
                      lora_layers=args.lora_layers, sparse_logits=args.sparse_logits, long_tokens=args.long_tokens,
                      init_adapter=args.init_adapter)
    if args.lora_layers < 0 or args.long_tokens < 0:
        raise UsageError("--lora-layers and --long-tokens must be >= 0")
    mix_settings = _mix_settings(args)
    if args.init_adapter:
        from cad_outlines.training.train import adapter_folder

        try:  # before the model loads
            adapter_folder(args.init_adapter)
        except InputError as err:
            raise UsageError(f"--init-adapter: {err}") from None
    from tqdm.auto import tqdm

    with tqdm(total=args.steps, desc=f"train {args.layout}", unit="step",
              disable=getattr(args, "quiet", False)) as bar:
        def log(record: dict) -> None:
            bar.n = record["step"]
            bar.set_postfix(loss=record["loss"])
            bar.refresh()

        record = train_from_corpora(args.corpus, cfg, args.cases, args.output, log=log, mix_version=args.mix,
                                    mix_settings=mix_settings)
    _status(args, f"adapter written to {args.output}/adapter ({record['rows']} rows, "
                  f"{record['dropped_over_max_tokens']} dropped over --max-tokens; loss "
                  f"{record['loss_first_10pct']} -> {record['loss_last_10pct']})")
    return 0


