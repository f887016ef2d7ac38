"""DCCD's candidates and how one is chosen: the results a :class:`DraftConditionedGenerator`
returns, and :func:`select` (Σ log α, log-likelihood, vote or a verifier).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

from ..errors import OptionError
from .alpha import AlphaTrace

__all__ = ["Candidate", "DCCDResult", "Selector", "check_selector", "select"]

Selector = Union[str, Callable[[str, "Candidate"], float]]
_SELECTORS = ("sum_log_alpha", "loglik", "vote")


# --- results -----------------------------------------------------------------------


@dataclass
class Candidate:
    """One projection: what it was conditioned on, what it produced, what it cost.

    Attributes
    ----------
    draft
        The unconstrained draft the projection was conditioned on (``None`` for plain CD).
    prompt
        The text the constrained decode was conditioned on (before any chat template).
    text
        The constrained output.
    value
        ``text`` parsed for the output type (dict / pydantic instance / int ...), or
        ``None`` when ``parse_error`` is set.
    trace
        Per-step feasible mass of the constrained decode.
    complete
        Whether the grammar accepted the output (``False`` only when
        ``max_new_tokens`` cut the decode short of an accepting state).
    token_ids
        The emitted ids, end-of-sequence excluded.
    score
        The selector's score (filled by :func:`select`).
    draft_tokens
        Tokens the drafter generated for ``draft`` (0 for plain CD and for drafts passed in).
    """

    draft: str | None
    prompt: str
    text: str
    value: Any
    trace: AlphaTrace
    complete: bool
    token_ids: list[int]
    parse_error: str | None = None
    score: float = math.nan
    draft_tokens: int = 0

    def to_dict(self) -> dict:
        """Plain-JSON view (``value`` as JSON when it can be, else its ``repr``)."""
        return {
            "draft": self.draft,
            "text": self.text,
            "value": _jsonable(self.value),
            "complete": self.complete,
            "score": self.score,
            "parse_error": self.parse_error,
            "trace": self.trace.to_dict(),
        }


@dataclass
class DCCDResult:
    """The chosen output and every candidate it was chosen from."""

    text: str
    value: Any
    index: int
    candidates: list[Candidate]
    selector: str

    @property
    def chosen(self) -> Candidate:
        """The selected candidate."""
        return self.candidates[self.index]

    @property
    def trace(self) -> AlphaTrace:
        """Feasible-mass trace of the selected candidate."""
        return self.chosen.trace

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict:
        """Plain-JSON view of the result."""
        return {
            "text": self.text,
            "value": _jsonable(self.value),
            "index": self.index,
            "selector": self.selector,
            "candidates": [c.to_dict() for c in self.candidates],
        }


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


# --- selection -----------------------------------------------------------------------


def _vote_key(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def select(candidates: Sequence[Candidate], selector: Selector, prompt: str = "") -> int:
    """Score ``candidates`` in place and return the index of the best one.

    Complete candidates (grammar accepted) always beat incomplete ones; among equals the
    highest score wins and the first candidate wins ties, so selection is deterministic.

    Parameters
    ----------
    candidates
        Projections to choose from (non-empty).
    selector
        ``"sum_log_alpha"`` (Σ log α, default of the generator), ``"loglik"`` (Σ log π of
        the emitted tokens under the unconstrained model), ``"vote"`` (number of
        candidates whose parsed value is equal; ties broken by Σ log α), or a callable
        ``verifier(prompt, candidate) -> float``.
    prompt
        The user prompt, passed to a callable verifier.
    """
    if not candidates:
        raise OptionError("select() needs at least one candidate")
    if callable(selector):
        keys = []
        for c in candidates:
            c.score = float(selector(prompt, c))
            keys.append((c.score,))
    elif selector == "sum_log_alpha":
        keys = []
        for c in candidates:
            c.score = c.trace.sum_log_alpha
            keys.append((c.score,))
    elif selector == "loglik":
        keys = []
        for c in candidates:
            c.score = c.trace.log_likelihood
            keys.append((c.score,))
    elif selector == "vote":
        counts: dict[str, int] = {}
        votable = [c.complete and c.parse_error is None for c in candidates]
        for c, ok in zip(candidates, votable):
            if ok:
                k = _vote_key(c.value)
                counts[k] = counts.get(k, 0) + 1
        keys = []
        for c, ok in zip(candidates, votable):
            c.score = float(counts[_vote_key(c.value)]) if ok else 0.0
            keys.append((c.score, c.trace.sum_log_alpha))
    else:
        raise OptionError(
            f"unknown selector {selector!r}; use one of {', '.join(_SELECTORS)} or a callable")
    best = 0
    for i, c in enumerate(candidates):
        rank = (c.complete, *keys[i])
        if rank > (candidates[best].complete, *keys[best]):
            best = i
    return best


def check_selector(selector: Selector) -> Selector:
    """``selector`` itself, or an OptionError (a ValueError) naming the known selectors."""
    if not callable(selector) and selector not in _SELECTORS:
        raise OptionError(
            f"unknown selector {selector!r}; use one of {', '.join(_SELECTORS)} or a callable")
    return selector
