"""Prompt styles: the compact layout, the constant head every prompt shares, its pinned KV,
and the style a trained model carries."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines.adapters import PROMPT_STYLES, get_adapter
from cad_outlines.decoding.generator import CaDGenerator
from cad_outlines.decoding.runner import TransformersRunner
from cad_outlines.decoding.prompts import PromptError
from cad_outlines.tools.weights import adapter_prompt_style

from testdata import FAMILY_PRESETS

DOC = "def add(a, b):\n    return a + b\n"


def test_compact_puts_the_constant_part_first_and_the_instruction_last(tiny_model):
    adapter = get_adapter(tiny_model("tiny-qwen").hf_tokenizer)
    content = adapter.user_content(DOC, "  Rename add to plus. ", style="compact")
    head, rest = content.split("\n\n", 1)
    assert "<program>" in head and '<copy lines="i-j"/>' in head
    assert rest == "1 def add(a, b):\n2     return a + b\n3 \n\nRename add to plus."
    full = adapter.user_content(DOC, "Rename add to plus.")
    assert full.startswith("Rename add to plus.") and " 1| def add" not in full and "1| def add" in full
    assert len(adapter.encode(content)) < len(adapter.encode(full))


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@settings(max_examples=15, deadline=None)
@given(doc=st.text(alphabet="ab1 \n\t(){}<>|", max_size=40), instruction=st.text(min_size=1, max_size=20))
def test_every_prompt_starts_with_its_layouts_constant_ids(tiny_model, preset, doc, instruction):
    if not instruction.strip():
        return
    adapter = get_adapter(tiny_model(preset).hf_tokenizer)
    for style in PROMPT_STYLES:
        head = adapter.constant_ids(style=style)
        assert adapter.prompt_ids(doc, instruction, style=style)[:len(head)] == head
        head = adapter.constant_ids(style=style, plain=True)
        assert adapter.plain_prompt_ids(doc, instruction, style)[:len(head)] == head


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
def test_compact_prompts_of_one_file_share_the_file_as_a_prefix(tiny_model, preset):
    """Several edits of one file: in the compact layouts (program and plain) the prompts
    differ only after the document, so a kept prefix covers the whole file."""
    adapter = get_adapter(tiny_model(preset).hf_tokenizer)
    doc = "".join(f"line {k} = {k}\n" for k in range(40))

    def shared(a: list[int], b: list[int]) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    doc_tokens = len(adapter.encode(doc))
    for plain in (False, True):
        ids = (lambda i, s: adapter.plain_prompt_ids(doc, i, s)) if plain else (
            lambda i, s: adapter.prompt_ids(doc, i, style=s))
        compact = shared(ids("Rename line to row.", "compact"), ids("Delete line 3.", "compact"))
        full = shared(ids("Rename line to row.", "full"), ids("Delete line 3.", "full"))
        assert compact >= doc_tokens > full
    plain = adapter.plain_prompt(doc, "Delete line 3.", style="compact")
    assert plain.index("Document:\n" + doc) < plain.index("Delete line 3.")


def test_the_compact_head_holds_the_format_statement(tiny_model):
    adapter = get_adapter(tiny_model("tiny-qwen").hf_tokenizer)
    full, compact = adapter.constant_ids(), adapter.constant_ids(style="compact")
    assert compact[:len(full)] == full and "<program>" in adapter.decode(compact[len(full):])
    assert "<program>" not in adapter.decode(full)


def test_a_pinned_prefix_gives_a_full_prefills_logits_and_stays_pinned(tiny_model):
    model = tiny_model("tiny-qwen")
    adapter = get_adapter(model.hf_tokenizer)
    plain, pinned = TransformersRunner(model.model), TransformersRunner(model.model)
    head = adapter.constant_ids(style="compact")
    pinned.pin(head)
    for doc, instruction in [(DOC, "Rename add."), ("x = 1\n", "Delete line 1."), (DOC, "Rename add.")]:
        ids = adapter.prompt_ids(doc, instruction, style="compact")
        logits = pinned.forward(ids, pinned.new_cache())
        # only the head is reused, never the previous prompt (the third repeats the first)
        assert pinned.reused == len(head)
        assert torch.allclose(logits, plain.forward(ids, plain.new_cache()), atol=1e-4)


def test_the_style_changes_the_prompt_not_the_edit(tiny_model):
    model = tiny_model("tiny-qwen")
    forced = '<program><copy lines="1-1"/><gen>\n    return a - b\n</gen><copy lines="3-3"/></program>'
    results = {style: CaDGenerator(model, DOC, prompt_style=style).run("Subtract.", force_program=forced)
               for style in PROMPT_STYLES}
    assert {r.document for r in results.values()} == {"def add(a, b):\n    return a - b\n"}
    assert results["compact"].stats.prompt_tokens < results["full"].stats.prompt_tokens


def test_the_generator_uses_the_style_the_model_was_trained_on(tiny_model):
    model = tiny_model("tiny-qwen")
    assert CaDGenerator(model, DOC).prompt_style == "full"
    model.model.config.cad_prompt_style = "compact"
    try:
        assert CaDGenerator(model, DOC).prompt_style == "compact"
        assert CaDGenerator(model, DOC, prompt_style="full").prompt_style == "full"
    finally:
        del model.model.config.cad_prompt_style


@pytest.mark.parametrize("options, message", [
    ({"prompt_style": "short"}, "prompt_style must be one of full, compact"),
    ({"prompt_style": "compact", "granularity": "tokens"}, "use it with granularity 'lines'"),
])
def test_a_bad_style_is_one_clear_error(tiny_model, options, message):
    with pytest.raises(PromptError, match=message):
        CaDGenerator(tiny_model("tiny-qwen"), DOC, **options)


def test_an_adapters_style_is_read_from_its_record(tmp_path):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    assert adapter_prompt_style(shipped) == "full"  # adapters trained before styles existed
    (shipped / "training.json").write_text(json.dumps({"config": {"prompt_style": "compact"}}))
    assert adapter_prompt_style(shipped) == "compact"
    run = tmp_path / "run"
    (run / "adapter").mkdir(parents=True)
    (run / "record.json").write_text(json.dumps({"config": {"layout": "cad"}}))
    assert adapter_prompt_style(run / "adapter") == "full"
    (run / "record.json").write_text(json.dumps({"config": {"prompt_style": "compact"}}))
    assert adapter_prompt_style(run / "adapter") == "compact"


def test_batch_reuses_each_prompts_shared_prefix_then_turns_reuse_off(tiny_model, monkeypatch):
    model = tiny_model("tiny-qwen")
    forced = '<program><copy lines="1-1"/><gen>\n    return a - b\n</gen><copy lines="3-3"/></program>'
    seen: list[tuple[int, int, str]] = []

    def call(self, prompt, **options):  # a forced program: random weights write noise
        result = self.run(prompt, force_program=forced, **options)
        seen.append((result.stats.prompt_tokens_reused, result.stats.prompt_tokens, result.document))
        return result.document

    monkeypatch.setattr(CaDGenerator, "__call__", call)
    for style in PROMPT_STYLES:
        seen.clear()
        gen = CaDGenerator(model, DOC, prompt_style=style)
        docs = gen.batch(["Subtract.", "Subtract b from a.", "Return a minus b."])
        assert docs == ["def add(a, b):\n    return a - b\n"] * 3
        assert seen[0][0] == 0 and all(0 < reused < total for reused, total, _ in seen[1:])
        if style == "compact":  # the statement and the whole numbered document are shared
            head = len(gen.adapter.constant_ids(style="compact"))
            assert all(reused > head + 10 for reused, _, _ in seen[1:])
        assert not gen.runner.prefix_cache  # a single call afterwards prefills everything
        assert gen.run("Subtract.", force_program=forced).stats.prompt_tokens_reused == 0
