"""Price every case of a ``bench all`` run with its own kernel curve, model-free.

Under teacher forcing the forwards a method runs (how many, how wide, how many logit
rows) do not depend on the model's weights: regeneration runs ``1 + T`` one-token
forwards, CaD and PLD whatever their drafts and splices make them. This script replays
each method on the run's cases with ``CountingRunner`` standing in for the model (the
real ``CaDGenerator`` loop and the real PLD driver, ``cad_outlines.bench.pld``), records
the width and logit rows of every forward, and prices them with the run's kernel curve
in process CPU time: ``T_PP_keep1_cpu(width)``, plus ``rows - 1`` times the cost of one
more row of logits at that width, ``(T_PP_full_cpu - T_PP_keep1_cpu) / width`` (linear
interpolation between measured widths; PLD's verify forwards, all rows, come out at
``T_PP_full_cpu``).
Loop overhead (mask, drafting) is not priced: under 2 % of a step on this CPU.

It exists because on a loaded machine the timed runs of ``bench all`` may not reach every
case; the timed cases show how close the pricing is (docs/benchmarks.md).

    python scripts/priced_e2e.py docs/bench/all_pld_commits_python_qwen2.5-0.5b_cpu \
        ../shared/corpora/commits_python.jsonl 20 > priced.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from cad_outlines.bench._loop import CountingRunner
from cad_outlines.bench.bounds import KernelCurve, compute_bounds, kernel_from_dict
from cad_outlines.bench.e2e import select_cases
from cad_outlines.bench.pld import PLDSetting, plain_prompt_ids, run_pld
from cad_outlines.training.ceiling import case_ceiling
from cad_outlines.training.corpus import load_corpus
from cad_outlines.decoding.drafting import ForwardCost
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.generate import cad
from cad_outlines.tools.models import load
from cad_outlines.language.oracle import oracle_program
from cad_outlines.decoding.runner import ObservedRunner

INSTRUCTION = "Apply the edit."


def main(out_dir: str, corpus: str, limit: int) -> dict:
    kernel_record = json.loads((Path(out_dir) / "kernel.json").read_text())
    n = np.array(kernel_record["n"], dtype=float)
    keep1, full = np.array(kernel_record["t_pp_keep1_cpu"]), np.array(kernel_record["t_pp_full_cpu"])

    def price(width: int, rows: int) -> float:
        # keep1(width), plus the logit rows beyond the first at the measured cost per row
        # at that width ((full - keep1) / width): a splice carrying a 3-token draft is not
        # priced as full logits over its whole width
        base = float(np.interp(width, n, keep1))
        per_row = float(np.interp(width, n, (full - keep1) / n))
        return base + (rows - 1) * max(per_row, 0.0)

    def prefill(tokens: int) -> float:
        """A prompt's prefill, past the curve's widest point extrapolated along its last
        segment (prefill after an empty cache is a little cheaper than after the kernel's
        prefix, so this errs high, the same way for both prompts)."""
        if tokens <= n[-1]:
            return price(tokens, 1)
        slope = (keep1[-1] - keep1[-2]) / (n[-1] - n[-2])
        return float(keep1[-1] + slope * (tokens - n[-1]))

    model = load("tiny-qwen", tokenizer_root=Path("tests/fixtures/tokenizers"))  # its weights never run
    vocab = model.model.get_output_embeddings().weight.shape[0]
    cases = select_cases(load_corpus(corpus), "size", limit)
    totals: dict[str, dict[str, float]] = {}
    T = T_gen = 0
    spans: list[int] = []
    prefills = {"cad": 0.0, "plain": 0.0}

    per_case: dict[str, dict[str, float]] = {}

    def add(name: str, forwards: list[tuple[int, int]]) -> None:
        seconds = sum(price(w, r) for w, r in forwards)
        slot = totals.setdefault(name, {"seconds": 0.0, "forwards": 0})
        slot["seconds"] += seconds
        slot["forwards"] += len(forwards)
        per_case.setdefault(case.id, {})[name] = seconds

    for case in cases:
        adapter = CaDGenerator(model, case.doc).adapter
        ceiling = case_ceiling(case, adapter, "lines")
        T, T_gen, spans = T + ceiling.T, T_gen + ceiling.T - sum(ceiling.spans), spans + list(ceiling.spans)
        gold_ids = adapter.encode(case.gold)
        plain = plain_prompt_ids(model.hf_tokenizer, case.doc, INSTRUCTION)
        prefills["cad"] += prefill(len(adapter.prompt_ids(case.doc, INSTRUCTION, "lines")))
        prefills["plain"] += prefill(len(plain))
        add("regen", [(1, 1)] * len(gold_ids))  # the loop's forwards; the prefill is apart
        cost = ForwardCost.from_kernel(kernel_record)
        for name, options in (("cad", {"forward_cost": cost}), ("cad_uncosted", {}),
                              ("cad_tags_only", {"draft_lookup": False})):
            seen: list[tuple[int, int]] = []
            runner = ObservedRunner(CountingRunner(vocab), lambda w, r, s: seen.append((w, r)))
            result = cad(model, case.doc, runner=runner, max_new_tokens=10 ** 6, **options).run(
                INSTRUCTION, force_program=oracle_program(case.doc, case.gold))
            assert result.document == case.gold, case.id
            add(name, seen[1:])
        for text in ("10:2", "20:3"):
            runner = CountingRunner(vocab)
            stats = run_pld(None, plain, gold_ids, PLDSetting.parse(text), adapter.eos_token_id,
                            max_new_tokens=len(gold_ids) + 64, runner=runner)
            assert stats["exact"], case.id
            add(PLDSetting.parse(text).name, [(w, w) for w in runner.widths[1:]])
    cpu_curve = KernelCurve(tuple(kernel_record["n"]), tuple(kernel_record["s_keep1_cpu"]))
    bnd = compute_bounds(T, T_gen, spans, cpu_curve, kernel_from_dict(kernel_record).costs).bnd_exact
    regen = totals["regen"]["seconds"]
    speedup = {name: regen / slot["seconds"] for name, slot in totals.items()}
    # prompt included: regeneration with the plain prompt is the reference; CaD pays its own
    reference = regen + prefills["plain"]
    with_prompt = {name: reference / (slot["seconds"] + prefills["cad" if name.startswith("cad") else "plain"])
                   for name, slot in totals.items()}
    return {"out_dir": out_dir, "corpus": corpus, "cases": [c.id for c in cases], "T": T, "T_gen": T_gen,
            "K": len(spans), "priced": totals, "per_case_seconds": per_case, "prefill_seconds": prefills, "speedup": speedup,
            "speedup_prompt_included": with_prompt, "bnd_exact_cpu": bnd,
            "cad_over_bnd_exact": speedup["cad"] / bnd}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3])), indent=1))
