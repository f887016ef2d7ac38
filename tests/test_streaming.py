"""DocumentStream (model-free): chunks of the edited document as the program text grows.

The decode loop feeds it the ops each advance completed and the text of the op being
written; these tests feed it the same way from rendered programs cut at every character
(the finest the loop can produce) and at random places, and check that the chunks
concatenate to ``resolve(ops, document)`` and that gen text arrives before ``</gen>``.
"""

from __future__ import annotations

import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cad_outlines.language import program
from cad_outlines.language.syntax import ESCAPE_CHAR, copy_lines, crlf, open_ended, with_crlf
from cad_outlines.language.program import Copy, CopyTokens, Gen
from cad_outlines.language.resolver import ResolveError, join_gens, resolve
from cad_outlines.decoding.streaming import DocumentStream

_ALPHABET = st.sampled_from(["a", " ", "\n", "\r", "<", "/", ">", "gen", "</gen>", "<copy",
                             "</program>", ESCAPE_CHAR, "é", "😀", "中"])
_TEXT = st.lists(_ALPHABET, max_size=8).map("".join)


def _feed(stream: DocumentStream, text: str, cuts: list[int], granularity: str) -> list[str]:
    """Feed ``text`` (a rendered program) cut at ``cuts`` as the decode loop does."""
    chunks, op_end = [], 0
    for cut in sorted(set(cuts)) + [len(text)]:
        prefix = text[:cut]
        ops, op_end = program.scan_ops(prefix, op_end, granularity)
        chunks.append(stream.feed(ops, prefix[op_end:]))
    chunks.append(stream.close())
    return chunks


@st.composite
def _line_case(draw, carriage_returns: bool = True):
    drop = ("\n", "\r") if not carriage_returns else ("\n",)
    line = _TEXT.map(lambda s: "".join(c for c in s if c not in drop))
    lines = draw(st.lists(line, min_size=1, max_size=6))
    document = "\n".join(lines)  # ends in "\n" when the last line drawn is empty, else open-ended
    n = len(copy_lines(document))
    copies = st.tuples(st.integers(1, n), st.integers(1, n)).map(lambda p: Copy(min(p), max(p)))
    ops = join_gens(draw(st.lists(st.one_of(copies, _TEXT.map(Gen)), max_size=6)))
    return document, ops


@st.composite
def _token_case(draw):
    document = draw(st.lists(_ALPHABET, min_size=1, max_size=10).map("".join))
    data = document.encode("utf-8")
    # Byte-level cuts: a piece may end inside a character, as byte-level BPE pieces do.
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=len(data)))))
    bounds = [0, *[c for c in cuts if 0 < c < len(data)], len(data)]
    pieces = [data[a:b] for a, b in zip(bounds, bounds[1:])]
    t = len(pieces)
    copies = st.tuples(st.integers(0, t - 1), st.integers(0, t - 1)).map(lambda p: CopyTokens(min(p), max(p)))
    ops = join_gens(draw(st.lists(st.one_of(copies, _TEXT.map(Gen)), max_size=6)), "tokens")
    return document, pieces, ops


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_line_case(), data=st.data())
def test_line_program_chunks_concatenate_to_the_resolved_document(case, data):
    document, ops = case
    text = program.render(ops)
    expected = resolve(ops, document)
    def stream():
        return DocumentStream(lines=copy_lines(document), open_end=open_ended(document))

    every_char = _feed(stream(), text, list(range(len(text))), "lines")
    assert "".join(every_char) == expected
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    assert "".join(_feed(stream(), text, cuts, "lines")) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_line_case(carriage_returns=False), data=st.data())
def test_a_crlf_files_chunks_concatenate_to_its_restored_document(case, data):
    # The view of a CRLF file streams its "\n" form with the ends restored chunk by chunk;
    # gen text may hold "\r" (a "\r" just before a chunk's cut waits for the next chunk).
    # The document is drawn without "\r" (stripping it afterwards would change its line
    # count under copies drawn for the original: "\r" alone is a line end).
    lf, ops = case
    assert not crlf(lf) and (crlf(with_crlf(lf)) or "\n" not in lf)
    text = program.render(ops)
    expected = with_crlf(resolve(ops, lf))
    cuts = data.draw(st.one_of(st.just(list(range(len(text)))), st.lists(st.integers(0, len(text)), max_size=8)))
    stream = DocumentStream(lines=copy_lines(lf), open_end=open_ended(lf), crlf=True)
    assert "".join(_feed(stream, text, cuts, "lines")) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_token_case(), data=st.data())
def test_token_program_chunks_concatenate_to_the_resolved_document(case, data):
    document, pieces, ops = case
    text = program.render(ops)
    cuts = data.draw(st.one_of(st.just(list(range(len(text)))), st.lists(st.integers(0, len(text)), max_size=8)))
    got = "".join(_feed(DocumentStream(pieces=pieces), text, cuts, "tokens"))
    try:
        expected = resolve(ops, document, token_pieces=pieces)
    except ResolveError:
        # A copy boundary leaves invalid UTF-8: the loop raises ResolveError at the end;
        # what was streamed before is the clipped (U+FFFD) reading of the same bytes.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = resolve(ops, document, "clipped", token_pieces=pieces)
    assert got == expected


def test_a_character_split_between_two_copies_is_emitted_whole():
    data = "h😀".encode("utf-8")
    pieces = [data[:3], data[3:]]  # the emoji's 4 bytes split 2 + 2
    stream = DocumentStream(pieces=pieces)
    assert stream.feed([CopyTokens(0, 0)], "") == "h"
    assert stream.feed([CopyTokens(1, 1)], "") == "😀"
    assert stream.close() == ""


def test_gen_text_streams_before_its_tag_closes():
    stream = DocumentStream(lines=["one", "two"])
    assert stream.feed([Copy(1, 1)], "") == "one"
    assert stream.feed([], "<gen>\nnew") == "\nnew"          # separator + text; padding dropped
    assert stream.feed([], "<gen>\nnew line\n") == " line"   # the trailing \n is held back
    assert stream.feed([], "<gen>\nnew line\nmore <") == "\nmore "  # "<" may start </gen>
    assert stream.feed([], "<gen>\nnew line\nmore < b" + ESCAPE_CHAR) == "< b"  # lone ⟨ held
    # a run of ⟨ is an escape only before a reserved tail: "⟨⟨" may still become "⟨⟨/gen>"
    assert stream.feed([], "<gen>\nnew line\nmore < b" + ESCAPE_CHAR * 2) == ""
    # "\n" follows: the run is text, released with the op (its padding \n dropped)
    body = "\nnew line\nmore < b" + ESCAPE_CHAR * 2 + "\n"
    assert stream.feed([Gen(body)], "") == ESCAPE_CHAR * 2
    assert stream.feed([Copy(2, 2)], "") == "\ntwo"


def test_escaped_reserved_literal_split_across_feeds():
    stream = DocumentStream(lines=["x"])
    got = stream.feed([], "<gen>a " + ESCAPE_CHAR)
    got += stream.feed([], "<gen>a " + ESCAPE_CHAR + "/gen> b")
    got += stream.feed([Gen("a </gen> b")], "")
    assert got == "a </gen> b"


def test_empty_gen_is_an_empty_line():
    stream = DocumentStream(lines=["a", "b"])
    got = stream.feed([Copy(1, 1)], "") + stream.feed([Gen("")], "") + stream.feed([Copy(2, 2)], "")
    assert got == resolve([Copy(1, 1), Gen(""), Copy(2, 2)], "a\nb") == "a\n\nb"


def test_a_copy_through_the_open_end_holds_its_newline_until_the_program_goes_on():
    lines, ops = ["x", "y", ""], [Copy(1, 3)]  # "x\ny": no final newline, line 3 its open end
    stream = DocumentStream(lines=lines, open_end=True)
    assert stream.feed(ops, "") == "x\ny"
    assert stream.close() == ""  # the program ended there: the file keeps its missing newline
    stream = DocumentStream(lines=lines, open_end=True)
    assert stream.feed(ops, "") + stream.feed([], "<gen>z") == "x\ny\n\nz"
    assert resolve([Copy(1, 3), Gen("z")], "x\ny") == "x\ny\n\nz"
