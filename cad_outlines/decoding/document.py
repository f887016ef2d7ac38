"""One document as every engine sees it: its copy units, the copy bounds, what a copy
splices and how a finished program resolves.

The decode loop (:mod:`.generator`), the vLLM driver (:mod:`cad_outlines.engines.vllm`) and
the SFT row builder (:mod:`cad_outlines.training.sft`) all read these facts from here, so
they cannot drift on what a copy splices.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Sequence

from ..errors import InputError
from ..language import snippets, syntax
from ..language.grammar import Granularity
from ..language.program import Copy, CopyTokens, Op
from ..language.resolver import resolve
from .constraint import CopyIndices, inside_characters
from .streaming import DocumentStream

__all__ = ["DocumentView", "copy_indices"]


class DocumentView:
    """``document`` under ``adapter``'s tokenizer, for programs of ``granularity``.

    Parameters
    ----------
    document
        The text being edited (valid Unicode).
    adapter
        The tokenizer adapter (:func:`cad_outlines.adapters.get_adapter`): its layout rule
        decides the ids a line copy splices.
    granularity
        ``"lines"`` (copies of 1-indexed lines) or ``"tokens"`` (copies of 0-indexed
        document tokens).
    """

    def __init__(self, document: str, adapter: Any, granularity: Granularity = "lines"):
        if not isinstance(document, str):
            raise InputError(f"the document must be a str, got {type(document).__name__}")
        try:
            document.encode("utf-8")
        except UnicodeEncodeError as err:
            raise InputError(f"the document is not valid Unicode: {err.reason} at character {err.start} "
                             f"({document[err.start]!r})") from None
        self.document = document
        self.adapter = adapter
        self.granularity = granularity
        #: Whether the document is a CRLF file (:func:`~cad_outlines.language.syntax.crlf`)
        #: edited by lines: the model reads it, and programs copy it, with ``"\n"`` ends;
        #: what a run writes gets ``"\r\n"`` back (:meth:`restore`). Token programs
        #: index the document's own tokens, so they copy its ends byte for byte.
        self.crlf = granularity == "lines" and syntax.crlf(document)
        #: The text the model reads and the program's copy indices count: the document,
        #: with ``"\n"`` line ends for a CRLF file.
        self.text = self.read_form(document)
        #: Whether the lines end in an open end (:func:`~cad_outlines.language.syntax.copy_lines`).
        self.open_end = granularity == "lines" and syntax.open_ended(self.text)
        if granularity == "lines":
            self.lines: list[str] = syntax.copy_lines(self.text)
            #: Copy indices run ``1..upper`` (lines) or ``0..upper-1`` (tokens).
            self.upper = len(self.lines)
        else:
            self.doc_ids: list[int] = adapter.document_ids(self.text)
            self.upper = len(self.doc_ids)

    def read_form(self, text: str) -> str:
        """``text`` given beside the document (a prediction, an update snippet) in the form
        the model reads: ``"\n"`` line ends where the document is a CRLF file."""
        return text.replace("\r\n", "\n") if self.crlf else text

    def restore(self, text: str) -> str:
        """What a run wrote (in the read form) in the document's own line ends."""
        return syntax.with_crlf(text) if self.crlf else text

    def merged(self, update: str) -> str | None:
        """The literal merge of the update snippet ``update`` into the document
        (:func:`~cad_outlines.language.snippets.merge`), in the document's own line ends;
        ``None`` where the snippet cannot be placed, and for token programs."""
        if self.granularity != "lines" or not isinstance(update, str):
            return None
        merged = snippets.merge(self.text, self.read_form(update))
        return None if merged is None else self.restore(merged)

    def writer(self) -> DocumentStream:
        """A :class:`~.streaming.DocumentStream` of this document whose chunks are
        in the document's line ends (:meth:`restore`): they concatenate to :meth:`resolve`'s result."""
        if self.granularity == "lines":
            return DocumentStream(lines=self.lines, open_end=self.open_end, crlf=self.crlf)
        return DocumentStream(pieces=self.token_pieces)

    @cached_property
    def token_pieces(self) -> list[bytes]:
        """The bytes of each document token (token programs resolve and stream by them)."""
        return self.adapter.token_pieces(self.text)

    @cached_property
    def inside(self) -> list[int]:
        """The document tokens that start inside a character (none for line programs)."""
        return [] if self.granularity == "lines" else inside_characters(self.token_pieces)

    @cached_property
    def indices(self) -> CopyIndices:
        """Where copies may start and end: every line, or every token boundary that is
        also a character boundary (a token copy never splits a character)."""
        return copy_indices(self.granularity, self.upper, self.inside)

    @cached_property
    def whole_copy_tokens(self) -> int:
        """The tokens a copy of the whole document splices: the positions beyond the prompt
        that any edit keeping the document needs (regenerating it needs about as many)."""
        if self.granularity == "lines":
            return len(self.adapter.copy_ids(self.lines)) if self.upper else 0
        return self.upper

    @cached_property
    def holds_program_close(self) -> bool:
        """Whether the text holds ``</program>``: typed in a gen it may then be the text
        retyped, so no end of the program is inferred from it (:mod:`.ending`)."""
        return syntax.PROGRAM_CLOSE in self.text

    def span_ids(self, op: Op) -> list[int]:
        """The ids a copy op splices into the context (the adapter's layout rule for lines)."""
        if isinstance(op, Copy):
            return self.adapter.copy_ids(self.lines[op.start - 1:op.end])
        return self.doc_ids[op.start:op.end + 1]

    def splice(self, ops: Sequence[Op], context: list[int], stats: Any) -> bool:
        """Append the span of every copy in ``ops`` to ``context`` and count it in
        ``stats`` (``copied_tokens``, ``splices``): the splice bookkeeping of every engine.
        Whether anything was spliced."""
        spliced = False
        for op in ops:
            if isinstance(op, (Copy, CopyTokens)):
                span = self.span_ids(op)
                context += span
                stats.copied_tokens += len(span)
                stats.splices += 1
                spliced = True
        return spliced

    def spans(self, ops: Sequence[Op]) -> list[list[int]]:
        """:meth:`span_ids` of every copy in ``ops``, in order."""
        return [self.span_ids(op) for op in ops if isinstance(op, (Copy, CopyTokens))]

    def resolve(self, ops: Sequence[Op], mode: str = "strict") -> str:
        """The edited document a finished program spells, in the document's line ends."""
        if self.granularity == "tokens":
            return resolve(ops, self.text, mode, token_pieces=self.token_pieces)
        return self.restore(resolve(ops, self.text, mode))



def copy_indices(granularity: Granularity, upper: int, inside: Sequence[int] = ()) -> CopyIndices:
    """Where copies may start and end in a document of ``upper`` copy units: every line,
    or every token boundary that is also a character boundary (``inside``: the tokens
    that start inside a character). :attr:`DocumentView.indices` and the vLLM engine
    process (which receives only these numbers) both derive the bounds here."""
    if granularity == "lines":
        return CopyIndices.for_lines(upper)
    return CopyIndices.for_token_count(upper, inside)
