"""A gen that repeats itself past anything in the document: the run stops there.

Greedy decoding can fall into a loop inside a gen body: the fine-tuned Qwen2.5-Coder
adapters wrote ``uint64_t /*ne13*/, `` or a four-line block of struct fields over and
over until the 1,024-token budget ran out (docs/learn.md): a minute or more of
decoding for no edit. Code repeats itself too (tables, separators, runs of zeros), so a
gen is called looping only when its text ends in a unit of at most :data:`UNIT_MAX`
characters repeated at least :data:`MIN_REPEATS` times over at least :data:`MIN_CHARS`
characters, *and* that run appears nowhere in the document or the instruction (a model
retyping the document's own table is not looping). The thresholds sit above the longest
such run in the corpora's 400 real files (280 characters: spaces in a Markdown file, a
new file's worst case), and no text a real commit adds is called looping against its
document (``tests/test_repetition.py``).

The decode loop (:class:`GenGuard`) and vLLM's logits processor ask :func:`repeating`
before each token of a gen body and stop the run, ``stats.stop_reason == "repetition"``:
the program is incomplete and the caller is told why (as for ``max_gen_tokens``) after
a hundred or so tokens of loop rather than at the token budget.
``LoopSwitches(repetition_guard=False)`` (vLLM: ``repetition_guard=False``) turns it off.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..language.syntax import GEN_OPEN
from .constraint import ProgramConstraint
from .prompts import Prompt, as_messages

#: The longest repeated unit looked for, in characters (a few lines of code).
UNIT_MAX = 256
#: A run must repeat its unit at least this many times ...
MIN_REPEATS = 6
#: ... and cover at least this many characters (short units: ``=`` × 80 is a rule line).
MIN_CHARS = 320
#: The text examined: the longest run any unit needs to qualify.
WINDOW = max(MIN_CHARS, UNIT_MAX * MIN_REPEATS)
#: The tail whose recurrence is checked first, cheaply (any qualifying run holds it twice).
_PROBE = 32


@dataclass(frozen=True)
class Loop:
    """A gen body's periodic tail: its unit's length and how many characters it covers."""

    unit: int
    chars: int

    @property
    def repeats(self) -> float:
        return self.chars / self.unit


def retypable(document: str, prompt: Prompt) -> str:
    """What a gen may retype, so never a loop: the document and the conversation."""
    return "\n".join([document, *(m["content"] for m in as_messages(prompt))])


def repeating(constraint: ProgramConstraint, haystack: str) -> Loop | None:
    """The loop the gen body being written ends in (:func:`looping`); ``None`` outside a gen."""
    if not constraint.in_gen:
        return None
    # The body's last WINDOW characters, without copying a long body out of the text:
    # a body holds no unescaped <gen>, so the last one in reach is its own.
    tail = constraint.text[-WINDOW - len(GEN_OPEN):]
    start = tail.rfind(GEN_OPEN)
    return looping(tail[start + len(GEN_OPEN):] if start >= 0 else tail, haystack)


def looping(body: str, document: str) -> Loop | None:
    """The loop ``body`` (a gen body being written) ends in, if it is one the ``document``
    (and instruction; any text the model may be retyping) does not hold; else ``None``."""
    if len(body) < MIN_CHARS:
        return None
    tail = body[-WINDOW:]
    probe = tail[-_PROBE:]
    # A periodic tail of unit p repeats its last _PROBE characters p earlier: a C-speed
    # find rules out almost every step before the O(WINDOW) period computation.
    if tail.find(probe, max(0, len(tail) - _PROBE - UNIT_MAX), len(tail) - 1) < 0:
        return None
    loop = periodic_tail(tail)
    if loop is None or tail[-loop.chars:] in document:
        return None
    return loop


def periodic_tail(tail: str, repeats: int = MIN_REPEATS, chars: int = MIN_CHARS) -> Loop | None:
    """The longest suffix of ``tail`` whose smallest period is at most UNIT_MAX, repeated
    at least ``repeats`` times over at least ``chars`` characters (prefix function of the
    reversed text: the smallest period of its first m characters is m minus their
    longest border)."""
    text = tail[::-1]
    border = [0] * len(text)
    k = 0
    for i in range(1, len(text)):
        while k and text[i] != text[k]:
            k = border[k - 1]
        if text[i] == text[k]:
            k += 1
        border[i] = k
    for m in range(len(text), max(chars, 1) - 1, -1):
        unit = m - border[m - 1]
        if unit <= UNIT_MAX and m >= repeats * unit:
            return Loop(unit, m)
    return None


class GenGuard:
    """The decode loop's stops inside a gen body: ``max_gen_tokens`` (``cap``, counted in
    chosen tokens) and a repeating body (``haystack``: the text it may retype; ``None``:
    off). :meth:`stop` runs before each choice and names the reason to stop, if any."""

    def __init__(self, cap: int | None, haystack: str | None):
        self.cap, self.haystack, self.tokens = cap, haystack, 0

    def stop(self, constraint: ProgramConstraint) -> str | None:
        if self.cap is not None:
            self.tokens = self.tokens + 1 if constraint.in_gen else 0
            if self.tokens > self.cap:
                return "max_gen_tokens"
        if self.haystack is not None and repeating(constraint, self.haystack):
            return "repetition"
        return None
