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
              and numbered document), style ``full``;
``compact``   the same in style ``compact`` (short statement, ``"{i} "`` numbering,
              instruction last; ``adapters/_view.py``).

``numbered - plain`` is the line numbers' cost, ``cad - numbered`` the format
statement's. How much prefill time the difference costs depends on the model; ``bench
e2e`` measures both prefills in the same run.

:data:`NUMBERINGS` are other ways to number the lines (terser or ``cat -n``-like); their
tokens per line are counted the same way, so that the numbering's share of the prompt
can be weighed against a scheme a model reads as well (which only a trained model can
tell; nothing here changes the generator's layout).
"""

from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence

from ..training.corpus import Case
from ..errors import InputError
from ..language.syntax import split_lines

__all__ = ["NUMBERINGS", "format_prompt_cost", "prompt_cost"]

#: Line-numbering schemes: name -> row(i, width, line). The first is the generator's
#: (``adapters/_view.number_lines``); ``width`` is the digits of the last line's number.
NUMBERINGS: dict[str, Callable[[int, int, str], str]] = {
    "{i:>w}| ": lambda i, w, line: f"{i:>{w}}| {line}",
    "{i}| ": lambda i, w, line: f"{i}| {line}",
    "{i}|": lambda i, w, line: f"{i}|{line}",
    "{i:>w}\\t": lambda i, w, line: f"{i:>{w}}\t{line}",
    "{i}\\t": lambda i, w, line: f"{i}\t{line}",
    "{i} ": lambda i, w, line: f"{i} {line}",
}


def _numbered(document: str, row: Callable[[int, int, str], str]) -> str:
    lines = split_lines(document)
    width = len(str(len(lines)))
    return "\n".join(row(i, width, line) for i, line in enumerate(lines, 1))


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
        compact = len(adapter.encode(adapter.user_content(case.doc, instruction, "lines", style="compact")))
        schemes = {name: plain_tokens(_numbered(case.doc, row)) for name, row in NUMBERINGS.items()}
        rows.append({"id": case.id, "lines": len(split_lines(case.doc)), "plain": plain,
                     "numbered": numbered, "cad": cad, "compact": compact, "numberings": schemes})
    total = {k: sum(r[k] for r in rows) for k in ("lines", "plain", "numbered", "cad", "compact")}
    return {
        "family": adapter.name, "n": len(rows), "instruction": instruction, "cases": rows, "total": total,
        "numbers_tokens_per_line": (total["numbered"] - total["plain"]) / total["lines"],
        "numbering_tokens_per_line": {
            name: (sum(r["numberings"][name] for r in rows) - total["plain"]) / total["lines"]
            for name in NUMBERINGS},
        "format_tokens": statistics.median(r["cad"] - r["numbered"] for r in rows),
        "cad_over_plain": total["cad"] / total["plain"],
        "compact_over_plain": total["compact"] / total["plain"],
        "cad_over_plain_case_median": statistics.median(r["cad"] / r["plain"] for r in rows),
    }


def format_prompt_cost(reports: Sequence[dict[str, Any]], name: str = "") -> str:
    """One markdown row per family (tokens summed over the cases)."""
    lines = [f"user-message tokens {name}: plain = instruction + document; numbered = + line numbers; "
             "cad = + format statement", "",
             "| family | cases | plain | numbered | cad | number tokens per line | format statement "
             "tokens | cad / plain (pooled, case median) | compact | compact / plain |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in reports:
        t = r["total"]
        lines.append(f"| {r['family']} | {r['n']} | {t['plain']} | {t['numbered']} | {t['cad']} "
                     f"| {r['numbers_tokens_per_line']:.2f} | {r['format_tokens']:.0f} "
                     f"| {r['cad_over_plain']:.2f}, {r['cad_over_plain_case_median']:.2f} "
                     f"| {t['compact']} | {r['compact_over_plain']:.2f} |")
    names = list(NUMBERINGS)
    lines += ["", f"number tokens per line {name}, by numbering scheme (the first is the generator's; "
              "\\t is a tab)", "",
              "| family | " + " | ".join("`%s`" % n.replace("|", "\\|") for n in names) + " |",
              "| --- |" + " ---: |" * len(names)]
    for r in reports:
        lines.append(f"| {r['family']} | "
                     + " | ".join(f"{r['numbering_tokens_per_line'][n]:.2f}" for n in names) + " |")
    return "\n".join(lines)
