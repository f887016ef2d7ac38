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
* a copy written right after a copy (a deletion) is drafted as resuming two units on
  (one unit deleted, the commonest case) and running to the end;
* a copy's end index is drafted as the document's last unit: the last copy of a
  program ends there, earlier copies rarely do (their end digits are then rejected);
* a gen most often rewrites the lines right after the previous copy, keeping much of
  their text (``lookup=True``, line programs): the gen after a copy is drafted as the
  next line retyped, then closed, then the copy after it (the whole op); inside a line,
  the line's last few characters are looked up in the next few lines and the rest of
  the matching line, the close and the next copy are drafted; at a line's end, the
  close and the next copy (:meth:`Drafter.line_body`);
* inside a gen body, prompt lookup (``lookup=True``): when the body's last
  :data:`LOOKUP_MATCH` characters or more occur in the document (first after the
  previous copy, then anywhere), in an earlier gen or earlier in the body itself, the
  text that follows that occurrence is drafted. Gens often retype document text
  (a line moved, a call re-indented); this is transformers' prompt-lookup search done
  on text, inside the one loop.

Model-free: no torch; the generator tokenizes the text and validates it with the
grammar.

Whether a draft pays depends on the machine: on a GPU a forward of 17 positions costs
about what one of 1 costs, on a CPU up to 2-3 decode steps. :class:`DraftBudget` cuts
each draft to the length whose expected saving (decode steps its accepted tokens spare,
from the acceptance seen so far in the run) exceeds its cost in width, read off a
:class:`ForwardCost` curve measured on the machine (``bench kernel``, or
:meth:`ForwardCost.measure`). Without a curve every draft is kept whole.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np
from rapidfuzz.distance import Indel

from ..files import atomic_write
from ..language import escape, program, syntax
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
LOOKUP_KEYS = (32, 16, 8)
LOOKUP_MATCH = LOOKUP_KEYS[-1]
#: At most this many characters are drafted after a match (the generator keeps at most
#: its ``MAX_DRAFT_TOKENS`` tokens of them).
LOOKUP_CHARS = 96
#: Line drafts (:meth:`Drafter.line_body`): the shortest and longest suffix of the line
#: being written that is looked up in the next :data:`LINE_WINDOW` lines of the document.
LINE_KEYS = (3, 32)
LINE_WINDOW = 8

#: What a draft was drawn from, for :class:`DraftBudget`'s acceptance counts: the
#: program's structure (copy tags, ``<gen>``, ``</gen>``) or a gen-body lookup match with
#: the longest, middle or shortest key of :data:`LOOKUP_KEYS` (longer matches continue
#: more often), the caller's plan, a line draft (:meth:`Drafter.line_body`), or
#: alternatives: digits drafted side by side at one position (:mod:`.tree`).
DraftKind = Literal["tag", "lookup_long", "lookup_mid", "lookup_short", "plan", "line", "fan"]
_LOOKUP_KINDS: tuple[DraftKind, ...] = ("lookup_long", "lookup_mid", "lookup_short")


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
    plan
        The program the caller expects (e.g. the oracle program of a predicted edited
        document, :meth:`CaDGenerator.run`'s ``prediction``): while the program written
        so far follows it, the rest of the plan is drafted, up to the next copy's end
        index (a splice comes between a copy's tag and what follows). Once the program
        leaves the plan, the drafts above take over.
    """

    def __init__(self, units: Sequence[str], granularity: Granularity, lookup: bool = False,
                 plan: Sequence[Op] | None = None):
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
        #: What the last :meth:`predict` drew its text from.
        self.kind: DraftKind = "tag"
        self.plan = list(plan) if plan is not None else None

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
        self.kind = "tag"
        if self.plan is not None:
            planned = self._planned(pending, ops)
            if planned:
                self.kind = "plan"
                return planned
        expected = self._next_op_text(ops)
        if not ops:
            expected = syntax.PROGRAM_OPEN + expected
        if expected.startswith(pending):
            return expected[len(pending):]
        if ops and isinstance(ops[-1], (Copy, CopyTokens)) and ops[-1].end + 2 <= self.hi:
            # a copy right after a copy skips what was deleted: one unit, most often
            guess = f"{syntax.COPY_OPEN[self.granularity]}{ops[-1].end + 2}{syntax.RANGE_SEPARATOR}{self.hi}"
            if guess.startswith(pending):
                return guess[len(pending):]
        if pending.startswith(syntax.GEN_OPEN):
            for prefix in syntax.GEN_CLOSE_PREFIXES:
                if pending.endswith(prefix):
                    body = pending[len(syntax.GEN_OPEN):-len(prefix)]
                    after = self._next_op_text([*ops, Gen(escape.decode(body))])
                    return syntax.GEN_CLOSE[len(prefix):] + after
            if self.lookup:
                body = escape.decode(pending[len(syntax.GEN_OPEN):])
                return self.line_body(body, ops) or self.lookup_body(body, ops)
            return ""
        end = syntax.COPY_END_INDEX_RE.search(pending)
        if end and str(self.hi).startswith(end.group(1)):
            return str(self.hi)[len(end.group(1)):]
        return ""

    def _planned(self, pending: str, ops: Sequence[Op]) -> str:
        """The plan's text after ``pending``, up to the next copy's end index; ``""`` when
        the program so far is not the plan's beginning."""
        text, _ = self._plan_after(pending, ops)
        return text[len(pending):] if text is not None and len(text) > len(pending) else ""

    def plan_closes(self, pending: str, ops: Sequence[Op]) -> bool:
        """Whether ``pending`` is the plan's next copy tag up to its end index: the plan's
        next text is that tag's close. :meth:`predict` drafts up to the end index only (the
        splice follows the close), so this is the one choice of the plan it leaves out,
        and the one where a model extends an index (``1-2`` to ``1-25``)."""
        text, at_copy = self._plan_after(pending, ops)
        return at_copy and text == pending

    def plan_ids(self, pending: str, ops: Sequence[Op], encode: Callable[[str], list[int]]) -> list[int]:
        """The plan's next tokens from ``pending`` (``encode``: the model's tokenizer), the
        close of a planned copy's tag included (one token or several: DeepSeek-Coder has
        no ``"/>`` token); ``[]`` once the program left the plan. What a loop that follows
        a prediction takes where the model agrees."""
        if self.plan_closes(pending, ops):
            return encode(syntax.COPY_CLOSE)
        text = self.predict(pending, ops)
        return encode(text) if text and self.kind == "plan" else []

    def _plan_after(self, pending: str, ops: Sequence[Op]) -> tuple[str | None, bool]:
        """The plan's text from the start of ``pending`` up to the next copy's end index,
        and whether it stops at one (``False``: it runs to the program's end); ``None``
        when the program so far is not the plan's beginning. Before the first op,
        ``pending`` holds ``<program>`` until it is complete, then what follows it."""
        done = len(ops)
        if self.plan is None or len(self.plan) < done or any(a != b for a, b in zip(ops, self.plan)):
            return None, False
        text, at_copy = "", False
        for op in self.plan[done:]:
            piece = program.render_op(op)
            if isinstance(op, (Copy, CopyTokens)):
                text, at_copy = text + piece[:-len(syntax.COPY_CLOSE)], True  # the splice follows the close
                break
            text += piece
        else:
            text += syntax.PROGRAM_CLOSE
        for candidate in ([syntax.PROGRAM_OPEN + text, text] if not ops else [text]):
            if candidate.startswith(pending):
                return candidate, at_copy
        return None, False

    def _resume(self, ops: Sequence[Op]) -> int:
        """The number of the first unit after the last copy in ``ops`` (``lo`` without one)."""
        copies = [op for op in ops if isinstance(op, (Copy, CopyTokens))]
        return copies[-1].end + 1 if copies else self.lo

    def _next_op_text(self, ops: Sequence[Op]) -> str:
        """The start of the op expected after ``ops`` (a copy up to its end index)."""
        last_end = self._resume(ops) - 1
        if ops and isinstance(ops[-1], (Copy, CopyTokens)):
            if ops[-1].end >= self.hi:
                return ""  # </program> follows; its logits are never needed
            if self.granularity != "lines":
                return syntax.GEN_OPEN
            return syntax.GEN_OPEN + "\n" + (self.line_body("\n", ops) if self.lookup else "")
        if self.hi < self.lo:
            return ""  # an empty document: nothing to copy
        start = last_end + 1
        if ops:  # after a gen: skip the units it most likely replaced
            start += self.replaced(last_end + 1, ops[-1].text)
        if start > self.hi:
            return ""
        return f"{syntax.COPY_OPEN[self.granularity]}{start}{syntax.RANGE_SEPARATOR}{self.hi}"

    def line_body(self, body: str, ops: Sequence[Op]) -> str:
        """Program text to draft after the (decoded) gen ``body`` of a line program, read
        off the lines it most likely rewrites; ``""`` when they give no guess.

        A gen most often rewrites the lines right after the previous copy, keeping much
        of their text. So: at the body's start, the first of those lines; inside a line,
        the rest of the nearby line holding the line's last :data:`LINE_KEYS` characters
        (the shortest key is short: the search covers :data:`LINE_WINDOW` lines only);
        after a complete line, nothing of the body. Each guess ends the gen after its line
        and goes on with the op that follows (``</gen>`` and the next copy's tag).
        """
        if self.granularity != "lines" or not body.startswith("\n"):
            return ""
        first = self._resume(ops) - self.lo  # index in units of the first line after the copy
        window = self.units[first:first + LINE_WINDOW]
        current = body[body.rfind("\n") + 1:]
        rest = None
        if len(body) == 1:  # nothing written yet: the first nearby line, whole
            rest = window[0] if window else None
        elif current:
            for size in range(min(len(current), LINE_KEYS[1]), LINE_KEYS[0] - 1, -1):
                key = current[-size:]
                for line in window:
                    at = line.find(key)
                    if at >= 0:
                        rest = line[at + size:]
                        break
                if rest is not None:
                    break
        else:
            rest = ""  # a complete line: the gen may end here
        if rest is None:
            return ""
        self.kind = "line"
        line_end = rest + "\n" if (current or len(body) == 1) else ""
        after = self._next_op_text([*ops, Gen(body + line_end)])
        return escape.encode(line_end) + syntax.GEN_CLOSE + after

    def lookup_body(self, body: str, ops: Sequence[Op]) -> str:
        """Program text to draft after the (decoded) gen ``body`` so far: what follows the
        first earlier occurrence of its longest suffix in :data:`LOOKUP_KEYS`, escaped;
        ``""`` without one.

        The places searched, in order: the document after the previous copy, the whole
        document, the earlier gens' text and the body itself.
        """
        resume = self._resume(ops) - self.lo
        start = self._offsets[resume] if resume < len(self._offsets) else len(self._text)
        # the key's own place, at the body's end, has nothing after it: not a match
        earlier = "".join(op.text for op in ops if isinstance(op, Gen)) + body
        for size, kind in zip(LOOKUP_KEYS, _LOOKUP_KINDS):
            if len(body) < size:
                continue
            key = body[-size:]
            for source, offset in ((self._text, start), (self._text, 0), (earlier, 0)):
                at = source.find(key, offset)
                if at >= 0 and at + size < len(source):
                    self.kind = kind
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


def forward_clock(runner: Any) -> Callable[[], float]:
    """The clock forwards are timed by: process CPU time on a CPU (a shared machine's
    other work stays out), wall time on an accelerator."""
    return time.process_time if str(getattr(runner, "device", "cpu")).startswith("cpu") else time.perf_counter


@dataclass(frozen=True)
class ForwardCost:
    """What one forward costs on a machine, by its width (positions appended to the cache).

    ``keep1[k]`` and ``full[k]`` are the seconds of a forward of ``widths[k]`` positions
    with one row of logits and with a row at every position (a draft of ``L`` tokens
    needs ``L + 1`` rows). Between measured widths the cost is interpolated linearly, past
    the last one extrapolated along the last segment.
    """

    widths: tuple[int, ...]
    keep1: tuple[float, ...]
    full: tuple[float, ...]
    #: Let each run rescale the curve by its own forwards (:class:`DraftBudget`); ``False``
    #: reads it as measured.
    online: bool = True

    def __post_init__(self) -> None:
        if not (len(self.widths) == len(self.keep1) == len(self.full) >= 2):
            raise ValueError("widths, keep1 and full must have the same length, at least 2")
        if self.widths[0] != 1 or any(b <= a for a, b in zip(self.widths, self.widths[1:])):
            raise ValueError(f"widths must rise strictly from 1, got {self.widths}")
        if min(self.keep1) <= 0 or min(self.full) <= 0:
            raise ValueError("forward costs must be positive")

    def steps(self, width: int, rows: int = 1) -> float:
        """The cost of a forward of ``width`` positions and ``rows`` rows of logits, in
        one-token decode steps (``keep1`` at width 1)."""
        n, keep1, per_row = self._arrays
        return (_extrapolate(width, n, keep1) + (rows - 1) * _extrapolate(width, n, per_row)) / keep1[0]

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        # built once: the budget asks for up to 2 * MAX_DRAFT_TOKENS costs per forward
        n = np.asarray(self.widths, dtype=float)
        keep1, full = np.asarray(self.keep1, dtype=float), np.asarray(self.full, dtype=float)
        return n, keep1, np.maximum((full - keep1) / n, 0.0)

    def to_dict(self) -> dict[str, list]:
        """The curve as plain JSON: ``{"widths", "keep1", "full"}``."""
        return {"widths": list(self.widths), "keep1": list(self.keep1), "full": list(self.full)}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "ForwardCost":
        """The curve of :meth:`to_dict`'s form."""
        return cls(tuple(record["widths"]), tuple(record["keep1"]), tuple(record["full"]))

    @classmethod
    def load(cls, path: str | Path) -> "ForwardCost":
        """A curve saved by :meth:`save`, or the ``forward_cost`` of a ``bench kernel`` record."""
        record = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(record, dict):
            raise ValueError("expected a JSON object")
        if "widths" not in record and "forward_cost" in record:
            record = record["forward_cost"]
        elif "widths" not in record:
            raise KeyError("neither a saved ForwardCost nor a bench kernel record with 'forward_cost' "
                           "(records written before it was added: run bench kernel again)")
        return cls.from_dict(record)

    def save(self, path: str | Path) -> None:
        """Write the curve as JSON (atomically)."""
        atomic_write(path, json.dumps(self.to_dict()))

    @classmethod
    def measure(cls, runner: Any, widths: Sequence[int] = tuple(range(1, 18)), prefix: int = 256,
                repeats: int = 3) -> "ForwardCost":
        """Time forwards of each width after a ``prefix``-token cache (process CPU time
        on a CPU, wall time elsewhere; the minimum of ``repeats``). About 25 s for a 0.5B
        model on one CPU core; a GPU needs no curve (width is nearly free there).

        ``runner``: a :class:`~cad_outlines.decoding.runner.Runner`, e.g.
        ``TransformersRunner(model.model)``.
        """
        widths = sorted(set(widths) | {1})
        clock = forward_clock(runner)
        ids = [100 + (k * 7919) % 20000 for k in range(prefix + max(widths))]
        cache = runner.new_cache()
        runner.forward(ids[:prefix], cache)
        keep1, full = [], []
        for width in widths:
            for rows, out in ((1, keep1), (width, full)):
                times = []
                for _ in range(repeats + 1):  # the first run of a shape warms it up
                    start = clock()
                    runner.forward(ids[prefix:prefix + width], cache, rows=rows)
                    times.append(clock() - start)
                    runner.crop(cache, width)
                out.append(min(times[1:]))
        return cls(tuple(widths), tuple(keep1), tuple(full))


def _extrapolate(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
    if x <= xs[-1]:
        return float(np.interp(x, xs, ys))
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    return float(ys[-1] + slope * (x - xs[-1]))


class DraftBudget:
    """How much of each draft is worth appending to a forward.

    A draft's first token is accepted with probability ``p1`` and each later one, given
    the one before it was, with probability ``q`` (per :data:`DraftKind`, counted in the
    run from a prior; two figures because lookup drafts are bimodal: a match that ends
    where the gen changes the text fails at once, one that holds tends to hold long).
    ``L`` tokens spare ``p1 * (1 + q + ... + q**(L-1))`` decode steps on average and
    cost the forward ``scale * (cost.steps(width + L, L + 1) - cost.steps(width))`` steps.
    :meth:`length` picks the ``L`` with the largest gain (0 when none gains).

    ``scale`` calibrates the curve online (:meth:`observe`, fed every forward of the run):
    a curve measured at another load than the decode's misprices width (a busy machine
    can make wide forwards relatively cheaper or dearer), so once the run has timed
    :data:`MIN_OBSERVED` one-token forwards and as many wider ones within the curve's
    widths, ``scale`` is the median over recent wider forwards of their extra cost over a
    one-token forward (in the run's own one-token forwards, median) divided by the
    curve's. A curve with ``online=False`` is read as it is.

    Parameters
    ----------
    cost
        The machine's :class:`ForwardCost`; ``None`` keeps every draft whole (width
        assumed free, as on a GPU).
    """

    #: (drafts, first tokens accepted, later tokens accepted, later mismatches) before
    #: any evidence: tags are nearly always right (the grammar fixes most of their text),
    #: lookup continuations less so. For ``"fan"`` (a draft's alternatives, siblings or a
    #: fan), "first token accepted" means one of them was chosen.
    PRIOR: dict[str, tuple[float, float, float, float]] = {
        "tag": (10.0, 9.0, 9.0, 1.0), "lookup_long": (2.0, 1.2, 3.0, 1.0),
        "lookup_mid": (2.0, 1.1, 2.5, 1.0), "lookup_short": (2.0, 1.0, 2.0, 1.0),
        "plan": (10.0, 9.0, 18.0, 1.0), "line": (2.0, 1.5, 3.0, 1.0), "fan": (4.0, 2.0, 1.0, 1.0)}

    #: Timed forwards of each sort (one-token; wider) before :attr:`scale` moves off 1.
    MIN_OBSERVED = 3

    def __init__(self, cost: ForwardCost | None):
        self.cost = cost
        self.counts = {kind: list(prior) for kind, prior in self.PRIOR.items()}
        #: The run's width cost over the curve's (1 until calibrated; see the class docstring).
        self.scale = 1.0
        self._tau: deque[float] = deque(maxlen=32)  # recent one-token forwards, seconds
        self._wide: deque[tuple[float, float]] = deque(maxlen=64)  # (seconds, curve's extra steps)

    @property
    def calibrates(self) -> bool:
        """Whether :meth:`observe` should be fed (a curve that adapts online)."""
        return self.cost is not None and self.cost.online

    def observe(self, width: int, rows: int, seconds: float) -> None:
        """One forward of the run (an ``ObservedRunner`` observer): update :attr:`scale`."""
        if not self.calibrates or seconds <= 0:
            return
        if width == 1:
            self._tau.append(seconds)
        elif width <= self.cost.widths[-1]:  # the prefill and long splices: outside the curve
            self._wide.append((seconds, self.cost.steps(width, rows) - 1.0))
        if len(self._tau) >= self.MIN_OBSERVED and len(self._wide) >= self.MIN_OBSERVED:
            tau = float(np.median(self._tau))
            ratios = [(s / tau - 1.0) / extra for s, extra in self._wide if extra > 0]
            if ratios:
                self.scale = max(0.0, float(np.median(ratios)))

    def acceptance(self, kind: str) -> tuple[float, float]:
        """``(p1, q)``: the first token's acceptance and each later one's."""
        drafts, first, later, missed = self.counts[kind]
        return first / drafts, later / (later + missed)

    def length(self, kind: str, offered: int, width: int) -> int:
        """How many of ``offered`` drafted tokens to append to a forward of ``width``
        positions."""
        if self.cost is None or offered == 0:
            return offered
        p1, q = self.acceptance(kind)
        base = self.cost.steps(width)
        best, best_gain, saved, chance = 0, 0.0, 0.0, p1
        for length in range(1, offered + 1):
            saved += chance
            chance *= q
            gain = saved - self.scale * (self.cost.steps(width + length, length + 1) - base)
            if gain > best_gain:
                best, best_gain = length, gain
        return best

    def fan_pays(self, size: int, width: int) -> bool:
        """Whether ``size`` alternatives (:mod:`.tree`) are worth appending to a forward
        of ``width`` positions: the share of alternative sets of which one was chosen (a
        forward spared) against the steps the extra positions cost."""
        if self.cost is None:
            return True
        spared = self.acceptance("fan")[0]
        return spared > self.scale * (self.cost.steps(width + size, size + 1) - self.cost.steps(width))

    def record(self, kind: str, accepted: int, missed: bool) -> None:
        """A draft's fate: ``accepted`` tokens kept, then a mismatch or not."""
        counts = self.counts[kind]
        counts[0] += 1
        if accepted:
            counts[1] += 1
            counts[2] += accepted - 1
            counts[3] += int(missed)
