"""Oracle programs: exact round trips on real edits and generated ones, lines and tokens."""

from __future__ import annotations

import difflib
import unicodedata
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines.training.ceiling import load_tokenization
from cad_outlines.training.corpus import load_corpus
from cad_outlines.language.oracle import oracle_program, oracle_tokens
from cad_outlines.language.program import Copy, CopyTokens, Gen, parse, render, render_op
from cad_outlines.language.resolver import resolve

from testdata import CORPUS_SAMPLE, TOKENIZERS

CASES = load_corpus(CORPUS_SAMPLE)


@lru_cache(maxsize=None)
def tokenization(name: str):
    return load_tokenization(TOKENIZERS / name)


def check_line_program(ops, doc, gold):
    """Round trip on ops and on rendered text, plus the program's shape."""
    assert resolve(ops, doc) == gold
    assert resolve(parse(render(ops)), doc) == gold
    doc_lines, gold_lines = doc.split("\n"), gold.split("\n")
    for left, right in zip(ops, ops[1:]):
        assert not (isinstance(left, Gen) and isinstance(right, Gen)), "adjacent gens"
    for op in ops:
        if isinstance(op, Copy):
            assert 1 <= op.start <= op.end <= len(doc_lines)
        else:
            assert op.text.startswith("\n") and op.text.endswith("\n") and len(op.text) >= 2


def test_sample_has_all_three_corpora():
    kinds = {case.id.rsplit("-", 1)[0] for case in CASES}
    assert kinds == {"commits_python", "commits_c", "commits_prose"}
    assert len(CASES) == 60


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_line_oracle_round_trips_real_edits(case):
    ops = oracle_program(case.doc, case.gold)
    check_line_program(ops, case.doc, case.gold)
    assert any(isinstance(op, Copy) for op in ops)
    assert any(isinstance(op, Gen) for op in ops) or len(case.gold) < len(case.doc)


def test_line_oracle_shapes():
    assert oracle_program("a\nb\nc\n", "a\nb\nc\n") == [Copy(1, 4)]
    assert oracle_program("a\nb\nc\n", "a\nX\nc\n") == [Copy(1, 1), Gen("\nX\n"), Copy(3, 4)]
    assert oracle_program("a\nb\nc", "a\nc") == [Copy(1, 1), Copy(3, 3)]
    assert oracle_program("a\nb", "a\n\nb") == [Copy(1, 1), Gen("\n\n"), Copy(2, 2)]
    assert oracle_program("x", "") == [Gen("\n\n")]
    assert resolve(oracle_program("", ""), "") == ""


class _BoundedMatcher(difflib.SequenceMatcher):
    """SequenceMatcher that counts the (doc line, gold position) pairs its
    ``find_longest_match`` scans and fails once they pass ``LIMIT``.

    The scan visits, for each doc line of the region, every gold position of that line:
    quadratic on repeated lines. Failing at the count (computed in linear time) keeps
    the test fast even where the oracle would take minutes.
    """

    LIMIT = 2_000_000
    work = 0

    def find_longest_match(self, alo=0, ahi=None, blo=0, bhi=None):
        ahi = len(self.a) if ahi is None else ahi
        bhi = len(self.b) if bhi is None else bhi
        _BoundedMatcher.work += sum(len(self.b2j.get(self.a[i], ())) for i in range(alo, ahi))
        assert _BoundedMatcher.work <= self.LIMIT, "quadratic matching on repeated lines"
        return super().find_longest_match(alo, ahi, blo, bhi)


REPETITIVE = {
    "identical": ("x\n" * 10000, "x\n" * 10000),
    "every 100th line changed": ("x\n" * 10000, "".join("y\n" if k % 100 == 50 else "x\n"
                                                        for k in range(10000))),
    "alternating": ("x\ny\n" * 5000, "x\nz\n" * 5000),
    "tail replaced": ("x\n" * 10000, "x\n" * 9000 + "y\n" * 1000),
}


@pytest.mark.parametrize("name", sorted(REPETITIVE))
def test_line_oracle_is_not_quadratic_on_repeated_lines(monkeypatch, name):
    doc, gold = REPETITIVE[name]
    _BoundedMatcher.work = 0
    monkeypatch.setattr(difflib, "SequenceMatcher", _BoundedMatcher)
    ops = oracle_program(doc, gold)
    check_line_program(ops, doc, gold)
    # Still the best program on these: every gold line that can be copied is copied.
    gen_lines = sum(op.text.count("\n") - 1 for op in ops if isinstance(op, Gen))
    changed = {"identical": 0, "every 100th line changed": 100, "alternating": 5000,
               "tail replaced": 1000}[name]
    assert gen_lines == changed


def test_line_oracle_identical_repeated_lines_is_one_copy():
    assert oracle_program("x\n" * 10000, "x\n" * 10000) == [Copy(1, 10001)]


# Lines built to stress the resolver: CR endings, reserved literals and their escape
# character, non-ASCII, blanks and whitespace-only lines.
LINE_POOL = ["", " ", "\t", "x", "y = 1", "a\r", "\r", "<gen>", "</gen>", "<copy", "</program>",
             "⟨/gen>", "⟨", "⟨⟨", "é", "日本", "\U0001f600", "  return a + b", "</gen></gen>",
             "<|im_start|>user", "<|endoftext|>"]
lines_st = st.lists(st.one_of(st.sampled_from(LINE_POOL), st.text(max_size=6)), max_size=12)


@st.composite
def edit_pairs(draw):
    doc_lines = draw(lines_st)
    gold_lines = list(doc_lines)
    for _ in range(draw(st.integers(0, 4))):
        where = draw(st.integers(0, len(gold_lines)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        new = draw(lines_st)
        if action == "insert":
            gold_lines[where:where] = new
        elif action == "delete":
            del gold_lines[where:where + draw(st.integers(0, 3))]
        else:
            gold_lines[where:where + 1] = new
    # "\n".join of zero lines and of one empty line are both "": both are covered.
    return "\n".join(doc_lines), "\n".join(gold_lines)


@settings(max_examples=400, deadline=None)
@given(edit_pairs())
def test_line_oracle_round_trips_generated_edits(pair):
    doc, gold = pair
    check_line_program(oracle_program(doc, gold), doc, gold)


@settings(max_examples=200, deadline=None)
@given(edit_pairs(), st.booleans())
def test_line_oracle_round_trips_crlf(pair, final_newline):
    doc, gold = (t.replace("\n", "\r\n") + ("\r\n" if final_newline else "") for t in pair)
    check_line_program(oracle_program(doc, gold), doc, gold)


# --- cost-aware oracle --------------------------------------------------------------


def char_cost():
    return (lambda op: len(render_op(op)), len)


@settings(max_examples=300, deadline=None)
@given(edit_pairs())
def test_cost_aware_oracle_round_trips_and_respects_costs(pair):
    doc, gold = pair
    tag_cost, span_cost = char_cost()
    ops = oracle_program(doc, gold, cost=(tag_cost, span_cost))
    check_line_program(ops, doc, gold)
    lines = doc.split("\n")
    for op in ops:
        if isinstance(op, Copy):
            assert tag_cost(op) <= span_cost("\n".join(lines[op.start - 1:op.end]))


def test_cost_aware_oracle_turns_cheap_copies_into_gens():
    doc = "a\n" + "long line number %d\n" * 3 % (1, 2, 3) + "b\n"
    gold = "a\nNEW\n" + "long line number %d\n" * 3 % (1, 2, 3) + "b\nEND\n"
    plain = oracle_program(doc, gold)
    costed = oracle_program(doc, gold, cost=char_cost())
    assert plain[0] == Copy(1, 1) and plain[1] == Gen("\nNEW\n")
    # "a" (1 char) is cheaper than its tag: it merges with the following gen.
    assert costed[0] == Gen("\na\nNEW\n")
    assert costed == [Gen("\na\nNEW\n"), Copy(2, 5), Gen("\nEND\n\n")]
    assert plain[-1] == Copy(6, 6)  # the empty last line: free to generate
    assert resolve(costed, doc) == gold
    assert sum(isinstance(op, Copy) for op in costed) < sum(isinstance(op, Copy) for op in plain)
    # A cost model under which copies are free keeps the plain oracle.
    assert oracle_program(doc, gold, cost=(lambda op: 0, len)) == plain


def test_cost_aware_oracle_with_tokenizer_costs_on_real_edits():
    tok = tokenization("qwen")
    cost = (lambda op: len(tok.encode(render_op(op))), lambda text: len(tok.encode(text)))
    changed = 0
    for case in CASES:
        ops = oracle_program(case.doc, case.gold, cost=cost)
        check_line_program(ops, case.doc, case.gold)
        changed += ops != oracle_program(case.doc, case.gold)
    assert changed > 0  # short copies (blank lines, braces) exist in real edits


# --- token oracle -------------------------------------------------------------------


def assert_token_program(tok, doc, gold, min_span):
    """Build the token oracle program of (doc, gold) and assert that it is right: it
    resolves to the gold, every copy spans >= min_span tokens equal to the gold's at that
    place, every gen spells the gold's bytes there, and the program covers the whole gold.
    Returns the ops."""
    doc_ids, gold_ids = tok.encode(doc), tok.encode(gold)
    doc_pieces, gold_pieces = tok.token_pieces(doc), tok.token_pieces(gold)
    ops = oracle_tokens(doc_ids, gold_ids, min_span=min_span, doc_pieces=doc_pieces,
                        gold_pieces=gold_pieces)
    assert resolve(ops, doc, token_pieces=doc_pieces) == gold
    g = 0  # walk the gold tokens alongside the program
    gold_bytes = b"".join(gold_pieces)
    offsets = [0]
    for piece in gold_pieces:
        offsets.append(offsets[-1] + len(piece))
    for op in ops:
        if isinstance(op, CopyTokens):
            span = op.end - op.start + 1
            assert span >= min_span
            assert doc_ids[op.start:op.end + 1] == gold_ids[g:g + span]
            g += span
        else:
            assert op.text, "empty gen"
            end = offsets.index(offsets[g] + len(op.text.encode()))
            assert gold_bytes[offsets[g]:offsets[end]].decode() == op.text
            g = end
    assert g == len(gold_ids)
    return ops


@pytest.mark.parametrize("min_span", [1, 8])
def test_token_oracle_round_trips_real_edits(min_span):
    tok = tokenization("qwen")
    for case in CASES:
        ops = assert_token_program(tok, case.doc, case.gold, min_span)
        assert any(isinstance(op, CopyTokens) for op in ops), case.id


@settings(max_examples=150, deadline=None)
@given(edit_pairs(), st.sampled_from([1, 2, 4]))
def test_token_oracle_round_trips_generated_edits(pair, min_span):
    # Qwen normalises to NFC: only NFC text has pieces that spell it exactly.
    doc, gold = (unicodedata.normalize("NFC", t) for t in pair)
    assert_token_program(tokenization("qwen"), doc, gold, min_span)


def test_token_oracle_greedy_longest_match_and_reordering():
    doc_pieces = [bytes([97 + k]) for k in range(20)]  # "a".."t"
    gold_pieces = doc_pieces[5:15] + [b"!"] + doc_pieces[0:10]
    vocab = {p: k for k, p in enumerate(doc_pieces + [b"!"])}
    doc_ids = [vocab[p] for p in doc_pieces]
    gold_ids = [vocab[p] for p in gold_pieces]
    ops = oracle_tokens(doc_ids, gold_ids, min_span=3, doc_pieces=doc_pieces,
                        gold_pieces=gold_pieces)
    assert ops == [CopyTokens(5, 14), Gen("!"), CopyTokens(0, 9)]
    # Runs shorter than min_span are generated.
    ops = oracle_tokens(doc_ids, gold_ids, min_span=11, doc_pieces=doc_pieces,
                        gold_pieces=gold_pieces)
    assert ops == [Gen(b"".join(gold_pieces).decode())]


def test_token_oracle_shrinks_copies_to_character_boundaries():
    # "é" is split over two tokens; a copy may neither start nor end between them.
    doc_pieces = [b"ab", b"c", b"\xc3", b"\xa9", b"de", b"f"]
    gold_pieces = [b"X", b"c", b"\xc3", b"\xa9", b"de", b"f", b"Y"]
    vocab: dict[bytes, int] = {}
    doc_ids = [vocab.setdefault(p, len(vocab)) for p in doc_pieces]
    gold_ids = [vocab.setdefault(p, len(vocab)) for p in gold_pieces]
    ops = oracle_tokens(doc_ids, gold_ids, min_span=1, doc_pieces=doc_pieces,
                        gold_pieces=gold_pieces)
    assert ops == [Gen("X"), CopyTokens(1, 5), Gen("Y")]
    # Gold diverges right after the lead byte: the copy shrinks to end before "é".
    gold_pieces = [b"c", b"\xc3", b"\xa8", b"Z"]
    gold_ids = [vocab.setdefault(p, len(vocab)) for p in gold_pieces]
    ops = oracle_tokens(doc_ids, gold_ids, min_span=1, doc_pieces=doc_pieces,
                        gold_pieces=gold_pieces)
    assert ops == [CopyTokens(1, 1), Gen("\u00e8Z")]
    assert resolve(ops, "abcédef", token_pieces=doc_pieces) == "cèZ"
    # A copy may not start on a continuation byte, even where the ids match.
    doc_pieces = [b"\xc3", b"\xa9d", b"ef"]          # "édef"
    gold_pieces = [b"Q\xc3", b"\xa9d", b"ef"]        # "Qédef"
    vocab = {}
    doc_ids = [vocab.setdefault(p, len(vocab)) for p in doc_pieces]
    gold_ids = [vocab.setdefault(p, len(vocab)) for p in gold_pieces]
    ops = oracle_tokens(doc_ids, gold_ids, min_span=1, doc_pieces=doc_pieces,
                        gold_pieces=gold_pieces)
    assert ops == [Gen("Qéd"), CopyTokens(2, 2)]


def test_token_oracle_rejects_bad_arguments():
    with pytest.raises(ValueError, match="min_span"):
        oracle_tokens([1], [1], min_span=0, doc_pieces=[b"a"], gold_pieces=[b"a"])
    with pytest.raises(ValueError, match="piece"):
        oracle_tokens([1, 2], [1], min_span=1, doc_pieces=[b"a"], gold_pieces=[b"a"])
