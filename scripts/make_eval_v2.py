"""Write cad_outlines/data/eval_v2.jsonl: the bench quality v2 subsets on the eval split.

    python scripts/make_eval_v2.py ../shared/corpora/commits_python.jsonl \
        ../shared/corpora/commits_c.jsonl ../shared/corpora/commits_prose.jsonl

Each line: id, subset, doc, gold, instruction, kind, form, corpus, file, lines (files never
in a training row: the split is by file, training/edits.split_of).

With ``--dev OUT.jsonl N``, write instead N lazy-snippet cases of real commits for tuning
(the ``follow_prediction`` floor): eval-split files, none of them a file of the v2
``commit_snippets`` subset, so a value chosen on them is never chosen on the eval set.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cad_outlines.files import atomic_write
from cad_outlines.training.edits import EVAL_SETS_V2, MixV2Config, eval_sets_v2, make_mix_v2
from cad_outlines.training.train import load_records

PER_SET = 20
OUT = Path(__file__).resolve().parents[1] / "cad_outlines" / "data" / "eval_v2.jsonl"


def _line(subset: str, case, case_id: str | None = None) -> str:
    meta = {k: case.meta[k] for k in ("instruction", "kind", "form", "corpus", "file", "lines")}
    return json.dumps({"id": case_id or case.id, "subset": subset, "doc": case.doc, "gold": case.gold, **meta})


def main(paths: list[str]) -> None:
    sets = eval_sets_v2(load_records(paths), per_set=PER_SET)
    lines = [_line(subset, case) for subset, cases in sets.items() for case in cases]
    atomic_write(OUT, "\n".join(lines) + "\n")
    print(f"{OUT}: {len(lines)} cases in {len(sets)} subsets")


def dev(paths: list[str], out: str, n: int) -> None:
    records = load_records(paths)
    taken = {c.meta["file"] for c in eval_sets_v2(records, per_set=PER_SET)["commit_snippets"]}
    buckets, forms, share = EVAL_SETS_V2["commit_snippets"]
    # every eval-split commit (80 of them), then only those of files the eval subset lacks
    cfg = MixV2Config(seed=0, cases=4 * PER_SET, split="eval", buckets=buckets, forms=forms, commit_share=share)
    cases = [c for c in make_mix_v2(records, cfg, allow_fewer=True) if c.meta["file"] not in taken][:n]
    atomic_write(out, "".join(_line("dev_snippets", c, f"dev_snippets-{i:03d}") + "\n" for i, c in enumerate(cases)))
    print(f"{out}: {len(cases)} cases from {len({c.meta['file'] for c in cases})} files")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--dev"]:
        dev(sys.argv[4:], sys.argv[2], int(sys.argv[3]))
    else:
        main(sys.argv[1:])
