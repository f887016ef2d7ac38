"""The offline demo: the real decode loop on a bundled edit, with a random-weight preset.

Random weights cannot choose a good program, so the demo teacher-forces the oracle
program (``force_program``) through the real forward passes, and times full
regeneration of the same result with the same model in the same run. The speed is
real; the program's *choice* is the oracle's, not the model's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .diffs import unified_diff
from ..decoding.generator import CaDGenerator, CaDResult, ProgressCallback
from ..language.oracle import oracle_program
from ..language.program import render


@dataclass
class DemoReport:
    """What the demo ran and measured."""

    preset: str
    instruction: str
    program: str
    diff: str
    cad: CaDResult
    regeneration: CaDResult
    matches_gold: bool

    def format(self) -> str:
        """Human-readable report."""
        c, r = self.cad.stats, self.regeneration.stats
        lines = [
            f"preset: {self.preset} (random weights: the program is the oracle's, forced through the real decode loop)",
            f"instruction: {self.instruction}",
            "", "program:", self.program, "", "diff of the resolved document:", self.diff.rstrip("\n"), "",
            f"edited document equals the expected one: {self.matches_gold}",
            "",
            f"{'':24}{'CaD program':>14}{'full regeneration':>20}",
            f"{'decoded tokens':24}{c.decoded_tokens:>14}{r.decoded_tokens:>20}",
            f"{'forced tokens':24}{c.forced_tokens:>14}{r.forced_tokens:>20}",
            f"{'copied (spliced) tokens':24}{c.copied_tokens:>14}{r.copied_tokens:>20}",
            f"{'forward passes':24}{c.forward_passes:>14}{r.forward_passes:>20}",
            f"{'decode wall-clock (s)':24}{c.total_seconds - c.prefill_seconds:>14.3f}"
            f"{r.total_seconds - r.prefill_seconds:>20.3f}",
        ]
        cad_s = c.total_seconds - c.prefill_seconds
        reg_s = r.total_seconds - r.prefill_seconds
        if cad_s > 0:
            lines.append(f"speed-up over regeneration (after the shared prompt prefill): {reg_s / cad_s:.2f}x")
        return "\n".join(lines)


def load_example() -> dict[str, str]:
    """The bundled example edit: ``{"instruction", "doc", "gold"}``."""
    data = resources.files("cad_outlines.data").joinpath("demo_edit.json").read_text("utf-8")
    return json.loads(data)


def run_demo(model: Any, preset: str, example: dict[str, str] | None = None,
             progress: ProgressCallback | None = None) -> DemoReport:
    """Run the bundled edit through CaD (oracle-forced) and full regeneration.

    Parameters
    ----------
    model
        An Outlines transformers model.
    preset
        Name shown in the report.
    example
        ``{"instruction", "doc", "gold"}``; the bundled one by default.
    progress
        Passed to both runs (see :meth:`CaDGenerator.run`).
    """
    example = example or load_example()
    doc, gold, instruction = example["doc"], example["gold"], example["instruction"]
    ops = oracle_program(doc, gold)
    generator = CaDGenerator(model, doc)
    cad = generator.run(instruction, force_program=ops, progress=progress)
    regeneration = generator.regenerate(instruction, target=gold, progress=progress)
    diff = unified_diff(doc, cad.document or "", "a/example.py", "b/example.py")
    return DemoReport(preset, instruction, render(ops), diff, cad, regeneration, cad.document == gold)
