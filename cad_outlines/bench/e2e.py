"""``bench e2e``: the oracle-forced CaD loop against its baselines, on real edits.

Every case of the corpus is decoded, with the same model in the same process, six ways:

``regen`` (a)
    Full autoregressive regeneration of the gold: the gold teacher-forced after the same
    prompt, one forward per token, no constraint, through the generator's own loop
    (``CaDGenerator.regenerate``, via :func:`._loop.regen_baseline`).
``outlines`` (b)
    Outlines' stock ``outlines.Generator(model, outlines.types.CFG(grammar))`` with the
    same specialised grammar, driven by ``model.generate`` (transformers' loop) with
    Outlines' llguidance processor masking every step and a forcing wrapper
    (:class:`ForcingProcessor`) that then keeps only the oracle program's next token.
    No splice, no fast-forward: one forward per program token.
``cad``
    :class:`~cad_outlines.decoding.generator.CaDGenerator` with ``force_program=oracle`` (splice,
    fast-forward and tag drafting on: the defaults), and ``forward_cost`` = the run's own
    kernel curve (:class:`~cad_outlines.decoding.drafting.ForwardCost`), so each draft is
    cut to what pays for its width on this machine.
``cad_uncosted``
    The same with ``forward_cost=None`` (every draft whole, the library default).
``cad_nodraft``
    The same with ``draft_tags=False``: the straightforward mechanism, one forward per
    decoded token.
``cad_nosplice`` (c)
    The defaults with ``splice=False``.
``cad_plain``
    ``splice=False, fast_forward=False, draft_tags=False``: the same work as (b), in our
    loop.
``pld_k{k}_n{n}`` (one per :attr:`E2EConfig.pld` setting)
    Prompt-lookup decoding, the peer an editor would otherwise use: transformers'
    ``PromptLookupCandidateGenerator`` drafts, the model is teacher-forced to the gold,
    every verify forward runs (:mod:`.pld`). Its prompt is the plain one (instruction and
    the document verbatim: no format statement, no line numbers).

``E2EConfig.skip`` leaves out ablation runs (``cad_uncosted``, ``cad_nodraft``, ``cad_nosplice``,
``cad_plain``, ``outlines``) to shorten a run; ``regen`` and ``cad`` always run.

Speed-ups compare the **generation phase** (wall time after the prompt's prefill);
``speedup_prompt_included`` adds each method's own prefill, against regeneration with
the plain prompt (the regen run's generation phase plus the plain prompt's prefill,
measured in the first PLD run): what a user who regenerates pays. The CaD prompt's extra
prefill (format statement, line numbers) is thus charged to CaD and Outlines only.
``speedup_with_prefill`` is the older figure against regeneration with the CaD prompt. ``bnd_exact`` comes from a
kernel curve measured in the same run (``logits_to_keep=1``, as the generator runs).
Weights are random: speed does not depend on them, but no figure here says anything
about what a trained model would choose.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import torch
from outlines.processors.base_logits_processor import OutlinesLogitsProcessor

from ..tools.ceiling import case_ceiling
from ..tools.corpus import Case
from ..errors import InputError
from ..language.syntax import split_lines
from ..decoding.drafting import ForwardCost
from ..decoding.generator import CaDGenerator
from ..language.grammar import load_grammar, specialize
from ..language.oracle import oracle_program
from ..language.program import parse, render
from ..language.resolver import resolve
from . import _common
from ._loop import clocked_generator, cpu_run, regen_baseline
from .bounds import KernelCurve, compute_bounds, kernel_from_dict
from .kernel import KernelConfig, measure_kernel
from .pld import PLDSetting, plain_prompt_ids, run_pld

__all__ = ["E2EConfig", "ForcingProcessor", "build_model", "format_e2e", "kernel_config", "plot_e2e",
           "report_from_checkpoint", "run_e2e", "select_cases"]

RUNS = ("regen", "outlines", "cad", "cad_uncosted", "cad_nodraft", "cad_nosplice", "cad_plain")
#: The runs ``E2EConfig.skip`` may leave out.
OPTIONAL_RUNS = ("outlines", "cad_uncosted", "cad_nodraft", "cad_nosplice", "cad_plain")


@dataclass(frozen=True)
class E2EConfig:
    """What ``bench e2e`` runs."""

    preset: str
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = 0
    threads: Optional[int] = None
    limit: Optional[int] = None
    order: str = "file"
    instruction: str = "Apply the edit."
    kernel_trials: int = 1
    kernel_max_n: int = 256
    kernel_prefix: Optional[int] = None  # None: the mean prompt length of the cases
    #: PLD settings "k:n": transformers' default, and the best of k in {10, 20, 64} x
    #: n in {2, 3} on held-out cases of all three corpora (docs/benchmarks.md).
    pld: tuple[str, ...] = ("10:2", "20:3")
    skip: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "pld", tuple(self.pld))
        object.__setattr__(self, "skip", tuple(self.skip))
        for setting in self.pld:
            PLDSetting.parse(setting)
        unknown = [name for name in self.skip if name not in OPTIONAL_RUNS]
        if unknown:
            raise InputError(f"skip: {', '.join(unknown)} cannot be skipped; the optional runs are "
                             f"{', '.join(OPTIONAL_RUNS)}")
        if self.order not in ("file", "size"):
            raise InputError(f"order must be 'file' or 'size', got {self.order!r}")
        if self.limit is not None and self.limit < 1:
            raise InputError(f"limit must be >= 1, got {self.limit}")


def select_cases(cases: Sequence[Case], order: str = "file", limit: Optional[int] = None) -> list[Case]:
    """``order="file"``: file order; ``"size"``: smallest ``len(doc) + len(gold)`` first
    (ties by id); then the first ``limit``."""
    chosen = list(cases)
    if order == "size":
        chosen.sort(key=lambda c: (len(c.doc) + len(c.gold), c.id))
    elif order != "file":
        raise InputError(f"order must be 'file' or 'size', got {order!r}")
    return chosen[:limit] if limit is not None else chosen


# --- baseline (b): Outlines' own generator, forced to the oracle program -------------------


class ForcingProcessor(OutlinesLogitsProcessor):
    """Wrap Outlines' processor: let it mask, then keep only the forced program's next token.

    Built as an ``OutlinesLogitsProcessor`` (so ``Generator.__call__`` resets it and
    transformers calls it) around the stock processor of ``outlines.Generator``. The
    program's tokens are ``adapter.encode`` of its remaining text; where Outlines' mask
    does not allow the planned token (llguidance prefers canonical tokenizations in
    forced stretches), the longest allowed token spelling a prefix of the remaining bytes
    is taken and the rest re-tokenized. ``stop`` is a stopping criterion that ends
    generation right after the program's last token (no forward after it, as in CaD).
    """

    def __init__(self, inner: Any, adapter: Any, text: str):
        super().__init__("torch")
        self.inner, self.adapter, self.text = inner, adapter, text
        self.reset()

    def reset(self) -> None:
        self.inner.reset()
        self.rest = self.text.encode("utf-8")
        self.queue = list(self.adapter.encode(self.text))
        self.chosen: list[int] = []
        self.first_call: Optional[float] = None
        self.first_cpu: Optional[float] = None
        self.calls = 0
        self.fallbacks = 0

    def process_logits(self, input_ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        if self.first_call is None:
            self.first_call, self.first_cpu = time.perf_counter(), time.process_time()
        self.calls += 1
        logits = self.inner.process_logits(input_ids, logits)
        if not self.rest:
            raise RuntimeError("Outlines asked for a token after the forced program ended")
        tid = self.queue[0] if self.queue else None
        if tid is None or not bool(torch.isfinite(logits[0, tid])):
            tid = self._fallback(torch.isfinite(logits[0]))
        piece = self.adapter.token_bytes(tid)
        self.rest = self.rest[len(piece):]
        if self.queue and self.queue[0] == tid:
            self.queue.pop(0)
        else:
            self.queue = list(self.adapter.encode(self.rest.decode("utf-8"))) if self.rest else []
        self.chosen.append(tid)
        out = torch.full_like(logits, float("-inf"))
        out[:, tid] = 0.0
        return out

    def _fallback(self, allowed: torch.Tensor) -> int:
        self.fallbacks += 1
        best, best_len = None, 0
        for tid in torch.nonzero(allowed).flatten().tolist():
            piece = self.adapter.token_bytes(tid) if tid < len(self.adapter.tokenizer) else b""
            if piece and len(piece) > best_len and self.rest.startswith(piece):
                best, best_len = tid, len(piece)
        if best is None:
            raise RuntimeError(f"Outlines' mask allows no token spelling the program's next "
                               f"bytes {self.rest[:30]!r}")
        return best

    def stop(self) -> Any:
        from transformers import StoppingCriteria

        outer = self

        class _ProgramDone(StoppingCriteria):
            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
                done = not outer.rest
                return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)

        return _ProgramDone()


def run_outlines(model: Any, document: str, instruction: str, program_text: str,
                 adapter: Any) -> dict[str, Any]:
    """Baseline (b): ``outlines.Generator(model, CFG(grammar))`` forced to ``program_text``."""
    import outlines
    from transformers import StoppingCriteriaList

    grammar = specialize(load_grammar("lines"), len(split_lines(document)), "lines")
    clock = time.perf_counter()
    generator = outlines.Generator(model, outlines.types.CFG(grammar))
    setup = time.perf_counter() - clock
    forcing = ForcingProcessor(generator.logits_processor, adapter, program_text)
    generator.logits_processor = forcing
    budget = len(adapter.encode(program_text)) + 64
    prompt = adapter.user_content(document, instruction, "lines")  # Outlines applies the chat template
    cpu, clock = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        generator(prompt, max_new_tokens=budget, do_sample=False,
                  stopping_criteria=StoppingCriteriaList([forcing.stop()]))
    end, cpu_end = time.perf_counter(), time.process_time()
    text = adapter.decode(forcing.chosen)
    return {"setup_seconds": setup, "total_seconds": end - clock,
            "gen_seconds": end - (forcing.first_call or end),
            "prefill_seconds": (forcing.first_call or end) - clock,
            "cpu_total_seconds": cpu_end - cpu, "cpu_gen_seconds": cpu_end - (forcing.first_cpu or cpu_end),
            "tokens": len(forcing.chosen), "forward_passes": forcing.calls,
            "fallbacks": forcing.fallbacks, "program_ok": text == program_text}


# --- one case ----------------------------------------------------------------------------


def _cad_run(model: Any, case: Case, instruction: str, ops: list, budget: int,
             **options: Any) -> dict[str, Any]:
    gen, clock = clocked_generator(model, case.doc, max_new_tokens=budget, **options)
    result, cpu = cpu_run(clock, lambda: gen.run(instruction, force_program=ops))
    stats = {**asdict(result.stats), **cpu}
    stats["gen_seconds"] = result.stats.total_seconds - result.stats.prefill_seconds
    stats["exact"] = result.document == case.gold
    return stats


class InexactRunError(RuntimeError):
    """A run that did not reproduce the gold (its timing would not be comparable)."""


def run_case(model: Any, case: Case, instruction: str, curve: KernelCurve, costs: Any,
             pld: Sequence[str] = (), skip: Sequence[str] = (),
             forward_cost: ForwardCost | None = None) -> dict[str, Any]:
    """The runs of one case (all of :data:`RUNS` but ``skip``, then one per ``pld``
    setting), its ceiling figures and bounds. ``forward_cost`` is the ``cad`` run's.

    Raises
    ------
    InexactRunError
        If any run did not reproduce the gold (or, for Outlines, the program): a run
        that stopped early or went astray did less work, so its time is not comparable.
    """
    ops = oracle_program(case.doc, case.gold)
    program_text = render(ops)
    if resolve(parse(program_text), case.doc) != case.gold:
        raise ValueError(f"case {case.id!r}: the oracle program does not rebuild the gold")
    adapter = CaDGenerator(model, case.doc).adapter
    ceiling = case_ceiling(case, adapter, "lines")
    T, spans = ceiling.T, list(ceiling.spans)
    bounds = compute_bounds(T, T - sum(spans), spans, curve, costs)
    prompt_ids = adapter.prompt_ids(case.doc, instruction, "lines")
    # Token budgets with room to spare: a run cut short by max_new_tokens is not a run.
    regen, regen_clock = clocked_generator(model, case.doc, max_new_tokens=T + 64)
    budget = len(adapter.encode(program_text)) + 64
    runs: dict[str, Any] = {"regen": regen_baseline(regen, regen_clock, instruction, case.gold)}
    if "outlines" not in skip:
        runs["outlines"] = run_outlines(model, case.doc, instruction, program_text, adapter)
    runs["cad"] = _cad_run(model, case, instruction, ops, budget, forward_cost=forward_cost)
    ablations = {"cad_uncosted": {}, "cad_nodraft": {"draft_tags": False}, "cad_nosplice": {"splice": False},
                 "cad_plain": {"splice": False, "fast_forward": False, "draft_tags": False}}
    for name, options in ablations.items():
        if name not in skip:
            runs[name] = _cad_run(model, case, instruction, ops, budget, **options)
    plain_ids = plain_prompt_ids(model.hf_tokenizer, case.doc, instruction)
    gold_ids = adapter.encode(case.gold)
    for text in pld:
        setting = PLDSetting.parse(text)
        runs[setting.name] = run_pld(model.model, plain_ids, gold_ids, setting, adapter.eos_token_id,
                                     max_new_tokens=T + 64)
    inexact = [name for name, run in runs.items() if not run.get("exact", run.get("program_ok"))]
    if inexact:
        raise InexactRunError(f"case {case.id!r}: run(s) {', '.join(inexact)} did not reproduce "
                              "the gold")
    realized = runs["regen"]["gen_seconds"] / runs["cad"]["gen_seconds"]
    return {"id": case.id, "lines": len(split_lines(case.doc)), "prompt_tokens": len(prompt_ids),
            "plain_prompt_tokens": len(plain_ids),
            "T": T, "T_gen": bounds.T_gen, "spans": spans, "bounds": bounds.as_dict(),
            "runs": runs, "realized": realized, "ratio": realized / bounds.bnd_exact}


# --- the benchmark ------------------------------------------------------------------------


def kernel_config(model: Any, cases: Sequence[Case], cfg: E2EConfig) -> KernelConfig:
    """The in-run kernel's settings: prefix = the cases' mean prompt length unless set."""
    probe = CaDGenerator(model, cases[0].doc)
    prompt_lengths = [len(probe.adapter.prompt_ids(c.doc, cfg.instruction, "lines")) for c in cases]
    prefix = cfg.kernel_prefix or max(1, round(statistics.mean(prompt_lengths)))
    return KernelConfig(cfg.preset, device=cfg.device, dtype=cfg.dtype, prefix=prefix,
                        trials=cfg.kernel_trials, max_n=cfg.kernel_max_n, seed=cfg.seed)


def build_model(cfg: E2EConfig) -> Any:
    """The preset's random-weight model, wrapped by ``outlines.from_transformers``."""
    import outlines

    from ..tools import models

    hf_model, tokenizer = models.build(cfg.preset, seed=cfg.seed, dtype=cfg.dtype, device=cfg.device)
    return outlines.from_transformers(hf_model, tokenizer)


def run_e2e(cases: Sequence[Case], cfg: E2EConfig, progress: bool = True,
            model: Any = None, kernel_record: Optional[dict[str, Any]] = None,
            checkpoint: Optional[str | os.PathLike] = None) -> dict[str, Any]:
    """Run the benchmark on ``cases`` (already loaded) and pool the results.

    ``model``: an Outlines transformers model to use instead of building ``cfg.preset``.
    ``kernel_record``: a kernel measured with the same model in the same process (by
    ``bench all``) instead of measuring one here. ``checkpoint``: a JSON-lines file that
    gets each case's record (or failure) as soon as it is done, so that a long run cut
    short still leaves its finished cases (the file is started afresh).
    """
    chosen = select_cases(cases, cfg.order, cfg.limit)
    if not chosen:
        raise InputError("no cases to run (empty corpus, or --limit selects none)")
    with _common.torch_threads(cfg.threads):
        if model is None:
            model = build_model(cfg)
        torch.manual_seed(cfg.seed)
        started = time.perf_counter()
        if kernel_record is None:
            kernel_record = measure_kernel(model, kernel_config(model, chosen, cfg), progress=progress)
        kernel = kernel_from_dict(kernel_record)
        curve = kernel.curve("keep1")
        cpu_curve, cpu_tau = _cpu_kernel(kernel_record)
        forward_cost = ForwardCost.from_kernel(kernel_record)
        # Warm-up: every path once on a 4-line edit (first-call costs of transformers'
        # generate, Outlines' processor and our loop are not the cases' to pay).
        run_case(model, Case("warm-up", "a = 1\nb = 2\nc = 3\n", "a = 1\nb = 5\nc = 3\n"),
                 cfg.instruction, curve, kernel.costs, cfg.pld, cfg.skip, forward_cost)
        results, failures = [], []
        if checkpoint is not None:
            Path(checkpoint).write_text("")
        bar = _common.progress(chosen, desc=f"e2e {cfg.preset}", unit="case", disable=not progress)
        for case in bar:
            try:
                record = run_case(model, case, cfg.instruction, curve, kernel.costs, cfg.pld, cfg.skip,
                                  forward_cost)
                results.append(record)
            except Exception as err:  # a case that fails is reported, not hidden
                record = {"id": case.id, "error": f"{type(err).__name__}: {err}"}
                failures.append(record)
            if checkpoint is not None:
                with open(checkpoint, "a", encoding="utf-8") as out:
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
        wall = time.perf_counter() - started
        env = _common.environment(threads=cfg.threads)  # inside: torch_threads is the run's
    return {"config": asdict(cfg), "kernel": kernel_record, "cases": results, "failures": failures,
            "pooled": pool(results, curve, kernel.costs, cpu_curve, cpu_tau) if results else None,
            "wall_seconds": wall,
            "env": env}


def report_from_checkpoint(checkpoint: str | os.PathLike, kernel_record: dict[str, Any],
                           config: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The report of a run cut short: its checkpoint's cases pooled with its kernel.

    ``checkpoint`` is the JSON-lines file :func:`run_e2e` wrote (``e2e.partial.jsonl``
    in a ``bench all`` folder); ``kernel_record`` the kernel of the same run. The report
    has the shape :func:`run_e2e` returns, with ``partial: True``, ``wall_seconds: None``
    and the environment of the pooling (the run's own is in its ``suite.json``).

    Raises
    ------
    InputError
        If the file holds a line that is not JSON.
    """
    results, failures = [], []
    for number, line in enumerate(Path(checkpoint).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{checkpoint}:{number}: not a JSON line ({err.msg})") from None
        (failures if "error" in record else results).append(record)
    kernel = kernel_from_dict(kernel_record)
    curve = kernel.curve("keep1")
    cpu_curve, cpu_tau = _cpu_kernel(kernel_record)
    return {"config": config or {}, "kernel": kernel_record, "cases": results, "failures": failures,
            "pooled": pool(results, curve, kernel.costs, cpu_curve, cpu_tau) if results else None,
            "wall_seconds": None, "partial": True, "env": _common.environment()}


def _cpu_kernel(kernel_record: dict[str, Any]) -> tuple[Optional[KernelCurve], Optional[float]]:
    """The kernel's ``keep1`` curve and one-token step in process CPU time, if it has them."""
    if "s_keep1_cpu" not in kernel_record:
        return None, None
    curve = KernelCurve(tuple(kernel_record["n"]), tuple(kernel_record["s_keep1_cpu"]))
    return curve, kernel_record["t_ar_cpu"][0] if "t_ar_cpu" in kernel_record else None


def pool(results: list[dict[str, Any]], curve: KernelCurve, costs: Any,
         cpu_curve: Optional[KernelCurve] = None, cpu_tau: Optional[float] = None) -> dict[str, Any]:
    """Pooled speed-ups, the gap breakdown and the loop-overhead comparison.

    With ``cpu_curve`` (the kernel in process CPU time), ``cpu`` holds the same
    speed-ups from CPU seconds and the ratio to ``bnd_exact`` of that curve; with
    ``cpu_tau`` (the kernel's one-token step in CPU time) also regeneration's CPU seconds
    per token and their drift from it. The runs are those of the first case (every case
    has the same).
    """
    names = list(results[0]["runs"])
    pld = [name for name in names if name.startswith("pld_")]

    def sums(name: str, keys: Sequence[str]) -> dict[str, float]:
        return {k: sum(r["runs"][name][k] for r in results) for k in keys}

    total = {name: sums(name, ("gen_seconds", "total_seconds", "prefill_seconds", "forward_passes"))
             for name in names}
    T = sum(r["T"] for r in results)
    T_gen = sum(r["T_gen"] for r in results)
    spans = [n for r in results for n in r["spans"]]
    bounds = compute_bounds(T, T_gen, spans, curve, costs)
    regen = total["regen"]

    def speedup(name: str, key: str = "gen_seconds") -> float:
        return regen[key] / total[name][key]

    # Prompt-included: against regeneration with the plain prompt, whose prefill the
    # first PLD run measured (without PLD, against regeneration with the CaD prompt).
    plain_prefill = total[pld[0]]["prefill_seconds"] if pld else regen["prefill_seconds"]
    regen_plain_total = regen["gen_seconds"] + plain_prefill
    realized = speedup("cad")
    cad = sums("cad", ("decoded_tokens", "forced_tokens", "copied_tokens", "splices", "forward_passes",
                       "draft_tokens", "draft_accepted", "forwards_saved", "constraint_seconds",
                       "draft_seconds", "forward_seconds", "splice_seconds", "gen_seconds"))
    tau = costs.tau
    ideal_splice = tau * sum(n / curve(n) for n in spans)
    gap = {
        "measured_gen_seconds": cad["gen_seconds"],
        "bound_gen_seconds": tau * T_gen + ideal_splice,
        "bound_gen_token_seconds": tau * T_gen,
        "bound_splice_seconds": ideal_splice,
        "decode_forward_seconds": cad["forward_seconds"],
        "splice_seconds": cad["splice_seconds"],
        "constraint_seconds": cad["constraint_seconds"],
        "draft_seconds": cad["draft_seconds"],
        "other_seconds": cad["gen_seconds"] - cad["forward_seconds"] - cad["splice_seconds"]
        - cad["constraint_seconds"] - cad["draft_seconds"],
        "decoded_tokens": cad["decoded_tokens"],
        "gold_gen_tokens": T_gen,
        "extra_decode_steps": cad["decoded_tokens"] - T_gen,
        "extra_decode_steps_est_seconds": tau * (cad["decoded_tokens"] - T_gen),
        "forced_tokens": cad["forced_tokens"],
        "splices": cad["splices"],
        "copied_tokens": cad["copied_tokens"],
        "forward_passes": cad["forward_passes"],
        "draft_tokens": cad["draft_tokens"],
        "draft_accepted": cad["draft_accepted"],
        "forwards_saved": cad["forwards_saved"],
    }
    if "cad_nodraft" in names:
        nodraft = sums("cad_nodraft", ("forward_passes", "gen_seconds"))
        gap["nodraft_forward_passes"] = nodraft["forward_passes"]
        gap["nodraft_gen_seconds"] = nodraft["gen_seconds"]
    regen_tokens = sum(r["runs"]["regen"]["tokens"] for r in results)
    overhead: dict[str, Any] = {
        "tau_kernel": tau,
        "c_mask_plus_c_sync": costs.c_mask + costs.c_sync,
        "c_mask_plus_c_sync_over_tau": costs.loop_overhead_fraction,
        "regen_seconds_per_token": regen["gen_seconds"] / regen_tokens,
    }
    overhead["regen_drift"] = overhead["regen_seconds_per_token"] / tau - 1
    if "cad_plain" in names:
        plain = sums("cad_plain", ("decoded_tokens", "constraint_seconds", "forward_seconds", "gen_seconds",
                                   "total_seconds"))
        overhead["cad_plain_seconds_per_token"] = plain["gen_seconds"] / plain["decoded_tokens"]
        overhead["cad_plain_constraint_seconds_per_token"] = plain["constraint_seconds"] / plain["decoded_tokens"]
        overhead["cad_plain_tokens"] = plain["decoded_tokens"]
        overhead["cad_plain_extra_per_token"] = (overhead["cad_plain_seconds_per_token"]
                                                 - overhead["regen_seconds_per_token"])
    if "outlines" in names:
        outl = sums("outlines", ("tokens", "gen_seconds", "total_seconds"))
        overhead["outlines_seconds_per_token"] = outl["gen_seconds"] / outl["tokens"]
        overhead["outlines_tokens"] = outl["tokens"]
        if "cad_plain" in names:
            overhead["outlines_over_cad_plain_gen"] = outl["gen_seconds"] / plain["gen_seconds"]
            overhead["outlines_over_cad_plain_total"] = outl["total_seconds"] / plain["total_seconds"]
    prompt = {
        "cad_prompt_tokens": sum(r["prompt_tokens"] for r in results),
        "plain_prompt_tokens": sum(r.get("plain_prompt_tokens", r["prompt_tokens"]) for r in results),
        "cad_prefill_seconds": regen["prefill_seconds"],  # regen reads the CaD prompt, with no draft
        "plain_prefill_seconds": plain_prefill,
    }
    prompt["tokens_ratio"] = prompt["cad_prompt_tokens"] / prompt["plain_prompt_tokens"]
    prompt["prefill_ratio"] = prompt["cad_prefill_seconds"] / prompt["plain_prefill_seconds"]
    pld_stats = {name: {**sums(name, ("forward_passes", "draft_tokens", "draft_accepted", "tokens")),
                        "k": results[0]["runs"][name]["k"], "n": results[0]["runs"][name]["n"]}
                 for name in pld}
    ratios = [r["ratio"] for r in results]
    cpu = None
    if cpu_curve is not None:
        cpu_total = {name: sum(r["runs"][name]["cpu_gen_seconds"] for r in results) for name in names}
        cpu_bound = compute_bounds(T, T_gen, spans, cpu_curve).bnd_exact
        cpu_realized = cpu_total["regen"] / cpu_total["cad"]
        cpu_all = {name: sum(r["runs"][name]["cpu_total_seconds"] for r in results) for name in names}
        cpu_plain_prefill = (cpu_all[pld[0]] - cpu_total[pld[0]]) if pld else cpu_all["regen"] - cpu_total["regen"]
        cpu = {"gen_seconds": cpu_total, "total_seconds": cpu_all, "bnd_exact": cpu_bound,
               "realized": cpu_realized, "ratio": cpu_realized / cpu_bound,
               "speedup": {name: cpu_total["regen"] / cpu_total[name] for name in names},
               "speedup_prompt_included": {name: (cpu_total["regen"] + cpu_plain_prefill) / cpu_all[name]
                                           for name in names if name != "regen"}}
        if cpu_tau:
            cpu["tau_kernel"] = cpu_tau
            cpu["regen_seconds_per_token"] = cpu_total["regen"] / regen_tokens
            cpu["regen_drift"] = cpu["regen_seconds_per_token"] / cpu_tau - 1
        if "outlines" in names and "cad_plain" in names:
            cpu["outlines_over_cad_plain_gen"] = cpu_total["outlines"] / cpu_total["cad_plain"]
    return {
        "n": len(results),
        "runs": names,
        "T": T, "T_gen": T_gen, "K": len(spans),
        "bounds": bounds.as_dict(),
        "realized": realized,
        "ratio": realized / bounds.bnd_exact,
        "ratio_case_median": statistics.median(ratios),
        "speedup": {name: speedup(name) for name in names},
        "speedup_prompt_included": {name: regen_plain_total / total[name]["total_seconds"] for name in names
                                    if name != "regen"},
        "speedup_with_prefill": {name: speedup(name, "total_seconds") for name in names},
        "forward_passes": {name: total[name]["forward_passes"] for name in names},
        "seconds": total,
        "prompt": prompt,
        "pld": pld_stats,
        "gap": gap,
        "overhead": overhead,
        "exact": {name: sum(bool(r["runs"][name].get("exact", r["runs"][name].get("program_ok", True)))
                            for r in results) for name in names},
        "cpu": cpu,
    }


# --- reporting ----------------------------------------------------------------------------


_LABELS = {
    "regen": "regeneration (a), CaD prompt",
    "outlines": "Outlines Generator + CFG, forced (b)",
    "cad": "**CaD** (drafts cut by the run's kernel curve)",
    "cad_uncosted": "CaD, drafts whole (library default)",
    "cad_nodraft": "CaD draft_tags=False",
    "cad_nosplice": "CaD splice=False (c)",
    "cad_plain": "CaD splice=False, fast_forward=False",
}


def _label(name: str, pld: dict[str, Any]) -> str:
    if name in pld:
        s = pld[name]
        return f"PLD k={s['k']}, n={s['n']} (transformers' prompt lookup)"
    return _LABELS.get(name, name)


#: How far regeneration's time per token may stray from the kernel's tau before the report
#: says the comparison with the bound is unsound (pooled 2026-12-01 runs: python and C 8-12 %
#: under tau in both clocks; a prose run whose machine slowed during it 25 % over in CPU
#: time, 33 % in wall-clock time).
DRIFT_LIMIT = 0.15


def drift_note(measures: dict[str, Any], clock: str = "wall-clock", limit: float = DRIFT_LIMIT) -> Optional[str]:
    """A warning when regeneration's seconds per token differ from the kernel's tau by more
    than ``limit`` (a fraction), else ``None``.

    ``measures`` is the pooled ``overhead`` (wall clock) or ``cpu`` (process CPU time)
    record: ``tau_kernel``, ``regen_seconds_per_token`` and ``regen_drift``. ``bnd_exact``
    comes from the kernel curve measured at the start of the run, after a prefix of the
    cases' mean prompt; when the machine gets slower or faster later (other jobs), or the
    decode contexts are much longer than that prefix, realized / bnd_exact in that clock
    compares unlike times, and the report says so rather than let it pass.
    """
    drift = measures.get("regen_drift")
    if drift is None or abs(drift) <= limit:
        return None
    return (f"**note ({clock}):** regeneration took {measures['regen_seconds_per_token'] * 1e3:.1f} ms per "
            f"token, {drift:+.0%} off the kernel's tau ({measures['tau_kernel'] * 1e3:.1f} ms): the machine's "
            "speed changed during the run (other load) or the decode contexts are far from the kernel's "
            f"prefix; either way the {clock} realized / bnd_exact compares unlike times, so rerun (on a "
            "quieter machine, or with --kernel-prefix near the cases' contexts) before quoting it.")


def format_e2e(report: dict[str, Any], name: str = "") -> str:
    """Markdown tables: per case, pooled (generation-only and prompt-included), gap
    breakdown, prompt cost, loop overhead."""
    names = list(report["cases"][0]["runs"]) if report["cases"] else []
    short = {"regen": "regen", "outlines": "outlines", "cad": "cad", "cad_uncosted": "uncosted", "cad_nodraft": "no-draft",
             "cad_nosplice": "no-splice", "cad_plain": "plain"}
    heads = [short.get(n, n.replace("pld_", "PLD ")) + " s" for n in names]
    lines = ["generation phase seconds per case (prefill excluded)", "",
             "| case | T | T_gen | K | " + " | ".join(heads) + " | realized | bnd_exact | ratio |",
             "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in heads) + " | ---: | ---: | ---: |"]
    for r in report["cases"]:
        g = " | ".join(f"{r['runs'][k]['gen_seconds']:.1f}" for k in names)
        lines.append(f"| {r['id']} | {r['T']} | {r['T_gen']} | {len(r['spans'])} | {g} "
                     f"| {r['realized']:.2f} | {r['bounds']['bnd_exact']:.2f} | {r['ratio']:.2f} |")
    for f in report["failures"]:
        lines.append(f"| {f['id']} | failed: {f['error']} |")
    p = report["pooled"]
    if p is None:
        return "\n".join(lines)
    b = p["bounds"]
    sp, spi, fw = p["speedup"], p["speedup_prompt_included"], p["forward_passes"]
    pr = p["prompt"]
    lines += ["", f"pooled over {p['n']} case(s) {name}: T = {p['T']}, T_gen = {p['T_gen']}, K = {p['K']}",
              "", "| speed-up over regeneration | generation only | prompt included | forwards "
              "(prefill incl.) |", "| --- | ---: | ---: | ---: |"]
    for run in names:
        if run == "regen":
            lines.append(f"| regeneration (a) | 1.00 | 1.00 (plain prompt) | {fw['regen']} |")
            continue
        lines.append(f"| {_label(run, p['pld'])} | {sp[run]:.2f} | {spi[run]:.2f} | {fw[run]} |")
    lines += ["", "| CaD against its bound (generation phase) | value |", "| --- | ---: |",
              f"| **CaD realized** | **{p['realized']:.2f}** |",
              f"| bnd_exact | {b['bnd_exact']:.2f} |",
              f"| **realized / bnd_exact** | **{p['ratio']:.2f}** (case median {p['ratio_case_median']:.2f}) |",
              f"| bnd_m8 / bnd_mean / bnd_fixed / bnd_policy (m* = {b['m_star']}) | {b['bnd_m8']:.2f} / "
              f"{b['bnd_mean']:.2f} / {b['bnd_fixed']:.2f} / {b['bnd_policy']:.2f} |"]
    if "cad_nodraft" in sp:
        lines.append(f"| CaD draft_tags=False / bnd_exact | {sp['cad_nodraft'] / b['bnd_exact']:.2f} |")
    lines += ["", "| prompt (summed over cases) | CaD prompt | plain prompt (PLD, prompt-included regen) "
              "| CaD / plain |", "| --- | ---: | ---: | ---: |",
              f"| tokens | {pr['cad_prompt_tokens']} | {pr['plain_prompt_tokens']} | {pr['tokens_ratio']:.2f} |",
              f"| prefill seconds | {pr['cad_prefill_seconds']:.2f} | {pr['plain_prefill_seconds']:.2f} "
              f"| {pr['prefill_ratio']:.2f} |"]
    if p["pld"]:
        lines += ["", "| PLD | verify forwards | drafted | accepted | tokens per forward |",
                  "| --- | ---: | ---: | ---: | ---: |"]
        for run, s in p["pld"].items():
            verify = s["forward_passes"] - p["n"]
            lines.append(f"| k={s['k']}, n={s['n']} | {verify} | {s['draft_tokens']} | {s['draft_accepted']} "
                         f"| {s['tokens'] / max(1, verify):.2f} |")
    if p.get("cpu"):
        c = p["cpu"]
        lines += ["", "| same, in process CPU time (robust to other processes' load) | generation only "
                  "| prompt included |", "| --- | ---: | ---: |"]
        for run in names:
            if run != "regen":
                lines.append(f"| {_label(run, p['pld'])} | {c['speedup'][run]:.2f} "
                             f"| {c['speedup_prompt_included'][run]:.2f} |")
        lines += [f"| bnd_exact (CPU-time kernel curve) | {c['bnd_exact']:.2f} | |",
                  f"| **CaD realized / bnd_exact** | **{c['ratio']:.2f}** | |"]
        if "outlines_over_cad_plain_gen" in c:
            lines.append(f"| Outlines (b) / CaD plain | {c['outlines_over_cad_plain_gen']:.3f} |")
        note = drift_note(c, "process CPU time")
        if note:
            lines += ["", note]
    g = p["gap"]
    tau = p["overhead"]["tau_kernel"]
    # Forwards that carried no splice (the prompt's is not in the generation phase); the
    # identity: measured - bound = (these - T_gen) tau + widening + splice excess
    # + constraint + other.
    plain_fwd = g["forward_passes"] - 1 - g["splices"]
    widening = g["decode_forward_seconds"] - plain_fwd * tau
    lines += ["", "| where CaD's generation time goes (vs the bound) | seconds |", "| --- | ---: |",
              f"| measured generation phase | {g['measured_gen_seconds']:.2f} |",
              f"| bound: tau x (T_gen + sum N/s(N)) | {g['bound_gen_seconds']:.2f} |",
              f"| **gap** | **{g['measured_gen_seconds'] - g['bound_gen_seconds']:.2f}** |",
              f"| decode forwards beyond T_gen ({plain_fwd} - {g['gold_gen_tokens']} = "
              f"{plain_fwd - g['gold_gen_tokens']}: copy tags, gen/program markers), at tau "
              f"| {(plain_fwd - g['gold_gen_tokens']) * tau:.2f} |",
              f"| forced runs and drafts widening those forwards ({g['forced_tokens']} forced tokens, "
              f"{g.get('draft_tokens', 0)} drafted; also any drift of the real step time from tau) "
              f"| {widening:.2f} |",
              f"| splice forwards over the bound ({g['splices']} splices, {g['copied_tokens']} tokens: "
              f"{g['splice_seconds']:.2f} vs {g['bound_splice_seconds']:.2f}) "
              f"| {g['splice_seconds'] - g['bound_splice_seconds']:.2f} |",
              f"| constraint (mask, advance, forced runs) | {g['constraint_seconds']:.2f} |",
              f"| drafting (predict, encode, validate) | {g.get('draft_seconds', 0.0):.2f} |",
              f"| other (loop, prompt ids, matcher set-up) | {g['other_seconds']:.2f} |"]
    drafting = (f"drafting: {g['draft_accepted']} of {g['draft_tokens']} drafted tokens kept, "
                f"{g['forwards_saved']} decode steps without a forward; {g['forward_passes']} forward passes")
    if "nodraft_forward_passes" in g:
        drafting += (f" with drafts vs {g['nodraft_forward_passes']} without (generation phase "
                     f"{g['measured_gen_seconds']:.2f} s vs {g['nodraft_gen_seconds']:.2f} s)")
    lines += ["", drafting]
    o = p["overhead"]
    lines += ["", "| loop overhead | value |", "| --- | ---: |",
              f"| tau (kernel) | {o['tau_kernel'] * 1e3:.2f} ms |",
              f"| c_mask + c_sync (kernel) | {o['c_mask_plus_c_sync'] * 1e3:.3f} ms "
              f"({o['c_mask_plus_c_sync_over_tau']:.2%} of tau) |",
              f"| regen: seconds per token (forward + sync) | {o['regen_seconds_per_token'] * 1e3:.2f} ms |"]
    if "cad_plain_seconds_per_token" in o:
        lines += [f"| CaD plain: seconds per decoded token | {o['cad_plain_seconds_per_token'] * 1e3:.2f} ms |",
                  f"| CaD plain: constraint per decoded token | "
                  f"{o['cad_plain_constraint_seconds_per_token'] * 1e3:.3f} ms |"]
    if "outlines_seconds_per_token" in o:
        lines.append(f"| Outlines (b): seconds per token | {o['outlines_seconds_per_token'] * 1e3:.2f} ms |")
    if "outlines_over_cad_plain_gen" in o:
        lines += [f"| Outlines (b) / CaD plain, generation phase | {o['outlines_over_cad_plain_gen']:.3f} |",
                  f"| Outlines (b) / CaD plain, prefill included | {o['outlines_over_cad_plain_total']:.3f} |"]
    note = drift_note(o, "wall-clock")
    if note:
        lines += ["", note]
    ex = p["exact"]
    lines += ["", "exact results (document == gold, or program reproduced for Outlines): "
              + ", ".join(f"{k} {v}/{p['n']}" for k, v in ex.items())]
    return "\n".join(lines)


def plot_e2e(report: dict[str, Any], path: str, title: str = "") -> None:
    """Per-case speed-up against ``bnd_exact`` (with y = x and y = 0.85 x): CaD, and each
    PLD run (generation phase, over the same regeneration)."""
    plt = _common.pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    xs = [r["bounds"]["bnd_exact"] for r in report["cases"]]
    ys = [r["realized"] for r in report["cases"]]
    ax.scatter(xs, ys, s=18, label="CaD, cases")
    pld = [name for name in (report["cases"][0]["runs"] if report["cases"] else ()) if name.startswith("pld_")]
    for marker, name in zip("xv+^", pld):
        speed = [r["runs"]["regen"]["gen_seconds"] / r["runs"][name]["gen_seconds"] for r in report["cases"]]
        ys += speed
        ax.scatter(xs, speed, s=18, marker=marker, label=name.replace("pld_", "PLD "))
    if report["pooled"]:
        p = report["pooled"]
        ax.scatter([p["bounds"]["bnd_exact"]], [p["realized"]], marker="*", s=120, color="tab:red",
                   label=f"CaD pooled (ratio {p['ratio']:.2f})")
    top = max(xs + ys + [1.0]) * 1.1
    ax.plot([0, top], [0, top], color="grey", lw=0.8, label="realized = bound")
    ax.plot([0, top], [0, 0.85 * top], color="grey", lw=0.8, ls="--", label="0.85 x bound")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("bnd_exact (kernel curve of the same run)")
    ax.set_ylabel("speed-up over regeneration (generation phase)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"{report['config']['preset']} e2e (random weights)", fontsize=9)
    fig.tight_layout()
    _common.save_figure(fig, path)
    plt.close(fig)
