"""An Outlines user's first calls, on the three tokenizer families (tiny random-weight presets):
per-call options, Chat prompts and templates, token streaming, batch, and clear refusals."""

from __future__ import annotations

import outlines
import pytest
from outlines.inputs import Chat

from cad_outlines.decoding.generator import (CALL_OPTIONS, CaDGenerator, ForcedProgramError,
                                             IncompleteProgramError, UnsupportedModelError)
from cad_outlines.language.grammar import load_grammar, specialize
from cad_outlines.language.oracle import oracle_program, oracle_tokens
from cad_outlines.language.program import Gen
from cad_outlines.decoding.prompts import PromptError
from cad_outlines.language.resolver import ResolveError
from cad_outlines.decoding.sampler import OptionError
from cad_outlines.generate import cad

from testdata import _DOCS, _structure_bias

DOC = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"
GOLD = "def add(a, b):\n    # sum\n    return a + b\n\nprint(add(1, 2))\n"
SAMPLED = dict(temperature=1.0, top_k=40, top_p=0.95, min_p=0.01, repetition_penalty=1.1)
CHAT = [{"role": "system", "content": "You edit Python. Zebra."},
        {"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi! Ready."},
        {"role": "user", "content": "Add a comment."}]


@pytest.fixture
def biased(family_model):
    """The family's model with the structure bias on, so sampled programs finish."""
    adapter = CaDGenerator(family_model, DOC).adapter
    handle = _structure_bias(family_model, adapter)
    yield family_model
    handle.remove()


# per-call options -------------------------------------------------------------------------

def test_per_call_options_equal_constructor_options_for_that_call_only(biased):
    gen = CaDGenerator(biased, DOC, max_new_tokens=48)
    greedy = gen.run("Add a comment.")
    per_call = gen.run("Add a comment.", seed=3, max_new_tokens=40, **SAMPLED)
    built = cad(biased, DOC, seed=3, max_new_tokens=40, **SAMPLED).run("Add a comment.")
    assert per_call.program == built.program and per_call.stats.program_tokens <= 40
    # The defaults are untouched: the next plain call is greedy again.
    assert gen.sampling.temperature == 0.0 and gen.max_new_tokens == 48
    assert gen.run("Add a comment.").program == greedy.program
    # Different seeds sample different programs (over a few seeds at least one differs).
    programs = {gen.run("Add a comment.", seed=s, max_new_tokens=40, **SAMPLED).program for s in range(4)}
    assert len(programs) > 1


def test_top_k_one_samples_the_greedy_program(family_model):
    # The mask comes first, so top_k=1 keeps the best allowed id: sampling equals greedy.
    gen = CaDGenerator(family_model, DOC, max_new_tokens=24)
    greedy = gen.run("x").program
    assert gen.run("x", temperature=1.7, top_k=1, seed=11).program == greedy


def test_budget_per_call(family_model):
    gen = CaDGenerator(family_model, DOC)
    with pytest.raises(IncompleteProgramError):
        gen("x", max_new_tokens=2)
    ops = oracle_program(DOC, GOLD)
    assert gen.run("x", force_program=ops, max_new_tokens=200).document == GOLD


def test_unknown_and_bad_options_are_refused_at_the_call(family_model):
    gen = CaDGenerator(family_model, DOC)
    for call in (gen, gen.run, gen.stream, gen.stream_ops, lambda p, **k: gen.batch([p], **k)):
        with pytest.raises(TypeError, match="max_tokens.*the options are max_new_tokens, temperature"):
            call("x", max_tokens=5)  # stream() refuses before any iteration
    with pytest.raises(OptionError, match="top_p"):
        gen.stream("x", top_p=0.0)
    with pytest.raises(OptionError, match="max_new_tokens"):
        gen("x", max_new_tokens=0)
    assert set(CALL_OPTIONS) == {"max_new_tokens", "temperature", "top_p", "top_k", "min_p",
                                 "repetition_penalty", "seed"}


# batch -----------------------------------------------------------------------------------

def test_batch_takes_per_call_options_and_any_prompt_kind(biased):
    gen = CaDGenerator(biased, DOC, max_new_tokens=64)
    prompts = ["Add a comment.", Chat(list(CHAT)), CHAT]
    options = dict(seed=2, **SAMPLED)  # seed 2 finishes all three on every family today
    expected = []
    for prompt in prompts:
        result = gen.run(prompt, **options)
        expected.append(result.document if result.complete else IncompleteProgramError)
    if IncompleteProgramError in expected:
        with pytest.raises(IncompleteProgramError):
            gen.batch(prompts, **options)
    else:
        assert gen.batch(prompts, **options) == expected
    assert expected[1] == expected[2]  # a Chat and its list of messages are one prompt


# prompts ---------------------------------------------------------------------------------

def test_chat_prompt_keeps_the_system_message_and_turns(family_model):
    gen = CaDGenerator(family_model, DOC)
    text = gen.adapter.decode(gen._prompt_ids(Chat(list(CHAT))))
    for part in ("You edit Python. Zebra.", "Hello.", "Hi! Ready.", "Add a comment.", "Document:",
                 "1| def add(a, b):"):
        assert part in text
    # In order, and the document comes after the last turn (inside the instruction message).
    order = [text.index(p) for p in ("Zebra", "Hello.", "Hi! Ready.", "Add a comment.", "Document:")]
    assert order == sorted(order)
    result = gen.run(Chat(list(CHAT)), force_program=oracle_program(DOC, GOLD))
    assert result.document == GOLD
    assert result.stats.prompt_tokens == len(gen._prompt_ids(CHAT))
    assert "Zebra" not in gen.adapter.decode(gen._prompt_ids("Add a comment."))


def test_bad_chat_is_refused(family_model):
    gen = CaDGenerator(family_model, DOC)
    with pytest.raises(PromptError, match="must end with the user's instruction"):
        gen(CHAT[:3])


def test_prompt_template_is_used_and_checked(family_model):
    template = "Task: {{ instruction }}\n{{ format }}\n=== FILE ===\n{{ document }}\n=== END ==="
    gen = CaDGenerator(family_model, DOC, prompt_template=template)
    text = gen.adapter.decode(gen._prompt_ids("Add a comment."))
    assert "Task: Add a comment.\n" in text and "=== FILE ===\n1| def add(a, b):" in text
    assert gen.run("Add a comment.", force_program=oracle_program(DOC, GOLD)).document == GOLD
    with pytest.raises(PromptError, match="document"):
        CaDGenerator(family_model, DOC, prompt_template="{{ instruction }} and nothing else")


# streaming -------------------------------------------------------------------------------

def _check_stream(gen: CaDGenerator, prompt, **kw) -> list[str]:
    """stream() concatenates to run()'s document, or raises what run() reports."""
    try:
        result = gen.run(prompt, **kw)
    except ResolveError:
        # A token copy boundary inside a character (the constraint does not yet forbid
        # it): stream() refuses the same way at its end.
        with pytest.raises(ResolveError):
            list(gen.stream(prompt, **kw))
        return []
    chunks: list[str] = []
    if result.complete:
        chunks = list(gen.stream(prompt, **kw))
        assert "".join(chunks) == result.document
        assert list(gen.stream_ops(prompt, **kw)) == result.ops
    else:
        with pytest.raises(IncompleteProgramError):
            for chunk in gen.stream(prompt, **kw):
                chunks.append(chunk)
    return chunks


def test_stream_forced_programs_lines_and_tokens(family_model, corpus_sample):
    for case in corpus_sample[:3]:
        gen = CaDGenerator(family_model, case["doc"])
        ops = oracle_program(case["doc"], case["gold"])
        chunks = _check_stream(gen, "edit", force_program=ops)
        assert "".join(chunks) == case["gold"]
        # Gen text arrives token by token: more chunks than ops when gens hold text.
        if any(isinstance(op, Gen) and len(op.text) > 3 for op in ops):
            assert len(chunks) > len(ops)
    for doc, gold in [(DOC, GOLD), ("héllo 😀 中文\r\nno final newline", "héllo 😀 中文\r\nyes final newline")]:
        gen = CaDGenerator(family_model, doc, granularity="tokens")
        a = gen.adapter
        ops = oracle_tokens(a.document_ids(doc), a.document_ids(gold), min_span=2,
                            doc_pieces=a.token_pieces(doc), gold_pieces=a.token_pieces(gold))
        chunks = _check_stream(gen, "edit", force_program=ops)
        assert "".join(chunks) == gold


def test_a_crlf_file_is_edited_in_lf_and_comes_back_crlf(family_model):
    # Windows files: the model reads "\n" ends (what it was trained on), and the lines it
    # writes get the file's "\r\n" like the copied ones: no mixed ends in the result.
    doc, gold = (DOC.replace("\n", "\r\n"), GOLD.replace("\n", "\r\n"))
    gen = CaDGenerator(family_model, doc)
    assert "\r" not in gen.adapter.decode(gen._prompt_ids("add a comment"))
    lf_program = oracle_program(DOC, GOLD)  # its new line ends in "\n", as a model writes it
    crlf_program = oracle_program(doc, gold)  # written against the file itself: "\r" kept
    for ops in (lf_program, crlf_program):
        assert _check_stream(gen, "add a comment", force_program=ops) and gen.run(
            "add a comment", force_program=ops).document == gold
    update = "def add(a, b):\r\n    # sum\r\n    return a + b\r\n# ... existing code ...\r\n"
    assert gen.predicted(update) == gold
    # a snippet written with "\n" ends (as a model or an editor often sends it) still places
    assert gen.predicted(update.replace("\r\n", "\n")) == gold


@pytest.mark.slow
def test_stream_sampled_programs(biased):
    streamed = 0
    for i, doc in enumerate(_DOCS[:4]):  # code, UTF-8 without a final newline, CRLF, literals
        for granularity in ("lines", "tokens"):
            gen = CaDGenerator(biased, doc, granularity=granularity, max_new_tokens=48)
            result = gen.run("rewrite", seed=i, **SAMPLED)
            _check_stream(gen, "rewrite", seed=i, **SAMPLED)
            streamed += result.complete
    assert streamed >= 3, f"only {streamed} sampled programs finished"


def test_stream_token_copies_splitting_a_character(family_model):
    # Two token copies whose boundary may fall inside a multi-byte character: wherever
    # run() succeeds, stream() yields the same document; wherever it refuses, so does stream().
    doc = "héllo 😀 中文\n"
    gen = CaDGenerator(family_model, doc, granularity="tokens")
    n = len(gen.adapter.document_ids(doc))
    for k in range(n - 1):
        program = f'<program><copy tokens="0-{k}"/><copy tokens="{k + 1}-{n - 1}"/></program>'
        try:
            document = gen.run("x", force_program=program).document
        except (ForcedProgramError, ResolveError) as err:
            with pytest.raises(type(err)):
                list(gen.stream("x", force_program=program))
            continue
        assert document == doc
        assert "".join(gen.stream("x", force_program=program)) == doc


def test_stream_yields_before_the_program_ends(family_model):
    gen = CaDGenerator(family_model, "a\nb\n")
    program = '<program><copy lines="1-1"/><gen>\nnew words here\n</gen><copy lines="2-3"/></program>'
    chunks = list(gen.stream("x", force_program=program))
    assert "".join(chunks) == "a\nnew words here\nb\n"
    assert chunks[0] == "a" and chunks[-1] == "\nb\n"
    assert len(chunks) >= 4  # the gen's words arrived in more than one chunk


# what is not supported says so -----------------------------------------------------------

def test_unsupported_models_get_one_clear_error(family_model):
    for model in (family_model.model, object(), object.__new__(outlines.models.LlamaCpp),
                  object.__new__(outlines.models.VLLMOffline), object.__new__(outlines.models.MLXLM)):
        with pytest.raises(UnsupportedModelError, match=r"outlines\.from_transformers"):
            CaDGenerator(model, DOC)
    with pytest.raises(UnsupportedModelError, match="Wrap a Hugging Face model"):
        CaDGenerator(family_model.model, DOC)


def test_from_processor_is_refused_and_output_type_is_the_program_language(family_model):
    with pytest.raises(NotImplementedError, match="CaDGenerator\\(model, document\\)"):
        CaDGenerator.from_processor(family_model, None)
    gen = CaDGenerator(family_model, DOC)
    assert gen.output_type.definition == specialize(load_grammar("lines"), 5, "lines")
    assert not hasattr(gen, "logits_processor")  # set-but-unused before; the bench builds its own
