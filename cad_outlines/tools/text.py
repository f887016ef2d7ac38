"""The text-only path: models that cannot splice write the program as text.

A hosted chat model (any OpenAI-compatible API) gets :func:`prompt_for`'s messages,
writes a program in its reply, and :func:`apply_reply` finds that program, reads it and
resolves it against the document. Nothing is spliced: the copies are applied afterwards,
so the model still saves every token it copies, but not the forward passes.

Finding the program
-------------------
A candidate starts at each ``<program>`` of the reply that is not inside an inline code
span (`` `<program>` `` in prose that talks about the format). A candidate inside a fenced
block (````` or ``~~~``) is read up to the end of that block. One candidate is the
program; several that read to the same ops are one program repeated; several that
differ are an :class:`AmbiguousReplyError`.

Lenient where the intent is unambiguous
---------------------------------------
With ``lenient=True`` (the default) these are read as the canonical program and listed
in :attr:`AppliedReply.repairs`:

* whitespace (newlines, indentation) between ops, and around ``=`` or the range in a
  copy tag;
* a copy tag with single quotes or no quotes (``lines='3-5'``, ``lines=3-5``), with a
  space before ``/>``, closed as ``<copy ...></copy>`` or not closed before the next op,
  ``line=`` for ``lines=``, an en or em dash or ``..`` for ``-``, one number for a
  one-line range (``lines="4"``);
* ``<gen/>`` (empty new text) and ``<gen >``;
* two gens in a row, read as one gen holding the lines of both (program text never
  holds two: :func:`~cad_outlines.language.resolver.join_gens`);
* a missing ``</program>`` when the ops are complete where the reply (or its fenced
  block) ends, or where prose starts after the last op.

Everything else is an error, never a guess: a ``<gen>`` that is not closed (the text
might go on), text between ops, a copy holding text before ``</copy>``, token copies
(text mode numbers lines only), a malformed range such as ``3-5,7``. Copy ranges outside
the document, or with start > end, are :class:`CopyRangeError` in ``mode="strict"`` and
repaired with a warning in ``mode="clipped"`` (the resolver's modes).

Gen text is read like ``cad-outlines apply`` reads it: the body between ``<gen>`` and
``</gen>`` with the grammar's escape (``⟨`` before a reserved literal) decoded.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Literal

from ..language import escape, program
from ..adapters._view import format_statement, number_lines, user_content
from ..language.program import Copy, Gen, Op
from ..language.resolver import ResolveError, ResolveWarning, join_gens, resolve
# The reply errors live in cad_outlines.errors; re-exported here, their old home.
from ..errors import (AmbiguousReplyError, CopyRangeError, MalformedProgramError, NoProgramError,  # noqa: F401
                      ReplyError)
from ..language.syntax import (COPY_ATTRIBUTE, COPY_OPEN, COPY_TAG, GEN_CLOSE, GEN_OPEN, GEN_TAG,
                               PROGRAM_CLOSE, PROGRAM_OPEN, PROGRAM_TAG, RANGE_SEPARATOR, copy_lines,
                               copy_tag)

Mode = Literal["strict", "clipped"]

# --- errors ---------------------------------------------------------------------------


# --- prompt ---------------------------------------------------------------------------

_SYSTEM = (
    "You edit documents. Do not rewrite the document: reply with an edit program that "
    "rebuilds the edited document from the original.\n\n{statement}\n\n"
    "Rules: copy every unchanged run of lines with one {copy} (i <= j, "
    "numbers from the numbered view); put changed or new lines in {gen}, each on "
    "its own line; ops follow the order of the edited document; to delete lines, do not "
    "copy them. Write the program once, in a ```xml fenced block; nothing else goes in "
    "the block.\n\nExample. Document:\n{example_doc}\nInstruction: rename b to c in line 2.\n"
    "Reply:\n```xml\n{example_program}\n```"
)
_EXAMPLE_DOC = "def f(a, b):\n    return a + b\n"
_EXAMPLE_PROGRAM = program.render([Copy(1, 1), Gen("\n    return a + c\n"), Copy(3, 3)])


def prompt_for(document: str, instruction: str, family: str | None = None) -> list[dict[str, str]]:
    """Chat messages asking a model for a line program that edits ``document``.

    Parameters
    ----------
    document
        The text to edit (shown with numbered lines).
    instruction
        What to change.
    family
        ``None``: a general chat model that has never seen the format; a system message
        explains it, with a worked example. An adapter family name
        (:data:`cad_outlines.adapters.ADAPTERS`): a model fine-tuned on ``cad-outlines sft
        build --messages`` rows of that family; the messages are exactly the training
        user message.

    Returns
    -------
    list of dict
        ``[{"role": ..., "content": ...}, ...]`` for any chat-completions API.
    """
    user = {"role": "user", "content": user_content(instruction, number_lines(document), "lines")}
    if family is None:
        system = _SYSTEM.format(statement=format_statement("lines"), example_doc=number_lines(_EXAMPLE_DOC),
                                example_program=_EXAMPLE_PROGRAM, copy=copy_tag("lines", "i", "j"),
                                gen=f"{GEN_OPEN}...{GEN_CLOSE}")
        return [{"role": "system", "content": system}, user]
    from ..adapters import ADAPTERS

    if family not in ADAPTERS:
        raise ValueError(f"unknown family {family!r}; choose one of {', '.join(ADAPTERS)} or None")
    return [user]


# --- reading a reply ---------------------------------------------------------------------


@dataclass(frozen=True)
class AppliedReply:
    """What :func:`apply_reply` read and produced.

    Attributes
    ----------
    document
        The edited document.
    program
        The program in canonical form (``cad-outlines apply`` reads it).
    ops
        Its ops.
    repairs
        What lenient reading changed, one line each (empty: the program was canonical).
    span
        ``(start, end)`` of the program in the reply.
    """

    document: str
    program: str
    ops: list[Op]
    repairs: tuple[str, ...] = ()
    span: tuple[int, int] = (0, 0)
    warnings: tuple[str, ...] = field(default=())


# The lenient forms of the literals (see the module docstring), from their names.
_LINES, _TOKENS = (re.escape(COPY_ATTRIBUTE[g]) for g in ("lines", "tokens"))
_LINE = re.escape(COPY_ATTRIBUTE["lines"].removesuffix("s"))
_PROGRAM_OPEN_RE = re.compile(rf"<{PROGRAM_TAG}\s*>")
_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n(.*?)(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_COPY_RE = re.compile(
    rf"""<{COPY_TAG}\s+(?P<attr>{_LINES}|{_LINE}|{_TOKENS})\s*=\s*(?P<q>["']?)\s*(?P<a>\d+)\s*"""
    rf"""(?:(?P<dash>{re.escape(RANGE_SEPARATOR)}|\u2013|\u2014|\.\.)\s*(?P<b>\d+)\s*)?(?P=q)\s*"""
    rf"""(?P<end>/>|>\s*</{COPY_TAG}\s*>|>)""")
_COPY_START_RE = re.compile(rf"<{COPY_TAG}\b")
_GEN_OPEN_RE = re.compile(rf"<{GEN_TAG}\s*(?P<slash>/)?>")
_CLOSE_RE = re.compile(rf"</{PROGRAM_TAG}\s*>")
# Where an op (or the program's end) begins: a reserved literal, leniently spelled.
_OP_RE = re.compile(rf"<{COPY_TAG}\b|<{GEN_TAG}\b|</{PROGRAM_TAG}\s*>")
_NEXT_OP_RE = re.compile(rf"\s*(?:{_OP_RE.pattern}|\Z)")


def find_programs(reply: str) -> list[tuple[int, int]]:
    """``(start, limit)`` of every candidate program: its ``<program>`` and where reading must stop."""
    fences = [(m.start(2), m.end(2)) for m in _FENCE_RE.finditer(reply)]
    out = []
    for m in _PROGRAM_OPEN_RE.finditer(reply):
        start = m.start()
        limit = next((end for begin, end in fences if begin <= start < end), len(reply))
        if _inline_code(reply, start, m.end()):
            continue
        out.append((start, limit))
    return out


def _inline_code(reply: str, start: int, end: int) -> bool:
    """Whether ``reply[start:end]`` is written as inline code: `` `<program>` ``."""
    return reply[start - 1:start] == "`" and reply[end:end + 1] == "`"


def read_program(reply: str, start: int, limit: int, *, lenient: bool = True
                 ) -> tuple[list[Op], list[str], int]:
    """Read the program at ``reply[start:]`` (stopping at ``limit``).

    Returns the ops, the repairs made and the offset after the program.

    Raises
    ------
    MalformedProgramError
        Naming the offset and what was found there.
    """
    ops: list[Op] = []
    repairs: list[str] = []
    m = _PROGRAM_OPEN_RE.match(reply, start)
    assert m is not None
    if m.group(0) != PROGRAM_OPEN:
        _repair(repairs, lenient, f"read {m.group(0)!r} as {PROGRAM_OPEN!r}", start)
    pos = m.end()
    spaced = False
    while True:
        skip = len(reply[pos:limit]) - len(reply[pos:limit].lstrip())
        if skip:
            spaced = True
            pos += skip
        close = _CLOSE_RE.match(reply, pos)
        if close and close.end() <= limit:
            if close.group(0) != PROGRAM_CLOSE:
                _repair(repairs, lenient, f"read {close.group(0)!r} as {PROGRAM_CLOSE!r}", pos)
            end = close.end()
            break
        if pos >= limit:
            _missing_close(repairs, lenient, ops, pos, "the reply ends" if limit == len(reply) else "its block ends")
            end = pos
            break
        copy = _COPY_RE.match(reply, pos)
        if copy and copy.end() <= limit:
            ops.append(_copy_op(copy, reply, limit, repairs, lenient))
            pos = copy.end()
            continue
        if _COPY_START_RE.match(reply, pos):
            raise MalformedProgramError(f"unreadable copy tag {_excerpt(reply, pos, limit)}; expected "
                                        + copy_tag("lines", "i", "j"), pos)
        gen = _GEN_OPEN_RE.match(reply, pos)
        if gen:
            op, pos = _gen_op(gen, reply, limit, repairs, lenient)
            if ops and isinstance(ops[-1], Gen):
                _repair(repairs, lenient, "joined two gens in a row into one", gen.start())
                ops[-1:] = join_gens([ops[-1], op])
            else:
                ops.append(op)
            continue
        if ops and _CLOSE_RE.search(reply, pos, limit) is None:
            # Prose after complete ops and no </program> anywhere after them.
            _missing_close(repairs, lenient, ops, pos, "text that is not an op follows")
            end = pos
            break
        raise MalformedProgramError(f"text between ops: {_excerpt(reply, pos, limit)}", pos)
    if spaced:
        _repair(repairs, lenient, "ignored whitespace between ops", start)
    return ops, repairs, end


_MAX_INDEX_DIGITS = 18


def _copy_op(m: re.Match, reply: str, limit: int, repairs: list[str], lenient: bool) -> Op:
    pos = m.start()
    if m.group("attr") == COPY_ATTRIBUTE["tokens"]:
        raise MalformedProgramError(f"token copies ({COPY_OPEN['tokens']}...) need the model's tokenizer; "
                                    "text mode copies lines", pos)
    for digits in (m.group("a"), m.group("b") or ""):
        if len(digits) > _MAX_INDEX_DIGITS:  # int() refuses > 4,300 digits; no document is that long
            raise CopyRangeError(f"copy index of {len(digits)} digits is out of any document's range", pos)
    a = int(m.group("a"))
    b = int(m.group("b")) if m.group("b") is not None else a
    canonical = copy_tag("lines", a, b)
    if m.group(0) != canonical:
        if m.group("end") == ">" and not _NEXT_OP_RE.match(reply, m.end()):
            raise MalformedProgramError(f"copy tag {m.group(0)!r} is not closed and text follows it: "
                                        f"{_excerpt(reply, m.end(), limit)}", pos)
        _repair(repairs, lenient, f"read {m.group(0)!r} as {canonical!r}", pos)
    return Copy(a, b)


def _gen_op(m: re.Match, reply: str, limit: int, repairs: list[str], lenient: bool) -> tuple[Op, int]:
    pos = m.start()
    if m.group("slash"):
        _repair(repairs, lenient, f"read {m.group(0)!r} as {GEN_OPEN + GEN_CLOSE!r}", pos)
        return Gen(""), m.end()
    if m.group(0) != GEN_OPEN:
        _repair(repairs, lenient, f"read {m.group(0)!r} as {GEN_OPEN!r}", pos)
    close = reply.find(GEN_CLOSE, m.end(), limit)
    stop = close if close >= 0 else limit
    # A reserved literal before the close means the <gen> was never closed.
    inner = _OP_RE.search(reply, m.end(), stop)
    if close < 0 or inner:
        raise MalformedProgramError(f"{GEN_OPEN} at offset {pos} is not closed by {GEN_CLOSE}"
                                    + (" before the next op" if inner else ""), pos)
    return Gen(escape.decode(reply[m.end():close])), close + len(GEN_CLOSE)


def _missing_close(repairs: list[str], lenient: bool, ops: list[Op], pos: int, why: str) -> None:
    if not ops:
        raise MalformedProgramError(f"{PROGRAM_OPEN} holds no op and is not closed ({why})", pos)
    _repair(repairs, lenient, f"added the missing {PROGRAM_CLOSE!r} ({why} after the last op)", pos)


def _repair(repairs: list[str], lenient: bool, what: str, offset: int) -> None:
    if not lenient:
        raise MalformedProgramError(f"not canonical (lenient=False): would have {what}", offset)
    repairs.append(f"offset {offset}: {what}")


def _excerpt(reply: str, pos: int, limit: int) -> str:
    return repr(reply[pos:min(limit, pos + 30)])


def apply_reply(reply_text: str, document: str, mode: Mode = "strict", *,
                lenient: bool = True) -> AppliedReply:
    """Find the program in a chat reply and apply it to ``document``.

    Parameters
    ----------
    reply_text
        The model's whole reply (prose, fenced blocks and all).
    document
        The document the prompt showed.
    mode
        Resolver mode: ``"strict"`` (bad copy ranges are :class:`CopyRangeError`) or
        ``"clipped"`` (repaired, each repair listed in ``warnings``).
    lenient
        Read the unambiguous variants listed in the module docstring; ``False``: only
        the canonical program text.

    Raises
    ------
    NoProgramError, AmbiguousReplyError, MalformedProgramError, CopyRangeError
        Subclasses of :class:`ReplyError`; the message names what and where.
    """
    if mode not in ("strict", "clipped"):
        raise ValueError(f"mode must be 'strict' or 'clipped', got {mode!r}")
    candidates = find_programs(reply_text)
    if not candidates:
        hint = _COPY_START_RE.search(reply_text) or _GEN_OPEN_RE.search(reply_text)
        if hint:
            raise NoProgramError(f"the reply has ops but no {PROGRAM_OPEN} around them", hint.start())
        raise NoProgramError(f"the reply holds no {PROGRAM_OPEN}")
    read = [(start, *read_program(reply_text, start, limit, lenient=lenient)) for start, limit in candidates]
    first = read[0]
    for other in read[1:]:
        if other[1] != first[1]:
            raise AmbiguousReplyError(f"the reply holds {len(read)} different programs (at offsets "
                                      f"{', '.join(str(r[0]) for r in read)}); which one is meant?", other[0])
    start, ops, repairs, end = first
    if len(read) > 1:
        repairs = list(repairs)
        _repair(repairs, lenient, f"read the program written {len(read)} times once", read[1][0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResolveWarning)
        try:
            edited = resolve(ops, document, mode)
        except ResolveError as err:
            raise CopyRangeError(f"{err} (the document has {len(copy_lines(document))} lines, "
                                 "as its numbered view shows them)",
                                 start) from err
    return AppliedReply(edited, program.render(ops), ops, tuple(repairs), (start, end),
                        tuple(str(w.message) for w in caught))
