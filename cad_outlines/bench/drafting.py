"""Tag drafts on vs off: oracle-forced CaD runs, side by side in one process.

For each preset and each chosen case (the first ``per_corpus`` of every corpus in the
file, corpora named by the id before its last ``-``), the oracle program is forced
through :class:`~cad_outlines.decoding.generator.CaDGenerator` with ``draft_tags=False`` and
``True``, interleaved (off, on, on, off, ...) so that a busy shared machine slows both
alike. Each run's forwards are counted and clocked by an
:class:`~cad_outlines.decoding.runner.ObservedRunner` around the generator's runner; the counts
must match the run's own :class:`~cad_outlines.decoding.generator.CaDStats`, and both settings
must rebuild the gold with the same program (drafts change how many forwards run, never
the tokens chosen).

Under a forced program the forward counts depend on the tokenizer and the drafter, not
on the weights, so the ``tiny-*`` presets give the counts of the full-size models with
the same tokenizer; seconds need a full-size preset (``qwen2.5-0.5b``).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from ..training.corpus import Case
from ..errors import InputError
from . import _common

#: The three tokenizer families, at test size.
TINY_PRESETS = ("tiny-qwen", "tiny-deepseek-coder", "tiny-codellama")
INSTRUCTION = "apply the change"


@dataclass(frozen=True)
class DraftingConfig:
    """What one ``bench drafting`` run measures.

    Attributes
    ----------
    presets
        Random-weight presets to run, each on every chosen case.
    per_corpus
        First cases of each corpus (``None``: all).
    repeats
        Runs of each setting per case (medians are reported).
    seed, dtype, device, threads
        Weights, precision, device and torch intra-op threads.
    """

    presets: tuple[str, ...] = TINY_PRESETS
    per_corpus: int | None = None
    repeats: int = 1
    seed: int = 0
    dtype: str = "float32"
    device: str = "cpu"
    threads: int | None = 1

    def __post_init__(self) -> None:
        if not self.presets:
            raise InputError("bench drafting needs at least one preset")
        if self.repeats < 1:
            raise InputError(f"repeats must be >= 1, got {self.repeats}")
        if self.per_corpus is not None and self.per_corpus < 1:
            raise InputError(f"per_corpus must be >= 1, got {self.per_corpus}")


def corpus_of(case_id: str) -> str:
    """The corpus a case id names (``commits_c-0026`` -> ``commits_c``)."""
    return case_id.rsplit("-", 1)[0]


def select_cases(cases: Sequence[Case], per_corpus: int | None) -> list[Case]:
    """The first ``per_corpus`` cases of each corpus, corpora in order of first appearance."""
    groups: dict[str, list[Case]] = {}
    for case in cases:
        groups.setdefault(corpus_of(case.id), []).append(case)
    return [c for group in groups.values() for c in group[:per_corpus]]


def run_case(model: Any, case: Case, repeats: int) -> dict[str, Any]:
    """Force ``case``'s oracle program with drafts off and on, ``repeats`` times each."""
    from ..decoding.generator import CaDGenerator
    from ..decoding.options import Instrumentation, LoopSwitches
    from ..language.oracle import oracle_program
    from ..language.program import Copy
    from ..decoding.runner import ObservedRunner, TransformersRunner

    ops = oracle_program(case.doc, case.gold)
    seconds: dict[bool, list[float]] = {False: [], True: []}
    forward_seconds: dict[bool, list[float]] = {False: [], True: []}
    results: dict[bool, Any] = {}
    for draft in ([False, True, True, False] * repeats)[:2 * repeats]:
        forwards: list[float] = []
        runner = ObservedRunner(TransformersRunner(model.model), lambda width, rows, s: forwards.append(s))
        result = CaDGenerator(model, case.doc, loop=LoopSwitches(draft_tags=draft),
                              instrumentation=Instrumentation(runner=runner)).run(
            INSTRUCTION, force_program=ops)
        if result.document != case.gold:
            raise AssertionError(f"{case.id}: draft_tags={draft} did not rebuild the gold")
        if len(forwards) != result.stats.forward_passes:
            raise AssertionError(f"{case.id}: the runner saw {len(forwards)} forwards, the stats "
                                 f"count {result.stats.forward_passes}")
        seconds[draft].append(result.stats.total_seconds - result.stats.prefill_seconds)
        forward_seconds[draft].append(sum(forwards[1:]))  # the first forward is the prefill
        results[draft] = result
    if results[True].program != results[False].program:
        raise AssertionError(f"{case.id}: drafts changed the program")
    on, off = results[True].stats, results[False].stats
    return {"id": case.id, "corpus": corpus_of(case.id),
            "copies": sum(isinstance(op, Copy) for op in ops),
            "decoded_tokens": on.decoded_tokens,
            "forward_passes_off": off.forward_passes, "forward_passes_on": on.forward_passes,
            "draft_tokens": on.draft_tokens, "draft_accepted": on.draft_accepted,
            "forwards_saved": on.forwards_saved, "draft_seconds": on.draft_seconds,
            "seconds_off": seconds[False], "seconds_on": seconds[True],
            "forward_seconds_off": forward_seconds[False], "forward_seconds_on": forward_seconds[True]}


def totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sums over cases (seconds: sums of per-case medians)."""
    keys = ("copies", "decoded_tokens", "forward_passes_off", "forward_passes_on",
            "draft_tokens", "draft_accepted", "forwards_saved")
    out: dict[str, Any] = {k: sum(r[k] for r in rows) for k in keys}
    for side in ("off", "on"):
        out[f"seconds_{side}"] = sum(statistics.median(r[f"seconds_{side}"]) for r in rows)
        out[f"forward_seconds_{side}"] = sum(statistics.median(r[f"forward_seconds_{side}"]) for r in rows)
    return out


def run_drafting(cases: Sequence[Case], cfg: DraftingConfig, progress: bool = True) -> dict[str, Any]:
    """Run every preset on the chosen cases; per-case rows, totals per corpus and preset."""
    import torch

    from ..tools import models

    chosen = select_cases(cases, cfg.per_corpus)
    if not chosen:
        raise InputError("no cases to run (empty corpus)")
    report: dict[str, Any] = {"config": asdict(cfg), "presets": {}}
    with _common.torch_threads(cfg.threads):
        started = time.perf_counter()
        for preset in cfg.presets:
            model = models.load(preset, seed=cfg.seed, dtype=cfg.dtype, device=cfg.device)
            torch.manual_seed(cfg.seed)
            run_case(model, Case("warm-up", "a = 1\nb = 2\nc = 3\n", "a = 1\nb = 5\nc = 3\n"), 1)
            rows = [run_case(model, case, cfg.repeats)
                    for case in _common.progress(chosen, desc=f"drafting {preset}", unit="case",
                                                 disable=not progress)]
            corpora = {name: totals([r for r in rows if r["corpus"] == name])
                       for name in dict.fromkeys(r["corpus"] for r in rows)}
            report["presets"][preset] = {"cases": rows, "corpora": corpora, "total": totals(rows)}
        report["wall_seconds"] = time.perf_counter() - started
        report["env"] = _common.environment(threads=cfg.threads)  # inside: the run's threads
    return report


def format_drafting(report: dict[str, Any]) -> str:
    """One markdown table: per preset and corpus, forwards and seconds off / on."""
    lines = ["| preset | corpus | cases | copies | forwards off | on | on/off | saved per copy "
             "| drafted tokens kept | s off | s on | speed-up |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for preset, entry in report["presets"].items():
        groups = [(name, t, sum(r["corpus"] == name for r in entry["cases"]))
                  for name, t in entry["corpora"].items()]
        groups.append(("**total**", entry["total"], len(entry["cases"])))
        for name, t, n in groups:
            off, on = t["forward_passes_off"], t["forward_passes_on"]
            per_copy = (off - on) / t["copies"] if t["copies"] else float("nan")
            speedup = t["seconds_off"] / t["seconds_on"] if t["seconds_on"] else float("nan")
            lines.append(f"| {preset} | {name} | {n} | {t['copies']} | {off} | {on} | {on / off:.3f} "
                         f"| {per_copy:.2f} | {t['draft_accepted']} / {t['draft_tokens']} "
                         f"| {t['seconds_off']:.2f} | {t['seconds_on']:.2f} | {speedup:.2f} |")
    return "\n".join(lines)
