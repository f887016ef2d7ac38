"""Baseline (b) of ``bench e2e``: Outlines' own generator, forced to the oracle program.

``outlines.Generator(model, outlines.types.CFG(grammar))`` with the CaD grammar
specialised to the document, driven by ``model.generate`` (transformers' loop): Outlines'
llguidance processor masks every step and :class:`ForcingProcessor` then keeps only the
oracle program's next token. No splice, no fast-forward: one forward per program token.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Optional

import torch
from outlines.processors.base_logits_processor import OutlinesLogitsProcessor

from ..language.grammar import load_grammar, specialize
from ..language.syntax import copy_lines

__all__ = ["ForcingProcessor", "run_outlines"]


class ForcingProcessor(OutlinesLogitsProcessor):
    """Wrap Outlines' processor: let it mask, then keep only the forced program's next token.

    Built as an ``OutlinesLogitsProcessor`` (so ``Generator.__call__`` resets it and
    transformers calls it) around the stock processor of ``outlines.Generator``. The
    program's tokens are ``adapter.encode`` of its remaining text; where Outlines' mask
    does not allow the planned token (llguidance prefers canonical tokenizations in
    forced stretches), the longest allowed token spelling a prefix of the remaining bytes
    is taken and the rest re-tokenized. ``stop`` is a stopping criterion that ends
    generation right after the program's last token (no forward after it, as in CaD).
    """

    def __init__(self, inner: Any, adapter: Any, text: str):
        super().__init__("torch")
        self.inner, self.adapter, self.text = inner, adapter, text
        self.reset()

    def reset(self) -> None:
        self.inner.reset()
        self.rest = self.text.encode("utf-8")
        self.queue = list(self.adapter.encode(self.text))
        self.chosen: list[int] = []
        self.first_call: Optional[float] = None
        self.first_cpu: Optional[float] = None
        self.calls = 0
        self.fallbacks = 0

    def process_logits(self, input_ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        if self.first_call is None:
            self.first_call, self.first_cpu = time.perf_counter(), time.process_time()
        self.calls += 1
        logits = self.inner.process_logits(input_ids, logits)
        if not self.rest:
            raise RuntimeError("Outlines asked for a token after the forced program ended")
        tid = self.queue[0] if self.queue else None
        if tid is None or not bool(torch.isfinite(logits[0, tid])):
            tid = self._fallback(torch.isfinite(logits[0]))
        piece = self.adapter.token_bytes(tid)
        self.rest = self.rest[len(piece):]
        if self.queue and self.queue[0] == tid:
            self.queue.pop(0)
        else:
            self.queue = list(self.adapter.encode(self.rest.decode("utf-8"))) if self.rest else []
        self.chosen.append(tid)
        out = torch.full_like(logits, float("-inf"))
        out[:, tid] = 0.0
        return out

    def _fallback(self, allowed: torch.Tensor) -> int:
        self.fallbacks += 1
        best, best_len = None, 0
        for tid in torch.nonzero(allowed).flatten().tolist():
            piece = self.adapter.token_bytes(tid) if tid < len(self.adapter.tokenizer) else b""
            if piece and len(piece) > best_len and self.rest.startswith(piece):
                best, best_len = tid, len(piece)
        if best is None:
            raise RuntimeError(f"Outlines' mask allows no token spelling the program's next "
                               f"bytes {self.rest[:30]!r}")
        return best

    def stop(self) -> Any:
        from transformers import StoppingCriteria

        outer = self

        class _ProgramDone(StoppingCriteria):
            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
                done = not outer.rest
                return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)

        return _ProgramDone()


def run_outlines(model: Any, document: str, instruction: str, program_text: str,
                 adapter: Any, style: str = "full") -> dict[str, Any]:
    """Baseline (b): ``outlines.Generator(model, CFG(grammar))`` forced to ``program_text``."""
    import outlines
    from transformers import StoppingCriteriaList

    grammar = specialize(load_grammar("lines"), len(copy_lines(document)), "lines")
    clock = time.perf_counter()
    generator = outlines.Generator(model, outlines.types.CFG(grammar))
    setup = time.perf_counter() - clock
    forcing = ForcingProcessor(generator.logits_processor, adapter, program_text)
    generator.logits_processor = forcing
    budget = len(adapter.encode(program_text)) + 64
    prompt = adapter.user_content(document, instruction, "lines", style=style)  # Outlines applies the chat template
    cpu, clock = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        generator(prompt, max_new_tokens=budget, do_sample=False,
                  stopping_criteria=StoppingCriteriaList([forcing.stop()]))
    end, cpu_end = time.perf_counter(), time.process_time()
    text = adapter.decode(forcing.chosen)
    return {"setup_seconds": setup, "total_seconds": end - clock,
            "gen_seconds": end - (forcing.first_call or end),
            "prefill_seconds": (forcing.first_call or end) - clock,
            "cpu_total_seconds": cpu_end - cpu, "cpu_gen_seconds": cpu_end - (forcing.first_cpu or cpu_end),
            "tokens": len(forcing.chosen), "forward_passes": forcing.calls,
            "fallbacks": forcing.fallbacks, "program_ok": text == program_text}
