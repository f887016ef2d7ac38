"""The warm-head prefill (the prompt after its cached constant head, ``bench e2e``'s
``WarmPrefill``) of whole files, with long chains after a past in pieces
(``SPLICE_CHUNK`` as shipped) and in one call, alternately in one process; the cold
prefill beside them. CaD's compact prompt and the plain one, ``qwen2.5-coder-0.5b-base``,
one thread, process CPU time.

    OMP_NUM_THREADS=1 python scripts/warm_head_chunks.py ../shared/corpora/commits_c.jsonl 0 2

runs case INDEX (0-based) of the eval-split files of 151-400 lines, RUNS times each way.
"""

from __future__ import annotations

import json
import sys
import time

import torch

import cad_outlines.decoding.runner as runner_module
from cad_outlines.adapters import get_adapter
from cad_outlines.arguments import load_cases
from cad_outlines.bench._loop import WarmPrefill
from cad_outlines.bench.e2e import select_cases
from cad_outlines.tools import models


def main() -> None:
    torch.set_num_threads(1)
    case = select_cases(load_cases(sys.argv[1]), "file", None, (151, 400), "eval")[int(sys.argv[2])]
    model = models.load("qwen2.5-coder-0.5b-base")
    adapter = get_adapter(model.hf_tokenizer)
    shipped = runner_module.SPLICE_CHUNK
    for plain in (False, True):
        ids = (adapter.plain_prompt_ids(case.doc, "Apply the edit.", "compact") if plain
               else adapter.prompt_ids(case.doc, "Apply the edit.", style="compact"))
        runner = runner_module.TransformersRunner(model.model)
        start = time.process_time()
        runner.forward(ids, runner.new_cache())
        cold = time.process_time() - start
        for mode in ("pieces", "one call") * int(sys.argv[3] if len(sys.argv) > 3 else 1):
            runner_module.SPLICE_CHUNK = shipped if mode == "pieces" else 10**9
            warm = WarmPrefill(model.model, adapter.constant_ids(style="compact", plain=plain))(ids)
            print(json.dumps({"case": case.id, "prompt": "plain" if plain else "cad", "tokens": len(ids),
                              "cold_cpu": round(cold, 1), "mode": mode,
                              "warm_cpu": round(warm["cpu_prefill_warm_seconds"], 1),
                              "cached": warm["prompt_tokens_cached"]}), flush=True)


if __name__ == "__main__":
    main()
