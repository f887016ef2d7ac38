"""Draft-conditioned constrained decoding (DCCD) with feasible-mass diagnostics.

Plain constrained decoding (CD) asks the model for the answer *and* the format at once:
every step, the model's distribution is cut to the ids the grammar allows and
renormalised. When the format is unnatural for the model, most of its mass is cut away
(small feasible mass α, see :mod:`cad_outlines.decoding.alpha`) and the renormalised remainder
can be close to noise.

DCCD splits the two jobs:

1. **Draft** — sample ``K`` unconstrained answers ``y_k ~ π(·|x)`` (optionally from a
   different, smaller ``drafter`` model), in one batched decode.
2. **Project** — for each draft, decode *under the constraint* from a projection prompt
   built from ``x`` and ``y_k`` (``projection_template``). The grammar matcher is fed only
   the constrained output, never the draft, so every projection is exactly as valid as
   plain CD output whatever the draft contains.
3. **Select** — score every projection and return the best: by default the one with the
   largest ``Σ_t log α_t`` (the smallest projection tax), or by log-likelihood, an
   external verifier, or majority vote over parsed values.

The output type is compiled exactly as :class:`outlines.generator.SteerableGenerator`
compiles it (regex, JSON schema / pydantic, ``outlines.types.CFG``), through the
``outlines_core`` or ``llguidance`` backend. Outlines' logits processors advance their
matcher one token per call inside ``model.generate``; DCCD needs the per-step mask
itself to measure α, so it drives the backend's matcher (``outlines_core.Guide`` or
``llguidance.LLMatcher``) token by token in its own KV-cached decode loop.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import torch

from outlines.generator import SteerableGenerator

from ..errors import (ConstraintError, OptionError, OptionTypeError, PromptError, PromptTypeError,
                      UnsupportedModelError)
from .alpha import AlphaTrace
from .constraint import Constraint, bitmask_to_mask
from .runner import BatchRunner, TransformersRunner
from .sampler import Sampler, SamplingOptions
from .selection import Candidate, DCCDResult, Selector, check_selector, select

__all__ = [
    "DEFAULT_PROJECTION_TEMPLATE",
    "Candidate",
    "DCCDResult",
    "DraftConditionedGenerator",
    "select",
]

DEFAULT_PROJECTION_TEMPLATE = (
    "{prompt}\n\nDraft answer:\n{draft}\n\n"
    "Rewrite the draft answer in the required output format."
)
"""Projection prompt used when none is given: ``{prompt}`` and ``{draft}`` are filled
with ``str.format`` (double any literal brace in a custom template)."""

# --- matchers: the backend's automaton, driven one token at a time ---------------------


class _Matcher(Constraint, Protocol):
    """A backend's automaton as DCCD drives it: a constraint that can say it accepts."""

    def is_accepting(self) -> bool:
        """Whether the output so far is a complete match (``max_new_tokens`` may cut it short)."""


class _LLGuidanceMatcher:
    """``llguidance.LLMatcher`` over the grammar an Outlines llguidance processor holds.

    A :class:`~cad_outlines.decoding.constraint.Constraint`: done once it consumed an
    end-of-sequence id.
    """

    def __init__(self, llg_tokenizer: Any, grammar: str):
        import llguidance
        import llguidance.torch

        self._fill = llguidance.torch.fill_next_token_bitmask
        self._m = llguidance.LLMatcher(llg_tokenizer, grammar)
        if self._m.is_error():
            raise OptionError(f"llguidance rejected the output type: {self._m.get_error()}")
        self._bitmask = llguidance.torch.allocate_token_bitmask(1, llg_tokenizer.vocab_size)
        self.eos_ids = frozenset(llg_tokenizer.eos_tokens)
        self.done = False

    def allowed(self, vocab_size: int) -> torch.Tensor:
        self._fill(self._m, self._bitmask, 0)
        return bitmask_to_mask(self._bitmask[0], vocab_size)

    def advance(self, ids: Sequence[int]) -> None:
        for token_id in ids:
            if not self._m.consume_token(token_id):
                raise ConstraintError(f"llguidance matcher rejected token {token_id}: "
                                   f"{self._m.get_error()}")
            self.done = token_id in self.eos_ids

    def is_accepting(self) -> bool:
        return self._m.is_accepting()


class _OutlinesCoreMatcher:
    """``outlines_core.Guide`` over the index an Outlines outlines_core processor holds.

    A :class:`~cad_outlines.decoding.constraint.Constraint`: done once it consumed its
    end-of-sequence id.
    """

    def __init__(self, index: Any, eos_id: int, mask_size: int):
        from outlines_core import Guide

        self._g = Guide(index)
        self._words = torch.zeros((mask_size + 31) // 32, dtype=torch.int32)
        self.eos_ids = frozenset([eos_id])
        self.done = False

    def allowed(self, vocab_size: int) -> torch.Tensor:
        self._g.write_mask_into(self._words.data_ptr(), self._words.numel(), 4)
        return bitmask_to_mask(self._words, vocab_size)

    def advance(self, ids: Sequence[int]) -> None:
        for token_id in ids:
            if token_id in self.eos_ids:
                # outlines_core has no transition on EOS from a final state (its issue
                # #227); EOS just ends the sequence.
                if not self._g.is_finished():
                    raise ConstraintError(f"end of sequence {token_id} before an accepting state")
                self.done = True
                return
            self._g.advance(token_id=token_id, return_tokens=False)

    def is_accepting(self) -> bool:
        return self._g.is_finished()


# --- the decode loop -----------------------------------------------------------------


@dataclass
class _Row:
    prompt_ids: list[int]
    matcher: _Matcher | None = None
    out_ids: list[int] = field(default_factory=list)
    trace: AlphaTrace = field(default_factory=AlphaTrace)
    ended: bool = False  # emitted end-of-sequence


def _decode(runner: BatchRunner, rows: list[_Row], *, pad_id: int, stop_ids: frozenset[int],
            max_new_tokens: int, temperature: float, generator: torch.Generator) -> None:
    """Decode every row to completion in one batch (left-padded, one shared KV cache).

    A row with a matcher is constrained: each step its mask is computed, α is recorded
    on the raw logits, the token is chosen from the masked logits and fed to the matcher;
    it ends on one of the matcher's end-of-sequence ids. A row without one is free and
    ends on ``stop_ids``. ``temperature == 0`` is greedy.
    """
    device = runner.device
    # The masks are already in ``scores`` (rows differ); the shared sampler does the rest.
    sampler = Sampler(SamplingOptions(temperature=temperature), generator)
    width = max(len(r.prompt_ids) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if not r.prompt_ids:
            raise PromptError("empty prompt: nothing to condition the decode on")
        ids[i, width - len(r.prompt_ids):] = torch.tensor(r.prompt_ids)
        attn[i, width - len(r.prompt_ids):] = 1
    ids, attn = ids.to(device), attn.to(device)
    # Left padding: positions count real tokens only, so every row sees the positions it
    # would see alone.
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    cache = None
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            logits, cache = runner.forward_batch(ids, attn, pos, cache)
            logits = logits.float()
            vocab = logits.shape[-1]
            scores = logits.clone()
            masks: list[torch.Tensor | None] = [None] * len(rows)
            for i, r in enumerate(rows):
                if r.ended or r.matcher is None:
                    continue
                mask = r.matcher.allowed(vocab).to(device)
                if not bool(mask.any()):
                    raise ConstraintError(
                        f"the constraint allows no id the model can emit after "
                        f"{len(r.out_ids)} tokens (mask and logits share no id)")
                scores[i].masked_fill_(~mask, -math.inf)
                masks[i] = mask
            chosen_ids = sampler.choose(scores).tolist()
            for i, r in enumerate(rows):
                if r.ended:
                    chosen_ids[i] = pad_id
                    continue
                chosen = chosen_ids[i]
                if r.matcher is not None:
                    # α on the raw logits, whatever the sampling temperature.
                    r.trace.record(logits[i], masks[i], chosen)
                    r.matcher.advance([chosen])
                    r.ended = r.matcher.done
                else:
                    r.ended = chosen in stop_ids
                if not r.ended:
                    r.out_ids.append(chosen)
            if all(r.ended for r in rows):
                break
            ids = torch.tensor(chosen_ids, dtype=torch.long, device=device).unsqueeze(1)
            attn = torch.cat([attn, torch.ones_like(ids)], dim=1)
            pos = pos[:, -1:] + 1


# --- the generator -------------------------------------------------------------------


class DraftConditionedGenerator(SteerableGenerator):
    """Draft freely, project under the constraint, keep the projection the model liked.

    Parameters
    ----------
    model
        An Outlines ``Transformers`` model (``outlines.from_transformers(...)``).
    output_type
        Any output type Outlines accepts: a regex (``outlines.types.Regex``), a JSON
        schema / pydantic model / ``outlines.types.JsonSchema``, a CFG
        (``outlines.types.CFG``), a Python type...
    k
        Number of drafts (and projections) per prompt. ``k=0`` is plain constrained
        decoding of the prompt, with its α trace.
    projection_template
        ``str.format`` template with ``{prompt}`` and ``{draft}``; the result is passed
        through the model's chat template when it has one, like any Outlines prompt.
    drafter
        Outlines ``Transformers`` model that writes the drafts (default: ``model``).
    selector
        ``"sum_log_alpha"`` (default), ``"loglik"``, ``"vote"`` or a callable
        ``verifier(prompt, candidate) -> float``; see :func:`select`.
    backend
        Outlines backend that compiles ``output_type``: ``"outlines_core"`` or
        ``"llguidance"`` (``None``: Outlines' default for the type).
    max_new_tokens, draft_max_tokens
        Token budgets of a projection and of a draft.
    temperature
        Sampling temperature of the projection (0: greedy).
    draft_temperature
        Sampling temperature of the drafts.
    runner, draft_runner
        The model side of the projections and of the drafts
        (:class:`~cad_outlines.decoding.runner.BatchRunner`; default: a ``TransformersRunner`` over
        each model). A benchmark passes ``ObservedRunner`` s to count and clock forwards.

    Examples
    --------
    >>> gen = DraftConditionedGenerator(model, Person, k=3)   # doctest: +SKIP
    >>> result = gen.run("Describe Ada Lovelace.", seed=0)   # doctest: +SKIP
    >>> result.value, result.trace.projection_tax            # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        output_type: Any,
        *,
        k: int = 3,
        projection_template: str = DEFAULT_PROJECTION_TEMPLATE,
        drafter: Any = None,
        selector: Selector = "sum_log_alpha",
        backend: str | None = None,
        max_new_tokens: int = 256,
        draft_max_tokens: int = 256,
        temperature: float = 0.0,
        draft_temperature: float = 1.0,
        runner: BatchRunner | None = None,
        draft_runner: BatchRunner | None = None,
    ):
        from outlines.models.transformers import Transformers

        for name, m in (("model", model), ("drafter", drafter)):
            if m is not None and not isinstance(m, Transformers):
                raise UnsupportedModelError(
                    f"{name} must be an Outlines Transformers model "
                    f"(outlines.from_transformers(...)), got {type(m).__name__}")
        if output_type is None:
            raise OptionError("DCCD needs an output type to constrain the projection to")
        if k < 0:
            raise OptionError(f"k must be >= 0, got {k}")
        for key in ("prompt", "draft"):
            if "{" + key + "}" not in projection_template:
                raise OptionError(f"projection_template lacks the {{{key}}} placeholder")
        check_selector(selector)
        super().__init__(model, output_type, backend)
        self.output_type = output_type
        self.k = k
        self.projection_template = projection_template
        self.drafter = drafter if drafter is not None else model
        self.selector = selector
        # The model side of the projections and of the drafts (a benchmark passes
        # ObservedRunners to count and clock them, as it does for the CaD loop).
        self.runner: BatchRunner = runner if runner is not None else TransformersRunner(model.model)
        self.draft_runner: BatchRunner = (draft_runner if draft_runner is not None else
                                     self.runner if self.drafter is model else TransformersRunner(self.drafter.model))
        self.max_new_tokens = max_new_tokens
        self.draft_max_tokens = draft_max_tokens
        self.temperature = temperature
        self.draft_temperature = draft_temperature
        self._make_matcher = self._matcher_factory()
        self._parse = _parser_for(output_type)

    # The compiled processor holds the backend's automaton; each decode gets a fresh
    # matcher over it (the processor itself only works inside model.generate).
    def _matcher_factory(self) -> Callable[[], _Matcher]:
        proc = self.logits_processor
        if hasattr(proc, "llg_tokenizer") and hasattr(proc, "grammar"):
            return lambda: _LLGuidanceMatcher(proc.llg_tokenizer, proc.grammar)
        if hasattr(proc, "index"):
            eos = self.model.tokenizer.eos_token_id
            size = max(len(self.model.hf_tokenizer), self.model.model.config.vocab_size)
            return lambda: _OutlinesCoreMatcher(proc.index, eos, size)
        raise NotImplementedError(
            f"DCCD drives the outlines_core or llguidance matcher itself; "
            f"{type(proc).__name__} is not supported (pass backend='llguidance')")

    # --- Outlines' generator interface ---------------------------------------------

    def __call__(self, prompt: str, **kwargs: Any) -> str:
        """Return the selected constrained output (text), like ``SteerableGenerator``.

        ``kwargs`` are those of :meth:`run`.
        """
        return self.run(prompt, **kwargs).text

    def batch(self, prompts: list[str], **kwargs: Any) -> list[str]:
        """:meth:`__call__` over several prompts (one after the other)."""
        return [self(p, **kwargs) for p in prompts]

    def stream(self, prompt: Any, **kwargs: Any):
        """Not available: selection needs every projection finished first."""
        raise NotImplementedError("DCCD selects among finished projections; it cannot stream")

    # --- DCCD ------------------------------------------------------------------------

    def run(
        self,
        prompt: str,
        *,
        k: int | None = None,
        drafts: Sequence[str] | None = None,
        seed: int | None = None,
        selector: Selector | None = None,
        draft_prompt: str | None = None,
    ) -> DCCDResult:
        """Draft, project and select; return the chosen output with every candidate.

        Parameters
        ----------
        prompt
            The user prompt (a string).
        k
            Overrides the generator's ``k`` (``0``: plain constrained decoding).
        drafts
            Use these drafts instead of sampling (e.g. written by an API model); ``k``
            is then ``len(drafts)``.
        seed
            Seeds one ``torch.Generator`` that drives the drafts, then the projections:
            the same seed reproduces the same result.
        selector
            Overrides the generator's selector.
        draft_prompt
            What the drafts are sampled from (default: ``prompt``). Leaving the format
            request out of it lets the model answer in its own words; the projection
            still sees ``prompt``.
        """
        if not isinstance(prompt, str):
            raise PromptTypeError(f"DCCD prompts must be strings, got {type(prompt).__name__}")
        selector = self.selector if selector is None else check_selector(selector)
        generator = torch.Generator(device=self.model.model.device)
        if seed is None:
            generator.seed()
        else:
            generator.manual_seed(seed)
        if drafts is None:
            k = self.k if k is None else k
            if k < 0:
                raise OptionError(f"k must be >= 0, got {k}")
            if k == 0:
                return self._plain_cd(prompt, generator)
            if draft_prompt is not None and not isinstance(draft_prompt, str):
                raise OptionTypeError(f"draft_prompt must be a string, got {type(draft_prompt).__name__}")
            drafts, lengths = self.draft_with_lengths(
                prompt if draft_prompt is None else draft_prompt, k, generator)
        elif not drafts:
            raise OptionError("drafts is empty; pass k=0 for plain constrained decoding")
        else:
            lengths = [0] * len(drafts)
        projection_prompts = [
            self.projection_template.format(prompt=prompt, draft=d) for d in drafts]
        candidates = self._project(projection_prompts, list(drafts), generator)
        for cand, n in zip(candidates, lengths):
            cand.draft_tokens = n
        index = select(candidates, selector, prompt)
        name = selector if isinstance(selector, str) else getattr(selector, "__name__", "verifier")
        return DCCDResult(candidates[index].text, candidates[index].value, index,
                          candidates, name)

    def cd(self, prompt: str, *, seed: int | None = None) -> DCCDResult:
        """Plain constrained decoding of ``prompt`` (no draft), with its α trace."""
        return self.run(prompt, k=0, seed=seed)

    def draft(self, prompt: str, k: int, generator: torch.Generator) -> list[str]:
        """Sample ``k`` unconstrained drafts from the drafter in one batched decode."""
        return self.draft_with_lengths(prompt, k, generator)[0]

    def draft_with_lengths(self, prompt: str, k: int,
                           generator: torch.Generator) -> tuple[list[str], list[int]]:
        """:meth:`draft`, with the number of tokens each draft took (stop id excluded)."""
        m = self.drafter
        ids = _encode(m, prompt)
        tok = m.hf_tokenizer
        stop = {tok.eos_token_id}
        gen_eos = getattr(getattr(m.model, "generation_config", None), "eos_token_id", None)
        stop.update(gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos])
        stop.discard(None)
        rows = [_Row(list(ids)) for _ in range(k)]
        _decode(self.draft_runner, rows, pad_id=_pad_id(tok), stop_ids=frozenset(stop),
                max_new_tokens=self.draft_max_tokens, temperature=self.draft_temperature,
                generator=generator)
        return ([tok.decode(r.out_ids, skip_special_tokens=True) for r in rows],
                [len(r.out_ids) for r in rows])

    def _plain_cd(self, prompt: str, generator: torch.Generator) -> DCCDResult:
        candidates = self._project([prompt], [None], generator)
        select(candidates, "sum_log_alpha")
        return DCCDResult(candidates[0].text, candidates[0].value, 0, candidates, "cd")

    def _project(self, prompts: list[str], drafts: list[str | None],
                 generator: torch.Generator) -> list[Candidate]:
        tok = self.model.hf_tokenizer
        rows = [_Row(_encode(self.model, p), matcher=self._make_matcher()) for p in prompts]
        _decode(self.runner, rows, pad_id=_pad_id(tok), stop_ids=frozenset(),
                max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                generator=generator)
        out = []
        for p, d, r in zip(prompts, drafts, rows):
            # Decode exactly what the matcher saw: no special-token skipping, no space
            # clean-up, or the text could differ from the validated token sequence.
            text = tok.decode(r.out_ids, skip_special_tokens=False,
                              clean_up_tokenization_spaces=False)
            complete = r.matcher.is_accepting()
            value, err = None, None
            if complete:
                try:
                    value = self._parse(text)
                except Exception as e:  # the parser is the output type's own
                    err = f"{type(e).__name__}: {e}"
            else:
                err = f"incomplete: max_new_tokens={self.max_new_tokens} reached"
            out.append(Candidate(d, p, text, value, r.trace, complete, r.out_ids, err))
        return out


def _encode(model: Any, prompt: str) -> list[int]:
    text = model.type_adapter.format_input(prompt)
    return list(model.hf_tokenizer(text)["input_ids"])


def _pad_id(tok: Any) -> int:
    # Padded positions are masked out of attention; any real id will do.
    return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id


def _parser_for(output_type: Any) -> Callable[[str], Any]:
    """text -> Python value for the output type (text itself when there is no parse)."""
    from outlines.types import JsonSchema
    from outlines.types.dsl import python_types_to_terms
    from outlines.types.utils import is_bool, is_float, is_int, is_pydantic_model

    if is_pydantic_model(output_type):
        return output_type.model_validate_json
    if is_int(output_type):
        return int
    if is_float(output_type):
        return float
    if is_bool(output_type):
        return lambda s: {"true": True, "false": False}[s.strip().lower()]
    if isinstance(python_types_to_terms(output_type), JsonSchema):
        return json.loads
    # Regex, CFG and other terms: the text is the value.
    return str
