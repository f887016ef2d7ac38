"""One whole file, the oracle's program forced, the library's default CaD settings (compact
prompt, drafts whole, draft trees): process CPU time of the prefill and of the whole edit
with the prefill's tree split off (``TREE_SPLIT`` as shipped) and in one call (as before),
alternately in one process.

    OMP_NUM_THREADS=1 python scripts/tree_split_e2e.py ../shared/corpora/commits_prose.jsonl 3

takes the eval-split files of 151-400 lines in file order (``bench all --lines 151-400
--split eval``) and runs case INDEX (0-based) with ``qwen2.5-coder-0.5b-base``.
"""

from __future__ import annotations

import json
import sys
import time

import torch

import cad_outlines.decoding.runner as runner_module
from cad_outlines.arguments import load_cases
from cad_outlines.bench.e2e import select_cases
from cad_outlines.generate import cad
from cad_outlines.language.oracle import oracle_program
from cad_outlines.tools import models


def main() -> None:
    torch.set_num_threads(1)
    case = select_cases(load_cases(sys.argv[1]), "file", None, (151, 400), "eval")[int(sys.argv[2])]
    model = models.load("qwen2.5-coder-0.5b-base")
    program = oracle_program(case.doc, case.gold)
    shipped = runner_module.TREE_SPLIT
    for mode in ("split", "one call", "split", "one call")[:int(sys.argv[3]) if len(sys.argv) > 3 else 2]:
        runner_module.TREE_SPLIT = shipped if mode == "split" else 10**9
        gen = cad(model, case.doc, prompt_style="compact")
        start = time.process_time()
        result = gen.run("Apply the edit.", force_program=program)
        cpu = time.process_time() - start
        st = result.stats
        print(json.dumps({"case": case.id, "mode": mode, "exact": result.document == case.gold,
                          "prompt_tokens": st.prompt_tokens, "forward_passes": st.forward_passes,
                          "tree_splits": gen.runner.tree_splits, "cpu_seconds": round(cpu, 1),
                          "prefill_wall_seconds": round(st.prefill_seconds, 1)}), flush=True)


if __name__ == "__main__":
    main()
