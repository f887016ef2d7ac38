"""``cad-outlines bench dccd --tiny``: the CI-sized demonstration runs end to end."""

from __future__ import annotations

import json

import pytest

from cad_outlines.bench.dccd import (
    PROJECTION_TEMPLATE,
    BenchConfig,
    build_tokenizer,
    number_word,
    parse_prose_answer,
    question,
)
from cad_outlines.cli import main


def test_number_words_round_trip():
    for n in range(50):
        assert parse_prose_answer(f"the answer is {number_word(n)} .") == n
    assert number_word(21) == "twenty one" and number_word(40) == "forty"
    assert parse_prose_answer("no number here") is None
    # The last number stated wins (drafts may restate the question first).
    assert parse_prose_answer("three plus four makes seven") == 7
    with pytest.raises(ValueError):
        number_word(50)


def test_tokenizer_round_trips_the_task_text():
    text = PROJECTION_TEMPLATE.format(draft="it is twenty two .", prompt=question(9, 13))
    tok = build_tokenizer([text + '{"answer": 22}'], 300)
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert tok.eos_token_id is not None and tok.pad_token_id != tok.eos_token_id


def test_tiny_bench_runs_and_reports_every_method(capsys):
    assert main(["bench", "dccd", "--tiny", "--json", "--k", "1,2"]) == 0
    out = json.loads(capsys.readouterr().out)
    env = out["environment"]  # the one environment record every bench JSON carries
    assert env["date_utc"] and env["git_commit"] and env["torch"] and env["torch_threads"] >= 1
    cfg = BenchConfig.tiny()
    methods = out["methods"]
    expected = {"cd", "cd_format_prompt"} | {
        f"dccd_t{t:g}_k{k}_{s}" for t in cfg.draft_temperatures for k in (1, 2)
        for s in cfg.selectors}
    assert set(methods) == expected
    n = out["data"]["evaluated"]
    assert n == min(cfg.eval_questions, out["data"]["held_out"]) and n > 0
    for name, m in methods.items():
        assert m["n"] == n
        # Constrained output is valid whatever the model: same matcher for CD and DCCD.
        assert m["valid"] == 1.0, name
        assert 0.0 <= m["accuracy"] <= 1.0
        assert 0.0 < m["min_alpha"] <= m["mean_alpha"] <= 1.0
        assert m["projection_tax"] >= 0.0
        if name.startswith("dccd"):
            assert m["accuracy"] <= m["oracle_at_k"]
            assert 0.0 <= m["faithful_to_draft"] <= 1.0
        else:
            assert "faithful_to_draft" not in m and "oracle_at_k" not in m
    # K=1 has one candidate: every selector picks it.
    for t in cfg.draft_temperatures:
        k1 = [methods[f"dccd_t{t:g}_k1_{s}"] for s in cfg.selectors]
        assert all(m["accuracy"] == k1[0]["accuracy"] for m in k1)
    assert set(out["draft_accuracy"]) == {str(t) for t in cfg.draft_temperatures}
    # The model's vocabulary is padded past the tokenizer's: α's alignment is exercised.
    assert out["model"]["model_vocab"] > out["model"]["tokenizer_vocab"]
    assert out["config"]["ks"] == [1, 2]
    ex = out["examples"][0]
    assert len(ex["drafts"]) == 2 and all(json.loads(p) for p in ex["projections"])


def test_bench_rejects_bad_k(capsys):
    assert main(["bench", "dccd", "--tiny", "--k", "0,3"]) == 2
    assert "--k" in capsys.readouterr().err
