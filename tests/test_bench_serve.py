"""bench serve pieces that need no vLLM: the n-gram replay, its pricing and the CLI."""

from __future__ import annotations

import importlib.util

import pytest

from cad_outlines.bench.serve import ngram_replay, price_replay
from cad_outlines.cli import main


def lookup(k: int = 8, n: int = 2):
    """A prompt-lookup drafter: the ``k`` tokens after the latest earlier occurrence of the
    context's last ``n`` tokens (none if they never occurred)."""
    def propose(context: list[int]) -> list[int]:
        tail = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start:start + n] == tail:
                return context[start + n:start + n + k]
        return []
    return propose


def test_unrepeated_text_takes_one_step_per_token():
    steps = ngram_replay([1, 2, 3], [10, 11, 12, 13], lookup())
    assert steps == [(0, 1)] * 4


def test_text_copied_from_the_prompt_is_drafted_k_tokens_at_a_time():
    prompt = list(range(100, 140))
    gold = prompt[:]  # the edit copies the prompt: after two typed tokens, lookup drafts the rest
    steps = ngram_replay(prompt, gold, lookup())
    # token 1, token 2 (no n-gram yet), then 8 drafted + 1 per step for the other 38
    assert len(steps) == 2 + -(-38 // 9)
    assert steps[2] == (8, 9)
    assert sum(added for _, added in steps) == len(gold)


def test_a_draft_stops_at_the_first_token_that_differs():
    prompt = [1, 2, 3, 4, 5, 6]
    gold = [1, 2, 3, 9, 5, 6]
    # 1, 2 one by one; after (1, 2) the draft is 3 4 5 6 1 2: 3 is kept, 4 is not -> +2 (3 and 9);
    # then (3, 9) never occurred: 5, 6 one by one
    assert ngram_replay(prompt, gold, lookup()) == [(0, 1), (0, 1), (6, 2), (0, 1), (0, 1)]


def test_the_last_step_adds_no_more_than_the_gold_has_left():
    steps = ngram_replay([7, 8, 9, 7, 8], [9], lookup())
    assert steps == [(3, 1)]  # the draft is 9 7 8; only 9 is left to type


def test_pricing_runs_edits_side_by_side_until_each_is_done():
    replays = [[(0, 1), (2, 3)], [(4, 5)]]
    # step 1: edit 0 verifies 1 token, edit 1 verifies 5 -> 6 tokens; step 2: edit 0 alone, 3 tokens
    wall, finished = price_replay(replays, lambda tokens: 0.5 + tokens, start=10.0)
    assert finished == [10.0 + 6.5 + 3.5, 10.0 + 6.5]
    assert wall == finished[0]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_cli_without_vllm_says_how_to_install_it(tmp_path, capsys):
    assert main(["bench", "serve", str(tmp_path), str(tmp_path / "c.jsonl")]) == 2
    assert "cad-outlines[vllm]" in capsys.readouterr().err


def test_the_default_context_is_the_models_own_at_most_16k(tmp_path):
    import json

    from cad_outlines.bench.serve import MAX_MODEL_LEN, model_context
    from cad_outlines.errors import InputError

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 8192}))
    assert model_context(str(tmp_path)) == 8192  # SmolLM2: vLLM refuses more
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 131072}))
    assert model_context(str(tmp_path)) == MAX_MODEL_LEN
    (tmp_path / "config.json").write_text("{}")
    assert model_context(str(tmp_path)) == MAX_MODEL_LEN
    with pytest.raises(InputError, match="config.json"):
        model_context(str(tmp_path / "missing"))


def test_the_module_entry_point_reports_bad_input_in_one_line(tmp_path, capsys):
    from cad_outlines.bench.serve import main as serve_main

    corpus = tmp_path / "c.jsonl"
    corpus.write_text("")
    assert serve_main([str(tmp_path / "missing"), str(corpus)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # without vLLM it stops there first; with it, at the folder that holds no model
    expected = "config.json" if importlib.util.find_spec("vllm") else "vllm"
    assert len(err) == 1 and expected in err[0].lower(), err
