"""The edited document as it grows, from the program text as it is decoded.

:class:`DocumentStream` is fed, after every advance of the decode loop, the ops that
advance completed and the text of the op still being written (``constraint.pending``).
It returns the new text of the edited document, so that the chunks concatenate to
exactly ``resolve(ops, document)``:

- a copy is one chunk, when its tag closes;
- a gen body streams as it is decoded, holding back only what the next token may still
  change: a suffix that may begin ``</gen>``, an unpaired trailing ``⟨`` (the escape
  character: ``⟨⟨`` is ``⟨``, a lone ``⟨`` is ``<``), and, in line programs, a trailing
  ``"\\n"`` (the resolver drops one trailing newline of a gen) and a first ``"\\n"``
  (likewise dropped);
- in line programs ops are joined by ``"\\n"``, emitted when the next op begins;
- token programs concatenate bytes: every chunk goes through one incremental UTF-8
  decoder, so a character split between two copies (or a copy and a gen) is emitted
  whole once its last byte arrives.
"""

from __future__ import annotations

import codecs
from typing import Sequence

from ..language import escape
from ..language.program import Copy, CopyTokens, Gen, Op
from ..language.resolver import gen_body
from ..language.syntax import ESCAPE_CHAR, GEN_CLOSE, GEN_OPEN, RESERVED_TAILS


class DocumentStream:
    """Turn ops and the pending op's text into chunks of the edited document.

    Parameters
    ----------
    lines
        The document's lines (:func:`~cad_outlines.language.syntax.split_lines`), for line programs.
    pieces
        The document's token byte strings, for token programs (``lines`` is then ``None``).
    """

    def __init__(self, lines: Sequence[str] | None = None, pieces: Sequence[bytes] | None = None):
        if (lines is None) == (pieces is None):
            raise ValueError("give the document's lines (line programs) or its token pieces, not both")
        self._lines = lines
        self._pieces = pieces
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._ops = 0  # ops begun (for the line separator)
        self._gen_sent: str | None = None  # text already emitted of the gen being written

    def feed(self, ops: Sequence[Op], pending: str) -> str:
        """The document text that ``ops`` (just completed) and ``pending`` add."""
        out = [self._finish(op) for op in ops]
        if pending.startswith(GEN_OPEN):
            out.append(self._grow(pending[len(GEN_OPEN):]))
        return "".join(out)

    def close(self) -> str:
        """What is left once the program is complete (bytes of an unfinished character)."""
        return "" if self._lines is not None else self._decoder.decode(b"", final=True)

    # -- ops ------------------------------------------------------------------------

    def _begin(self) -> str:
        """Start an op: the separator before it (line programs, every op but the first)."""
        self._ops += 1
        return "\n" if self._lines is not None and self._ops > 1 else ""

    def _finish(self, op: Op) -> str:
        if isinstance(op, Gen):
            head = self._begin() if self._gen_sent is None else ""
            sent = self._gen_sent or ""
            final = gen_body(op.text) if self._lines is not None else op.text
            # The held-back rules make what was sent a prefix of the final text.
            assert final.startswith(sent), (final, sent)
            self._gen_sent = None
            return head + self._text(final[len(sent):])
        head = self._begin()
        if isinstance(op, Copy) and self._lines is not None:
            return head + "\n".join(self._lines[op.start - 1:op.end])
        if isinstance(op, CopyTokens) and self._pieces is not None:
            return head + self._decoder.decode(b"".join(self._pieces[op.start:op.end + 1]))
        raise TypeError(f"{type(op).__name__} does not belong to this program's granularity")

    def _grow(self, body: str) -> str:
        """New text of the gen being written, whose escaped body so far is ``body``."""
        head = ""
        if self._gen_sent is None:
            head, self._gen_sent = self._begin(), ""
        text = self._settled(body)
        new = text[len(self._gen_sent):]
        self._gen_sent = text
        return head + self._text(new)

    def _settled(self, body: str) -> str:
        """The part of the gen's output that no later token can change."""
        for k in range(min(len(GEN_CLOSE) - 1, len(body)), 0, -1):
            if GEN_CLOSE.startswith(body[-k:]):
                body = body[:-k]  # may be the start of </gen>
                break
        # A run of escape chars is an escape only right before a reserved tail, so a run
        # followed by (a prefix of) a tail may still change meaning: hold it back.
        for k in range(min(max(map(len, RESERVED_TAILS)), len(body)), -1, -1):
            rest = body[len(body) - k:]
            head = body[:len(body) - k]
            if head.endswith(ESCAPE_CHAR) and any(t.startswith(rest) for t in RESERVED_TAILS):
                body = head.rstrip(ESCAPE_CHAR)
                break
        text = escape.decode(body)
        if self._lines is not None:
            if text.startswith("\n"):
                text = text[1:]  # the gen's leading padding newline
            if text.endswith("\n"):
                text = text[:-1]  # may be the trailing padding newline
        return text

    def _text(self, text: str) -> str:
        # Token programs: through the decoder, which may hold a copy's unfinished character.
        return text if self._lines is not None else self._decoder.decode(text.encode("utf-8"))
