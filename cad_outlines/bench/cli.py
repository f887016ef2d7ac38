"""The ``cad-outlines bench`` command group: argument parsing for the measurements.

The product CLI (:mod:`cad_outlines.cli`) only delegates here (:func:`add_parser`), so
benchmark code stays out of the product: nothing outside :mod:`cad_outlines.bench`
imports it. Each measurement has an ``_add_bench_<name>`` function that declares its
arguments and a ``_run_bench_<name>`` runner that calls :mod:`cad_outlines.bench`.
Imports of torch and the measurement modules stay inside the runners so that building
the parser is cheap.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from cad_outlines.arguments import (CommandTable, UsageError, add_ceiling_arguments, add_device_args, add_output_args,
                                    load_cases, positive)

from . import cli_quality, cli_serving
from ._cliargs import draw_plot, emit, int_list

if TYPE_CHECKING:
    from .e2e import E2EConfig

#: The measurements, as ``bench --help`` lists them (speed here, then quality).
COMMANDS = CommandTable()


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` group, with every measurement, to the product CLI's subparsers."""
    p = sub.add_parser(
        "bench",
        help="run a measurement (each reports its configuration, machine and versions)",
        description="Measurements behind the figures in docs/.")
    bench = p.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    COMMANDS.add_to(bench)


# --- bench kernel | e2e | formats | perturb (cad_outlines/bench/, docs/benchmarks.md) ------


def _add_device_args(p: argparse.ArgumentParser) -> None:
    add_device_args(p, device_help="torch device: cpu (default) or cuda", dtype_help="weight dtype (default: float32)")


def _add_model_args(p: argparse.ArgumentParser) -> None:
    # Presets are checked by models.build (importing models here would import torch for
    # every command).
    p.add_argument("--preset", required=True, metavar="NAME",
                   help="a preset of cad_outlines.tools.models: a random-weight architecture "
                        "(e.g. tiny-qwen, qwen2.5-0.5b; speed does not depend on the weights, selection "
                        "quality does) or real weights (e.g. qwen2.5-coder-0.5b-base, fetched by "
                        "'cad-outlines weights fetch')")
    _add_device_args(p)
    p.add_argument("--threads", type=positive, default=None, metavar="N",
                   help="torch intra-op threads (default: torch's own choice)")


@COMMANDS.command
def _add_bench_bounds(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "bounds",
        help="copy ceiling + model-free speed-up bounds of a corpus from a `bench kernel` file",
        description="The `ceiling` statistics of CORPUS plus the speed-up bounds (bnd_m8, "
                    "bnd_mean, bnd_exact, bnd_fixed, m*) that a kernel curve implies; no model "
                    "runs. See docs/benchmarks.md.")
    add_ceiling_arguments(p)
    p.add_argument("--kernel", metavar="KERNEL.json", required=True,
                   help="the kernel curve (`bench kernel -o KERNEL.json`)")
    p.add_argument("--json", action="store_true", help="print the statistics and bounds as JSON")
    p.add_argument("-o", "--output", metavar="OUT.json", help="also write the JSON here (atomically)")
    p.set_defaults(func=_run_bench_bounds)


def _run_bench_bounds(args: argparse.Namespace) -> int:
    import json
    import os

    from cad_outlines.bench._common import write_json
    from cad_outlines.bench.bounds import ceiling_with_bounds, format_bounds, load_kernel
    from cad_outlines.training.ceiling import format_table, load_tokenization

    kernel = load_kernel(args.kernel)  # before the corpus work: fail early
    cases = load_cases(args.corpus)
    tokenization = load_tokenization(args.tokenizer,
                                     special_as_text=args.special_tokens == "text")
    stats, bounds = ceiling_with_bounds(cases, tokenization, kernel, granularity=args.granularity,
                                        min_span=args.min_span, progress=True)
    report = {**stats.as_dict(), "bounds": bounds}
    if args.output:
        write_json(args.output, report)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        name = os.path.splitext(os.path.basename(args.corpus))[0]
        print(format_table(stats, name) + "\n\n" + format_bounds(bounds, name))
    return 0



@COMMANDS.command
def _add_bench_kernel(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "kernel",
        help="time N decode forwards vs one N-token forward (s(N)) and the loop's fixed costs",
        description="After a P-token prefix, time N one-token decode forwards against one "
                    "N-token forward over the same cache for N = 1, 2, 4, ..., max-n (median "
                    "of t trials after a warm-up), with logits_to_keep=1 and full logits; "
                    "measure tau, c_mask, c_sync, c_forced and a copy tag's decode steps. "
                    "Writes a kernel JSON for `ceiling --kernel` and a plot.")
    _add_model_args(p)
    p.add_argument("--prefix", type=positive, default=1024, metavar="P", help="prefix tokens (default: 1024)")
    p.add_argument("--trials", type=positive, default=3, metavar="T", help="timed trials (default: 3)")
    p.add_argument("--max-n", type=positive, default=512, metavar="N", help="largest N (default: 512)")
    add_output_args(p)
    p.set_defaults(func=_run_bench_kernel)


def _run_bench_kernel(args: argparse.Namespace) -> int:
    from cad_outlines.bench.kernel import KernelConfig, format_kernel, plot_kernel, run_kernel

    cfg = KernelConfig(args.preset, device=args.device, dtype=args.dtype, prefix=args.prefix,
                       trials=args.trials, max_n=args.max_n, seed=args.seed, threads=args.threads)
    record = run_kernel(cfg, progress=True)
    emit(args, record, format_kernel(record))
    draw_plot(args, plot_kernel, record)
    return 0



def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _weights(preset: str) -> str:
    from cad_outlines.tools.presets import REAL_PRESETS

    return "real weights" if preset in REAL_PRESETS else "random weights"


def line_range(text: str) -> tuple[int, int]:
    """An argparse type: ``LOW-HIGH``, two counts of lines with LOW <= HIGH."""
    low, sep, high = text.partition("-")
    if not (sep and low.isdigit() and high.isdigit()) or int(low) > int(high):
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH with LOW <= HIGH (e.g. 151-400), got {text!r}")
    return int(low), int(high)


def _add_case_args(p: argparse.ArgumentParser, kernel_trials: int) -> None:
    """Corpus, model, case selection and in-run kernel: shared by ``bench e2e`` and ``all``."""
    p.add_argument("corpus", metavar="CORPUS.jsonl", help='JSONL of {"id", "doc", "gold"}')
    _add_model_args(p)
    p.add_argument("--limit", type=positive, default=None, metavar="K", help="K cases only")
    p.add_argument("--order", choices=["file", "size"], default="file",
                   help="file order (default) or smallest doc+gold first")
    p.add_argument("--lines", type=line_range, default=None, metavar="LOW-HIGH",
                   help="only documents of LOW..HIGH lines (e.g. 151-400: whole files)")
    p.add_argument("--split", choices=["all", "train", "eval"], default="all",
                   help="only the files of this split of the training mix (eval: never trained on; "
                        "needs the corpus's source and path; default: all)")
    p.add_argument("--kernel-trials", type=positive, default=kernel_trials, metavar="T",
                   help=f"trials of the in-run kernel curve (default: {kernel_trials})")
    p.add_argument("--kernel-max-n", type=positive, default=256, metavar="N",
                   help="largest N of the in-run kernel curve (default: 256)")
    p.add_argument("--pld", default="10:2,20:3", metavar="K:N,...",
                   help="prompt-lookup runs, one per setting (k drafted tokens, n-gram size); "
                        "'' for none (default: 10:2,20:3: transformers' default and the tuned one)")
    p.add_argument("--skip", default="", metavar="RUN,...",
                   help="ablation runs to leave out: outlines, cad_uncosted, cad_auto, cad_fixedcost, "
                        "cad_nodraft, cad_notrees, cad_nosplice, cad_plain")
    p.add_argument("--prompt-style", choices=["full", "compact"], default="full",
                   help="the CaD prompt's layout: full (instruction, format statement, lines numbered "
                        "'i| ') or compact (constant head first, lines numbered 'i ', instruction last)")


@COMMANDS.command
def _add_bench_e2e(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "e2e",
        help="oracle-forced CaD vs full regeneration, Outlines' Generator and splice=False",
        description="On each case: full regeneration of the gold (a), Outlines' Generator "
                    "with the same CFG forced to the oracle program (b), CaD forced to the "
                    "oracle program (with and without tag drafts), CaD splice=False (c) and "
                    "splice=False fast_forward=False draft_tags=False; "
                    "realized speed-up over (a) next to bnd_exact from a kernel curve measured "
                    "in the same run. Random weights: speed only, not selection quality.")
    _add_case_args(p, kernel_trials=1)
    p.add_argument("--kernel-prefix", type=positive, default=None, metavar="P",
                   help="prefix of the in-run kernel (default: mean prompt tokens of the cases)")
    add_output_args(p)
    p.set_defaults(func=_run_bench_e2e)


def _run_bench_e2e(args: argparse.Namespace) -> int:
    import os

    from cad_outlines.bench.e2e import run_e2e
    from cad_outlines.bench.e2e_report import format_e2e, plot_e2e

    cfg = _e2e_config(args)
    report = run_e2e(load_cases(args.corpus), cfg, progress=True)
    name = os.path.splitext(os.path.basename(args.corpus))[0]
    emit(args, report, format_e2e(report, name))
    draw_plot(args, plot_e2e, report, title=f"{name}: {args.preset} e2e ({_weights(args.preset)})")
    return 0 if not report["failures"] else 1



def _e2e_config(args: argparse.Namespace) -> "E2EConfig":
    """The :class:`~cad_outlines.bench.e2e.E2EConfig` of ``bench e2e`` / ``bench all`` arguments."""
    from cad_outlines.bench.e2e import E2EConfig

    return E2EConfig(args.preset, device=args.device, dtype=args.dtype, seed=args.seed,
                     threads=args.threads, limit=args.limit, order=args.order,
                     kernel_trials=args.kernel_trials, kernel_max_n=args.kernel_max_n,
                     kernel_prefix=getattr(args, "kernel_prefix", None),  # `bench all` has no flag
                     pld=_csv(args.pld), skip=_csv(args.skip), prompt_style=args.prompt_style,
                     lines=args.lines, split=args.split)


@COMMANDS.command
def _add_bench_formats(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "formats",
        help="output tokens and round trips: full text, search/replace, unified diff, CaD",
        description="From the oracle alignment of every case: tokens (mean, median, p95, "
                    "total) and exact round trip of full regeneration, Aider-style "
                    "search/replace blocks (first match), difflib unified diffs applied with "
                    "GNU patch, and CaD programs (lines and tokens). Deterministic; no model.")
    p.add_argument("corpus", metavar="CORPUS.jsonl", help='JSONL of {"id", "doc", "gold"}')
    p.add_argument("--tokenizer", metavar="DIR", required=True, help="Hugging Face tokenizer folder")
    p.add_argument("--limit", type=positive, default=None, metavar="K", help="first K cases only")
    p.add_argument("--min-span", type=positive, default=8, metavar="M",
                   help="shortest token copy of the token-level CaD program (default: 8)")
    add_output_args(p, plot=False)
    p.set_defaults(func=_run_bench_formats)


def _run_bench_formats(args: argparse.Namespace) -> int:
    import os

    from cad_outlines.bench.formats import format_formats, run_formats
    from cad_outlines.training.ceiling import load_tokenization

    report = run_formats(load_cases(args.corpus), load_tokenization(args.tokenizer),
                         limit=args.limit, min_span=args.min_span, progress=True)
    report["seed"] = args.seed  # no randomness; recorded for uniformity
    report["tokenizer"], report["limit"] = args.tokenizer, args.limit
    emit(args, report, format_formats(report, os.path.splitext(os.path.basename(args.corpus))[0]))
    return 0



@COMMANDS.command
def _add_bench_prompt(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "prompt",
        help="prompt tokens: plain vs line numbers vs the CaD prompt, per tokenizer family",
        description="For every case: tokens of the plain prompt (instruction + document, what "
                    "regeneration and prompt lookup send), of the same with line numbers, and of "
                    "the CaD prompt (+ format statement), with each tokenizer. No model.")
    p.add_argument("corpus", metavar="CORPUS.jsonl", help='JSONL of {"id", "doc", "gold"}')
    p.add_argument("--tokenizer", metavar="DIR", required=True, action="append",
                   help="Hugging Face tokenizer folder (repeat for several families)")
    p.add_argument("--limit", type=positive, default=None, metavar="K", help="K cases only")
    p.add_argument("--order", choices=["file", "size"], default="file",
                   help="file order (default) or smallest doc+gold first")
    add_output_args(p, plot=False)
    p.set_defaults(func=_run_bench_prompt)


def _run_bench_prompt(args: argparse.Namespace) -> int:
    import os

    from transformers import AutoTokenizer

    from cad_outlines.adapters import get_adapter
    from cad_outlines.bench.e2e import select_cases
    from cad_outlines.bench.prompt_cost import format_prompt_cost, prompt_cost

    cases = select_cases(load_cases(args.corpus), args.order, args.limit)
    reports = [prompt_cost(cases, get_adapter(AutoTokenizer.from_pretrained(folder))) for folder in args.tokenizer]
    report = {"corpus": args.corpus, "order": args.order, "limit": args.limit, "tokenizers": args.tokenizer,
              "families": reports}
    emit(args, report, format_prompt_cost(reports, os.path.splitext(os.path.basename(args.corpus))[0]))
    return 0



@COMMANDS.command
def _add_bench_pool(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "pool",
        help="pool the finished cases of a bench all run cut short (e2e.partial.jsonl)",
        description="Read OUT_DIR/e2e.partial.jsonl and OUT_DIR/kernel.json of a 'bench all' "
                    "run and write OUT_DIR/e2e.json, e2e.md and e2e.png from the cases it finished.")
    p.add_argument("out_dir", metavar="OUT_DIR", help="the bench all folder")
    p.set_defaults(func=_run_bench_pool)


def _run_bench_pool(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from cad_outlines.bench._common import write_json
    from cad_outlines.bench.e2e import report_from_checkpoint
    from cad_outlines.bench.e2e_report import format_e2e, plot_e2e
    from cad_outlines.files import atomic_write

    out = Path(args.out_dir)
    for needed in ("kernel.json", "e2e.partial.jsonl"):
        if not (out / needed).is_file():
            raise UsageError(f"{out / needed} does not exist (is {out} a bench all folder?)")
    suite = out / "suite.json"
    config = json.loads(suite.read_text())["config"] if suite.is_file() else None
    report = report_from_checkpoint(out / "e2e.partial.jsonl", json.loads((out / "kernel.json").read_text()),
                                    config)
    name = out.name
    table = format_e2e(report, name)
    write_json(out / "e2e.json", report)
    atomic_write(out / "e2e.md", f"# e2e (pooled from the checkpoint: {len(report['cases'])} case(s))\n\n"
                 + table + "\n")
    if report["cases"]:
        weights = _weights(config["preset"]) if config else "weights as in suite.json"
        plot_e2e(report, str(out / "e2e.png"), title=f"{name} ({weights})")
    print(table)
    return 0



@COMMANDS.command
def _add_bench_perturb(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "perturb",
        help="exact match when every copy endpoint is shifted by U[-eps, eps]",
        description="Shift each copy endpoint of the oracle program by an integer drawn "
                    "from Uniform[-eps, eps], clamp to the document, resolve in clipped mode "
                    "and count exact matches with the gold. No model.")
    p.add_argument("corpus", metavar="CORPUS.jsonl", help='JSONL of {"id", "doc", "gold"}')
    p.add_argument("--eps", default="0,1,2,3,5", metavar="E1,E2,...",
                   help="shift bounds to try (default: 0,1,2,3,5)")
    p.add_argument("--trials", type=positive, default=5, metavar="T", help="draws per case (default: 5)")
    p.add_argument("--limit", type=positive, default=None, metavar="K", help="first K cases only")
    add_output_args(p)
    p.set_defaults(func=_run_bench_perturb)


def _run_bench_perturb(args: argparse.Namespace) -> int:
    import os

    from cad_outlines.bench.perturb import format_perturb, plot_perturb, run_perturb

    eps = list(int_list("--eps", args.eps, minimum=0))
    name = os.path.splitext(os.path.basename(args.corpus))[0]
    report = run_perturb(load_cases(args.corpus), eps, trials=args.trials, seed=args.seed,
                         limit=args.limit, progress=True)
    emit(args, report, format_perturb(report, name))
    draw_plot(args, plot_perturb, report, title=f"{name}: copy-index perturbation "
                                            f"({report['n']} cases x {args.trials} trials)")
    return 0



@COMMANDS.command
def _add_bench_fuzz(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "fuzz",
        help="sample programs freely on adversarial documents and check every guarantee",
        description="Sample N programs per preset (temperature 0.7-3, top_p < 1 and = 1, "
                    "lines and tokens, drafts on and off) on adversarial documents and count "
                    "complete / incomplete runs, exceptions and reversed or out-of-range "
                    "copies; see docs/reliability.md.")
    p.add_argument("--runs", type=positive, required=True, metavar="N", help="runs per preset")
    p.add_argument("--preset", nargs="+", default=["tiny-qwen", "tiny-deepseek-coder", "tiny-codellama"],
                   metavar="NAME", help="presets to fuzz (default: the three tiny ones)")
    p.add_argument("--max-new-tokens", type=positive, default=48, metavar="T",
                   help="program-token budget per run (default: 48)")
    p.add_argument("--no-bias", dest="bias", action="store_false",
                   help="sample without the bias towards closing gen bodies (bench/fuzz.py: ClosingBias)")
    p.add_argument("--threads", type=positive, default=1, metavar="N",
                   help="torch intra-op threads (default: 1)")
    add_output_args(p, plot=False)
    p.set_defaults(func=_run_bench_fuzz)


def _run_bench_fuzz(args: argparse.Namespace) -> int:
    from cad_outlines.bench.fuzz import format_fuzz, run_fuzz

    from cad_outlines.bench._common import write_json

    report = run_fuzz(args.preset, args.runs, seed=args.seed, max_new_tokens=args.max_new_tokens,
                      bias=args.bias, threads=args.threads,
                      progress=lambda line: print(line, file=sys.stderr, flush=True),
                      checkpoint=(lambda partial: write_json(args.output, partial)) if args.output else None)
    emit(args, report, format_fuzz(report))
    failures = sum(f["counts"]["failures"] for f in report["families"].values())
    return 1 if failures else 0



@COMMANDS.command
def _add_bench_all(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "all",
        help="kernel, bounds, e2e, formats and perturb on one corpus, in one timed run",
        description="Items 1-5 of the benchmark on the chosen cases of one corpus, with one "
                    "model and one kernel curve (the bounds and the e2e ratio read the curve "
                    "measured in the same run). Writes every JSON and plot plus summary.md "
                    "(all tables and the wall seconds of each item) to OUT_DIR. Each e2e case "
                    "goes to OUT_DIR/e2e.partial.jsonl as it finishes: the same command run "
                    "again resumes there (other settings are refused).")
    _add_case_args(p, kernel_trials=3)
    p.add_argument("--out-dir", required=True, metavar="OUT_DIR", help="folder for the outputs")
    p.add_argument("--eps", default="0,1,2,3,5", metavar="E1,E2,...",
                   help="perturbation shift bounds (default: 0,1,2,3,5)")
    p.add_argument("--trials", type=positive, default=5, metavar="T",
                   help="perturbation draws per case (default: 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of weights, ids and draws (default: 0)")
    p.add_argument("--json", action="store_true",
                   help="print the run's record (suite.json: settings, seconds per item, files) as JSON")
    p.set_defaults(func=_run_bench_all)


def _run_bench_all(args: argparse.Namespace) -> int:
    import json
    import os

    from cad_outlines.bench.suite import format_suite, run_suite

    eps = list(int_list("--eps", args.eps, minimum=0))
    cfg = _e2e_config(args)
    name = os.path.splitext(os.path.basename(args.corpus))[0]
    report = run_suite(load_cases(args.corpus), cfg, args.out_dir, name=name, eps=eps,
                       perturb_trials=args.trials, progress=True)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(format_suite(report))
        print(f"outputs: {args.out_dir}/ ({', '.join(report['files'])})")
    return 0 if not report["failures"] else 1



@COMMANDS.command
def _add_bench_constraint(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "constraint",
        help="llguidance (CFG) vs outlines_core (token FSM) for the program language",
        description="For each fixture tokenizer and document size n: first-use setup, "
                    "per-document compile (llguidance grammar vs outlines_core Index of "
                    "grammar.program_regex(n)), per-step mask cost along the oracle program "
                    "of a corpus case, and whether both allow the same tokens. Each "
                    "tokenizer runs in its own process; an Index build past --index-timeout "
                    "or a process past --memory-limit is stopped and reported (exit status 1).")
    p.add_argument("corpus", metavar="CORPUS.jsonl",
                   help="corpus holding --case (the repository's tests/fixtures/corpus_sample.jsonl "
                        "has the default case)")
    p.add_argument("--case", default=None, metavar="ID",
                   help="case whose oracle program is forced (default: commits_c-0026)")
    p.add_argument("--tokenizers", default=None, metavar="F1,F2",
                   help="families among qwen,deepseek-coder,codellama (default: all; codellama "
                        "with --tiny)")
    p.add_argument("--sizes", default=None, metavar="N1,N2",
                   help="document sizes in lines (default: 50,500,5000; 40,400 with --tiny)")
    p.add_argument("--repeats", type=positive, default=None, metavar="R",
                   help="compiles and passes per measurement (default: 3; 1 with --tiny)")
    p.add_argument("--index-timeout", type=float, default=120.0, metavar="S",
                   help="stop an outlines_core Index build after S seconds (default: 120)")
    p.add_argument("--memory-limit", type=float, default=12.0, metavar="GIB",
                   help="stop a worker whose resident memory passes GIB (default: 12)")
    p.add_argument("--tiny", action="store_true", help="CI-sized run: one tokenizer, small n")
    p.add_argument("--json", action="store_true", help="print every measurement as JSON")
    p.add_argument("-o", "--output", metavar="OUT.json", help="also write the JSON here (atomically)")
    p.set_defaults(func=_run_bench_constraint)


def _run_bench_constraint(args: argparse.Namespace) -> int:
    from cad_outlines.bench.constraint import ConstraintConfig, format_constraint, run_constraint

    overrides: dict = {"index_timeout_s": args.index_timeout, "memory_limit_gib": args.memory_limit}
    if args.case is not None:
        overrides["case"] = args.case
    if args.tokenizers is not None:
        overrides["tokenizers"] = tuple(t.strip() for t in args.tokenizers.split(",") if t.strip())
    if args.sizes is not None:
        overrides["sizes"] = int_list("--sizes", args.sizes)  # ConstraintConfig checks the range
    if args.repeats is not None:
        overrides["repeats"] = args.repeats
    cfg = ConstraintConfig.tiny(**overrides) if args.tiny else ConstraintConfig(**overrides)
    report = run_constraint(load_cases(args.corpus), cfg, progress=True)
    emit(args, report, format_constraint(report))
    return 0 if not any("stopped" in rec for rec in report["tokenizers"].values()) else 1



@COMMANDS.command
def _add_bench_drafting(bench: argparse._SubParsersAction) -> None:
    p = bench.add_parser(
        "drafting",
        help="oracle-forced CaD with tag drafts off vs on: forwards and seconds, side by side",
        description="Force the oracle program of each case through CaD with draft_tags off and "
                    "on, interleaved (off, on, on, off, ...), counting and clocking the forwards "
                    "through an observed runner; both settings must rebuild the gold with the "
                    "same program. Tiny presets give the forward counts of their tokenizer "
                    "family; seconds need a full-size preset. See docs/generator.md.")
    p.add_argument("corpus", metavar="CORPUS.jsonl", help='JSONL of {"id", "doc", "gold"}')
    p.add_argument("--preset", nargs="+", default=None, metavar="NAME",
                   help="presets to run (default: tiny-qwen tiny-deepseek-coder tiny-codellama; "
                        "the last two need CAD_OUTLINES_TOKENIZERS, e.g. tests/fixtures/tokenizers)")
    p.add_argument("--per-corpus", type=positive, default=None, metavar="K",
                   help="first K cases of each corpus (ids CORPUS-NNNN; default: all)")
    p.add_argument("--repeats", type=positive, default=1, metavar="R",
                   help="runs of each setting per case; seconds are medians (default: 1)")
    _add_device_args(p)
    p.add_argument("--threads", type=positive, default=1, metavar="N",
                   help="torch intra-op threads (default: 1)")
    add_output_args(p, plot=False)
    p.set_defaults(func=_run_bench_drafting)


def _run_bench_drafting(args: argparse.Namespace) -> int:
    from cad_outlines.bench.drafting import TINY_PRESETS, DraftingConfig, format_drafting, run_drafting

    cfg = DraftingConfig(presets=tuple(args.preset or TINY_PRESETS), per_corpus=args.per_corpus,
                         repeats=args.repeats, seed=args.seed, dtype=args.dtype, device=args.device,
                         threads=args.threads)
    report = run_drafting(load_cases(args.corpus), cfg, progress=True)
    emit(args, report, format_drafting(report))
    return 0


COMMANDS.include(cli_serving.COMMANDS)  # serve, http
COMMANDS.include(cli_quality.COMMANDS)  # dccd, learn, quality
