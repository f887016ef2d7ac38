"""A model that asks for ``</program>`` inside a gen body gets its program ended there.

The grammar refuses ``</program>`` in a gen body; before :mod:`cad_outlines.decoding.ending`
such a model wrote ``</program) </program) ...`` until the budget ran out (fine-tuned
Qwen adapters on real C commits). A runner that wants one program text drives the loop
here: it boosts every token that continues the text, so the constrained choice follows
the text while the grammar allows it, and its most likely token is the refused one
where the text asks for the program's end inside a gen.
"""

from __future__ import annotations

import pytest

from cad_outlines.adapters import get_adapter
from cad_outlines.bench.fuzz import BiasedGenerator, check_result, draw_case
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.decoding.options import Instrumentation, LoopSwitches
from cad_outlines.language import syntax
from testdata import FAMILY_PRESETS, WantsText, continuation_bias, prefix_hook

DOC = "alpha = 1\nbeta = 2\ngamma = 3\n"


def _editor(model, wanted: str, granularity: str = "lines") -> CaDGenerator:
    runner = WantsText(model.model, model.hf_tokenizer, wanted)
    return CaDGenerator(model, DOC, granularity=granularity, max_new_tokens=200,
                        loop=LoopSwitches(splice=False, draft_tags=False),
                        instrumentation=Instrumentation(runner=runner))


def _streamed(editor: CaDGenerator, prompt: str) -> tuple[str, object]:
    chunks, stream = [], editor.stream(prompt)
    while True:
        try:
            chunks.append(next(stream))
        except StopIteration as stop:
            return "".join(chunks), stop.value


ENDINGS = [  # (what the model writes, the program it gets, the document)
    ('<program><copy lines="1-2"/><gen>\n\n</program>',  # a gen of padding only: withdrawn
     '<program><copy lines="1-2"/></program>', "alpha = 1\nbeta = 2"),
    ('<program><copy lines="1-2"/><gen>\ndelta = 4\n</program>',  # closed where the end was asked for
     '<program><copy lines="1-2"/><gen>\ndelta = 4\n</gen></program>', "alpha = 1\nbeta = 2\ndelta = 4"),
]


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@pytest.mark.parametrize("wanted, program, document", ENDINGS)
def test_asking_for_the_end_inside_a_gen_ends_the_program_there(preset, wanted, program, document, tiny_model):
    editor = _editor(tiny_model(preset), wanted)
    result = editor.run("edit")
    assert result.complete and result.stats.ended_in_gen
    assert result.program == program and result.document == document
    assert result.stats.program_tokens < 60  # not the budget of 200
    text, streamed = _streamed(editor, "edit")
    assert text == result.document and streamed.program == result.program


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_a_first_gen_that_asks_for_the_end_rolls_back_into_the_program_tag(preset, tiny_model):
    # The forced run after <program> may end in a token that begins <gen> (Qwen's "><"):
    # withdrawing the gen undoes that token too, and </program> follows <program>.
    model = tiny_model(preset)
    result = _editor(model, "<program><gen>\n\n</program>").run("nothing")
    assert result.complete and result.stats.ended_in_gen
    assert result.program == "<program></program>" and result.ops == []


def test_token_programs_keep_a_newline_gen(tiny_model):
    model = tiny_model(FAMILY_PRESETS[0])
    editor = _editor(model, '<program><copy tokens="0-2"/><gen>\n</program>', granularity="tokens")
    result = editor.run("cut after the first tokens")
    assert result.complete and result.stats.ended_in_gen
    assert result.program == '<program><copy tokens="0-2"/><gen>\n</gen></program>'  # "\n" is text here


def test_program_close_look_alikes_in_a_gen_are_text(tiny_model):
    # "</program" followed by anything but ">" is gen text: held back while it could
    # still become the program's end, then streamed.
    model = tiny_model(FAMILY_PRESETS[0])
    wanted = '<program><copy lines="1-3"/><gen>\ntag = "</program)"\n</gen></program>'
    editor = _editor(model, wanted)
    result = editor.run("add a tag")
    assert result.complete and not result.stats.ended_in_gen
    assert result.program == wanted
    assert result.document == DOC.rstrip("\n") + '\ntag = "</program)"'
    text, _ = _streamed(editor, "add a tag")
    assert text == result.document


def test_rollback_undoes_whole_tokens_inside_the_op(tiny_model):
    model = tiny_model(FAMILY_PRESETS[0])
    editor = CaDGenerator(model, DOC)
    from cad_outlines.decoding.constraint import ProgramConstraint

    constraint = ProgramConstraint(editor.compiled, editor.view.indices)
    tok = model.hf_tokenizer
    head = '<program><copy lines="1-2"/>'
    for piece in (head, "<gen>", "\nx = 1", "\n</prog"):
        constraint.advance(tok.encode(piece, add_special_tokens=False))
    ops = list(constraint.ops)
    at = len(head) + len("<gen>\nx = 1") + 1  # inside the last piece's first token
    undone = constraint.rollback(at)
    assert undone >= 1 and len(constraint.text) <= at
    assert constraint.text == (head + "<gen>\nx = 1\n</prog")[:len(constraint.text)]
    assert constraint.ops == ops
    rest = tok.encode((head + "<gen>\nx = 1\n</gen></program>")[len(constraint.text):], add_special_tokens=False)
    assert constraint.validate(rest) == len(rest)  # the grammar is back where the text is
    constraint.advance(rest)
    assert constraint.done
    with pytest.raises(ValueError, match="complete op"):
        constraint.rollback(len(head) - 1)


@pytest.mark.parametrize("head, body, cut_at, text", [
    ('<program><copy lines="1-2"/>', "\n\n</program", None, "</program>"),  # only padding: withdrawn
    ('<program><copy lines="1-2"/>', "\nx = 1\n</prog", "\nx = 1\n", "</gen></program>"),  # typed part goes
    ('<program><copy lines="1-2"/>', "\nif a < b:\n", "\nif a < b:\n", "</gen></program>"),  # "<" stays
    ("<program>", "\n</program", None, "</program>"),  # the first op: back into <program>'s tokens
])
def test_the_end_is_read_off_the_text_where_a_processor_stopped(head, body, cut_at, text, tiny_model):
    # vLLM's driver sees the request end inside a gen; it places the end as asked_end does.
    from cad_outlines.decoding.constraint import ProgramConstraint
    from cad_outlines.decoding.ending import end_program, ended_in_gen

    model = tiny_model(FAMILY_PRESETS[0])
    editor = CaDGenerator(model, DOC)
    constraint = ProgramConstraint(editor.compiled, editor.view.indices)
    for piece in (head, "<gen>" + body):  # a copy tag ends on a token boundary, as in the loop
        constraint.advance(model.hf_tokenizer.encode(piece, add_special_tokens=False))
    ending = ended_in_gen(constraint)
    gen_at = len(head)
    assert ending.cut == (gen_at if cut_at is None else gen_at + len("<gen>") + len(cut_at))
    assert ending.text == text
    constraint.advance(end_program(constraint, ending, editor.adapter.encode))
    assert constraint.done and constraint.text == constraint.text[:ending.cut] + text


def _asks_for_the_end(model, adapter):
    """A forward hook that makes the model ask for ``</program>`` now and then: where the
    text so far ends in a proper prefix of it, the next piece gets a large logit; at a
    prefix inside a gen (as far as the last 120 tokens tell) whose last ids hash to 0
    mod 3, ``</`` does (:func:`testdata.prefix_hook`: a function of the prefix)."""
    close = syntax.PROGRAM_CLOSE
    next_id = [adapter.encode(close[k:])[0] for k in range(len(close))]

    def bias(logits, text, last):
        typed = next((k for k in range(len(close) - 1, 1, -1) if text.endswith(close[:k])), 0)
        in_gen = text.rfind("<gen>") > text.rfind("</gen>")  # by the text: spliced look-alikes fool it
        if typed or (in_gen and hash(last) % 3 == 0):
            logits[next_id[typed]] += 80.0

    return prefix_hook(model, adapter, bias)


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_sampled_programs_that_ask_for_the_end_keep_every_guarantee(preset, tiny_model):
    # Adversarial documents (program literals, escapes, CRLF, no final newline), sampled
    # with drafts on and off in both granularities: every result is checked as the fuzz
    # campaign checks it, and the streamed text equals the run's document.
    model = tiny_model(preset)
    ended = 0
    handle = _asks_for_the_end(model, get_adapter(model.hf_tokenizer))
    try:
        for index in range(12):
            case = draw_case(preset, seed=7, index=index, max_lines=40)
            # a document holding </program> turns the rule off (tested below): a look-alike stays
            document = case.document.replace(syntax.PROGRAM_CLOSE, "</programs>")
            editor = BiasedGenerator(model, document, granularity=case.granularity,
                                     temperature=case.temperature, top_p=case.top_p, seed=index,
                                     draft_tags=index % 2 == 0, draft_trees=False, max_new_tokens=64)
            result = editor.run("Edit this file.")
            assert check_result(result, editor) == [], (index, result.program)
            ended += result.stats.ended_in_gen
            if result.complete:
                text, streamed = _streamed(editor, "Edit this file.")
                assert streamed.program == result.program and text == result.document, index
    finally:
        handle.remove()
    assert ended >= 1  # the path under test was taken (deterministic: seeded cases and sampler)


def test_a_padding_row_of_the_output_layer_asks_for_nothing(tiny_model):
    # Qwen's output layer has 151,936 rows for 151,669 tokens: a top row past the
    # tokenizer is no token (its llguidance "piece" is a placeholder), never an ending.
    import torch

    from cad_outlines.decoding.constraint import ProgramConstraint
    from cad_outlines.decoding.ending import asked_end

    model = tiny_model(FAMILY_PRESETS[0])
    editor = CaDGenerator(model, DOC)
    constraint = ProgramConstraint(editor.compiled, editor.view.indices)
    constraint.advance(model.hf_tokenizer.encode("<program><gen>\n</program", add_special_tokens=False))
    rows = editor.runner.vocab_size
    assert rows > editor.compiled.table.vocab_size
    allowed = constraint.allowed(rows)
    logits = torch.zeros(rows)
    logits[rows - 1] = 1.0
    assert asked_end(constraint, logits, allowed) is None
    logits[editor.adapter.encode(">")[0]] = 2.0  # the refused ">" itself does ask
    assert asked_end(constraint, logits, allowed) is not None


def test_a_document_holding_the_literal_keeps_the_grammars_refusal(tiny_model):
    # There </program> typed in a gen may be the document's own text being retyped: no
    # ending is inferred; the grammar refuses the ">" as before.
    model = tiny_model(FAMILY_PRESETS[0])
    runner = WantsText(model.model, model.hf_tokenizer, '<program><copy lines="1-2"/><gen>\n\n</program>')
    editor = CaDGenerator(model, DOC + "<program></program>\n", max_new_tokens=40,
                          loop=LoopSwitches(splice=False, draft_tags=False),
                          instrumentation=Instrumentation(runner=runner))
    result = editor.run("edit")
    typed = '<program><copy lines="1-2"/><gen>\n\n</program'  # typed in full, then ">" refused
    assert not result.stats.ended_in_gen
    assert result.program.startswith(typed) and not result.program.startswith(typed + ">")
