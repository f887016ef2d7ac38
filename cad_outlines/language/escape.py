"""Reserved-literal escaping for gen text.

A gen body may hold any text except the program's reserved literals. Every reserved
literal is ``"<" + tail`` with a tail that holds no ``<`` (``copy``, ``/copy>``, ``gen>``,
``/gen>``, ``/program>``), so escaping replaces the ``<`` that opens an occurrence by the
look-alike ``⟨`` (U+27E8). Only a ``⟨`` that stands right before a tail can be confused
with an escape, so only such ``⟨`` are doubled; every other ``⟨`` -- the ``⟨x, y⟩`` of
Lean code or the ``⟨ψ|φ⟩`` of physics notes -- is written as itself. Decoding looks at
each run of ``⟨`` that stands right before a tail: an even run of ``2k`` gives ``k``
``⟨``, an odd run of ``2k + 1`` gives ``k`` ``⟨`` and a ``<``. Any other ``⟨`` is text.

    encode("a </gen> b")  == "a ⟨/gen> b"
    encode("⟨x, y⟩")      == "⟨x, y⟩"        (unchanged: a model may retype it verbatim)
    encode("⟨/gen>")      == "⟨⟨/gen>"
    decode(encode(s))     == s   for every str s
"""

from __future__ import annotations

import re

from .syntax import ESCAPE_CHAR, RESERVED_TAILS, TAG_START

_TAIL = "(?:" + "|".join(re.escape(tail) for tail in RESERVED_TAILS) + ")"
# A run of escape characters, then an optional "<", right before a tail. The engine
# tries the earliest start first, so a run is always matched whole.
_ENCODE_RE = re.compile(f"({ESCAPE_CHAR}*)({re.escape(TAG_START)}?)(?={_TAIL})")
_DECODE_RE = re.compile(f"({ESCAPE_CHAR}+)(?={_TAIL})")


def _encode_run(match: re.Match) -> str:
    run, opens = match.group(1), match.group(2)
    return ESCAPE_CHAR * (2 * len(run)) + (ESCAPE_CHAR if opens else "")


def _decode_run(match: re.Match) -> str:
    pairs, odd = divmod(len(match.group(1)), 2)
    return ESCAPE_CHAR * pairs + (TAG_START if odd else "")


def encode(text: str) -> str:
    """Return ``text`` with no reserved literal in it, reversibly.

    Parameters
    ----------
    text
        Any text.

    Returns
    -------
    str
        The escaped text; it contains none of :data:`~cad_outlines.language.syntax.RESERVED_LITERALS`. It equals
        ``text`` unless ``text`` holds a reserved literal or a ``⟨`` right before one's
        tail.
    """
    # An empty match (no run, no "<") before a tail changes nothing.
    return _ENCODE_RE.sub(_encode_run, text)


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
    return _DECODE_RE.sub(_decode_run, text)


def needs_escape(text: str) -> bool:
    """Whether :func:`encode` would change ``text``."""
    return any(m.group(1) or m.group(2) for m in _ENCODE_RE.finditer(text))
