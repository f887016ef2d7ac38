"""Oracle programs: the ops that turn a document into a known gold edit.

``oracle_program`` works on lines (the Copy-as-Decode paper's oracle):
``difflib.SequenceMatcher(None, doc_lines, gold_lines, autojunk=False)`` over
``split("\\n")``; each matching block becomes a :class:`Copy` and each non-matching
gold-side run becomes ``Gen("\\n" + "\\n".join(run) + "\\n")`` (padded, see
:mod:`cad_outlines.resolver`). ``oracle_tokens`` works on token ids. Both satisfy the
round trip ``resolve(program, doc) == gold`` exactly.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import Callable, Optional, Sequence, Tuple

from .program import Copy, CopyTokens, Gen, Op
from .resolver import gen_text_for_lines, split_lines

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
    matcher = difflib.SequenceMatcher(None, doc_lines, gold_lines, autojunk=False)
    # Segments of gold lines, in order: ("copy", doc_start, doc_end) or ("gen", lines).
    segments: list[tuple] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            segments.append(("copy", i1 + 1, i2))
        elif j2 > j1:  # "replace"/"insert"; a "delete" has no gold side
            segments.append(("gen", gold_lines[j1:j2]))
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
