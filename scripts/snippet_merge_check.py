"""How often the literal merge of a lazy snippet gives the real commit's file.

For every commit of the corpora (../shared/corpora/commits_{python,c,prose}.jsonl) three
snippets of doc -> gold: the mix's (``make_snippet``, two context lines), and two lazier
ones a person or a model writes, with no context line before each change (``lead``) or
none after it (``trail``). Prints, per split of the training mix and snippet kind, how
many merge to the gold file. Model-free; a second run at another commit compares merges.

    python scripts/snippet_merge_check.py [CORPORA_DIR]
"""

from __future__ import annotations

import difflib
import json
import sys
from collections import Counter
from pathlib import Path

from cad_outlines.language.snippets import is_marker, make_snippet, marker, merge
from cad_outlines.training.edits import split_of


def one_sided(doc: list[str], gold: list[str], path: str, side: str) -> str:
    """The snippet of doc -> gold with two context lines after each change (``lead``: none
    before it) or before it (``trail``: none after)."""
    ops = [op for op in difflib.SequenceMatcher(None, doc, gold, autojunk=False).get_opcodes() if op[0] != "equal"]
    out: list[str] = []
    previous = 0
    for _, _, _, j1, j2 in ops:
        lo = max(previous, j1 if side == "lead" else j1 - 2)
        hi = min(len(gold), j2 + 2) if side == "lead" else j2
        if lo > previous or (not out and lo > 0):
            out.append(marker(path))
        out.extend(gold[lo:hi])
        previous = max(previous, hi)
    if previous < len(gold):
        out.append(marker(path))
    return "\n".join(out) + "\n"


def main(folder: str = "../shared/corpora") -> None:
    total: Counter[tuple[str, str]] = Counter()
    right: Counter[tuple[str, str]] = Counter()
    for corpus in ("python", "c", "prose"):
        for line in open(Path(folder) / f"commits_{corpus}.jsonl", encoding="utf-8"):
            record = json.loads(line)
            doc, gold, path = record["doc"], record["gold"], record["path"]
            lines, gold_lines = doc.split("\n")[:-1], gold.split("\n")[:-1]
            if any(map(is_marker, gold_lines)):
                continue
            split = split_of(record["source"], path)
            snippets = {"context 2": make_snippet(lines, gold_lines, path),
                        **{side: one_sided(lines, gold_lines, path, side) for side in ("lead", "trail")}}
            for kind, snippet in snippets.items():
                if snippet is not None:
                    total[split, kind] += 1
                    right[split, kind] += merge(doc, snippet) == gold
    for key in sorted(total):
        print(f"{key[0]:5} {key[1]:9} {right[key]:4} / {total[key]} merge to the commit's file")


if __name__ == "__main__":
    main(*sys.argv[1:])
