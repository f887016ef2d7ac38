"""Lazy edit snippets: the changed region of a file with a few context lines, gaps marked by
a comment in the file's own syntax (``# ... existing code ...``), as editors send them to
apply models (Cursor, Morph, Relace).

Conventions (the training mix and the apply entry points share them):

* a **marker line** (:func:`is_marker`) stands for unchanged lines of the original that the
  snippet does not repeat; a snippet starts or ends with one when it does not reach the
  file's first or last line;
* every other line of the snippet is a line of the edited file, in order;
* a **deletion** is shown by the context lines on either side of the deleted lines written
  next to each other, with no marker between them (a marker there would mean "unchanged
  code here");
* an update may carry an instruction beside it (:func:`update_instruction`).

Model-free: the mix builds snippets from a document and its gold (:func:`make_snippet`),
and the prompt carries them through :func:`update_instruction`.
"""

from __future__ import annotations

import difflib
import re
from pathlib import PurePath
from typing import Sequence

from ..errors import InputError

__all__ = ["COMMENT_STYLES", "comment_style", "is_marker", "make_snippet", "marker", "marker_lines",
           "update_instruction", "update_of"]

#: Comment syntax by file suffix: (opening, closing).
COMMENT_STYLES: dict[str, tuple[str, str]] = {
    **dict.fromkeys((".py", ".sh", ".rb", ".yaml", ".yml", ".toml", ".r", ".pl", ".cfg", ".txt"), ("#", "")),
    **dict.fromkeys((".c", ".h", ".cc", ".cpp", ".hpp", ".cu", ".js", ".ts", ".tsx", ".jsx", ".java",
                     ".go", ".rs", ".swift", ".kt", ".cs", ".m", ".scala", ".dart", ".zig"), ("//", "")),
    **dict.fromkeys((".md", ".html", ".htm", ".xml", ".svg", ".vue"), ("<!--", "-->")),
    **dict.fromkeys((".sql", ".lua", ".hs", ".elm", ".ada"), ("--", "")),
    ".css": ("/*", "*/"),
}
#: How far a region's context may widen to reach a line that occurs once in the document.
MAX_WIDEN = 6
_MARKER_WORDS = {"#": "code", "//": "code", "--": "code", "/*": "code", "<!--": "content"}

#: A whole line that is only a comment saying "... existing code ..." (or "rest of the file",
#: "unchanged", "…"), in one of the comment syntaxes above (block comments closed on the
#: line), indented or not. Code that merely mentions the words is not a marker.
_BODY = (r"(?:\.\.\.|…)\s*(?:existing|unchanged|rest of(?: the)?|keep(?: the)?|previous|remaining|other)"
         r"[\w\s]*?(?:\.\.\.|…)?")
_MARKER = re.compile(rf"^\s*(?:(?:#|//|--|;)\s*{_BODY}|/\*\s*{_BODY}\s*\*/|<!--\s*{_BODY}\s*-->)\s*$", re.IGNORECASE)


def comment_style(path: str | None) -> tuple[str, str]:
    """The comment syntax for a file name (``"#"`` when the suffix is unknown)."""
    suffix = PurePath(path).suffix.lower() if path else ""
    return COMMENT_STYLES.get(suffix, ("#", ""))


def marker(path: str | None = None, indent: str = "") -> str:
    """The marker line for ``path``'s syntax: ``# ... existing code ...``, ``<!-- ... existing content ... -->``."""
    opening, closing = comment_style(path)
    text = f"{indent}{opening} ... existing {_MARKER_WORDS.get(opening, 'code')} ..."
    return f"{text} {closing}" if closing else text


def is_marker(line: str) -> bool:
    """Whether ``line`` is a gap marker in any supported comment syntax."""
    return bool(_MARKER.match(line))


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def make_snippet(doc: Sequence[str], gold: Sequence[str], path: str | None = None,
                 context: int = 2) -> str | None:
    """The lazy snippet that turns ``doc`` into ``gold`` (lists of lines without
    newlines), with ``context`` unchanged lines around each change; ``None`` when they
    are equal, or when a kept line of the edited file would read as a marker.

    Each end of a region widens (up to :data:`MAX_WIDEN` lines) until its outermost context
    line occurs once in the document, so a reader can place it; regions that touch share
    one; a marker (indented like the line after the gap) stands for each gap of unchanged lines.
    """
    if any(is_marker(line) for line in gold):
        return None
    ops = [op for op in difflib.SequenceMatcher(None, list(doc), list(gold), autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if not ops:
        return None
    counts: dict[str, int] = {}
    for line in doc:
        counts[line] = counts.get(line, 0) + 1

    def anchor(line: str) -> bool:  # a context line a reader can find in the document at once
        return bool(line.strip()) and counts.get(line, 0) == 1

    # regions in gold coordinates: [j1 - context, j2 + context), each end widened (by at most
    # MAX_WIDEN lines) until its outermost context line occurs once in the document
    regions: list[list[int]] = []
    for _, _, _, j1, j2 in ops:
        lo, hi = max(0, j1 - context), min(len(gold), j2 + context)
        for _ in range(MAX_WIDEN):
            if lo == 0 or anchor(gold[lo]):
                break
            lo -= 1
        for _ in range(MAX_WIDEN):
            if hi == len(gold) or anchor(gold[hi - 1]):
                break
            hi += 1
        if regions and lo <= regions[-1][1]:
            regions[-1][1] = max(regions[-1][1], hi)
        else:
            regions.append([lo, hi])
    out: list[str] = []
    previous = 0
    for lo, hi in regions:
        if lo > previous:
            out.append(marker(path, _indent(gold[lo]) if lo < len(gold) else ""))
        out.extend(gold[lo:hi])
        previous = hi
    if previous < len(gold):
        out.append(marker(path, _indent(gold[previous])))
    return "\n".join(out) + "\n"


def marker_lines(snippet: str) -> list[int]:
    """The 1-indexed numbers of ``snippet``'s marker lines."""
    return [i for i, line in enumerate(snippet.split("\n"), 1) if is_marker(line)]


def update_instruction(snippet: str, instruction: str | None = None, path: str | None = None) -> str:
    """The instruction text that carries an update snippet into a prompt.

    The snippet goes where an instruction goes (the adapters' prompt layout, after the
    document in the compact style), fenced by ``<update>`` tags so that its own lines
    cannot be read as the request; ``instruction`` (optional) says what the update is for.
    The sentence quotes the snippet's own first marker (else the marker of ``path``'s
    comment syntax). The training mix and every apply entry point (Python, CLI, HTTP) lay
    a snippet out with this one function.

    Raises
    ------
    InputError
        When the snippet holds nothing but whitespace and marker lines.
    """
    lines = snippet.split("\n")
    found = marker_lines(snippet)
    if not any(line.strip() for k, line in enumerate(lines, 1) if k not in found):
        raise InputError("the update snippet is empty: give the changed lines with a few lines around them")
    quoted = lines[found[0] - 1].strip() if found else marker(path).strip()
    head = []
    if instruction and instruction.strip():
        head.append(instruction.strip())
    head.append(_UPDATE_SENTENCE.format(quoted))
    body = snippet if snippet.endswith("\n") else snippet + "\n"
    return "\n".join(head) + f"\n<update>\n{body}</update>"


_UPDATE_SENTENCE = "Apply this update to the document; `{}` stands for lines kept as they are:"
_UPDATE_RE = re.compile(
    "(?:^|\n)" + re.escape(_UPDATE_SENTENCE).replace(re.escape("{}"), "[^`\n]*") + "\n<update>\n(.*)</update>\\Z",
    re.DOTALL)


def update_of(instruction: str) -> str | None:
    """The snippet an :func:`update_instruction` carries (ending in a newline), or
    ``None`` when ``instruction`` is not one: what the apply path's merge drafts from
    when a stored instruction is replayed (``bench quality``'s snippet cases)."""
    match = _UPDATE_RE.search(instruction)
    return match.group(1) if match else None


def merge(document: str, snippet: str) -> str | None:
    """The literal reading of ``snippet`` against ``document`` (the conventions above), or
    ``None`` where the snippet cannot be placed unambiguously in order.

    A snippet that does not start with a marker but cannot start the file (its first line
    is found further down) breaks the convention the way lazy snippets written by people
    and models do, by leaving out the edge markers: it is read as if a marker preceded it,
    and, when it holds no marker at all, as if one followed it too (the lines after it
    kept). Without this reading such a snippet has no merge and the model applies it alone.

    Each run of snippet lines between markers is placed where its first line found in the
    document (after the previous run) and its last one found after that occur: the
    document's lines between those two are replaced by the run; lines before the first
    run or after the last are kept only behind a marker. New lines at a run's edge,
    before its first line found or after its last, are inserted there, unless the edge
    line resembles a document line beside the anchor (:data:`REWRITE_SIMILARITY`, within
    as many lines as the run has new ones there): then it rewrites the lines up to that
    one (a changed signature written without the line above it). No model is involved: a program
    that follows this reading is what an apply model most often writes, so it serves as a
    draft of the program (and as a measure of how literal a set of snippets is).
    """
    literal = _merge(document, snippet, implied=False)
    if literal is not None:
        return literal
    return _merge(document, snippet, implied=True)


#: A snippet's new edge line rewrites a document line beside its anchor when the two are at
#: least this similar (``difflib``'s ratio of the stripped lines): a lazy snippet that
#: starts with a changed signature, instead of the unchanged line above it. Chosen on
#: snippets of the corpora's train-split commits with no context on one side
#: (``scripts/snippet_merge_check.py``; docs/generator.md): 128 of them gained, 9 lost (new
#: lines inserted beside look-alikes: imports, table rows); 0.65 and 0.7 lose a few less
#: and gain less, and miss a parameter added to a short signature.
REWRITE_SIMILARITY = 0.6


def _rewritten(doc: Sequence[str], edge: str, candidates: range, default: int) -> int:
    """The document line that ``edge`` (the run's new first or last line) rewrites: the
    nearest one in ``candidates`` (the lines beside the run's anchor, at most as many as
    the run's new lines there) that it resembles; ``default`` when none does (the new
    lines are inserted, the convention's reading)."""
    if not edge.strip():
        return default
    for j in candidates:
        if doc[j].strip() and difflib.SequenceMatcher(None, edge.strip(), doc[j].strip()).ratio() >= REWRITE_SIMILARITY:
            return j
    return default


def _merge(document: str, snippet: str, implied: bool) -> str | None:
    """:func:`merge`'s reading; ``implied``: with the edge markers a lazy snippet left out."""
    doc = document.split("\n")
    tail = doc[-1] == ""
    if tail:
        doc = doc[:-1]
    lines = snippet.split("\n")
    if lines and lines[-1] == "":
        lines = lines[:-1]
    if implied:
        texts = [line for line in lines if line.strip()]
        if not texts or is_marker(texts[0]):
            return None  # it starts with a marker: the literal reading was the only one
        if not any(map(is_marker, texts)):
            lines = [*lines, marker()]
        lines = [marker(), *lines]
    runs: list[tuple[bool, list[str]]] = []  # (a marker before it, the run's lines)
    gap = False
    for line in lines:
        if is_marker(line):
            gap = True
        elif runs and not gap:
            runs[-1][1].append(line)
        else:
            runs.append((gap, [line]))
            gap = False
    trailing_gap = gap
    if not runs:
        return None
    out: list[str] = []
    pos = 0
    for index, (after_gap, run) in enumerate(runs):
        found = [(k, doc.index(line, pos)) for k, line in enumerate(run) if line.strip() and line in doc[pos:]]
        if not found:
            if after_gap or pos:  # new text with nothing to place it by
                return None
            start = end = pos  # no marker before the first run: it starts the file
        else:
            first_k, start = found[0]
            if not after_gap and index == 0 and first_k == 0 and start != 0:
                return None  # the first run must start the file when no marker precedes it
            if not after_gap and index == 0:
                start = 0
            last = [(k, j) for k, j in found if j >= start]
            end = last[-1][1] + 1
            if after_gap and first_k:  # new lines before the run's first anchor
                start = _rewritten(doc, run[0], range(start - 1, max(pos, start - first_k) - 1, -1), start)
            if last[-1][0] < len(run) - 1 and (index < len(runs) - 1 or trailing_gap):  # new lines after its last
                tail_lines = len(run) - 1 - last[-1][0]
                end = _rewritten(doc, run[-1], range(end, min(len(doc), end + tail_lines)), end - 1) + 1
        is_last = index == len(runs) - 1
        if is_last and not trailing_gap:
            end = len(doc)  # no marker after the last run: it ends the file
        out.extend(doc[pos:start] if after_gap else [])
        out.extend(run)
        pos = end
    if trailing_gap:
        out.extend(doc[pos:])
    return "\n".join(out) + ("\n" if tail else "")
