"""Tokenizer facts: one weakly keyed cache per tokenizer object, nothing stored on it."""

from __future__ import annotations

import gc
import pickle
import weakref
from pathlib import Path

import llguidance.hf
import pytest
import torch

from cad_outlines.adapters import facts as facts_mod
from cad_outlines.adapters import get_adapter, load_tokenizer, tokenizer_facts
from cad_outlines.decoding.compiling import _SIDES, compile_grammar, token_table
from cad_outlines.decoding.constraint import ProgramConstraint
from cad_outlines.language.syntax import COPY_CLOSE

TOKENIZERS = Path(__file__).parent / "fixtures" / "tokenizers"
FAMILIES = ["qwen", "deepseek-coder", "codellama"]


def test_building_an_adapter_and_a_constraint_leaves_the_tokenizer_as_it_was():
    tok = load_tokenizer(TOKENIZERS / "qwen")
    before = pickle.dumps(tok)
    attributes = set(vars(tok))
    adapter = get_adapter(tok)
    compiled = compile_grammar(tok, 12)
    ProgramConstraint(compiled)
    after = pickle.dumps(tok)
    assert set(vars(tok)) == attributes
    assert len(after) == len(before), (len(before), len(after))
    # The facts were built and are shared: the adapter's byte table hangs off one object,
    # and the decoding layer's side (llguidance's tokenizer, the token table) is keyed on it.
    facts = tokenizer_facts(tok)
    assert facts.adapters["qwen"] is adapter
    assert adapter._bytes is facts.table
    side = _SIDES[facts]
    assert compiled.llg_tokenizer is side.llg_tokenizer and compiled.table is side.table
    assert compile_grammar(tok, 30).table is compiled.table  # built once per tokenizer


def test_the_same_tokenizer_gets_the_same_facts_and_another_gets_its_own():
    tok = load_tokenizer(TOKENIZERS / "codellama")
    twin = load_tokenizer(TOKENIZERS / "codellama")
    assert tokenizer_facts(tok) is tokenizer_facts(tok)
    assert tokenizer_facts(twin) is not tokenizer_facts(tok)
    # One adapter per family while it is held.
    family, generic = get_adapter(tok), get_adapter(tok, "generic")
    assert family is get_adapter(tok) and generic is get_adapter(tok, "generic")
    assert family is not generic and set(tokenizer_facts(tok).adapters) == {"codellama", "generic"}


def test_the_cache_entry_dies_with_its_tokenizer():
    tok = load_tokenizer(TOKENIZERS / "deepseek-coder")
    adapter = get_adapter(tok)
    compile_grammar(tok, 5)
    facts_ref = weakref.ref(tokenizer_facts(tok))
    tok_ref = weakref.ref(tok)
    entries, sides = len(facts_mod._CACHE), len(_SIDES)
    del adapter  # the adapter refers to its tokenizer, so it must go too
    gc.collect()
    assert tok_ref() is tok and facts_ref() is not None  # alive while the tokenizer is
    del tok
    gc.collect()
    assert tok_ref() is None
    assert facts_ref() is None
    assert len(facts_mod._CACHE) == entries - 1
    assert len(_SIDES) == sides - 1  # the decoding layer's side goes with the facts


def test_an_adapter_nobody_holds_is_rebuilt_from_the_cached_facts():
    tok = load_tokenizer(TOKENIZERS / "qwen")
    first = get_adapter(tok)
    encoder, literal_ids = first._encoder, first.literal_ids
    del first
    gc.collect()
    assert "qwen" not in tokenizer_facts(tok).adapters
    again = get_adapter(tok)
    assert again._encoder is encoder  # the costly part was not rebuilt
    assert again.literal_ids == literal_ids and again.facts is tokenizer_facts(tok).backend


@pytest.mark.parametrize("family", FAMILIES)
def test_token_table_from_the_byte_table_equals_llguidances(family):
    """The constraint's table is derived from the adapters' byte table; llguidance's own
    token bytes (which it reads from the same tokenizer) give the same table."""
    tok = load_tokenizer(TOKENIZERS / family)
    llg = llguidance.hf.from_tokenizer(tok)
    ours = token_table(tokenizer_facts(tok), llg.vocab_size)
    close = COPY_CLOSE.encode()
    pieces = {close[i:j] for i in range(len(close)) for j in range(i + 1, len(close) + 1)
              if j == len(close) or i == 0}
    crossing, closers = [], {}
    for tid in range(llg.vocab_size):
        data = llg.decode_bytes([tid])
        if data in pieces and not llg.is_special_token(tid):
            closers.setdefault(data, tid)
        if 0 <= data.find(b">") < len(data) - 1:
            crossing.append(tid)
    assert ours.vocab_size == llg.vocab_size
    assert torch.equal(ours.crossing, torch.tensor(crossing, dtype=torch.long))
    assert ours.closers == closers and closers
