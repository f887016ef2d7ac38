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
  previous copy that is most similar to it (``difflib`` ratio >= :data:`SIMILARITY`),
  or none (an insertion);
* a copy's end index is drafted as the document's last unit: the last copy of a
  program ends there, earlier copies rarely do (their end digits are then rejected).

Model-free: no torch; the generator tokenizes the text and validates it with the
grammar.
"""

from __future__ import annotations

import difflib
import re
from typing import Sequence

from . import escape, program
from .grammar import Granularity
from .program import Copy, CopyTokens, Gen, Op
from .resolver import gen_body

#: A gen replaces the units after the previous copy that it resembles at least this much
#: (``difflib.SequenceMatcher.ratio`` of the texts). Chosen on the developer corpora of
#: 400 real commits (not shipped; counts and method in ``docs/generator.md``): 0.6
#: predicted the next copy's start for 628 of 813 copies that follow a gen.
SIMILARITY = 0.6
#: At most this many units are tried as the replaced run.
MAX_REPLACED = 32
#: Texts longer than this are cut (at both ends) before they are compared.
MAX_COMPARED = 2000

_GEN_CLOSE_PREFIXES = tuple(program.GEN_CLOSE[:k] for k in range(len(program.GEN_CLOSE), 1, -1))
_OPEN_END_RE = re.compile(r'<copy (?:lines|tokens)="\d+-(\d*)\Z')


class Drafter:
    """Predicts the program text that follows a partial program, for one document.

    Parameters
    ----------
    units
        The document's copy units: its lines (``"lines"``) or the text of each of its
        tokens (``"tokens"``).
    granularity
        ``"lines"`` or ``"tokens"``.
    """

    def __init__(self, units: Sequence[str], granularity: Granularity):
        if granularity not in ("lines", "tokens"):
            raise ValueError(f"granularity must be 'lines' or 'tokens', got {granularity!r}")
        self.units = list(units)
        self.granularity = granularity
        self.lo = 1 if granularity == "lines" else 0
        self.hi = len(self.units) if granularity == "lines" else len(self.units) - 1
        self._sep = "\n" if granularity == "lines" else ""

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
            expected = program.PROGRAM_OPEN + expected
        if expected.startswith(pending):
            return expected[len(pending):]
        if pending.startswith(program.GEN_OPEN):
            for prefix in _GEN_CLOSE_PREFIXES:
                if pending.endswith(prefix):
                    body = pending[len(program.GEN_OPEN):-len(prefix)]
                    after = self._next_op_text([*ops, Gen(escape.decode(body))])
                    return program.GEN_CLOSE[len(prefix):] + after
            return ""
        end = _OPEN_END_RE.search(pending)
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
            return program.GEN_OPEN + ("\n" if self.granularity == "lines" else "")
        if self.hi < self.lo:
            return ""  # an empty document: nothing to copy
        start = last_end + 1
        if ops:  # after a gen: skip the units it most likely replaced
            start += self.replaced(last_end + 1, ops[-1].text)
        if start > self.hi:
            return ""
        return f"{program.COPY_OPEN[self.granularity]}{start}-{self.hi}"

    def replaced(self, first: int, text: str) -> int:
        """How many units from index ``first`` on a gen with ``text`` most likely replaced.

        ``first`` is 1-based for lines and 0-based for tokens. 0 means an insertion.
        """
        new = _clip(gen_body(text) if self.granularity == "lines" else text)
        if not new:
            return 0
        offset = first - self.lo
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(new)  # seq2 is indexed once and reused for every candidate
        best, best_ratio = 0, 0.0
        limit = 2 * len(new) + 16
        for count in range(1, MAX_REPLACED + 1):
            if offset + count > len(self.units):
                break
            old = self._sep.join(self.units[offset:offset + count])
            if len(old) > limit:
                break
            matcher.set_seq1(_clip(old))
            ratio = matcher.ratio()
            if ratio >= SIMILARITY and ratio > best_ratio:
                best, best_ratio = count, ratio
        return best


def _clip(text: str) -> str:
    if len(text) <= MAX_COMPARED:
        return text
    half = MAX_COMPARED // 2
    return text[:half] + text[-half:]
