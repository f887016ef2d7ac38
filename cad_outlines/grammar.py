"""The program grammars as data: load a ``.lark`` file and specialise it to a document.

The grammars live in ``grammars/`` (shipped inside the wheel as
``cad_outlines/grammars``). Specialising replaces the generic index terminal by a
compact numeric-range regex, so that a copy op can only name lines ``1..n`` (or tokens
``0..T-1``). The regex grows with the number of digits of ``n``, not with ``n``: a
document of 100,000 lines costs a few dozen characters, where one grammar rule per start
line hit llguidance's lexer limit at n = 600. The cross-index condition ``i <= j`` is
not regular in a compact form, so the constraint enforces it at decode time
(:mod:`cad_outlines.constraint`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Literal

Granularity = Literal["lines", "tokens"]

GRAMMAR_FILES: dict[str, str] = {"lines": "cad_lines.lark", "tokens": "cad_tokens.lark"}
_INDEX_TERMINAL = {"lines": "LINE", "tokens": "TOKEN"}


@lru_cache(maxsize=None)
def load_grammar(granularity: Granularity = "lines") -> str:
    """Return the text of the packaged grammar for ``granularity``.

    Parameters
    ----------
    granularity
        ``"lines"`` (``<copy lines="i-j"/>``) or ``"tokens"`` (``<copy tokens="a-b"/>``).
    """
    if granularity not in GRAMMAR_FILES:
        raise ValueError(f"granularity must be one of {sorted(GRAMMAR_FILES)}, got {granularity!r}")
    return (resources.files("cad_outlines.grammars") / GRAMMAR_FILES[granularity]).read_text("utf-8")


def range_regex(lo: int, hi: int) -> str:
    """Return a regex matching exactly the decimal integers in ``[lo, hi]``.

    No leading zeros. The regex is a union of digit-class runs, one per split of the
    range at powers of ten, so its size is O(digits(hi)^2). Wider numbers come first:
    lark's lexer (Python ``re``) takes the first alternative that matches, not the
    longest, so ``(?:[1-9]|10)`` would lex "10" as "1".

    Parameters
    ----------
    lo, hi
        Inclusive bounds, ``0 <= lo <= hi``.
    """
    if not 0 <= lo <= hi:
        raise ValueError(f"need 0 <= lo <= hi, got lo={lo}, hi={hi}")
    parts: list[str] = []
    # Split at digit-count boundaries so each piece has numbers of one length.
    start = lo
    while start <= hi:
        width = len(str(start))
        end = min(hi, 10**width - 1)
        parts.extend(_same_width(str(start), str(end)))
        start = end + 1
    # parts run from narrow to wide numbers; alternatives of one width are disjoint.
    parts.reverse()
    return "|".join(parts) if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _same_width(lo: str, hi: str) -> list[str]:
    """Regexes for the integers between two same-width decimal strings."""
    if lo == hi:
        return [lo]
    if len(lo) == 1:
        return [f"[{lo}-{hi}]"] if lo != hi else [lo]
    if lo[0] == hi[0]:
        return [lo[0] + r for r in _same_width(lo[1:], hi[1:])]
    rest = len(lo) - 1
    out: list[str] = []
    # lo's leading digit with any tail >= lo[1:], then whole middle digits, then hi's.
    if lo[1:] == "0" * rest:
        first_full = int(lo[0])
    else:
        out += [lo[0] + r for r in _same_width(lo[1:], "9" * rest)]
        first_full = int(lo[0]) + 1
    if hi[1:] == "9" * rest:
        last_full = int(hi[0])
        tail_hi: list[str] = []
    else:
        last_full = int(hi[0]) - 1
        tail_hi = [hi[0] + r for r in _same_width("0" * rest, hi[1:])]
    if first_full <= last_full:
        digit = str(first_full) if first_full == last_full else f"[{first_full}-{last_full}]"
        out.append(digit + ("[0-9]" if rest == 1 else f"[0-9]{{{rest}}}"))
    return out + tail_hi


def specialize(grammar: str, upper: int, granularity: Granularity = "lines") -> str:
    """Bound the copy indices of ``grammar`` to one document.

    Parameters
    ----------
    grammar
        Grammar text as returned by :func:`load_grammar`.
    upper
        Number of lines ``n`` (indices ``1..n``) or of tokens ``T`` (indices ``0..T-1``).
    granularity
        Which index terminal to bound.

    Returns
    -------
    str
        The grammar with its index terminal replaced by a numeric-range regex. A
        document with no line/token to copy gets a grammar with no copy op at all.
    """
    terminal = _INDEX_TERMINAL[granularity]
    lo, hi = (1, upper) if granularity == "lines" else (0, upper - 1)
    pattern = re.compile(rf"^{terminal}: .*$", re.MULTILINE)
    if not pattern.search(grammar):
        raise ValueError(f"grammar has no '{terminal}:' terminal to specialise")
    if hi < lo:
        # Nothing can be copied: drop the copy alternative, its rule and its terminal
        # (lark refuses a rule that names an undefined terminal); gen-only programs stay.
        grammar = grammar.replace("?op: copy | gen", "?op: gen")
        grammar = re.sub(r"^copy: .*$", "", grammar, flags=re.MULTILINE)
        return pattern.sub("", grammar)
    return pattern.sub(f"{terminal}: /{range_regex(lo, hi)}/", grammar)


def program_regex(n: int, granularity: Granularity = "lines") -> str:
    """Return the program language of one document as ONE plain regex.

    The language equals that of the specialised grammar
    (``specialize(load_grammar(granularity), n, granularity)``): the grammar has no
    recursion, so it is regular, and this regex is what a regex-only backend (such as
    outlines_core's token FSM, ``OutlinesCoreBackend.get_regex_logits_processor``) takes
    in its place::

        <program>(?:<copy lines="R-R"/>|<gen>BODY</gen>)*</program>

    with ``R = range_regex(1, n)`` (``range_regex(0, n - 1)`` and ``tokens="..."`` for
    token granularity) and ``BODY`` the generated gen-body regex
    (:func:`cad_outlines._body_regex.body_regex`). As in the grammar, ``i <= j`` is not
    part of the language (the constraint enforces it at decode time). Unlike the
    ``.lark`` files, ``/`` is not escaped: the result is a plain Python / Rust regex
    with no look-around.

    Parameters
    ----------
    n
        Lines of the document (indices ``1..n``) or its token count (``0..n-1``);
        ``0`` leaves no copy op, only gen ops.
    granularity
        ``"lines"`` or ``"tokens"``.

    Returns
    -------
    str
        The regex; match it against a whole program (``re.fullmatch``).
    """
    from ._body_regex import body_regex
    from .escape import RESERVED_LITERALS

    if granularity not in _INDEX_TERMINAL:
        raise ValueError(f"granularity must be one of {sorted(_INDEX_TERMINAL)}, got {granularity!r}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    # The literals hold no backslash, so every "\/" is lark's escaped "/" and nothing else.
    body = body_regex(RESERVED_LITERALS).replace(r"\/", "/")
    ops = [f"<gen>{body}</gen>"]
    lo, hi = (1, n) if granularity == "lines" else (0, n - 1)
    if lo <= hi:
        index = range_regex(lo, hi)
        ops.insert(0, f'<copy {granularity}="{index}-{index}"/>')
    return "<program>(?:" + "|".join(ops) + ")*</program>"
