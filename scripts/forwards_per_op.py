"""Forwards per program operation of forced programs, with and without a right prediction.

    python scripts/forwards_per_op.py [SUBSET ...] [--limit N]

On the bundled v2 eval edits (default: whole files of 151-400 lines), the oracle program
of each edit is forced through the real loop on tiny-qwen (random weights: forward counts
do not depend on the weights or the machine), once plainly and once with the gold as
``prediction``; both must write the same program. Prints the counts and the ratios, and
how many forwards followed a token of new gen text (``CaDStats.body_forwards``: text no
document holds, which every method pays for one token at a time unless a draft guesses it).
"""

from __future__ import annotations

import argparse

import torch

from cad_outlines.bench.quality import load_eval_cases
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.language.oracle import oracle_program
from cad_outlines.tools import models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("subsets", nargs="*", default=["whole_151_400"])
    parser.add_argument("--limit", type=int, default=12)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = models.load("tiny-qwen")
    for subset in args.subsets:
        cases = [c for c in load_eval_cases("v2") if c.meta["subset"] == subset][:args.limit]
        ops = plain = predicted = body = 0
        for case in cases:
            program = oracle_program(case.doc, case.gold)
            gen = CaDGenerator(model, case.doc)
            a = gen.run(case.meta["instruction"], force_program=program)
            b = gen.run(case.meta["instruction"], force_program=program, prediction=case.gold)
            assert a.program == b.program and b.document == case.gold, case.id
            ops, plain, predicted = ops + len(program), plain + a.stats.forward_passes, predicted + b.stats.forward_passes
            body += a.stats.body_forwards
        print(f"{subset}: {len(cases)} edits, {ops} ops; forwards {plain} ({plain / ops:.2f} per op) without, "
              f"of which {body} after new gen text and {plain - body} ({(plain - body) / ops:.2f} per op) "
              f"for the rest (prefill, splices, indices, tags); "
              f"{predicted} ({predicted / ops:.2f} per op) with the right prediction")


if __name__ == "__main__":
    main()
