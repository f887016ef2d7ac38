"""Edit corpora: JSONL files of ``{"id", "doc", "gold"}`` records.

Each line holds one JSON object with at least the string fields ``id`` (a name),
``doc`` (the text before the edit) and ``gold`` (the text after it). Other fields
(``source``, ``path``, ``commit``, ...) are kept in :attr:`Case.meta`. Blank lines are
skipped. Any other malformed line is an error naming the file, the 1-based line number
and what is wrong.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Union

from ..errors import CorpusError
from ..files import read_text

PathLike = Union[str, "os.PathLike[str]"]

REQUIRED_FIELDS: tuple[str, ...] = ("id", "doc", "gold")


@dataclass(frozen=True)
class Case:
    """One edit: ``doc`` becomes ``gold``."""

    id: str
    doc: str
    gold: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def parse_case(line_text: str, path: PathLike = "<corpus>", line: int = 1) -> Case:
    """Parse one JSONL line into a :class:`Case`.

    Raises
    ------
    CorpusError
        Bad JSON, not an object, a missing field or a field of the wrong type.
    """
    try:
        record = json.loads(line_text)
    except json.JSONDecodeError as err:
        raise CorpusError(path, line, f"bad JSON at column {err.colno}: {err.msg}") from None
    if not isinstance(record, dict):
        raise CorpusError(path, line, f"expected a JSON object, got {type(record).__name__}")
    missing = [key for key in REQUIRED_FIELDS if key not in record]
    if missing:
        raise CorpusError(path, line, f"missing key(s): {', '.join(missing)}")
    for key in REQUIRED_FIELDS:
        if not isinstance(record[key], str):
            raise CorpusError(
                path, line, f"key {key!r} must be a string, got {type(record[key]).__name__}")
    meta = {k: v for k, v in record.items() if k not in REQUIRED_FIELDS}
    return Case(record["id"], record["doc"], record["gold"], meta)


def load_corpus(path: PathLike) -> list[Case]:
    """Load every case of a JSONL corpus, in file order.

    Parameters
    ----------
    path
        A ``.jsonl`` file of ``{"id", "doc", "gold", ...}`` objects, UTF-8.

    Raises
    ------
    CorpusError
        A malformed line (file, line number and problem in the message), or an ``id``
        used twice.
    FileDecodeError
        The file is not UTF-8.
    """
    cases: list[Case] = []
    seen: dict[str, int] = {}
    # Split on "\n" only: str.splitlines() would also split at U+2028/U+0085, which
    # a JSON string may hold raw, and so would break a valid record in two.
    for number, text in enumerate(read_text(path).split("\n"), start=1):
        if not text.strip():
            continue
        case = parse_case(text, path, number)
        if case.id in seen:
            raise CorpusError(path, number, f"id {case.id!r} already used on line {seen[case.id]}")
        seen[case.id] = number
        cases.append(case)
    return cases
