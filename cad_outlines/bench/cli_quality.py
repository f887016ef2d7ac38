"""``cad-outlines bench dccd | learn | quality``: the measurements of what a model gets right.

Registered by :mod:`cad_outlines.bench.cli` (:data:`COMMANDS`); the speed measurements stay there.
"""

from __future__ import annotations

import argparse

from cad_outlines.arguments import CommandTable, UsageError, add_output_args, positive

from ._cliargs import emit, int_list, name_list

COMMANDS = CommandTable()


@COMMANDS.command
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
    real = p.add_argument_group(
        "real weights", "--preset runs the pretrained model on structured tasks with known "
        "answers instead of the model trained here (docs/dccd.md)")
    real.add_argument("--preset", metavar="NAME", default=None,
                      help="a real-weight preset, e.g. smollm2-135m-base (the released weights)")
    real.add_argument("--task", default="arith,extract", metavar="T1,T2",
                      help="tasks to run: arith, extract (default: both)")
    real.add_argument("--items", type=positive, default=200, metavar="N",
                      help="items per task (default: 200)")
    real.add_argument("--free-tokens", type=positive, default=None, metavar="N",
                      help="budget of each free decode: the unconstrained answer and each draft (default: 48)")
    real.add_argument("--json-tokens", type=positive, default=None, metavar="N",
                      help="budget of each constrained decode: CD and each projection (default: 160, "
                           "more than any output the schemas allow, so none is cut short)")
    real.add_argument("--jobs", type=positive, default=1, metavar="N",
                      help="run the tasks in N worker processes at once")
    real.add_argument("--markdown", metavar="OUT.md", help="also write the tables here (atomically)")
    real.add_argument("-o", "--output", metavar="OUT.json", help="also write the JSON here (atomically)")
    p.add_argument("--json", action="store_true", help="print every measurement as JSON")
    p.set_defaults(func=_run_bench_dccd)


def _run_bench_dccd_real(args: argparse.Namespace) -> int:
    from cad_outlines.bench.dccd_real import TASKS, RealDCCDConfig, format_real_table, run_real
    from cad_outlines.files import atomic_write
    from cad_outlines.tools.presets import REAL_PRESETS

    for flag, value in (("--steps", args.steps), ("--eval", args.eval_questions), ("--tiny", args.tiny or None)):
        if value is not None:
            raise UsageError(f"{flag} belongs to the trained-here bench; with --preset use --items")
    if args.preset not in REAL_PRESETS:
        raise UsageError(f"--preset must be a real-weight preset ({', '.join(REAL_PRESETS)}), "
                         f"got {args.preset!r}")
    cfg = RealDCCDConfig(preset=args.preset, tasks=name_list("--task", args.task, TASKS), items=args.items,
                         seed=args.seed)
    if args.k is not None:
        cfg.ks = tuple(int_list("--k", args.k, minimum=1))
    if args.free_tokens is not None:
        cfg.free_tokens = args.free_tokens
    if args.json_tokens is not None:
        cfg.json_tokens = args.json_tokens
    report = run_real(cfg, jobs=args.jobs)
    table = format_real_table(report)
    if args.markdown:
        atomic_write(args.markdown, table + "\n")
    emit(args, report, table)
    return 0


def _run_bench_dccd(args: argparse.Namespace) -> int:
    import json

    from cad_outlines.bench.dccd import BenchConfig, format_table, run

    if args.preset is not None:
        return _run_bench_dccd_real(args)
    for flag, value in (("--task", args.task != "arith,extract" or None), ("--items", args.items != 200 or None),
                        ("--jobs", args.jobs != 1 or None), ("--markdown", args.markdown),
                        ("--output", args.output)):
        if value is not None:
            raise UsageError(f"{flag} needs --preset (the real-weights bench)")
    overrides: dict = {"seed": args.seed}
    if args.steps is not None:
        if args.steps < 1:
            raise UsageError(f"--steps must be >= 1, got {args.steps}")
        overrides["steps"] = args.steps
    if args.k is not None:
        overrides["ks"] = int_list("--k", args.k, minimum=1)
    if args.eval_questions is not None:
        if args.eval_questions < 1:
            raise UsageError(f"--eval must be >= 1, got {args.eval_questions}")
        overrides["eval_questions"] = args.eval_questions
    cfg = BenchConfig.tiny(**overrides) if args.tiny else BenchConfig(**overrides)
    results = run(cfg, progress=True)
    print(json.dumps(results, indent=2) if args.json else format_table(results))
    return 0



@COMMANDS.command
def _add_bench_learn(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "learn",
        help="train a small model to edit with CaD programs vs one that regenerates; decode held-out edits",
        description="Train two same-size transformers from scratch (seeded, CPU) on one synthetic "
                    "edit family: one on the SFT rows of `sft build` (CaD programs in the splice "
                    "layout), one on the whole edited file. Decode held-out edits through the real "
                    "loop (model-chosen constrained programs vs unconstrained regeneration, same "
                    "budget); see docs/learn.md.")
    p.add_argument("--steps", type=positive, default=None, metavar="N",
                   help="training steps per model, at most (early stop; default: 1600, 150 with --tiny)")
    p.add_argument("--eval", type=positive, default=None, metavar="N", dest="eval_cases",
                   help="held-out edits decoded per model (default: 100; 6 with --tiny)")
    p.add_argument("--threads", type=positive, default=1, metavar="N",
                   help="torch intra-op threads (default: 1)")
    p.add_argument("--tiny", action="store_true", help="CI-sized run (well under a minute)")
    p.add_argument("--markdown", metavar="OUT.md", help="also write the table here (atomically)")
    add_output_args(p, plot=False)
    p.set_defaults(func=_run_bench_learn)


def _run_bench_learn(args: argparse.Namespace) -> int:
    from cad_outlines.bench.learn import LearnConfig, format_table, run
    from cad_outlines.files import atomic_write

    overrides: dict = {"seed": args.seed, "threads": args.threads}
    if args.steps is not None:
        overrides["steps"] = args.steps
    if args.eval_cases is not None:
        overrides["eval_cases"] = args.eval_cases
    cfg = LearnConfig.tiny(**overrides) if args.tiny else LearnConfig(**overrides)
    report = run(cfg, progress=True)
    table = format_table(report)
    if args.markdown:
        atomic_write(args.markdown, table + "\n")
    emit(args, report, table)
    return 0



@COMMANDS.command
def _add_bench_quality(bench: argparse._SubParsersAction) -> None:
    from cad_outlines.bench.quality import CONFIGS

    p = bench.add_parser(
        "quality",
        help="a real model (SmolLM2-135M) choosing its own programs: base vs fine-tuned, CaD vs regeneration",
        description="Decode the eval split (files never trained on) with each configuration in one "
                    "run: exact match, complete, valid, copies in range, forwards and process CPU "
                    "seconds per edit, by edit kind and corpus; greedy, and sampled for some "
                    "configurations. See docs/learn.md. Configurations: " + ", ".join(CONFIGS) + ".")
    p.add_argument("--configs", default=None, metavar="A,B,...", help="configurations to run (default: all but the regen_pld rows); NAME@P sets the "
                   "follow_prediction floor of NAME (qwen_apply@0.01)")
    p.add_argument("--sampled", default="cad,regen", metavar="A,B,...",
                   help="configurations also sampled (temperature 0.7, --seeds); '' for none")
    p.add_argument("--seeds", default="0,1,2", metavar="S1,S2,...", help="seeds of the sampled runs")
    p.add_argument("--limit", type=positive, default=None, metavar="N", help="first N eval cases only")
    p.add_argument("--per-subset", type=positive, default=None, metavar="N",
                   help="first N eval cases of each subset (the v2 set's templated, whole files, ...)")
    p.add_argument("--sampled-limit", type=positive, default=30, metavar="N",
                   help="first N eval cases for the sampled runs")
    p.add_argument("--subsets", default=None, metavar="A,B,...",
                   help="only the cases of these subsets (v2: templated, held_out_phrasings, whole_le50, ...)")
    p.add_argument("--cases", metavar="CASES.jsonl", default=None,
                   help="eval cases (default: the bundled eval split)")
    p.add_argument("--threads", type=positive, default=1, metavar="N", help="torch intra-op threads per process")
    p.add_argument("--jobs", type=positive, default=1, metavar="N",
                   help="decode the configurations in N worker processes at once")
    p.add_argument("--budget", type=positive, default=256, metavar="N", help="CaD and text-mode token budget")
    p.add_argument("--markdown", metavar="OUT.md", help="also write the tables here (atomically)")
    p.add_argument("--checkpoint", metavar="FILE.jsonl", default=None,
                   help="append each edit's record here as it is measured; run the same command again "
                        "to resume: records already there are taken, not measured again (other "
                        "settings or eval cases are refused; a record made with other adapter "
                        "weights is measured again)")
    p.add_argument("--adapter", action="append", default=[], metavar="PRESET=DIR",
                   help="load the LoRA adapter in DIR (a training run's adapter/) in place of PRESET's "
                        "shipped one, to score a run before shipping it (its SHA-256 is recorded); repeatable")
    add_output_args(p, plot=False)
    p.set_defaults(func=_run_bench_quality)


def _run_bench_quality(args: argparse.Namespace) -> int:
    from cad_outlines.bench.quality import CONFIGS, QualityConfig, config_of, load_eval_cases, run
    from cad_outlines.bench.quality_report import format_table
    from cad_outlines.files import atomic_write

    def names(option: str, text: str) -> tuple[str, ...]:  # CONFIGS names, or NAME@P
        found = tuple(n.strip() for n in text.split(",") if n.strip())
        for name in found:
            try:
                config_of(name)
            except KeyError as err:
                raise UsageError(f"{option}: {err.args[0]}; choose from {', '.join(CONFIGS)}") from None
        return found

    sampled = names("--sampled", args.sampled)
    pld = [n for n in sampled if config_of(n)[1] == "pld"]
    if pld:
        raise UsageError(f"--sampled: {', '.join(pld)} run greedy only (PLD verifies greedy drafts)")
    cfg = QualityConfig(sampled=sampled, seeds=int_list("--seeds", args.seeds, minimum=0), limit=args.limit,
                        per_subset=args.per_subset, sampled_limit=args.sampled_limit, threads=args.threads, cad_budget=args.budget)
    if args.configs:
        cfg.configs = names("--configs", args.configs)
    if args.subsets:
        cfg.subsets = tuple(name.strip() for name in args.subsets.split(",") if name.strip())
    if args.cases:
        cfg.cases_path = args.cases
    cfg.adapters = _adapters(args.adapter, {config_of(name)[0] for name in cfg.configs})
    cases = load_eval_cases(args.cases) if args.cases else None
    report = run(cfg, cases=cases, jobs=args.jobs, checkpoint=args.checkpoint)
    table = format_table(report)
    if args.markdown:
        atomic_write(args.markdown, table + "\n")
    emit(args, report, table)
    return 0


def _adapters(given: list[str], used: set[str]) -> tuple[tuple[str, str], ...]:
    """``--adapter PRESET=DIR`` options as (preset, folder) pairs, each checked: a real
    preset some configuration of the run loads, a folder holding a LoRA adapter."""
    from pathlib import Path

    from cad_outlines.tools.presets import REAL_PRESETS

    found: dict[str, str] = {}
    for text in given:
        preset, sep, folder = text.partition("=")
        if not sep or not preset or not folder:
            raise UsageError(f"--adapter {text!r}: expected PRESET=DIR (e.g. qwen2.5-coder-0.5b=runs/NAME/adapter)")
        if preset not in REAL_PRESETS:
            raise UsageError(f"--adapter {text!r}: {preset!r} is not a real-weight preset ({', '.join(REAL_PRESETS)})")
        if preset not in used:
            raise UsageError(f"--adapter {text!r}: no configuration of this run loads {preset!r} "
                             f"(they load {', '.join(sorted(used))})")
        if preset in found:
            raise UsageError(f"--adapter {text!r}: {preset!r} was given an adapter twice")
        if not (Path(folder) / "adapter_config.json").is_file():
            raise UsageError(f"--adapter {text!r}: {folder} holds no LoRA adapter (no adapter_config.json)")
        found[preset] = folder
    return tuple(found.items())
