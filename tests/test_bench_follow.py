"""Regeneration that follows a predicted file (bench/follow.py): drafts never change
greedy output, a low floor makes the prediction the output, and it is a bench quality row."""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

from cad_outlines.bench.follow import Realigner, run_follow
from cad_outlines.bench.quality import QualityConfig, load_eval_cases, run
from cad_outlines.bench.quality_report import format_table


def _greedy(model, prompt: list[int], budget: int, eos: int) -> tuple[list[int], bool]:
    out = model.generate(torch.tensor([prompt]), max_new_tokens=budget, do_sample=False, pad_token_id=eos)
    reply = out[0, len(prompt):].tolist()
    if eos in reply:
        return reply[:reply.index(eos)], True
    return reply, False


def test_realign_finds_the_nearest_occurrence_of_the_longest_tail():
    prediction = [1, 2, 3, 9, 1, 2, 3, 7, 1, 2, 5]
    realign = Realigner(prediction)
    assert realign([4, 2, 3], near=0) == 3  # (2, 3) twice: the one nearer 0
    assert realign([4, 2, 3], near=8) == 7
    assert realign([3, 7], near=0) == 8  # the trigram is not there; the bigram is
    assert realign([6], near=0) is None


def _scan(prediction: list[int], reply: list[int], near: int, n: int) -> int | None:
    """Realignment by scanning the whole prediction (the definition the index must keep)."""
    for size in range(min(n, len(reply)), 0, -1):
        ends = [i + size for i in range(len(prediction) - size + 1) if prediction[i:i + size] == reply[-size:]]
        if ends:
            return min(ends, key=lambda end: (abs(end - near), end))
    return None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=40), st.lists(st.integers(0, 5), min_size=1, max_size=6),
       st.integers(-3, 45), st.integers(1, 4))
def test_the_index_finds_what_a_scan_finds(prediction, reply, near, n):
    index = Realigner(prediction, n)
    assert index(reply, near) == _scan(prediction, reply, near, n)
    assert index(reply, near) == Realigner(prediction, n)(reply, near)  # lookups leave it unchanged


def test_a_floor_of_one_gives_greedy_output_whatever_the_prediction(tiny_model):
    """The prior never overrules at floor 1 (the model's own choice always wins), so the
    reply is transformers' greedy reply, with drafts right, wrong, or out of step."""
    model = tiny_model("tiny-qwen")
    hf, tok = model.model, model.hf_tokenizer
    eos = tok.eos_token_id
    prompt = tok.encode("def f(x):\n    return x\n", add_special_tokens=False)
    greedy, _ = _greedy(hf, prompt, 40, eos)
    for prediction in (greedy + [eos], greedy[:10] + [5, 6, 7] + greedy[10:] + [eos], [3, 1, 4, 1, 5] * 8, []):
        for k in (1, 4, 128):
            rec = run_follow(hf, prompt, prediction, k, 1.0, eos, 40)
            assert rec["ids"] == greedy, (prediction[:6], k)
            assert rec["overruled"] == 0
    # the right prediction at k=128: one forward verifies the whole reply
    rec = run_follow(hf, prompt, greedy + [eos], 128, 1.0, eos, 40)
    assert rec["forward_passes"] == 2 and rec["draft_accepted"] == len(greedy) - 1 and rec["left"] == 0


def test_a_tiny_floor_makes_the_prediction_the_reply(tiny_model):
    model = tiny_model("tiny-qwen")
    hf, tok = model.model, model.hf_tokenizer
    eos = tok.eos_token_id
    prompt = tok.encode("x = 1\n", add_special_tokens=False)
    wanted = tok.encode("x = 2\ny = 3\n", add_special_tokens=False)
    rec = run_follow(hf, prompt, wanted + [eos], 4, 1e-30, eos, 64)
    assert rec["ids"] == wanted and rec["complete"]
    assert rec["followed"] == len(wanted) + 1 and rec["overruled"] > 0  # random weights disagree
    assert rec["forward_passes"] == 1 + -(-len(wanted) // 5)  # the prefill, then 1 + 4 ids a forward
    # a budget shorter than the prediction: cut there, not complete
    short = run_follow(hf, prompt, wanted + [eos], 4, 1e-30, eos, 3)
    assert short["ids"] == wanted[:3] and not short["complete"]


def test_the_twin_with_the_merge_as_a_prior_is_a_quality_row(tiny_model):
    """``qwen_regen_apply@P`` runs on snippet cases only; with a floor below every token the
    random twin writes the literal merge (right for this case), at floor 1 it does not."""
    v2 = load_eval_cases("v2")
    case = next(c for c in v2 if c.meta["subset"] == "commit_snippets")
    other = next(c for c in v2 if c.meta["subset"] == "templated")
    cfg = QualityConfig(configs=("qwen_regen_apply@1e-30", "qwen_regen_apply@1"), sampled=(), regen_margin=8)
    report = run(cfg, cases=[other, case], loader=lambda preset: tiny_model("tiny-qwen"))
    assert {r["case"] for r in report["records"]} == {case.id}
    by = {r["config"]: r for r in report["records"]}
    low, high = by["qwen_regen_apply@1e-30"], by["qwen_regen_apply@1"]
    assert low["exact"] and low["complete"] and low["merged"] and low["left"] == 0
    assert not high["exact"] and high["overruled"] == 0
    assert low["forwards"] < high["forwards"]
    assert report["summaries"]["qwen_regen_apply@1e-30/greedy"]["all"]["exact"] == 1.0
    assert "qwen_regen_apply@1e-30" in format_table(report)
