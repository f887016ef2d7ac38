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
from pathlib import Path

from cad_outlines.files import atomic_write
from cad_outlines.training.edits import MixV2Config, make_mix_v2
from cad_outlines.training.train import case_rows, load_records, rows_digest, training_order

#: The run whose rows are rebuilt: its settings and the digest of its rows in order.
RECORD = Path(__file__).resolve().parents[1] / "runs" / "qwen2.5-coder-0.5b-cad-v2" / "record.json"
WEAK = ("rename", "swap", "insert_before", "docstring", "add_param", "remove_param", "add_import",
        "comment_out", "uncomment", "change_string", "wrap_try")


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

    record = json.loads(RECORD.read_text(encoding="utf-8"))
    cfg, mix = record["config"], record["config"]["mix"]
    cases = make_mix_v2(load_records(args.corpora),
                        MixV2Config(seed=mix["seed"], cases=mix["cases"], split=mix["split"]))
    # the run's own tokenizer: the base model's, converted from its GGUF (cad-outlines weights fetch)
    tokenizer = load_tokenizer(hf_folder(cfg["base"]))
    kept, _ = case_rows(cases, tokenizer, cfg["layout"], cfg["max_tokens"], cfg["prompt_style"])
    rows = [row for _, row in kept]
    order_steps = record.get("order_steps", cfg["steps"])
    order = training_order(rows, cfg["seed"], cfg["long_tokens"], order_steps * cfg["batch_size"] // 3)
    digest = rows_digest(rows, order)
    if digest != record["data_sha256"]:
        raise SystemExit(f"the rebuilt rows are not the run's (digest {digest[:12]}, the record's "
                         f"{record['data_sha256'][:12]}): other corpora or code")
    trained = [kept[i][0] for i in order[:cfg["steps"] * cfg["batch_size"]]]
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
