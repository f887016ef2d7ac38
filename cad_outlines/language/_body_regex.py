"""Build the gen-body regex: every string that contains no reserved literal.

The regex is generated from an automaton — the trie of the literals' tails after their
opening ``<`` — rather than written by hand, because llguidance lexes greedily with no
look-around: the body and its closing ``</gen>`` must live in ONE terminal whose body
part already excludes every reserved literal. ``tests/test_grammar_files.py`` checks
that the regex stored in ``grammars/*.lark`` equals this function's output and, with
interegular, that its language is exactly the complement of ``.*(L1|L2|…).*``.
"""

from __future__ import annotations

import re
from typing import Iterable


def body_regex(literals: Iterable[str]) -> str:
    """Return a look-around-free regex for strings free of every literal.

    Parameters
    ----------
    literals
        Literals that each start with ``<`` and contain no other ``<``.

    Returns
    -------
    str
        A Python/Rust-compatible regex (no ``.``, no look-around; ``/`` escaped for
        lark's ``/…/`` syntax).
    """
    tails = sorted({lit[1:] for lit in literals})
    for lit in literals:
        if not lit.startswith("<") or "<" in lit[1:]:
            raise ValueError(f"literal {lit!r} must start with '<' and hold no other '<'")
    trie: dict = {}
    for tail in tails:
        node = trie
        for ch in tail:
            node = node.setdefault(ch, {})
        node[None] = True  # end of a literal: this path is forbidden

    def after(node: dict) -> str:
        # Text after "<" (up to the next "<") that leaves this trie node without
        # completing a literal: stop here, leave the trie, or walk on to a child.
        kids = sorted(k for k in node if k is not None)
        alts = ["", "[^<" + "".join(re.escape(k) for k in kids) + "][^<]*"]
        alts += [re.escape(k) + after(node[k]) for k in kids if None not in node[k]]
        return "(?:" + "|".join(alts) + ")"

    # Every occurrence of a literal starts at a "<", so a body is text without "<"
    # followed by "<"-led segments that do not begin a literal.
    return ("[^<]*(?:<" + after(trie) + ")*").replace("/", r"\/")
