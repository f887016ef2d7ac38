"""Check the repetition guard's thresholds against real edits: does any text a real
commit adds look like a loop (cad_outlines/decoding/repetition.py)?

    python scripts/repetition_scan.py ../shared/corpora/commits_*.jsonl

For each commit, each block of lines the gold file adds or replaces (difflib over lines)
is fed as a gen body being written, checked every 4 characters against the document and
the instruction, as the decode loop checks it; each gold file is also fed whole against
an empty document (a new file: no run is spared for being the document's). Prints the
count of each that trips the guard, and the longest periodic runs (unit at most
UNIT_MAX, at least 4 repeats) in the gold files, the margin the thresholds leave.
"""

from __future__ import annotations

import difflib
import json
import sys


def main(paths: list[str]) -> None:
    from cad_outlines.decoding import repetition

    blocks = fired = whole_fired = 0
    runs: list[tuple[int, int, str]] = []
    for path in paths:
        for line in open(path, encoding="utf-8"):
            record = json.loads(line)
            before, after = record["doc"].splitlines(True), record["gold"].splitlines(True)
            hay = record["doc"] + "\n" + record.get("instruction", "")
            matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
            for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
                if tag in ("replace", "insert"):
                    body = "\n" + "".join(after[j1:j2])
                    blocks += 1
                    checks = (repetition.looping(body[:end], hay) for end in range(1, len(body) + 1, 4))
                    if hit := next((loop for loop in checks if loop is not None), None):
                        fired += 1
                        print(f"added text called a loop: {record['id']} {hit}")
            gold = record["gold"]
            if any(repetition.looping(gold[:end], "") for end in range(1, len(gold) + 1, 16)):
                whole_fired += 1
            runs.append((_longest_run(gold), len(runs), record["id"]))
    runs.sort(reverse=True)
    print(f"{blocks} added blocks in {len(runs)} commits: {fired} called a loop against their document; "
          f"{whole_fired} gold files called a loop as a new file (thresholds: unit <= {repetition.UNIT_MAX}, "
          f">= {repetition.MIN_REPEATS} repeats, >= {repetition.MIN_CHARS} characters)")
    print("longest periodic runs in the gold files (characters, file):",
          ", ".join(f"{chars} {name}" for chars, _, name in runs[:5]))


def _longest_run(text: str) -> int:
    """The longest run in ``text`` of any unit of at most UNIT_MAX characters repeated
    at least 4 times, looked for at every 8th character."""
    from cad_outlines.decoding.repetition import periodic_tail

    runs = (periodic_tail(text[max(0, end - 4096):end], repeats=4, chars=64) for end in range(64, len(text) + 1, 8))
    return max((run.chars for run in runs if run is not None), default=0)


if __name__ == "__main__":
    main(sys.argv[1:])
