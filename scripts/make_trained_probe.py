"""Write bench quality cases made of rows the shipped CaD adapter was trained on.

    python scripts/make_trained_probe.py OUT.jsonl ../shared/corpora/commits_python.jsonl \
        ../shared/corpora/commits_c.jsonl ../shared/corpora/commits_prose.jsonl

The v2 run (docs/models.md) trained one row per step on the first 1,200 rows of its
order: the 3,000-case mix (seed 0, train split), its rows in the compact CaD layout
(those over 12,000 ids dropped), shuffled with seed 0, no row over 4,096 ids in the first
400 steps. This script rebuilds that order and writes, for each edit kind given (default:
those the adapter misses most on the eval split), the first ``--per-kind`` trained cases
with documents of at most ``--max-lines`` lines, as JSONL ``bench quality --cases``
reads (``subset`` = ``trained_<kind>``). Scoring the adapter on them separates a model
that never fit its training rows from one that fit them and does not carry over.
"""

from __future__ import annotations

import argparse
import json
import random

from cad_outlines.files import atomic_write
from cad_outlines.training.edits import MixV2Config, make_mix_v2
from cad_outlines.training.sft import RowBuilder
from cad_outlines.training.train import rows_digest, curriculum, load_records

#: The settings of runs/qwen2.5-coder-0.5b-cad-v2/record.json.
BASE, CASES, SEED, MAX_TOKENS, LONG_TOKENS, STEPS, STYLE = "qwen2.5-coder-0.5b-base", 3000, 0, 12000, 4096, 1200, "compact"
WEAK = ("rename", "swap", "insert_before", "docstring", "add_param", "remove_param", "add_import",
        "comment_out", "uncomment", "change_string", "wrap_try")
#: data_sha256 of that record: the rows in training order.
RECORD_DIGEST = "eb62dfca3f6f23e5d1e68e6698eb5362baf668066ca2f8f29079c217da7b39df"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("corpora", nargs="+")
    parser.add_argument("--kinds", default=",".join(WEAK))
    parser.add_argument("--per-kind", type=int, default=3)
    parser.add_argument("--max-lines", type=int, default=50)
    args = parser.parse_args()

    from cad_outlines.adapters import load_tokenizer
    from cad_outlines.tools.weights import hf_folder

    cases = make_mix_v2(load_records(args.corpora), MixV2Config(seed=SEED, cases=CASES, split="train"))
    # the run's own tokenizer: the base model's, converted from its GGUF (cad-outlines weights fetch)
    tokenizer = load_tokenizer(hf_folder(BASE))
    builder = RowBuilder(tokenizer, prompt_style=STYLE)
    kept = []  # the cases whose rows rows_for keeps (as it builds them), in the same order
    for case in cases:
        row = builder.row(case.doc, builder.oracle(case.doc, case.gold), case.meta["instruction"], case.id)
        if len(row.input_ids) <= MAX_TOKENS:
            kept.append((case, (row.input_ids, row.labels)))
    order = list(range(len(kept)))
    random.Random(SEED).shuffle(order)
    order = curriculum(order, [len(r[0]) for _, r in kept], LONG_TOKENS, STEPS // 3)
    digest = rows_digest([r for _, r in kept], order)
    if digest != RECORD_DIGEST:
        raise SystemExit(f"the rebuilt rows are not the run's (digest {digest[:12]}, the record's "
                         f"{RECORD_DIGEST[:12]}): other corpora or code")
    trained = [kept[i][0] for i in order[:STEPS]]
    wanted = args.kinds.split(",")
    chosen: dict[str, list] = {k: [] for k in wanted}
    for case in trained:
        kind = case.meta.get("kind")
        if kind in chosen and len(chosen[kind]) < args.per_kind and case.doc.count("\n") <= args.max_lines:
            chosen[kind].append(case)
    lines = []
    for kind, group in chosen.items():
        for case in group:
            meta = {k: case.meta[k] for k in ("instruction", "kind", "form", "corpus", "file") if k in case.meta}
            lines.append(json.dumps({"id": f"trained-{case.id}", "subset": f"trained_{kind}", "doc": case.doc,
                                     "gold": case.gold, **meta}))
    atomic_write(args.out, "".join(f"{line}\n" for line in lines))
    counts = ", ".join(f"{k} {len(v)}" for k, v in chosen.items())
    print(f"{args.out}: {len(lines)} trained cases ({counts}); {len(kept)} rows kept of {len(cases)}")


if __name__ == "__main__":
    main()
