"""Reserved-literal escaping for gen text.

A gen body may hold any text except the program's reserved literals. Every reserved
literal starts with ``<`` and holds no other ``<``, so escaping replaces the ``<`` that
opens an occurrence by the look-alike ``⟨`` (U+27E8). To keep the map injective, a
``⟨`` already in the text is doubled first. Decoding reads left to right: ``⟨⟨`` gives
``⟨``, a lone ``⟨`` gives ``<``.

    encode("a </gen> b")  == "a ⟨/gen> b"
    encode("⟨x")          == "⟨⟨x"
    decode(encode(s))     == s   for every str s
"""

from __future__ import annotations

import re

ESCAPE_CHAR = "\u27e8"  # ⟨ MATHEMATICAL LEFT ANGLE BRACKET

#: Literals that may never appear inside a gen body (they would end or nest an op).
RESERVED_LITERALS: tuple[str, ...] = ("<copy", "</copy>", "<gen>", "</gen>", "</program>")

_RESERVED_RE = re.compile("|".join(re.escape(lit) for lit in RESERVED_LITERALS))
_DECODE_RE = re.compile(ESCAPE_CHAR + "(" + ESCAPE_CHAR + ")?")


def encode(text: str) -> str:
    """Return ``text`` with no reserved literal in it, reversibly.

    Parameters
    ----------
    text
        Any text.

    Returns
    -------
    str
        The escaped text; it contains none of :data:`RESERVED_LITERALS`.
    """
    doubled = text.replace(ESCAPE_CHAR, ESCAPE_CHAR * 2)
    # The doubling inserts no "<", so literal positions are those of the doubled text.
    return _RESERVED_RE.sub(lambda m: ESCAPE_CHAR + m.group(0)[1:], doubled)


def decode(text: str) -> str:
    """Invert :func:`encode`.

    Parameters
    ----------
    text
        Escaped text.

    Returns
    -------
    str
        The original text.
    """
    return _DECODE_RE.sub(lambda m: ESCAPE_CHAR if m.group(1) else "<", text)


def needs_escape(text: str) -> bool:
    """Whether :func:`encode` would change ``text``."""
    return ESCAPE_CHAR in text or _RESERVED_RE.search(text) is not None
