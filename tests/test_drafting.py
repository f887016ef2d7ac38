"""Drafting copy tags: drafts change how many forwards run, never what is decoded."""

from __future__ import annotations

import pytest
import torch

from cad_outlines import generator as generator_module
from cad_outlines import program
from cad_outlines.drafting import Drafter
from cad_outlines.generator import CaDGenerator, _Draft
from cad_outlines.oracle import oracle_program, oracle_tokens
from cad_outlines.program import Copy, CopyTokens, Gen
from cad_outlines.resolver import resolve
from cad_outlines.runner import TransformersRunner

from conftest import FAMILY_PRESETS, tiny_model
from test_generator import _DOCS, _cases, _structure_bias


def _run(model, doc, ops=None, **options):
    """One run; also the model's own forward count (a hook) and the final cache."""
    calls: list[int] = []
    gen = CaDGenerator(model, doc, **options)
    caches = []
    new_cache = gen.runner.new_cache
    gen.runner.new_cache = lambda: caches.append(new_cache()) or caches[-1]
    handle = model.model.register_forward_hook(lambda mod, args, out: calls.append(1))
    try:
        result = gen.run("apply the change", force_program=ops)
    finally:
        handle.remove()
    return result, len(calls), caches[-1]


# forced programs: same output, fewer forwards, counted honestly ----------------------

@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_forced_oracle_same_output_fewer_forwards(preset):
    model = tiny_model(preset)
    for case in _cases(1):
        ops = oracle_program(case["doc"], case["gold"])
        plain, plain_calls, _ = _run(model, case["doc"], ops, draft_tags=False)
        drafted, drafted_calls, _ = _run(model, case["doc"], ops)
        assert drafted.document == plain.document == case["gold"], case["id"]
        assert (drafted.program, drafted.ops, drafted.complete) == (plain.program, plain.ops, plain.complete)
        a, b = plain.stats, drafted.stats
        assert (b.decoded_tokens, b.forced_tokens, b.copied_tokens, b.splices) == \
            (a.decoded_tokens, a.forced_tokens, a.copied_tokens, a.splices)
        # the stats count every forward the model ran
        assert plain_calls == a.forward_passes and drafted_calls == b.forward_passes
        assert a.draft_tokens == a.draft_accepted == a.forwards_saved == 0
        assert b.forward_passes < a.forward_passes, case["id"]
        assert b.forward_passes + b.forwards_saved == b.decoded_tokens == a.forward_passes
        assert 0 < b.draft_accepted <= b.draft_tokens


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_logits_and_cache_after_rejected_drafts_match(preset, monkeypatch):
    """Every step's logits, rejected drafts included, equal those of a run without drafts."""
    model = tiny_model(preset)
    case = _cases(1)[0]
    ops = oracle_program(case["doc"], case["gold"])

    class Recorder:  # stands in for the alpha trace: keeps each step's logits
        def __init__(self):
            self.logits = []

        def record(self, logits, allowed, token):
            self.logits.append(logits.clone())

    monkeypatch.setattr(generator_module, "_new_trace", Recorder)
    plain, _, plain_cache = _run(model, case["doc"], ops, draft_tags=False, trace_alpha=True)
    drafted, _, drafted_cache = _run(model, case["doc"], ops, trace_alpha=True)
    assert drafted.stats.draft_tokens > drafted.stats.draft_accepted  # some draft was rejected
    assert drafted.stats.forwards_saved > 0
    steps = list(zip(plain.alpha.logits, drafted.alpha.logits))
    assert len(steps) == plain.stats.decoded_tokens == drafted.stats.decoded_tokens
    worst = max(torch.max(torch.abs(p - d)).item() for p, d in steps)
    assert worst <= 1e-4, worst
    # The cache holds exactly the program's context: rejected drafts were cropped.
    assert drafted_cache.get_seq_length() == plain_cache.get_seq_length()
    for layer in (0, -1):
        keys_p, keys_d = plain_cache.layers[layer].keys, drafted_cache.layers[layer].keys
        assert keys_p.shape == keys_d.shape
        assert torch.max(torch.abs(keys_p - keys_d)).item() <= 1e-4


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_token_granularity_and_switches(preset):
    model = tiny_model(preset)
    case = _cases(1)[1]
    adapter = CaDGenerator(model, case["doc"], granularity="tokens").adapter
    token_ops = oracle_tokens(adapter.document_ids(case["doc"]), adapter.document_ids(case["gold"]),
                              min_span=4, doc_pieces=adapter.token_pieces(case["doc"]),
                              gold_pieces=adapter.token_pieces(case["gold"]))
    assert any(isinstance(op, CopyTokens) for op in token_ops)
    plain, _, _ = _run(model, case["doc"], token_ops, granularity="tokens", draft_tags=False)
    drafted, calls, _ = _run(model, case["doc"], token_ops, granularity="tokens")
    assert drafted.document == plain.document == case["gold"]
    assert calls == drafted.stats.forward_passes < plain.stats.forward_passes
    ops = oracle_program(case["doc"], case["gold"])
    for splice, fast_forward in [(False, True), (True, False)]:
        options = dict(splice=splice, fast_forward=fast_forward)
        plain, _, _ = _run(model, case["doc"], ops, draft_tags=False, **options)
        drafted, calls, _ = _run(model, case["doc"], ops, **options)
        assert drafted.program == plain.program and drafted.document == case["gold"]
        assert calls == drafted.stats.forward_passes < plain.stats.forward_passes


# chosen tokens: greedy and sampling are exact -----------------------------------------

@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_greedy_and_sampled_programs_do_not_depend_on_drafts(preset):
    """Greedy: the same program. Sampling: a drafted token is kept iff the draw equals it,
    so with the same seed the same program, and every program is valid."""
    model = tiny_model(preset)
    gens = {(doc, draft): CaDGenerator(model, doc, max_new_tokens=48, draft_tags=draft)
            for doc in _DOCS for draft in (False, True)}
    handle = _structure_bias(model, next(iter(gens.values())).adapter)
    accepted = complete = 0
    try:
        for i in range(3 * len(_DOCS)):
            doc = _DOCS[i % len(_DOCS)]
            results = {}
            for draft in (False, True):
                gen = gens[(doc, draft)]
                gen.temperature, gen.seed = (0.0, 0) if i < len(_DOCS) else (1.0, i)
                results[draft] = gen.run("rewrite it")
            plain, drafted = results[False], results[True]
            assert drafted.program == plain.program, (gen.temperature, doc)
            assert drafted.ops == plain.ops and drafted.complete == plain.complete
            assert drafted.stats.decoded_tokens == plain.stats.decoded_tokens
            assert drafted.stats.forward_passes == plain.stats.forward_passes - drafted.stats.forwards_saved
            accepted += drafted.stats.draft_accepted
            n = len(doc.split("\n"))
            assert all(1 <= op.start <= op.end <= n for op in drafted.ops if isinstance(op, Copy))
            if drafted.complete:
                complete += 1
                assert program.parse(drafted.program) == drafted.ops
                assert drafted.document == resolve(drafted.ops, doc, "strict")
    finally:
        handle.remove()
    assert accepted > 0, "no draft was ever accepted: the test exercised nothing"
    assert complete >= 3


# the pieces -------------------------------------------------------------------------

class _FakeCache:
    def __init__(self, length):
        self.length = length

    def crop(self, n):
        assert n < 0
        self.length += n


def test_draft_verify_keeps_the_matching_prefix_and_crops_the_rest():
    cache = _FakeCache(10 + 4)  # 10 committed tokens, then a 4-token draft
    draft = _Draft(TransformersRunner.__new__(TransformersRunner), cache)  # crop needs no model
    rows = [torch.full((3,), float(k)) for k in range(4)]
    draft.add([7, 8, 9, 5], rows)
    rest, after = draft.verify([7])  # fully inside the draft: nothing to forward
    assert rest == [] and after is rows[0] and len(draft) == 3 and cache.length == 14
    rest, after = draft.verify([8, 4, 6])  # 8 kept, 4 differs: crop 9 and 5
    assert rest == [4, 6] and after is rows[1] and len(draft) == 0 and cache.length == 12
    draft.add([1, 2], rows[:2])
    cache.length += 2
    rest, after = draft.verify([3])  # rejected at once
    assert rest == [3] and after is None and cache.length == 12
    draft.add([1], rows[:1])
    cache.length += 1
    draft.discard()
    assert cache.length == 12 and len(draft) == 0


def test_drafter_predictions():
    lines = [f"line {k}" for k in range(1, 13)]
    d = Drafter(lines, "lines")
    assert d.predict("", []) == '<program><copy lines="1-12'
    assert d.predict("<program><", []) == 'copy lines="1-12'
    assert d.predict('<program><copy lines="1', []) == "-12"
    assert d.predict('<copy lines="', [Copy(1, 3)]) == ""  # a copy follows a gen, not a copy
    assert d.predict("", [Copy(1, 3)]) == "<gen>\n"
    assert d.predict("<", [Copy(1, 3)]) == "gen>\n"
    assert d.predict("", [Copy(1, 12)]) == ""  # </program> next: nothing to gain
    # after a gen: an insertion resumes at the next line, a replacement after the lines
    # that resemble the gen
    assert d.predict("<", [Copy(1, 3), Gen("\nbrand new text\n")]) == 'copy lines="4-12'
    assert d.predict("<", [Copy(1, 3), Gen("\nline 4!\nline 5!\n")]) == 'copy lines="6-12'
    assert d.predict("<gen>\nline 4.\n</", [Copy(1, 3)]) == 'gen><copy lines="5-12'
    assert d.predict("<gen>\nx = 1\n</ge", [Copy(1, 3)]) == 'n><copy lines="4-12'
    assert d.predict("<gen>\nx = 1\n", [Copy(1, 3)]) == ""
    # another start than the guess: the end index is still drafted as the last line
    assert d.predict('<copy lines="7-', [Copy(1, 3), Gen("\nz\n")]) == "12"
    assert d.predict('<copy lines="7-1', [Copy(1, 3), Gen("\nz\n")]) == "2"
    assert d.predict('<copy lines="7-2', [Copy(1, 3), Gen("\nz\n")]) == ""
    # the document's end was replaced: no copy to draft
    assert d.predict("<", [Copy(1, 11), Gen("\nline 12?\n")]) == ""
    tokens = Drafter(["a", " b", " c"], "tokens")
    assert tokens.predict("", []) == '<program><copy tokens="0-2'
    assert tokens.predict("", [CopyTokens(0, 0)]) == "<gen>"
    assert tokens.predict("", [CopyTokens(0, 0), Gen(" b!")]) == '<copy tokens="2-2'
    assert Drafter([], "tokens").predict("", []) == "<program>"
    with pytest.raises(ValueError):
        Drafter(lines, "words")


def test_an_observed_runner_sees_every_forward_and_changes_nothing():
    from cad_outlines.runner import ObservedRunner

    model = tiny_model("tiny-qwen")
    case = _cases(1)[0]
    ops = oracle_program(case["doc"], case["gold"])
    seen: list[tuple[int, int]] = []
    observed = ObservedRunner(TransformersRunner(model.model), lambda w, r, s: seen.append((w, r)))
    plain = CaDGenerator(model, case["doc"]).run("x", force_program=ops)
    watched = CaDGenerator(model, case["doc"], runner=observed).run("x", force_program=ops)
    assert watched.document == plain.document == case["gold"] and watched.program == plain.program
    assert len(seen) == watched.stats.forward_passes == plain.stats.forward_passes
    assert watched.stats.draft_tokens == plain.stats.draft_tokens > 0  # drafting stays on
    assert any(rows > 1 for _, rows in seen)  # drafted forwards return several rows
