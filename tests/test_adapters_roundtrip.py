"""The text contract on real documents and generated text, for the three fixture tokenizers.

For a prefix id list ``P`` ending on a token (and character) boundary:
``decode(P + encode_span(t)) == decode(P) + t``, byte for byte.
"""

from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cad_outlines.adapters import get_adapter, load_tokenizer

from testdata import FAMILIES, TOKENIZERS, corpus_records

CORPUS = list(corpus_records())
TEXTS = [(f"{c['id']}:{side}", c[side]) for c in CORPUS for side in ("doc", "gold")]
WINDOWS = (1, 2, 3, 5, 8)
PREFIXES = ('<program><copy lines="1-3"/>', "<program>", "")


@pytest.fixture(scope="module", params=FAMILIES)
def adapter(request):
    return get_adapter(load_tokenizer(TOKENIZERS / request.param))


def test_corpus_sample_is_real_and_varied():
    assert len(CORPUS) >= 30
    assert {c["id"].split("-")[0] for c in CORPUS} == {"commits_python", "commits_c", "commits_prose"}


@pytest.mark.slow
def test_every_line_and_line_window_of_the_corpus_round_trips(adapter):
    checked = 0
    for prefix_text in PREFIXES:
        prefix = adapter.encode(prefix_text)
        assert adapter.decode(prefix) == prefix_text
        for name, text in TEXTS:
            lines = text.split("\n")
            for width in WINDOWS if prefix_text == PREFIXES[0] else (1,):
                for i in range(len(lines) - width + 1):
                    window = lines[i:i + width]
                    layout = adapter.copy_layout(window)
                    ids = adapter.encode_span(layout)
                    assert adapter.copy_ids(window) == ids
                    got = adapter.decode(prefix + ids)
                    assert got == prefix_text + layout, (name, i, width, window)
                    checked += 1
    assert checked > 20_000


def test_every_line_alone_round_trips(adapter):
    prefix = adapter.encode('<program><copy lines="1-3"/><gen>')
    head = adapter.decode(prefix)
    for name, text in TEXTS:
        for i, line in enumerate(text.split("\n")):
            assert adapter.decode(prefix + adapter.encode(line)) == head + line, (name, i)


def test_whole_documents_round_trip_and_pieces_spell_them(adapter):
    for name, text in TEXTS:
        ids = adapter.document_ids(text)
        assert ids == adapter.encode(text)
        assert adapter.decode(ids) == text, name
        pieces = adapter.token_pieces(text)
        assert len(pieces) == len(ids)
        assert b"".join(pieces) == text.encode("utf-8"), name
        assert all(pieces), name  # no empty piece: every position is a real token


def test_spliced_copy_then_program_continues(adapter):
    # The context after a copy is exactly the layout; the next op's "<" follows it.
    text = CORPUS[0]["doc"]
    lines = text.split("\n")
    ids = adapter.encode('<program><copy lines="2-4"/>') + adapter.copy_ids(lines[1:4])
    ids += adapter.literal_ids["<gen>"] + adapter.encode("\nnew\n") + adapter.literal_ids["</gen>"]
    expected = '<program><copy lines="2-4"/>\n' + "\n".join(lines[1:4]) + "\n<gen>\nnew\n</gen>"
    assert adapter.decode(ids) == expected


# -- generated text ----------------------------------------------------------------------

FRAGMENTS = st.sampled_from([
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<s>", "</s>", "<unk>", "<|EOT|>",
    "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<think>", "</gen>", "<copy", '"/>', "<0x0A>",
    " ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", "   \n", "\u00a0", "\u2581", "\u2581\u2581",
    "\U0001F600", "\U0001F469\u200d\U0001F4BB", "e\u0301", "\u00e9", "\ufffd", "\x00", "\u200b",
    "\u00f5", "\u4e2d\u6587", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "def", " return", "1234",
])
TEXT = st.lists(st.one_of(FRAGMENTS, st.text(st.characters(codec="utf-8"), max_size=12)),
                max_size=12).map("".join)
SETTINGS = settings(max_examples=150, derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@SETTINGS
@given(prefix_text=TEXT, text=TEXT)
def test_generated_text_round_trips_after_any_prefix(adapter, prefix_text, text):
    prefix = adapter.encode(prefix_text)
    assert adapter.decode(prefix) == prefix_text
    ids = adapter.encode_span(text)
    assert adapter.decode(prefix + ids) == prefix_text + text
    program_prefix = adapter.encode('<program><copy lines="1-3"/>')
    assert adapter.decode(program_prefix + ids) == '<program><copy lines="1-3"/>' + text


@SETTINGS
@given(text=TEXT)
def test_generated_text_has_no_special_ids_and_pieces_spell_it(adapter, text):
    ids = adapter.encode(text)
    assert not set(ids) & adapter.special_ids
    assert adapter.eos_token_id not in ids
    assert b"".join(adapter.token_pieces(text)) == text.encode("utf-8")


@SETTINGS
@given(lines=st.lists(TEXT.map(lambda t: t.replace("\n", "")), min_size=1, max_size=6))
def test_generated_copy_layout_round_trips(adapter, lines):
    prefix = adapter.encode('<program><copy lines="1-3"/>')
    layout = adapter.copy_layout(lines)
    assert layout == "\n" + "\n".join(lines) + "\n"
    assert adapter.decode(prefix + adapter.copy_ids(lines)) == '<program><copy lines="1-3"/>' + layout


def test_ordinary_documents_tokenize_as_the_tokenizer_itself_does(adapter):
    # The text encoder only drops position artefacts and special-token matching; on
    # documents without special spellings it must give the tokenizer's own ids (after
    # the SentencePiece dummy prefix, which the tokenizer puts at a text's start).
    tok = adapter.tokenizer
    spellings = [t for t in tok.get_added_vocab()]
    prefix = " " if adapter.facts.scheme == "sentencepiece" else ""
    compared = 0
    for name, text in TEXTS:
        if any(s in text for s in spellings):
            continue
        assert adapter.encode(prefix + text) == tok.encode(text, add_special_tokens=False), name
        compared += 1
    assert compared >= 0.9 * len(TEXTS)
