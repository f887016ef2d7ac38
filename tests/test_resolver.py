"""Resolver semantics: line splitting, gen padding, CRLF, strict errors, clipped repairs."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cad_outlines.language.program import Copy, CopyTokens, Gen, ProgramParseError, parse, render
from cad_outlines.language.resolver import ResolveError, ResolveWarning, gen_body, join_gens, resolve
from cad_outlines.language.syntax import copy_lines, open_ended, split_lines

DOC = "a\nb\nc\nd\n"  # lines: "a", "b", "c", "d", "" (n = 5)


def test_copy_emits_lines_joined_by_newline():
    assert resolve([Copy(2, 3)], DOC) == "b\nc"
    assert resolve([Copy(1, 1), Copy(4, 4)], DOC) == "a\nd"


def test_final_newline_is_the_empty_last_line():
    assert resolve([Copy(1, 5)], DOC) == DOC
    assert resolve([Copy(1, 4)], DOC) == "a\nb\nc\nd"
    assert resolve([Copy(1, 2)], "a\nb") == "a\nb"
    assert resolve([Copy(1, 4), Gen("")], DOC) == DOC  # an empty gen is one empty line


def test_whole_document_round_trips_for_awkward_documents():
    for doc in ["", "\n", "\n\n", "x", "x\r\ny\r\n", "\r\n", "a\rb\n", "a\u2028b\x0cc\n",
                "\ufeffbom\n", "trailing spaces  \n\t\n"]:
        n = len(doc.split("\n"))
        assert resolve([Copy(1, n)], doc) == doc, repr(doc)


def test_crlf_document_keeps_cr_at_line_ends():
    doc = "one\r\ntwo\r\nthree\r\n"
    assert resolve([Copy(1, 1)], doc) == "one\r"
    assert resolve([Copy(1, 1), Gen("\nnew\r\n"), Copy(3, 4)], doc) == "one\r\nnew\r\nthree\r\n"


def test_gen_strips_at_most_one_newline_each_side():
    assert gen_body("\nx\n") == "x"
    assert gen_body("\n\nx\n\n") == "\nx\n"
    assert gen_body("x") == "x"
    assert gen_body("\n") == ""
    assert gen_body("\n\n") == ""
    assert gen_body("\n\n\n") == "\n"
    assert resolve([Copy(1, 1), Gen("\n\nmiddle\n\n"), Copy(2, 2)], DOC) == "a\n\nmiddle\n\nb"
    assert resolve([Gen("\ninner\n\nblank kept\n")], DOC) == "inner\n\nblank kept"


def test_empty_and_gen_only_programs():
    assert resolve([], DOC) == ""
    assert resolve([Gen("x")], "") == "x"
    assert resolve([Gen("")], DOC) == ""
    assert resolve([Gen(""), Gen("")], DOC) == "\n"


def test_resolve_parsed_program_text():
    ops = parse('<program><copy lines="1-2"/><gen>\nB2\n</gen><copy lines="4-5"/></program>')
    assert resolve(ops, DOC) == "a\nb\nB2\nd\n"
    assert resolve(parse(render(ops)), DOC) == "a\nb\nB2\nd\n"


@pytest.mark.parametrize("op, words", [
    (Copy(0, 2), ["outside", "1-5"]),
    (Copy(-1, 2), ["outside"]),
    (Copy(2, 6), ["outside", "1-5"]),
    (Copy(6, 6), ["outside"]),
    (Copy(3, 2), ["start > end"]),
])
def test_strict_errors_name_op_index_and_range(op, words):
    with pytest.raises(ResolveError) as info:
        resolve([Copy(1, 1), Gen("x"), op], DOC)
    err = info.value
    assert err.op_index == 2 and err.op == op
    message = str(err)
    assert message.startswith("op 2 ")
    assert f"{op.start}-{op.end}" in message
    for word in words:
        assert word in message
    assert isinstance(err, ValueError)


def test_strict_is_default_and_rejects_unknown_mode():
    with pytest.raises(ResolveError):
        resolve([Copy(9, 9)], DOC)
    with pytest.raises(ValueError, match="mode"):
        resolve([], DOC, mode="lenient")


def test_non_integer_and_non_op_are_errors_in_both_modes():
    for mode in ("strict", "clipped"):
        with pytest.raises(ResolveError, match="op 0"):
            resolve([Copy(1.0, 2)], DOC, mode=mode)
        with pytest.raises(ResolveError, match="op 1"):
            resolve([Gen("x"), "copy"], DOC, mode=mode)


@pytest.mark.parametrize("op, expected, note", [
    (Copy(0, 2), "a\nb", "clipped to 1-2"),
    (Copy(4, 99), "d\n", "clipped to 4-5"),
    (Copy(3, 2), "b\nc", "swapped"),
    (Copy(9, 1), "a\nb\nc\nd\n", "swapped"),
])
def test_clipped_repairs_and_warns(op, expected, note):
    with pytest.warns(ResolveWarning) as record:
        assert resolve([op], DOC, mode="clipped") == expected
    assert any(note in str(w.message) and "op 0" in str(w.message) for w in record)


def test_clipped_drops_ranges_outside_the_document():
    with pytest.warns(ResolveWarning, match=r"op 1 .*dropped"):
        out = resolve([Copy(1, 1), Copy(7, 9), Copy(2, 2)], DOC, mode="clipped")
    assert out == "a\nb"  # the dropped op takes no separator
    with pytest.warns(ResolveWarning, match="dropped"):
        assert resolve([Copy(-3, 0)], DOC, mode="clipped") == ""


def test_clipped_is_silent_for_valid_programs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve([Copy(1, 5)], DOC, mode="clipped") == DOC


def test_mixed_granularity_is_an_error():
    pieces = [b"a", b"\n"]
    with pytest.raises(ResolveError, match="op 2 .*mix"):
        resolve([Copy(1, 1), Gen("x"), CopyTokens(0, 0)], "a\n", token_pieces=pieces)
    with pytest.raises(ResolveError, match="mix"):
        resolve([CopyTokens(0, 0), Copy(1, 1)], "a\n", mode="clipped", token_pieces=pieces)


# --- token programs ------------------------------------------------------------------

TDOC = "héllo wörld\n"
# Pieces that split "é" (2 bytes) and "ö" across tokens, as byte-level BPE may.
TPIECES = [b"h", b"\xc3", b"\xa9llo", b" w", b"\xc3\xb6", b"rld", b"\n"]


def test_token_copies_concatenate_bytes_without_separator():
    assert b"".join(TPIECES) == TDOC.encode()
    assert resolve([CopyTokens(0, 6)], TDOC, token_pieces=TPIECES) == TDOC
    assert resolve([CopyTokens(0, 2), Gen(" big"), CopyTokens(3, 6)], TDOC,
                   token_pieces=TPIECES) == "héllo big wörld\n"


def test_token_gen_is_verbatim():
    out = resolve([Gen("\nX\n"), CopyTokens(3, 5)], TDOC, token_pieces=TPIECES)
    assert out == "\nX\n wörld"


def test_token_copies_may_split_characters_if_neighbours_complete_them():
    # Tokens 0..1 end inside "é"; copying token 2 right after completes it.
    assert resolve([CopyTokens(0, 1), CopyTokens(2, 2)], TDOC, token_pieces=TPIECES) == "héllo"


def test_token_copy_splitting_a_character_names_the_op():
    with pytest.raises(ResolveError) as info:
        resolve([Gen("x"), CopyTokens(0, 1), Gen("y")], TDOC, token_pieces=TPIECES)
    assert info.value.op_index == 1 and "UTF-8" in str(info.value)
    with pytest.raises(ResolveError) as info:
        resolve([Gen("x"), CopyTokens(2, 3)], TDOC, token_pieces=TPIECES)
    assert info.value.op_index == 1


def test_clipped_token_program_replaces_bad_utf8_and_warns():
    with pytest.warns(ResolveWarning, match="op 0"):
        out = resolve([CopyTokens(0, 1)], TDOC, mode="clipped", token_pieces=TPIECES)
    assert out == "h\ufffd"


def test_token_range_errors_and_clipping():
    with pytest.raises(ResolveError, match=r"op 0 .*0-6"):
        resolve([CopyTokens(0, 7)], TDOC, token_pieces=TPIECES)
    with pytest.warns(ResolveWarning, match="clipped to 3-6"):
        assert resolve([CopyTokens(3, 70)], TDOC, mode="clipped",
                       token_pieces=TPIECES) == " wörld\n"


def test_token_program_needs_pieces_that_spell_the_document():
    with pytest.raises(ResolveError, match="token_pieces"):
        resolve([CopyTokens(0, 1)], TDOC)
    with pytest.raises(ValueError, match="spell"):
        resolve([CopyTokens(0, 1)], TDOC, token_pieces=TPIECES[:-1])


def test_gen_only_program_with_pieces_is_a_token_program():
    # No copy op: token_pieces decides the semantics (no gen padding is stripped).
    assert resolve([Gen("\nx\n")], TDOC, token_pieces=TPIECES) == "\nx\n"
    assert resolve([Gen("\nx\n")], TDOC) == "x"


def test_token_copy_from_an_empty_document():
    with pytest.raises(ResolveError, match="has no tokens"):
        resolve([CopyTokens(0, 0)], "", token_pieces=[])
    with pytest.warns(ResolveWarning, match="dropped"):
        assert resolve([Gen("a"), CopyTokens(0, 0), Gen("b")], "", mode="clipped",
                       token_pieces=[]) == "ab"


# -- the open end: a document without a final newline ------------------------------------


def test_a_document_without_a_final_newline_has_an_open_end():
    doc = "x = 1\ny = 2"
    assert copy_lines(doc) == ["x = 1", "y = 2", ""] and open_ended(doc)
    assert copy_lines("x\n") == ["x", ""] and not open_ended("x\n")
    assert copy_lines("") == [""] and not open_ended("")
    # the form a trained model writes (its last copy runs to the empty last line) keeps the
    # file's missing final newline, whatever the edit before it
    assert resolve([Copy(1, 3)], doc) == doc
    assert resolve([Copy(1, 1), Copy(3, 3)], doc) == "x = 1"
    assert resolve([Copy(1, 2), Gen("z = 3"), Copy(3, 3)], doc) == "x = 1\ny = 2\nz = 3"
    assert resolve([Gen("w = 0"), Copy(1, 3)], doc) == "w = 0\nx = 1\ny = 2"
    # the programs written over its text lines alone mean what they always meant
    assert resolve([Copy(1, 2)], doc) == doc and resolve([Copy(1, 1)], doc) == "x = 1"
    assert resolve([Copy(1, 2), Gen("")], doc) == "x = 1\ny = 2\n"
    # elsewhere the open end is an empty line; past it is out of range
    assert resolve([Copy(3, 3), Copy(1, 1)], doc) == "\nx = 1"
    with pytest.raises(ResolveError, match="4"):
        resolve([Copy(1, 4)], doc)


@given(st.text(alphabet="ab \n\r\t", max_size=30))
def test_copying_every_copy_line_or_every_text_line_gives_the_document_back(doc):
    assert resolve([Copy(1, len(copy_lines(doc)))], doc) == doc
    assert resolve([Copy(1, len(split_lines(doc)))], doc) == doc


_gen_texts = st.text(alphabet="ab\n", max_size=6)
_line_ops = st.lists(st.one_of(st.builds(Gen, _gen_texts),
                               st.builds(lambda i, k: Copy(i, min(i + k, 6)), st.integers(1, 6), st.integers(0, 4))),
                     max_size=7)


@given(_line_ops)
def test_join_gens_keeps_what_a_line_program_writes(ops):
    joined = join_gens(ops)
    assert not any(isinstance(a, Gen) and isinstance(b, Gen) for a, b in zip(joined, joined[1:]))
    assert resolve(joined, "a\nb\n\nc\nd\n") == resolve(ops, "a\nb\n\nc\nd\n")  # 6 lines
    assert parse(render(joined)) == joined  # program text again
    assert join_gens(joined) == joined


@given(st.lists(st.one_of(st.builds(Gen, _gen_texts),
                          st.builds(lambda i, k: CopyTokens(i, min(i + k, 3)), st.integers(0, 3),
                                    st.integers(0, 2))), max_size=7))
def test_join_gens_keeps_what_a_token_program_writes(ops):
    pieces = [b"ab", b"\n", b"c", b"d\n"]
    joined = join_gens(ops, "tokens")
    assert len([op for op in joined if not isinstance(op, Gen)]) == len(
        [op for op in ops if not isinstance(op, Gen)])
    assert (resolve(joined, "ab\ncd\n", token_pieces=pieces)
            == resolve(ops, "ab\ncd\n", token_pieces=pieces))


def test_program_text_holds_no_two_gens_in_a_row():
    with pytest.raises(ValueError, match="ops 1 and 2 are both gens"):
        render([Copy(1, 1), Gen("a"), Gen("b")])
    with pytest.raises(ProgramParseError, match="two gens in a row") as err:
        parse("<program><gen>a</gen><gen>b</gen></program>")
    assert err.value.offset == len("<program><gen>a</gen>")
    # one gen holds both; a copy between them is a program
    assert join_gens([Gen("\na\n"), Gen("")]) == [Gen("\na\n\n")]
    assert parse('<program><gen>a</gen><copy lines="1-1"/><gen>b</gen></program>')[2] == Gen("b")
