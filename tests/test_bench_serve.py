"""bench serve pieces that need no vLLM: the prompt-lookup step count and the CLI."""

from __future__ import annotations

import importlib.util

import pytest

from cad_outlines.bench.serve import ngram_steps
from cad_outlines.cli import main


def test_unrepeated_text_takes_one_step_per_token():
    assert ngram_steps([1, 2, 3], [10, 11, 12, 13], k=8, n_min=2, n_max=4) == 4


def test_text_copied_from_the_prompt_is_drafted_k_tokens_at_a_time():
    prompt = list(range(100, 140))
    gold = prompt[:]  # the edit copies the prompt: after two typed tokens, lookup drafts the rest
    steps = ngram_steps(prompt, gold, k=8, n_min=2, n_max=4)
    # token 1, token 2 (no n-gram yet), then 8 drafted + 1 per step for the other 38
    assert steps == 2 + -(-38 // 9)


def test_a_draft_stops_at_the_first_token_that_differs():
    prompt = [1, 2, 3, 4, 5, 6]
    gold = [1, 2, 3, 9, 5, 6]
    # 1, 2 one by one; after (1, 2) the draft is 3 4 5 6: 3 is kept, 4 is not -> +2 (3 and 9);
    # then (3, 9) never occurred: 5, 6 one by one
    assert ngram_steps(prompt, gold, k=8, n_min=2, n_max=4) == 5


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_cli_without_vllm_says_how_to_install_it(tmp_path, capsys):
    assert main(["bench", "serve", str(tmp_path), str(tmp_path / "c.jsonl")]) == 2
    assert "cad-outlines[vllm]" in capsys.readouterr().err
