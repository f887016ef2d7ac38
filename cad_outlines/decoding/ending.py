"""The model asks for the program's end inside a gen body: end it there.

A gen body may not hold ``</program>`` (the grammar's ``GEN`` terminal excludes every
reserved literal), so a model that writes it inside a gen is refused the closing ``>``
and, having nowhere to go, writes ``</program) </program) ...`` until the token budget
runs out: minutes of decoding and no edit. Fine-tuned Qwen2.5-Coder adapters did this on
real C commits (``<copy lines="70-74"/><gen>\\n\\n</program``, docs/learn.md).

The decode loop asks :func:`asked_end` after each choice. When the model's most likely
next token, refused, would complete ``</program>`` in the gen being written, the program
ends as the model asked: the typed part of ``</program>`` is rolled back
(:meth:`.constraint.ProgramConstraint.rollback`) and the gen is closed, ``</gen></program>``,
or, when the gen holds no line of its own (only its padding newlines), withdrawn, so
that the program ends after the op before it. The streaming writer holds back a suffix
that may begin ``</program>``, so no rolled-back text ever reached a stream.

A document that holds ``</program>`` as text (this project's own grammar files, XML) may
have it retyped in a gen, so there the loops draw no such inference: the grammar refuses
the ``>`` as before (a gen writes the literal escaped, docs/escape.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..language.resolver import gen_body
from ..language.syntax import GEN_CLOSE, GEN_OPEN, PROGRAM_CLOSE
from .constraint import ProgramConstraint


@dataclass(frozen=True)
class Ending:
    """Where the program is cut (an offset in its text) and what then ends it."""

    cut: int
    text: str


def asked_end(constraint: ProgramConstraint, logits: torch.Tensor, allowed: torch.Tensor,
              lines: bool = True) -> Ending | None:
    """The program's end, when the model's most likely token, refused by ``allowed``,
    would write ``</program>`` inside the gen body being written; else ``None``.

    ``lines``: a line program's gen drops one leading and one trailing newline (its
    padding), so a body of newlines only holds no line of its own.
    """
    if not constraint.in_gen:
        return None
    top = int(torch.argmax(logits))
    if top >= constraint.compiled.table.vocab_size or bool(allowed[top]):
        return None  # allowed, or a padding row of the output layer (no token)
    # Only the body's end and the new piece can form a new </program>.
    tail = constraint.pending[-len(PROGRAM_CLOSE):]
    at = (tail + constraint.piece_bytes(top).decode("utf-8", "replace")).find(PROGRAM_CLOSE)
    if at < 0:
        return None
    return _ending(constraint, min(len(constraint.text), len(constraint.text) - len(tail) + at), lines)


def ended_in_gen(constraint: ProgramConstraint, lines: bool = True) -> Ending | None:
    """The program's end as :func:`asked_end` placed it, read off the text alone, for a
    decode that stopped inside a gen where the model asked for the end (vLLM's logits
    processor ends the request there; its driver ends the program): ``</program>``
    holds its ``<`` only first, so the typed part is the body's suffix from its last
    ``<``, if that suffix begins ``</program>``; ``None`` outside a gen."""
    if not constraint.in_gen:
        return None
    pending = constraint.pending
    typed = pending[max(len(GEN_OPEN), pending.rfind("<")):]
    cut = len(constraint.text) - (len(typed) if PROGRAM_CLOSE.startswith(typed) else 0)
    return _ending(constraint, cut, lines)


def _ending(constraint: ProgramConstraint, cut: int, lines: bool) -> Ending:
    start = len(constraint.text) - len(constraint.pending)  # where the gen's <gen> begins
    body = constraint.text[start + len(GEN_OPEN):cut]  # newlines are never escaped
    if (gen_body(body) if lines else body) == "":
        return Ending(start, PROGRAM_CLOSE)  # withdraw the gen: nothing of it is kept
    return Ending(cut, GEN_CLOSE + PROGRAM_CLOSE)


def end_program(constraint: ProgramConstraint, ending: Ending,
                encode: Callable[[str], list[int]]) -> list[int]:
    """Roll the program back to ``ending.cut``; return the ids that write the rest: the
    kept text of the first token undone, then the end. (The program is then complete:
    the KV cache, which still holds the undone tokens, is not read again.)"""
    kept = constraint.text[:ending.cut]
    constraint.rollback(ending.cut)
    ids = encode(kept[len(constraint.text):] + ending.text)
    if constraint.validate(ids) != len(ids):
        raise AssertionError(f"the grammar refuses the program's end {ending.text!r} after "
                             f"{constraint.text[-60:]!r}")
    return ids
