"""The token-level constraint of one document's program language.

The grammar (:mod:`.grammar`) is compiled through Outlines' own llguidance backend
(``LLGuidanceBackend.get_cfg_logits_processor``); the decode loop then drives the
resulting ``llguidance.LLMatcher`` itself, because Outlines' stock logits processors
advance one token per call and fall out of step when a forced run or a splice enters
the context in one forward.

Two small automata are composed with the matcher's mask:

* **index order** — the grammar bounds each index to ``1..n`` (a compact regex); every
  token allowed inside a copy tag is checked against :class:`CopyIndices`: the tag it
  extends must still be completable to one with ``i <= j`` whose start and end are
  valid copy boundaries, so every copy satisfies ``1 <= i <= j <= n`` (and, in token
  programs, never starts or ends inside a UTF-8 character);
* **copy budget** — the copies of one program reproduce at most :data:`COPY_RATIO` times
  the document's units in all (the last copy's end is capped at what is left; then no
  copy may start), so a model looping on copies must write a gen or close the program:
  copied text can never fill the context;
* **tag boundary** — inside a copy tag, tokens whose text runs past the tag's closing
  ``>`` (e.g. Qwen's ``"/><``) are removed, so a copy tag always ends on a token
  boundary and the splice lands exactly after it (the adapter's layout rule).

Spliced copy tokens never reach the matcher: it only ever sees program tokens.
"""

from __future__ import annotations

import codecs
import copy
import math
from typing import Any, Protocol, Sequence

import numpy as np
import torch

from ..language import program, syntax
from ..language.program import Copy, CopyTokens, Op
from .compiling import CompiledGrammar

#: The copy budget's default: a program's copies may reproduce the document twice over.
#: An edit that keeps a file copies it about once; a loop copies it again and again.
COPY_RATIO = 2.0


class Constraint(Protocol):
    """What a decode loop asks of a constraint at every step: mask, advance, stop.

    :class:`ProgramConstraint` and :class:`Unconstrained` (the CaD loop's two branches,
    see :class:`LoopConstraint`) and DCCD's matchers (:mod:`cad_outlines.decoding.dccd`)
    implement it.
    """

    def allowed(self, vocab_size: int) -> torch.Tensor | None:
        """Boolean mask of the ids allowed next, ``vocab_size`` long (``None``: all)."""

    def advance(self, ids: Sequence[int]) -> Any:
        """Consume the chosen (and forced) ids."""

    @property
    def done(self) -> bool:
        """Whether the output is complete (the loop stops)."""


class LoopConstraint(Constraint, Protocol):
    """What the CaD loop (:meth:`CaDGenerator._decode`) also needs: text, ops, forced runs.

    ``accepts_end``: a forced text may end before the constraint is done (then the loop
    calls ``end``); drafting also reads ``pending`` and ``validate`` of a
    :class:`ProgramConstraint`.
    """

    accepts_end: bool
    text: str
    ops: list[Op]

    def advance(self, ids: Sequence[int]) -> list[Op]:
        """Consume ids; the ops they completed."""

    def forced(self) -> list[int]:
        """The ids the constraint forces from here (may be empty)."""

    def piece_bytes(self, tid: int) -> bytes:
        """The bytes of one token as the constraint sees them."""

    def end(self) -> None:
        """Complete the output where a forced text ran out (only when ``accepts_end``)."""


def bitmask_to_mask(bitmask: torch.Tensor, vocab_size: int, ids: int | None = None,
                    out: np.ndarray | None = None) -> torch.Tensor:
    """A token bitmask row as a boolean mask of ``vocab_size`` ids.

    The bitmask is llguidance's layout (``llguidance.torch.allocate_token_bitmask``;
    ``outlines_core``'s ``write_mask_into`` writes the same): int32 words, bit ``i`` of
    word ``w`` is id ``32 * w + i``. llguidance ships no unpacking helper (its
    ``apply_token_bitmask_inplace`` only writes ``-inf`` into logits, and the loops need
    the mask itself: for the index-order automaton, α and the sampler).

    Parameters
    ----------
    bitmask
        One row of int32 words, on the CPU.
    vocab_size
        Length of the mask (the model's logits); ids past ``ids`` are False.
    ids
        How many ids the bitmask covers (the tokenizer's vocabulary); default: every bit.
    out
        A uint8 buffer of ``vocab_size`` to write into, reused across steps; the
        returned tensor is then a view of it.
    """
    bits = np.unpackbits(bitmask.numpy().view(np.uint8), bitorder="little")
    if out is None:
        out = np.zeros(vocab_size, dtype=np.uint8)
    n = min(vocab_size, bits.shape[0] if ids is None else ids)
    out[:n] = bits[:n]
    # uint8 0/1 viewed as bool: no copy, no allocation of a vocabulary-sized tensor.
    return torch.from_numpy(out.view(np.bool_))


class CopyIndices:
    """Where a copy may start and end: ``lo <= i <= j <= hi``, at valid boundaries.

    Line programs may start and end at every line. In token programs a copy must not
    start or end inside a UTF-8 character (a token of a byte-fallback or byte-level
    tokenizer can hold part of one), so only the tokens that start (end) on a character
    boundary are valid starts (ends).

    Parameters
    ----------
    lo, hi
        The first and last index (``1..n`` for lines, ``0..T-1`` for tokens).
    starts, ends
        Per index ``lo..hi``: whether a copy may start (end) there; ``None``: everywhere.
    """

    def __init__(self, lo: int, hi: int, starts: Sequence[bool] | None = None,
                 ends: Sequence[bool] | None = None):
        self.lo, self.hi = lo, hi
        self.floor = lo  # the lowest start (monotone copies raise it: see ``after``)
        self.budget: int | None = None  # units copies may still reproduce (``spend``)
        self._starts = _counts(starts, hi - lo + 1)
        self._ends = _counts(ends, hi - lo + 1)
        # A start is only worth taking if some end can follow it.
        self._last_end = hi if ends is None else lo + max(
            (k for k, ok in enumerate(ends) if ok), default=-1)

    @classmethod
    def for_lines(cls, n: int) -> "CopyIndices":
        """Lines ``1..n``, every one a valid start and end."""
        return cls(1, n)

    @classmethod
    def for_tokens(cls, pieces: Sequence[bytes]) -> "CopyIndices":
        """Tokens ``0..T-1`` of a document given by its per-token bytes."""
        # A continuation byte (0b10xxxxxx) cannot begin a character.
        return cls.for_token_count(len(pieces), inside_characters(pieces))

    @classmethod
    def for_token_count(cls, count: int, inside: Sequence[int] = ()) -> "CopyIndices":
        """Tokens ``0..count-1``, where the tokens ``inside`` start inside a character
        (no copy starts at one, or ends just before one)."""
        bad = set(inside)
        starts = [k not in bad for k in range(count)]
        ends = [starts[k + 1] if k + 1 < count else True for k in range(count)]
        return cls(0, count - 1, starts, ends)

    def after(self, end: int) -> "CopyIndices":
        """The same bounds with starts only past ``end`` (a monotone program's next copy)."""
        raised = copy.copy(self)
        raised.floor = max(self.floor, end + 1)
        return raised

    def spend(self, units: int) -> "CopyIndices":
        """The same bounds with ``units`` fewer left in the budget (unchanged without one)."""
        if self.budget is None:
            return self
        spent = copy.copy(self)
        spent.budget = max(0, self.budget - units)
        return spent

    def limited(self, budget: int | None) -> "CopyIndices":
        """The same bounds with a budget of ``budget`` copied units (``None``: none)."""
        capped = copy.copy(self)
        capped.budget = budget
        return capped

    @property
    def exhausted(self) -> bool:
        """No copy can start any more (every start is below :attr:`floor`, or the budget
        is spent)."""
        return self._spent or not self._any(self._starts, self.floor, self._last_end)

    @property
    def _spent(self) -> bool:
        return self.budget is not None and self.budget < 1

    def _end_cap(self, start: int) -> int:
        """The last end a copy from ``start`` may take within the budget: the budget's
        last unit, or the first valid end after it where none comes before (a token copy
        ends on a character's boundary, a few tokens at most)."""
        if self.budget is None:
            return self.hi
        cap = min(self.hi, start + self.budget - 1)
        while cap < self.hi and not self._any(self._ends, max(start, self.lo), cap):
            cap += 1
        return cap

    def can_start(self, digits: str, closes: bool) -> bool:
        """Can a start index whose decimal form begins with ``digits`` be valid?

        ``closes``: the number ends right after ``digits``.
        """
        if self._spent:
            return False
        return any(self._any(self._starts, a, b)
                   for a, b in _extensions(digits, closes, self.floor, self._last_end))

    def can_end(self, digits: str, closes: bool, start: int) -> bool:
        """Can an end index beginning with ``digits`` be valid for a copy from ``start``?"""
        return any(self._any(self._ends, a, b)
                   for a, b in _extensions(digits, closes, max(start, self.lo), self._end_cap(start)))

    def allows(self, tag: str) -> bool:
        """Whether the (partial) copy tag ``tag`` can still complete to a valid copy.

        ``tag`` starts with ``<copy``; a tag that runs past its closing ``>`` is refused
        (the splice must land right after it).
        """
        whole = syntax.COPY_TAG_RE.match(tag)
        if whole and whole.end() < len(tag):
            return False
        match = syntax.COPY_INDICES_RE.match(tag)
        if match is None or not match.group(1):
            return True  # no index yet: the grammar's own range bounds what follows
        first, dash, second = match.groups()
        if not dash:
            return self.can_start(first, closes=match.end() < len(tag))
        if not self.can_start(first, closes=True):
            return False
        if not second:
            return True  # a valid start has a valid end after it (see _last_end)
        return self.can_end(second, match.end() < len(tag), int(first))

    def _any(self, counts: np.ndarray | None, a: int, b: int) -> bool:
        if a > b:
            return False
        if counts is None:
            return True
        return bool(counts[b - self.lo + 1] - counts[a - self.lo] > 0)


def copy_budget(units: int, ratio: float) -> int:
    """How many units a program's copies may reproduce in all: ``ratio`` times the
    document's ``units``, and at least one document's worth."""
    if ratio <= 0:
        raise ValueError(f"copy ratio must be > 0, got {ratio!r}")
    return max(units, math.ceil(ratio * units))


def inside_characters(pieces: Sequence[bytes]) -> list[int]:
    """The tokens (by their bytes) that start inside a UTF-8 character."""
    return [k for k, piece in enumerate(pieces) if piece and piece[0] & 0xC0 == 0x80]


def _counts(flags: Sequence[bool] | None, size: int) -> np.ndarray | None:
    """Prefix counts of ``flags`` (``None`` stays ``None``: every index is valid)."""
    if flags is None:
        return None
    if len(flags) != size:
        raise ValueError(f"expected {size} boundary flags, got {len(flags)}")
    return np.concatenate([[0], np.cumsum(np.asarray(flags, dtype=np.int64))])


def _extensions(digits: str, closes: bool, lo: int, hi: int) -> list[tuple[int, int]]:
    """The ranges of integers in ``[lo, hi]`` whose decimal form starts with ``digits``.

    ``closes``: the number is ``digits`` itself. The grammar has no leading zeros, so
    ``"0"`` admits no extension.
    """
    value = int(digits)
    ranges = [(max(lo, value), min(hi, value))]
    if closes or digits.startswith("0"):
        return ranges
    scale = 10
    while value * scale <= hi:
        ranges.append((max(lo, value * scale), min(hi, value * scale + scale - 1)))
        scale *= 10
    return ranges


class ProgramConstraint:
    """The live constraint of one generation: matcher + index order + tag boundary.

    A :class:`LoopConstraint`, as is :class:`Unconstrained` (the decode loop's other
    branch). Drafting (constrained runs only) also reads ``pending`` and ``validate``.

    Parameters
    ----------
    compiled
        From :func:`compile_grammar`.
    indices
        Where copies may start and end. Default: every index of ``compiled`` (right
        for line programs; token programs pass :meth:`CopyIndices.for_tokens` so that
        no copy splits a character).
    monotone
        Each copy starts after the previous one's end (``LoopSwitches.monotone_copies``).
    copy_ratio
        The copy budget: copies reproduce at most this many times the document's units
        in all (:func:`copy_budget`); ``None``: no budget.
    """

    accepts_end = False  # a forced program that runs out before </program> is an error

    def __init__(self, compiled: CompiledGrammar, indices: CopyIndices | None = None,
                 monotone: bool = False, copy_ratio: float | None = COPY_RATIO):
        import llguidance
        import llguidance.torch

        self.compiled = compiled
        bounds = (1, compiled.upper) if compiled.granularity == "lines" else (0, compiled.upper - 1)
        if indices is None:
            indices = CopyIndices(*bounds)
        elif (indices.lo, indices.hi) != bounds:
            raise ValueError(f"copy indices {indices.lo}..{indices.hi} do not match the grammar's "
                             f"{compiled.granularity} bound {compiled.upper}")
        if copy_ratio is not None:
            indices = indices.limited(copy_budget(indices.hi - indices.lo + 1, copy_ratio))
        self.indices = indices
        self.monotone = monotone
        self.matcher = llguidance.LLMatcher(compiled.llg_tokenizer, compiled.grammar_spec)
        if self.matcher.is_error():
            raise ValueError(f"grammar rejected by llguidance: {self.matcher.get_error()}")
        self._bitmask = llguidance.torch.allocate_token_bitmask(1, compiled.table.vocab_size)
        self._buffer: np.ndarray | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""  # program text consumed so far
        self._op_end = 0  # offset in text after the last complete op
        # Before each token: len(text), the decoder's state, and _op_end and the op count
        # before the advance that took it (a rollback restores them; see rollback).
        self._marks: list[tuple[int, Any, int, int]] = []
        self.ops: list[Op] = []

    # -- mask -------------------------------------------------------------------------

    def allowed(self, vocab_size: int) -> torch.Tensor:
        """Boolean mask of the tokens allowed next, padded with False to ``vocab_size``.

        The returned tensor is a view of a buffer reused at every step: read it before
        the next call.
        """
        import llguidance.torch

        llguidance.torch.fill_next_token_bitmask(self.matcher, self._bitmask, 0)
        if self._buffer is None or self._buffer.shape[0] != vocab_size:
            self._buffer = np.zeros(vocab_size, dtype=np.uint8)
        allowed = bitmask_to_mask(self._bitmask[0], vocab_size, self.compiled.table.vocab_size, self._buffer)
        # Tested in place: slicing out ``pending`` would copy a whole gen body each step.
        if self.text.startswith(syntax.COPY_PREFIX, self._op_end):
            pending = self.pending
            allowed[self.compiled.table.crossing] = False
            if syntax.COPY_CLOSING_RE.search(pending):
                self._allow_exact_close(allowed, pending)
            # Inside a copy tag only a few digit and close tokens are left: each is kept
            # only if the tag it makes can still become a valid copy (index order,
            # boundaries). This runs after the close pieces are added back, so those
            # are checked too.
            for tid in np.flatnonzero(self._buffer).tolist():
                if not self.indices.allows(pending + self._piece(tid)):
                    self._buffer[tid] = 0
        elif self.indices.exhausted and not self.in_gen:
            # No copy may start (after the last one, or past the budget): refuse the
            # tokens that begin a copy tag.
            pending = self.pending
            for tid in np.flatnonzero(self._buffer).tolist():
                # COPY_PREFIX is the shortest text that tells a copy tag from the other ops
                if (pending + self._piece(tid)).startswith(syntax.COPY_PREFIX):
                    self._buffer[tid] = 0
        return allowed

    @property
    def in_gen(self) -> bool:
        """Whether the op being written is a gen body."""
        return self.text.startswith(syntax.GEN_OPEN, self._op_end)

    def _allow_exact_close(self, allowed: torch.Tensor, pending: str) -> None:
        """Allow the tokens that end the copy tag exactly at its ``>``.

        llguidance's mask favours the canonical tokenization of forced bytes (after
        ``"/`` DeepSeek-Coder's mask holds only ``><``, which crosses the tag's end), so
        the exact pieces of the close are added back when the matcher validates them.
        """
        close = syntax.COPY_CLOSE
        typed = max(k for k in range(len(close)) if pending.endswith(close[:k]))
        rest = close[typed:].encode()
        for end in range(1, len(rest) + 1):
            tid = self.compiled.table.closers.get(rest[:end])
            if tid is not None and tid < allowed.numel() and self.matcher.validate_tokens([tid]) == 1:
                allowed[tid] = True

    # -- advance ----------------------------------------------------------------------

    def forced(self) -> list[int]:
        """The grammar-forced run from here, cut so that it never crosses a copy tag's end.

        The run stops right after a completed copy tag: the splice comes next. Inside a
        copy tag, what the index bounds force where the grammar does not
        (:meth:`_completion`) is forced too.
        """
        run = self.matcher.compute_ff_tokens()
        if not run:
            return self._completion()
        pending = self.pending
        out: list[int] = []
        for tid in run:
            candidate = pending + self._piece(tid)
            tag = syntax.COPY_TAG_RE.search(candidate)
            if tag and tag.end() < len(candidate):
                break  # this token would run past the copy tag's end
            out.append(tid)
            pending = candidate
            if tag:
                break
        return out or self._completion()

    def _completion(self) -> list[int]:
        """What must follow inside a copy tag when the grammar's forced run gives nothing
        usable: one token, or none when the choice is open.

        Two cases. (1) An index that cannot grow: the grammar bounds each index by the
        document, not by the other index or the boundaries of :class:`CopyIndices`, so
        after ``<copy lines="6`` in a 38-line document (60.. > 38) or after an end that
        is complete, it forces nothing although no digit may follow. (2) A close whose
        forced token would run past the tag's end (DeepSeek-Coder's ``><`` after ``"/``)
        and is cut. Without this each would cost a decode step. The token is the allowed
        one spelling the longest prefix of the separator or of the rest of the close.
        """
        if not self.text.startswith(syntax.COPY_PREFIX, self._op_end):
            return []
        pending = self.pending
        if syntax.COPY_CLOSING_RE.search(pending):
            close = syntax.COPY_CLOSE
            typed = max(k for k in range(len(close)) if pending.endswith(close[:k]))
            if typed == 0 and self._can_grow(pending):
                return []
            rest = close[typed:].encode()
            for end in range(len(rest), 0, -1):
                tid = self.compiled.table.closers.get(rest[:end])
                if (tid is not None and self.matcher.validate_tokens([tid]) == 1
                        and self.indices.allows(pending + rest[:end].decode())):
                    return [tid]
            return []
        match = syntax.COPY_INDICES_RE.match(pending)
        if not (match and match.end() == len(pending) and not match.group("sep")
                and pending[-1:].isdigit()):
            return []
        if self._can_grow(pending):
            return []
        separator = syntax.RANGE_SEPARATOR.encode()
        size = self._buffer.shape[0] if self._buffer is not None else self.compiled.table.vocab_size
        self.allowed(size)
        best: tuple[int, int] | None = None
        for tid in np.flatnonzero(self._buffer).tolist():
            piece = self.piece_bytes(tid)
            if piece and separator.startswith(piece) and (best is None or len(piece) > best[0]):
                best = (len(piece), tid)
        return [best[1]] if best else []

    def _can_grow(self, pending: str) -> bool:
        """Whether the index ``pending`` ends in may still take a digit."""
        return any(self.indices.allows(pending + digit) for digit in "0123456789")

    def piece_bytes(self, tid: int) -> bytes:
        """The bytes of one token, as the grammar sees them."""
        return self.compiled.llg_tokenizer.decode_bytes([int(tid)])

    @property
    def pending(self) -> str:
        """The program text after the last complete op (``<program>`` included before the first)."""
        return self.text[self._op_end:]

    def validate(self, ids: Sequence[int]) -> int:
        """How many of ``ids`` (a prefix) the grammar accepts from here; the state is unchanged."""
        return int(self.matcher.validate_tokens([int(t) for t in ids])) if ids else 0

    def _piece(self, tid: int) -> str:
        return self.piece_bytes(tid).decode("utf-8", "replace")

    def advance(self, ids: Sequence[int]) -> list[Op]:
        """Consume program tokens; return the ops they completed, in order.

        Raises
        ------
        ValueError
            When the matcher rejects a token (names the token and the text so far).
        """
        old_length, before = len(self.text), (self._op_end, len(self.ops))
        for tid in ids:
            if not self.matcher.consume_token(int(tid)):
                raise ValueError(
                    f"token {int(tid)} rejected by the program grammar after "
                    f"{self.text[-60:]!r}: {self.matcher.get_error()}")
            self._marks.append((len(self.text), self._decoder.getstate(), *before))
            self.text += self._decoder.decode(self.piece_bytes(tid))
        if self.in_gen:
            # Inside a gen body only a </gen> in the new text can end the op: look there
            # alone, so a step costs the same at any body length.
            tail = max(self._op_end + len(syntax.GEN_OPEN), old_length - len(syntax.GEN_CLOSE) + 1)
            if self.text.find(syntax.GEN_CLOSE, tail) < 0:
                return []
        new_ops, self._op_end = program.scan_ops(self.text, self._op_end, self.compiled.granularity)
        self.ops.extend(new_ops)
        for op in new_ops:
            if isinstance(op, (Copy, CopyTokens)):
                self.indices = self.indices.spend(op.end - op.start + 1)
                if self.monotone:
                    self.indices = self.indices.after(op.end)
        return new_ops

    def rollback(self, cut: int) -> int:
        """Undo the last tokens until the text ends at or before offset ``cut``; return
        how many were undone. Undoing a complete op (spliced, streamed) is a ``ValueError``.
        Ops are read at the end of each :meth:`advance`, so undoing part of one restores
        the op boundary from before it (a copy tag's advance ends at its close).
        """
        length, undone = len(self.text), 0
        while length > cut:
            undone += 1
            length = self._marks[-undone][0]
        if not undone:
            return 0
        _, state, op_end, op_count = self._marks[-undone]
        if op_count < len(self.ops) or length < op_end:
            raise ValueError(f"a rollback to offset {cut} would undo a complete op (the last ends at {self._op_end})")
        if not self.matcher.rollback(undone):
            raise ValueError(f"the grammar could not undo {undone} tokens: {self.matcher.get_error()}")
        self._decoder.setstate(state)
        del self._marks[-undone:]
        self.text, self._op_end = self.text[:length], op_end
        return undone

    def end(self) -> None:
        """Refused: only ``</program>`` completes a program (``accepts_end`` is False)."""
        raise ValueError(f"a program is complete only at {syntax.PROGRAM_CLOSE}; it cannot be ended early")

    @property
    def done(self) -> bool:
        """Whether the program is complete (``</program>`` consumed)."""
        return self.matcher.is_stopped() or self.text.endswith(syntax.PROGRAM_CLOSE)


class Unconstrained:
    """The no-constraint branch of the decode loop: free text, no ops, nothing forced.

    Used for the full-regeneration baseline (the same loop, one token per forward). It
    ends at the tokenizer's end-of-sequence token, or when a forced text runs out.
    """

    accepts_end = True

    def __init__(self, compiled: CompiledGrammar, eos_token_id: int | None):
        self.compiled = compiled
        self.eos_token_id = eos_token_id
        # Nothing constrains a free model to valid UTF-8: a byte sequence that is not one
        # becomes U+FFFD in the text, as transformers' own decode shows it, never an error.
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.ops: list[Op] = []
        self._ended = False

    def allowed(self, vocab_size: int) -> None:
        """Everything is allowed."""
        return None

    def forced(self) -> list[int]:
        """Nothing is forced."""
        return []

    def piece_bytes(self, tid: int) -> bytes:
        """The bytes of one token."""
        return self.compiled.llg_tokenizer.decode_bytes([int(tid)])

    def advance(self, ids: Sequence[int]) -> list[Op]:
        """Append tokens to the text; end at end-of-sequence."""
        for tid in ids:
            if tid == self.eos_token_id:
                self._ended = True
                break
            self.text += self._decoder.decode(self.piece_bytes(tid))
        return []

    def end(self) -> None:
        """Mark the text complete (the forced text ran out)."""
        self._ended = True

    @property
    def done(self) -> bool:
        """Whether the text is complete."""
        return self._ended
