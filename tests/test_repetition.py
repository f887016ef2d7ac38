"""A gen body that repeats itself past anything in the document stops the run.

Fine-tuned Qwen adapters fell into loops inside gens (``uint64_t /*ne13*/, `` over and
over) and decoded to the token budget. :mod:`cad_outlines.decoding.repetition` calls a
body looping when it ends in a short unit repeated more often than the document or the
instruction repeats it; the loop then stops, ``stop_reason == "repetition"``. Real
edits must never trip it: the gold edits of the bundled real commits are checked here
(the full corpora with ``scripts/repetition_scan.py``).
"""

from __future__ import annotations

import difflib

import pytest

from cad_outlines.decoding.generator import CaDGenerator, IncompleteProgramError
from cad_outlines.decoding.options import Instrumentation, LoopSwitches
from cad_outlines.decoding.repetition import MIN_CHARS, MIN_REPEATS, UNIT_MAX, looping
from testdata import FAMILY_PRESETS, WantsText, corpus_records

DOC = "alpha = 1\nbeta = 2\ngamma = 3\n"
UNIT = "uint64_t /*ne13*/, "  # the shipped adapter's loop on a C file (docs/learn.md)
LOOPING = '<program><copy lines="1-2"/><gen>\n    f(' + UNIT * 200  # never closes: a loop to the budget


def test_a_repeated_unit_is_a_loop_once_it_is_long_enough():
    body = "\n    f(" + UNIT * 40
    first = next(end for end in range(len(body) + 1) if looping(body[:end], ""))
    loop = looping(body[:first], "")
    assert loop.unit == len(UNIT) and loop.chars >= MIN_CHARS and loop.repeats >= MIN_REPEATS
    assert first <= len("\n    f(") + MIN_CHARS + len(UNIT)  # caught within one unit of the threshold
    assert looping("x" * (MIN_CHARS - 1), "") is None  # short runs are text
    assert looping("=" * (MIN_CHARS + 10), "").unit == 1  # longer than any rule line in the corpora
    block = "".join(f"line {i} of a long distinct block\n" for i in range(12))  # unit > UNIT_MAX
    assert len(block) > UNIT_MAX and looping(block * 8, "") is None


def test_a_run_the_document_holds_is_not_a_loop_until_it_outgrows_it():
    row = "0x00, " * 70  # a table the document holds: retyping it is not looping
    assert looping("\n" + row, "static const char t[] = {" + row + "};") is None
    assert looping("\n" + row * 2, "static const char t[] = {" + row + "};") is not None


def test_no_real_commit_adds_text_called_a_loop():
    """Every text the bundled real commits add (their gold edits), checked at every
    fourth character as a gen being written against its document and instruction, and
    every gold file whole as a new file's gen (an empty document): none is a loop."""
    added = 0
    for record in corpus_records():
        before, after = record["doc"].splitlines(True), record["gold"].splitlines(True)
        hay = record["doc"] + "\n" + record.get("instruction", "")
        for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
            if tag in ("replace", "insert"):
                body = "\n" + "".join(after[j1:j2])
                added += 1
                assert not any(looping(body[:end], hay) for end in range(1, len(body) + 1, 4)), record["id"]
        gold = record["gold"]
        assert not any(looping(gold[:end], "") for end in range(1, len(gold) + 1, 16)), record["id"]
    assert added > 50


def _editor(model, wanted: str, document: str = DOC, **switches) -> CaDGenerator:
    runner = WantsText(model.model, model.hf_tokenizer, wanted)
    return CaDGenerator(model, document, max_new_tokens=400,
                        loop=LoopSwitches(splice=False, draft_tags=False, **switches),
                        instrumentation=Instrumentation(runner=runner))


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_a_looping_gen_stops_the_run_long_before_the_budget(preset, tiny_model):
    model = tiny_model(preset)
    result = _editor(model, LOOPING).run("edit")
    assert not result.complete and result.document is None
    assert result.stats.stopped_early and result.stats.stop_reason == "repetition"
    assert result.stats.program_tokens < 250, result.stats.program_tokens  # the budget is 400
    body = result.program.split("<gen>", 1)[1]
    assert looping(body, DOC) is not None and UNIT * MIN_REPEATS in body
    with pytest.raises(IncompleteProgramError, match="repeating the same text"):
        _editor(model, LOOPING)("edit")
    stream = _editor(model, LOOPING).stream("edit")
    with pytest.raises(IncompleteProgramError, match="repeating"):
        list(stream)


def test_the_guard_can_be_switched_off_and_spares_the_documents_own_runs(tiny_model):
    model = tiny_model(FAMILY_PRESETS[0])
    off = _editor(model, LOOPING, repetition_guard=False).run("edit")
    assert off.stats.stop_reason == "max_new_tokens" and off.stats.program_tokens == 400
    # the same run as text of the document: retyping it is no loop, the program completes
    table = "    f(" + UNIT * 30 + ")"
    wanted = '<program><copy lines="1-2"/><gen>\n' + table + '\n</gen></program>'
    result = _editor(model, wanted, document=DOC + table + "\n").run("retype the call")
    assert result.complete and result.program == wanted, result.stats.stop_reason
    assert _editor(model, wanted).run("write the call").stats.stop_reason == "repetition"  # not in this document


def test_a_forced_program_is_never_stopped_for_repeating(tiny_model):
    model = tiny_model(FAMILY_PRESETS[0])
    forced = '<program><copy lines="1-2"/><gen>\n' + "    f(" + UNIT * 40 + ")\n</gen></program>"
    result = CaDGenerator(model, DOC, max_new_tokens=600).run("edit", force_program=forced)
    assert result.complete and result.program == forced
