"""The shipped grammar files: generated GEN body, its language, both parsers, bounds."""

from __future__ import annotations

import re
from functools import lru_cache

import lark
import llguidance
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from interegular import parse_pattern

from cad_outlines.language._body_regex import body_regex
from cad_outlines.language.grammar import (GRAMMAR_FILES, load_grammar, range_regex,
                                           render_grammar, specialize)
from cad_outlines.language.syntax import RESERVED_LITERALS

from testdata import ROOT, TOKENIZERS

GEN_LINE = re.compile(r"^GEN: /(.*)/$", re.MULTILINE)
GEN_OPEN, GEN_CLOSE = "<gen>", r"<\/gen>"
ANY = r"[\s\S]"  # interegular's "." excludes "\n"; gen bodies may hold newlines
GRANULARITIES = sorted(GRAMMAR_FILES)


def stored_body(granularity: str) -> str:
    [gen] = GEN_LINE.findall(load_grammar(granularity))
    assert gen.startswith(GEN_OPEN) and gen.endswith(GEN_CLOSE)
    return gen[len(GEN_OPEN):-len(GEN_CLOSE)]


@lru_cache(maxsize=None)
def fsm(pattern: str):
    return parse_pattern(pattern).to_fsm()


def literal_fsm(literals) -> "object":
    alternatives = "|".join(re.escape(lit) for lit in literals)
    return fsm(f"{ANY}*(?:{alternatives}){ANY}*")


def test_grammar_files_are_the_packaged_ones():
    root = ROOT / "grammars"
    for granularity, name in GRAMMAR_FILES.items():
        assert load_grammar(granularity) == (root / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_grammar_files_are_rendered_from_the_syntax(granularity):
    assert load_grammar(granularity) == render_grammar(granularity), (
        "grammars/*.lark differ from cad_outlines.language.syntax: run "
        "python -c 'from cad_outlines.language.grammar import write_grammars; write_grammars(\"grammars\")'")


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_stored_gen_regex_is_the_generated_one(granularity):
    assert stored_body(granularity) == body_regex(RESERVED_LITERALS)


@pytest.mark.parametrize("literal", RESERVED_LITERALS)
def test_body_language_contains_no_literal(literal):
    body = fsm(stored_body("lines"))
    assert (body & literal_fsm([literal])).empty()


def test_body_language_is_exactly_the_literal_free_strings():
    body = fsm(stored_body("lines"))
    assert body.equivalent(literal_fsm(RESERVED_LITERALS).everythingbut())
    # The check has teeth: dropping one literal from the generator changes the language.
    weaker = fsm(body_regex(RESERVED_LITERALS[:-1]))
    assert not weaker.equivalent(literal_fsm(RESERVED_LITERALS).everythingbut())
    assert "a</program>b" in weaker and "a</program>b" not in body


def test_body_regex_rejects_malformed_literals():
    with pytest.raises(ValueError, match="must start with '<'"):
        body_regex(["gen>"])
    with pytest.raises(ValueError):
        body_regex(["<a<b"])


def lark_parser(text: str) -> lark.Lark:
    return lark.Lark(text, parser="lalr")


def llguidance_error(text: str) -> str:
    return llguidance.LLMatcher.validate_grammar(llguidance.grammar_from("lark", text))


@pytest.mark.parametrize("granularity", GRANULARITIES)
@pytest.mark.parametrize("upper", [None, 0, 1, 7, 5000, 100000])
def test_both_parsers_accept_the_grammars(granularity, upper):
    text = load_grammar(granularity)
    if upper is not None:
        text = specialize(text, upper, granularity)
    lark_parser(text)
    assert llguidance_error(text) == ""


def test_llguidance_reports_a_broken_grammar():
    assert "regex" in llguidance_error(load_grammar("lines").replace("GEN: /<gen>", "GEN: /[<gen>"))


def program(kind: str, a: int, b: int) -> str:
    return f'<program><copy {kind}="{a}-{b}"/><gen>x</gen></program>'


@pytest.mark.parametrize("n", [1, 5, 9, 10, 99, 5000, 100000])
def test_specialized_line_grammar_bounds_indices(n):
    parser = lark_parser(specialize(load_grammar("lines"), n, "lines"))
    parser.parse(program("lines", 1, n))
    parser.parse(program("lines", n, n))
    parser.parse(program("lines", n, 1))  # i <= j is left to the constraint
    for a, b in [(0, 1), (1, n + 1), (n + 1, n + 1), (1, 10 * n), (0, 0)]:
        with pytest.raises(lark.exceptions.LarkError):
            parser.parse(program("lines", a, b))
    with pytest.raises(lark.exceptions.LarkError):
        parser.parse(program("lines", 1, 1).replace('"1-1"', '"01-1"'))


@pytest.mark.parametrize("t", [1, 2, 10, 11, 5000, 100000])
def test_specialized_token_grammar_bounds_indices(t):
    parser = lark_parser(specialize(load_grammar("tokens"), t, "tokens"))
    parser.parse(program("tokens", 0, t - 1))
    for a, b in [(0, t), (t, t)]:
        with pytest.raises(lark.exceptions.LarkError):
            parser.parse(program("tokens", a, b))
    with pytest.raises(lark.exceptions.LarkError):
        parser.parse(program("tokens", 0, 0).replace('"0-0"', '"00-0"'))


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_nothing_to_copy_leaves_gen_only_programs(granularity):
    parser = lark_parser(specialize(load_grammar(granularity), 0, granularity))
    parser.parse("<program><gen>x</gen></program>")
    kind = "lines" if granularity == "lines" else "tokens"
    for a in (0, 1):
        with pytest.raises(lark.exceptions.LarkError):
            parser.parse(program(kind, a, a))


def test_llguidance_enforces_bounds_and_escapes_token_by_token():
    from llguidance.hf import from_tokenizer
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZERS / "deepseek-coder")
    ll_tokenizer = from_tokenizer(tokenizer)
    grammar = llguidance.grammar_from("lark", specialize(load_grammar("lines"), 5000))

    def accepts(text: str) -> bool:
        matcher = llguidance.LLMatcher(ll_tokenizer, grammar)
        ids = tokenizer.encode(text, add_special_tokens=False)
        return (matcher.validate_tokens(ids) == len(ids) and matcher.consume_tokens(ids)
                and matcher.is_accepting())

    assert accepts('<program><copy lines="1-5000"/><gen>a ⟨/gen> <ge</gen></program>')
    assert not accepts('<program><copy lines="0-1"/></program>')
    assert not accepts('<program><copy lines="5001-5001"/></program>')
    assert not accepts("<program><gen>a </gen> b</gen></program>")


@settings(max_examples=500, deadline=None)
@given(st.integers(0, 10**7), st.integers(0, 10**7), st.data())
def test_range_regex_matches_exactly_the_range(lo, width, data):
    hi = lo + width // data.draw(st.sampled_from([1, 10, 1000, 10**6]))
    pattern = re.compile(range_regex(lo, hi))
    near = [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 10 ** len(str(hi)), 10 ** len(str(lo)) - 1]
    samples = near + data.draw(st.lists(st.integers(0, 2 * hi + 10), max_size=20))
    for x in samples:
        if x < 0:
            continue
        assert bool(pattern.fullmatch(str(x))) == (lo <= x <= hi), (lo, hi, x)
        # Lexers like lark's take the first alternative that matches (re.match), so the
        # in-range numbers must be matched whole that way too.
        first = pattern.match(str(x))
        assert (first is not None and first.end() == len(str(x))) == (lo <= x <= hi)
        if x > 0:
            assert not pattern.fullmatch("0" + str(x))  # no leading zeros


def test_range_regex_rejects_bad_bounds():
    with pytest.raises(ValueError):
        range_regex(5, 4)
    with pytest.raises(ValueError):
        range_regex(-1, 4)
    assert len(range_regex(1, 100000)) < 100
