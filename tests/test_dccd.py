"""DraftConditionedGenerator on a tiny random-weight Qwen2 with the real Qwen tokenizer.

Random weights say nothing about answer quality; what these tests pin down is what must
hold for *any* weights: α is the true feasible mass (checked against a brute-force mask
and an uncached forward), every output is valid for its type whatever the draft says,
the selector returns its argmax, and a seed reproduces a run.
"""

from __future__ import annotations

import json
import math
import re
from typing import Literal

import jsonschema
import lark
import pytest
import torch
from pydantic import BaseModel, Field

import outlines
from outlines.types import CFG, JsonSchema, Regex

from cad_outlines.decoding.alpha import AlphaTrace
from cad_outlines.decoding.dccd import Candidate, DraftConditionedGenerator, select

from testdata import TOKENIZERS

QWEN = TOKENIZERS / "qwen"

CODE_RE = r"(cat|dog)-[0-9]{2}"
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]{1,6}$"},
        "size": {"enum": ["s", "m", "l"]},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "size", "ok"],
    "additionalProperties": False,
}
# llguidance's JSON whitespace is free by default; a random model would wander in it.
SCHEMA_LLG = dict(SCHEMA, **{"x-guidance": {"whitespace_flexible": False}})
CALC = r"""
start: expr
expr: term (("+" | "-") term)*
term: NUMBER | "(" expr ")"
NUMBER: /[1-9]/
"""

# Drafts that try to break out of the format: wrong format, reserved CaD literals,
# template placeholders, control characters, unbalanced JSON, plenty of noise.
HOSTILE_DRAFTS = [
    '<program><copy lines="1-3"/><gen>x</gen></program>',
    '{"name": 5, "size": "xl", "extra": [}',
    "{prompt} {draft} }}{{",
    "\x00\x1b[31m\ufffd\u202e" + "A" * 200,
    "fish-123 CAT-7 dog_42 ))))(((( 9+",
]


class Pet(BaseModel):
    kind: Literal["cat", "dog"]
    name: str = Field(pattern=r"^[a-z]{1,5}$")


@pytest.fixture(scope="module")
def tok():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(QWEN))


def _tiny(tok, seed: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    # vocab_size is the real Qwen2.5 output size, larger than the tokenizer: the padded
    # ids exercise the mask/logits size alignment on every step.
    config = Qwen2Config(vocab_size=151936, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         tie_word_embeddings=True)
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="module")
def model(tok):
    return outlines.from_transformers(_tiny(tok, 0), tok)


@pytest.fixture(scope="module")
def token_strings(tok):
    return [tok.decode([i]) for i in range(len(tok))]


@pytest.fixture(scope="module", params=["outlines_core", "llguidance"])
def code_gen(request, model):
    return DraftConditionedGenerator(model, Regex(CODE_RE), k=3, backend=request.param,
                                     max_new_tokens=12, draft_max_tokens=8)


@pytest.fixture(scope="module")
def one_gen(model):
    """For behaviour that does not depend on the backend (seeds, selection)."""
    return DraftConditionedGenerator(model, Regex(CODE_RE), k=3, max_new_tokens=12,
                                     draft_max_tokens=6)


def _language(pattern: str) -> list[str]:
    heads = re.fullmatch(r"\((.*)\)-\[0-9\]\{2\}", pattern).group(1).split("|")
    return [f"{h}-{n:02d}" for h in heads for n in range(100)]


def _brute_alphas(model, token_strings, prompt_ids, out_ids, language):
    """α_t recomputed from scratch: full uncached forward + mask from string prefixes."""
    prefixes = {s[:i] for s in language for i in range(len(s) + 1)}
    eos = model.hf_tokenizer.eos_token_id
    ids = torch.tensor([prompt_ids + out_ids])
    with torch.no_grad():
        logits = model.model(input_ids=ids).logits[0].double()
    alphas, text = [], ""
    for t in range(len(out_ids) + 1):
        probs = torch.softmax(logits[len(prompt_ids) - 1 + t], dim=0)
        allowed = [i for i, s in enumerate(token_strings) if s and text + s in prefixes]
        if text in language:
            allowed.append(eos)
        alphas.append(float(probs[allowed].sum()))
        if t < len(out_ids):
            text += token_strings[out_ids[t]]
    return alphas


def _prompt_ids(model, text):
    return model.hf_tokenizer(model.type_adapter.format_input(text))["input_ids"]


def test_alpha_equals_brute_force_feasible_mass(code_gen, model, token_strings):
    res = code_gen.run("Name a pet and a number.", seed=11)
    assert len(res.candidates) == 3
    for c in res.candidates:
        assert c.complete
        brute = _brute_alphas(model, token_strings, _prompt_ids(model, c.prompt),
                              c.token_ids, _language(CODE_RE))
        # One α per emitted token plus the end-of-sequence step.
        assert c.trace.steps == len(c.token_ids) + 1
        assert c.trace.alphas == pytest.approx(brute, rel=2e-4)
        assert c.trace.projection_tax == pytest.approx(-sum(map(math.log, brute)), rel=2e-4)


def test_plain_cd_reports_its_alpha_trace(code_gen, model, token_strings):
    res = code_gen.cd("Name a pet and a number.")
    (c,) = res.candidates
    assert c.draft is None and res.selector == "cd"
    assert re.fullmatch(CODE_RE, res.text)
    brute = _brute_alphas(model, token_strings, _prompt_ids(model, "Name a pet and a number."),
                          c.token_ids, _language(CODE_RE))
    assert c.trace.alphas == pytest.approx(brute, rel=2e-4)


def test_regex_outputs_valid_even_from_hostile_drafts(code_gen):
    res = code_gen.run("Name a pet.", drafts=HOSTILE_DRAFTS, seed=0)
    assert [c.draft for c in res.candidates] == HOSTILE_DRAFTS
    for c in res.candidates:
        assert c.complete and re.fullmatch(CODE_RE, c.text), c.text
        assert c.value == c.text
    assert re.fullmatch(CODE_RE, code_gen("Name a pet.", seed=1))


@pytest.mark.parametrize("backend,schema", [("outlines_core", SCHEMA), ("llguidance", SCHEMA_LLG)])
def test_json_schema_outputs_validate(model, backend, schema):
    whitespace = "" if backend == "outlines_core" else None
    gen = DraftConditionedGenerator(model, JsonSchema(schema, whitespace_pattern=whitespace),
                                    k=3, backend=backend, max_new_tokens=40, draft_max_tokens=8)
    for drafts in (None, HOSTILE_DRAFTS):
        res = gen.run("Describe a pet as JSON.", drafts=drafts, seed=5)
        for c in res.candidates:
            assert c.complete, c.text
            jsonschema.validate(json.loads(c.text), SCHEMA)
            assert c.value == json.loads(c.text)


def test_pydantic_output_parses_to_the_model(model):
    gen = DraftConditionedGenerator(model, JsonSchema(Pet, whitespace_pattern=""), k=2,
                                    max_new_tokens=40, draft_max_tokens=6)
    gen_plain = DraftConditionedGenerator(model, Pet, k=1, max_new_tokens=60, draft_max_tokens=6)
    res = gen.run("A pet?", drafts=HOSTILE_DRAFTS[:2], seed=0)
    for c in res.candidates:
        assert c.complete and c.parse_error is None, c.text
        # A JsonSchema term only keeps the schema: its values are plain JSON.
        assert c.value == json.loads(c.text)
        Pet.model_validate(c.value)
    # A bare pydantic class (Outlines' default whitespace) parses into the class.
    plain = gen_plain.run("A pet?", drafts=["cat"], seed=0)
    assert plain.chosen.complete, plain.text
    assert isinstance(plain.value, Pet) and plain.value == Pet.model_validate_json(plain.text)


def test_cfg_outputs_parse_with_lark(model):
    gen = DraftConditionedGenerator(model, CFG(CALC), k=3, max_new_tokens=12, draft_max_tokens=6)
    parser = lark.Lark(CALC)
    res = gen.run("Write a sum.", drafts=HOSTILE_DRAFTS[:3], seed=2)
    complete = [c for c in res.candidates if c.complete]
    for c in complete:
        parser.parse(c.text)
    # A CFG can run past the budget; selection must still prefer a finished candidate.
    assert res.chosen.complete == bool(complete)


def test_same_seed_same_result_other_seed_other_drafts(one_gen):
    a = one_gen.run("Name a pet.", seed=123)
    b = one_gen.run("Name a pet.", seed=123)
    c = one_gen.run("Name a pet.", seed=124)
    assert [x.draft for x in a.candidates] == [x.draft for x in b.candidates]
    assert [x.text for x in a.candidates] == [x.text for x in b.candidates]
    assert [x.trace.alphas for x in a.candidates] == [x.trace.alphas for x in b.candidates]
    assert a.index == b.index
    assert [x.draft for x in a.candidates] != [x.draft for x in c.candidates]


def test_sampled_projection_is_reproducible_and_valid(model):
    gen = DraftConditionedGenerator(model, Regex(CODE_RE), k=4, temperature=1.0,
                                    max_new_tokens=12, draft_max_tokens=6)
    a, b = gen.run("Pet?", seed=9), gen.run("Pet?", seed=9)
    assert [c.text for c in a.candidates] == [c.text for c in b.candidates]
    assert all(re.fullmatch(CODE_RE, c.text) for c in a.candidates)


def test_batched_projection_matches_one_at_a_time(code_gen):
    drafts = ["dog-12", "a cat, I think forty-two", "?"]
    together = code_gen.run("Name a pet.", drafts=drafts, seed=0).candidates
    for i, d in enumerate(drafts):
        (alone,) = code_gen.run("Name a pet.", drafts=[d], seed=0).candidates
        assert alone.text == together[i].text
        assert alone.trace.alphas == pytest.approx(together[i].trace.alphas, rel=1e-4)


@pytest.mark.parametrize("selector", ["sum_log_alpha", "loglik", "vote"])
def test_selector_returns_its_argmax(one_gen, selector):
    res = one_gen.run("Name a pet.", drafts=HOSTILE_DRAFTS, seed=0, selector=selector)
    assert res.selector == selector
    scores = [c.score for c in res.candidates]
    assert res.candidates[res.index].score == max(scores)
    assert res.index == scores.index(max(scores)) or selector == "vote"
    assert res.text == res.candidates[res.index].text
    if selector == "sum_log_alpha":
        assert scores == [c.trace.sum_log_alpha for c in res.candidates]
    if selector == "loglik":
        assert scores == [c.trace.log_likelihood for c in res.candidates]


def test_callable_verifier_is_called_with_prompt_and_candidate(one_gen):
    seen = []

    def prefers_dogs(prompt, cand):
        seen.append(prompt)
        return float(cand.text.startswith("dog")) + int(cand.text[-2:]) / 1000

    res = one_gen.run("Name a pet.", drafts=HOSTILE_DRAFTS, seed=0, selector=prefers_dogs)
    assert seen == ["Name a pet."] * len(HOSTILE_DRAFTS)
    best = max(range(len(res.candidates)), key=lambda i: prefers_dogs("", res.candidates[i]))
    assert res.index == best and res.selector == "prefers_dogs"


def _cand(text, value, log_alphas, complete=True):
    trace = AlphaTrace()
    for la in log_alphas:
        trace.log_alphas.append(la)
        trace.alphas.append(math.exp(la))
        trace.chosen_logprobs.append(la - 1.0)
        trace.chosen_probs.append(math.exp(la - 1.0))
    return Candidate(None, "", text, value, trace, complete, [])


def test_select_unit_rules():
    cands = [_cand("a", {"x": 1}, [-0.1]), _cand("b", {"x": 2}, [-0.01]),
             _cand("c", {"x": 1}, [-0.5]), _cand("d", {"x": 3}, [0.0], complete=False)]
    # Σ log α: the incomplete candidate has the best α but a finished one must win.
    assert select(cands, "sum_log_alpha") == 1
    # Vote: {"x": 1} twice; within the tie, the better Σ log α (candidate 0).
    assert select(cands, "vote") == 0 and cands[0].score == 2.0 and cands[3].score == 0.0
    assert select(cands, lambda p, c: -ord(c.text)) == 0
    with pytest.raises(ValueError, match="unknown selector"):
        select(cands, "best")
    with pytest.raises(ValueError, match="at least one"):
        select([], "vote")


def test_drafter_writes_the_drafts(model, tok):
    drafter = outlines.from_transformers(_tiny(tok, 1), tok)
    gen = DraftConditionedGenerator(model, Regex(CODE_RE), k=2, drafter=drafter,
                                    max_new_tokens=12, draft_max_tokens=6)
    res = gen.run("Pet?", seed=4)
    expected = gen.draft("Pet?", 2, torch.Generator().manual_seed(4))
    assert [c.draft for c in res.candidates] == expected
    own = DraftConditionedGenerator(model, Regex(CODE_RE), k=2, draft_max_tokens=6)
    assert own.draft("Pet?", 2, torch.Generator().manual_seed(4)) != expected


def test_budget_cut_is_reported_not_hidden(model):
    gen = DraftConditionedGenerator(model, Regex(r"[a-z]{5}"), k=1, max_new_tokens=1,
                                    draft_max_tokens=3)
    res = gen.run("Word?", drafts=["hello"], seed=0)
    c = res.chosen
    # One token cannot spell five letters in every tokenization the model may pick.
    if not c.complete:
        assert c.value is None and c.parse_error.startswith("incomplete")
    assert c.trace.steps == 1


def test_bad_arguments_are_named(model):
    with pytest.raises(ValueError, match="draft"):
        DraftConditionedGenerator(model, Regex("a"), projection_template="{prompt} only")
    with pytest.raises(ValueError, match="selector"):
        DraftConditionedGenerator(model, Regex("a"), selector="best")
    with pytest.raises(ValueError, match="k must be"):
        DraftConditionedGenerator(model, Regex("a"), k=-1)
    with pytest.raises(ValueError, match="output type"):
        DraftConditionedGenerator(model, None)
    with pytest.raises(TypeError, match="Transformers"):
        DraftConditionedGenerator(object(), Regex("a"))
    gen = DraftConditionedGenerator(model, Regex("a"), k=1, max_new_tokens=3)
    with pytest.raises(ValueError, match="drafts is empty"):
        gen.run("x", drafts=[])
    with pytest.raises(TypeError, match="strings"):
        gen.run(["x"])
    with pytest.raises(NotImplementedError):
        gen.stream("x")
