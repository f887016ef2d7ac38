"""Oracle programs: the ops that turn a document into a known gold edit.

``oracle_program`` works on lines (the Copy-as-Decode paper's oracle):
``difflib.SequenceMatcher(None, doc_lines, gold_lines, autojunk=False)`` over
``split("\\n")``; each matching block becomes a :class:`Copy` and each non-matching
gold-side run becomes ``Gen("\\n" + "\\n".join(run) + "\\n")`` (padded, see
:mod:`cad_outlines.language.resolver`). ``oracle_tokens`` works on token ids. Both satisfy the
round trip ``resolve(program, doc) == gold`` exactly.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter, defaultdict
from typing import Callable, Optional, Sequence, Tuple

from .program import Copy, CopyTokens, Gen, Op
from .resolver import gen_text_for_lines
from .syntax import split_lines

#: ``(tag_cost, span_cost)``: decode steps of a copy op's tag, and of text if generated.
CostModel = Tuple[Callable[[Op], int], Callable[[str], int]]


def oracle_program(doc: str, gold: str, cost: Optional[CostModel] = None) -> list[Op]:
    """Line-granularity oracle program for ``doc -> gold``.

    Parameters
    ----------
    doc, gold
        Text before and after the edit.
    cost
        Optional ``(tag_cost, span_cost)`` pair of callables: ``tag_cost(op)`` is the
        number of decode steps the copy op's tag takes (e.g. the token count of
        ``render_op(op)``) and ``span_cost(text)`` the number the copied text would take
        if generated (e.g. its token count). A copy whose tag costs strictly more than
        its text is emitted as generated text instead, and adjacent gens are merged.
        Without ``cost`` every matching block is copied (the paper's oracle).

    Returns
    -------
    list[Op]
        ``Copy`` and padded ``Gen`` ops; ``resolve(ops, doc) == gold``.
    """
    doc_lines, gold_lines = split_lines(doc), split_lines(gold)
    # Segments of gold lines, in order: ("copy", doc_start, doc_end) or ("gen", lines).
    segments: list[tuple] = []
    j = 0  # next gold line not yet in a segment
    for i1, j1, size in line_matches(doc_lines, gold_lines):
        if j1 > j:  # gold lines between two matches; doc lines there are deleted
            segments.append(("gen", gold_lines[j:j1]))
        segments.append(("copy", i1 + 1, i1 + size))
        j = j1 + size
    if j < len(gold_lines):
        segments.append(("gen", gold_lines[j:]))
    if cost is not None:
        tag_cost, span_cost = cost
        segments = [
            ("gen", doc_lines[seg[1] - 1:seg[2]])
            if seg[0] == "copy" and tag_cost(Copy(seg[1], seg[2]))
            > span_cost("\n".join(doc_lines[seg[1] - 1:seg[2]]))
            else seg
            for seg in segments
        ]
    ops: list[Op] = []
    pending: list[str] = []  # gold lines of the gen being built (adjacent gens merge)
    for seg in segments:
        if seg[0] == "gen":
            pending.extend(seg[1])
            continue
        if pending:
            ops.append(Gen(gen_text_for_lines(pending)))
            pending = []
        ops.append(Copy(seg[1], seg[2]))
    if pending:
        ops.append(Gen(gen_text_for_lines(pending)))
    return ops


#: Most line-pair comparisons ``difflib.SequenceMatcher`` may make on one region
#: (sum over distinct lines of count in doc x count in gold; the corpora's largest
#: is 18,492). Its
#: ``find_longest_match`` scans, for every doc line, every gold position of that line, so
#: repeated lines make it quadratic: ``"x\\n" * 10000`` against itself took 129 s.
MATCH_BUDGET = 50_000

#: How far (in doc + gold lines) the greedy walk of an anchorless region looks for the
#: next equal pair after a mismatch.
_LOOKAHEAD = 24


def line_matches(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int]]:
    """Matching blocks ``(i, j, size)`` of two line lists, in order, none adjacent.

    The blocks are those of ``difflib.SequenceMatcher(None, a, b, autojunk=False)``
    whenever that is cheap, i.e. on every region whose pair count is within
    :data:`MATCH_BUDGET`: all edits of the developer corpora. On a costlier region the
    work is bounded instead of quadratic:

    1. the common prefix and suffix are matched first (linear);
    2. lines that occur exactly once in both sides anchor the alignment (their longest
       increasing chain, as in patience diff), and the regions between anchors are
       matched recursively;
    3. a region with no anchor (repeated lines only) is matched by a greedy walk along
       the diagonal that, at a mismatch, resumes at the nearest equal pair; its work is
       linear in the region's length.

    Every block is a true match (``a[i:i+size] == b[j:j+size]``), so the oracle's
    round trip ``resolve(program, doc) == gold`` holds on every path.
    """
    blocks: list[tuple[int, int, int]] = []
    _match_region(a, b, 0, len(a), 0, len(b), blocks)
    merged: list[tuple[int, int, int]] = []
    for i, j, size in blocks:
        if size == 0:
            continue
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + size)
        else:
            merged.append((i, j, size))
    return merged


def _pair_count(a: Sequence[str], b: Sequence[str]) -> int:
    counts = Counter(a)
    return sum(counts[line] for line in b)


def _match_region(a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int,
                  out: list[tuple[int, int, int]]) -> None:
    """Append the matching blocks of ``a[alo:ahi]`` vs ``b[blo:bhi]`` to ``out``, in order."""
    if alo >= ahi or blo >= bhi:
        return
    sub_a, sub_b = a[alo:ahi], b[blo:bhi]
    if _pair_count(sub_a, sub_b) <= MATCH_BUDGET:
        matcher = difflib.SequenceMatcher(None, sub_a, sub_b, autojunk=False)
        out.extend((alo + i, blo + j, n) for i, j, n in matcher.get_matching_blocks() if n)
        return
    # 1. common prefix and suffix
    head = 0
    while alo + head < ahi and blo + head < bhi and a[alo + head] == b[blo + head]:
        head += 1
    tail = 0
    while ahi - tail > alo + head and bhi - tail > blo + head and a[ahi - 1 - tail] == b[bhi - 1 - tail]:
        tail += 1
    if head or tail:
        out.append((alo, blo, head))
        _match_region(a, b, alo + head, ahi - tail, blo + head, bhi - tail, out)
        out.append((ahi - tail, bhi - tail, tail))
        return
    # 2. anchors: lines unique on both sides, longest chain increasing in both
    anchors = _unique_anchors(sub_a, sub_b)
    if anchors:
        i, j = alo, blo
        for ai, bj in anchors:
            _match_region(a, b, i, alo + ai, j, blo + bj, out)
            out.append((alo + ai, blo + bj, 1))
            i, j = alo + ai + 1, blo + bj + 1
        _match_region(a, b, i, ahi, j, bhi, out)
        return
    # 3. no anchor: a bounded greedy walk
    _match_greedy(a, b, alo, ahi, blo, bhi, out)


def _unique_anchors(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    count_a, count_b = Counter(a), Counter(b)
    where_a = {line: i for i, line in enumerate(a) if count_a[line] == 1}
    pairs = [(where_a[line], j) for j, line in enumerate(b)
             if count_b[line] == 1 and line in where_a]  # increasing in j
    # Longest chain increasing in i too (patience sorting, O(k log k)).
    tops: list[int] = []  # tops[k]: smallest i ending a chain of length k + 1
    top_at: list[int] = []  # index into pairs of that chain's end
    back: list[int] = [-1] * len(pairs)
    for index, (i, _) in enumerate(pairs):
        k = bisect.bisect_left(tops, i)
        if k == len(tops):
            tops.append(i)
            top_at.append(index)
        else:
            tops[k], top_at[k] = i, index
        back[index] = top_at[k - 1] if k else -1
    chain: list[tuple[int, int]] = []
    index = top_at[-1] if top_at else -1
    while index >= 0:
        chain.append(pairs[index])
        index = back[index]
    return chain[::-1]


def _match_greedy(a: Sequence[str], b: Sequence[str], alo: int, ahi: int, blo: int, bhi: int,
                  out: list[tuple[int, int, int]]) -> None:
    # Walk both sides together; at a mismatch, resynchronise at the nearest equal pair
    # (smallest i' + j' within _LOOKAHEAD), else treat _LOOKAHEAD lines of each side as
    # replaced. O((n + m) * _LOOKAHEAD**2) at worst, and near-diagonal alignments -- the
    # right ones for repetitive text -- are found exactly.
    i, j = alo, blo
    while i < ahi and j < bhi:
        if a[i] == b[j]:
            start_i, start_j = i, j
            while i < ahi and j < bhi and a[i] == b[j]:
                i, j = i + 1, j + 1
            out.append((start_i, start_j, i - start_i))
            continue
        found = None
        for distance in range(1, _LOOKAHEAD + 1):
            for p in range(distance + 1):
                q = distance - p
                if i + p < ahi and j + q < bhi and a[i + p] == b[j + q]:
                    found = (i + p, j + q)
                    break
            if found:
                break
        i, j = found if found else (i + _LOOKAHEAD, j + _LOOKAHEAD)


def utf8_boundaries(data: bytes) -> list[bool]:
    """``ok[k]`` is True when byte offset ``k`` (``0..len(data)``) starts a character."""
    # In valid UTF-8 a character starts at every byte that is not a continuation byte
    # (0b10xxxxxx), and at the end of the data.
    return [(b & 0xC0) != 0x80 for b in data] + [True]


def oracle_tokens(
    doc_ids: Sequence[int],
    gold_ids: Sequence[int],
    *,
    min_span: int,
    doc_pieces: Sequence[bytes],
    gold_pieces: Sequence[bytes],
) -> list[Op]:
    """Token-granularity oracle program: greedy longest matches of ``min_span`` or more.

    Scanning the gold tokens left to right, at each position the longest run of gold
    token ids that also occurs in ``doc_ids`` (anywhere: a copy may reorder or repeat
    document text) becomes ``CopyTokens``, provided it is at least ``min_span`` tokens
    long. A copy may only start and end where the byte offset is a UTF-8 character
    boundary in both the document and the gold text; a run that does not is shrunk to
    the longest one that does. Gold tokens not covered by a copy become ``Gen`` ops
    holding their decoded text (verbatim, no padding). Ties between equally long runs
    go to the one that continues the previous copy, then to the earliest.

    Parameters
    ----------
    doc_ids, gold_ids
        Token ids of the document and of the gold text (same tokenizer).
    min_span
        Shortest copy, in tokens (``>= 1``).
    doc_pieces, gold_pieces
        Per-token byte strings: ``b"".join(doc_pieces)`` is the document's UTF-8.

    Returns
    -------
    list[Op]
        ``CopyTokens`` and ``Gen`` ops with
        ``resolve(ops, doc, token_pieces=doc_pieces) == gold``.
    """
    if min_span < 1:
        raise ValueError(f"min_span must be >= 1, got {min_span}")
    if len(doc_ids) != len(doc_pieces) or len(gold_ids) != len(gold_pieces):
        raise ValueError("each id list needs one byte piece per id")
    doc_off = _offsets(doc_pieces)
    gold_off = _offsets(gold_pieces)
    doc_ok = utf8_boundaries(b"".join(doc_pieces))
    gold_bytes = b"".join(gold_pieces)
    gold_ok = utf8_boundaries(gold_bytes)
    doc_at = [doc_ok[o] for o in doc_off]    # token boundary k is a char boundary
    gold_at = [gold_ok[o] for o in gold_off]

    # Candidate starts: doc positions whose next min_span ids equal the gold's there.
    index: dict[tuple, list[int]] = defaultdict(list)
    for a in range(len(doc_ids) - min_span + 1):
        index[tuple(doc_ids[a:a + min_span])].append(a)

    ops: list[Op] = []
    gen_from = 0  # first gold token not yet emitted
    prev_end = -1  # doc position after the previous copy
    g = 0
    while g < len(gold_ids):
        best_len, best_a = 0, -1
        if gold_at[g] and g + min_span <= len(gold_ids):
            for a in index.get(tuple(gold_ids[g:g + min_span]), ()):
                if not doc_at[a]:
                    continue
                length = _match_length(doc_ids, a, gold_ids, g, min_span)
                # Shrink to the longest run that ends on a char boundary on both sides.
                while length >= min_span and not (doc_at[a + length] and gold_at[g + length]):
                    length -= 1
                if length > best_len or (length == best_len and a == prev_end):
                    best_len, best_a = length, a
        if best_len >= min_span:
            if gen_from < g:
                ops.append(Gen(gold_bytes[gold_off[gen_from]:gold_off[g]].decode("utf-8")))
            ops.append(CopyTokens(best_a, best_a + best_len - 1))
            g += best_len
            gen_from = g
            prev_end = best_a + best_len
        else:
            g += 1
    if gen_from < len(gold_ids):
        ops.append(Gen(gold_bytes[gold_off[gen_from]:].decode("utf-8")))
    return ops


def _offsets(pieces: Sequence[bytes]) -> list[int]:
    """Byte offset of each token boundary: ``len(pieces) + 1`` entries."""
    out = [0]
    for piece in pieces:
        out.append(out[-1] + len(piece))
    return out


def _match_length(doc: Sequence[int], a: int, gold: Sequence[int], g: int, known: int) -> int:
    """Length of the common run of ``doc[a:]`` and ``gold[g:]``; ``known`` ids match."""
    n = known
    limit = min(len(doc) - a, len(gold) - g)
    while n < limit and doc[a + n] == gold[g + n]:
        n += 1
    return n
