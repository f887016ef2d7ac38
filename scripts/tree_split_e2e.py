"""One whole file, the oracle's program forced, the library's default CaD settings (compact
prompt, drafts whole, draft trees): process CPU time of the prefill and of the whole edit
with one of the runner's CPU splits as shipped and turned off (one call, as before),
alternately in one process.

    OMP_NUM_THREADS=1 python scripts/tree_split_e2e.py ../shared/corpora/commits_prose.jsonl 3
    OMP_NUM_THREADS=1 python scripts/tree_split_e2e.py ../shared/corpora/commits_c.jsonl 0 4 SPLICE_CHUNK

takes the eval-split files of 151-400 lines in file order (``bench all --lines 151-400
--split eval``) and runs case INDEX (0-based) with ``qwen2.5-coder-0.5b-base``, RUNS times
(default 2), toggling SETTING (``TREE_SPLIT``, the default: the prefill's draft tree in a
call of its own; ``SPLICE_CHUNK``: long chains after cached positions in pieces).
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
    setting = sys.argv[4] if len(sys.argv) > 4 else "TREE_SPLIT"
    shipped = getattr(runner_module, setting)
    for mode in ("split", "one call", "split", "one call")[:int(sys.argv[3]) if len(sys.argv) > 3 else 2]:
        setattr(runner_module, setting, shipped if mode == "split" else 10**9)
        gen = cad(model, case.doc, prompt_style="compact")
        start = time.process_time()
        result = gen.run("Apply the edit.", force_program=program)
        cpu = time.process_time() - start
        st = result.stats
        print(json.dumps({"case": case.id, "mode": mode, "exact": result.document == case.gold,
                          "prompt_tokens": st.prompt_tokens, "forward_passes": st.forward_passes,
                          "tree_splits": gen.runner.tree_splits, "chunk_calls": gen.runner.chunk_calls, "cpu_seconds": round(cpu, 1),
                          "prefill_wall_seconds": round(st.prefill_seconds, 1)}), flush=True)


if __name__ == "__main__":
    main()
