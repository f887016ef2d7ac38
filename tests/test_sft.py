"""SFT rows: the training layout is the layout the decode loop feeds a real model."""

from __future__ import annotations

import json

import pytest

from cad_outlines.cli import main
from cad_outlines.training.corpus import parse_case
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.language.program import Copy, Gen
from cad_outlines.training.sft import (DEFAULT_INSTRUCTION, IGNORE, RowBuilder, SFTError, build_rows,
                                       chat_messages)
from cad_outlines.generate import cad

from testdata import FAMILY_PRESETS, TOKENIZERS


def _builder(model) -> RowBuilder:
    return RowBuilder(model.hf_tokenizer)


def _fed_ids(model, doc: str, instruction: str, program: str) -> tuple[list[int], object]:
    """Teacher-force the real generator on a real (tiny) model; the ids its forwards received."""
    fed: list[int] = []

    def hook(_module, _args, kwargs):
        fed.extend(int(t) for t in kwargs["input_ids"][0])

    handle = model.model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        gen = cad(model, doc, draft_tags=False, max_new_tokens=1 << 20)
        result = gen.run(instruction, force_program=program)
    finally:
        handle.remove()
    return fed, result


@pytest.mark.slow
@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_rows_are_what_the_loop_feeds_a_real_model(preset, tiny_model, corpus_sample):
    model = tiny_model(preset)
    builder = _builder(tiny_model(preset))
    adapter = builder.adapter
    for record in corpus_sample:
        case = parse_case(json.dumps(record))
        instruction = record.get("instruction") or DEFAULT_INSTRUCTION
        ops = builder.oracle(case.doc, case.gold)
        row = builder.row(case.doc, ops, instruction, case.id)
        fed, result = _fed_ids(model, case.doc, instruction, row.program)
        assert result.document == case.gold, case.id
        # Same ids at the same positions; the row only adds the last step, which no
        # forward receives (nothing reads the logits after </program>).
        assert row.input_ids[:len(fed)] == fed, case.id
        tail = row.input_ids[len(fed):]
        assert 1 <= len(tail) <= len(adapter.encode("</program>")), case.id
        assert adapter.decode(row.input_ids).endswith("</program>"), case.id
        # The label mask: exactly the loop's program tokens (decoded + forced), no
        # prompt token, no spliced token.
        prompt = adapter.prompt_ids(case.doc, instruction)
        assert row.labels[:len(prompt)] == [IGNORE] * len(prompt)
        labelled = [t for t in row.labels if t != IGNORE]
        assert len(labelled) == result.stats.program_tokens, case.id
        assert adapter.decode(labelled) == result.program
        masked_after_prompt = sum(1 for t in row.labels[len(prompt):] if t == IGNORE)
        assert masked_after_prompt == result.stats.copied_tokens, case.id
        assert all(lab == tid for lab, tid in zip(row.labels, row.input_ids) if lab != IGNORE)


def test_spliced_spans_follow_their_tags(tiny_model):
    builder = _builder(tiny_model("tiny-qwen"))
    doc = "a = 1\nb = 2\nc = 3\n"
    row = builder.row(doc, [Copy(1, 1), Gen("B = 2\n"), Copy(3, 4)], "edit")
    span = builder.adapter.copy_ids(["c = 3", ""])
    # the last copy's span is masked and sits right before the program's closing ids
    masked_runs, run = [], []
    for tid, lab in zip(row.input_ids[len(builder.adapter.prompt_ids(doc, "edit")):],
                        row.labels[len(builder.adapter.prompt_ids(doc, "edit")):]):
        if lab == IGNORE:
            run.append(tid)
        elif run:
            masked_runs.append(run)
            run = []
    assert masked_runs == [builder.adapter.copy_ids(["a = 1"]), span]


def test_token_granularity_rows_match_the_loop(tiny_model, corpus_sample):
    model = tiny_model("tiny-deepseek-coder")
    builder = RowBuilder(model.hf_tokenizer, "tokens")
    for record in corpus_sample[:3]:
        case = parse_case(json.dumps(record))
        row = builder.row(case.doc, builder.oracle(case.doc, case.gold), "edit", case.id)
        fed: list[int] = []
        handle = model.model.register_forward_pre_hook(
            lambda _m, _a, kw: fed.extend(int(t) for t in kw["input_ids"][0]), with_kwargs=True)
        try:
            result = cad(model, case.doc, granularity="tokens", draft_tags=False,
                         max_new_tokens=1 << 20).run("edit", force_program=row.program)
        finally:
            handle.remove()
        assert result.document == case.gold
        assert row.input_ids[:len(fed)] == fed
        assert sum(t != IGNORE for t in row.labels) == result.stats.program_tokens


def test_a_program_the_document_rejects_is_an_sft_error(tiny_model):
    builder = _builder(tiny_model("tiny-qwen"))
    with pytest.raises(SFTError, match="case bad"):
        builder.row("one\ntwo\n", '<program><copy lines="2-9"/></program>', "edit", "bad")


def test_instruction_field_is_used_and_default_otherwise(tiny_model):
    builder = _builder(tiny_model("tiny-codellama"))
    cases = [parse_case(json.dumps({"id": "a", "doc": "x\n", "gold": "y\n", "instruction": "swap x for y"})),
             parse_case(json.dumps({"id": "b", "doc": "x\n", "gold": "z\n"}))]
    rows = list(build_rows(cases, builder))
    assert [r.instruction for r in rows] == ["swap x for y", DEFAULT_INSTRUCTION]
    assert rows[0].prompt.count("swap x for y") == 1
    chat = chat_messages(rows[0])["messages"]
    assert [m["role"] for m in chat] == ["user", "assistant"]
    assert chat[1]["content"] == rows[0].program and "swap x for y" in chat[0]["content"]


def test_cli_sft_build(tmp_path, capsys, corpus_sample):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in corpus_sample[:2]), encoding="utf-8")
    out, messages = tmp_path / "rows.jsonl", tmp_path / "chat.jsonl"
    rc = main(["sft", "build", str(corpus), "--tokenizer", str(TOKENIZERS / "qwen"),
               "-o", str(out), "--messages", str(messages)])
    assert rc == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in corpus_sample[:2]]
    for r in rows:
        assert len(r["input_ids"]) == len(r["labels"])
        assert r["program"].startswith("<program>") and r["program"].endswith("</program>")
    chat = [json.loads(line) for line in messages.read_text(encoding="utf-8").splitlines()]
    assert [c["messages"][1]["content"] for c in chat] == [r["program"] for r in rows]
    # --max-tokens below every row: nothing written, every case named as skipped
    rc = main(["sft", "build", str(corpus), "--tokenizer", str(TOKENIZERS / "qwen"),
               "-o", str(out), "--max-tokens", "5"])
    assert rc == 0 and out.read_text(encoding="utf-8") == ""
    assert "skipped " + corpus_sample[0]["id"] in capsys.readouterr().err


def test_cli_sft_build_rejects_cost_aware_tokens(tmp_path, capsys, corpus_sample):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps(corpus_sample[0]) + "\n", encoding="utf-8")
    rc = main(["sft", "build", str(corpus), "--tokenizer", str(TOKENIZERS / "qwen"),
               "--granularity", "tokens", "--cost-aware", "-o", str(tmp_path / "o.jsonl")])
    assert rc == 2 and "--cost-aware" in capsys.readouterr().err
