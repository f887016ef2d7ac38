"""DCCD on real weights: the seeded tasks, the free-text parser, and a handful of items
through SmolLM2-135M-Instruct (every constrained output valid, α traced step by step).

``bench dccd --preset smollm2-135m-base`` measures the rates (docs/dccd.md); these tests
guard the guarantees and the bookkeeping the table rests on.
"""

from __future__ import annotations

import math
import re

import pytest

from cad_outlines.bench.dccd_real import (TASKS, RealDCCDConfig, _evaluate, make_items, parse_free)
from cad_outlines.errors import InputError


def test_items_are_seeded_distinct_and_their_answers_follow_from_the_text():
    arith = make_items("arith", 200, seed=0)
    assert arith == make_items("arith", 200, seed=0) and arith != make_items("arith", 200, seed=1)
    assert len({i["prompt"] for i in arith}) > 150  # not a handful repeated
    for item in arith:
        a, b = map(int, re.findall(r"\d+", item["text"])[:2])
        answer = item["truth"]["answer"]
        assert answer in (a + b, a - b, a * b) and answer >= 0, item
        assert item["prompt"].startswith(item["text"]) and TASKS["arith"].request in item["prompt"]
    for item in make_items("extract", 50, seed=3):
        truth = item["truth"]
        assert truth["name"] in item["text"] and truth["date"] in item["text"]
        assert str(truth["amount"]) in item["text"]
    with pytest.raises(InputError, match="unknown task"):
        make_items("poetry", 1)


def test_free_text_is_parsed_to_the_first_object_the_schema_accepts():
    schema = TASKS["extract"].schema
    good = '{"name": "Ana Kim", "date": "2020-01-02", "amount": 5}'
    assert parse_free(f"Sure! ```json\n{good}\n``` done {{}}", schema)["name"] == "Ana Kim"
    assert parse_free('{"name": "Ana Kim", "date": "2020-01-02", "amount": "5"}', schema) is None
    assert parse_free('{"name": "Ana"', schema) is None
    assert parse_free("no json here", TASKS["arith"].schema) is None
    assert parse_free('[1] then {"answer": 7}', TASKS["arith"].schema) == {"answer": 7}


@pytest.mark.slow
def test_real_weights_keep_every_constrained_output_valid_and_trace_alpha(real_model):
    model = real_model("smollm2-135m-base")
    cfg = RealDCCDConfig(items=3, ks=(1, 2), selectors=("sum_log_alpha", "vote"), free_tokens=24)
    for task in ("arith", "extract"):
        res = _evaluate(cfg, task, make_items(task, cfg.items, cfg.seed), lambda _: model, progress=False)
        methods = res["methods"]
        assert set(methods) == {"free", "cd", "dccd_greedy", "dccd_k1_sum_log_alpha", "dccd_k1_vote",
                                "dccd_k2_sum_log_alpha", "dccd_k2_vote"}
        for name, m in methods.items():
            assert m["n"] == 3
            if name == "free":
                continue  # unconstrained: validity is what it measures
            assert m["valid"] == 1.0, (task, name, res["examples"])
            assert 0.0 < m["mean_alpha"] <= 1.0 and m["projection_tax"] >= 0.0
        # K=2 costs more tokens than K=1 (two drafts, two projections)
        assert methods["dccd_k2_vote"]["tokens"] > methods["dccd_k1_vote"]["tokens"]
        example = res["examples"][0]
        assert len(example["cd_alphas"]) >= 3 and all(0.0 <= a <= 1.0 for a in example["cd_alphas"])
        assert not math.isclose(min(example["cd_alphas"]), 1.0)  # the schema does cut some mass
