"""Prompt-lookup decoding (PLD), teacher-forced to the gold: the peer baseline of ``bench e2e``.

PLD is what a user would pick to edit a file without a program format: transformers'
``generate(prompt_lookup_num_tokens=k, max_matching_ngram_size=n)`` (vLLM's n-gram
speculation is the same idea). At every step the last ``n`` (then ``n - 1``, ... 1) ids of
the sequence are looked up in the sequence itself; the ``k`` ids after the first match
are drafted and verified in one forward over ``1 + k`` positions (logits at each).

Here the drafts come from transformers' own
:class:`~transformers.generation.candidate_generator.PromptLookupCandidateGenerator`
(``get_candidates`` on the ids so far, no logits processor: PLD's search is unconstrained),
and the model is teacher-forced to the gold, as every other run of the benchmark is: a
drafted token is accepted iff it equals the next gold token, so the output is the gold
and only the number and width of the forwards depend on the drafts. Each verify forward
is really run, through the same runner seam (:mod:`cad_outlines.decoding.runner`) as the CaD
loop, so :class:`~._loop.CpuClock` clocks it like the others.

The prompt is PLD's own: the instruction and the document as it is, in the chat
template, with no program-format statement and no line numbers
(:func:`plain_prompt_ids`). Its prefill is measured and reported apart from the
generation phase.

One difference from ``generate``: there, the first lookup drafts onto the prefill
forward; here the prefill runs alone and lookups start after the first token, as in the
CaD and regeneration runs. It moves at most one verify forward per case.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import torch

from ..errors import InputError
from ..decoding.runner import ObservedRunner, Runner, TransformersRunner
from ._loop import CpuClock, cpu_run

__all__ = ["PLDSetting", "DEFAULT", "lookup_steps", "plain_prompt_ids", "run_pld"]


@dataclass(frozen=True)
class PLDSetting:
    """One PLD configuration: ``k`` drafted tokens at most, n-grams of up to ``n`` ids."""

    num_output_tokens: int = 10
    max_matching_ngram_size: int = 2

    def __post_init__(self) -> None:
        if self.num_output_tokens < 1 or self.max_matching_ngram_size < 1:
            raise InputError(f"a PLD setting needs k >= 1 and n >= 1, got k={self.num_output_tokens}, "
                             f"n={self.max_matching_ngram_size}")

    @property
    def name(self) -> str:
        """The run's name in reports: ``pld_k10_n2``."""
        return f"pld_k{self.num_output_tokens}_n{self.max_matching_ngram_size}"

    @classmethod
    def parse(cls, text: str) -> "PLDSetting":
        """``"k:n"`` (e.g. ``"20:3"``) as a setting.

        Raises
        ------
        InputError
            If ``text`` is not two positive integers separated by ``:``.
        """
        try:
            k, n = (int(part) for part in text.split(":"))
        except ValueError:
            raise InputError(f"a PLD setting is 'k:n' (e.g. '10:2'), got {text!r}") from None
        return cls(k, n)


#: transformers' defaults: ``generate(prompt_lookup_num_tokens=10)`` with
#: ``max_matching_ngram_size`` unset (2 in ``_get_candidate_generator``).
DEFAULT = PLDSetting(10, 2)


def plain_prompt_ids(tokenizer: Any, document: str, instruction: str, style: str = "full") -> list[int]:
    """The prompt a PLD user sends: the adapter's plain prompt (``Adapter.plain_prompt_ids``).

    No program-format statement and no line numbers: PLD answers with the whole edited
    document, as :meth:`CaDGenerator.regenerate` does with the same prompt (``style``
    ``compact``: the file first, as CaD's compact prompt has it).
    """
    from ..adapters import get_adapter

    return get_adapter(tokenizer).plain_prompt_ids(document, instruction, style)


def lookup_steps(prompt_ids: Sequence[int], gold_ids: Sequence[int], setting: PLDSetting,
                 eos_token_id: Optional[int], max_length: int) -> Iterator[tuple[int, list[int], int]]:
    """The verify forwards of PLD teacher-forced to ``gold_ids``, without a model.

    Yields, per forward after the prefill, ``(token, drafted, accepted)``: the gold token
    the forward appends, the ids transformers' ``PromptLookupCandidateGenerator`` drafts
    after it (looked up in prompt + gold so far), and how many of them equal the next
    gold tokens. The forward appends ``1 + len(drafted)`` ids; ``len(drafted) - accepted``
    are cropped after it. The last forward is the one whose logits would choose EOS.
    """
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    eos = torch.tensor([eos_token_id]) if eos_token_id is not None else None
    lookup = PromptLookupCandidateGenerator(
        eos_token_id=eos, num_output_tokens=setting.num_output_tokens,
        max_matching_ngram_size=setting.max_matching_ngram_size, max_length=max_length)
    seq = torch.tensor([list(prompt_ids) + list(gold_ids)], dtype=torch.long)
    base, i = len(prompt_ids), 0
    while i < len(gold_ids):
        known = base + i + 1  # the prompt, the accepted gold, and gold[i] just chosen
        candidates, _ = lookup.get_candidates(seq[:, :known])
        drafted = candidates[0, known:].tolist()
        accepted = 0
        while (accepted < len(drafted) and i + 1 + accepted < len(gold_ids)
               and drafted[accepted] == gold_ids[i + 1 + accepted]):
            accepted += 1
        yield gold_ids[i], drafted, accepted
        i += 1 + accepted


def run_pld(hf_model: Any, prompt_ids: Sequence[int], gold_ids: Sequence[int], setting: PLDSetting,
            eos_token_id: Optional[int], max_new_tokens: int,
            runner: Optional[Runner] = None, check_greedy: bool = False) -> dict[str, Any]:
    """One PLD run: prefill ``prompt_ids``, then the verify forwards of :func:`lookup_steps`.

    ``runner``: the model side (default: a :class:`~cad_outlines.decoding.runner.TransformersRunner`
    over ``hf_model``); it is observed by a :class:`CpuClock`. ``check_greedy``: count the
    positions where the logits the verify forwards compute anyway choose another token
    than ``gold_ids`` (and, after a reply shorter than ``max_new_tokens``, another than
    EOS): ``greedy_mismatches`` is 0 iff ``gold_ids`` is what greedy PLD itself produces.

    Returns
    -------
    dict
        ``prompt_tokens``, ``tokens``, ``forward_passes`` (the prefill included),
        ``draft_tokens``, ``draft_accepted``, ``prefill_seconds``, ``total_seconds``,
        ``gen_seconds``, the CPU figures of :func:`~._loop.cpu_run`, ``exact`` (the ids
        appended are the gold's) and the setting.
    """
    clock = CpuClock()
    observed = ObservedRunner(runner if runner is not None else TransformersRunner(hf_model), clock)
    max_length = len(prompt_ids) + max_new_tokens
    stats = {"forward_passes": 0, "draft_tokens": 0, "draft_accepted": 0, "prefill_seconds": 0.0}
    appended: list[int] = []
    # what greedy decoding must choose at each position: the reply, then EOS if it ended
    ended = len(gold_ids) < max_new_tokens and eos_token_id is not None
    wanted = list(gold_ids) + ([eos_token_id] if ended else [])
    mismatches, check_cpu, check_wall = 0, 0.0, 0.0

    def check(logits: torch.Tensor, at: int, rows: int) -> int:
        nonlocal check_cpu, check_wall  # the check is no part of PLD: its time is taken out
        cpu, wall = time.process_time(), time.perf_counter()
        chosen = logits.reshape(-1, logits.shape[-1])[:rows].argmax(-1).tolist()
        check_cpu += time.process_time() - cpu
        check_wall += time.perf_counter() - wall
        return sum(c != w for c, w in zip(chosen, wanted[at:at + rows]))

    def decode() -> float:
        nonlocal mismatches
        start = time.perf_counter()
        cache = observed.new_cache()
        first = observed.forward(list(prompt_ids), cache)
        stats["prefill_seconds"] = time.perf_counter() - start
        stats["forward_passes"] += 1
        if check_greedy:
            mismatches += check(first, 0, 1)
        for token, drafted, accepted in lookup_steps(prompt_ids, gold_ids, setting, eos_token_id, max_length):
            logits = observed.forward([token] + drafted, cache, rows=1 + len(drafted))
            if check_greedy:  # rows 0..accepted choose what follows token and its kept drafts
                mismatches += check(logits, len(appended) + 1, 1 + accepted)
            observed.crop(cache, len(drafted) - accepted)
            appended.extend([token] + drafted[:accepted])
            stats["forward_passes"] += 1
            stats["draft_tokens"] += len(drafted)
            stats["draft_accepted"] += accepted
        return time.perf_counter() - start

    total, cpu = cpu_run(clock, decode)
    if check_greedy:
        stats["greedy_mismatches"] = mismatches
        total -= check_wall
        cpu = {name: value - check_cpu if name in ("cpu_total_seconds", "cpu_gen_seconds") else value
               for name, value in cpu.items()}
    return {"prompt_tokens": len(prompt_ids), "tokens": len(appended), **stats,
            "total_seconds": total, "gen_seconds": total - stats["prefill_seconds"], **cpu,
            "exact": appended == list(gold_ids), "k": setting.num_output_tokens,
            "n": setting.max_matching_ngram_size, "via": "transformers PromptLookupCandidateGenerator"}
