"""Draft text for the decode loop: the program text an editor most likely writes next.

The decode loop (:mod:`.generator`) appends a draft to a forward it runs anyway and
verifies it token by token on the next decode steps (see ``docs/generator.md``,
"Drafting copy tags"). A wrong draft costs compute in that forward, never a forward or
a different output, so the guesses here only need to be right often:

* the program opens with its first copy: ``<program><copy lines="1-``;
* a copy that does not reach the document's end is followed by a gen (``<gen>`` +
  the padding ``"\\n"`` in line programs);
* a gen is followed by a copy that resumes after the lines the gen replaced. How many
  it replaced is estimated from the gen's text: the run of document units after the
  previous copy that is most similar to it (normalized InDel similarity, i.e. the
  longest-common-subsequence ratio, >= :data:`SIMILARITY`), or none (an insertion);
* a copy's end index is drafted as the document's last unit: the last copy of a
  program ends there, earlier copies rarely do (their end digits are then rejected);
* inside a gen body, prompt lookup (``lookup=True``): when the body's last
  :data:`LOOKUP_MATCH` characters or more occur in the document (first after the
  previous copy, then anywhere), in an earlier gen or earlier in the body itself, the
  text that follows that occurrence is drafted. Gens often retype document text
  (a line moved, a call re-indented); this is transformers' prompt-lookup search done
  on text, inside the one loop.

Model-free: no torch; the generator tokenizes the text and validates it with the
grammar.
"""

from __future__ import annotations

from typing import Sequence

from rapidfuzz.distance import Indel

from ..language import escape, syntax
from ..language.grammar import Granularity
from ..language.program import Copy, CopyTokens, Gen, Op
from ..language.resolver import gen_body

#: A gen replaces the units after the previous copy that it resembles at least this much
#: (``rapidfuzz``'s normalized InDel similarity, ``2 * LCS / (len(a) + len(b))``). Chosen
#: on the developer corpora of 400 real commits (not shipped; counts and method in
#: ``docs/generator.md``): 0.6 predicts the next copy's start for 611 of 799 copies that
#: follow a gen.
SIMILARITY = 0.6
#: At most this many units are tried as the replaced run.
MAX_REPLACED = 32
#: Texts longer than this are cut (at both ends) before they are compared.
MAX_COMPARED = 2000
#: Gen-body lookup: the suffixes of the body tried as the search key, longest first
#: (a longer match is likelier to continue); the shortest is the least a match must be.
LOOKUP_KEYS = (48, 24, 12)
LOOKUP_MATCH = LOOKUP_KEYS[-1]
#: At most this many characters are drafted after a match (the generator keeps at most
#: its ``MAX_DRAFT_TOKENS`` tokens of them).
LOOKUP_CHARS = 96

_GEN_CLOSE_PREFIXES = tuple(syntax.GEN_CLOSE[:k] for k in range(len(syntax.GEN_CLOSE), 1, -1))


class Drafter:
    """Predicts the program text that follows a partial program, for one document.

    Parameters
    ----------
    units
        The document's copy units: its lines (``"lines"``) or the text of each of its
        tokens (``"tokens"``).
    granularity
        ``"lines"`` or ``"tokens"``.
    lookup
        Draft gen bodies by prompt lookup (see the module docstring).
    """

    def __init__(self, units: Sequence[str], granularity: Granularity, lookup: bool = False):
        if granularity not in ("lines", "tokens"):
            raise ValueError(f"granularity must be 'lines' or 'tokens', got {granularity!r}")
        self.units = list(units)
        self.granularity = granularity
        self.lookup = lookup
        self.lo = 1 if granularity == "lines" else 0
        self.hi = len(self.units) if granularity == "lines" else len(self.units) - 1
        self._sep = "\n" if granularity == "lines" else ""
        self._text = self._sep.join(self.units)
        # character offset of each unit in _text (lines: 1-based index - 1)
        self._offsets, at = [], 0
        for unit in self.units:
            self._offsets.append(at)
            at += len(unit) + len(self._sep)
        self._last_replaced: tuple[tuple[int, str], int] | None = None

    def predict(self, pending: str, ops: Sequence[Op]) -> str:
        """The text most likely to follow, or ``""`` when nothing is worth drafting.

        Parameters
        ----------
        pending
            The program text after its last complete op (from the start of the program,
            ``<program>`` included, while no op is complete).
        ops
            The program's complete ops, in order.
        """
        expected = self._next_op_text(ops)
        if not ops:
            expected = syntax.PROGRAM_OPEN + expected
        if expected.startswith(pending):
            return expected[len(pending):]
        if pending.startswith(syntax.GEN_OPEN):
            for prefix in _GEN_CLOSE_PREFIXES:
                if pending.endswith(prefix):
                    body = pending[len(syntax.GEN_OPEN):-len(prefix)]
                    after = self._next_op_text([*ops, Gen(escape.decode(body))])
                    return syntax.GEN_CLOSE[len(prefix):] + after
            if self.lookup:
                return self.lookup_body(escape.decode(pending[len(syntax.GEN_OPEN):]), ops)
            return ""
        end = syntax.COPY_END_INDEX_RE.search(pending)
        if end and str(self.hi).startswith(end.group(1)):
            return str(self.hi)[len(end.group(1)):]
        return ""

    def _next_op_text(self, ops: Sequence[Op]) -> str:
        """The start of the op expected after ``ops`` (a copy up to its end index)."""
        copies = [op for op in ops if isinstance(op, (Copy, CopyTokens))]
        last_end = copies[-1].end if copies else self.lo - 1
        if ops and isinstance(ops[-1], (Copy, CopyTokens)):
            if ops[-1].end >= self.hi:
                return ""  # </program> follows; its logits are never needed
            return syntax.GEN_OPEN + ("\n" if self.granularity == "lines" else "")
        if self.hi < self.lo:
            return ""  # an empty document: nothing to copy
        start = last_end + 1
        if ops:  # after a gen: skip the units it most likely replaced
            start += self.replaced(last_end + 1, ops[-1].text)
        if start > self.hi:
            return ""
        return f"{syntax.COPY_OPEN[self.granularity]}{start}{syntax.RANGE_SEPARATOR}{self.hi}"

    def lookup_body(self, body: str, ops: Sequence[Op]) -> str:
        """Program text to draft after the (decoded) gen ``body`` so far: what follows the
        first earlier occurrence of its longest suffix in :data:`LOOKUP_KEYS`, escaped;
        ``""`` without one.

        The places searched, in order: the document after the previous copy, the whole
        document, the earlier gens' text and the body itself.
        """
        copies = [op for op in ops if isinstance(op, (Copy, CopyTokens))]
        resume = copies[-1].end + 1 - self.lo if copies else 0
        start = self._offsets[resume] if resume < len(self._offsets) else len(self._text)
        # the key's own place, at the body's end, has nothing after it: not a match
        earlier = "".join(op.text for op in ops if isinstance(op, Gen)) + body
        for size in LOOKUP_KEYS:
            if len(body) < size:
                continue
            key = body[-size:]
            for source, offset in ((self._text, start), (self._text, 0), (earlier, 0)):
                at = source.find(key, offset)
                if at >= 0 and at + size < len(source):
                    return escape.encode(source[at + size:at + size + LOOKUP_CHARS])
        return ""

    def replaced(self, first: int, text: str) -> int:
        """How many units from index ``first`` on a gen with ``text`` most likely replaced.

        ``first`` is 1-based for lines and 0-based for tokens. 0 means an insertion.
        """
        key = (first, text)
        if self._last_replaced is not None and self._last_replaced[0] == key:
            # The loop asks at each prefix of ``</gen>`` (``</``, ``</g``, ...) with one body.
            return self._last_replaced[1]
        count = self._most_similar_run(first, text)
        self._last_replaced = (key, count)
        return count

    def _most_similar_run(self, first: int, text: str) -> int:
        # difflib's ratio was used here first; on repetitive text one ratio of two
        # 1,000-character strings took 6.6 s (its recursive longest-match search), which
        # stalled a decode step for seconds. The InDel similarity is the exact LCS ratio,
        # bit-parallel in rapidfuzz: 80 us on the same pair (docs/generator.md).
        new = _clip(gen_body(text) if self.granularity == "lines" else text)
        if not new:
            return 0
        offset = first - self.lo
        best, best_ratio = 0, 0.0
        limit = 2 * len(new) + 16
        for count in range(1, MAX_REPLACED + 1):
            if offset + count > len(self.units):
                break
            old = self._sep.join(self.units[offset:offset + count])
            if len(old) > limit:
                break
            ratio = similarity(_clip(old), new)
            if ratio >= SIMILARITY and ratio > best_ratio:
                best, best_ratio = count, ratio
        return best


def similarity(a: str, b: str) -> float:
    """``2 * LCS(a, b) / (len(a) + len(b))``, 1.0 for two empty texts."""
    return Indel.normalized_similarity(a, b)


def _clip(text: str) -> str:
    if len(text) <= MAX_COMPARED:
        return text
    half = MAX_COMPARED // 2
    return text[:half] + text[-half:]
