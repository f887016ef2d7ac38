"""Every copy the constraint lets through satisfies ``lo <= i <= j <= hi`` at valid boundaries.

The walks below take every token the constraint allows inside a copy tag (every
tokenization path the vocabulary offers, with the grammar's forced runs taken as the decode
loop takes them) and check each completed tag; no state may be left with nothing allowed.
Small documents are walked exhaustively, large ones by hypothesis-chosen random walks.
"""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest

from cad_outlines.language import program, syntax
from cad_outlines.decoding.constraint import CopyIndices, ProgramConstraint
from cad_outlines.decoding.generator import CaDGenerator, ForcedProgramError
from cad_outlines.language.resolver import resolve
from cad_outlines.generate import cad
from testdata import FAMILY_PRESETS


def _lines_doc(n):
    """A document of ``n`` copy lines: ``n - 1`` of text and the empty last line after the
    final newline (``copy_lines`` numbers exactly these)."""
    doc = "\n".join([f"l{k}" for k in range(n - 1)] + [""])
    assert len(syntax.copy_lines(doc)) == n
    return doc


def _start(compiled, indices, adapter, granularity):
    constraint = ProgramConstraint(compiled, indices)
    constraint.advance(adapter.encode(syntax.PROGRAM_OPEN + syntax.COPY_OPEN[granularity]))
    return constraint


def _step(constraint, tid):
    """Advance by ``tid`` and the grammar-forced run after it, as the decode loop does."""
    ops = constraint.advance([tid])
    while not ops and not constraint.done:
        run = constraint.forced()
        if not run:
            break
        ops = constraint.advance(run)
    return ops


def _allowed_ids(constraint):
    mask = constraint.allowed(constraint.compiled.table.vocab_size)
    ids = torch.nonzero(mask).flatten().tolist()
    assert ids, f"nothing allowed after {constraint.text!r}"
    return ids


def walk_all(compiled, indices, adapter, granularity):
    """Every copy op reachable through any path of allowed tokens (exhaustive DFS).

    A state is rebuilt by replaying its path. States are keyed by the program text: the
    matcher reads bytes, so two paths spelling the same text (CodeLlama has a byte
    token next to each ASCII piece) reach the same state, and every allowed token of
    every distinct state is tried.
    """
    reached = set()
    seen = set()
    stack = [[]]
    while stack:
        path = stack.pop()
        constraint = _start(compiled, indices, adapter, granularity)
        ops = []
        for tid in path:
            ops = _step(constraint, tid)
        if constraint.text in seen:
            continue
        seen.add(constraint.text)
        if ops:
            (op,) = ops
            reached.add((op.start, op.end))
            continue
        stack.extend(path + [tid] for tid in _allowed_ids(constraint))
    return reached


def _assert_valid(pairs, indices):
    for i, j in pairs:
        assert indices.lo <= i <= j <= indices.hi, (i, j)


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@pytest.mark.parametrize("n", [1, 2, 9, 10, 12, 21])
def test_line_copies_exhaustive(preset, n, tiny_model):
    """All and only the pairs 1 <= i <= j <= n are reachable, on every tokenization path."""
    model = tiny_model(preset)
    gen = cad(model, _lines_doc(n), draft_tags=False)
    indices = CopyIndices.for_lines(n)
    reached = walk_all(gen.compiled, indices, gen.adapter, "lines")
    assert reached == {(i, j) for i in range(1, n + 1) for j in range(i, n + 1)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preset=st.sampled_from(FAMILY_PRESETS), n=st.integers(10, 100_000), data=st.data())
def test_line_copies_random_walks(tiny_model, preset, n, data):
    """Large documents: a random walk through the allowed tokens always ends in a valid copy."""
    gen = _cached_generator(tiny_model, preset, n)
    indices = CopyIndices.for_lines(n)
    constraint = _start(gen.compiled, indices, gen.adapter, "lines")
    for _ in range(40):
        tid = data.draw(st.sampled_from(_allowed_ids(constraint)))
        ops = _step(constraint, tid)
        if ops:
            _assert_valid([(ops[0].start, ops[0].end)], indices)
            return
    raise AssertionError(f"no copy completed after {constraint.text!r}")


_GENERATORS: dict = {}


def _cached_generator(tiny_model, preset, n):
    key = (preset, n)
    if key not in _GENERATORS:
        # The constraint alone is exercised: a document of n empty lines compiles the
        # same grammar as any other n-line document.
        _GENERATORS.clear()
        _GENERATORS[key] = cad(tiny_model(preset), "\n" * (n - 1), draft_tags=False)
    return _GENERATORS[key]


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@pytest.mark.parametrize("bad", ["2-1", "12-11", "10-9", "9-2", "3-13", "0-1"])
def test_reversed_or_out_of_range_forced_copy_is_refused(preset, bad, tiny_model):
    """The reproducer of issue 10: a reversed copy on a 12-line document."""
    gen = CaDGenerator(tiny_model(preset), _lines_doc(12))
    with pytest.raises(ForcedProgramError):
        gen.run("x", force_program=f'<program><copy lines="{bad}"/></program>')


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_a_gen_after_a_gen_is_refused(preset, tiny_model):
    """One gen holds both: after a gen the mask leaves a copy or the program's close."""
    gen = CaDGenerator(tiny_model(preset), _lines_doc(12))
    with pytest.raises(ForcedProgramError):
        gen.run("x", force_program="<program><gen>\na\n</gen><gen>\nb\n</gen></program>")
    ok = gen.run("x", force_program='<program><gen>\na\n</gen><copy lines="12-12"/><gen>\nb\n</gen></program>')
    assert ok.document.startswith("a\n") and ok.document.endswith("\nb")


NON_ASCII = "héllo 😀 中文\n"


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@pytest.mark.parametrize("document", [NON_ASCII, "naïve café — “quotes” ✓\n中文字符测试 🎉🎉\nend"])
def test_token_copies_never_split_a_character(preset, document, tiny_model):
    """Token granularity: every reachable copy starts and ends on a character boundary,
    and every such copy is reachable."""
    gen = cad(tiny_model(preset), document, granularity="tokens", draft_tags=False)
    pieces = gen.adapter.token_pieces(document)
    offsets = [0]
    for piece in pieces:
        offsets.append(offsets[-1] + len(piece))
    data = document.encode()

    def boundary(offset):
        return offset == len(data) or data[offset] & 0xC0 != 0x80

    valid = {(a, b) for a in range(len(pieces)) for b in range(a, len(pieces))
             if boundary(offsets[a]) and boundary(offsets[b + 1])}
    indices = CopyIndices.for_tokens(pieces)
    reached = walk_all(gen.compiled, indices, gen.adapter, "tokens")
    assert reached == valid
    for a, b in reached:  # each copy resolves on its own (as stream() resolves it)
        resolve([program.CopyTokens(a, b)], document, token_pieces=pieces)


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_token_copy_inside_a_character_is_refused(preset, tiny_model):
    gen = CaDGenerator(tiny_model(preset), NON_ASCII, granularity="tokens")
    pieces = gen.adapter.token_pieces(NON_ASCII)
    splits = [k for k in range(len(pieces) - 1) if pieces[k + 1][0] & 0xC0 == 0x80]
    if not splits:
        pytest.skip(f"{preset} keeps every character of {NON_ASCII!r} in one token")
    k = splits[0]
    with pytest.raises(ForcedProgramError):
        gen.run("x", force_program=f'<program><copy tokens="0-{k}"/><copy tokens="{k + 1}-'
                                   f'{len(pieces) - 1}"/></program>')


def test_copy_indices_rules():
    """The predicate itself, on a token document whose token 1 ends inside a character."""
    indices = CopyIndices(0, 12, starts=[True, True, False] + [True] * 10,
                          ends=[True, False] + [True] * 11)
    assert indices.allows('<copy tokens="1')          # 1, 10, 11, 12 are starts
    assert not indices.allows('<copy tokens="2-')     # 2 is not a start
    assert not indices.allows('<copy tokens="0-1"')   # 1 is not an end
    assert indices.allows('<copy tokens="0-1')        # ... but 10..12 are
    assert not indices.allows('<copy tokens="5-3"')
    assert not indices.allows('<copy tokens="5-4')    # 4 cannot grow: 40 > 12
    assert indices.allows('<copy tokens="5-1')        # 10..12 >= 5
    assert not indices.allows('<copy tokens="5-12"/><')  # runs past the tag's end
    assert indices.allows('<copy tokens="5-12"/>')


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@pytest.mark.parametrize("typed, follows", [
    ('<copy lines="6', syntax.RANGE_SEPARATOR),      # 60.. > 38: the start is complete
    ('<copy lines="1-6', syntax.COPY_CLOSE),        # likewise the end
    ('<copy lines="30-3', None),                     # 3 < 30: must grow (30..38)
    ('<copy lines="30-38', syntax.COPY_CLOSE),
    ('<copy lines="2', None),                        # 2 or 20..29: may grow or close
])
def test_an_index_that_cannot_grow_forces_what_follows(preset, typed, follows, tiny_model):
    """The grammar alone would leave the choice open (it bounds indices by the document,
    not by each other): without this the separator or close would cost a decode step."""
    gen = cad(tiny_model(preset), "\n".join(f"l{k}" for k in range(38)), draft_tags=False)
    constraint = ProgramConstraint(gen.compiled, gen.view.indices)
    constraint.advance(gen.adapter.encode(syntax.PROGRAM_OPEN + typed))
    assert constraint.pending == typed
    run = constraint.forced()
    if follows is None:
        assert run == [] or not any(ch.isdigit() for ch in constraint._piece(run[0]))
        return
    assert run, f"nothing forced after {typed!r}"
    piece = b"".join(constraint.piece_bytes(t) for t in run).decode()
    assert follows.startswith(piece)
    # the forced token is one the mask allows, and taking it (and what the grammar then
    # forces) completes the separator or the tag
    assert bool(constraint.allowed(constraint.compiled.table.vocab_size)[run[0]])
    _step(constraint, run[0])
    assert constraint.pending.endswith(follows) or constraint.ops
