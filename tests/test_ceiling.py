"""Copy-ceiling statistics: the paper's definitions, checked by hand and on real edits."""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from functools import lru_cache

import pytest

import cad_outlines.adapters
from cad_outlines.training import ceiling as ceiling_mod
from cad_outlines.training.ceiling import (CaseCeiling, case_ceiling, ceiling, format_table,
                                        load_tokenization, oracle_for, summarize)
from cad_outlines.training.corpus import Case, load_corpus
from cad_outlines.language.program import Copy, CopyTokens

from testdata import CORPUS_SAMPLE, TOKENIZERS

CASES = load_corpus(CORPUS_SAMPLE)


class CharTokens:
    """One token per character: counts are easy to work out by hand."""

    def encode(self, text):
        return [ord(ch) for ch in text]

    def token_pieces(self, text):
        return [ch.encode() for ch in text]


@lru_cache(maxsize=None)
def tokenization(name: str, special_as_text: bool = True):
    return load_tokenization(TOKENIZERS / name, special_as_text=special_as_text)


def test_definitions_by_hand():
    case = Case("x", "a\nbb\nc\n", "a\nXY\nc\n")  # copies "a" and "c\n"
    result = case_ceiling(case, CharTokens())
    assert result == CaseCeiling("x", 7, (1, 2), True)
    stats = ceiling([case, Case("y", "p\nq", "p\nq")], CharTokens())
    assert stats.as_dict() == {
        "n": 2, "T": 10, "T_copy": 6, "T_gen": 4, "f": 0.6, "K": 3,
        "span_mean": 2.0, "span_p50": 2.0, "span_p95": 2.9, "roundtrip_ok": 2,
    }


def test_joining_newline_is_not_counted():
    # Two copies separated by a gen: the "\n" between ops belongs to no copy.
    case = Case("x", "aaa\nbbb", "aaa\nNEW\nbbb")
    assert case_ceiling(case, CharTokens()).spans == (3, 3)
    assert case_ceiling(case, CharTokens()).T == 11


def test_token_granularity_by_hand():
    case = Case("x", "abcdefgh", "abcdXefgh")
    result = case_ceiling(case, CharTokens(), "tokens", min_span=2)
    assert result == CaseCeiling("x", 9, (4, 4), True)
    assert case_ceiling(case, CharTokens(), "tokens", min_span=5).spans == ()


def test_summarize_empty_and_percentiles():
    stats = summarize([])
    assert stats.n == 0 and stats.f == 0.0 and stats.span_p95 == 0.0
    results = [CaseCeiling(str(k), 100, (k,), True) for k in range(1, 101)]
    stats = summarize(results)
    assert stats.span_p50 == 50.5 and stats.span_p95 == pytest.approx(95.05)
    assert stats.K == 100 and stats.T == 10_000 and stats.T_copy == 5050


def test_failed_round_trip_is_counted_not_hidden(monkeypatch):
    monkeypatch.setattr(ceiling_mod, "resolve", lambda *a, **k: "wrong")
    assert ceiling(CASES[:3], CharTokens()).roundtrip_ok == 0


def test_real_edits_lines():
    tok = tokenization("qwen")
    stats = ceiling(CASES, tok)
    results = [case_ceiling(c, tok) for c in CASES]
    assert stats.n == 60 and stats.roundtrip_ok == 60
    assert stats.T == sum(len(tok.encode(c.gold)) for c in CASES)
    assert stats.T_copy + stats.T_gen == stats.T
    assert stats.K == sum(isinstance(op, Copy) for c in CASES
                          for op in oracle_for(c.doc, c.gold)[0])
    assert stats.T_copy == sum(r.T_copy for r in results)
    # Whole-file edits are copy-heavy: most gold tokens are copied (README: ~95%).
    assert 0.8 < stats.f < 1.0
    table = format_table(stats, "sample")
    assert "| sample | 60 |" in table and f"{stats.T:,}" in table


def test_real_edits_tokens():
    tok = tokenization("qwen")
    stats = ceiling(CASES, tok, granularity="tokens", min_span=8)
    assert stats.roundtrip_ok == 60 and stats.T_copy + stats.T_gen == stats.T
    assert stats.K == sum(isinstance(op, CopyTokens) for c in CASES
                          for op in oracle_for(c.doc, c.gold, "tokens", tok, min_span=8)[0])
    # Same gold tokenization at both granularities.
    assert stats.T == ceiling(CASES, tok).T


def test_special_token_spellings_are_text_by_default():
    text = "x = '<|im_start|>user'\n"
    as_text = tokenization("qwen").encode(text)
    matched = tokenization("qwen", special_as_text=False).encode(text)
    assert len(as_text) > len(matched)
    case = Case("s", "a\n", "a\n" + text)
    result = case_ceiling(case, tokenization("qwen"))
    assert result.T == len(tokenization("qwen").encode(case.gold))
    assert result.T > case_ceiling(case, tokenization("qwen", special_as_text=False)).T


def test_adapter_counts_equal_the_definition_on_the_sample():
    # The definition: tokenizer(text, add_special_tokens=False, split_special_tokens=True).
    # The Qwen adapter drops NFC normalisation, which is the identity on NFC text.
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(TOKENIZERS / "qwen")
    adapter = tokenization("qwen")
    for case in CASES:
        for text in (case.doc, case.gold):
            assert unicodedata.normalize("NFC", text) == text
            assert adapter.encode(text) == hf(text, add_special_tokens=False,
                                              split_special_tokens=True)["input_ids"]


@pytest.mark.parametrize("name", ["qwen", "deepseek-coder", "codellama"])
def test_token_pieces_spell_the_text(name):
    tok = tokenization(name)
    texts = [c.doc for c in CASES[::7]] + ["", " leading space", "  two", "tab\there",
                                           "héllo ⟨ wörld 日本 \U0001f600\n", "a\r\nb\r\n"]
    for text in texts:
        pieces = tok.token_pieces(text)
        assert b"".join(pieces) == text.encode()
        assert len(pieces) == len(tok.encode(text))


@pytest.mark.parametrize("name", ["qwen", "deepseek-coder", "codellama"])
def test_native_token_pieces_spell_the_text(name):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(TOKENIZERS / name)
    native = ceiling_mod.NativeTokenization(hf)
    for text in ["def f(x):\n    return x  # é ⟨\n", " lead", "\U0001f600\n\n", "x", "a<|im_start|>x"]:
        pieces = native.token_pieces(text)
        assert b"".join(pieces) == text.encode()
        # The tokenizer's own ids, special spellings included.
        assert len(pieces) == len(hf(text, add_special_tokens=False)["input_ids"])


def test_unrepresentable_text_is_a_clear_error():
    from transformers import AutoTokenizer

    decomposed = "e\u0301"  # Qwen's normaliser makes it NFC, so its tokens spell "é"
    assert unicodedata.normalize("NFC", decomposed) != decomposed
    native = ceiling_mod.NativeTokenization(AutoTokenizer.from_pretrained(TOKENIZERS / "qwen"))
    with pytest.raises(ValueError, match="spell"):
        native.token_pieces(decomposed)
    with pytest.raises(ValueError, match="case 'nfd'"):
        ceiling([Case("nfd", decomposed, decomposed + "!")], native, granularity="tokens")
    # The adapter encodes without normalising: the same case round-trips.
    stats = ceiling([Case("nfd", decomposed, decomposed + "!")], tokenization("qwen"),
                    granularity="tokens", min_span=1)
    assert stats.roundtrip_ok == 1


def test_adapter_is_preferred_when_available(monkeypatch):
    calls = []

    def fake_get_adapter(tokenizer):
        calls.append(tokenizer)
        return CharTokens()

    monkeypatch.setattr(cad_outlines.adapters, "get_adapter", fake_get_adapter, raising=False)
    sentinel = object()
    assert isinstance(load_tokenization(sentinel), CharTokens) and calls == [sentinel]
    # special_as_text=False is what adapters do not offer: the tokenizer itself serves it.
    qwen = load_tokenization(TOKENIZERS / "qwen", special_as_text=False)
    assert isinstance(qwen, ceiling_mod.NativeTokenization) and len(calls) == 1


def test_missing_tokenizer_folder():
    # The adapters' offline loader: a missing folder is a FileNotFoundError (an OSError,
    # exit 2 on the command line), as for any other missing input file.
    with pytest.raises(FileNotFoundError, match="not found"):
        load_tokenization(TOKENIZERS / "nope")


def test_oracle_for_argument_errors():
    with pytest.raises(ValueError, match="tokenizer"):
        oracle_for("a", "b", "tokens")
    with pytest.raises(ValueError, match="tokenizer"):
        oracle_for("a", "b", cost_aware=True)
    with pytest.raises(ValueError, match="granularity"):
        oracle_for("a", "b", "chars")


def test_model_free_modules_import_no_torch():
    code = ("import sys; import cad_outlines.language.resolver, cad_outlines.language.oracle, "
            "cad_outlines.training.ceiling, cad_outlines.training.corpus, cad_outlines.files, "
            "cad_outlines.language.escape, cad_outlines.language.program, cad_outlines.decoding.drafting; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
