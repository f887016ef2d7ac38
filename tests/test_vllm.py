"""CaD on vLLM against the transformers path (runs where vLLM is installed).

CI runs this file in the separate vLLM virtualenv (``scripts/vllm_venv.sh``); in the main
environment it is skipped. Each tokenizer family gets one tiny float32 random-weight
model, saved to a temporary folder and loaded by both vLLM and transformers (the same
weights), with a head size of 32 because vLLM's CPU attention has no kernel for 16.
"""

from __future__ import annotations

import functools
import gc
import json
import os

import pytest

if os.environ.get("CAD_OUTLINES_REQUIRE_VLLM") == "1":  # CI's vLLM stage: never skip
    import vllm  # noqa: F401
else:
    pytest.importorskip("vllm", reason="vLLM is not installed (see scripts/vllm_venv.sh)")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import outlines  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from cad_outlines.tools import models
from cad_outlines.language import oracle, program, syntax  # noqa: E402
from cad_outlines.engines import vllm as cad_vllm  # noqa: E402
from cad_outlines.engines import _vllm_processor  # noqa: E402
from cad_outlines.decoding.generator import CaDGenerator, ForcedProgramError  # noqa: E402
from cad_outlines.language.resolver import resolve  # noqa: E402
from cad_outlines.generate import cad

from testdata import TOKENIZERS, continuation_bias, corpus_records  # noqa: E402

pytestmark = pytest.mark.vllm
_PROCESS = _vllm_processor._RequestConstraint.__call__  # unbiased, whatever a test patches

BLOCK = 32  # vLLM's CPU block size must be a multiple of 32
HEADS = dict(num_attention_heads=2, num_key_value_heads=1)  # head size 64 / 2 = 32
ENGINE = dict(dtype="float32", block_size=BLOCK, max_model_len=8192, seed=0,
              kv_cache_memory_bytes=256 << 20)

DOC = "".join(f"value_{i} = {i * i}\n" for i in range(1, 31))
# New text that holds the stop string "/>: the request stops inside a gen and the
# driver must continue it with no splice.
PROGRAMS = [
    '<program><copy lines="1-9"/><gen>value_10 = "ten"\n</gen><copy lines="11-31"/></program>',
    '<program><gen><br class="x"/> first\n</gen><copy lines="2-2"/><copy lines="4-31"/></program>',
    '<program><copy lines="1-31"/></program>',
]


@pytest.fixture(scope="module", params=["tiny-qwen", "tiny-deepseek-coder", "tiny-codellama"])
def family(request, tmp_path_factory):
    """(vLLM LLM, Outlines transformers model of the same weights) for one family."""
    folder = models.save(request.param, tmp_path_factory.mktemp("model") / request.param,
                         tokenizer_root=TOKENIZERS, config=HEADS)
    llm = cad_vllm.load(str(folder), **ENGINE)
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype="float32")
    hf.eval()
    yield llm, outlines.from_transformers(hf, AutoTokenizer.from_pretrained(folder))
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()


def _cases() -> list[tuple[str, str]]:
    """(document, program) pairs: the fixed ones and two oracle programs of the corpus."""
    cases = [(DOC, text) for text in PROGRAMS]
    records = sorted(corpus_records(), key=lambda r: len(r["doc"]))[:2]
    for rec in records:
        cases.append((rec["doc"], program.render(oracle.oracle_program(rec["doc"], rec["gold"]))))
    return cases


SPLICES = pytest.mark.parametrize("splice", ["request", "session"])
#: A model that asks for the program's end inside a gen (see tests/test_ending.py).
PROGRAM_END_ASK = '<program><copy lines="1-2"/><gen>\n\n</program>'


@SPLICES
def test_forced_programs_give_the_hf_documents(family, splice):
    llm, hf_model = family
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=4096, splice=splice)
    cases = _cases()
    results = cad_vllm.edit_many(editor, [(doc, "edit") for doc, _ in cases],
                                 force_programs=[text for _, text in cases], progress=False)
    for (doc, text), got in zip(cases, results):
        want = CaDGenerator(hf_model, doc).run("edit", force_program=text)
        assert got.complete and want.complete
        assert got.program == want.program == text
        assert got.document == want.document == resolve(program.parse(text), doc, "strict")
        assert got.document.encode() == want.document.encode()
        assert got.ops == want.ops
        assert got.stats.splices == want.stats.splices
        assert got.stats.copied_tokens == want.stats.copied_tokens
    inside_gen = results[1].stats
    if splice == "request":
        # The "/> inside new text ended a request early: one request more than splices + 1.
        assert inside_gen.requests == inside_gen.splices + 2
    else:  # a session pauses at completed copies only
        assert all(r.stats.requests == r.stats.splices + 1 for r in results)


def test_the_compact_prompt_gives_the_hf_loops_program_and_prompt(family):
    from cad_outlines.decoding.prompts import PromptError

    llm, hf_model = family
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=4096, prompt_style="compact")
    assert cad_vllm.VLLMEditor(llm).prompt_style == "full"  # the tiny models record no style
    with pytest.raises(PromptError, match="prompt_style must be one of"):
        cad_vllm.VLLMEditor(llm, prompt_style="short")
    doc, text = _cases()[0]
    got = editor.run(doc, "edit", force_program=text)
    want = CaDGenerator(hf_model, doc, prompt_style="compact").run("edit", force_program=text)
    assert got.document == want.document and got.program == want.program == text
    assert got.stats.prompt_tokens == want.stats.prompt_tokens


def test_a_crlf_file_comes_back_crlf_as_on_transformers(family):
    # The model reads the file's "\n" form; the new line gets "\r\n" like the copied ones.
    llm, hf_model = family
    doc = DOC.replace("\n", "\r\n")
    got = cad_vllm.VLLMEditor(llm, max_new_tokens=4096).run(doc, "edit", force_program=PROGRAMS[0])
    want = CaDGenerator(hf_model, doc).run("edit", force_program=PROGRAMS[0])
    assert got.document == want.document == DOC.replace("value_10 = 100", 'value_10 = "ten"').replace("\n", "\r\n")
    assert got.stats.prompt_tokens == want.stats.prompt_tokens


def test_splices_hit_the_prefix_cache(family):
    llm, _ = family
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=4096, splice="request")
    doc, text = _cases()[0]
    stats = editor.run(doc + "# a fresh document\n", "edit", force_program=text).stats
    assert stats.requests == 3 and stats.splices == 2
    # Every continuation reuses its whole previous context up to the last full block.
    assert stats.splice_reusable_block_tokens > stats.splice_reusable_tokens - BLOCK * (stats.requests - 1)
    assert stats.splice_cached_tokens >= stats.splice_reusable_block_tokens > 0
    assert len(stats.first_token_seconds) == stats.requests
    assert stats.prompt_tokens_computed < stats.prompt_tokens_cached


def test_a_session_keeps_its_kv_so_only_the_spans_are_prefilled(family):
    """``splice="session"``: the edit is one resumable request, so no stretch recomputes
    the context's last partial block or waits for the prefix cache; the spans and the
    first prompt are all it prefills."""
    llm, _ = family
    doc, text = _cases()[0]
    doc += "# a document no earlier test cached\n"
    stats = {}
    for splice in ("request", "session"):
        llm.reset_prefix_cache()
        editor = cad_vllm.VLLMEditor(llm, max_new_tokens=4096, splice=splice)
        result = editor.run(doc, "edit", force_program=text)
        assert result.document == resolve(program.parse(text), doc, "strict")
        stats[splice] = result.stats
    request, session = stats["request"], stats["session"]
    assert session.requests == request.requests == 3 and session.splices == 2
    assert session.prompt_tokens_computed == session.prompt_tokens + session.copied_tokens
    assert session.prompt_tokens_computed < request.prompt_tokens_computed
    assert len(session.first_token_seconds) == session.requests


@SPLICES
def test_greedy_matches_the_hf_loop(family, splice):
    """Same weights, float32, greedy: the same program token for token.

    The transformers loop runs with ``fast_forward=False`` (vLLM has no fast-forward:
    every program token is chosen by argmax under the mask, on both paths).
    """
    llm, hf_model = family
    doc = _cases()[3][0]
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=40, splice=splice)
    got = editor.run(doc, "add a docstring")
    want = cad(hf_model, doc, max_new_tokens=40, fast_forward=False,
               draft_tags=False).run("add a docstring")
    assert got.program == want.program
    assert got.complete == want.complete
    assert got.ops == want.ops
    assert got.document == want.document


@SPLICES
def test_budget_flags_incomplete_programs_as_the_hf_loop(family, splice):
    llm, hf_model = family
    doc, text = _cases()[0]
    budget = 20  # runs out before </program>
    got = cad_vllm.VLLMEditor(llm, max_new_tokens=budget, splice=splice).run(doc, "edit", force_program=text)
    want = cad(hf_model, doc, max_new_tokens=budget, fast_forward=False,
               draft_tags=False).run("edit", force_program=text)
    assert not got.complete and got.document is None and got.stats.stopped_early
    assert got.stats.stop_reason == want.stats.stop_reason == "max_new_tokens"
    assert got.program == want.program and got.ops == want.ops
    assert got.ops == program.parse(text)[:len(got.ops)] and len(got.ops) < 3
    assert got.stats.decoded_tokens == budget


@SPLICES
@pytest.mark.parametrize("bad", ['<copy lines="5-3"/>', '<copy lines="1-99"/>',
                                 '<copy lines="1-3"/><copy lines="1-99"/>'])
def test_index_rules_reject_forced_copies(family, bad, splice):
    llm, _ = family
    editor = cad_vllm.VLLMEditor(llm, splice=splice)
    with pytest.raises(ForcedProgramError, match="rejected by the constraint"):
        editor.run(DOC, "edit", force_program=f"<program>{bad}</program>")
    assert not llm.llm_engine.has_unfinished_requests()  # nothing left paused in the engine


@SPLICES
def test_a_model_that_records_monotone_copies_holds_them_on_vllm(family, splice, monkeypatch):
    """As on transformers (``LoopSwitches(monotone_copies="model")``): a model whose config
    records ``cad_monotone_copies`` (the fine-tuned presets, saved) gets copies in order,
    in the driver's constraint and in the engine-side processor's."""
    from cad_outlines.engines._vllm_sessions import EditSession

    llm, _ = family
    backwards = '<program><copy lines="5-9"/><copy lines="3-4"/><copy lines="10-31"/></program>'
    assert cad_vllm.VLLMEditor(llm, splice=splice).run(DOC, "edit", force_program=backwards).complete
    monkeypatch.setattr(llm.model_config.hf_config, "cad_monotone_copies", True, raising=False)
    editor = cad_vllm.VLLMEditor(llm, splice=splice)
    _, params = EditSession(editor, DOC, "edit", None).next_request()
    assert params.extra_args[cad_vllm.EXTRA_KEY]["monotone"] is True
    with pytest.raises(ForcedProgramError, match="rejected by the constraint"):
        editor.run(DOC, "edit", force_program=backwards)
    assert not llm.llm_engine.has_unfinished_requests()
    assert editor.run(DOC, "edit", force_program=PROGRAMS[0]).document == resolve(program.parse(PROGRAMS[0]), DOC)


@SPLICES
def test_a_prediction_is_a_prior_as_on_the_hf_loop(family, splice):
    """A snippet's merge as the prediction: with a floor every allowed token clears, even
    random weights write the merge, in the program the transformers loop writes; with
    no floor the prediction is not used."""
    from cad_outlines.decoding.document import DocumentView

    llm, hf_model = family
    update = "value_1 = 1\nvalue_2 = 'four'\nvalue_3 = 9\n# ... existing code ...\n"
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=80, splice=splice, follow_prediction=1e-12)
    merged = DocumentView(DOC, editor.adapter).merged(update)
    assert merged == DOC.replace("value_2 = 4\n", "value_2 = 'four'\n")
    got = editor.run(DOC, "apply it", prediction=merged)
    want = cad(hf_model, DOC, max_new_tokens=80, follow_prediction=1e-12).run("apply it", prediction=merged)
    assert got.document == want.document == merged
    assert got.program == want.program == program.render(oracle.oracle_program(DOC, merged))
    assert editor.predicted(DOC, update) == merged
    assert editor.apply(DOC, update) == merged  # the snippet as the instruction, its merge followed
    off = cad_vllm.VLLMEditor(llm, max_new_tokens=30, splice=splice, follow_prediction=None)
    assert off.run(DOC, "apply it", prediction=merged).document != merged
    from cad_outlines.errors import OptionError

    with pytest.raises(OptionError, match="follow_prediction must be a number"):
        cad_vllm.VLLMEditor(llm, follow_prediction=2.0)


@SPLICES
def test_a_model_asking_for_the_end_inside_a_gen_gets_it_on_vllm(family, splice, monkeypatch):
    """As on transformers (tests/test_ending.py): where the model's top token would
    complete ``</program>`` inside a gen, the processor ends the request and the driver
    ends the program there, instead of decoding to the budget. The model is biased
    inside the engine (one process in tests) toward one program text."""
    llm, _ = family
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=120, splice=splice)
    adapter = editor.adapter
    wants = functools.partial(_wanting, adapter)
    for wanted, program_text in (
            (PROGRAM_END_ASK, '<program><copy lines="1-2"/></program>'),
            ('<program><copy lines="1-2"/><gen>\nvalue_3 = 0\n</program>',
             '<program><copy lines="1-2"/><gen>\nvalue_3 = 0\n</gen></program>')):
        monkeypatch.setattr(_vllm_processor._RequestConstraint, "__call__", wants(wanted))
        got = editor.run(DOC, "edit")
        assert got.complete and got.stats.ended_in_gen, got.program
        assert got.program == program_text
        assert got.document == resolve(program.parse(program_text), DOC)
        assert not llm.llm_engine.has_unfinished_requests()  # nothing left paused in the engine
    # a document holding </program> as text: no ending is inferred, as on transformers
    monkeypatch.setattr(_vllm_processor._RequestConstraint, "__call__", wants(PROGRAM_END_ASK))
    got = cad_vllm.VLLMEditor(llm, max_new_tokens=40, splice=splice).run(DOC + "</program>\n", "edit")
    typed = PROGRAM_END_ASK[:-1]  # typed in full, then the grammar refuses the ">"
    assert not got.stats.ended_in_gen and got.program.startswith(typed) and not got.program.startswith(PROGRAM_END_ASK)
    assert not llm.llm_engine.has_unfinished_requests()


def _wanting(adapter, wanted: str):
    """The engine-side processor's ``__call__``, biased toward the program text ``wanted``
    (vLLM runs in this process in tests): a model that wants one program."""
    boost = continuation_bias(adapter, wanted)

    def biased(self, output_ids, logits):
        boost(self.constraint.text + adapter.decode(output_ids[self.seen:]), logits)
        return _PROCESS(self, output_ids, logits)
    return biased


@pytest.mark.parametrize("splice", ["request", "session"])
def test_a_gen_repeating_itself_stops_the_edit_on_vllm(family, splice, monkeypatch):
    """As on transformers (tests/test_repetition.py): a gen body looping past anything in
    the document ends the request; the driver stops the edit, ``stop_reason ==
    "repetition"``, long before the budget; ``repetition_guard=False`` runs to it."""
    from cad_outlines.decoding.repetition import MIN_CHARS, looping

    llm, _ = family
    unit = "uint64_t /*ne13*/, "
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=400, splice=splice)
    monkeypatch.setattr(_vllm_processor._RequestConstraint, "__call__",
                        _wanting(editor.adapter, '<program><copy lines="1-2"/><gen>\n    f(' + unit * 200))
    got = editor.run(DOC, "edit")
    assert not got.complete and got.stats.stopped_early and got.stats.stop_reason == "repetition", got.program
    body = got.program.split("<gen>", 1)[1]
    assert looping(body, DOC) is not None and len(body) < MIN_CHARS + 3 * len(unit) + 8  # stopped at once
    assert not llm.llm_engine.has_unfinished_requests()
    off = cad_vllm.VLLMEditor(llm, max_new_tokens=400, splice=splice, repetition_guard=False).run(DOC, "edit")
    assert off.stats.stop_reason == "max_new_tokens" and len(off.program) > len(got.program) + 100
    assert not llm.llm_engine.has_unfinished_requests()


def test_the_processor_refuses_malformed_arguments_at_the_request():
    """Checked when vLLM takes the request (a ValueError to its caller): inside the engine
    an exception would take every request down."""
    from vllm import SamplingParams

    from cad_outlines.engines._vllm_processor import CaDLogitsProcessor

    follow = {"plan": "<program></program>", "lines": [], "floor": 0.5, "adapter": "qwen"}
    base = {"eos": 0, "upper": 3, "granularity": "lines", "replay": []}
    CaDLogitsProcessor.validate_params(SamplingParams(extra_args={"cad": {**base, "follow": follow}}))
    for bad, says in (({**follow, "adapter": "nope"}, "'adapter'] must be one of"),
                      ({**follow, "floor": "high"}, "'floor'] must be of type float"), ("x", "'plan'] must be of type str")):
        with pytest.raises(ValueError, match=says):
            CaDLogitsProcessor.validate_params(SamplingParams(extra_args={"cad": {**base, "follow": bad}}))
    with pytest.raises(ValueError, match="'upper'] must be of type int"):
        CaDLogitsProcessor.validate_params(SamplingParams(extra_args={"cad": {**base, "upper": "3"}}))


@SPLICES
def test_seeded_sampling_is_reproducible(family, splice):
    llm, _ = family
    editor = cad_vllm.VLLMEditor(llm, max_new_tokens=24, temperature=1.0, seed=7, splice=splice)
    first, second = (editor.run(DOC, "edit") for _ in range(2))
    assert first.program == second.program
    other = cad_vllm.VLLMEditor(llm, max_new_tokens=24, temperature=1.0, seed=8, splice=splice).run(DOC, "edit")
    assert other.program != first.program
    assert first.program.startswith(syntax.PROGRAM_OPEN)


def _lines_where(editor, holds) -> int:
    """The fewest lines ``x = 1`` (in steps of 10) whose ``_sizes`` satisfy ``holds``
    (each family's tokenizer packs them differently)."""
    return next(n for n in range(10, 4000, 10) if holds(*_sizes(editor, "x = 1\n" * n)))


def _sizes(editor, doc: str) -> tuple[int, int, int]:
    """The CaD prompt, the plain prompt and a whole copy of ``doc``, in tokens."""
    from cad_outlines.decoding.document import DocumentView

    view = DocumentView(doc, editor.adapter)
    prompt = editor.adapter.prompt_ids(view.text, "edit", "lines", style=editor.prompt_style)
    return len(prompt), len(editor.adapter.plain_prompt_ids(view.text, "edit")), view.whole_copy_tokens


@SPLICES
def test_an_edit_that_cannot_fit_max_model_len_is_refused_before_its_first_request(family, splice):
    """As on transformers: the prompt fits the engine's 8,192 positions but the prompt and a
    copy of the document do not, so no edit keeping it can finish: refused, no request sent."""
    from cad_outlines.errors import ContextLengthError

    llm, _ = family
    editor = cad_vllm.VLLMEditor(llm, splice=splice)
    doc = "x = 1\n" * _lines_where(editor, lambda prompt, plain, copy: prompt + copy > 8192)
    prompt, _, copy = _sizes(editor, doc)
    assert prompt < 8192 < prompt + copy, (prompt, copy)  # the case this test is about
    with pytest.raises(ContextLengthError, match="an edit that keeps the document cannot finish"):
        editor.run(doc, "edit")
    too_long = "x = 1\n" * _lines_where(editor, lambda prompt, plain, copy: plain + copy > 8192)
    _, plain, copy = _sizes(editor, too_long)
    assert plain < 8192 < plain + copy, (plain, copy)
    with pytest.raises(ContextLengthError):  # the baseline retypes it: refused alike
        editor.regenerate_many([(too_long, "edit")], progress=False)
    assert not llm.llm_engine.has_unfinished_requests()


@SPLICES
def test_copies_that_would_cross_max_model_len_stop_the_edit_flagged_incomplete(family, splice):
    """A program copying the document twice: the first copy fits, the second's span would
    carry the context past max_model_len, so the edit stops once it is chosen, incomplete,
    instead of sending vLLM a request it refuses."""
    llm, _ = family
    editor = cad_vllm.VLLMEditor(llm, splice=splice)
    lines = _lines_where(editor, lambda prompt, plain, copy: prompt + 2 * copy > 8192)
    doc = "x = 1\n" * lines
    prompt, _, copy = _sizes(editor, doc)
    assert prompt + copy + 40 < 8192 < prompt + 2 * copy, (prompt, copy)
    twice = f'<program><copy lines="1-{lines + 1}"/><copy lines="1-{lines + 1}"/></program>'
    result = editor.run(doc, "edit", force_program=twice)
    assert not result.complete and result.document is None
    assert result.stats.stopped_early and result.stats.stop_reason == "context"
    assert result.ops == program.parse(twice)
    assert not llm.llm_engine.has_unfinished_requests()


def test_not_an_engine_is_a_clear_error():
    with pytest.raises(cad_vllm.EngineSetupError, match="expected a vLLM LLM"):
        cad_vllm.VLLMEditor(object())


def test_forced_regeneration_types_the_gold(family):
    llm, _ = family
    editor = cad_vllm.VLLMEditor(llm)
    doc, text = _cases()[0]
    gold = resolve(program.parse(text), doc, "strict")
    (regen,) = editor.regenerate_many([(doc, "edit")], targets=[gold], progress=False)
    (cad,) = editor.run_many([(doc, "edit")], force_programs=[text], progress=False)
    assert regen.complete and regen.document == gold == cad.document
    assert regen.stats.decoded_tokens == len(editor.adapter.encode(gold))
    assert regen.stats.requests == 1 and regen.ops == []
    # The baseline's prompt is the plain one by default, as on transformers.
    assert regen.stats.prompt_tokens == len(editor.adapter.plain_prompt_ids(doc, "edit"))
    # The point of CaD: far fewer decoded tokens for the same document.
    assert cad.stats.decoded_tokens < regen.stats.decoded_tokens / 3


def test_async_engine_runs_edits_concurrently(tmp_path):
    """AsyncLLM (its engine core in a process of its own): eight edits as coroutines."""
    folder = models.save("tiny-qwen", tmp_path / "tiny-qwen", tokenizer_root=TOKENIZERS,
                         config=HEADS)
    engine = cad_vllm.load(str(folder), async_engine=True, **ENGINE)
    try:
        cases = (_cases()[:3] * 3)[:8]
        edits = [(doc, f"edit {k}") for k, (doc, _) in enumerate(cases)]
        forced = [text for _, text in cases]

        # Two synchronous batches on one AsyncLLM: the second must find the engine's output
        # handler alive (it lives in the event loop of the engine's first request).
        for splice in ("request", "session"):
            editor = cad_vllm.VLLMEditor(engine, max_new_tokens=4096, splice=splice)
            results = cad_vllm.edit_many(editor, edits, force_programs=forced, progress=False)
            for (doc, text), got in zip(cases, results):
                assert got.document == resolve(program.parse(text), doc, "strict")
                assert len(got.stats.first_token_seconds) == got.stats.requests
            assert sum(r.stats.splice_cached_tokens for r in results) > 0
    finally:
        engine.shutdown()


def test_outlines_vllm_offline_model_is_accepted(family):
    llm, _ = family
    editor = cad_vllm.VLLMEditor(outlines.from_vllm_offline(llm))
    assert editor.engine is llm
    assert editor.run(DOC, "edit", force_program=PROGRAMS[2]).document == DOC


@SPLICES
def test_token_granularity_forced_oracle_matches_hf(family, splice):
    llm, hf_model = family
    editor = cad_vllm.VLLMEditor(llm, granularity="tokens", max_new_tokens=4096, splice=splice)
    a = editor.adapter
    doc, gold = DOC, DOC.replace("value_10 = 100", "value_10 = 'ten'")
    ops = oracle.oracle_tokens(a.document_ids(doc), a.document_ids(gold), min_span=4,
                               doc_pieces=a.token_pieces(doc), gold_pieces=a.token_pieces(gold))
    got = editor.run(doc, "edit", force_program=ops)
    want = CaDGenerator(hf_model, doc, granularity="tokens").run("edit", force_program=ops)
    assert got.document == want.document == gold
    assert got.program == want.program and got.ops == want.ops
    assert got.stats.copied_tokens == want.stats.copied_tokens > 0


def test_cli_edits_many_files_on_vllm_as_on_transformers(tmp_path, capsys):
    """``cad-outlines edit --engine vllm`` on several files: the transformers path's output."""
    from cad_outlines.cli import main

    folder = models.save("tiny-qwen", tmp_path / "tiny-qwen", tokenizer_root=TOKENIZERS,
                         config=HEADS)
    docs = {"a.py": DOC, "b.py": DOC.replace("value_3 = 9", "value_3 = 'nine'")}
    forced = tmp_path / "forced.prog"
    forced.write_text(PROGRAMS[0], encoding="utf-8")
    records = {}
    for engine in ("vllm", "transformers"):
        names = []
        for name, doc in docs.items():
            (tmp_path / engine).mkdir(exist_ok=True)
            (tmp_path / engine / name).write_text(doc, encoding="utf-8")
            names.append(str(tmp_path / engine / name))
        extra = ["--kv-cache-gib", "0.25", "--max-model-len", "8192"] if engine == "vllm" else []
        status = main(["edit", *names, "--instruction", "edit", "--engine", engine, "--model", str(folder),
                       "--dtype", "float32", "--force-program", str(forced), "--in-place", "--json",
                       "-q", *extra])
        assert status == 0
        records[engine] = json.loads(capsys.readouterr().out)
        for name, doc in docs.items():
            written = (tmp_path / engine / name).read_text(encoding="utf-8")
            assert written == resolve(program.parse(PROGRAMS[0]), doc, "strict") != doc
    for got, want in zip(records["vllm"], records["transformers"], strict=True):
        assert got["document"] == want["document"] and got["program"] == want["program"] == PROGRAMS[0]
        assert got["ops"] == want["ops"] and got["summary"] == want["summary"]
        assert got["written"].replace("vllm", "transformers") == want["written"]
        assert got["stats"]["requests"] == 3 and got["stats"]["copied_tokens"] == want["stats"]["copied_tokens"]


def test_cli_applies_a_snippet_on_vllm_as_on_transformers(tmp_path, capsys):
    """``edit --update SNIPPET --engine vllm``: the merge is the same prior as on
    transformers (a floor random weights clear writes it), and a snippet with no merge is
    said on stderr."""
    from cad_outlines.cli import main

    folder = models.save("tiny-qwen", tmp_path / "tiny-qwen", tokenizer_root=TOKENIZERS, config=HEADS)
    snippet, unplaced = tmp_path / "u.py", tmp_path / "n.py"
    snippet.write_text("value_2 = 4\nvalue_3 = 'nine'\nvalue_4 = 16\n# ... existing code ...\n", encoding="utf-8")
    unplaced.write_text("# ... existing code ...\nvalue_99 = 0\n# ... existing code ...\n", encoding="utf-8")
    written = {}
    for engine in ("vllm", "transformers"):
        src = tmp_path / f"{engine}.py"
        src.write_text(DOC, encoding="utf-8")
        extra = ["--kv-cache-gib", "0.25", "--max-model-len", "8192"] if engine == "vllm" else []
        assert main(["edit", str(src), "--update", str(snippet), "--engine", engine, "--model", str(folder),
                     "--dtype", "float32", "--follow-prediction", "1e-12", "-i", "-q", *extra]) == 0
        written[engine] = src.read_text(encoding="utf-8")
    assert written["vllm"] == written["transformers"] == DOC.replace("value_3 = 9\n", "value_3 = 'nine'\n")
    capsys.readouterr()
    src = tmp_path / "other.py"
    src.write_text(DOC, encoding="utf-8")
    main(["edit", str(src), "--update", str(unplaced), "--engine", "vllm", "--model", str(folder), "--dtype",
          "float32", "--max-new-tokens", "16", "--kv-cache-gib", "0.25", "--max-model-len", "8192", "-o",
          str(tmp_path / "out.py")])
    assert f"{src}: the snippet cannot be placed by its own lines" in capsys.readouterr().err


def test_cli_stdout_holds_only_the_json_records(tmp_path):
    """As a user runs it (its own process): vLLM logs to stdout by default, which would
    break ``--json`` (and a document printed without ``-o``); its log goes to stderr."""
    import subprocess
    import sys

    folder = models.save("tiny-qwen", tmp_path / "tiny-qwen", tokenizer_root=TOKENIZERS, config=HEADS)
    src, forced = tmp_path / "a.py", tmp_path / "forced.prog"
    src.write_text(DOC, encoding="utf-8")
    forced.write_text(PROGRAMS[0], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_LOGGING")}
    done = subprocess.run([sys.executable, "-m", "cad_outlines", "edit", str(src), "--instruction", "edit",
                           "--engine", "vllm", "--model", str(folder), "--dtype", "float32",
                           "--force-program", str(forced), "--json", "--kv-cache-gib", "0.25",
                           "--max-model-len", "8192"], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    records = json.loads(done.stdout)  # nothing but the records
    assert records[0]["document"] == resolve(program.parse(PROGRAMS[0]), DOC, "strict")
    assert "WARNING" in done.stderr  # vLLM's start-up warnings went here


def test_cli_folder_vllm_cannot_load_is_a_usage_error(tmp_path, capsys):
    from cad_outlines.cli import main

    src = tmp_path / "a.py"
    src.write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    assert main(["edit", str(src), "--instruction", "x", "--engine", "vllm", "--model", str(tmp_path / "empty"),
                 "-q"]) == 2
    err = capsys.readouterr().err
    assert "vLLM cannot start on this folder" in err and str(tmp_path / "empty") in err
    assert "Traceback" not in err and src.read_text(encoding="utf-8") == "x = 1\n"


def test_cli_names_the_file_that_cannot_fit_max_model_len_and_writes_nothing(tmp_path, capsys):
    from cad_outlines.cli import main

    folder = models.save("tiny-qwen", tmp_path / "tiny-qwen", tokenizer_root=TOKENIZERS, config=HEADS)
    small, big = tmp_path / "small.py", tmp_path / "big.py"
    small.write_text(DOC, encoding="utf-8")
    big.write_text("x = 1\n" * 700, encoding="utf-8")  # prompt fits 8,192; prompt and a copy do not
    assert main(["edit", str(small), str(big), "--instruction", "x", "--engine", "vllm", "--model", str(folder),
                 "--dtype", "float32", "--kv-cache-gib", "0.25", "--max-model-len", "8192", "-i", "-q"]) == 2
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]  # after the model's loading output
    assert line.startswith(f"cad-outlines edit: error: {big}: the prompt is"), err
    assert "positions (max_model_len), so an edit that keeps the document cannot finish" in line
    assert "Traceback" not in err
    assert small.read_text(encoding="utf-8") == DOC and big.read_text(encoding="utf-8") == "x = 1\n" * 700


def test_the_editor_checks_sampling_like_the_loop_and_refuses_what_it_cannot_honour():
    from cad_outlines.decoding.sampler import OptionError

    with pytest.raises(OptionError, match="top_p must be in"):
        cad_vllm.VLLMEditor(object(), top_p=0.0)
    for name, value in (("top_k", 5), ("min_p", 0.1), ("repetition_penalty", 1.2)):
        with pytest.raises(OptionError, match=f"does not support {name}"):
            cad_vllm.VLLMEditor(object(), **{name: value})
    with pytest.raises(cad_vllm.EngineSetupError):  # defaults pass the check; then the engine is checked
        cad_vllm.VLLMEditor(object(), top_k=0, min_p=0.0, repetition_penalty=1.0)
    # granularity, mode and budget: the loop's checks and messages too
    for options, message in (({"granularity": "chars"}, "granularity must be"), ({"mode": "loose"}, "mode must be"),
                             ({"max_new_tokens": 0}, "max_new_tokens must be an integer >= 1")):
        with pytest.raises(OptionError, match=message):
            cad_vllm.VLLMEditor(object(), **options)
        with pytest.raises(OptionError, match=message):
            CaDGenerator.for_tokenizer(object(), "a\n", object(), **options)



def test_bench_serve_runs_every_row_on_a_tiny_model(tmp_path):
    """``bench serve`` end to end (both engines, every row, the report), two small edits:
    the benchmark's own code paths, not its numbers.

    Kept last in this file: after its engines, an ``LLM`` started in the same process failed
    in vLLM 0.32's CPU kernel registration (``register_triton_kernel_overrides``:
    ``'_lib_fn_wrapper' object has no attribute 'get'``); each CLI command is a process
    of its own, so users do not meet it."""
    from cad_outlines.bench.serve import ServeConfig, run_serve
    from cad_outlines.bench.serve_report import format_serve

    from testdata import CORPUS_SAMPLE

    folder = models.save("tiny-qwen", tmp_path / "tiny-qwen", tokenizer_root=TOKENIZERS, config=HEADS)
    record = run_serve(ServeConfig(model=str(folder), corpus=str(CORPUS_SAMPLE), edits=2,
                                   max_doc_chars=1500, dtype="float32", kv_cache_gib=0.25, max_model_len=8192))
    runs = record["runs"]
    for name in ("regen", "cad", "cad-session"):
        assert runs[name]["exact_match"] == 2, name  # every row forced or teacher-forced the gold
    assert runs["cad-session"]["requests"] == runs["cad-session"]["splices"] + 2
    assert runs["cad-session"]["prefill_computed"] < runs["cad"]["prefill_computed"]
    assert "one session per edit" in format_serve(record)

