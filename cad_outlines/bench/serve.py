"""``bench serve``: many concurrent edits on vLLM, CaD against regeneration and n-gram speculation.

N edits of a corpus are submitted at once to a vLLM engine (continuous batching, prefix
caching) and run to the end, in one process, in this order:

``regen``
    Full regeneration: each edit's gold document teacher-forced after the plain prompt
    (the instruction and the file as it is, no line numbers; ``ngram`` uses it too),
    one request per edit, one decode step per gold token
    (:meth:`~cad_outlines.engines.vllm.VLLMEditor.regenerate_many`).
``cad``
    Copy-as-Decode on vLLM with the oracle program forced
    (:meth:`~cad_outlines.engines.vllm.VLLMEditor.run_many`, ``splice="request"``): one
    request per stretch of program, each splice a prefix-cached continuation.
``cad-session``
    The same with ``splice="session"``: one resumable request per edit, each span
    appended to the KV the request kept (where this vLLM has streaming-input sessions).
``ngram``
    Regeneration with vLLM's n-gram (prompt-lookup) speculative decoding, the peer a vLLM
    user would pick. Speculation is an engine-wide setting and vLLM 0.32 refuses custom
    logits processors with it, so this runs on a second engine (same model, dtype, block
    size and KV budget), built after the first is shut down. Without a logits processor
    the gold cannot be teacher-forced: each request is plain greedy decoding of exactly
    as many tokens as its gold (``min_tokens = max_tokens``), so the work per edit matches
    ``regen``, but the drafts' acceptance is that of the model's own text, not the gold's.
``ngram-gold`` (a replay, not a run)
    What n-gram speculation would do if the model typed the gold: vLLM's own
    ``NgramProposer`` drafts on the prompt plus the gold so far, greedy verification keeps
    the drafted tokens equal to the gold's next ones plus one token of the model's.
    Priced with the ``ngram`` run's measured decode-step times (a least-squares line of
    step seconds against scheduled tokens; the median step if noise makes the slope
    negative), after that run's measured prefill phase.

The prefix cache is emptied before each run. The model folder may hold random weights
(speed does not depend on them) or real ones; every run forces or replays the gold, so
exact match checks the mechanics, not the model's choice.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..training.corpus import Case, load_corpus
from ..errors import CaDError, InputError
from ..language.syntax import copy_lines
from ..language.oracle import oracle_program
from ..language.program import render
from . import _common
from .serve_report import format_serve, plot_serve

__all__ = ["MAX_MODEL_LEN", "ServeConfig", "add_arguments", "main", "model_context", "ngram_replay", "price_replay", "run_from_args", "run_serve",
           "splice_probe"]


@dataclass
class ServeConfig:
    """What ``bench serve`` runs (see the module docstring).

    ``kv_cache_gib`` sizes each engine's KV cache; ``0`` lets vLLM size it from free
    memory (on a shared CPU machine vLLM then reserves most of the node and may refuse to
    start). ``max_model_len`` ``0``: the model's own context (``max_position_embeddings``),
    at most :data:`MAX_MODEL_LEN`. ``ngram_k``, ``ngram_min`` and ``ngram_max`` are vLLM's
    ``num_speculative_tokens``, ``prompt_lookup_min`` and ``prompt_lookup_max``.
    """

    model: str
    corpus: str
    edits: int = 8
    max_doc_chars: int = 6000
    dtype: str = "bfloat16"
    block_size: int = 32
    kv_cache_gib: float = 2.0
    max_model_len: int = 0
    ngram_k: int = 8
    ngram_min: int = 2
    ngram_max: int = 4


#: The longest context ``bench serve`` reserves by default (the KV budget is fixed anyway).
MAX_MODEL_LEN = 16384


def model_context(folder: str) -> int:
    """The model folder's context length (``config.json``), at most :data:`MAX_MODEL_LEN`.

    Raises
    ------
    InputError
        When the folder has no readable ``config.json``.
    """
    import json

    path = Path(folder) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{folder}: not a model folder vLLM can load (config.json: {err})") from None
    positions = config.get("max_position_embeddings")
    return min(MAX_MODEL_LEN, int(positions)) if isinstance(positions, (int, float)) and positions > 0 else MAX_MODEL_LEN


def select(cases: Sequence[Case], edits: int, max_doc_chars: int) -> list[Case]:
    """The ``edits`` largest cases whose document and gold fit ``max_doc_chars`` (ties by id).

    Large documents are where splices matter; the cap keeps a CPU run within minutes.
    """
    fitting = [c for c in cases if len(c.doc) <= max_doc_chars and len(c.gold) <= max_doc_chars
               and c.doc != c.gold]
    fitting.sort(key=lambda c: (-len(c.gold), c.id))
    return fitting[:edits]


def ngram_replay(prompt: Sequence[int], gold: Sequence[int],
                 propose: Callable[[list[int]], Sequence[int]]) -> list[tuple[int, int]]:
    """Replay speculative decoding of ``gold`` by a model that always agrees with it.

    Each step ``propose`` drafts tokens from the context (prompt plus gold so far); greedy
    verification keeps the drafted tokens equal to the gold's next ones and adds one token
    of the model's own (the bonus token), as vLLM's rejection sampler does at temperature 0.

    Returns
    -------
    list[tuple[int, int]]
        Per decode step: (drafted tokens verified, tokens the step added).
    """
    context = list(prompt)
    done, steps = 0, []
    while done < len(gold):
        draft = list(propose(context))
        accepted = 0
        while accepted < len(draft) and done + accepted < len(gold) and draft[accepted] == gold[done + accepted]:
            accepted += 1
        added = min(accepted + 1, len(gold) - done)
        context += gold[done:done + added]
        done += added
        steps.append((len(draft), added))
    return steps


def price_replay(replays: Sequence[Sequence[tuple[int, int]]], step_seconds: Callable[[int], float],
                 start: float) -> tuple[float, list[float]]:
    """Wall time and per-edit latency of the replayed edits run concurrently.

    All edits start their decode steps at ``start`` seconds (after the prefill phase); each
    engine step verifies, for every edit not yet done, one token plus its drafts, and costs
    ``step_seconds(scheduled tokens)``.
    """
    clock, finished = start, [start] * len(replays)
    for step in range(max((len(r) for r in replays), default=0)):
        live = [i for i, r in enumerate(replays) if step < len(r)]
        clock += step_seconds(sum(1 + replays[i][step][0] for i in live))
        for i in live:
            if step == len(replays[i]) - 1:
                finished[i] = clock
    return clock, finished


def run_serve(cfg: ServeConfig) -> dict[str, Any]:
    """Run the benchmark; the JSON-ready record (environment, config, per-run figures)."""
    from ..engines import vllm as cad_vllm  # first: its ImportError says how to install vLLM

    import vllm

    # Read at the start (the commit and modified files are those of the code that runs);
    # the load average is read again at the end. LD_PRELOAD matters on the CPU: without
    # Intel OpenMP preloaded, vLLM's n-gram engine ran ~6x slower here (tiny model).
    environment = _common.environment(vllm=vllm.__version__, ld_preload=os.environ.get("LD_PRELOAD"),
                                      omp_num_threads=os.environ.get("OMP_NUM_THREADS"))
    if not cfg.max_model_len:
        cfg = dataclasses.replace(cfg, max_model_len=model_context(cfg.model))
    cases = select(load_corpus(cfg.corpus), cfg.edits, cfg.max_doc_chars)
    if len(cases) < cfg.edits:
        raise InputError(f"only {len(cases)} cases of {cfg.corpus} fit max_doc_chars={cfg.max_doc_chars}")
    programs = [render(oracle_program(c.doc, c.gold)) for c in cases]
    edits = [(c.doc, str(c.meta.get("instruction") or "Apply the edit.")) for c in cases]
    engine_args: dict[str, Any] = dict(dtype=cfg.dtype, block_size=cfg.block_size, seed=0,
                                       max_model_len=cfg.max_model_len)
    if cfg.kv_cache_gib > 0:  # else vLLM sizes the cache from free memory (GPUs)
        engine_args["kv_cache_memory_bytes"] = int(cfg.kv_cache_gib * (1 << 30))
    startup: dict[str, float] = {}
    clock = time.perf_counter()
    llm = cad_vllm.load(cfg.model, **engine_args)
    startup["cad_engine"] = time.perf_counter() - clock
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=cfg.max_model_len, splice="request")
    sessions = (cad_vllm.VLLMEditor(llm, max_new_tokens=cfg.max_model_len, splice="session")
                if cad_vllm.sessions_supported() else None)
    adapter = editor.adapter
    golds = [adapter.encode(c.gold) for c in cases]
    # n-gram speculation gets regeneration's plain prompt (the file as it is): in the
    # numbered CaD prompt every match would stop at the next line's number.
    prompts = [adapter.plain_prompt_ids(doc, instruction, editor.prompt_style) for doc, instruction in edits]
    # Warm-up (not timed): the first requests pay one-off costs (grammar and kernel set-up).
    editor.run_many(edits[:1], force_programs=programs[:1], progress=False)
    editor.regenerate_many(edits[:1], targets=[cases[0].gold], progress=False)
    if sessions is not None:
        sessions.run_many(edits[:1], force_programs=programs[:1], progress=False)

    runs: dict[str, Any] = {}
    for name in ("regen", "cad", "cad-session")[:3 if sessions is not None else 2]:
        llm.reset_prefix_cache()
        clock = time.perf_counter()
        if name == "regen":
            results = editor.regenerate_many(edits, targets=[c.gold for c in cases], progress=False)
        else:
            results = (editor if name == "cad" else sessions).run_many(edits, force_programs=programs,
                                                                        progress=False)
        wall = time.perf_counter() - clock
        runs[name] = _summarise(results, cases, golds, wall)
    # The splices of the first edit again, one request at a time, to split a continuation's
    # first-token time into its parts (see splice_probe).
    probe = splice_probe(llm, editor, edits[0], programs[0])
    _shutdown(llm)
    del llm, editor, sessions
    gc.collect()

    # n-gram speculation is engine-wide and excludes the CaD processor: a second engine.
    from vllm import LLM

    speculative = {"method": "ngram", "num_speculative_tokens": cfg.ngram_k,
                   "prompt_lookup_min": cfg.ngram_min, "prompt_lookup_max": cfg.ngram_max}
    clock = time.perf_counter()
    spec = LLM(model=cfg.model, enable_prefix_caching=True, enforce_eager=True, disable_log_stats=False,
               speculative_config=speculative, **engine_args)
    startup["ngram_engine"] = time.perf_counter() - clock
    _plain_run(spec, prompts[:1], [16])  # warm-up (not timed)
    spec.reset_prefix_cache()
    runs["ngram"], steps = _plain_run(spec, prompts, [len(g) for g in golds])
    runs["ngram"]["exact_match"] = sum(
        adapter.decode(ids) == c.gold for ids, c in zip(runs["ngram"].pop("outputs"), cases))

    from vllm.v1.spec_decode.ngram_proposer import NgramProposer

    runs["ngram-gold"] = _replay_gold(NgramProposer(spec.llm_engine.vllm_config), cfg, prompts, golds,
                                      steps, runs["ngram"]["prefill_phase_seconds"])
    _shutdown(spec)
    environment.update(engine_startup_seconds=startup, loadavg_end=[round(x, 2) for x in os.getloadavg()],
                       date_utc_end=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    return {
        "environment": environment,
        "config": asdict(cfg),
        "cases": [c.id for c in cases],
        "runs": runs,
        "splice_probe": probe,
    }


def _shutdown(llm: Any) -> None:
    """Stop an offline engine's core now (frees its KV cache before the next engine starts)."""
    llm.llm_engine.engine_core.shutdown()


def _plain_run(llm: Any, prompts: list[list[int]], lengths: list[int]) -> tuple[dict[str, Any], list[tuple[int, float]]]:
    """Greedy requests of exactly ``lengths`` tokens, all at once; per-step timing.

    Returns the run's record (as :func:`_summarise`, plus the speculation counters) and,
    per engine step, (tokens scheduled, seconds). The scheduled counts come from the
    in-process scheduler (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, which ``load`` sets).
    """
    from vllm import SamplingParams

    engine = llm.llm_engine
    scheduler = getattr(getattr(engine.engine_core, "engine_core", None), "scheduler", None)
    if scheduler is None:
        raise InputError("bench serve times the n-gram engine's steps in process: run it with "
                         "VLLM_ENABLE_V1_MULTIPROCESSING=0")
    scheduled: list[int] = []
    schedule = scheduler.schedule

    def counting_schedule(*args: Any, **kwargs: Any) -> Any:
        out = schedule(*args, **kwargs)
        scheduled.append(out.total_num_scheduled_tokens)
        return out

    before = _spec_counters(llm)
    submitted, first, done = {}, {}, {}
    outputs: dict[str, Any] = {}
    steps: list[tuple[int, float]] = []
    scheduler.schedule = counting_schedule
    try:
        start = time.perf_counter()
        for k, (prompt, length) in enumerate(zip(prompts, lengths)):
            rid = f"ngram-{k}"
            submitted[rid] = time.perf_counter()
            engine.add_request(rid, {"prompt_token_ids": prompt},
                               SamplingParams(temperature=0, max_tokens=length, min_tokens=length, ignore_eos=True))
        while engine.has_unfinished_requests():
            clock = time.perf_counter()
            produced = engine.step()
            now = time.perf_counter()
            for output in produced:
                if output.request_id not in first and output.outputs[0].token_ids:
                    first[output.request_id] = now
                if output.finished:
                    done[output.request_id] = now
                    outputs[output.request_id] = output
            if scheduled:
                steps.append((scheduled.pop(), now - clock))
                scheduled.clear()
        wall = time.perf_counter() - start
    finally:
        del scheduler.schedule  # the instance attribute; the class method shows again
    after = _spec_counters(llm)
    order = sorted(outputs, key=lambda rid: int(rid.split("-")[1]))
    latencies = sorted(done[rid] - submitted[rid] for rid in order)
    decoded = sum(len(outputs[rid].outputs[0].token_ids) for rid in order)
    cached = sum(outputs[rid].num_cached_tokens or 0 for rid in order)
    drafted, accepted = (after[key] - before[key] for key in ("draft_tokens", "accepted_tokens"))
    prefill_phase = max(first.values()) - start
    decode_steps = [s for s in steps if s[0] <= len(prompts) * (1 + _k(llm))]
    record = {
        "wall_seconds": wall,
        "gold_tokens": sum(lengths),
        "gold_tokens_per_second": sum(lengths) / wall,
        "latency_p50": statistics.median(latencies),
        "latency_p95": _common.percentile(latencies, 95),
        "edits": len(prompts),
        "decoded_tokens": decoded,
        "requests": len(prompts),
        "prefill_computed": sum(len(p) for p in prompts) - cached,
        "prefill_cached": cached,
        "engine_steps": len(steps),
        "drafted_tokens": drafted,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "drafts": after["drafts"] - before["drafts"],
        "prefill_phase_seconds": prefill_phase,
        "decode_step_seconds": statistics.median(s for _, s in decode_steps) if decode_steps else None,
        "outputs": [list(outputs[rid].outputs[0].token_ids) for rid in order],
    }
    return record, steps


def _k(llm: Any) -> int:
    return llm.llm_engine.vllm_config.speculative_config.num_speculative_tokens


def _spec_counters(llm: Any) -> dict[str, int]:
    """vLLM's speculative-decoding counters (needs ``disable_log_stats=False``)."""
    names = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
             "vllm:spec_decode_num_accepted_tokens": "accepted_tokens"}
    counters = dict.fromkeys(names.values(), 0)
    for metric in llm.get_metrics():
        if metric.name in names:
            counters[names[metric.name]] += int(metric.value)
    return counters


def _replay_gold(proposer: Any, cfg: ServeConfig, prompts: list[list[int]], golds: list[list[int]],
                 steps: list[tuple[int, float]], prefill_phase: float) -> dict[str, Any]:
    """The ``ngram-gold`` replay, priced by the ``ngram`` run's decode steps."""
    import numpy as np

    width = max(len(p) + len(g) for p, g in zip(prompts, golds)) + 1
    buffer = np.zeros((1, width), dtype=np.int32)

    def propose(context: list[int]) -> list[int]:
        buffer[0, :len(context)] = context
        (draft,) = proposer.propose(cfg.ngram_k, [[context[-1]]], np.array([len(context)], dtype=np.int32), buffer)
        return list(draft)

    replays = [ngram_replay(p, g, propose) for p, g in zip(prompts, golds)]
    # Decode steps only (the prefill phase is priced as measured): a line through them.
    decode = [(tokens, seconds) for tokens, seconds in steps if tokens <= len(prompts) * (1 + cfg.ngram_k)]
    xs, ys = np.array([t for t, _ in decode], float), np.array([s for _, s in decode], float)
    slope, intercept = np.polyfit(xs, ys, 1) if len(set(xs)) > 1 else (0.0, float(ys.mean()))
    kind = "line"
    if slope < 0:  # noise swamped the per-token cost: a constant (the median step) instead
        slope, intercept, kind = 0.0, float(np.median(ys)), "constant"
    fitted = slope * xs + intercept
    r2 = 1 - float(((ys - fitted) ** 2).sum()) / float(((ys - ys.mean()) ** 2).sum() or 1.0)
    wall, finished = price_replay(replays, lambda tokens: intercept + slope * tokens, prefill_phase)
    latencies = sorted(finished)
    gold_tokens = sum(len(g) for g in golds)
    drafted = sum(d for r in replays for d, _ in r)
    added = sum(a for r in replays for _, a in r)
    return {
        "measured": False,
        "wall_seconds": wall,
        "gold_tokens": gold_tokens,
        "gold_tokens_per_second": gold_tokens / wall,
        "latency_p50": statistics.median(latencies),
        "latency_p95": _common.percentile(latencies, 95),
        "edits": len(prompts),
        "decoded_tokens": gold_tokens,
        "requests": len(prompts),
        "engine_steps": max(len(r) for r in replays),
        "decode_steps_per_edit": [len(r) for r in replays],
        "drafted_tokens": drafted,
        "accepted_tokens": added - sum(len(r) for r in replays),
        "acceptance_rate": (added - sum(len(r) for r in replays)) / drafted if drafted else None,
        "step_model": {"kind": kind, "intercept_seconds": float(intercept), "seconds_per_token": float(slope),
                       "r2": r2, "fitted_steps": len(decode),
                       "tokens_range": [int(xs.min()), int(xs.max())]},
        "prefill_phase_seconds": prefill_phase,
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
        "latency_p95": _common.percentile(latencies, 95),
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
        "splice_computed": sum(s.splice_computed_tokens for s in stats),
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


def splice_probe(llm: Any, editor: Any, edit: tuple[str, str], program_text: str) -> dict[str, Any]:
    """What one splice costs, measured one request at a time on an otherwise idle engine.

    For each copy of ``program_text`` (forced on ``edit``), with the prefix cache holding
    the context before the copy (``C``) and nothing else of this edit:

    - ``span``: a plain request (no constraint) for ``C + span``; its first token costs
      the span's prefill, plus what every new request costs;
    - ``cached``: a plain request for ``C + span + [t]`` (now cached but for the last,
      partial block): what every new request costs, with next to no prefill;
    - ``cad``: the same with the CaD constraint (replaying the program so far), as the
      driver submits a continuation;
    - ``step``: the next token of the ``cached`` request, one decode step.

    So ``cached - step`` is the request overhead (scheduling, prefix-cache lookup, the
    partial block), ``cad - cached`` the grammar start inside the engine, ``span - cached``
    the span's prefill. ``replay_ms`` times the constraint's replay outside the engine.
    """
    from ..decoding.compiling import compile_grammar
    from ..decoding.constraint import ProgramConstraint
    from ..decoding.forcing import forced_ids
    from ..engines.vllm import EXTRA_KEY
    from ..language.program import Copy

    from vllm import SamplingParams

    adapter = editor.adapter
    document, instruction = edit
    lines = copy_lines(document)  # as the prompt numbers them
    compiled = compile_grammar(adapter.tokenizer, len(lines), "lines")
    constraint = ProgramConstraint(compiled)
    context = adapter.prompt_ids(document, instruction)
    splices: list[tuple[list[int], list[int], list[int]]] = []  # (C, span, program so far)
    program_ids: list[int] = []
    for token in forced_ids(adapter, program_text):
        context.append(token)
        program_ids.append(token)
        for op in constraint.advance([token]):
            if isinstance(op, Copy):
                span = adapter.copy_ids(lines[op.start - 1:op.end])
                splices.append((list(context), span, list(program_ids)))
                context += span
    spare = adapter.encode(" x")[-1]  # any token: it makes a prompt the cache has not seen
    rows: dict[str, list[float]] = {key: [] for key in ("step", "cached", "cad", "span", "replay")}
    spans = []
    llm.reset_prefix_cache()
    for before, span, so_far in splices:
        _first_tokens(llm, before, SamplingParams(max_tokens=1, temperature=0))  # C into the cache
        rows["span"].append(_first_tokens(llm, before + span, SamplingParams(max_tokens=1, temperature=0))[0])
        first, second = _first_tokens(llm, before + span + [spare],
                                      SamplingParams(max_tokens=2, min_tokens=2, ignore_eos=True, temperature=0))
        rows["cached"].append(first)
        rows["step"].append(second)
        args = {"upper": len(lines), "granularity": "lines", "replay": so_far, "eos": adapter.eos_token_id}
        rows["cad"].append(_first_tokens(llm, before + span + [spare, spare],
                                         SamplingParams(max_tokens=1, temperature=0, extra_args={EXTRA_KEY: args}))[0])
        clock = time.perf_counter()
        ProgramConstraint(compiled).advance(so_far)
        rows["replay"].append(time.perf_counter() - clock)
        spans.append(len(span))
    median = {key: 1000 * statistics.median(values) for key, values in rows.items() if values}
    return {
        "splices": len(splices),
        "span_tokens_median": statistics.median(spans) if spans else None,
        "seconds": rows,
        "median_ms": median,
        "request_overhead_ms": median["cached"] - median["step"],
        "grammar_start_ms": median["cad"] - median["cached"],
        "span_prefill_ms": median["span"] - median["cached"],
        "replay_ms": median["replay"],
    } if splices else {"splices": 0}


def _first_tokens(llm: Any, prompt: list[int], params: Any) -> list[float]:
    """Run one request alone; seconds from submitting it to each of its tokens (as deltas)."""
    engine = llm.llm_engine
    rid = f"probe-{time.perf_counter_ns()}"
    times, seen, clock = [], 0, time.perf_counter()
    engine.add_request(rid, {"prompt_token_ids": prompt}, params)
    while engine.has_unfinished_requests():
        for output in engine.step():
            if output.request_id == rid and len(output.outputs[0].token_ids) > seen:
                now = time.perf_counter()
                seen = len(output.outputs[0].token_ids)
                times.append(now - clock)
                clock = now
    return times


def add_arguments(parser: Any) -> None:
    """The command line of ``bench serve`` (an ``argparse`` parser): the fields of
    :class:`ServeConfig` plus ``--json`` / ``--md`` / ``--plot`` outputs."""
    parser.add_argument("model", help="model folder vLLM loads (e.g. from cad_outlines.tools.models.save)")
    parser.add_argument("corpus", help="edit corpus (.jsonl with doc, gold, instruction)")
    for name, default in asdict(ServeConfig("", "")).items():
        if name not in ("model", "corpus"):
            parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default,
                                help=f"default: {default}")
    parser.add_argument("--json", dest="out_json", help="write the record here (atomically)")
    parser.add_argument("--md", dest="out_md", help="write the markdown summary here (atomically)")
    parser.add_argument("--plot", dest="out_plot", help="write the plot here (PNG, needs matplotlib)")


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
    if args.out_plot:  # last: a missing matplotlib loses neither the JSON nor the table
        plot_serve(record, args.out_plot)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m cad_outlines.bench.serve MODEL CORPUS ...`` (same as ``cad-outlines bench serve``)."""
    import argparse

    parser = argparse.ArgumentParser(prog="cad-outlines bench serve", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_from_args(args)
    except CaDError as err:
        # One line, as `cad-outlines` prints it: a bad model folder, a missing plot library.
        print(f"cad-outlines bench serve: {err}", file=sys.stderr)
        return err.exit_status


if __name__ == "__main__":  # vLLM may spawn workers that re-import the main module
    raise SystemExit(main())
