"""CaDGenerator on the three tokenizer families (tiny random-weight presets)."""

from __future__ import annotations


import pytest
import torch

from cad_outlines.language import program, syntax
from cad_outlines.decoding.generator import (CaDGenerator, ForcedProgramError,
                                             IncompleteProgramError)
from cad_outlines.language.oracle import oracle_program, oracle_tokens
from cad_outlines.language.program import Copy, Gen
from cad_outlines.language.resolver import resolve
from cad_outlines.generate import cad

from testdata import FAMILY_PRESETS, _DOCS, _cases, _structure_bias


# (c) teacher forcing the oracle program reproduces gold byte-exactly -----------------

@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_forced_oracle_reproduces_gold(preset, tiny_model):
    model = tiny_model(preset)
    for case in _cases(2):
        ops = oracle_program(case["doc"], case["gold"])
        result = CaDGenerator(model, case["doc"]).run("apply the change", force_program=ops)
        assert result.complete
        assert result.ops == ops
        assert result.document == case["gold"], case["id"]
        assert program.parse(result.program) == ops


# (e) splice / fast-forward switches do not change the edited document ------------------

@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_switches_keep_the_document(preset, tiny_model):
    model = tiny_model(preset)
    case = _cases(1)[1]
    ops = oracle_program(case["doc"], case["gold"])
    results = {kw: cad(model, case["doc"], splice=kw[0], fast_forward=kw[1])
               .run("edit", force_program=ops) for kw in [(True, True), (False, True), (True, False), (False, False)]}
    docs = {r.document for r in results.values()}
    assert docs == {case["gold"]}
    default, no_splice = results[(True, True)].stats, results[(False, True)].stats
    assert default.copied_tokens > 0 and no_splice.copied_tokens == 0
    assert default.splices == sum(isinstance(op, Copy) for op in ops)
    no_ff = results[(True, False)].stats
    assert no_ff.forced_tokens == 0 and default.forced_tokens > 0
    # Fast-forward turns decode steps into forced tokens; the program is the same.
    assert no_ff.decoded_tokens == default.decoded_tokens + default.forced_tokens


# (d) the forward-pass count equals what the stats claim -------------------------------

@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_forward_pass_count_matches_stats(preset, tiny_model):
    model = tiny_model(preset)
    case = _cases(1)[0]
    ops = oracle_program(case["doc"], case["gold"])
    for draft_tags in (False, True):
        calls: list[int] = []
        handle = model.model.register_forward_hook(lambda mod, args, kwargs_out: calls.append(1))
        gen = cad(model, case["doc"], draft_tags=draft_tags)
        try:
            result = gen.run("edit", force_program=ops)
        finally:
            handle.remove()
        # a tree after a long prefill is one forward of the loop in two model calls (TREE_SPLIT);
        # a long splice one in several (SPLICE_CHUNK)
        assert len(calls) == result.stats.forward_passes + gen.runner.tree_splits + gen.runner.chunk_calls
        # One forward per decoded token, except the last (</program> needs no logits), + prefill;
        # a step whose tokens a draft already put in the cache needs none (forwards_saved).
        assert result.stats.forward_passes == result.stats.decoded_tokens - result.stats.forwards_saved
        assert (result.stats.forwards_saved > 0) == draft_tags


# (b) a one-forward splice equals feeding the same tokens one at a time -----------------

@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_splice_equivalence(preset, tiny_model):
    model = tiny_model(preset)
    gen = CaDGenerator(model, "alpha\n  beta = 1\n\tgamma ✓\n")
    prompt = gen.adapter.prompt_ids(gen.document, "edit", "lines")
    tag = gen.adapter.encode('<program><copy lines="1-3"/>')
    span = gen.adapter.copy_ids(gen.document.split("\n")[:3])
    runner = gen.runner
    one, many = runner.new_cache(), runner.new_cache()
    runner.forward(prompt + tag, one)
    runner.forward(prompt + tag, many)
    spliced = runner.forward(span, one)
    for tid in span:
        stepped = runner.forward([tid], many)
    assert one.get_seq_length() == many.get_seq_length() == len(prompt) + len(tag) + len(span)
    assert torch.max(torch.abs(spliced - stepped)).item() <= 1e-4


# (a) sampled programs always parse and resolve --------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_sampled_programs_parse_and_resolve(preset, tiny_model):
    model = tiny_model(preset)
    complete = with_gen = 0
    gens = {doc: cad(model, doc, temperature=1.0, max_new_tokens=48, seed=None)
            for doc in _DOCS}
    handle = _structure_bias(model, next(iter(gens.values())).adapter)
    try:
        for i in range(105):
            doc = _DOCS[i % len(_DOCS)]
            gen = gens[doc]
            result = gen.run("rewrite it", seed=i)
            n = gen.view.upper  # the lines and, without a final newline, the open end
            for op in result.ops:
                if isinstance(op, Copy):
                    assert 1 <= op.start <= op.end <= n, (result.program, op)
            if result.complete:
                complete += 1
                with_gen += any(isinstance(op, Gen) for op in result.ops)
                assert program.parse(result.program) == result.ops
                # the model's text (a CRLF file's "\n" form) resolved, in the file's line ends
                assert result.document == gen.view.restore(resolve(result.ops, gen.view.text, "strict"))
                assert gen.view.crlf == ("\r\n" in doc and "\n" not in doc.replace("\r\n", ""))
            else:
                assert result.document is None and result.stats.stopped_early
                # The complete ops of an unfinished program still resolve strictly.
                resolve(result.ops, doc, "strict")
    finally:
        handle.remove()
    # Random weights write gen bodies of random tokens that rarely close within budget;
    # every program, finished or not, was checked above.
    assert complete >= 40, f"only {complete} of 105 sampled programs finished"
    assert with_gen >= 1, "no finished program held a gen op"


def test_same_seed_same_program(tiny_model):
    model = tiny_model("tiny-qwen")
    gen = cad(model, _DOCS[0], temperature=1.0, seed=7, max_new_tokens=40)
    assert gen.run("x").program == gen.run("x").program


# constraint: index order, bounds, big documents ------------------------------------

def test_end_before_start_is_rejected(tiny_model):
    model = tiny_model("tiny-qwen")
    gen = CaDGenerator(model, "a\nb\nc\nd\n")
    with pytest.raises(ForcedProgramError):
        gen.run("x", force_program='<program><copy lines="3-2"/></program>')
    with pytest.raises(ForcedProgramError):
        gen.run("x", force_program='<program><copy lines="1-6"/></program>')
    assert gen.run("x", force_program='<program><copy lines="2-5"/></program>').document == "b\nc\nd\n"


@pytest.mark.parametrize("bad", ["5-3", "12-3", "25-2"])
def test_end_below_start_cannot_close_while_it_could_still_grow(bad, tiny_model):
    # With 31 lines an end index "3" may still become "30": the digit is allowed, but
    # the tag must not close on it (the close pieces were once added back regardless).
    gen = CaDGenerator(tiny_model("tiny-qwen"), "".join(f"v{i}\n" for i in range(1, 31)))
    with pytest.raises(ForcedProgramError):
        gen.run("x", force_program=f'<program><copy lines="{bad}"/></program>')
    assert gen.run("x", force_program='<program><copy lines="3-30"/></program>').complete


@pytest.mark.parametrize("preset", ["tiny-qwen", "tiny-codellama"])
def test_large_document_bounds(preset, tiny_model):
    """A 6,000-line document: the constraint compiles and bounds every index.

    The constraint is driven directly (no forward passes: a 6,000-line prompt would
    dominate the test's time without testing anything more).
    """
    from cad_outlines.decoding.constraint import ProgramConstraint

    model = tiny_model(preset)
    lines = [f"row {i}" for i in range(1, 6000)]  # and the empty 6,000th after the final newline
    gen = CaDGenerator(model, "\n".join(lines) + "\n")
    assert gen.view.upper == 6000
    assert gen.compiled.compile_seconds < 5.0

    def accepts(text: str) -> bool:
        # Tokenized per segment ending at a copy tag's end, as forced programs are.
        constraint = ProgramConstraint(gen.compiled)
        cuts = [0] + [m.end() for m in syntax.COPY_TAG_RE.finditer(text)] + [len(text)]
        ids = [t for a, b in zip(cuts, cuts[1:]) if b > a for t in gen.adapter.encode(text[a:b])]
        for tid in ids:
            if not bool(constraint.allowed(gen.runner.vocab_size)[tid]):
                return False
            constraint.advance([tid])
        return True

    ops = [Copy(1234, 5678), Gen("\nnew\n"), Copy(5999, 6000)]
    assert accepts(program.render(ops))
    for bad in ['<program><copy lines="5999-5998"', '<program><copy lines="1-6001"',
                '<program><copy lines="0-', '<program><copy lines="6001-']:
        assert not accepts(bad), bad
    # The mask, mid end-index: after "5999-" only 5999..6000 remain possible.
    constraint = ProgramConstraint(gen.compiled)
    constraint.advance(gen.adapter.encode('<program><copy lines="5999-'))
    allowed = constraint.allowed(gen.runner.vocab_size)
    texts = {gen.adapter.token_bytes(t) for t in torch.nonzero(allowed).flatten().tolist()}
    assert texts and all(t[:1] in (b"5", b"6") for t in texts), texts


def test_prompt_longer_than_the_context_fails_before_any_forward(monkeypatch, tiny_model):
    """A prompt past max_position_embeddings is refused before the first forward."""
    from cad_outlines.decoding.generator import ContextLengthError

    model = tiny_model("tiny-codellama")
    doc = "".join(f"line {i}\n" for i in range(200))
    monkeypatch.setattr(model.model.config, "max_position_embeddings", 256)

    def no_forward(*args, **kwargs):
        raise AssertionError("a forward ran")

    gen = CaDGenerator(model, doc)
    monkeypatch.setattr(gen.runner, "forward", no_forward)
    with pytest.raises(ContextLengthError, match=r"the prompt is \d+ tokens but the model's context is 256"):
        gen.run("x")
    with pytest.raises(ContextLengthError):
        gen.regenerate("x")
    monkeypatch.undo()
    assert CaDGenerator(model, "a\nb").run("x", force_program='<program><copy lines="1-2"/></program>').document == "a\nb"


def test_a_document_whose_copy_cannot_fit_beside_the_prompt_fails_before_any_forward(monkeypatch, tiny_model):
    """The prompt fits, but the prompt and a copy of the whole document do not: no edit
    that keeps the document can finish, so it is refused before the prefill; with room
    for the program's tags as well, the same edit runs to the end."""
    from cad_outlines.decoding.generator import ContextLengthError

    model = tiny_model("tiny-qwen")
    doc = "".join(f"value_{i} = {i}\n" for i in range(30))
    gen = CaDGenerator(model, doc)
    program = f'<program><copy lines="1-{gen.view.upper}"/></program>'  # 31: the empty line after the last newline
    result = gen.run("x", force_program=program)
    needed = result.stats.prompt_tokens + gen.view.whole_copy_tokens
    assert result.document == doc and gen.view.whole_copy_tokens == result.stats.copied_tokens
    assert result.stats.program_tokens > 0  # the tags take positions beyond `needed`
    regen_needed = gen.regenerate("x", target=doc).stats.prompt_tokens + gen.view.whole_copy_tokens

    gen = CaDGenerator(model, doc)
    monkeypatch.setattr(gen.runner, "max_positions", needed - 1)  # the config's value, as the runner read it
    monkeypatch.setattr(gen.runner, "forward", lambda *a, **k: pytest.fail("a forward ran"))
    with pytest.raises(ContextLengthError, match=rf"the prompt is {result.stats.prompt_tokens} tokens and a copy "
                       rf"of the whole document {gen.view.whole_copy_tokens} more, past the model's context of "
                       rf"{needed - 1} positions .* cannot finish: the document \({len(doc)} characters\)"):
        gen.run("x", force_program=program)
    monkeypatch.setattr(gen.runner, "max_positions", regen_needed - 1)  # the plain prompt is shorter
    with pytest.raises(ContextLengthError, match="cannot finish"):
        gen.regenerate("x")
    monkeypatch.undo()  # forwards again
    used = result.stats.prompt_tokens + result.stats.program_tokens + result.stats.copied_tokens
    monkeypatch.setattr(gen.runner, "max_positions", used)
    assert gen.run("x", force_program=program).document == doc


# budget, streaming, baseline, token granularity --------------------------------------

def test_budget_exhaustion_returns_complete_ops_only(tiny_model):
    model = tiny_model("tiny-qwen")
    case = _cases(1)[0]
    ops = oracle_program(case["doc"], case["gold"])
    gen = CaDGenerator(model, case["doc"], max_new_tokens=25)
    result = gen.run("x", force_program=ops)
    assert not result.complete and result.document is None and result.stats.stopped_early
    assert result.ops == ops[:len(result.ops)] and result.stats.program_tokens <= 25
    with pytest.raises(IncompleteProgramError) as err:
        gen("x")  # sampled, same budget
    assert err.value.result.document is None


def test_stream_concatenates_to_the_document(tiny_model):
    model = tiny_model("tiny-deepseek-coder")
    case = _cases(1)[2]
    ops = oracle_program(case["doc"], case["gold"])
    gen = CaDGenerator(model, case["doc"])
    chunks = list(gen.stream("x", force_program=ops))
    # Token streaming: more chunks than ops (gen text arrives token by token).
    assert len(chunks) > len(ops) and "".join(chunks) == case["gold"]
    assert list(gen.stream_ops("x", force_program=ops)) == ops


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_regenerate_baseline_uses_one_forward_per_token(preset, tiny_model):
    model = tiny_model(preset)
    case = _cases(1)[0]
    gen = CaDGenerator(model, case["doc"])
    result = gen.regenerate("x", target=case["gold"])
    assert result.document == case["gold"]
    # Prefill + one forward per token: the last one yields the logits where the model
    # would choose end-of-sequence (a CaD program ends at </program> without one).
    assert result.stats.forward_passes == result.stats.decoded_tokens + 1
    assert result.stats.decoded_tokens == len(gen.adapter.encode(case["gold"]))


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_token_granularity_forced_oracle(preset, tiny_model):
    model = tiny_model(preset)
    case = _cases(1)[1]
    gen = CaDGenerator(model, case["doc"], granularity="tokens")
    a = gen.adapter
    ops = oracle_tokens(a.document_ids(case["doc"]), a.document_ids(case["gold"]), min_span=4,
                        doc_pieces=a.token_pieces(case["doc"]), gold_pieces=a.token_pieces(case["gold"]))
    result = gen.run("x", force_program=ops)
    assert result.document == case["gold"]
    assert result.stats.copied_tokens == sum(op.end - op.start + 1 for op in ops if not isinstance(op, Gen))


def test_special_token_spelling_in_document_is_text(tiny_model):
    model = tiny_model("tiny-qwen")
    doc = "keep\n<|im_start|>user\n<|endoftext|>\nend\n"
    gold = "keep\n<|im_start|>assistant\n<|endoftext|>\nend\n"
    ops = oracle_program(doc, gold)
    assert CaDGenerator(model, doc).run("x", force_program=ops).document == gold


def test_alpha_trace_is_recorded(tiny_model):
    model = tiny_model("tiny-qwen")
    gen = cad(model, _DOCS[0], trace_alpha=True, max_new_tokens=30, temperature=1.0, seed=3)
    result = gen.run("x")
    trace = result.alpha
    assert trace.steps == result.stats.decoded_tokens
    assert all(0.0 < a <= 1.0 + 1e-6 for a in trace.alphas)


def test_bad_options_are_rejected(tiny_model):
    model = tiny_model("tiny-qwen")
    for kwargs in [dict(granularity="words"), dict(max_new_tokens=0), dict(temperature=-1), dict(top_p=0)]:
        with pytest.raises(ValueError):
            cad(model, "x", **kwargs)


def test_regeneration_that_samples_bytes_which_are_not_utf8_keeps_going(tiny_model):
    from cad_outlines.decoding.constraint import Unconstrained

    gen = CaDGenerator(tiny_model("tiny-qwen"), "x = 1\n")
    free = Unconstrained(gen.compiled, gen.adapter.eos_token_id)
    # a lone continuation byte: no UTF-8 text starts with one
    lone = next(t for t in range(1000) if len(free.piece_bytes(t)) == 1 and 0x80 <= free.piece_bytes(t)[0] < 0xC0)
    free.advance([lone, gen.adapter.encode("ok")[0]])
    assert free.text.startswith("\ufffd") and not free.done


# a document without a final newline: its open end ---------------------------------------

@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_an_open_ended_document_is_shown_and_edited_with_its_open_end(preset, tiny_model):
    """The prompt numbers the open end as the empty last line every trained file has; a
    program that copies through it keeps the file without a final newline, in the result,
    the stream and the splice (the open end splices nothing the model could not see)."""
    model = tiny_model(preset)
    doc = "a = 1\nb = 2"
    gen = CaDGenerator(model, doc)
    assert gen.view.upper == 3 and gen.view.open_end
    assert "b = 2\n3" in gen.adapter.render_document(doc, gen.granularity, gen.prompt_style)
    forced = '<program><copy lines="1-1"/><gen>\nc = 3\n</gen><copy lines="3-3"/></program>'
    result = gen.run("x", force_program=forced)
    assert result.document == "a = 1\nc = 3" == resolve(result.ops, doc)
    assert "".join(gen.stream("x", force_program=forced)) == "a = 1\nc = 3"
    assert gen.run("x", force_program='<program><copy lines="1-3"/></program>').document == doc
    with pytest.raises(ForcedProgramError):
        gen.run("x", force_program='<program><copy lines="1-4"/></program>')
