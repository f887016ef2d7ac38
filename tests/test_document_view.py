"""One document view for every engine: the loop, the vLLM driver and the SFT builder read
the copy units, the copy bounds, the spliced ids and the resolve call from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cad_outlines.adapters import get_adapter, load_tokenizer
from cad_outlines.decoding.document import DocumentView
from cad_outlines.errors import InputError
from cad_outlines.language.program import Copy, CopyTokens, Gen
from cad_outlines.language.resolver import resolve

TOKENIZERS = Path(__file__).parent / "fixtures" / "tokenizers"


@pytest.fixture(scope="module")
def adapter():
    return get_adapter(load_tokenizer(TOKENIZERS / "qwen"))


def test_a_line_view_splices_by_the_layout_rule_and_resolves_like_the_resolver(adapter):
    doc = "def f():\n    return 1\n\nprint(f())\n"
    view = DocumentView(doc, adapter)
    assert view.upper == 5 and view.lines[1] == "    return 1"
    ops = [Copy(1, 1), Gen("    return 2\n"), Copy(3, 5)]
    assert view.spans(ops) == [adapter.copy_ids(view.lines[0:1]), adapter.copy_ids(view.lines[2:5])]
    assert view.resolve(ops) == resolve(ops, doc, "strict") == doc.replace("return 1", "return 2")
    assert view.indices.lo == 1 and view.indices.hi == 5


def test_a_token_view_bounds_copies_to_character_boundaries(adapter):
    doc = "naïve 😀 café 𝔘𝔫𝔦 ꙮ\n"  # rare characters: split over several byte-level tokens
    view = DocumentView(doc, adapter, "tokens")
    assert view.doc_ids == adapter.document_ids(doc) and view.upper == len(view.doc_ids)
    assert b"".join(view.token_pieces) == doc.encode()
    whole = [CopyTokens(0, view.upper - 1)]
    assert view.span_ids(whole[0]) == view.doc_ids and view.resolve(whole) == doc
    # every boundary the view allows is a character boundary
    offsets = [0]
    for piece in view.token_pieces:
        offsets.append(offsets[-1] + len(piece))
    data = doc.encode()
    inside = [t for t in range(view.upper) if (data[offsets[t]] & 0xC0) == 0x80]
    assert inside, "the document must have tokens that start inside a character"
    for t in range(view.upper):
        starts_char = offsets[t] == len(data) or (data[offsets[t]] & 0xC0) != 0x80
        assert view.indices.can_start(str(t), True) == starts_char, t


def test_a_crlf_file_is_read_with_lf_ends_and_written_back_with_crlf(adapter):
    doc = "def f():\r\n    return 1\r\n\r\nprint(f())\r\n"
    view = DocumentView(doc, adapter)
    assert view.crlf and view.text == doc.replace("\r\n", "\n") and "\r" not in "".join(view.lines)
    ops = [Copy(1, 1), Gen("    # one\n    return 2\n"), Copy(3, 5)]
    edited = "def f():\r\n    # one\r\n    return 2\r\n\r\nprint(f())\r\n"
    assert view.resolve(ops) == edited  # the model's new lines get the file's ends too
    writer = view.writer()
    assert writer.feed(ops, "") + writer.close() == edited
    assert view.resolve([Copy(1, view.upper)]) == doc
    assert view.read_form("a\r\nb\r\n") == "a\nb\n" and view.restore("a\nb") == "a\r\nb"
    # a snippet's literal merge is read in LF form and written in the file's CRLF ends
    snippet = "def f():\r\n    return 2\r\n\r\nprint(f())\r\n"
    assert view.merged(snippet) == view.merged(snippet.replace("\r\n", "\n")) == doc.replace("return 1", "return 2")
    assert view.merged("zzz\r\n# ... existing code ...\r\nqqq\r\n") is None  # no line of it is in the file
    assert DocumentView(doc, adapter, "tokens").merged(snippet) is None  # token programs have no merge
    # mixed ends, a lone "\r", and token programs copy the document byte for byte
    for mixed in ("a\r\nb\n", "a\r\rb\r\n", "a\r\n"):
        view = DocumentView(mixed, adapter, "tokens" if mixed == "a\r\n" else "lines")
        assert not view.crlf and view.text == mixed
        assert view.resolve([Copy(1, view.upper)] if view.granularity == "lines"
                            else [CopyTokens(0, view.upper - 1)]) == mixed


@pytest.mark.parametrize("bad, message", [(b"x".decode() + "\ud800", "not valid Unicode"), (None, "must be a str")])
def test_a_bad_document_is_an_input_error(adapter, bad, message):
    with pytest.raises(InputError, match=message):
        DocumentView(bad, adapter)
