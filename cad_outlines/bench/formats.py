"""``bench formats``: output tokens and round trips of four edit formats on real edits.

All four are derived from the same alignment, the oracle's
``difflib.SequenceMatcher(None, doc_lines, gold_lines, autojunk=False)`` over
``split("\\n")`` (except the unified diff, see below):

``full``
    The gold text itself (full regeneration); exact by construction.
``search_replace``
    Aider-style blocks, one per non-equal opcode::

        <<<<<<< SEARCH
        old lines
        =======
        new lines
        >>>>>>> REPLACE

    SEARCH holds the opcode's document lines; a pure insertion (no document lines) is
    anchored on the line before it (the line after, at the top of the file). The blocks
    are applied in order to the evolving text, each to the FIRST exact match of its
    SEARCH lines, as Aider's ``perfect_replace`` does. A block whose SEARCH text occurs
    earlier than its intended place is an *anchor-ambiguity failure*. Only the block
    markers are counted, not the file name and fences Aider's prompt also asks for.
``search_replace_unique``
    The same blocks grown with unchanged neighbouring lines until each SEARCH is unique
    in the text it is applied to (what Aider's prompt asks of the model): no ambiguity
    failures, more tokens.
``unified_diff``
    ``difflib.unified_diff`` (3 context lines, ``a/file`` / ``b/file`` headers), applied
    with GNU ``patch --fuzz=0``. ``difflib.unified_diff`` runs its own
    ``SequenceMatcher`` with ``autojunk=True``; ``alignment_differs`` counts the cases
    where that alignment differs from the oracle's.
``cad_lines`` / ``cad_tokens``
    The oracle program (line copies; greedy token copies of ``>= 8`` tokens), rendered,
    re-parsed and resolved against the document.

Token counts use the tokenizer's adapter (plain text, no special tokens).
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from ..training.ceiling import DEFAULT_MIN_SPAN, oracle_for
from ..tools import diffs
from ..training.corpus import Case
from ..errors import InputError
from ..language.program import parse, render
from ..language.resolver import resolve
from ..language.syntax import split_lines
from . import _common

__all__ = ["FORMATS", "SearchReplace", "apply_search_replace", "format_formats", "run_formats",
           "search_replace_blocks", "unified_diff", "apply_unified_diff"]

FORMATS = ("full", "search_replace", "search_replace_unique", "unified_diff", "cad_lines", "cad_tokens")


@dataclass(frozen=True)
class SearchReplace:
    """One Aider-style block; ``at`` is where SEARCH starts in the ORIGINAL document."""

    search: tuple[str, ...]
    replace: tuple[str, ...]
    at: int

    def render(self) -> str:
        body = ["<<<<<<< SEARCH", *self.search, "=======", *self.replace, ">>>>>>> REPLACE"]
        return "\n".join(body) + "\n"


def search_replace_blocks(doc: str, gold: str) -> list[SearchReplace]:
    """The oracle alignment's non-equal opcodes as search/replace blocks (module docstring)."""
    a, b = split_lines(doc), split_lines(gold)
    blocks = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        search, replace, at = a[i1:i2], b[j1:j2], i1
        if not search:  # pure insertion: anchor on a neighbouring unchanged line
            if i1 > 0:
                search, replace, at = [a[i1 - 1]], [a[i1 - 1], *replace], i1 - 1
            else:
                search, replace = [a[0]], [*replace, a[0]]
        blocks.append(SearchReplace(tuple(search), tuple(replace), at))
    return blocks


def apply_search_replace(doc: str, blocks: Sequence[SearchReplace], unique: bool = False
                         ) -> tuple[Optional[str], list[SearchReplace], int, int]:
    """Apply blocks in order, each at the first exact match of its SEARCH lines.

    Parameters
    ----------
    unique
        Grow each block with unchanged neighbouring lines (before, after, alternately)
        until its SEARCH occurs exactly once in the text it is applied to, as Aider's
        prompt asks the model to do.

    Returns
    -------
    (text, used, ambiguous, misapplied)
        ``text`` is None when a SEARCH is not found; ``used`` are the blocks as applied;
        ``ambiguous`` counts blocks whose SEARCH occurred more than once when applied;
        ``misapplied`` those applied at a match other than the intended one
        (anchor-ambiguity failures).
    """
    lines = split_lines(doc)
    shift = 0  # lines added so far by earlier blocks: intended place = at + shift
    ambiguous = misapplied = 0
    used = []
    for block in blocks:
        if unique:
            block = _grow_until_unique(lines, block, block.at + shift)
        size = len(block.search)
        hits = _find(lines, block.search)
        if not hits:
            return None, used, ambiguous, misapplied
        ambiguous += len(hits) > 1
        first = hits[0]
        misapplied += first != block.at + shift
        lines[first:first + size] = block.replace
        shift += len(block.replace) - size
        used.append(block)
    return "\n".join(lines), used, ambiguous, misapplied


def _find(lines: list[str], search: tuple[str, ...]) -> list[int]:
    size = len(search)
    return [i for i in range(len(lines) - size + 1) if tuple(lines[i:i + size]) == search]


def _grow_until_unique(lines: list[str], block: SearchReplace, place: int) -> SearchReplace:
    before = after = 0
    size = len(block.search)
    while True:
        start, end = place - before, place + size + after
        search = tuple(lines[start:end])
        if _find(lines, search) == [start]:
            break
        can_before, can_after = start > 0, end < len(lines)
        if not (can_before or can_after):
            break
        if can_before and (before <= after or not can_after):
            before += 1
        else:
            after += 1
    replace = (*lines[start:place], *block.replace, *lines[place + size:end])
    return SearchReplace(search, replace, block.at - before)


def unified_diff(doc: str, gold: str, context: int = 3) -> str:
    """The project's unified diff (:func:`cad_outlines.tools.diffs.unified_diff`) of one case."""
    return diffs.unified_diff(doc, gold, "a/file", "b/file", context)


def patch_program() -> str:
    """Path of GNU ``patch``; a clear error if it is missing."""
    path = shutil.which("patch")
    if path is None:
        raise FileNotFoundError("GNU patch is not installed (bench formats applies unified diffs "
                           "with it): install it, e.g. `apt-get install patch`")
    return path


def apply_unified_diff(doc: str, diff: str) -> Optional[str]:
    """Apply ``diff`` to ``doc`` with GNU ``patch --fuzz=0``; None if a hunk fails."""
    if not diff:
        return doc
    with tempfile.TemporaryDirectory() as tmp:
        src, patch_file, out = (os.path.join(tmp, n) for n in ("file", "edit.patch", "out"))
        with open(src, "w", encoding="utf-8", newline="") as fh:
            fh.write(doc)
        with open(patch_file, "w", encoding="utf-8", newline="") as fh:
            fh.write(diff)
        done = subprocess.run([patch_program(), "--batch", "--silent", "--fuzz=0", "--no-backup-if-mismatch",
                               "--reject-file", os.path.join(tmp, "rej"), "-o", out, src, "-i", patch_file],
                              capture_output=True, text=True)
        if done.returncode != 0:
            return None
        with open(out, encoding="utf-8", newline="") as fh:
            return fh.read()


def case_formats(case: Case, tokenization: Any, min_span: int = DEFAULT_MIN_SPAN) -> dict[str, Any]:
    """Output tokens and exact round trip of every format for one case."""
    tok = tokenization.encode
    out: dict[str, Any] = {"id": case.id, "full": {"tokens": len(tok(case.gold)), "exact": True}}
    blocks = search_replace_blocks(case.doc, case.gold)
    text = "".join(b.render() for b in blocks)
    applied, _, ambiguous, misapplied = apply_search_replace(case.doc, blocks)
    out["search_replace"] = {"tokens": len(tok(text)), "exact": applied == case.gold,
                             "blocks": len(blocks), "ambiguous": ambiguous, "misapplied": misapplied}
    applied, used, ambiguous, misapplied = apply_search_replace(case.doc, blocks, unique=True)
    out["search_replace_unique"] = {
        "tokens": len(tok("".join(b.render() for b in used))), "exact": applied == case.gold,
        "blocks": len(used), "ambiguous": ambiguous, "misapplied": misapplied}
    diff = unified_diff(case.doc, case.gold)
    a, b = split_lines(case.doc), split_lines(case.gold)
    differs = (difflib.SequenceMatcher(None, a, b).get_opcodes()
               != difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes())
    out["unified_diff"] = {"tokens": len(tok(diff)), "exact": apply_unified_diff(case.doc, diff) == case.gold,
                           "alignment_differs": differs}
    for name, granularity in (("cad_lines", "lines"), ("cad_tokens", "tokens")):
        ops, pieces = oracle_for(case.doc, case.gold, granularity, tokenization, min_span=min_span)
        program_text = render(ops)
        try:
            exact = resolve(parse(program_text, granularity), case.doc, token_pieces=pieces) == case.gold
        except ValueError:
            exact = False
        out[name] = {"tokens": len(tok(program_text)), "exact": exact}
    return out


def run_formats(cases: Sequence[Case], tokenization: Any, *, limit: Optional[int] = None,
                min_span: int = DEFAULT_MIN_SPAN, progress: bool = True) -> dict[str, Any]:
    """Per-case and summary figures of every format (``limit``: first cases only)."""
    patch_program()  # fail before the work, not after
    chosen = list(cases)[:limit] if limit is not None else list(cases)
    results = []
    for case in _common.progress(chosen, desc="formats", unit="case", disable=not progress):
        try:
            results.append(case_formats(case, tokenization, min_span))
        except InputError as err:
            raise InputError(f"case {case.id!r}: {err}") from err
    summary = {}
    for name in FORMATS:
        tokens = [r[name]["tokens"] for r in results]
        summary[name] = {"mean": sum(tokens) / len(tokens) if tokens else 0.0,
                         "median": _common.percentile(tokens, 50), "p95": _common.percentile(tokens, 95),
                         "total": sum(tokens), "exact": sum(r[name]["exact"] for r in results)}
    for key in ("search_replace", "search_replace_unique"):
        sr = [r[key] for r in results]
        summary[key].update(
            blocks=sum(r["blocks"] for r in sr), ambiguous_blocks=sum(r["ambiguous"] for r in sr),
            misapplied_blocks=sum(r["misapplied"] for r in sr),
            cases_with_misapplied=sum(r["misapplied"] > 0 for r in sr))
    summary["unified_diff"]["alignment_differs"] = sum(r["unified_diff"]["alignment_differs"] for r in results)
    return {"n": len(results), "min_span": min_span, "summary": summary, "cases": results,
            "env": _common.environment(patch=_patch_version())}


def _patch_version() -> Optional[str]:
    try:
        done = subprocess.run([patch_program(), "--version"], capture_output=True, text=True)
    except OSError:
        return None
    return done.stdout.splitlines()[0] if done.stdout else None


def format_formats(report: dict[str, Any], name: str = "") -> str:
    """One Markdown table: tokens and exact round trips per format."""
    n = report["n"]
    s = report["summary"]
    labels = {"full": "full regeneration", "search_replace": "search/replace (Aider-style), minimal",
              "search_replace_unique": "search/replace, context until unique",
              "unified_diff": "unified diff (difflib + GNU patch)", "cad_lines": "CaD program (lines)",
              "cad_tokens": f"CaD program (tokens, M={report['min_span']})"}
    lines = [f"| format {name} | tokens mean | median | p95 | total | vs full | exact |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    full = s["full"]["total"] or 1
    for key in FORMATS:
        row = s[key]
        lines.append(f"| {labels[key]} | {row['mean']:,.1f} | {row['median']:,.0f} | {row['p95']:,.0f} "
                     f"| {row['total']:,} | {row['total'] / full:.1%} | {row['exact']}/{n} |")
    sr = s["search_replace"]
    lines += ["", f"search/replace (minimal): {sr['blocks']} blocks, {sr['ambiguous_blocks']} with an "
              f"ambiguous anchor (SEARCH found more than once), {sr['misapplied_blocks']} applied at the "
              f"wrong place (first match) in {sr['cases_with_misapplied']} case(s); with context until "
              f"unique: {s['search_replace_unique']['misapplied_blocks']} misapplied; unified diff "
              f"alignment differs from the oracle's (autojunk) in "
              f"{s['unified_diff']['alignment_differs']} case(s)"]
    return "\n".join(lines)
