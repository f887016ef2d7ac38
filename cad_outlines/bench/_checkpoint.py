"""A benchmark's records kept as they finish, so that a run cut short resumes.

A checkpoint is a JSON-lines file: a first line ``{"settings": {...}}`` (what every
record depends on), then one record per line, appended (under a lock, so worker
processes can share the file) as soon as it is measured. Opening it again under the same
settings gives back the records already there; other settings are refused, since mixing
them would report one run made of two different ones. A last line cut short by a kill is
dropped (that record is measured again); a bad line anywhere else is an error.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any, Callable, Hashable

from ..errors import InputError
from ..files import atomic_write, read_text

__all__ = ["RecordLog"]


class RecordLog:
    """The records of one checkpoint file, by key, and the append of new ones."""

    def __init__(self, path: str | os.PathLike, settings: dict[str, Any],
                 key: Callable[[dict[str, Any]], Hashable], repair: bool = True):
        """Open (or start) the checkpoint at ``path``. ``repair``: rewrite it without a
        last line cut short; a worker process beside others appending to the same file
        passes False (there a short last line may be another's append in progress)."""
        self.path = Path(path)
        self.key = key
        self.done: dict[Hashable, dict[str, Any]] = {}
        if not self.path.is_file() or self.path.stat().st_size == 0:
            atomic_write(self.path, json.dumps({"settings": settings}, ensure_ascii=False) + "\n")
            return
        text = read_text(self.path)
        lines = text.splitlines()
        try:
            head = json.loads(lines[0])["settings"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise InputError(f"{self.path}:1: not a checkpoint (its first line must be "
                             '{"settings": ...})') from None
        if head != settings:
            changed = ", ".join(f"{k}: {head.get(k)!r} -> {settings.get(k)!r}"
                                for k in sorted(set(head) | set(settings)) if head.get(k) != settings.get(k))
            raise InputError(f"{self.path}: made with other settings ({changed}); "
                             "resume with the same settings or use another file")
        kept = [lines[0]]
        for number, line in enumerate(lines[1:], 2):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                if number == len(lines):  # cut short by a kill: measured again
                    continue
                raise InputError(f"{self.path}:{number}: not a JSON line ({err.msg})") from None
            self.done[key(record)] = record
            kept.append(line)
        if repair and (len(kept) != len(lines) or not text.endswith("\n")):
            # a line cut short must not run into the next record appended
            atomic_write(self.path, "\n".join(kept) + "\n")

    def get(self, record_key: Hashable) -> dict[str, Any] | None:
        """The record already measured under ``record_key``, if any."""
        return self.done.get(record_key)

    def append(self, record: dict[str, Any]) -> None:
        """Add ``record``: one whole line, flushed, under an exclusive lock."""
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as out:
            fcntl.flock(out, fcntl.LOCK_EX)
            try:
                out.write(line)
                out.flush()
            finally:
                fcntl.flock(out, fcntl.LOCK_UN)
        self.done[self.key(record)] = record
