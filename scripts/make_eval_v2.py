"""Write cad_outlines/data/eval_v2.jsonl: the bench quality v2 subsets on the eval split.

    python scripts/make_eval_v2.py ../shared/corpora/commits_python.jsonl \
        ../shared/corpora/commits_c.jsonl ../shared/corpora/commits_prose.jsonl

Each line: id, subset, doc, gold, instruction, kind, form, corpus, file, lines (files never
in a training row: the split is by file, training/edits.split_of).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cad_outlines.files import atomic_write
from cad_outlines.training.edits import eval_sets_v2
from cad_outlines.training.train import load_records

PER_SET = 20


def main(paths: list[str]) -> None:
    sets = eval_sets_v2(load_records(paths), per_set=PER_SET)
    lines = []
    for subset, cases in sets.items():
        for case in cases:
            meta = {k: case.meta[k] for k in ("instruction", "kind", "form", "corpus", "file", "lines")}
            lines.append(json.dumps({"id": case.id, "subset": subset, "doc": case.doc, "gold": case.gold, **meta}))
    out = Path(__file__).resolve().parents[1] / "cad_outlines" / "data" / "eval_v2.jsonl"
    atomic_write(out, "\n".join(lines) + "\n")
    print(f"{out}: {len(lines)} cases in {len(sets)} subsets")


if __name__ == "__main__":
    main(sys.argv[1:])
