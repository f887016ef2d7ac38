"""The fixture tokenizers reproduce llama.cpp's reference vectors.

``vectors/NAME.inp`` holds the test strings, each followed by the separator line
``__ggml_vocab_test__`` (so the file is ``s1 + SEP + s2 + SEP + ... + sN + SEP`` with
``SEP = "\\n__ggml_vocab_test__\\n"``); ``vectors/NAME.out`` holds one line per string:
the ids the original Hugging Face tokenizer gives with ``add_special_tokens=False``,
space-separated (an empty line for the empty string).
"""

from __future__ import annotations


import pytest
from transformers import AutoTokenizer

from testdata import TOKENIZERS

SEP = "\n__ggml_vocab_test__\n"
CASES = {"qwen": "qwen2", "deepseek-coder": "deepseek-coder", "codellama": "llama-spm"}


def read_vectors(name: str) -> list[tuple[str, list[int]]]:
    """The (text, ids) pairs of one vector file pair, parsed exactly."""
    inp = (TOKENIZERS / "vectors" / f"{name}.inp").read_bytes().decode("utf-8")
    out = (TOKENIZERS / "vectors" / f"{name}.out").read_bytes().decode("utf-8")
    texts = inp.split(SEP)
    # The file ends with a separator, which leaves one empty trailing element.
    assert texts[-1] == "", "the .inp file must end with the separator line"
    texts = texts[:-1]
    rows = out.split("\n")
    assert rows[-1] == "", "the .out file must end with a newline"
    rows = rows[:-1]
    assert len(texts) == len(rows), f"{name}: {len(texts)} strings but {len(rows)} id lines"
    return [(t, [int(x) for x in row.split()]) for t, row in zip(texts, rows)]


@pytest.mark.parametrize("family", sorted(CASES))
def test_fixture_tokenizer_matches_llama_cpp_vectors(family):
    tok = AutoTokenizer.from_pretrained(str(TOKENIZERS / family))
    vectors = read_vectors(CASES[family])
    assert len(vectors) >= 40
    failures = [(text, ids, tok.encode(text, add_special_tokens=False))
                for text, ids in vectors if tok.encode(text, add_special_tokens=False) != ids]
    assert not failures, f"{family}: {len(failures)}/{len(vectors)} differ, first: {failures[0]!r}"


def test_vectors_cover_whitespace_and_unicode():
    # The vectors matter because they hold the hard cases; make sure they are parsed in.
    texts = [t for t, _ in read_vectors("qwen2")]
    assert "" in texts and " " in texts and "\n" in texts and "\t" in texts
    assert any(ord(c) > 0xFFFF for t in texts for c in t)  # an astral character (emoji)
