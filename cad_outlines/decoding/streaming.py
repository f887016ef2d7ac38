"""The edited document as it grows, from the program text as it is decoded.

:class:`DocumentStream` is fed, after every advance of the decode loop, the ops that
advance completed and the text of the op still being written (``constraint.pending``).
It returns the new text of the edited document, so that the chunks concatenate to
exactly ``resolve(ops, document)``:

- a copy is one chunk, when its tag closes;
- a gen body streams as it is decoded, holding back only what the next token may still
  change: a suffix that may begin ``</gen>`` or ``</program>`` (the loop ends the program
  there, :mod:`.ending`), an unpaired trailing ``⟨`` (the escape
  character: ``⟨⟨`` is ``⟨``, a lone ``⟨`` is ``<``), and, in line programs, a trailing
  ``"\\n"`` (the resolver drops one trailing newline of a gen) and a first ``"\\n"``
  (likewise dropped); the separator before a gen waits for its first text, so a gen the
  loop withdraws (:mod:`.ending`) leaves no trace;
- in line programs ops are joined by ``"\\n"``, emitted when the next op begins; a copy
  through the document's open end (:func:`~cad_outlines.language.syntax.copy_lines`)
  holds back its last ``"\\n"`` until another op begins, since the program may end there;
- token programs concatenate bytes: every chunk goes through one incremental UTF-8
  decoder, so a character split between two copies (or a copy and a gen) is emitted
  whole once its last byte arrives.

:func:`drain` and :func:`each_step` run the decode loop's generator for the synchronous
and the streaming entry points.
"""

from __future__ import annotations

import codecs
from typing import Any, Callable, Generator, Iterable, Sequence, TypeVar

from ..language import escape
from ..language.program import Copy, CopyTokens, Gen, Op
from ..language.resolver import gen_body
from ..language.syntax import ESCAPE_CHAR, GEN_CLOSE, GEN_OPEN, PROGRAM_CLOSE, RESERVED_TAILS, with_crlf


class DocumentStream:
    """Turn ops and the pending op's text into chunks of the edited document.

    Parameters
    ----------
    lines
        The document's lines (:func:`~cad_outlines.language.syntax.copy_lines`), for line programs.
    pieces
        The document's token byte strings, for token programs (``lines`` is then ``None``).
    open_end
        Whether the last of ``lines`` is the document's open end
        (:func:`~cad_outlines.language.syntax.open_ended`).
    crlf
        Whether ``lines`` are the ``"\n"`` form of a CRLF file
        (:func:`~cad_outlines.language.syntax.crlf`): the chunks then get its
        ``"\r\n"`` ends back, as the resolved document does
        (:meth:`~.document.DocumentView.restore`).
    """

    def __init__(self, lines: Sequence[str] | None = None, pieces: Sequence[bytes] | None = None,
                 open_end: bool = False, crlf: bool = False):
        if (lines is None) == (pieces is None):
            raise ValueError("give the document's lines (line programs) or its token pieces, not both")
        self._lines = lines
        self._pieces = pieces
        self._open_end = open_end and lines is not None
        self._held_end = False  # a copy through the open end held back its last "\n"
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._ops = 0  # ops begun (for the line separator)
        self._gen_sent: str | None = None  # text already emitted of the gen being written
        self._gen_begun = False  # the separator before the gen being written was emitted
        self._raw_done = 0  # escaped body characters already unescaped and emitted (or held)
        self._held_newline = False  # a trailing "\n" held back: it may be the gen's padding
        self._lead_seen = False  # the gen's first character has been seen
        self._crlf = crlf and lines is not None
        self._held_cr = ""  # a chunk's trailing "\r" (CRLF files): a "\n" may follow it

    def feed(self, ops: Sequence[Op], pending: str) -> str:
        """The document text that ``ops`` (just completed) and ``pending`` add."""
        out = [self._finish(op) for op in ops]
        if pending.startswith(GEN_OPEN):
            out.append(self._grow(pending[len(GEN_OPEN):]))
        elif self._gen_sent is not None:  # the loop withdrew a gen that held no line
            assert not self._gen_begun, "a withdrawn gen had text streamed"
            self._gen_sent = None
        return self._ends("".join(out))

    def close(self) -> str:
        """What is left once the program is complete (bytes of an unfinished character; a
        newline held back by a copy through the open end is dropped: the program ended there)."""
        return self._ends("" if self._lines is not None else self._decoder.decode(b"", final=True), final=True)

    def _ends(self, chunk: str, final: bool = False) -> str:
        """``chunk`` with a CRLF file's line ends; a trailing ``"\r"`` waits for the next
        chunk, so the chunks restore as the whole text does (``"\r\n"`` stays one end)."""
        if not self._crlf:
            return chunk
        chunk, self._held_cr = self._held_cr + chunk, ""
        if chunk.endswith("\r") and not final:
            chunk, self._held_cr = chunk[:-1], "\r"
        return with_crlf(chunk)

    # -- ops ------------------------------------------------------------------------

    def _begin(self) -> str:
        """Start an op: the separator before it (line programs, every op but the first),
        after the newline a copy through the open end held back (the program went on)."""
        self._ops += 1
        held, self._held_end = "\n" if self._held_end else "", False
        return held + ("\n" if self._lines is not None and self._ops > 1 else "")

    def _finish(self, op: Op) -> str:
        if isinstance(op, Gen):
            head = "" if self._gen_begun else self._begin()
            sent = self._gen_sent or ""
            final = gen_body(op.text) if self._lines is not None else op.text
            # The held-back rules make what was sent a prefix of the final text.
            assert final.startswith(sent), (final, sent)
            self._gen_sent, self._raw_done, self._held_newline, self._lead_seen = None, 0, False, False
            self._gen_begun = False
            return head + self._text(final[len(sent):])
        head = self._begin()
        if isinstance(op, Copy) and self._lines is not None:
            text = head + "\n".join(self._lines[op.start - 1:op.end])
            if self._open_end and op.end == len(self._lines) and text.endswith("\n"):
                text, self._held_end = text[:-1], True
            return text
        if isinstance(op, CopyTokens) and self._pieces is not None:
            return head + self._decoder.decode(b"".join(self._pieces[op.start:op.end + 1]))
        raise TypeError(f"{type(op).__name__} does not belong to this program's granularity")

    def _grow(self, body: str) -> str:
        """New text of the gen being written, whose escaped body so far is ``body``.

        Incremental: only the body's part settled since the last call is unescaped (at a
        settled cut the escape decodes piecewise), so a step costs the same at any body
        length instead of re-decoding the whole body.
        """
        if self._gen_sent is None:
            self._gen_sent = ""
            self._raw_done, self._held_newline, self._lead_seen = 0, False, False
        cut = self._settled_cut(body)
        piece = escape.decode(body[self._raw_done:cut]) if cut > self._raw_done else ""
        self._raw_done = max(self._raw_done, cut)
        if self._lines is not None:
            if piece and not self._lead_seen:
                self._lead_seen = True
                if piece.startswith("\n"):
                    piece = piece[1:]  # the gen's leading padding newline
            if self._held_newline and piece:
                piece, self._held_newline = "\n" + piece, False
            if piece.endswith("\n"):
                piece, self._held_newline = piece[:-1], True  # may be the trailing padding newline
        self._gen_sent += piece
        head = ""
        if piece and not self._gen_begun:
            head, self._gen_begun = self._begin(), True
        return head + self._text(piece)

    @staticmethod
    def _settled_cut(body: str) -> int:
        """The length of the part of ``body`` that no later token can change (looks at
        the end only: a suffix that may begin ``</gen>`` or ``</program>``, a run of escape characters
        followed by (a prefix of) a reserved tail)."""
        end = len(body)
        for k in range(min(len(PROGRAM_CLOSE) - 1, end), 0, -1):
            if GEN_CLOSE.startswith(body[end - k:end]) or PROGRAM_CLOSE.startswith(body[end - k:end]):
                end -= k  # may begin </gen> (or </program>: the loop then ends the program there)
                break
        # A run of escape chars is an escape only right before a reserved tail, so a run
        # followed by (a prefix of) a tail may still change meaning: hold it back.
        for k in range(min(max(map(len, RESERVED_TAILS)), end), -1, -1):
            rest = body[end - k:end]
            if body[:end - k].endswith(ESCAPE_CHAR) and any(t.startswith(rest) for t in RESERVED_TAILS):
                end -= k
                while end and body[end - 1] == ESCAPE_CHAR:
                    end -= 1
                break
        return end

    def _text(self, text: str) -> str:
        # Token programs: through the decoder, which may hold a copy's unfinished character.
        return text if self._lines is not None else self._decoder.decode(text.encode("utf-8"))


R = TypeVar("R")


def drain(steps: Generator[Any, None, R]) -> R:
    """Run a decode to its end; its result (the generator's return value)."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


def each_step(steps: Generator[tuple[list[Op], Any], None, R],
              items: Callable[[list[Op], Any], Iterable[Any]]) -> Generator[Any, None, R]:
    """Yield ``items(ops, constraint)`` for every step of a decode; return its result.

    ``result = yield from each_step(...)``: a ``yield from`` evaluates to the generator's
    ``return`` value (a ``for`` loop would drop it).
    """
    while True:
        try:
            ops, constraint = next(steps)
        except StopIteration as stop:
            return stop.value
        yield from items(ops, constraint)
