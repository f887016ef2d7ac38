"""``bench serve``: many concurrent edits on one vLLM engine, CaD against regeneration.

N edits of a corpus are submitted at once to ONE vLLM engine (continuous batching,
prefix caching) and run to the end, twice on the same engine and model:

``regen``
    Full regeneration: each edit's gold document teacher-forced after the CaD prompt,
    one request per edit, one decode step per gold token
    (:meth:`~cad_outlines.engines.vllm.VLLMEditor.regenerate_many`).
``cad``
    Copy-as-Decode on vLLM with the oracle program forced
    (:meth:`~cad_outlines.engines.vllm.VLLMEditor.run_many`): one request per stretch of
    program, each splice a prefix-cached continuation.

The prefix cache is emptied before each run, so neither inherits the other's prompts.

``ngram`` (vLLM's n-gram speculative decoding) is not run: it cannot be teacher-forced
on vLLM 0.32. Spec decoding is engine-wide and rejects custom logits processors, and
forcing through structured outputs needs a token-id grammar (``<[id]>``), which
llguidance (1.7 and 1.9) loses after the mask-then-rollback sequence spec decoding does
(the request is then terminated). What the run reports instead is the step count a
*perfect* model would need under prompt-lookup drafting (:func:`ngram_steps`), an upper
bound on what n-gram speculation could save in decode steps, not a wall-clock figure.

Weights are random: speed does not depend on them; exact match checks the mechanics.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ..corpus import Case, load_corpus
from ..oracle import oracle_program
from ..program import render
from . import _common

__all__ = ["ServeConfig", "add_arguments", "format_serve", "main", "ngram_steps", "run_from_args", "run_serve"]


@dataclass
class ServeConfig:
    """What ``bench serve`` runs (see the module docstring)."""

    model: str
    corpus: str
    edits: int = 8
    max_doc_chars: int = 6000
    dtype: str = "bfloat16"
    block_size: int = 32
    kv_cache_gib: float = 2.0
    max_model_len: int = 16384
    ngram_k: int = 8
    ngram_min: int = 2
    ngram_max: int = 4


def select(cases: Sequence[Case], edits: int, max_doc_chars: int) -> list[Case]:
    """The ``edits`` largest cases whose document and gold fit ``max_doc_chars`` (ties by id).

    Large documents are where splices matter; the cap keeps a CPU run within minutes.
    """
    fitting = [c for c in cases if len(c.doc) <= max_doc_chars and len(c.gold) <= max_doc_chars
               and c.doc != c.gold]
    fitting.sort(key=lambda c: (-len(c.gold), c.id))
    return fitting[:edits]


def ngram_steps(prompt: Sequence[int], gold: Sequence[int], k: int, n_min: int, n_max: int) -> int:
    """Decode steps prompt-lookup speculation needs when the model always agrees with ``gold``.

    Each step drafts up to ``k`` tokens that followed the most recent earlier occurrence of
    the context's last ``n`` tokens (the longest ``n`` in ``[n_min, n_max]`` that occurs),
    keeps the drafted tokens equal to the gold's next ones, and adds one token of its own.
    """
    context = list(prompt)
    done, steps = 0, 0
    while done < len(gold):
        draft: list[int] = []
        for n in range(n_max, n_min - 1, -1):
            if len(context) <= n:
                continue
            tail = context[-n:]
            for start in range(len(context) - n - 1, -1, -1):
                if context[start:start + n] == tail:
                    draft = context[start + n:start + n + k]
                    break
            if draft:
                break
        accepted = 0
        while accepted < len(draft) and done + accepted < len(gold) and draft[accepted] == gold[done + accepted]:
            accepted += 1
        step = min(accepted + 1, len(gold) - done)
        context += gold[done:done + step]
        done += step
        steps += 1
    return steps


def run_serve(cfg: ServeConfig) -> dict[str, Any]:
    """Run the benchmark; the JSON-ready record (environment, config, per-run figures)."""
    from ..engines import vllm as cad_vllm

    cases = select(load_corpus(cfg.corpus), cfg.edits, cfg.max_doc_chars)
    if len(cases) < cfg.edits:
        raise ValueError(f"only {len(cases)} cases of {cfg.corpus} fit max_doc_chars={cfg.max_doc_chars}")
    programs = [render(oracle_program(c.doc, c.gold)) for c in cases]
    edits = [(c.doc, str(c.meta.get("instruction") or "Apply the edit.")) for c in cases]
    clock = time.perf_counter()
    llm = cad_vllm.load(cfg.model, dtype=cfg.dtype, block_size=cfg.block_size, seed=0,
                        max_model_len=cfg.max_model_len,
                        kv_cache_memory_bytes=int(cfg.kv_cache_gib * (1 << 30)))
    startup = time.perf_counter() - clock
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=cfg.max_model_len)
    adapter = editor.adapter
    golds = [adapter.encode(c.gold) for c in cases]
    # Warm-up (not timed): the first requests pay one-off costs (grammar and kernel set-up).
    editor.run_many(edits[:1], force_programs=programs[:1], progress=False)
    editor.regenerate_many(edits[:1], targets=[cases[0].gold], progress=False)

    runs: dict[str, Any] = {}
    for name in ("regen", "cad"):
        llm.reset_prefix_cache()
        clock = time.perf_counter()
        if name == "regen":
            results = editor.regenerate_many(edits, targets=[c.gold for c in cases], progress=False)
        else:
            results = editor.run_many(edits, force_programs=programs, progress=False)
        wall = time.perf_counter() - clock
        runs[name] = _summarise(results, cases, golds, wall)

    prompts = [adapter.prompt_ids(doc, instruction) for doc, instruction in edits]
    steps = [ngram_steps(p, g, cfg.ngram_k, cfg.ngram_min, cfg.ngram_max) for p, g in zip(prompts, golds)]
    import vllm

    return {
        "environment": _common.environment(vllm=vllm.__version__, engine_startup_seconds=startup),
        "config": asdict(cfg),
        "cases": [c.id for c in cases],
        "runs": runs,
        "ngram": {
            "measured": False,
            "reason": "vLLM 0.32 n-gram speculation cannot be teacher-forced (see bench/serve.py)",
            "perfect_model_steps": sum(steps),
            "gold_tokens": sum(len(g) for g in golds),
            "cad_decoded_tokens": runs["cad"]["decoded_tokens"],
        },
    }


def _summarise(results: list[Any], cases: Sequence[Case], golds: list[list[int]], wall: float) -> dict[str, Any]:
    stats = [r.stats for r in results]
    latencies = sorted(s.total_seconds for s in stats)
    gold_tokens = sum(len(g) for g in golds)
    continuation_ttft = [t for s in stats for t in s.first_token_seconds[1:]]
    first_ttft = [s.first_token_seconds[0] for s in stats if s.first_token_seconds]
    decode_steps = sum(max(0, s.decoded_tokens - s.requests) for s in stats)
    step_seconds = sum(s.decode_seconds for s in stats) / decode_steps if decode_steps else None
    record = {
        "wall_seconds": wall,
        "gold_tokens": gold_tokens,
        "gold_tokens_per_second": gold_tokens / wall,
        "latency_p50": statistics.median(latencies),
        "latency_p95": _quantile(latencies, 0.95),
        "exact_match": sum(r.document == c.gold for r, c in zip(results, cases)),
        "edits": len(results),
        "decoded_tokens": sum(s.decoded_tokens for s in stats),
        "copied_tokens": sum(s.copied_tokens for s in stats),
        "requests": sum(s.requests for s in stats),
        "splices": sum(s.splices for s in stats),
        "prefill_computed": sum(s.prompt_tokens_computed for s in stats),
        "prefill_cached": sum(s.prompt_tokens_cached for s in stats),
        "splice_reusable": sum(s.splice_reusable_tokens for s in stats),
        "splice_reusable_blocks": sum(s.splice_reusable_block_tokens for s in stats),
        "splice_cached": sum(s.splice_cached_tokens for s in stats),
        "first_request_ttft_median": statistics.median(first_ttft) if first_ttft else None,
        "continuation_ttft_median": statistics.median(continuation_ttft) if continuation_ttft else None,
        "decode_step_seconds": step_seconds,
    }
    if record["splice_reusable_blocks"]:
        record["splice_cache_hit_rate"] = record["splice_cached"] / record["splice_reusable_blocks"]
    if continuation_ttft and step_seconds is not None:
        # A continuation's first token costs a prefill of the span plus scheduling and
        # the constraint's start (replay); the overhead is what exceeds a decode step.
        record["splice_overhead_ms"] = 1000 * (statistics.median(continuation_ttft) - step_seconds)
    return record


def _quantile(values: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of sorted ``values``."""
    index = min(len(values) - 1, max(0, int(round(q * len(values) + 0.5)) - 1))
    return values[index]


def format_serve(record: dict[str, Any]) -> str:
    """The record as a markdown table plus the lines that qualify it."""
    runs, env, ngram = record["runs"], record["environment"], record["ngram"]
    regen, cad = runs["regen"], runs["cad"]
    rows = [
        ("gold tokens / s", "{:.1f}", "gold_tokens_per_second"),
        ("wall s (all edits)", "{:.1f}", "wall_seconds"),
        ("latency p50 s", "{:.1f}", "latency_p50"),
        ("latency p95 s", "{:.1f}", "latency_p95"),
        ("decoded tokens", "{}", "decoded_tokens"),
        ("requests", "{}", "requests"),
        ("prefill computed", "{}", "prefill_computed"),
        ("prefill cached", "{}", "prefill_cached"),
        ("exact match", "{}", "exact_match"),
    ]
    lines = [f"| {record['config']['edits']} concurrent edits | regen | cad |", "|---|---:|---:|"]
    for label, fmt, key in rows:
        lines.append(f"| {label} | {fmt.format(regen[key])} | {fmt.format(cad[key])} |")
    lines.append("")
    lines.append(f"CaD / regen gold-token throughput: {cad['gold_tokens_per_second'] / regen['gold_tokens_per_second']:.2f}x; "
                 f"p50 latency {cad['latency_p50']:.1f} s vs {regen['latency_p50']:.1f} s.")
    if "splice_cache_hit_rate" in cad:
        lines.append(f"Splices: {cad['splices']}; prefix-cache hits {cad['splice_cached']} of "
                     f"{cad['splice_reusable_blocks']} reusable tokens in whole blocks "
                     f"({100 * cad['splice_cache_hit_rate']:.1f} %; {cad['splice_reusable']} before block rounding).")
    if "splice_overhead_ms" in cad:
        lines.append(f"Continuation request: median first token {1000 * cad['continuation_ttft_median']:.0f} ms "
                     f"vs a decode step {1000 * cad['decode_step_seconds']:.0f} ms: "
                     f"{cad['splice_overhead_ms']:.0f} ms per splice (span prefill, scheduling, constraint replay).")
    lines.append(f"n-gram speculation: not measured ({ngram['reason']}); a perfect model under prompt lookup "
                 f"would need {ngram['perfect_model_steps']} decode steps for {ngram['gold_tokens']} gold tokens; "
                 f"CaD decoded {ngram['cad_decoded_tokens']}.")
    lines.append(f"vLLM {env.get('vllm')}, torch {env.get('torch')}, transformers {env.get('transformers')}, "
                 f"llguidance {env.get('llguidance')}; {env.get('cpu')} ({env.get('cpus')} CPUs), "
                 f"load {env.get('loadavg_1_5_15')}; {env.get('date_utc')} UTC; engine start-up "
                 f"{env.get('engine_startup_seconds', 0):.0f} s.")
    return "\n".join(lines) + "\n"


def add_arguments(parser: Any) -> None:
    """The command line of ``bench serve`` (an ``argparse`` parser): the fields of
    :class:`ServeConfig` plus ``--json`` / ``--md`` outputs."""
    parser.add_argument("model", help="model folder vLLM loads (e.g. from cad_outlines.models.save)")
    parser.add_argument("corpus", help="edit corpus (.jsonl with doc, gold, instruction)")
    for name, default in asdict(ServeConfig("", "")).items():
        if name not in ("model", "corpus"):
            parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default,
                                help=f"default: {default}")
    parser.add_argument("--json", dest="out_json", help="write the record here (atomically)")
    parser.add_argument("--md", dest="out_md", help="write the markdown summary here (atomically)")


def run_from_args(args: Any) -> int:
    """Run ``bench serve`` from parsed arguments; print the summary, write the outputs."""
    import json

    fields = {name: getattr(args, name) for name in asdict(ServeConfig("", ""))}
    record = run_serve(ServeConfig(**fields))
    text = format_serve(record)
    print(text)
    if args.out_json:
        _common.write_json(args.out_json, record)
    else:
        print(json.dumps(record["runs"], indent=2))
    if args.out_md:
        from ..files import atomic_write

        atomic_write(args.out_md, text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cad_outlines.bench.serve MODEL CORPUS ...`` (same as ``cad-outlines bench serve``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="cad-outlines bench serve", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":  # vLLM may spawn workers that re-import the main module
    raise SystemExit(main())
