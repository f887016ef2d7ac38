"""``bench prompt``: what the CaD prompt costs over the plain prompt, per tokenizer family.

The CaD prompt (``Adapter.prompt_ids``) is the plain one, the instruction and the
document in the chat template (:func:`~.pld.plain_prompt_ids`, what a user of
regeneration or prompt lookup sends), plus two things: the program-format statement and
the line numbers (``"{i:>w}| "`` before every line). Its extra tokens are prefilled once
per edit. This counts them per case, model-free, as tokens of three user messages (the
chat template around them is the same for all three, so it is left out):

``plain``     instruction + ``"\\n\\nDocument:\\n"`` + the document;
``numbered``  the same with the numbered document (no format statement);
``cad``       the generator's user message (``Adapter.user_content``: format statement
              and numbered document).

``numbered - plain`` is the line numbers' cost, ``cad - numbered`` the format
statement's. How much prefill time the difference costs depends on the model; ``bench
e2e`` measures both prefills in the same run.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from ..tools.corpus import Case
from ..errors import InputError
from ..language.syntax import split_lines

__all__ = ["format_prompt_cost", "prompt_cost"]


def prompt_cost(cases: Sequence[Case], adapter: Any, instruction: str = "Apply the edit.") -> dict[str, Any]:
    """User-message tokens of the plain, numbered and CaD prompts for every case, and totals.

    Parameters
    ----------
    cases
        The corpus cases (only ``doc`` is read).
    adapter
        The tokenizer's :class:`~cad_outlines.adapters.Adapter` (``encode`` counts).
    instruction
        The instruction, the same for every prompt.
    """
    if not cases:
        raise InputError("no cases to count")
    def plain_tokens(document: str) -> int:  # the layout of pld.plain_prompt_ids
        return len(adapter.encode(f"{instruction.strip()}\n\nDocument:\n{document}"))

    rows = []
    for case in cases:
        plain = plain_tokens(case.doc)
        numbered = plain_tokens(adapter.render_document(case.doc, "lines"))
        cad = len(adapter.encode(adapter.user_content(case.doc, instruction, "lines")))
        rows.append({"id": case.id, "lines": len(split_lines(case.doc)), "plain": plain,
                     "numbered": numbered, "cad": cad})
    total = {k: sum(r[k] for r in rows) for k in ("lines", "plain", "numbered", "cad")}
    return {
        "family": adapter.name, "n": len(rows), "instruction": instruction, "cases": rows, "total": total,
        "numbers_tokens_per_line": (total["numbered"] - total["plain"]) / total["lines"],
        "format_tokens": statistics.median(r["cad"] - r["numbered"] for r in rows),
        "cad_over_plain": total["cad"] / total["plain"],
        "cad_over_plain_case_median": statistics.median(r["cad"] / r["plain"] for r in rows),
    }


def format_prompt_cost(reports: Sequence[dict[str, Any]], name: str = "") -> str:
    """One markdown row per family (tokens summed over the cases)."""
    lines = [f"user-message tokens {name}: plain = instruction + document; numbered = + line numbers; "
             "cad = + format statement", "",
             "| family | cases | plain | numbered | cad | number tokens per line | format statement "
             "tokens | cad / plain (pooled, case median) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in reports:
        t = r["total"]
        lines.append(f"| {r['family']} | {r['n']} | {t['plain']} | {t['numbered']} | {t['cad']} "
                     f"| {r['numbers_tokens_per_line']:.2f} | {r['format_tokens']:.0f} "
                     f"| {r['cad_over_plain']:.2f}, {r['cad_over_plain_case_median']:.2f} |")
    return "\n".join(lines)
