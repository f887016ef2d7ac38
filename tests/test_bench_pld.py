"""The prompt-lookup (PLD) baseline: transformers' search, teacher-forced, counted forwards."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from cad_outlines.adapters import get_adapter
from cad_outlines.bench._loop import CountingRunner
from cad_outlines.bench.e2e import E2EConfig
from cad_outlines.bench.pld import DEFAULT, PLDSetting, lookup_steps, plain_prompt_ids, run_pld
from cad_outlines.errors import InputError

QWEN = Path(__file__).parent / "fixtures" / "tokenizers" / "qwen"

# prompt 1..7; the gold retypes 2 3 4 5 from it, then leaves it
PROMPT, GOLD = [1, 2, 3, 4, 5, 6, 7], [9, 2, 3, 4, 5, 8]


def test_lookup_steps_follow_transformers_search_by_hand():
    steps = list(lookup_steps(PROMPT, GOLD, DEFAULT, eos_token_id=None, max_length=100))
    # 9: no earlier 9, no draft; 2: the unigram 2 matches at position 1, so the rest of
    # sequence up to its end is drafted (3 4 5 6 7 9 2: k = 10 is not reached) and 3 4 5
    # are the gold's; 8: no match again.
    assert steps == [(9, [], 0), (2, [3, 4, 5, 6, 7, 9, 2], 3), (8, [], 0)]
    # every gold token is appended once: chosen or accepted
    assert sum(1 + accepted for _, _, accepted in steps) == len(GOLD)


def test_lookup_steps_bigram_first_and_k_caps_the_draft():
    prompt = [5, 1, 2, 3, 4, 9, 2, 7, 7]  # 2 is followed by 3 first, by 7 later
    gold = [9, 2, 7, 7, 0]
    steps = list(lookup_steps(prompt, gold, PLDSetting(2, 2), eos_token_id=None, max_length=100))
    # after 9 the bigram (7, 9)? no; unigram 9 -> 2 7 (k = 2); 2 and 7 kept
    assert steps[0] == (9, [2, 7], 2)
    # then 7 is chosen; bigram (7, 7) matches at 7 -> drafts what followed it (9 2 ...)
    assert steps[1][0] == 7 and steps[1][1][:1] == [9]
    with_eos = list(lookup_steps(PROMPT, GOLD, PLDSetting(10, 2), eos_token_id=4, max_length=100))
    assert with_eos[1] == (2, [3], 1)  # drafts stop before EOS, as transformers does


def test_run_pld_forwards_are_the_lookup_steps():
    runner = CountingRunner(vocab_size=16)
    stats = run_pld(None, PROMPT, GOLD, DEFAULT, eos_token_id=None, max_new_tokens=64, runner=runner)
    assert runner.widths == [len(PROMPT), 1, 8, 1]  # prefill, then 1 + drafted per verify
    assert stats["forward_passes"] == 4 and stats["tokens"] == len(GOLD) and stats["exact"]
    assert stats["draft_tokens"] == 7 and stats["draft_accepted"] == 3
    assert 0 <= stats["prefill_seconds"] <= stats["total_seconds"]


def test_plain_prompt_has_no_format_text_or_numbers():
    tok = AutoTokenizer.from_pretrained(QWEN)
    doc = "def f():\n    return 1\n"
    text = tok.decode(plain_prompt_ids(tok, doc, " Apply the edit. "))
    assert "Apply the edit.\n\nReply with the whole edited document and nothing else.\n\nDocument:\n" + doc in text
    assert "<copy" not in text and "1| " not in text
    # the same chat template around it as the CaD prompt (one template rule for both)
    cad = get_adapter(tok).prompt(doc, "Apply the edit.")
    assert text.startswith("<|im_start|>") and text.endswith(cad[cad.rindex("<|im_end|>"):])


def test_settings_parse_and_reject():
    assert PLDSetting.parse("20:3") == PLDSetting(20, 3) and PLDSetting(20, 3).name == "pld_k20_n3"
    for bad in ("20", "a:b", "0:2", "10:0"):
        with pytest.raises(InputError):
            PLDSetting.parse(bad)
    with pytest.raises(InputError, match="cannot be skipped"):
        E2EConfig("tiny-qwen", skip=("cad",))
    with pytest.raises(InputError):
        E2EConfig("tiny-qwen", pld=("ten",))


def test_prompt_cost_splits_numbers_and_format_statement(tmp_path, capsys):
    from cad_outlines import cli
    from cad_outlines.adapters import get_adapter
    from cad_outlines.adapters._view import format_statement
    from cad_outlines.bench.prompt_cost import prompt_cost
    from cad_outlines.training.corpus import Case

    adapter = get_adapter(AutoTokenizer.from_pretrained(QWEN))
    doc = "".join(f"value_{k} = {k}\n" for k in range(12))  # 13 lines, two-digit numbers
    report = prompt_cost([Case("one", doc, doc)], adapter)
    row = report["cases"][0]
    assert row["plain"] < row["numbered"] < row["cad"] and row["lines"] == 13
    # the format statement and its blank line are what cad adds to numbered
    assert abs(row["cad"] - row["numbered"] - len(adapter.encode(format_statement("lines") + "\n\n"))) <= 2
    assert report["numbers_tokens_per_line"] == (row["numbered"] - row["plain"]) / 13 >= 2
    # the first scheme is the generator's own layout; dropping "| " costs fewer tokens
    schemes = report["numbering_tokens_per_line"]
    assert schemes["{i:>w}| "] == report["numbers_tokens_per_line"]
    assert schemes["{i} "] < schemes["{i:>w}| "]
    # the compact prompt: its statement and "{i} " numbering, fewer tokens than cad's
    assert row["plain"] < row["compact"] < row["cad"] and report["compact_over_plain"] < report["cad_over_plain"]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text((Path(__file__).parent / "fixtures" / "corpus_sample.jsonl").read_text().splitlines()[0] + "\n")
    assert cli.main(["bench", "prompt", str(corpus), "--tokenizer", str(QWEN)]) == 0
    out = capsys.readouterr().out
    assert "| qwen | 1 |" in out and "by numbering scheme" in out
