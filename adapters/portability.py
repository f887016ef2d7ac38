"""How the program's literals split into tokens under each tokenizer.

``cad-outlines portability --tokenizer DIR [DIR ...] [--json]`` prints this report. It
shows why the literal ids must be derived per tokenizer: DeepSeek-Coder, for example,
splits ``</``, ``="`` and ``"/>`` into two pieces each.
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from cad_outlines.language import syntax

from .base import Adapter

#: The literals the report tokenizes (each with :meth:`Adapter.encode`, as ordinary text):
#: the tag punctuation, the tag names, and whole literals and ops.
PORTABILITY_LITERALS: tuple[str, ...] = (
    "<", "</", ">", syntax.COPY_TAG, syntax.GEN_TAG, syntax.PROGRAM_TAG,
    " " + syntax.COPY_ATTRIBUTE["lines"], '="', "/>", '"', syntax.GEN_CLOSE, syntax.PROGRAM_CLOSE,
    syntax.copy_tag("lines", 1, 3), f"{syntax.GEN_OPEN}content{syntax.GEN_CLOSE}",
)


def portability(adapters: Mapping[str, Adapter],
                literals: Sequence[str] = PORTABILITY_LITERALS) -> dict[str, dict[str, dict]]:
    """``{tokenizer_name: {literal: {"count": n, "pieces": [...], "ids": [...]}}}``.

    A piece is the token's text (its bytes as UTF-8; an incomplete character shows as
    backslash escapes).
    """
    report: dict[str, dict[str, dict]] = {}
    for name, adapter in adapters.items():
        rows = {}
        for lit in literals:
            ids = adapter.encode(lit)
            pieces = [adapter.token_bytes(i).decode("utf-8", errors="backslashreplace") for i in ids]
            rows[lit] = {"count": len(ids), "pieces": pieces, "ids": ids}
        report[name] = rows
    return report


def portability_report(paths: Sequence[str | os.PathLike]) -> dict[str, dict[str, dict]]:
    """Load each tokenizer folder, pick its adapter, and return :func:`portability`.

    A tokenizer is named by its folder's base name (by its path when two names clash).
    """
    from . import get_adapter, load_tokenizer

    names = [os.path.basename(os.path.normpath(os.fspath(p))) for p in paths]
    adapters = {}
    for path, name in zip(paths, names):
        key = name if names.count(name) == 1 else os.fspath(path)
        adapters[key] = get_adapter(load_tokenizer(path))
    return portability(adapters)


def _show(piece: str) -> str:
    return "[" + piece.replace(" ", "\u2423").replace("\n", "\u23ce").replace("|", "\\|") + "]"


def format_table(report: Mapping[str, Mapping[str, Mapping]]) -> str:
    """A Markdown table: one row per literal, one column per tokenizer.

    Each cell is ``count: [piece] [piece] ...`` with ``␣`` for a space.
    """
    names = list(report)
    literals = list(next(iter(report.values()))) if report else []
    head = "| literal | " + " | ".join(names) + " |"
    rule = "|---|" + "---|" * len(names)
    lines = [head, rule]
    for lit in literals:
        cells = []
        for name in names:
            row = report[name][lit]
            cells.append(f"{row['count']}: " + " ".join(_show(p) for p in row["pieces"]))
        shown = "`" + lit.replace("|", "\\|") + "`"
        if lit.startswith(" "):
            shown = "`\u2423" + lit[1:] + "`"
        lines.append(f"| {shown} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
