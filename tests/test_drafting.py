"""Drafting copy tags: drafts change how many forwards run, never what is decoded."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from cad_outlines.decoding import generator as generator_module
from cad_outlines.language import escape, program, syntax
from cad_outlines.decoding.drafting import DraftBudget, Drafter, ForwardCost, similarity
from cad_outlines.decoding.tree import DraftTree, PendingDraft
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.language.oracle import oracle_program, oracle_tokens
from cad_outlines.language.program import Copy, CopyTokens, Gen
from cad_outlines.language.resolver import resolve
from cad_outlines.decoding.runner import ObservedRunner, TransformersRunner
from cad_outlines.generate import cad

from testdata import FAMILY_PRESETS, TOKENIZERS
from testdata import _DOCS, _cases, _structure_bias


def _run(model, doc, ops=None, **options):
    """One run; also the model's own forward count (a hook) and the final cache."""
    calls: list[int] = []
    gen = cad(model, doc, **options)
    caches = []
    new_cache = gen.runner.new_cache
    gen.runner.new_cache = lambda: caches.append(new_cache()) or caches[-1]
    handle = model.model.register_forward_hook(lambda mod, args, out: calls.append(1))
    try:
        result = gen.run("apply the change", force_program=ops)
    finally:
        handle.remove()
    # a tree after a long prefill is one forward of the loop in two model calls (TREE_SPLIT);
    # a long splice one in several (SPLICE_CHUNK)
    return result, len(calls) - gen.runner.tree_splits - gen.runner.chunk_calls, caches[-1]


# forced programs: same output, fewer forwards, counted honestly ----------------------

@pytest.mark.slow
@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_forced_oracle_same_output_fewer_forwards(preset, tiny_model):
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
        # without drafts every gen-body token but the last costs a forward of its own
        body = sum(len(model.hf_tokenizer.encode(op.text.strip("\n"), add_special_tokens=False))
                   for op in ops if isinstance(op, Gen))
        assert 0 < b.body_forwards <= a.body_forwards < a.forward_passes
        assert a.body_forwards >= body // 2  # (tokens at a body's edges merge with the tags)


def test_body_forwards_count_only_forwards_after_gen_text(tiny_model):
    model = tiny_model(FAMILY_PRESETS[0])
    doc = "".join(f"row_{k} = {k}\n" for k in range(12))
    copies_only, _, _ = _run(model, doc, [Copy(1, 3), Copy(5, 13)], draft_tags=False)
    assert copies_only.stats.body_forwards == 0 < copies_only.stats.forward_passes
    edited, _, _ = _run(model, doc, [Copy(1, 3), Gen("\nrow_3 = 'three hundred and three'\n"), Copy(5, 13)],
                        draft_tags=False)
    assert 5 <= edited.stats.body_forwards < edited.stats.forward_passes


def test_forwards_are_counted_by_what_they_followed(tiny_model):
    """Splices, copy-index tokens and gen text each count the forwards that followed them;
    the prefill and the forwards after other tags are the rest."""
    model = tiny_model(FAMILY_PRESETS[0])
    doc = "".join(f"row_{k} = {k}\n" for k in range(120))
    ops = [Copy(1, 30), Gen("\nrow_30 = 'thirty'\n"), Copy(32, 77), Copy(79, 121)]
    for switches in ({"draft_tags": False}, {}):
        result, calls, _ = _run(model, doc, ops, **switches)
        st = result.stats
        assert result.document is not None and calls == st.forward_passes
        assert st.splice_forwards == st.splices == 3  # each copy's span rides a forward of its own
        assert st.body_forwards >= 1
        other = st.forward_passes - 1 - st.splice_forwards - st.index_forwards - st.body_forwards
        assert other >= 0
        if switches.get("draft_tags", True):  # drafted: the last copy's end (121) is the drafted last line
            assert st.index_forwards < plain.index_forwards
        else:
            plain = st
            # the end digits of 30, 77 and 121 and the start digits of 32, 79 and 121 are chosen
            # one token at a time (Qwen's digits are single tokens; closes and splices excepted)
            assert st.index_forwards >= 6


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_logits_and_cache_after_rejected_drafts_match(preset, monkeypatch, tiny_model):
    """Every step's logits, rejected drafts included, equal those of a run without drafts."""
    model = tiny_model(preset)
    case = _cases(1)[0]
    ops = oracle_program(case["doc"], case["gold"])

    class Recorder:  # stands in for the alpha trace: keeps each step's logits
        def __init__(self):
            self.logits = []

        def record(self, logits, allowed, token):
            self.logits.append(logits.clone())

    monkeypatch.setattr(generator_module, "AlphaTrace", Recorder)
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
def test_token_granularity_and_switches(preset, tiny_model):
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

@pytest.mark.slow
@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_greedy_and_sampled_programs_do_not_depend_on_drafts(preset, tiny_model):
    """Greedy: the same program. Sampling: a drafted token is kept iff the draw equals it,
    so with the same seed the same program, and every program is valid."""
    model = tiny_model(preset)
    # drafts off, tag drafts only, tag drafts and gen-body lookup (the default)
    settings = {False: dict(draft_tags=False), "tags": dict(draft_lookup=False), True: {}}
    gens = {(doc, draft): cad(model, doc, max_new_tokens=48, **settings[draft])
            for doc in _DOCS for draft in settings}
    handle = _structure_bias(model, next(iter(gens.values())).adapter)
    accepted = complete = 0
    try:
        for i in range(3 * len(_DOCS)):
            doc = _DOCS[i % len(_DOCS)]
            results = {}
            for draft in settings:
                gen = gens[(doc, draft)]
                sampling = dict(temperature=0.0, seed=0) if i < len(_DOCS) else dict(temperature=1.0, seed=i)
                results[draft] = gen.run("rewrite it", **sampling)
            plain, drafted = results[False], results[True]
            assert results["tags"].program == plain.program, (sampling, doc)
            assert drafted.program == plain.program, (sampling, doc)
            assert drafted.ops == plain.ops and drafted.complete == plain.complete
            assert drafted.stats.decoded_tokens == plain.stats.decoded_tokens
            assert drafted.stats.forward_passes == plain.stats.forward_passes - drafted.stats.forwards_saved
            accepted += drafted.stats.draft_accepted
            n = len(syntax.copy_lines(doc))
            assert all(1 <= op.start <= op.end <= n for op in drafted.ops if isinstance(op, Copy))
            if drafted.complete:
                complete += 1
                assert program.parse(drafted.program) == drafted.ops
                assert drafted.document == gen.view.restore(resolve(drafted.ops, gen.view.text, "strict"))
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
    budget = DraftBudget(None)
    draft = PendingDraft(TransformersRunner.__new__(TransformersRunner), cache, budget)  # crop needs no model
    rows = [torch.full((3,), float(k)) for k in range(4)]
    draft.add(DraftTree.chain([7, 8, 9, 5], "lookup_short"), rows)
    rest, after = draft.verify([7])  # fully inside the draft: nothing to forward
    assert rest == [] and after is rows[0] and len(draft) == 3 and cache.length == 14
    rest, after = draft.verify([8, 4, 6])  # 8 kept, 4 differs: crop 9 and 5
    assert rest == [4, 6] and after is rows[1] and len(draft) == 0 and cache.length == 12
    # its fate reached the budget: one draft, first token kept, one more kept, then a miss
    assert budget.counts["lookup_short"] == [a + b for a, b in zip(DraftBudget.PRIOR["lookup_short"], (1, 1, 1, 1))]
    draft.add(DraftTree.chain([1, 2], "tag"), rows[:2])
    cache.length += 2
    rest, after = draft.verify([3])  # rejected at once
    assert rest == [3] and after is None and cache.length == 12
    assert budget.counts["tag"] == [a + b for a, b in zip(DraftBudget.PRIOR["tag"], (1, 0, 0, 0))]
    draft.add(DraftTree.chain([1], "tag"), rows[:1])
    cache.length += 1
    draft.discard()
    assert cache.length == 12 and len(draft) == 0


def test_drafter_predictions():
    lines = [f"line {k}" for k in range(1, 13)]
    d = Drafter(lines, "lines")
    assert d.predict("", []) == '<program><copy lines="1-12'
    assert d.predict("<program><", []) == 'copy lines="1-12'
    assert d.predict('<program><copy lines="1', []) == "-12"
    # a copy right after a copy (a deletion): drafted as skipping one line, to the end
    assert d.predict('<copy lines="', [Copy(1, 3)]) == "5-12"
    assert d.predict('<copy lines="', [Copy(1, 11)]) == ""  # nothing left to skip to
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


def test_a_repetitive_gen_body_costs_one_bounded_search(monkeypatch):
    # Regression: each prefix of </gen> re-ran a difflib search over up to 32 runs, and one
    # difflib ratio of two repetitive 1,000-character texts takes seconds (a 200-line body
    # of "ba ba ..." against "ab ab ..." lines stalled one step for minutes). Now the
    # search runs once per body, with one LCS similarity per candidate run.
    import cad_outlines.decoding.drafting as drafting

    calls = []

    def counted(a, b):
        calls.append((len(a), len(b)))
        return similarity(a, b)

    monkeypatch.setattr(drafting, "similarity", counted)
    d = Drafter(["ab " * 130] * 300, "lines")
    body = "\n" + ("ba " * 130 + "\n") * 200
    drafts = [d.predict("<gen>" + body + p, [Copy(1, 3)]) for p in ("</", "</g", "</ge", "</gen")]
    assert drafts[0].startswith("gen><copy lines=") and drafts[-1].startswith("><copy lines=")
    assert 0 < len(calls) <= drafting.MAX_REPLACED
    assert max(max(c) for c in calls) <= drafting.MAX_COMPARED
    # a different body is a new search
    d.predict("<gen>\nx\n</", [Copy(1, 3)])
    assert len(calls) > 1 and len(calls) <= drafting.MAX_REPLACED + 1 + drafting.MAX_REPLACED


@given(st.text("ab\n ", max_size=12), st.text("ab\n ", max_size=12))
def test_similarity_is_the_lcs_ratio(a, b):
    lcs = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            lcs[i + 1][j + 1] = lcs[i][j] + 1 if x == y else max(lcs[i][j + 1], lcs[i + 1][j])
    expected = 1.0 if not a and not b else 2 * lcs[-1][-1] / (len(a) + len(b))
    assert similarity(a, b) == pytest.approx(expected)


def test_gen_body_lookup_predictions():
    lines = ["def area(r):", "    return 3.14159 * r * r", "", "def perimeter(r):",
             "    return 2 * 3.14159 * r", ""]
    d = Drafter(lines, "lines", lookup=True)
    ops = [Copy(1, 2)]
    # the body retypes line 5: what follows its last 12+ characters in the document
    assert d.predict("<gen>\n\ndef perimeter(r):\n    re", ops).startswith("turn 2 * 3.14159 * r\n")
    # the longest key wins: "    return 3" alone would first match line 2
    assert d.predict("<gen>\nx\n    return 2 * 3", ops).startswith(".14159 * r")
    assert d.predict("<gen>\nshort", ops) == ""  # under LOOKUP_MATCH characters: no key
    assert d.predict("<gen>\nnothing like the document", ops) == ""
    assert Drafter(lines, "lines").predict("<gen>\n\ndef perimeter(r):\n    re", ops) == ""  # off
    # an earlier gen, and the body itself, are searched too
    assert d.predict("<gen>\nzz brand new phrase", [Copy(1, 2), Gen("\nbrand new phrase!\n"), Copy(3, 3)]) \
        .startswith("!\n")
    assert d.predict("<gen>\nqq unheard-of words; qq unheard-of", ops) == " words; qq unheard-of"
    # the draft is program text: a reserved literal in the document comes escaped
    tricky = Drafter(["a", "we will see the </gen> tag here", "b"], "lines", lookup=True)
    drafted = tricky.predict("<gen>\nwe will see the ", [Copy(1, 1)])
    body, close = drafted.split("</gen>", 1)  # the line's rest, escaped; then the real close
    assert body == escape.encode("</gen> tag here\n") and close == '<copy lines="3-3'
    far = Drafter(["a"] * 9 + ["we will see the </gen> tag here", "b"], "lines", lookup=True)
    drafted = far.predict("<gen>\nwe will see the ", [Copy(1, 1)])  # past the line window: lookup
    assert drafted == escape.encode("</gen> tag here\nb") and "</gen>" not in drafted


def test_line_drafts_read_the_lines_a_gen_rewrites():
    lines = ["import os", "", "def size(path):", "    return os.path.getsize(path)", "",
             "def main():", "    print(size('a'))", ""]
    d = Drafter(lines, "lines", lookup=True)
    # after a copy that stops early: the gen, drafted as the next line rewritten, then the copy after it
    assert d.predict("", [Copy(1, 3)]) == '<gen>\n    return os.path.getsize(path)\n</gen><copy lines="5-8'
    assert d.kind == "line"
    # inside a line: a short key finds its place in the nearby lines, the rest of that line follows
    assert d.predict("<gen>\n    return os.stat(path", [Copy(1, 3)]) == ')\n</gen><copy lines="5-8'
    # a complete line: the gen may end here
    assert d.predict("<gen>\n    return os.path.getsize(p)\n", [Copy(1, 3)]) == '</gen><copy lines="5-8'
    assert d.predict("<gen>\n    return 0\n", [Copy(1, 3)]) == '</gen><copy lines="4-8'  # an insertion
    # nothing nearby holds the line's last characters: the document-wide lookup decides
    assert d.predict("<gen>\n    zqx", [Copy(1, 3)]) == ""
    # token programs, and drafters without lookup, draft no lines
    assert Drafter(lines, "lines").predict("", [Copy(1, 3)]) == "<gen>\n"


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_gen_body_lookup_same_output_fewer_forwards_when_a_gen_retypes(preset, tiny_model):
    """A moved function: its gen retypes document text, and lookup drafts it."""
    model = tiny_model(preset)
    doc = ("import math\n\n\ndef area(radius):\n    return math.pi * radius * radius\n\n\n"
           "def describe(shape, size):\n    label = f'{shape} of size {size}'\n    return label.upper()\n\n\n"
           "print(describe('circle', 3))\n")
    gold = ("import math\n\n\ndef describe(shape, size):\n    label = f'{shape} of size {size}'\n"
            "    return label.upper()\n\n\ndef area(radius):\n    return math.pi * radius * radius\n\n\n"
            "print(describe('circle', 3))\n")
    ops = oracle_program(doc, gold)
    body = max((op for op in ops if isinstance(op, Gen)), key=lambda op: len(op.text))
    assert "def area" in body.text and len(body.text) > 50  # a gen that retypes a function
    tags, tag_calls, _ = _run(model, doc, ops, draft_lookup=False)
    looked, look_calls, _ = _run(model, doc, ops)
    assert looked.document == tags.document == gold
    assert (looked.program, looked.ops) == (tags.program, tags.ops)
    assert looked.stats.decoded_tokens == tags.stats.decoded_tokens
    assert tag_calls == tags.stats.forward_passes and look_calls == looked.stats.forward_passes
    # the retyped body costs far fewer forwards: at least a third of its tokens are drafted
    body = len(CaDGenerator(model, doc).adapter.encode(body.text))
    assert looked.stats.draft_accepted - tags.stats.draft_accepted >= body // 3
    assert looked.stats.forward_passes <= tags.stats.forward_passes - body // 3


def test_an_observed_runner_sees_every_forward_and_changes_nothing(tiny_model):
    from cad_outlines.decoding.runner import ObservedRunner

    model = tiny_model("tiny-qwen")
    case = _cases(1)[0]
    ops = oracle_program(case["doc"], case["gold"])
    seen: list[tuple[int, int]] = []
    observed = ObservedRunner(TransformersRunner(model.model), lambda w, r, s: seen.append((w, r)))
    plain = CaDGenerator(model, case["doc"]).run("x", force_program=ops)
    watched = cad(model, case["doc"], runner=observed).run("x", force_program=ops)
    assert watched.document == plain.document == case["gold"] and watched.program == plain.program
    assert len(seen) == watched.stats.forward_passes == plain.stats.forward_passes
    assert watched.stats.draft_tokens == plain.stats.draft_tokens > 0  # drafting stays on
    assert any(rows > 1 for _, rows in seen)  # drafted forwards return several rows


# sliding-window models ----------------------------------------------------------------

def _window_model(kind):
    """A tiny Qwen2 (use_sliding_window) or Mistral with a 16-token window (seeded)."""
    import outlines
    from transformers import (AutoTokenizer, MistralConfig, MistralForCausalLM, Qwen2Config,
                              Qwen2ForCausalLM)


    tok = AutoTokenizer.from_pretrained(str(TOKENIZERS / "qwen"))
    shape = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, vocab_size=len(tok), sliding_window=16)
    if kind == "qwen2":
        config, cls = Qwen2Config(**shape, use_sliding_window=True, max_window_layers=0), Qwen2ForCausalLM
    else:
        config, cls = MistralConfig(**shape), MistralForCausalLM
    torch.manual_seed(0)
    return outlines.from_transformers(cls(config).eval(), tok)


@pytest.mark.parametrize("kind", ["qwen2", "mistral"])
def test_sliding_window_models_draft_past_the_window(kind):
    """The prompt is far past the 16-token window: a rejected draft is cropped from the
    window layers (this raised "crop was called, but the current layer does not track past
    states"), and drafts change neither the program nor the tokens chosen."""
    model = _window_model(kind)
    doc = "".join(f"line {i}\n" for i in range(30))
    gold = doc.replace("line 7\n", "line seven\n").replace("line 20\n", "")
    ops = oracle_program(doc, gold)
    gen = CaDGenerator(model, doc)
    assert any(getattr(layer, "is_sliding", False) for layer in gen.runner.new_cache().layers)
    forced = gen.run("x", force_program=ops)
    assert forced.document == gold and forced.stats.prompt_tokens > 16
    assert forced.stats.draft_tokens > forced.stats.draft_accepted > 0  # some drafts were cropped
    plain = cad(model, doc, draft_tags=False).run("x", force_program=ops)
    assert plain.program == forced.program
    for seed in range(3):  # sampled: the same draws with and without drafts
        runs = [cad(model, doc, temperature=1.0, seed=seed, max_new_tokens=40,
                    draft_tags=draft).run("x") for draft in (False, True)]
        assert runs[0].program == runs[1].program
        assert runs[0].stats.decoded_tokens == runs[1].stats.decoded_tokens


# the draft budget: drafts cut to what pays for their width --------------------------

def _curve(costs, online=False):
    # Fixed by default: these tests pin down what a curve does to the drafts; the online
    # calibration (which rescales it by the tiny model's own, nearly free, width) has its own.
    widths = tuple(range(1, len(costs) + 1))
    return ForwardCost(widths, tuple(costs), tuple(c * 1.1 for c in costs), online=online)


def test_forward_cost_interpolates_and_prices_logit_rows(tmp_path):
    cost = ForwardCost((1, 2, 4), (0.1, 0.1, 0.3), (0.1, 0.12, 0.5))
    assert cost.steps(1) == pytest.approx(1.0)
    assert cost.steps(3) == pytest.approx(2.0)  # halfway between 0.1 and 0.3
    assert cost.steps(6) == pytest.approx(5.0)  # past the curve: the last segment's slope
    # each logit row beyond the first costs (full - keep1) / width at that width
    assert cost.steps(4, rows=4) == pytest.approx((0.3 + 3 * 0.05) / 0.1)
    path = tmp_path / "cost.json"
    cost.save(path)
    assert ForwardCost.load(path) == cost
    from cad_outlines.bench.kernel import forward_cost_of

    kernel = {"n": [1, 2, 4], "t_pp_keep1": [1, 2, 3], "t_pp_full": [1, 2, 4],
              "t_pp_keep1_cpu": [0.1, 0.1, 0.3], "t_pp_full_cpu": [0.1, 0.12, 0.5]}
    assert forward_cost_of(kernel) == cost  # process CPU time where the record has it
    (tmp_path / "old.json").write_text(__import__("json").dumps(kernel))
    with pytest.raises(KeyError, match="run bench kernel again"):
        ForwardCost.load(tmp_path / "old.json")  # the product reads no bench keys
    (tmp_path / "kernel.json").write_text(__import__("json").dumps({**kernel, "forward_cost": cost.to_dict()}))
    assert ForwardCost.load(tmp_path / "kernel.json") == cost
    with pytest.raises(ValueError, match="rise strictly from 1"):
        ForwardCost((2, 4), (0.1, 0.2), (0.1, 0.2))
    with pytest.raises(ValueError, match="same length"):
        ForwardCost((1, 2), (0.1,), (0.1, 0.2))


def test_draft_budget_keeps_what_pays():
    offered = 15
    assert DraftBudget(None).length("lookup_short", offered, 1) == offered  # no curve: whole
    assert DraftBudget(_curve([1.0] * 20)).length("tag", offered, 1) == offered  # width free
    # width as costly as a step per position: nothing drafted pays
    assert DraftBudget(_curve(list(range(1, 21)))).length("tag", offered, 1) == 0
    # an uneven CPU curve (widths 4-15 dear, 16 cheap again): a long draft skips the dear
    # middle, and the budget appends exactly up to the cheap width
    uneven = [1.0, 1.1, 1.15] + [3.0] * 12 + [2.1] * 5
    tags = DraftBudget(_curve(uneven))
    assert tags.length("tag", offered, 1) == 15  # width 16
    assert tags.length("tag", 5, 1) == 2  # width 3: the last cheap one
    # after a run of drafts rejected at once, the same kind gets less
    budget = DraftBudget(_curve(uneven))
    before = budget.length("lookup_short", offered, 1)
    for _ in range(20):
        budget.record("lookup_short", 0, missed=True)
    assert budget.acceptance("lookup_short")[0] < 0.1
    assert budget.length("lookup_short", offered, 1) < before
    assert budget.length("lookup_short", offered, 1) == 0


def test_forward_cost_measure_on_a_model(tiny_model):
    model = tiny_model(FAMILY_PRESETS[0])
    cost = ForwardCost.measure(TransformersRunner(model.model), widths=(1, 2, 4), prefix=8, repeats=1)
    assert cost.widths == (1, 2, 4) and min(cost.keep1) > 0 and min(cost.full) > 0


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_a_costed_budget_changes_forwards_never_the_output(preset, tiny_model):
    """Cutting drafts (an uneven CPU-like curve; one where width never pays) keeps the
    program and the document; the forward count stays honest."""
    model = tiny_model(preset)
    doc = "\n".join(f"value_{k} = compute({k}, scale=2.5)" for k in range(1, 40)) + "\n"
    gold = doc.replace("value_7 = compute(7,", "value_7 = compute(7 + offset,").replace(
        "value_30 = compute(30, scale=2.5)\n", "value_30 = compute(30, scale=2.5)\nvalue_31 = compute(31, scale=2.5)\n")
    ops = oracle_program(doc, gold)
    whole, whole_calls, _ = _run(model, doc, ops)
    dear = _curve(list(range(1, 20)))
    uneven = _curve([1.0, 1.1, 1.15] + [3.0] * 12 + [2.1] * 5)
    for cost in (dear, uneven):
        cut, calls, _ = _run(model, doc, ops, forward_cost=cost)
        assert (cut.program, cut.document) == (whole.program, gold)
        assert calls == cut.stats.forward_passes
        if cost is dear:  # (the uneven curve cuts some drafts and adds forwards, each with its own)
            assert cut.stats.draft_tokens < whole.stats.draft_tokens
    # where each position costs a step, no forward after the prefill carries a draft
    rows: list[int] = []
    runner = ObservedRunner(TransformersRunner(model.model), lambda w, r, s: rows.append(r))
    cut = cad(model, doc, runner=runner, forward_cost=dear).run("edit", force_program=ops)
    assert cut.document == gold and len(rows) == cut.stats.forward_passes
    assert rows[1:] and set(rows[1:]) == {1}


def test_the_budget_rescales_its_curve_by_the_runs_own_forwards():
    dear = _curve(list(range(1, 20)), online=True)  # the curve: each position costs a step
    budget = DraftBudget(dear)
    assert budget.calibrates and budget.scale == 1.0
    assert budget.length("tag", 8, 1) == 0  # no draft pays for its width on the curve
    for _ in range(DraftBudget.MIN_OBSERVED):
        budget.observe(1, 1, 0.010)
        budget.observe(500, 1, 5.0)  # a prefill: outside the curve's widths, ignored
    assert budget.scale == 1.0
    for width in (3, 5, 9):  # on this machine width costs a fifth of what the curve says
        budget.observe(width, width, 0.010 * (1 + 0.2 * (dear.steps(width, width) - 1)))
    assert budget.scale == pytest.approx(0.2)
    assert budget.length("tag", 8, 1) > 0
    for _ in range(40):  # the load changes: width now costs what the curve says
        budget.observe(4, 4, 0.010 * dear.steps(4, 4))
    assert budget.scale == pytest.approx(1.0)
    fixed = DraftBudget(_curve(list(range(1, 20))))
    fixed.observe(1, 1, 0.01)
    assert not fixed.calibrates and fixed.scale == 1.0


def test_an_online_curve_learns_that_width_is_cheap_and_keeps_the_output(tiny_model, monkeypatch):
    """The loop feeds its forwards to the budget: where wide forwards cost little more than
    one-token ones, a dear curve calibrated by the run lets drafts through that the fixed
    one cuts; the output stays. (The seconds are made up, so the test does not depend on
    this machine's timing: the loop's widths and rows are real.)"""
    observe = DraftBudget.observe
    monkeypatch.setattr(DraftBudget, "observe",
                        lambda self, width, rows, s: observe(self, width, rows, 0.01 * (1 + 0.02 * (width - 1))))
    model = tiny_model("tiny-qwen")
    doc = "\n".join(f"value_{k} = compute({k}, scale=2.5)" for k in range(1, 40)) + "\n"
    gold = doc.replace("value_7 = compute(7,", "value_7 = compute(7 + offset,")
    ops = oracle_program(doc, gold)
    fixed, _, _ = _run(model, doc, ops, forward_cost=_curve(list(range(1, 20))))
    online, _, _ = _run(model, doc, ops, forward_cost=_curve(list(range(1, 20)), online=True))
    assert fixed.document == online.document == gold and fixed.program == online.program
    assert online.stats.draft_tokens > fixed.stats.draft_tokens
    assert online.stats.forward_passes < fixed.stats.forward_passes


class _TreeRunner:
    """Records how a pending draft resolves: crops and kept paths."""

    def __init__(self):
        self.calls = []

    def crop(self, cache, n):
        self.calls.append(("crop", n))

    def keep_nodes(self, cache, size, path):
        self.calls.append(("keep", size, list(path)))


def test_a_draft_tree_is_walked_and_resolved_to_the_kept_path():
    rows = [torch.full((3,), float(k)) for k in range(6)]
    budget = DraftBudget(None)
    runner = _TreeRunner()
    draft = PendingDraft(runner, None, budget)
    tree = DraftTree.chain([7, 8, 9], "tag")  # "7 8 9" drafted, 4 and 5 beside 8
    tree.add([4, 5], 0)
    draft.add(tree, rows[:5])
    rest, after = draft.verify([7])
    assert rest == [] and after is rows[0] and len(draft) == 4 and not runner.calls
    rest, after = draft.verify([5])  # the sibling: kept, a leaf, so the tree resolves
    assert rest == [] and after is rows[4] and len(draft) == 0
    assert runner.calls == [("keep", 5, [0, 4])]
    # the chain missed after one token; one of the alternatives was chosen
    assert budget.counts["tag"] == [a + b for a, b in zip(DraftBudget.PRIOR["tag"], (1, 1, 0, 1))]
    assert budget.counts["fan"] == [a + b for a, b in zip(DraftBudget.PRIOR["fan"], (1, 1, 0, 0))]
    fan = DraftTree(kind="fan")
    fan.add([1, 2, 3], -1)
    draft.add(fan, rows[:3])
    rest, after = draft.verify([6, 1])  # no member of the fan: all three dropped
    assert rest == [6, 1] and after is None and runner.calls[-1] == ("crop", 3)
    assert draft.next_id() is None


def test_digit_alternatives_spare_index_forwards_and_change_nothing(monkeypatch, tiny_model):
    """A forced whole-file program with trees on and off: the same program and document,
    every step's logits and the final cache equal, fewer forwards after index digits."""
    model = tiny_model(FAMILY_PRESETS[0])
    doc = "".join(f"row_{k} = {k}\n" for k in range(320))
    ops = [Copy(1, 30), Gen("\nrow_30 = 'thirty'\n"), Copy(32, 177), Gen("\nrow_177 = 'x'\n"),
           Copy(179, 251), Copy(253, 321)]

    class Recorder:
        def __init__(self):
            self.logits = []

        def record(self, logits, allowed, token):
            self.logits.append(logits.clone())

    monkeypatch.setattr(generator_module, "AlphaTrace", Recorder)
    plain, _, plain_cache = _run(model, doc, ops, draft_trees=False, trace_alpha=True)
    tree, tree_calls, tree_cache = _run(model, doc, ops, trace_alpha=True)
    assert tree.document == plain.document and tree.program == plain.program and tree.complete
    assert plain.stats.draft_alternatives == 0 < tree.stats.draft_alternatives
    assert tree_calls == tree.stats.forward_passes
    assert tree.stats.index_forwards < plain.stats.index_forwards
    assert tree.stats.forward_passes < plain.stats.forward_passes
    assert tree.stats.forward_passes + tree.stats.forwards_saved == tree.stats.decoded_tokens
    worst = max(torch.max(torch.abs(p - d)).item() for p, d in zip(plain.alpha.logits, tree.alpha.logits))
    assert len(tree.alpha.logits) == len(plain.alpha.logits) and worst <= 1e-4, worst
    assert tree_cache.get_seq_length() == plain_cache.get_seq_length()
    for layer in (0, -1):
        assert torch.max(torch.abs(plain_cache.layers[layer].keys - tree_cache.layers[layer].keys)).item() <= 1e-4
