"""Resolve a program (ops) against its document into the edited document.

Line programs (``Copy`` and ``Gen``)
------------------------------------
The document's lines are :func:`~cad_outlines.language.syntax.copy_lines` of it
(``document.split("\\n")``, plus an open end, below); nothing else splits a line:

- a document ending in ``"\\n"`` has an empty last line (``"a\\n"`` has the two lines
  ``"a"`` and ``""``), so copying through the last line keeps the final newline;
- a document whose last line holds text (no final newline) gets one more line, empty,
  its **open end** (``"a"`` has the lines ``"a"`` and ``""`` too), so every document
  ends in an empty line, the form models are trained on. A program whose last op is a
  copy through the open end drops the one ``"\\n"`` that line adds, so the document
  stays without a final newline (``resolve([Copy(1, 2)], "a") == "a"``); a copy of it
  anywhere else is an empty line;
- a CRLF document keeps ``"\\r"`` at the end of each line, so copies reproduce the
  ``"\\r\\n"`` endings byte for byte; ``"\\r"``, U+2028 and friends are ordinary text.

``Copy(i, j)`` emits lines ``i..j`` (1-indexed, inclusive) joined by ``"\\n"``.
``Gen(text)`` emits ``text`` with at most ONE leading and ONE trailing ``"\\n"``
removed (its padding: ``<gen>\\nnew line\\n</gen>``); blank lines inside are kept, and
``Gen("")``, ``Gen("\\n")`` and ``Gen("\\n\\n")`` all emit one empty line. The outputs
of the ops are joined by a single ``"\\n"``. So every op contributes whole lines, and
``resolve([Copy(1, n)], d) == d`` for the ``n = len(d.split("\\n"))`` lines of any ``d``
and for the ``n = len(copy_lines(d))`` lines with its open end.

Token programs (``CopyTokens`` and ``Gen``)
-------------------------------------------
``token_pieces`` are the document's per-token byte strings under the model's tokenizer
(``b"".join(token_pieces) == document.encode()`` is checked). ``CopyTokens(a, b)``
emits ``b"".join(token_pieces[a:b + 1])``; ``Gen`` text is taken verbatim (no newline
stripping); the outputs are concatenated with no separator and the bytes are decoded as
UTF-8. A program is a token program if it holds a ``CopyTokens`` op, or if it holds no
copy op at all and ``token_pieces`` is given. Mixing ``Copy`` and ``CopyTokens`` is an
error in both modes.

Modes
-----
``strict`` (default) raises :class:`ResolveError` naming the op index, the op and the
problem, for: ``start > end``, an index below the first (line 1, token 0) or above the
last (line ``n``, the open end included, token ``T - 1``), a non-integer index, and, in token programs, copy
boundaries that leave invalid UTF-8 (e.g. a copy that ends inside a character).

``clipped`` never raises for those; it repairs and warns (:class:`ResolveWarning`,
naming the op index) instead:

1. ``start > end``: the two are swapped;
2. the range is intersected with the valid indices (``[1, n]`` or ``[0, T - 1]``);
3. if nothing is left, the op is dropped: it emits nothing and takes no separator;
4. invalid UTF-8 in a token program decodes to U+FFFD replacement characters.

Structural errors (mixed granularities, a token copy without ``token_pieces``,
pieces that do not spell the document, an unknown op type) raise in both modes.
"""

from __future__ import annotations

import warnings
from typing import Literal, Optional, Sequence

from ..errors import ResolveError
from .program import Copy, CopyTokens, Gen, Op
from .syntax import copy_lines, open_ended

Mode = Literal["strict", "clipped"]


class ResolveWarning(UserWarning):
    """A clipped-mode repair of an op (swapped, clipped or dropped range, bad UTF-8)."""


def gen_body(text: str) -> str:
    """What a ``Gen`` emits in a line program: at most one leading and one trailing
    ``"\\n"`` removed."""
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def gen_text_for_lines(lines: Sequence[str]) -> str:
    """The ``Gen`` text that emits exactly ``lines`` in a line program (padded form)."""
    return "\n" + "\n".join(lines) + "\n"


def join_gens(ops: Sequence[Op], granularity: Literal["lines", "tokens"] = "lines") -> list[Op]:
    """``ops`` with every run of adjacent gens joined into one gen that emits the same text.

    Program text never holds two gens in a row (the grammar's start rule); ops read
    leniently from a reply, or built by hand, may. In a line program the joined gen
    holds the runs' lines (:func:`gen_text_for_lines`), in a token program their text.
    """
    out: list[Op] = []
    for op in ops:
        if isinstance(op, Gen) and out and isinstance(out[-1], Gen):
            before = out[-1].text
            text = (before + op.text if granularity == "tokens"
                    else gen_text_for_lines([gen_body(before), gen_body(op.text)]))
            out[-1] = Gen(text)
        else:
            out.append(op)
    return out


def resolve(
    ops: Sequence[Op],
    document: str,
    mode: Mode = "strict",
    *,
    token_pieces: Optional[Sequence[bytes]] = None,
) -> str:
    """Apply a program to a document.

    Parameters
    ----------
    ops
        The program's ops (see :mod:`cad_outlines.language.program`).
    document
        The document the program edits.
    mode
        ``"strict"`` raises :class:`ResolveError` on a bad op; ``"clipped"`` repairs it
        and warns (see the module docstring for the exact rules).
    token_pieces
        Per-token byte strings of ``document``; required by token programs.

    Returns
    -------
    str
        The edited document.
    """
    if mode not in ("strict", "clipped"):
        raise ValueError(f"mode must be 'strict' or 'clipped', got {mode!r}")
    kinds: dict[type, int] = {}
    for index, op in enumerate(ops):
        if not isinstance(op, (Copy, CopyTokens, Gen)):
            raise ResolveError(index, op, f"not an op (got {type(op).__name__})")
        if not isinstance(op, Gen):
            kinds.setdefault(type(op), index)
            if len(kinds) > 1:
                raise ResolveError(
                    index, op, "a program may not mix line copies and token copies")
    if CopyTokens in kinds or (not kinds and token_pieces is not None):
        if token_pieces is None:
            index = kinds[CopyTokens]
            raise ResolveError(index, ops[index], "token copies need the document's token_pieces")
        return _resolve_tokens(ops, document, token_pieces, mode)
    return _resolve_lines(ops, document, mode)


def _bounds(index: int, op: Copy | CopyTokens, lo: int, hi: int, unit: str,
            mode: Mode) -> Optional[tuple[int, int]]:
    """Check (strict) or repair (clipped) one copy range; None means drop the op."""
    start, end = op.start, op.end
    if not (type(start) is int and type(end) is int):
        # Not repairable: a non-integer index is a caller bug, not a model slip.
        raise ResolveError(index, op, f"{unit} indices must be integers")
    valid = f"the document's {unit}s {lo}-{hi}" if hi >= lo else f"the document (it has no {unit}s)"
    if mode == "strict":
        if start > end:
            raise ResolveError(index, op, f"{unit} range {start}-{end} has start > end")
        if start < lo or end > hi:
            raise ResolveError(index, op, f"{unit} range {start}-{end} is outside {valid}")
        return start, end
    repairs = []
    if start > end:
        start, end = end, start
        repairs.append("swapped start > end")
    clipped = max(start, lo), min(end, hi)
    if clipped[0] > clipped[1]:
        warnings.warn(f"op {index} {op!r}: {unit} range {start}-{end} does not meet {valid}; "
                      "op dropped", ResolveWarning, stacklevel=4)
        return None
    if clipped != (start, end):
        repairs.append(f"clipped to {clipped[0]}-{clipped[1]} ({valid})")
    if repairs:
        warnings.warn(f"op {index} {op!r}: " + "; ".join(repairs), ResolveWarning, stacklevel=4)
    return clipped


def _resolve_lines(ops: Sequence[Op], document: str, mode: Mode) -> str:
    lines, open_end = copy_lines(document), open_ended(document)
    out: list[str] = []
    through_open_end = False  # the last op that emitted copied the open end
    for index, op in enumerate(ops):
        if isinstance(op, Gen):
            out.append(gen_body(op.text))
            through_open_end = False
            continue
        span = _bounds(index, op, 1, len(lines), "line", mode)
        if span is not None:
            out.append("\n".join(lines[span[0] - 1:span[1]]))
            through_open_end = open_end and span[1] == len(lines)
    text = "\n".join(out)
    return text[:-1] if through_open_end and text.endswith("\n") else text


def _resolve_tokens(ops: Sequence[Op], document: str, pieces: Sequence[bytes],
                    mode: Mode) -> str:
    if b"".join(pieces) != document.encode("utf-8"):
        raise ValueError("token_pieces do not spell the document "
                         "(b''.join(token_pieces) != document.encode('utf-8'))")
    chunks: list[bytes] = []
    owner: list[int] = []  # op index of each chunk, to name the op on a decode error
    for index, op in enumerate(ops):
        if isinstance(op, Gen):
            chunks.append(op.text.encode("utf-8"))
        else:
            span = _bounds(index, op, 0, len(pieces) - 1, "token", mode)
            if span is None:
                continue
            chunks.append(b"".join(pieces[span[0]:span[1] + 1]))
        owner.append(index)
    data = b"".join(chunks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        index = _op_at(err.start, chunks, owner)
        problem = (f"copy boundary splits a UTF-8 character: invalid byte(s) "
                   f"{data[err.start:err.end]!r} at byte {err.start} of the output")
        if mode == "strict":
            raise ResolveError(index, ops[index], problem) from None
        warnings.warn(f"op {index} {ops[index]!r}: {problem}; replaced by U+FFFD",
                      ResolveWarning, stacklevel=3)
        return data.decode("utf-8", errors="replace")


def _op_at(offset: int, chunks: list[bytes], owner: list[int]) -> int:
    """Index of the op whose output holds byte ``offset`` of the concatenation."""
    end = 0
    for chunk, index in zip(chunks, owner):
        end += len(chunk)
        if offset < end:
            return index
    return owner[-1]
