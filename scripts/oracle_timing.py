"""Time the line oracle on repetitive documents (issue 10: it was quadratic).

Usage: python scripts/oracle_timing.py [--old]

``--old`` also times the previous algorithm (one ``difflib.SequenceMatcher`` over all lines,
``autojunk=False``); that takes several minutes.
"""

from __future__ import annotations

import difflib
import sys
import time

from cad_outlines.language.oracle import oracle_program
from cad_outlines.language.resolver import resolve
from cad_outlines.language.syntax import split_lines

CASES = {
    "x*5000 vs itself": ("x\n" * 5000, "x\n" * 5000),
    "x*10000 vs itself": ("x\n" * 10000, "x\n" * 10000),
    "x*10000, every 100th line changed": ("x\n" * 10000,
                                          "".join("y\n" if k % 100 == 50 else "x\n" for k in range(10000))),
    "(x, y)*5000 vs (x, z)*5000": ("x\ny\n" * 5000, "x\nz\n" * 5000),
    "x*10000 vs x*9000 + y*1000": ("x\n" * 10000, "x\n" * 9000 + "y\n" * 1000),
}


def old_oracle_blocks(doc: str, gold: str) -> int:
    a, b = split_lines(doc), split_lines(gold)
    return len(difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())


def main() -> None:
    old = "--old" in sys.argv
    for name, (doc, gold) in CASES.items():
        start = time.perf_counter()
        ops = oracle_program(doc, gold)
        seconds = time.perf_counter() - start
        assert resolve(ops, doc) == gold
        line = f"{name:40} new: {seconds:8.3f} s, {len(ops):5} ops"
        if old:
            start = time.perf_counter()
            old_oracle_blocks(doc, gold)
            line += f"   old: {time.perf_counter() - start:8.1f} s"
        print(line, flush=True)


if __name__ == "__main__":
    main()
