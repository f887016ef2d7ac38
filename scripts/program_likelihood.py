"""Would a search over programs fix the fine-tuned model's misses? For each edit a
``bench quality`` record got wrong, the log-likelihood the model gives the oracle's
program (the layout it was trained on) against the program it chose greedily, both
teacher-forced through the real decode loop (chosen tokens only: grammar-forced runs and
spliced lines carry no choice).

    python scripts/program_likelihood.py RECORDS.json [--adapter DIR] [--subsets A,B] [-o OUT.jsonl]

Greedy, one torch thread, the `qwen2.5-coder-0.5b` preset (``--adapter``: a run's folder in
place of the shipped adapter; use the one the records were made with). Prints one line
per edit and a summary: where the oracle's program is the likelier one, greedy decoding
missed a program the model prefers (a search error); where it is not, the model prefers
its wrong program (a model error) and only training moves it. Each line also says where
the two part: the first chosen token that differs (``part``: ``index`` inside a copy tag,
``gen`` inside a gen body, ``op`` choosing the next op), the model's probability of the
oracle's token and of the greedy one there, and the text before it.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records")
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--subsets", default="")
    parser.add_argument("-o", "--out", default=None)
    args = parser.parse_args()

    import outlines
    import torch

    from cad_outlines.bench.quality import load_eval_cases
    from cad_outlines.decoding.options import Instrumentation
    from cad_outlines.generate import cad
    from cad_outlines.language.oracle import oracle_program
    from cad_outlines.language.program import render
    from cad_outlines.tools.models import build

    torch.set_num_threads(1)
    cases = {c.id: c for c in load_eval_cases("v2")}
    wanted = set(filter(None, args.subsets.split(",")))
    with open(args.records) as f:
        report = json.load(f)
    records = [r for r in report["records"]
               if r["config"] == "qwen_cad" and not r["exact"] and r["complete"]
               and (not wanted or r["subset"] in wanted)]
    model = outlines.from_transformers(*build("qwen2.5-coder-0.5b", adapter=args.adapter))
    search = 0
    for r in records:
        case = cases[r["case"]]
        scores, probs = {}, {}
        gen = cad(model, case.doc, max_new_tokens=4096, instrumentation=Instrumentation(trace_alpha=True))
        texts = {"oracle": render(oracle_program(case.doc, case.gold)), "chosen": r["output"]}
        for name, program in texts.items():
            result = gen.run(case.meta["instruction"], force_program=program)
            scores[name], probs[name] = result.alpha.log_likelihood, result.alpha.chosen_probs
        row = {"case": r["case"], "kind": r["kind"], "oracle": round(scores["oracle"], 3),
               "chosen": round(scores["chosen"], 3), **_parting(texts, probs)}
        search += scores["oracle"] > scores["chosen"]
        print(json.dumps(row), flush=True)
        if args.out:  # one line at a time, so a stopped run keeps what it measured
            with open(args.out, "a") as out:
                out.write(json.dumps(row) + "\n")
    print(f"{search} of {len(records)} wrong programs: the oracle's program is the likelier one")


def _parting(texts: dict[str, str], probs: dict[str, list[float]]) -> dict[str, object]:
    """Where the oracle's and the greedy program part: the same prefix gives the same
    distribution, so the first chosen step whose probabilities differ is the first
    differing choice; the texts' first differing character says what was being written."""
    oracle, chosen = probs["oracle"], probs["chosen"]
    step = next((i for i in range(min(len(oracle), len(chosen))) if oracle[i] != chosen[i]), None)
    a, b = texts["oracle"], texts["chosen"]
    at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    before = a[:at]
    part = ("index" if before.rfind("<copy") > before.rfind(">") else
            "gen" if before.rfind("<gen>") > before.rfind("</gen>") else "op")
    return {"part": part, "p_oracle": None if step is None else round(oracle[step], 4),
            "p_chosen": None if step is None else round(chosen[step], 4), "before": before[-40:]}


if __name__ == "__main__":
    main()
