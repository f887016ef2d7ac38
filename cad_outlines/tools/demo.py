"""The offline demo: the real decode loop on a bundled edit.

With the real-weight preset (``smollm2-135m``, the default of ``cad-outlines demo``) the
fine-tuned model chooses its own program for an edit of a file it never saw in training
(:func:`run_real_demo`), next to the same base model fine-tuned to regenerate, choosing
its own tokens too. With a random-weight preset (:func:`run_demo`) nothing can choose a
good program, so the oracle program is teacher-forced through the real forward passes
and full regeneration of the same result is timed beside it: the speed is real, the
program's *choice* is the oracle's.
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
    chosen: bool = False  # the model chose the program (real weights) or it was forced
    regeneration_matches: bool | None = None  # the regeneration's own output, when chosen

    def format(self) -> str:
        """Human-readable report."""
        c, r = self.cad.stats, self.regeneration.stats
        how = ("real weights: the fine-tuned model chose this program; regeneration is the same base "
               "model fine-tuned to re-type the file" if self.chosen else
               "random weights: the program is the oracle's, forced through the real decode loop")
        lines = [
            f"preset: {self.preset} ({how})",
            f"instruction: {self.instruction}",
            "", "program:", self.program, "", "diff of the resolved document:", self.diff.rstrip("\n"), "",
            f"edited document equals the expected one: {self.matches_gold}",
        ]
        if self.regeneration_matches is not None:
            lines.append(f"regenerated document equals the expected one: {self.regeneration_matches}")
        lines += [
            "",
            f"{'':24}{'CaD program':>14}{'full regeneration':>20}",
            f"{'decoded tokens':24}{c.decoded_tokens:>14}{r.decoded_tokens:>20}",
            f"{'forced tokens':24}{c.forced_tokens:>14}{r.forced_tokens:>20}",
            f"{'copied (spliced) tokens':24}{c.copied_tokens:>14}{r.copied_tokens:>20}",
            f"{'forward passes':24}{c.forward_passes:>14}{r.forward_passes:>20}",
            f"{'prompt tokens':24}{c.prompt_tokens:>14}{r.prompt_tokens:>20}",
            f"{'decode wall-clock (s)':24}{c.total_seconds - c.prefill_seconds:>14.3f}"
            f"{r.total_seconds - r.prefill_seconds:>20.3f}",
            f"{'total wall-clock (s)':24}{c.total_seconds:>14.3f}{r.total_seconds:>20.3f}",
        ]
        cad_s = c.total_seconds - c.prefill_seconds
        reg_s = r.total_seconds - r.prefill_seconds
        if cad_s > 0 and c.total_seconds > 0:
            lines.append(f"speed-up over regeneration: {reg_s / cad_s:.2f}x after the prompt prefill, "
                         f"{r.total_seconds / c.total_seconds:.2f}x with it (wall-clock)")
        return "\n".join(lines)


def load_example(name: str = "demo_edit.json") -> dict[str, str]:
    """A bundled example edit: ``{"instruction", "doc", "gold"}`` (``demo_real_edit.json``:
    the real-weight demo's, an eval-split edit of a file never trained on)."""
    data = resources.files("cad_outlines.data").joinpath(name).read_text("utf-8")
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


def run_real_demo(model: Any, regen_model: Any, preset: str, example: dict[str, str] | None = None,
                  progress: ProgressCallback | None = None) -> DemoReport:
    """The fine-tuned model chooses its program (greedy); the regeneration model re-types the file.

    Parameters
    ----------
    model, regen_model
        Outlines transformers models: the CaD-tuned one and the regeneration-tuned one.
    preset
        Name shown in the report.
    example
        ``{"instruction", "doc", "gold"}``; the bundled ``demo_real_edit.json`` by default.
    progress
        Passed to both runs.
    """
    example = example or load_example("demo_real_edit.json")
    doc, gold, instruction = example["doc"], example["gold"], example["instruction"]
    cad = CaDGenerator(model, doc).run(instruction, progress=progress)
    # Regeneration cannot need more tokens than the expected file's, plus a margin.
    budget = len(regen_model.hf_tokenizer.encode(gold, add_special_tokens=False)) + 32
    regeneration = CaDGenerator(regen_model, doc).regenerate(instruction, max_new_tokens=budget,
                                                             progress=progress)
    diff = unified_diff(doc, cad.document or "", "a/example", "b/example")
    return DemoReport(preset, instruction, cad.program, diff, cad, regeneration, cad.document == gold,
                      chosen=True, regeneration_matches=regeneration.document == gold)
