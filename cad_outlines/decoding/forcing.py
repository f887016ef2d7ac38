"""Forced text (a program or a gold document) as token ids, one segment at a time.

The one path from "forced program" to the ids a loop feeds: the transformers loop's
teacher forcing, the vLLM driver's forced programs and the benchmarks all use it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..adapters import Adapter
from ..language import syntax
from .results import ForcedProgramError

__all__ = ["ForcedText", "forced_ids", "forced_rejected"]


@dataclass
class ForcedText:
    """A forced text (program or gold), tokenized one segment at a time.

    A program's segments end at its copy-tag ends, so a forced copy tag ends on a token
    boundary just as a sampled one does. When the grammar's forced run tokenizes the
    same bytes differently, the rest of the segment is re-tokenized after it.
    """

    adapter: Adapter
    data: bytes
    cuts: list[int]  # byte offsets where segments end (the last is len(data))
    pos: int = 0
    queue: deque = field(default_factory=deque)

    @classmethod
    def from_text(cls, adapter: Adapter, text: str, segmented: bool) -> "ForcedText":
        cuts = [len(text[:m.end()].encode("utf-8")) for m in syntax.COPY_TAG_RE.finditer(text)] if segmented else []
        data = text.encode("utf-8")
        return cls(adapter, data, cuts + [len(data)])

    def next(self) -> int | None:
        if not self.queue and self.pos < len(self.data):
            end = next(cut for cut in self.cuts if cut > self.pos)
            try:
                segment = self.data[self.pos:end].decode("utf-8")
            except UnicodeDecodeError as err:
                raise ForcedProgramError("the grammar's forced run split a character of the program") from err
            self.queue.extend(self.adapter.encode(segment))
        return self.queue[0] if self.queue else None

    def consume(self, ids: Sequence[int], data: bytes) -> None:
        if not self.data.startswith(data, self.pos):
            raise ForcedProgramError(
                f"the grammar forced {data!r} where the program continues {self.data[self.pos:self.pos + 40]!r}")
        self.pos += len(data)
        if list(self.queue)[:len(ids)] == list(ids):
            for _ in ids:
                self.queue.popleft()
        else:
            self.queue.clear()


def forced_ids(adapter: Adapter, text: str) -> list[int]:
    """The ids a forced program is decoded as: segment by segment, each ending at a copy
    tag's end, exactly as the loop's teacher forcing tokenizes it (the vLLM driver's forced
    requests and the benchmarks use this)."""
    forced = ForcedText.from_text(adapter, text, segmented=True)
    ids: list[int] = []
    while (token := forced.next()) is not None:
        forced.consume([token], adapter.token_bytes(token))
        ids.append(token)
    return ids


_UNSEEN = object()  # the vLLM driver sees only that the engine ended the request


def forced_rejected(program_text: str, token: Any = _UNSEEN) -> ForcedProgramError:
    """The error of a forced program the constraint rejects after ``program_text`` (the
    program so far), worded once for every engine; ``token``: the id refused (``None``:
    the forced text ran out), where the engine knows it."""
    detail = "" if token is _UNSEEN else f": next token {token!r} is not allowed"
    return ForcedProgramError(f"forced program rejected by the constraint at offset {len(program_text)} "
                              f"(after {program_text[-40:]!r}){detail}")
