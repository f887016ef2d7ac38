"""Program model: ops, parsing program text with lark, rendering ops to text.

A program is ``<program>`` followed by ops and ``</program>``:

- ``Copy(start, end)``: input lines ``start..end`` (1-indexed, inclusive);
- ``CopyTokens(start, end)``: document tokens ``start..end`` (0-indexed, inclusive)
  under the model's tokenizer;
- ``Gen(text)``: new text, held unescaped; rendering escapes it (:mod:`.escape`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence, Union

import lark

from . import escape
from ..errors import InputError, ProgramParseError
from .grammar import Granularity, load_grammar
from .syntax import (COPY_OPEN, COPY_START, COPY_TAG_RE, GEN_CLOSE, GEN_OPEN, PROGRAM_CLOSE, PROGRAM_OPEN,
                     copy_tag)


@dataclass(frozen=True)
class Copy:
    """Copy input lines ``start..end`` (1-indexed, inclusive)."""

    start: int
    end: int


@dataclass(frozen=True)
class CopyTokens:
    """Copy document tokens ``start..end`` (0-indexed, inclusive)."""

    start: int
    end: int


@dataclass(frozen=True)
class Gen:
    """Emit new text (unescaped; padding newlines included, see the resolver)."""

    text: str


Op = Union[Copy, CopyTokens, Gen]


@lru_cache(maxsize=None)
def _parser(granularity: Granularity) -> lark.Lark:
    return lark.Lark(load_grammar(granularity), parser="lalr")


def parse(text: str, granularity: Granularity = "lines") -> list[Op]:
    """Parse program text into ops.

    Parameters
    ----------
    text
        Program text, e.g. ``'<program><copy lines="1-3"/></program>'``.
    granularity
        ``"lines"`` or ``"tokens"``: which copy form the program uses.

    Raises
    ------
    ProgramParseError
        With the character offset and the expected terminals.
    """
    parser = _parser(granularity)
    try:
        tree = parser.parse(text)
    except lark.exceptions.UnexpectedInput as err:
        names = getattr(err, "expected", None) or getattr(err, "allowed", None) or ()
        shown = {t.name: (repr(t.pattern.value) if t.pattern.type == "str" else t.name)
                 for t in parser.terminals}
        expected = [shown.get(name, name) for name in names]
        at_end = isinstance(err, lark.exceptions.UnexpectedEOF) or (
            isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END")
        if at_end or err.pos_in_stream in (None, -1):
            raise ProgramParseError("unexpected end of program", len(text), expected) from None
        offset = err.pos_in_stream
        found = text[offset:offset + 12]
        if text.startswith(GEN_OPEN, offset) and text.endswith(GEN_CLOSE, 0, offset):
            raise ProgramParseError(f"unexpected {found!r}: two gens in a row (write "
                                    "their lines in one gen)", offset, expected) from None
        raise ProgramParseError(f"unexpected {found!r}", offset, expected) from None
    copy_cls = Copy if granularity == "lines" else CopyTokens
    ops: list[Op] = []
    for node in tree.children:
        if node.data == "copy":
            start, end = (_index(tok) for tok in node.children)
            ops.append(copy_cls(start, end))
        else:
            body = str(node.children[0])[len(GEN_OPEN):-len(GEN_CLOSE)]
            ops.append(Gen(escape.decode(body)))
    return ops


def _index(token: lark.Token) -> int:
    """A copy index as an int; one too long for Python's int conversion is a parse error."""
    try:
        return int(token)
    except ValueError:  # over sys.get_int_max_str_digits() digits (4,300 by default)
        raise ProgramParseError(f"copy index of {len(token)} digits is too long",
                                token.start_pos) from None


@dataclass(frozen=True)
class ProgramFile:
    """A program as read from a file: the text the loop forces, its ops, its granularity."""

    text: str
    ops: list[Op]
    granularity: Granularity


def read_program(text: str, source: str, granularity: Granularity | None = None) -> ProgramFile:
    """The one rule for a program held in a file (``apply PROGRAM``, ``edit --force-program``).

    Trailing whitespace is not part of the program: every file an editor or ``echo``
    writes ends in a newline, and nothing may follow ``</program>``. ``granularity``
    ``None`` reads it off the copy tags (gen bodies are escaped, so a copy opener can only
    be an op). A parse error is an :class:`InputError` naming ``source``, line and column.
    """
    text = text.rstrip()
    if granularity is None:
        granularity = "tokens" if COPY_OPEN["tokens"] in text else "lines"
    try:
        ops = parse(text, granularity)
    except ProgramParseError as err:
        line = text.count("\n", 0, err.offset) + 1
        column = err.offset - (text.rfind("\n", 0, err.offset) + 1) + 1
        raise InputError(f"{source}: line {line}, column {column}: {err}") from None
    return ProgramFile(text, ops, granularity)


def render_op(op: Op) -> str:
    """Render one op to its canonical program text."""
    if isinstance(op, Gen):
        return GEN_OPEN + escape.encode(op.text) + GEN_CLOSE
    return copy_tag("lines" if isinstance(op, Copy) else "tokens", op.start, op.end)


def render(ops: Sequence[Op]) -> str:
    """Render ops to canonical program text; ``parse(render(ops)) == ops``.

    Raises ``ValueError`` on two gens in a row, which program text cannot hold
    (:func:`cad_outlines.language.resolver.join_gens` joins them).
    """
    for k in range(1, len(ops)):
        if isinstance(ops[k], Gen) and isinstance(ops[k - 1], Gen):
            raise ValueError(f"ops {k - 1} and {k} are both gens; a program holds one gen "
                             "between copies (join them with join_gens)")
    return PROGRAM_OPEN + "".join(render_op(op) for op in ops) + PROGRAM_CLOSE


def scan_ops(text: str, pos: int = 0, granularity: Granularity = "lines") -> tuple[list[Op], int]:
    """Read the complete ops of a (possibly unfinished) program from offset ``pos``.

    Used while decoding: it returns the ops that are complete and the offset after the
    last one, so an unfinished op is never half-read. ``pos == 0`` skips ``<program>``.

    Returns
    -------
    tuple[list[Op], int]
        New complete ops and the offset just after the last of them.
    """
    ops: list[Op] = []
    if pos == 0:
        if not text.startswith(PROGRAM_OPEN):
            return ops, 0
        pos = len(PROGRAM_OPEN)
    copy_cls = Copy if granularity == "lines" else CopyTokens
    while True:
        if text.startswith(COPY_START, pos):
            match = COPY_TAG_RE.match(text, pos)
            if not match:
                break
            ops.append(copy_cls(int(match["start"]), int(match["end"])))
            pos = match.end()
        elif text.startswith(GEN_OPEN, pos):
            end = text.find(GEN_CLOSE, pos + len(GEN_OPEN))
            if end < 0:
                break
            ops.append(Gen(escape.decode(text[pos + len(GEN_OPEN):end])))
            pos = end + len(GEN_CLOSE)
        else:
            break
    return ops, pos


def repeated_lines(ops: Sequence[Op]) -> int:
    """How many lines a line program's copies write beyond the first copy of each line.

    A move or a swap copies every line once (0); a model that loops re-copies long runs
    of the file until the copy budget stops it (``edit`` refuses a program that repeats
    more than half of a file's lines). Token copies (:class:`CopyTokens`) are not counted.
    """
    spans = sorted((op.start, op.end) for op in ops if isinstance(op, Copy))
    repeated, covered_to = 0, 0  # the last line copied so far; spans start in order, so
    # every line from a span's start up to covered_to is already copied
    for start, end in spans:
        repeated += max(0, min(end, covered_to) - start + 1)
        covered_to = max(covered_to, end)
    return repeated
