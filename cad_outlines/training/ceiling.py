"""Copy-ceiling statistics: how much of each gold edit an oracle program could copy.

Definitions (the Copy-as-Decode paper's copy-ceiling table), with
``tok(text) = tokenizer.encode(text, add_special_tokens=False)`` and special-token
spellings read as plain text:

- ``T`` = ``len(tok(gold))``, summed over cases;
- ``T_copy`` = sum over copy ops of ``len(tok("\\n".join(copied lines)))``; the newline
  joining a copy to its neighbours is not counted. At token granularity a copy op
  ``CopyTokens(a, b)`` counts its ``b - a + 1`` tokens, which are gold tokens too;
- ``T_gen`` = ``T - T_copy``; ``f`` = ``T_copy / T``;
- ``K`` = number of copy ops; span = tokens per copy op (mean, p50, p95; the
  percentiles interpolate linearly between ranks, numpy's default, so they can be
  fractional; tables round them);
- ``roundtrip_ok`` = number of cases with ``resolve(oracle(doc, gold), doc) == gold``.

``tok`` is the ``encode`` of the tokenizer's adapter (:mod:`cad_outlines.adapters`):
plain mid-sequence text, no special tokens added, special spellings as text. On NFC text
under byte-level BPE (Qwen, DeepSeek-Coder) this is exactly
``tokenizer(text, add_special_tokens=False, split_special_tokens=True)``; the adapters
drop the NFC normaliser and SentencePiece's dummy-prefix ``▁`` so that any text
round-trips byte for byte, which can change counts on other text by a token or so.

This module imports no torch; loading a tokenizer from a folder imports transformers
lazily.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Literal, Optional, Protocol, Sequence

import numpy as np

from .corpus import Case
from ..errors import InputError
from ..language.oracle import oracle_program, oracle_tokens
from ..language.program import Copy, CopyTokens, Op, render_op
from ..language.resolver import resolve
from ..language.syntax import split_lines

Granularity = Literal["lines", "tokens"]
DEFAULT_MIN_SPAN = 8


class Tokenization(Protocol):
    """What the ceiling needs from a tokenizer (``cad_outlines.adapters`` provides it)."""

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text: no BOS/EOS, special-token spellings as text."""

    def token_pieces(self, text: str) -> list[bytes]:
        """Per-token byte strings of ``encode(text)``; they join to ``text.encode()``."""


@dataclass(frozen=True)
class CaseCeiling:
    """Copy-ceiling figures of one case."""

    id: str
    T: int
    spans: tuple[int, ...]
    roundtrip_ok: bool

    @property
    def T_copy(self) -> int:
        return sum(self.spans)


@dataclass(frozen=True)
class CeilingStats:
    """Copy-ceiling figures of a corpus (see the module docstring for definitions)."""

    n: int
    T: int
    T_copy: int
    T_gen: int
    f: float
    K: int
    span_mean: float
    span_p50: float
    span_p95: float
    roundtrip_ok: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def oracle_for(doc: str, gold: str, granularity: Granularity = "lines",
               tokenization: Optional[Tokenization] = None, *,
               min_span: int = DEFAULT_MIN_SPAN, cost_aware: bool = False,
               ) -> tuple[list[Op], Optional[list[bytes]]]:
    """The oracle program for ``doc -> gold`` and, at token granularity, the doc's pieces.

    Parameters
    ----------
    doc, gold
        Text before and after the edit.
    granularity
        ``"lines"`` (:func:`~cad_outlines.language.oracle.oracle_program`) or ``"tokens"``
        (:func:`~cad_outlines.language.oracle.oracle_tokens`, needs ``tokenization``).
    tokenization
        Token ids and byte pieces (:func:`load_tokenization`).
    min_span
        Shortest token copy (tokens granularity).
    cost_aware
        Lines granularity: generate a copy's text instead when its tag takes more tokens
        than the text (needs ``tokenization``).

    Returns
    -------
    (ops, pieces)
        ``pieces`` is None for line programs; pass it to ``resolve(token_pieces=...)``.
    """
    if granularity == "lines":
        cost = None
        if cost_aware:
            if tokenization is None:
                raise ValueError("cost-aware oracle needs a tokenizer")
            cost = (lambda op: len(tokenization.encode(render_op(op))),
                    lambda text: len(tokenization.encode(text)))
        return oracle_program(doc, gold, cost=cost), None
    if granularity != "tokens":
        raise ValueError(f"granularity must be 'lines' or 'tokens', got {granularity!r}")
    if tokenization is None:
        raise ValueError("token granularity needs a tokenizer")
    if cost_aware:
        raise ValueError("the cost-aware oracle is for lines granularity only")
    pieces = tokenization.token_pieces(doc)
    ops = oracle_tokens(tokenization.encode(doc), tokenization.encode(gold),
                        min_span=min_span, doc_pieces=pieces,
                        gold_pieces=tokenization.token_pieces(gold))
    return ops, pieces


def case_ceiling(case: Case, tokenization: Tokenization, granularity: Granularity = "lines",
                 min_span: int = DEFAULT_MIN_SPAN) -> CaseCeiling:
    """Oracle program, token counts and round trip of one case."""
    ops, pieces = oracle_for(case.doc, case.gold, granularity, tokenization, min_span=min_span)
    if granularity == "lines":
        lines = split_lines(case.doc)
        spans = tuple(len(tokenization.encode("\n".join(lines[op.start - 1:op.end])))
                      for op in ops if isinstance(op, Copy))
    else:
        spans = tuple(op.end - op.start + 1 for op in ops if isinstance(op, CopyTokens))
    try:
        ok = resolve(ops, case.doc, token_pieces=pieces) == case.gold
    except ValueError:
        ok = False
    return CaseCeiling(case.id, len(tokenization.encode(case.gold)), spans, ok)


def summarize(results: Sequence[CaseCeiling]) -> CeilingStats:
    """Aggregate per-case figures into :class:`CeilingStats`."""
    spans = sorted(s for r in results for s in r.spans)
    total = sum(r.T for r in results)
    copied = sum(spans)
    return CeilingStats(
        n=len(results),
        T=total,
        T_copy=copied,
        T_gen=total - copied,
        f=copied / total if total else 0.0,
        K=len(spans),
        span_mean=copied / len(spans) if spans else 0.0,
        span_p50=_percentile(spans, 50),
        span_p95=_percentile(spans, 95),
        roundtrip_ok=sum(r.roundtrip_ok for r in results),
    )


def _percentile(values: Sequence[int], percent: float) -> float:
    return float(np.percentile(values, percent)) if len(values) else 0.0


def ceiling(cases: Iterable[Case], tokenization: Tokenization, *,
            granularity: Granularity = "lines", min_span: int = DEFAULT_MIN_SPAN,
            progress: bool = False) -> CeilingStats:
    """Copy-ceiling statistics of a corpus.

    Parameters
    ----------
    cases
        The edits (see :func:`cad_outlines.training.corpus.load_corpus`).
    tokenization
        Token ids and byte pieces (an adapter from ``cad_outlines.adapters``, or
        :func:`load_tokenization`).
    granularity
        ``"lines"`` (the paper's line oracle) or ``"tokens"`` (greedy token oracle).
    min_span
        Shortest token copy (tokens granularity only).
    progress
        Show a tqdm progress bar on stderr.
    """
    return summarize(case_ceilings(cases, tokenization, granularity=granularity, min_span=min_span,
                                   progress=progress))


def case_ceilings(cases: Iterable[Case], tokenization: Tokenization, *,
                  granularity: Granularity = "lines", min_span: int = DEFAULT_MIN_SPAN,
                  progress: bool = False) -> list[CaseCeiling]:
    """:func:`case_ceiling` of every case (parameters as :func:`ceiling`).

    Raises
    ------
    ValueError
        Naming the case whose oracle program does not rebuild its gold.
    """
    cases = list(cases)
    if progress:
        from tqdm import tqdm

        cases = tqdm(cases, desc=f"ceiling ({granularity})", unit="case")
    results = []
    for case in cases:
        try:
            results.append(case_ceiling(case, tokenization, granularity, min_span))
        except InputError as err:  # the tokenizer cannot spell this case's text
            raise InputError(f"case {case.id!r}: {err}") from err
    return results


def format_table(stats: CeilingStats, name: str = "") -> str:
    """A one-row Markdown table in the layout of the corpora README."""
    head = ("| corpus | n | T | T_copy | T_gen | f | K | span mean | span p50 | span p95 "
            "| round trip |")
    rule = "|" + " --- |" * 11
    row = (f"| {name} | {stats.n} | {stats.T:,} | {stats.T_copy:,} | {stats.T_gen:,} "
           f"| {stats.f:.1%} | {stats.K:,} | {stats.span_mean:,.1f} | {stats.span_p50:,.0f} "
           f"| {stats.span_p95:,.0f} | {stats.roundtrip_ok}/{stats.n} |")
    return "\n".join([head, rule, row])


# --- tokenizers -------------------------------------------------------------------


def load_tokenization(tokenizer: Any, *, special_as_text: bool = True) -> Tokenization:
    """Token ids and byte pieces for a tokenizer folder or a loaded HF tokenizer.

    Parameters
    ----------
    tokenizer
        A tokenizer folder (``transformers.AutoTokenizer.from_pretrained``) or a loaded
        Hugging Face tokenizer.
    special_as_text
        True (the definition): a special-token spelling such as ``<|im_start|>`` in the
        text is tokenized as text; the tokenizer's adapter
        (:func:`cad_outlines.adapters.get_adapter`) serves it. False: it becomes its
        special token, as a plain ``tokenizer.encode(text, add_special_tokens=False)``
        does; this reproduces the shared corpora README's table (adapters are text-only
        by contract, so the tokenizer itself encodes, and its pieces are read from the
        same byte table the adapters use).

    Raises
    ------
    FileNotFoundError
        If the folder does not exist.
    AdapterError
        If it holds no ``tokenizer.json``, transformers cannot load it, or no adapter
        accepts it.
    """
    from ..adapters import get_adapter, load_tokenizer

    if isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = load_tokenizer(tokenizer)
    if not special_as_text:
        return NativeTokenization(tokenizer)
    return get_adapter(tokenizer)


class NativeTokenization:
    """The tokenizer's own ids (special spellings become special tokens), exact byte pieces.

    The pieces come from the tokenizer's byte table
    (:attr:`cad_outlines.adapters.TokenizerFacts.table`); a tokenizer whose tokens do not
    spell the text byte for byte (a normaliser changed it) is refused by the check in
    :meth:`token_pieces`.
    """

    def __init__(self, tokenizer: Any):
        from ..adapters import tokenizer_facts

        self.tokenizer = tokenizer
        self._table = tokenizer_facts(tokenizer).table

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False,
                                   split_special_tokens=False)["input_ids"])

    def token_pieces(self, text: str) -> list[bytes]:
        pieces = [self._table[i] for i in self.encode(text)]
        want = text.encode("utf-8")
        # A SentencePiece normaliser prepends one "▁" (a space) that its decoder strips.
        if pieces and b"".join(pieces) == b" " + want and pieces[0].startswith(b" "):
            pieces[0] = pieces[0][1:]
        if b"".join(pieces) != want:
            raise InputError(
                f"{type(self.tokenizer).__name__}: token pieces do not spell the text "
                "exactly (normalisation?); token granularity needs a tokenizer whose "
                "tokens reproduce the text byte for byte")
        return pieces
