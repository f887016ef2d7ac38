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
from typing import Callable

from .syntax import ESCAPE_CHAR, RESERVED_TAILS, TAG_START

_TAIL_RE = re.compile("|".join(re.escape(tail) for tail in sorted(RESERVED_TAILS, key=len, reverse=True)))


def _rewrite(text: str, opens: bool, run: Callable[[int, bool], str]) -> str:
    """Rewrite every run of escape characters (and, if ``opens``, a ``<``) that stands right
    before a reserved tail by ``run(length, has_open)``; the rest of ``text`` is kept.

    One pass over the tails' occurrences, each looking back over its own run only: runs
    before different tails do not overlap, so the work is linear in ``len(text)`` (a
    regex that tries a run of ``⟨`` at every start position is quadratic in the run).
    """
    out: list[str] = []
    done = 0
    for match in _TAIL_RE.finditer(text):
        end = match.start()
        has_open = opens and end > done and text[end - 1] == TAG_START
        stop = end - 1 if has_open else end
        first = stop
        while first > done and text[first - 1] == ESCAPE_CHAR:
            first -= 1
        if first == stop and not has_open:
            continue
        out.append(text[done:first])
        out.append(run(stop - first, has_open))
        done = end
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def _encode_run(length: int, has_open: bool) -> str:
    return ESCAPE_CHAR * (2 * length) + (ESCAPE_CHAR if has_open else "")


def _decode_run(length: int, has_open: bool) -> str:
    pairs, odd = divmod(length, 2)
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
    return _rewrite(text, True, _encode_run)


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
    return _rewrite(text, False, _decode_run)


def needs_escape(text: str) -> bool:
    """Whether :func:`encode` would change ``text``."""
    return encode(text) != text
