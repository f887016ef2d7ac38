"""The loop guards: monotone copies, a per-gen length cap and the copy budget (on by default)."""

from __future__ import annotations

import pytest

from cad_outlines.decoding.generator import CaDGenerator, ForcedProgramError
from cad_outlines.decoding.sampler import OptionError
from cad_outlines.language.program import Copy, Gen
from cad_outlines.generate import cad

DOC = "".join(f"line {k} = {k}\n" for k in range(1, 13))  # 12 lines + the empty 13th


def test_monotone_copies_refuse_a_copy_that_starts_before_the_last_end(tiny_model):
    model = tiny_model("tiny-qwen")
    backwards = '<program><copy lines="5-9"/><copy lines="3-4"/></program>'
    # without the option the program is valid ...
    assert CaDGenerator(model, DOC).run("x", force_program=backwards).complete
    # ... with it, the constraint refuses the second copy's start
    with pytest.raises(ForcedProgramError):
        cad(model, DOC, monotone_copies=True).run("x", force_program=backwards)
    # an overlap is refused too; a copy right after the previous end is fine
    with pytest.raises(ForcedProgramError):
        cad(model, DOC, monotone_copies=True).run(
            "x", force_program='<program><copy lines="1-5"/><copy lines="5-6"/></program>')
    ok = cad(model, DOC, monotone_copies=True).run(
        "x", force_program='<program><copy lines="1-5"/><gen>\nnew\n</gen><copy lines="6-13"/></program>')
    assert ok.document == DOC.replace("line 5 = 5\n", "line 5 = 5\nnew\n")


def test_monotone_copies_follow_what_the_model_records(tiny_model, monkeypatch):
    from cad_outlines.decoding.options import LoopSwitches

    model = tiny_model("tiny-qwen")
    backwards = '<program><copy lines="5-9"/><copy lines="3-4"/></program>'
    assert LoopSwitches().monotone_copies == "model"
    # a model trained on oracle programs records it (the real-weight loader sets this)
    monkeypatch.setattr(model.model.config, "cad_monotone_copies", True, raising=False)
    with pytest.raises(ForcedProgramError):
        CaDGenerator(model, DOC).run("x", force_program=backwards)
    assert CaDGenerator(model, DOC, loop=LoopSwitches(monotone_copies=False)).run(
        "x", force_program=backwards).complete  # the caller's word wins
    monkeypatch.setattr(model.model.config, "cad_monotone_copies", False)
    assert CaDGenerator(model, DOC).run("x", force_program=backwards).complete
    with pytest.raises(OptionError, match="monotone_copies"):
        LoopSwitches(monotone_copies="yes")


def test_monotone_copies_close_the_door_once_the_last_line_is_copied(tiny_model):
    model = tiny_model("tiny-qwen")
    gen = cad(model, DOC, monotone_copies=True)
    with pytest.raises(ForcedProgramError):
        gen.run("x", force_program='<program><copy lines="1-13"/><copy lines="1-2"/></program>')
    assert gen.run("x", force_program='<program><copy lines="1-13"/></program>').document == DOC


def test_sampled_monotone_programs_never_step_back(tiny_model):
    from cad_outlines.bench.fuzz import BiasedGenerator

    model = tiny_model("tiny-deepseek-coder")
    starts_back = 0
    for monotone in (False, True):
        for seed in range(10):
            # random weights rarely close a gen body: the fuzz campaign's bias (a logits
            # processor among the loop switches) does
            gen = BiasedGenerator(model, DOC, monotone_copies=monotone, temperature=1.5, seed=seed,
                                  max_new_tokens=80)
            result = gen.run("Edit this file.")
            copies = [op for op in result.ops if isinstance(op, Copy)]
            back = sum(b.start <= a.end for a, b in zip(copies, copies[1:]))
            if monotone:
                assert back == 0, result.program
            else:
                starts_back += back
    # the unconstrained-order runs do step back, so the check above has something to catch
    assert starts_back > 0


def test_gen_cap_stops_a_runaway_body_early(tiny_model):
    model = tiny_model("tiny-qwen")
    capped = cad(model, DOC, max_gen_tokens=4, temperature=1.0, seed=3, max_new_tokens=200,
                 draft_tags=False)
    free = cad(model, DOC, temperature=1.0, seed=3, max_new_tokens=200, draft_tags=False)
    a, b = capped.run("Edit this file."), free.run("Edit this file.")
    assert any(isinstance(op, Gen) for op in b.ops) or b.stats.stopped_early
    assert a.stats.stopped_early and a.stats.stop_reason == "max_gen_tokens", a.program
    assert a.document is None and not a.complete
    assert a.stats.forward_passes < b.stats.forward_passes
    # the same seed chooses the same tokens up to the cap
    assert b.program.startswith(a.program)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "8"])
def test_gen_cap_is_checked_when_the_generator_is_built(tiny_model, bad):
    with pytest.raises(OptionError, match="max_gen_tokens"):
        cad(tiny_model("tiny-qwen"), DOC, max_gen_tokens=bad)


def test_decoding_stops_at_the_models_context_instead_of_running_past_it(tiny_model):
    from cad_outlines.decoding.runner import ObservedRunner, TransformersRunner

    model = tiny_model("tiny-qwen")
    for force in (None, '<program><copy lines="1-13"/><copy lines="1-13"/><copy lines="1-13"/></program>'):
        widths: list[int] = []
        runner = ObservedRunner(TransformersRunner(model.model), lambda width, rows, seconds: widths.append(width))
        gen = cad(model, DOC, temperature=1.0, seed=0, max_new_tokens=400, draft_tags=False,
                  runner=runner)
        # as if the model's context ended there: room for a copy of the document (or the
        # edit would be refused before the prefill) and 20 positions more
        limit = len(gen._prompt_ids("Edit this file.")) + gen.view.whole_copy_tokens + 20
        runner.max_positions = limit
        result = gen.run("Edit this file.", force_program=force)
        assert result.stats.stop_reason == "context", result.program
        assert not result.complete and result.document is None
        assert sum(widths) <= limit  # no forward ever reached past the last position


def test_the_generator_takes_options_objects_and_holds_each_once(tiny_model):
    from cad_outlines.decoding.options import Instrumentation, LoopSwitches
    from cad_outlines.decoding.sampler import SamplingOptions

    model = tiny_model("tiny-qwen")
    sampling, loop = SamplingOptions(temperature=0.5, top_k=3, seed=7), LoopSwitches(draft_tags=False)
    gen = CaDGenerator(model, DOC, sampling=sampling, loop=loop)
    assert gen.sampling is sampling and gen.loop is loop and gen.instrumentation == Instrumentation()
    # an option is set one way: no attribute writes through to the objects
    for name in ("temperature", "top_k", "seed", "splice", "draft_tags", "monotone_copies", "observer"):
        assert not hasattr(type(gen), name)
    # a per-call option overrides the held object for that call only
    assert gen._call_options({"top_k": 5})[1].top_k == 5 and gen.sampling.top_k == 3
    # the flat keywords of generate.cad build the same objects
    flat = cad(model, DOC, temperature=0.5, top_k=3, seed=7, draft_tags=False)
    assert flat.sampling == sampling and flat.loop == loop
    with pytest.raises(OptionError, match="max_gen_tokens"):
        LoopSwitches(max_gen_tokens=0)


def test_flat_keywords_map_to_the_objects_and_an_unknown_one_is_named(tiny_model):
    import inspect

    from cad_outlines.decoding.options import CONSTRUCTOR_OPTIONS, Instrumentation, LoopSwitches, group_options
    from cad_outlines.decoding.sampler import SamplingOptions
    from cad_outlines.errors import OptionTypeError

    keywords = [p.name for p in inspect.signature(CaDGenerator).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert tuple(keywords) == CONSTRUCTOR_OPTIONS and len(keywords) <= 10
    observer = print
    assert group_options({"temperature": 0.2, "splice": False, "max_new_tokens": 9, "observer": observer}) == {
        "sampling": SamplingOptions(temperature=0.2), "loop": LoopSwitches(splice=False), "max_new_tokens": 9,
        "instrumentation": Instrumentation(observer=observer)}
    with pytest.raises(OptionTypeError, match="unknown option 'temprature'") as err:
        cad(tiny_model("tiny-qwen"), DOC, temprature=0.2)
    assert isinstance(err.value, TypeError)
    with pytest.raises(OptionTypeError, match="seed given beside sampling="):
        group_options({"seed": 1, "sampling": SamplingOptions()})


def test_a_bare_tokenizer_runs_through_its_own_constructor(tiny_model):
    from cad_outlines.decoding.generator import UnsupportedModelError

    model = tiny_model("tiny-qwen")
    gen = CaDGenerator(model, DOC)
    with pytest.raises(UnsupportedModelError, match="for_tokenizer"):
        CaDGenerator(None, DOC)
    bare = CaDGenerator.for_tokenizer(model.hf_tokenizer, DOC, gen.runner)
    assert bare.model is None and bare.runner is gen.runner
    forced = '<program><copy lines="1-13"/></program>'
    assert bare.run("x", force_program=forced).document == gen.run("x", force_program=forced).document == DOC


def test_an_observer_sees_every_phase_and_the_loop_keeps_no_other_stopwatch(tiny_model):
    from cad_outlines.bench._loop import clocked_generator, cpu_run
    from cad_outlines.decoding.results import CaDStats

    phases: list[str] = []
    gen = cad(tiny_model("tiny-qwen"), DOC, observer=phases.append)
    forced = '<program><copy lines="1-4"/><gen>\nnew\n</gen><copy lines="5-13"/></program>'
    result = gen.run("x", force_program=forced)
    assert phases[-1] == "end" and phases.count("mask") == result.stats.decoded_tokens
    # one forward or splice mark per forward after the prefill (drafts may save some)
    assert phases.count("forward") + phases.count("splice") == result.stats.forward_passes - 1
    assert phases.count("splice") >= 1
    assert not {"constraint_seconds", "forward_seconds", "splice_seconds"} & set(CaDStats.__dataclass_fields__)
    # the bench's clock turns the phases into its breakdown
    gen, clock = clocked_generator(tiny_model("tiny-qwen"), DOC)
    _, measured = cpu_run(clock, lambda: gen.run("x", force_program=forced))
    assert measured["constraint_seconds"] > 0 and measured["splice_seconds"] > 0


def test_the_copy_budget_lets_copies_write_the_document_twice_at_most(tiny_model):
    model = tiny_model("tiny-qwen")  # DOC: 13 lines, a budget of 26
    twice = '<program><copy lines="1-13"/><copy lines="1-13"/></program>'
    assert cad(model, DOC).run("x", force_program=twice).document.count("line 1 = 1\n") == 2
    thrice = '<program><copy lines="1-13"/><copy lines="1-13"/><copy lines="1-1"/></program>'
    with pytest.raises(ForcedProgramError):
        cad(model, DOC).run("x", force_program=thrice)
    assert cad(model, DOC, copy_ratio=None).run("x", force_program=thrice).complete
    # the last copy's end is capped at what is left: 3 lines after 23
    with pytest.raises(ForcedProgramError):
        cad(model, DOC).run("x", force_program='<program><copy lines="1-13"/><copy lines="1-10"/>'
                                               '<copy lines="1-4"/></program>')
    ok = cad(model, DOC).run("x", force_program='<program><copy lines="1-13"/><copy lines="1-10"/>'
                                                '<copy lines="2-4"/></program>')
    assert ok.complete and ok.document.count("line 2 = 2\n") == 3


def test_copy_indices_cap_ends_by_the_budget_at_a_valid_boundary():
    from cad_outlines.decoding.constraint import CopyIndices, copy_budget

    lines = CopyIndices.for_lines(10).limited(5)
    assert lines.can_end("5", True, 1) and not lines.can_end("6", True, 1)
    assert not lines.exhausted and lines.spend(4).can_start("9", True)
    spent = lines.spend(5)
    assert spent.exhausted and not spent.can_start("1", True)
    assert lines.budget == 5  # spending returns a new object
    # tokens 3 and 4 start inside a character: a copy from 2 with 1 unit left ends at 4
    tokens = CopyIndices.for_token_count(10, inside=[3, 4]).limited(1)
    assert tokens.can_end("4", True, 2) and not tokens.can_end("5", True, 2)
    assert copy_budget(13, 2.0) == 26 and copy_budget(13, 0.5) == 13


@pytest.mark.parametrize("bad", [0, -1.5, "2", True])
def test_copy_ratio_is_checked_when_the_generator_is_built(tiny_model, bad):
    with pytest.raises(OptionError, match="copy_ratio"):
        cad(tiny_model("tiny-qwen"), DOC, copy_ratio=bad)
