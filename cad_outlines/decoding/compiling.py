"""Compiling the program grammar for one document and one tokenizer.

:func:`compile_grammar` specialises the packaged grammar to the document's size and
compiles it with llguidance: through Outlines' own ``LLGuidanceBackend`` when it is given
an Outlines model, and with llguidance directly (as that backend does) when it is given a
bare Hugging Face tokenizer, for engines that own their model (vLLM). The live
constraint that drives the result is :class:`cad_outlines.decoding.constraint.ProgramConstraint`.

What depends on the tokenizer only (llguidance's tokenizer, Outlines' backend, the
constraint's :class:`TokenTable`) is built once per tokenizer and kept here, in a cache
keyed weakly on the adapters' :class:`~cad_outlines.adapters.facts.TokenizerFacts`: the
adapters' layer holds no slot for what this layer derives.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from ..adapters.facts import TokenizerFacts, tokenizer_facts
from ..language import syntax
from ..language.grammar import Granularity, load_grammar, specialize

__all__ = ["CompiledGrammar", "TokenTable", "compile_grammar", "token_table", "tokenizer_setup_seconds"]


@dataclass
class TokenTable:
    """Per-tokenizer facts the composed automata need, derived once from the vocabulary.

    Attributes
    ----------
    vocab_size
        Size of the tokenizer's vocabulary (the mask's length).
    crossing
        Ids whose bytes hold a ``>`` before their last byte: inside a copy tag they
        would run past the tag's end.
    closers
        Ids of the tokens spelling a piece of a copy tag's close (``"``, ``"/``,
        ``"/>``, ``/``, ``/>``, ``>``), by their bytes.
    digits
        Ids of the one-digit tokens, by their digit (a copy index's alternatives, :mod:`.tree`).
    """

    vocab_size: int
    crossing: torch.Tensor
    closers: dict[bytes, int]
    digits: dict[str, int]


@dataclass
class CompiledGrammar:
    """A grammar compiled for one tokenizer: what a matcher needs, plus timings."""

    grammar_spec: Any
    llg_tokenizer: Any
    table: TokenTable
    granularity: Granularity
    upper: int
    compile_seconds: float


@dataclass
class _TokenizerSide:
    """What this layer derives from one tokenizer, built on first use."""

    llg_tokenizer: Any = None
    outlines_backend: Any = None  # Outlines' LLGuidanceBackend, when a model was given
    table: TokenTable | None = None
    setup_seconds: float = 0.0


_SIDES: "weakref.WeakKeyDictionary[TokenizerFacts, _TokenizerSide]" = weakref.WeakKeyDictionary()


def token_table(facts: TokenizerFacts, vocab_size: int) -> TokenTable:
    """The constraint's :class:`TokenTable`, from the tokenizer's one byte table.

    Added tokens are never closers: llguidance treats them as special and never
    emits them for text.
    """
    crossing: list[int] = []
    closers: dict[bytes, int] = {}
    digits: dict[str, int] = {}
    close = syntax.COPY_CLOSE.encode()
    pieces = {close[i:j] for i in range(len(close)) for j in range(i + 1, len(close) + 1)
              if j == len(close) or i == 0}
    added = {token.id for token in facts.backend.added.values()}
    for tid, data in enumerate(facts.table[:vocab_size]):
        if data in pieces and tid not in added:
            closers.setdefault(data, tid)
        if len(data) == 1 and data.isdigit() and tid not in added:
            digits.setdefault(data.decode(), tid)
        gt = data.find(close[-1:])
        if 0 <= gt < len(data) - 1:
            crossing.append(tid)
    return TokenTable(vocab_size, torch.tensor(crossing, dtype=torch.long), closers, dict(sorted(digits.items())))


def _side(tokenizer: Any, model: Any = None) -> _TokenizerSide:
    """The tokenizer's side of compilation (once per tokenizer; the backend once per model's)."""
    facts = tokenizer_facts(tokenizer)
    side = _SIDES.get(facts)
    if side is None:
        side = _SIDES[facts] = _TokenizerSide()
    if model is not None and side.outlines_backend is None:
        from outlines.backends.llguidance import LLGuidanceBackend

        start = time.perf_counter()
        side.outlines_backend = LLGuidanceBackend(model)
        side.llg_tokenizer = side.llg_tokenizer or side.outlines_backend.llg_tokenizer
        if side.table is None:
            side.table = token_table(facts, side.llg_tokenizer.vocab_size)
        side.setup_seconds = time.perf_counter() - start
    if side.llg_tokenizer is None:
        import llguidance.hf

        side.llg_tokenizer = llguidance.hf.from_tokenizer(tokenizer)
    if side.table is None:
        side.table = token_table(facts, side.llg_tokenizer.vocab_size)
    return side


def compile_grammar(source: Any, upper: int, granularity: Granularity = "lines") -> CompiledGrammar:
    """Specialise the packaged grammar to a document and compile it with llguidance.

    Parameters
    ----------
    source
        An Outlines ``Transformers`` model (``outlines.from_transformers``): compiled by
        its ``LLGuidanceBackend``. Or a Hugging Face fast tokenizer: the same grammar
        compiled by llguidance directly, as that backend compiles it.
    upper
        Lines ``n`` of the document (or its token count for ``"tokens"``).
    granularity
        ``"lines"`` or ``"tokens"``.

    Returns
    -------
    CompiledGrammar
        ``compile_seconds`` counts only the per-document part; the tokenizer-only part
        (first use of a tokenizer) is reported by :func:`tokenizer_setup_seconds`.
    """
    model = source if hasattr(source, "hf_tokenizer") else None
    side = _side(model.hf_tokenizer if model is not None else source, model)
    start = time.perf_counter()
    text = specialize(load_grammar(granularity), upper, granularity)
    if model is not None:
        spec = side.outlines_backend.get_cfg_logits_processor(text).grammar
    else:
        import llguidance

        try:  # as Outlines' LLGuidanceBackend.get_cfg_logits_processor: EBNF/GBNF first, then lark
            spec = llguidance.grammar_from("grammar", text)
        except ValueError:
            spec = llguidance.grammar_from("lark", text)
    assert side.table is not None
    return CompiledGrammar(spec, side.llg_tokenizer, side.table, granularity, upper,
                           time.perf_counter() - start)


def tokenizer_setup_seconds(source: Any) -> float:
    """Seconds the first use of a tokenizer cost (an Outlines model's or a bare one; 0.0
    if never measured)."""
    side = _SIDES.get(tokenizer_facts(getattr(source, "hf_tokenizer", source)))
    return side.setup_seconds if side is not None else 0.0
