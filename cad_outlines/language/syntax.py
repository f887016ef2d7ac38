"""The surface syntax of the program language: every literal, and the regexes built from them.

::

    <program><copy lines="i-j"/><gen>new text</gen>...</program>

This module is the one place that spells the language. The parser and renderer
(:mod:`.program`), the escape (:mod:`.escape`), the grammar files (rendered by
:func:`cad_outlines.language.grammar.render_grammar`, checked by ``tests/test_grammar_files.py``),
the constraint, the drafter, the streaming view, the adapters' literal ids, probes and
prompt text, the lenient reply reader (:mod:`.text`) and the benchmarks build their
strings and patterns from the names below. It also defines the copy unit of line
programs (:func:`split_lines`, :func:`copy_lines`), since ``lines="i-j"`` means nothing without it.

Standard library only: every layer may import it.
"""

from __future__ import annotations

import re
from typing import Literal

Granularity = Literal["lines", "tokens"]

# -- literals ------------------------------------------------------------------------------

#: Every literal of the language starts with this character (see :data:`RESERVED_LITERALS`).
TAG_START = "<"
PROGRAM_TAG = "program"
GEN_TAG = "gen"
COPY_TAG = "copy"
#: The copy tag's attribute, per granularity.
COPY_ATTRIBUTE: dict[str, str] = {"lines": "lines", "tokens": "tokens"}
#: Between a copy's first and last index.
RANGE_SEPARATOR = "-"
#: The characters an index is written with (decimal, no sign).
INDEX_DIGITS = "0123456789"

PROGRAM_OPEN = f"{TAG_START}{PROGRAM_TAG}>"
PROGRAM_CLOSE = f"{TAG_START}/{PROGRAM_TAG}>"
GEN_OPEN = f"{TAG_START}{GEN_TAG}>"
GEN_CLOSE = f"{TAG_START}/{GEN_TAG}>"
#: The starts of :data:`GEN_CLOSE` (two characters or more, longest first) that the text
#: of a gen being closed ends with before the close is complete.
GEN_CLOSE_PREFIXES: tuple[str, ...] = tuple(GEN_CLOSE[:k] for k in range(len(GEN_CLOSE), 1, -1))
#: What every copy tag starts with, whatever its granularity.
COPY_START = f"{TAG_START}{COPY_TAG}"
#: A copy tag up to its first index, per granularity.
COPY_OPEN: dict[str, str] = {g: f'{COPY_START} {attr}="' for g, attr in COPY_ATTRIBUTE.items()}
#: What ends a copy tag after its last index.
COPY_CLOSE = '"/>'

#: The structural literals: what a program is made of besides gen text and index digits.
STRUCTURAL_LITERALS: tuple[str, ...] = (
    PROGRAM_OPEN, PROGRAM_CLOSE, COPY_OPEN["lines"], COPY_OPEN["tokens"], RANGE_SEPARATOR,
    COPY_CLOSE, GEN_OPEN, GEN_CLOSE)

#: Literals that may never appear inside a gen body (they would end or nest an op). Each
#: is :data:`TAG_START` followed by a tail that holds no :data:`TAG_START`, which is what
#: the escape (:mod:`.escape`) and the gen-body regex (:mod:`._body_regex`) rely on.
RESERVED_LITERALS: tuple[str, ...] = (
    COPY_START, f"{TAG_START}/{COPY_TAG}>", GEN_OPEN, GEN_CLOSE, PROGRAM_CLOSE)
RESERVED_TAILS: tuple[str, ...] = tuple(lit[len(TAG_START):] for lit in RESERVED_LITERALS)
#: Written in a gen body in place of the :data:`TAG_START` of a reserved literal.
ESCAPE_CHAR = "\u27e8"  # ⟨ MATHEMATICAL LEFT ANGLE BRACKET


def _distinct_prefix(literal: str, others: tuple[str, ...]) -> str:
    """The shortest prefix of ``literal`` that none of ``others`` starts with."""
    for k in range(1, len(literal) + 1):
        if not any(other.startswith(literal[:k]) for other in others):
            return literal[:k]
    raise ValueError(f"{literal!r} is a prefix of one of {others!r}")


#: The shortest text that tells a copy tag from the other ops (``<gen>``, ``</program>``).
COPY_PREFIX = _distinct_prefix(COPY_START, (GEN_OPEN, PROGRAM_CLOSE))


def copy_tag(granularity: Granularity, start: object, end: object) -> str:
    """A copy tag: ``copy_tag("lines", 3, 5) == '<copy lines="3-5"/>'``.

    ``start`` and ``end`` are written with ``str``, so placeholders (``"i"``, ``"j"``)
    give the tag as prompts describe it.
    """
    return f"{COPY_OPEN[granularity]}{start}{RANGE_SEPARATOR}{end}{COPY_CLOSE}"


# -- patterns --------------------------------------------------------------------------

_OPEN = "(?:" + "|".join(re.escape(lit) for lit in COPY_OPEN.values()) + ")"
_SEP = re.escape(RANGE_SEPARATOR)
_CLOSE_PREFIXES = "|".join(re.escape(COPY_CLOSE[:k]) for k in range(len(COPY_CLOSE) - 1, 0, -1))

#: A complete copy tag of either granularity; groups ``start`` and ``end``.
COPY_TAG_RE = re.compile(rf"{_OPEN}(?P<start>\d+){_SEP}(?P<end>\d+){re.escape(COPY_CLOSE)}")
#: A copy tag's text up to its indices, either still unfinished; groups ``start``,
#: ``sep`` (the separator, once written) and ``end``.
COPY_INDICES_RE = re.compile(rf"{_OPEN}(?P<start>\d*)(?:(?P<sep>{_SEP})(?P<end>\d*))?")
#: Text ending in a copy tag whose indices are written and whose close is not (a proper
#: prefix of :data:`COPY_CLOSE`, possibly empty).
COPY_CLOSING_RE = re.compile(rf"{_OPEN}\d+{_SEP}\d+(?:{_CLOSE_PREFIXES})?\Z")
#: Text ending in a copy tag whose last index is being written; group ``end``.
COPY_END_INDEX_RE = re.compile(rf"{_OPEN}\d+{_SEP}(?P<end>\d*)\Z")


# -- copy units --------------------------------------------------------------------------


def split_lines(document: str) -> list[str]:
    """The document's lines, as ``<copy lines="i-j"/>`` numbers them (line ``i`` is item ``i - 1``).

    Only ``"\\n"`` ends a line: ``document.split("\\n")``. A document ending in
    ``"\\n"`` has an empty last line, a CRLF document keeps its ``"\\r"`` inside each
    line, and ``"\\r"``, U+2028 and friends are ordinary text, so
    ``"\\n".join(split_lines(d)) == d`` for every ``d`` (an empty document is one empty
    line).
    """
    return document.split("\n")


def copy_lines(document: str) -> list[str]:
    """The lines ``<copy lines="i-j"/>`` numbers: :func:`split_lines`, and for a document
    whose last line holds text (no final ``"\n"``) one more, empty: its **open end**.

    A document ending in ``"\n"`` (every file the models here were trained on) ends in an
    empty line, the one its programs' last copy runs to; the open end gives a document
    without a final newline the same last line, so a model reads it in the form it knows
    instead of reaching for a line that is not there. A program whose last op is a copy
    through the open end resolves without the newline that line would add (the file keeps
    its missing final newline); a copy of it anywhere else is an empty line.
    """
    lines = split_lines(document)
    return lines + [""] if lines[-1] else lines


def open_ended(document: str) -> bool:
    """Whether :func:`copy_lines` gives ``document`` an open end (its last line holds text)."""
    return not document.endswith("\n") and document != ""


_LINE_BREAK = re.compile(r"\r?\n")


def crlf(document: str) -> bool:
    """Whether ``document`` is a CRLF file: it has a line break, every ``"\\n"`` follows a
    ``"\\r"``, and no other ``"\\r"`` occurs.

    Models read such a file with ``"\\n"`` line ends (the form they are trained on) and
    what a run writes gets ``"\\r\\n"`` back (:func:`with_crlf`), so a Windows file stays
    one instead of coming back with the new lines' ends mixed in. The strict test keeps
    that exact: ``with_crlf(d.replace("\\r\\n", "\\n")) == d`` for every such ``d``.
    A file with mixed ends is not one; a run copies its ends byte for byte.
    """
    breaks = document.count("\n")
    return breaks > 0 and document.count("\r\n") == breaks == document.count("\r")


def with_crlf(text: str) -> str:
    """``text`` with every line break written ``"\\r\\n"`` (a lone ``"\\n"`` gains its ``"\\r"``)."""
    return _LINE_BREAK.sub("\r\n", text)
