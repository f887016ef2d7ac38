"""The syntax module: the literals, the patterns built from them, the copy unit, and the
rule that no other product module spells the language itself."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cad_outlines.language import syntax
from cad_outlines.tools.diffs import split_keepends
from cad_outlines.language.program import Copy, CopyTokens, parse, render, scan_ops
from cad_outlines.language.resolver import resolve

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = sorted([*(ROOT / "cad_outlines").rglob("*.py"), *(ROOT / "adapters").glob("*.py")])


# -- copy units --------------------------------------------------------------------------


@pytest.mark.parametrize("document, lines", [
    ("a\r\nb\r\n", ["a\r", "b\r", ""]),      # CRLF: "\r" stays in the line
    ("a\nb", ["a", "b"]),                      # no final newline
    ("", [""]),                                # empty document: one empty line
    ("a\rb\n", ["a\rb", ""]),                  # a lone "\r" is text
    ("x\u2028y\x85z\n\n", ["x\u2028y\x85z", "", ""]),
])
def test_split_lines_cases(document, lines):
    assert syntax.split_lines(document) == lines
    assert "\n".join(lines) == document
    assert "".join(split_keepends(document)) == document
    assert resolve([Copy(1, len(lines))], document) == document


@given(st.lists(st.sampled_from(["a", "\n", "\r", "\r\n", "\u2028", "é", " "])).map("".join))
def test_split_lines_joined_give_back_the_document(document):
    lines = syntax.split_lines(document)
    assert "\n".join(lines) == document
    assert all("\n" not in line for line in lines)
    assert "".join(split_keepends(document)) == document
    assert resolve([Copy(1, len(lines))], document) == document


# -- literals and patterns -----------------------------------------------------------------


def test_copy_tag_and_its_patterns_agree():
    for granularity in ("lines", "tokens"):
        tag = syntax.copy_tag(granularity, 12, 345)
        whole = syntax.COPY_TAG_RE.fullmatch(tag)
        assert whole and (whole["start"], whole["end"]) == ("12", "345")
        opener, sep = syntax.COPY_OPEN[granularity], syntax.RANGE_SEPARATOR
        assert tag == f"{opener}12{sep}345{syntax.COPY_CLOSE}"
        assert syntax.COPY_INDICES_RE.match(opener + "1").group("start", "sep", "end") == ("1", None, None)
        assert syntax.COPY_INDICES_RE.match(opener + f"12{sep}3").group("start", "sep", "end") == ("12", sep, "3")
        assert syntax.COPY_END_INDEX_RE.search("x" + opener + f"12{sep}3")["end"] == "3"
        assert syntax.COPY_END_INDEX_RE.search(tag) is None
        closing = [tag[:len(tag) - k] for k in range(1, len(syntax.COPY_CLOSE) + 1)]
        assert all(syntax.COPY_CLOSING_RE.search(text) for text in closing)
        assert not syntax.COPY_CLOSING_RE.search(tag)
        assert not syntax.COPY_CLOSING_RE.search(opener + f"12{sep}")


def test_copy_prefix_tells_a_copy_from_the_other_ops():
    prefix = syntax.COPY_PREFIX
    assert syntax.COPY_START.startswith(prefix)
    assert not syntax.GEN_OPEN.startswith(prefix) and not syntax.PROGRAM_CLOSE.startswith(prefix)
    # The shortest such prefix: one character less is shared with another op.
    assert any(other.startswith(prefix[:-1]) for other in (syntax.GEN_OPEN, syntax.PROGRAM_CLOSE))


def test_reserved_literals_have_the_shape_the_escape_needs():
    for literal, tail in zip(syntax.RESERVED_LITERALS, syntax.RESERVED_TAILS):
        assert literal == syntax.TAG_START + tail and syntax.TAG_START not in tail
    # Every literal that ends or nests an op is reserved.
    for literal in (syntax.GEN_OPEN, syntax.GEN_CLOSE, syntax.PROGRAM_CLOSE, *syntax.COPY_OPEN.values()):
        assert any(literal.startswith(reserved) for reserved in syntax.RESERVED_LITERALS)


def test_scan_and_parse_read_what_the_syntax_writes():
    text = render([Copy(2, 7)])
    assert parse(text) == [Copy(2, 7)]
    ops, end = scan_ops(text.removesuffix(syntax.PROGRAM_CLOSE))
    assert ops == [Copy(2, 7)] and end == len(text) - len(syntax.PROGRAM_CLOSE)
    assert parse(render([CopyTokens(0, 3)]), "tokens") == [CopyTokens(0, 3)]


# -- one module spells the language ----------------------------------------------------------


def _code_strings(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module's code (docstrings left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_no_product_module_but_syntax_spells_a_program_literal():
    literals = {syntax.PROGRAM_OPEN, syntax.PROGRAM_CLOSE, syntax.GEN_OPEN, syntax.GEN_CLOSE,
                syntax.COPY_START, syntax.COPY_CLOSE, *syntax.COPY_OPEN.values()}
    assert len(PRODUCT) > 30
    found = {}
    for path in PRODUCT:
        if path.name == "syntax.py":
            continue
        hits = [(line, text) for line, text in _code_strings(path) if any(lit in text for lit in literals)]
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert not found, found
