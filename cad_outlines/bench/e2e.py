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
    (:class:`.outlines_baseline.ForcingProcessor`) that then keeps only the oracle program's next token.
    No splice, no fast-forward: one forward per program token.
``cad``
    :class:`~cad_outlines.decoding.generator.CaDGenerator` with ``force_program=oracle`` (splice,
    fast-forward and tag drafting on: the defaults), and ``forward_cost`` = the run's own
    kernel curve (:class:`~cad_outlines.decoding.drafting.ForwardCost`), so each draft is
    cut to what pays for its width on this machine.
``cad_uncosted``
    The same with ``forward_cost=None`` (every draft whole, the library default).
``cad_auto``
    The same with the curve ``--forward-cost auto`` measures (widths 1-17, 32, 64, 128
    after a 256-token cache; the kernel record's ``auto_forward_cost``), calibrated online:
    what a user on a CPU gets without running ``bench kernel``.
``cad_fixedcost``
    The same with the kernel curve read as measured (``online=False``): ``cad``'s curve is
    rescaled during each run by the run's own forwards (``DraftBudget.observe``).
``cad_nodraft``
    The same with ``draft_tags=False``: the straightforward mechanism, one forward per
    decoded token.
``cad_notrees``
    ``cad_uncosted`` with ``draft_trees=False``: no digit alternatives in drafts (each
    index digit after a rejected draft then costs a forward). Like every ablation but
    ``cad_fixedcost``, drafts whole: compare it with ``cad_uncosted``.
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

``E2EConfig.skip`` leaves out ablation runs (``cad_uncosted``, ``cad_auto``, ``cad_nodraft``,
``cad_nosplice``, ``cad_plain``, ``outlines``) to shorten a run; ``regen`` and ``cad`` always run.

Every CaD run (and Outlines) uses the prompt of :attr:`E2EConfig.prompt_style`.
**Cold and warm** prompt-included figures: cold charges each run its own whole prefill;
warm charges the prefill of what follows the prompt's constant head, cached once per
process (:class:`._loop.WarmPrefill`, the product's prefix cache; the CaD head of the
style, the plain prompt's for PLD and prompt-included regeneration), timed per case in
process CPU time.

Speed-ups compare the **generation phase** (wall time after the prompt's prefill);
``speedup_prompt_included`` adds each method's own prefill, against regeneration with
the plain prompt (the regen run's generation phase plus the plain prompt's prefill,
measured in the first PLD run): what a user who regenerates pays. The CaD prompt's extra
prefill (format statement, line numbers) is thus charged to CaD and Outlines only.
``speedup_with_prefill`` is the older figure against regeneration with the CaD prompt. ``bnd_exact`` comes from a
kernel curve measured in the same run (``logits_to_keep=1``, as the generator runs).
The weights are a random-weight preset's (speed does not depend on them) or a real
model's; either way the oracle's program is forced, so no figure here says what a model
would choose (``bench quality`` does).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from ..training.ceiling import case_ceiling
from ..training.corpus import Case
from ..decoding.prompts import style_for
from ..errors import InputError
from ..language.syntax import split_lines
from ..decoding.drafting import ForwardCost
from ..decoding.generator import CaDGenerator
from ..language.oracle import oracle_program
from ..language.program import parse, render
from ..language.resolver import resolve
from . import _common
from ._checkpoint import RecordLog
from ._loop import WarmPrefill, clocked_generator, cpu_run, document_prefill, regen_baseline
from .bounds import KernelCurve, compute_bounds, kernel_from_dict
from .kernel import KernelConfig, forward_cost_of, measure_kernel
from .outlines_baseline import ForcingProcessor, run_outlines
from .pld import PLDSetting, plain_prompt_ids, run_pld

__all__ = ["E2EConfig", "ForcingProcessor", "build_model", "kernel_config", "report_from_checkpoint",
           "run_e2e", "select_cases"]

RUNS = ("regen", "outlines", "cad", "cad_uncosted", "cad_auto", "cad_fixedcost", "cad_nodraft", "cad_notrees",
        "cad_nosplice", "cad_plain")
#: The runs ``E2EConfig.skip`` may leave out.
#: The counts behind "forwards by what they followed", summed per CaD run.
FORWARD_KINDS = ("forward_passes", "splice_forwards", "index_forwards", "body_forwards", "operations",
                 "draft_alternatives")
OPTIONAL_RUNS = ("outlines", "cad_uncosted", "cad_auto", "cad_fixedcost", "cad_nodraft", "cad_notrees", "cad_nosplice",
                 "cad_plain")


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
    prompt_style: str = "full"  # the CaD prompt's layout (adapters/_view.py)
    #: Only documents of this many lines, ``(low, high)`` inclusive (``None``: any).
    lines: Optional[tuple[int, int]] = None
    #: Only the files of this split of the training mix (``training.edits.split_of``):
    #: ``"eval"`` (never trained on), ``"train"`` or ``"all"``.
    split: str = "all"

    def __post_init__(self) -> None:
        object.__setattr__(self, "pld", tuple(self.pld))
        object.__setattr__(self, "skip", tuple(self.skip))
        for setting in self.pld:
            PLDSetting.parse(setting)
        unknown = [name for name in self.skip if name not in OPTIONAL_RUNS]
        if unknown:
            raise InputError(f"skip: {', '.join(unknown)} cannot be skipped; the optional runs are "
                             f"{', '.join(OPTIONAL_RUNS)}")
        style_for(self.prompt_style, None, "lines")  # the engines' check and message
        if self.order not in ("file", "size"):
            raise InputError(f"order must be 'file' or 'size', got {self.order!r}")
        if self.limit is not None and self.limit < 1:
            raise InputError(f"limit must be >= 1, got {self.limit}")
        if self.split not in ("all", "train", "eval"):
            raise InputError(f"split must be 'all', 'train' or 'eval', got {self.split!r}")
        if self.lines is not None:
            object.__setattr__(self, "lines", tuple(self.lines))
            if not 0 <= self.lines[0] <= self.lines[1]:
                raise InputError(f"lines must be LOW-HIGH with 0 <= LOW <= HIGH, got {self.lines}")


def document_lines(document: str) -> int:
    """The lines of ``document`` as an editor counts them (a last line without ``\n`` counts)."""
    return document.count("\n") + (not document.endswith("\n") and document != "")


def select_cases(cases: Sequence[Case], order: str = "file", limit: Optional[int] = None,
                 lines: Optional[tuple[int, int]] = None, split: str = "all") -> list[Case]:
    """The cases with ``lines[0]..lines[1]`` document lines and, unless ``split`` is
    ``"all"``, whose file is in that split of the training mix (a case needs ``source``
    and ``path``); in file order (``order="file"``) or smallest ``len(doc) + len(gold)``
    first (``"size"``, ties by id); then the first ``limit``."""
    from ..training.edits import split_of

    chosen = [c for c in cases if lines is None or lines[0] <= document_lines(c.doc) <= lines[1]]
    if split != "all":
        unplaced = [c.id for c in chosen if not {"source", "path"} <= set(c.meta)]
        if unplaced:
            raise InputError(f"case {unplaced[0]!r} has no 'source' and 'path' to place it in a split; "
                             "leave the split at 'all'")
        chosen = [c for c in chosen if split_of(c.meta["source"], c.meta["path"]) == split]
    if order == "size":
        chosen.sort(key=lambda c: (len(c.doc) + len(c.gold), c.id))
    elif order != "file":
        raise InputError(f"order must be 'file' or 'size', got {order!r}")
    return chosen[:limit] if limit is not None else chosen


# --- one case ----------------------------------------------------------------------------


def _cad_run(model: Any, case: Case, instruction: str, ops: list, budget: int,
             **options: Any) -> dict[str, Any]:
    gen, clock = clocked_generator(model, case.doc, max_new_tokens=budget, **options)
    result, cpu = cpu_run(clock, lambda: gen.run(instruction, force_program=ops))
    stats = {**asdict(result.stats), **cpu}
    stats["gen_seconds"] = result.stats.total_seconds - result.stats.prefill_seconds
    stats["exact"] = result.document == case.gold
    stats["operations"] = len(ops)
    return stats


class InexactRunError(RuntimeError):
    """A run that did not reproduce the gold (its timing would not be comparable)."""


#: The instruction of the earlier edit of the same file that the warm-document columns
#: assume (:func:`._loop.document_prefill`): what its prompt shares with a case's is cached.
SIBLING_INSTRUCTION = "Fix the typo."


def run_case(model: Any, case: Case, instruction: str, curve: KernelCurve, costs: Any,
             pld: Sequence[str] = (), skip: Sequence[str] = (),
             forward_cost: ForwardCost | None = None, style: str = "full",
             warm: Optional[dict[str, WarmPrefill]] = None,
             auto_cost: ForwardCost | None = None) -> dict[str, Any]:
    """The runs of one case (all of :data:`RUNS` but ``skip``, then one per ``pld``
    setting), its ceiling figures and bounds. ``forward_cost`` is the ``cad`` run's,
    ``auto_cost`` the ``cad_auto`` run's (none without it);
    ``style`` the CaD prompt's; ``warm`` (``"cad"`` and ``"plain"``) times the warm prefills.

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
    prompt_ids = adapter.prompt_ids(case.doc, instruction, "lines", style=style)
    # Token budgets with room to spare: a run cut short by max_new_tokens is not a run.
    regen, regen_clock = clocked_generator(model, case.doc, max_new_tokens=T + 64, prompt_style=style)
    budget = len(adapter.encode(program_text)) + 64
    runs: dict[str, Any] = {"regen": regen_baseline(regen, regen_clock, instruction, case.gold)}
    if "outlines" not in skip:
        runs["outlines"] = run_outlines(model, case.doc, instruction, program_text, adapter, style)
    runs["cad"] = _cad_run(model, case, instruction, ops, budget, forward_cost=forward_cost, prompt_style=style)
    ablations = {"cad_uncosted": {}, "cad_nodraft": {"draft_tags": False}, "cad_notrees": {"draft_trees": False},
                 "cad_nosplice": {"splice": False},
                 "cad_plain": {"splice": False, "fast_forward": False, "draft_tags": False}}
    if forward_cost is not None:
        ablations = {"cad_fixedcost": {"forward_cost": replace(forward_cost, online=False)}, **ablations}
    if auto_cost is not None:
        ablations = {"cad_auto": {"forward_cost": auto_cost}, **ablations}
    for name, options in ablations.items():
        if name not in skip:
            runs[name] = _cad_run(model, case, instruction, ops, budget, prompt_style=style, **options)
    plain_ids = plain_prompt_ids(model.hf_tokenizer, case.doc, instruction, style)
    prefills = {}
    for key, ids in (("cad", prompt_ids), ("plain", plain_ids)) if warm is not None else ():
        timed = warm[key](ids)
        sibling = (adapter.prompt_ids(case.doc, SIBLING_INSTRUCTION, "lines", style=style) if key == "cad"
                   else plain_prompt_ids(model.hf_tokenizer, case.doc, SIBLING_INSTRUCTION, style))
        cached = document_prefill(model.model, ids, sibling)
        prefills.update({f"{key}_prefill_warm_cpu_seconds": timed["cpu_prefill_warm_seconds"],
                         f"{key}_prompt_tokens_cached": timed["prompt_tokens_cached"],
                         f"{key}_prefill_doc_cpu_seconds": cached["cpu_prefill_doc_seconds"],
                         f"{key}_prompt_tokens_doc_cached": cached["prompt_tokens_doc_cached"]})
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
            "plain_prompt_tokens": len(plain_ids), **prefills,
            "T": T, "T_gen": bounds.T_gen, "spans": spans, "bounds": bounds.as_dict(),
            "runs": runs, "realized": realized, "ratio": realized / bounds.bnd_exact}


# --- the benchmark ------------------------------------------------------------------------


def kernel_config(model: Any, cases: Sequence[Case], cfg: E2EConfig) -> KernelConfig:
    """The in-run kernel's settings: prefix = the cases' mean prompt length unless set."""
    probe = CaDGenerator(model, cases[0].doc)
    prompt_lengths = [len(probe.adapter.prompt_ids(c.doc, cfg.instruction, "lines", style=cfg.prompt_style))
                      for c in cases]
    prefix = cfg.kernel_prefix or max(1, round(statistics.mean(prompt_lengths)))
    return KernelConfig(cfg.preset, device=cfg.device, dtype=cfg.dtype, prefix=prefix,
                        trials=cfg.kernel_trials, max_n=cfg.kernel_max_n, seed=cfg.seed,
                        auto_curve="cad_auto" not in cfg.skip)


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
    ``bench all``) instead of measuring one here. ``checkpoint``: a JSON-lines file
    (:class:`~._checkpoint.RecordLog`) that gets each case's record (or failure) as soon
    as it is done; run again with the same settings, cases and kernel, the cases it holds
    are taken from it (``resumed_cases`` in the report) and only the others are measured.
    """
    chosen = select_cases(cases, cfg.order, cfg.limit, cfg.lines, cfg.split)
    if not chosen:
        raise InputError("no cases to run (empty corpus, or --limit, --lines or --split selects none)")
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
        forward_cost = forward_cost_of(kernel_record)
        auto_cost = (ForwardCost.from_dict(kernel_record["auto_forward_cost"])
                     if "auto_forward_cost" in kernel_record else None)
        if auto_cost is None and "cad_auto" not in cfg.skip and progress:
            # a kernel from before the auto curve, or measured with cad_auto skipped
            print("the kernel record has no --forward-cost auto curve: no cad_auto row", file=sys.stderr)
        adapter = CaDGenerator(model, chosen[0].doc).adapter
        # The constant heads, prefilled once for the whole run (the warm columns).
        warm = {"cad": WarmPrefill(model.model, adapter.constant_ids(style=cfg.prompt_style)),
                "plain": WarmPrefill(model.model, adapter.constant_ids(style=cfg.prompt_style, plain=True))}
        # Warm-up: every path once on a 4-line edit (first-call costs of transformers'
        # generate, Outlines' processor and our loop are not the cases' to pay).
        run_case(model, Case("warm-up", "a = 1\nb = 2\nc = 3\n", "a = 1\nb = 5\nc = 3\n"),
                 cfg.instruction, curve, kernel.costs, cfg.pld, cfg.skip, forward_cost, cfg.prompt_style, warm,
                 auto_cost)
        results, failures, resumed = [], [], 0
        log = None if checkpoint is None else RecordLog(checkpoint, checkpoint_settings(cfg, chosen, kernel_record),
                                                        key=lambda record: record["id"])
        bar = _common.progress(chosen, desc=f"e2e {cfg.preset}", unit="case", disable=not progress)
        for case in bar:
            record = log.get(case.id) if log is not None else None
            if record is not None:
                resumed += 1
            else:
                try:
                    record = run_case(model, case, cfg.instruction, curve, kernel.costs, cfg.pld, cfg.skip,
                                      forward_cost, cfg.prompt_style, warm, auto_cost)
                except Exception as err:  # a case that fails is reported, not hidden
                    record = {"id": case.id, "error": f"{type(err).__name__}: {err}"}
                if log is not None:
                    log.append(record)
            (failures if "error" in record else results).append(record)
        wall = time.perf_counter() - started
        env = _common.environment(threads=cfg.threads)  # inside: torch_threads is the run's
    return {"config": asdict(cfg), "kernel": kernel_record, "cases": results, "failures": failures,
            "pooled": pool(results, curve, kernel.costs, cpu_curve, cpu_tau) if results else None,
            "wall_seconds": wall, "resumed_cases": resumed,
            "env": env}


def checkpoint_settings(cfg: E2EConfig, cases: Sequence[Case], kernel_record: dict[str, Any]) -> dict[str, Any]:
    """What every record of an e2e checkpoint depends on: the settings, the cases in
    order, and the kernel (by digest: the costed drafts and the bounds read it)."""
    kernel = hashlib.sha256(json.dumps(kernel_record, sort_keys=True).encode()).hexdigest()[:16]
    settings = {**asdict(cfg), "cases": [case.id for case in cases], "kernel_sha256": kernel}
    return json.loads(json.dumps(settings))  # as the file gives it back (tuples are lists)


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
        if number == 1 and set(record) == {"settings"}:
            continue  # the checkpoint's head (RecordLog)
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
    # first PLD run measured (without PLD, the regen row's own prefill of it).
    plain_prefill = total[pld[0]]["prefill_seconds"] if pld else regen["prefill_seconds"]
    regen_plain_total = regen["gen_seconds"] + plain_prefill
    realized = speedup("cad")
    cad = sums("cad", ("decoded_tokens", "forced_tokens", "copied_tokens", "splices", "forward_passes",
                       "draft_tokens", "draft_accepted", "forwards_saved", "constraint_seconds",
                       "body_forwards", "index_forwards", "splice_forwards", "operations",
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
        # where the forwards went (the prefill is one a case; "other": after tags and markers)
        "operations": cad["operations"],
        "body_forwards": cad["body_forwards"],
        "index_forwards": cad["index_forwards"],
        "splice_forwards": cad["splice_forwards"],
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
        # CaD's row as it runs (its prefill forward carries the first draft tree); regen
        # reads the plain prompt, so its prefill is not the CaD prompt's
        "cad_prefill_seconds": total["cad"]["prefill_seconds"],
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
        # warm: the constant head of each prompt cached (the plain one for PLD and regen);
        # doc: the document too, as an earlier edit of the same file version leaves it
        for which, tokens in (("warm", "prompt_tokens_cached"), ("doc", "prompt_tokens_doc_cached")):
            if not all(f"cad_prefill_{which}_cpu_seconds" in r for r in results):
                continue
            prefill = {key: sum(r[f"{key}_prefill_{which}_cpu_seconds"] for r in results) for key in ("cad", "plain")}
            cpu[f"prefill_{which}_seconds"] = prefill
            cpu[tokens] = {key: sum(r[f"{key}_{tokens}"] for r in results) for key in ("cad", "plain")}
            cpu[f"speedup_prompt_included_{which}"] = {
                name: (cpu_total["regen"] + prefill["plain"])
                / (cpu_total[name] + prefill["plain" if name in pld else "cad"])
                for name in names if name != "regen"}
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
        # where each CaD run's forwards went (records from before 2026-12-03 lack it)
        "forwards_by_kind": {name: sums(name, FORWARD_KINDS) for name in names
                             if name.startswith("cad") and all(k in results[0]["runs"][name] for k in FORWARD_KINDS)},
        "seconds": total,
        "prompt": prompt,
        "pld": pld_stats,
        "gap": gap,
        "overhead": overhead,
        "exact": {name: sum(bool(r["runs"][name].get("exact", r["runs"][name].get("program_ok", True)))
                            for r in results) for name in names},
        "cpu": cpu,
    }
