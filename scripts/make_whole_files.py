"""Write tests/fixtures/whole_files_python.jsonl: the whole-file cases of the speed headline.

    python scripts/make_whole_files.py ../shared/corpora/commits_python.jsonl

The raw corpus rows of the cases ``bench all ... --lines 151-400 --split eval --limit 4``
picks (docs/benchmarks.md, the whole-file headline), so that a machine without
``../shared`` (the GPU machine of scripts/gpu_bench.sh) runs the same files with the
same flags.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cad_outlines.arguments import load_cases
from cad_outlines.bench.e2e import select_cases
from cad_outlines.files import atomic_write

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "whole_files_python.jsonl"


def main(corpus: str) -> None:
    ids = {c.id for c in select_cases(load_cases(corpus), lines=(151, 400), split="eval", limit=4)}
    rows = [line for line in Path(corpus).read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["id"] in ids]
    atomic_write(OUT, "".join(f"{line}\n" for line in rows))
    print(f"{OUT}: {len(rows)} cases", file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:])
