"""grammar.program_regex: one regex with the language of the specialised grammar."""

from __future__ import annotations

import re
from functools import lru_cache

import lark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from interegular import parse_pattern

from cad_outlines.language.grammar import load_grammar, program_regex, specialize
from cad_outlines.language.program import Copy, CopyTokens, Gen, ProgramParseError, parse, render_op
from cad_outlines.language.syntax import PROGRAM_CLOSE, PROGRAM_OPEN

SIZES = [1, 9, 10, 50, 137, 5000]
# Characters that make up the program's structure, so mutations hit the interesting cases.
MUTATION_CHARS = '<>/"=-0123456789 abcglnoprstxy\n\u27e8'


@lru_cache(maxsize=None)
def compiled(n: int, granularity: str) -> re.Pattern:
    return re.compile(program_regex(n, granularity))


@lru_cache(maxsize=None)
def lark_parser(n: int, granularity: str) -> lark.Lark:
    return lark.Lark(specialize(load_grammar(granularity), n, granularity), parser="lalr")


def grammar_accepts(text: str, n: int, granularity: str) -> bool:
    """The specialised grammar's verdict (lark LALR, as program.parse uses)."""
    try:
        lark_parser(n, granularity).parse(text)
    except lark.exceptions.LarkError:
        return False
    return True


def parse_accepts(text: str, granularity: str) -> bool:
    """program.parse's verdict (the generic grammar: any index >= 1 / >= 0)."""
    try:
        parse(text, granularity)
    except ProgramParseError:
        return False
    return True


def in_bounds(text: str, n: int, granularity: str) -> bool:
    lo, hi = (1, n) if granularity == "lines" else (0, n - 1)
    return all(lo <= int(v) <= hi for m in re.finditer(r'<copy \w+="(\d+)-(\d+)"/>', text)
               for v in m.groups())


def assert_agree(text: str, n: int, granularity: str) -> bool:
    by_regex = compiled(n, granularity).fullmatch(text) is not None
    assert by_regex == grammar_accepts(text, n, granularity), (n, text)
    # program.parse (unbounded indices) + the document's bounds: the same verdict.
    assert by_regex == (parse_accepts(text, granularity) and in_bounds(text, n, granularity)), (n, text)
    return by_regex


# Gen texts built from pieces that collide with the reserved literals (render escapes them).
gen_text = st.lists(st.sampled_from(["<", ">", "/", "gen", "copy", "program", "\u27e8", "\n", "a", " ",
                                     "<gen>", "</gen>", "</program>", "<copy", "</copy>"]),
                    max_size=12).map("".join)


@st.composite
def programs(draw, granularity: str):
    n = draw(st.sampled_from(SIZES))
    index = st.one_of(st.integers(0, n + 2), st.integers(0, 10 * n + 10))
    copy_cls = Copy if granularity == "lines" else CopyTokens
    ops = draw(st.lists(st.one_of(st.builds(copy_cls, index, index),
                                  st.builds(Gen, gen_text)),
                        max_size=5))
    # Rendered op by op, so two gens in a row (not a program) come up too.
    return n, PROGRAM_OPEN + "".join(render_op(op) for op in ops) + PROGRAM_CLOSE


@st.composite
def mutated(draw, granularity: str):
    n, text = draw(programs(granularity))
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "truncate"]))
        char = draw(st.sampled_from(MUTATION_CHARS))
        if kind == "insert":
            text = text[:pos] + char + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + 1:]
        elif kind == "replace":
            text = text[:pos] + char + text[pos + 1:]
        else:
            text = text[:pos]
    return n, text


@pytest.mark.parametrize("granularity", ["lines", "tokens"])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_regex_agrees_with_parser_on_rendered_programs(granularity, data):
    n, text = data.draw(programs(granularity))
    assert_agree(text, n, granularity)


@pytest.mark.parametrize("granularity", ["lines", "tokens"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_regex_agrees_with_parser_on_mutated_programs(granularity, data):
    n, text = data.draw(mutated(granularity))
    assert_agree(text, n, granularity)


@pytest.mark.parametrize("n", SIZES)
def test_hand_picked_programs(n):
    ok = [f'<program><copy lines="1-{n}"/></program>', f'<program><copy lines="{n}-1"/></program>',
          "<program></program>", f'<program><gen></gen><copy lines="1-1"/><copy lines="{n}-{n}"/><gen>a<b </gen></program>',
          "<program><gen>\u27e8/gen> <ge <cop </co </progra</gen></program>"]
    bad = [f'<program><copy lines="0-{n}"/></program>', f'<program><copy lines="1-{n + 1}"/></program>',
           '<program><copy lines="01-1"/></program>', "<program><gen>a</gen>",
           "<program><gen><gen></gen></program>", "<program><gen></program></gen></program>",
           "<program><gen><copy</gen></program>", '<program><copy lines="1-1"></program>',
           "<program> </program>", "<program></program>\n", "<program><gen></gen><gen>a<b </gen></program>",
           f'<program><copy lines="1-1"/><gen>a</gen><gen>b</gen></program>']
    assert [assert_agree(t, n, "lines") for t in ok] == [True] * len(ok)
    assert [assert_agree(t, n, "lines") for t in bad] == [False] * len(bad)


def test_no_copy_op_without_lines_or_tokens():
    for granularity, copy in [("lines", '<copy lines="1-1"/>'), ("tokens", '<copy tokens="0-0"/>')]:
        rx = re.compile(program_regex(0, granularity))
        assert "<copy" not in rx.pattern
        assert rx.fullmatch("<program><gen>x</gen></program>")
        assert not rx.fullmatch(f"<program>{copy}</program>")
    assert re.fullmatch(program_regex(1, "tokens"), '<program><copy tokens="0-0"/></program>')


def test_plain_regex_without_lark_escapes():
    rx = program_regex(50)
    assert r"\/" not in rx and "</gen>" in rx and "</program>" in rx


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="granularity"):
        program_regex(5, "words")
    with pytest.raises(ValueError, match="n must be >= 0"):
        program_regex(-1)


def fsm(pattern: str):
    return parse_pattern(pattern).to_fsm()


def from_lark_terminals(n: int, granularity: str) -> str:
    """The program language assembled from the shipped grammar's own terminals."""
    parser = lark_parser(n, granularity)
    terms = {t.name: t.pattern for t in parser.terminals}
    index = terms["LINE" if granularity == "lines" else "TOKEN"].to_regexp()
    gen = terms["GEN"].to_regexp()
    copy = f'<copy {granularity}="(?:{index})-(?:{index})"/>'
    return f"<program>(?:{gen})?(?:{copy}(?:{gen})?)*</program>"


@pytest.mark.parametrize("n,granularity", [(1, "lines"), (10, "lines"), (137, "lines"), (12, "tokens")])
def test_interegular_equivalence_with_the_grammar_terminals(n, granularity):
    ours = fsm(program_regex(n, granularity))
    assert ours.equivalent(fsm(from_lark_terminals(n, granularity)))
    # The check has teeth: the language of a neighbouring document size differs.
    assert not ours.equivalent(fsm(program_regex(n + 1, granularity)))


def test_outlines_core_builds_an_index_and_walks_a_program():
    # Rust's regex syntax must accept the pattern (no lark escapes, no look-around).
    from outlines_core import Guide, Index, Vocabulary

    program = '<program><copy lines="3-12"/><gen>x <y\n</gen></program>'
    pieces = sorted(set(program) | set("0123456789"))
    vocab = Vocabulary(len(pieces), {p: [i] for i, p in enumerate(pieces)})
    guide = Guide(Index(program_regex(12), vocab))
    for ch in program:
        assert pieces.index(ch) in guide.get_tokens(), (ch, guide.get_state())
        guide.advance(pieces.index(ch), return_tokens=False)
    assert guide.is_finished()
    # Line 13 is out of range for a 12-line document.
    guide = Guide(Index(program_regex(12), vocab))
    for ch in '<program><copy lines="1':
        guide.advance(pieces.index(ch), return_tokens=False)
    assert pieces.index("2") in guide.get_tokens() and pieces.index("3") not in guide.get_tokens()


@pytest.mark.parametrize("granularity", ["lines", "tokens"])
def test_huge_index_is_a_parse_error(granularity):
    """An index over Python's int-digit limit (4,300) is a ProgramParseError at its offset."""
    head = f'<program><copy {granularity}="1-'
    text = head + "9" * 5000 + '"/></program>'
    with pytest.raises(ProgramParseError) as err:
        parse(text, granularity)
    assert err.value.offset == len(head) and "5000 digits" in str(err.value)
