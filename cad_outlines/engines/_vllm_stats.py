"""What the vLLM driver counts per edit (its own module: readable without vLLM installed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..decoding.results import CaDStats

__all__ = ["VLLMStats"]


@dataclass
class VLLMStats(CaDStats):
    """:class:`~cad_outlines.decoding.generator.CaDStats` plus what only a serving engine reports.

    On vLLM every program token is decoded (``forced_tokens`` stays 0: vLLM has no
    fast-forward), ``forward_passes`` counts the engine steps that produced one of this
    edit's tokens (the first token of each request comes from its prefill), and
    ``prefill_seconds`` is the first request's time to its first token.

    Attributes
    ----------
    requests
        Requests the edit took: one, plus one per splice (plus one per stop string
        ``"/>`` that occurred inside new text).
    prompt_tokens_cached, prompt_tokens_computed
        Prompt tokens over all requests whose KV came from the prefix cache, and those
        prefilled.
    splice_reusable_tokens
        For each continuation request, the tokens whose KV an earlier request computed
        (its whole context but the last sampled token), summed: what a splice could
        reuse, before block granularity.
    splice_reusable_block_tokens
        The same, each request's count rounded down to whole KV blocks: what the prefix
        cache can serve at most (it caches full blocks only).
    splice_cached_tokens
        Of the continuation requests' prompt tokens, those the prefix cache served.
    splice_computed_tokens
        Of the continuation requests' prompt tokens, those prefilled (the spans, and the
        last partial block of each previous context).
    first_token_seconds
        Time from submitting each request to its first token.
    decode_seconds
        Time from each request's first token to its end, summed.
    """

    requests: int = 0
    prompt_tokens_cached: int = 0
    prompt_tokens_computed: int = 0
    splice_reusable_tokens: int = 0
    splice_reusable_block_tokens: int = 0
    splice_cached_tokens: int = 0
    splice_computed_tokens: int = 0
    first_token_seconds: list[float] = field(default_factory=list)
    decode_seconds: float = 0.0
    constraint_seconds: float = 0.0  # the driver's own constraint: advancing it, finding splices
