"""Adapters: detection, overrides, derived literal ids, prompts, document views, CLI."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from cad_outlines import cli
from cad_outlines.adapters import (ADAPTERS, LITERALS, AdapterError, CodeLlamaAdapter,
                                   DeepSeekCoderAdapter, GenericAdapter, QwenAdapter,
                                   detect_family, get_adapter, load_tokenizer)
from cad_outlines.adapters.portability import PORTABILITY_LITERALS
from cad_outlines.language import syntax

from testdata import FAMILIES, ROOT, TOKENIZERS, corpus_records

CLASSES = {"qwen": QwenAdapter, "deepseek-coder": DeepSeekCoderAdapter, "codellama": CodeLlamaAdapter}
CORPUS = list(corpus_records())
DOC = "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def toks():
    return {f: load_tokenizer(TOKENIZERS / f) for f in FAMILIES}


@pytest.fixture(scope="module")
def adapters(toks):
    return {f: get_adapter(t) for f, t in toks.items()}


# -- detection and overrides -------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_autodetects_family(toks, adapters, family):
    assert detect_family(toks[family]) == family
    assert type(adapters[family]) is CLASSES[family]
    assert adapters[family].name == family
    assert get_adapter(toks[family]) is adapters[family]  # cached per tokenizer


def test_detection_ignores_the_folder_name(tmp_path):
    # A DeepSeek-Coder tokenizer in a folder named like a Llama one is still DeepSeek-Coder.
    fake = tmp_path / "codellama-7b-instruct"
    shutil.copytree(TOKENIZERS / "deepseek-coder", fake)
    tok = load_tokenizer(fake)
    assert detect_family(tok) == "deepseek-coder"
    tok.name_or_path = "Qwen/Qwen2.5-7B"
    assert get_adapter(tok).name == "deepseek-coder"


@pytest.mark.parametrize("family", FAMILIES)
def test_generic_override_works_on_every_fixture(toks, adapters, family):
    generic = get_adapter(toks[family], "generic")
    assert type(generic) is GenericAdapter
    # Same text encoding as the family adapter: the families differ in prompt and eos.
    for text in (DOC, " leading", "<|im_start|><s></s>"):
        assert generic.encode(text) == adapters[family].encode(text)


@pytest.mark.parametrize("forced, family, missing", [
    ("qwen", "codellama", "<|im_end|>"),
    ("qwen", "deepseek-coder", "<|im_end|>"),
    ("deepseek-coder", "qwen", "<|EOT|>"),
    ("codellama", "qwen", "<0x0A>"),
    ("codellama", "deepseek-coder", "<s>"),
])
def test_override_with_wrong_family_names_the_missing_token(toks, forced, family, missing):
    with pytest.raises(AdapterError, match=re.escape(repr(missing))):
        get_adapter(toks[family], forced)


def test_unknown_adapter_name(toks):
    with pytest.raises(AdapterError, match="unknown adapter 'llama3'.*qwen"):
        get_adapter(toks["qwen"], "llama3")


def test_adapters_registry():
    assert list(ADAPTERS) == ["qwen", "deepseek-coder", "codellama", "generic"]
    assert all(cls.name == name for name, cls in ADAPTERS.items())


def _tiny_byte_level_bpe() -> PreTrainedTokenizerFast:
    texts = ["def add(a, b):\n    return a + b\n", "Hello world, <program> </gen> copy lines"] * 50
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<|end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>")


def test_unrecognised_tokenizer_that_round_trips_gets_generic():
    tok = _tiny_byte_level_bpe()
    assert detect_family(tok) == "generic"
    adapter = get_adapter(tok)
    assert type(adapter) is GenericAdapter
    assert adapter.decode([adapter.eos_token_id]) == "<|end|>"
    assert adapter.eos_token_id not in adapter.encode("x<|end|>y")
    text = "caf\u00e9 \U0001F600\n\tx"
    assert adapter.decode(adapter.encode("<program>") + adapter.encode(text)) == "<program>" + text
    # No chat template and no BOS: the plain template is the user message and a newline.
    assert adapter.prompt("x", "do it") == adapter.user_content("x", "do it") + "\n"


def test_adapter_cache_does_not_keep_tokenizers_alive():
    import gc
    import weakref

    tok = _tiny_byte_level_bpe()
    adapter = get_adapter(tok)
    assert get_adapter(tok) is adapter and get_adapter(tok, "generic") is adapter
    ref = weakref.ref(tok)
    del tok, adapter
    gc.collect()
    assert ref() is None


def test_unrecognised_tokenizer_that_loses_text_is_rejected_naming_the_probe():
    word = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "<|end|>": 2}, unk_token="[UNK]"))
    word.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=word, eos_token="<|end|>", unk_token="[UNK]")
    assert detect_family(tok) == "generic"
    with pytest.raises(AdapterError, match=r"generic adapter rejected the tokenizer: probe '\\n'.*"
                                           r"did not round-trip: encode gave ids \[\]"):
        get_adapter(tok)


def test_wordpiece_tokenizer_is_refused_with_an_adapter_error():
    """A BERT-style WordPiece tokenizer: a clear AdapterError, not the decoder's TypeError."""
    vocab = {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3, "b": 4, "##b": 5, "<": 6, ">": 7}
    wp = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.decoder = decoders.WordPiece()
    tok = PreTrainedTokenizerFast(tokenizer_object=wp, unk_token="[UNK]", eos_token="[SEP]")
    with pytest.raises(AdapterError, match="WordPiece tokenizers are not supported"):
        get_adapter(tok)
    with pytest.raises(AdapterError, match="WordPiece"):
        detect_family(tok)


def test_adapter_built_for_another_tokenizer_is_refused(toks, adapters, tiny_model):
    """A CodeLlama adapter on a Qwen model would feed CodeLlama ids to Qwen."""
    from cad_outlines.decoding.generator import CaDGenerator

    model = tiny_model("tiny-qwen")
    with pytest.raises(AdapterError, match=r"codellama adapter was built for .* cannot serve"):
        CaDGenerator(model, "a\nb\n", adapter=adapters["codellama"])
    adapters["qwen"].check_tokenizer(model.hf_tokenizer)  # same folder, another object: fine
    with pytest.raises(AdapterError, match="the vocabularies differ"):
        adapters["deepseek-coder"].check_tokenizer(toks["codellama"])


def test_load_tokenizer_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer folder not found"):
        load_tokenizer(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AdapterError, match="no tokenizer.json in this folder"):
        load_tokenizer(tmp_path / "empty")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(AdapterError, match="cannot load a tokenizer from"):
        load_tokenizer(tmp_path / "broken")


# -- derived ids ---------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_literal_ids_are_derived_and_decode_back(adapters, family):
    a = adapters[family]
    assert set(a.literal_ids) == set(LITERALS)
    assert {"<program>", "</program>", '<copy lines="', '<copy tokens="', "-", '"/>', "<gen>",
            "</gen>", *"0123456789"} == set(LITERALS)
    for lit, ids in a.literal_ids.items():
        assert ids and a.decode(ids) == lit
        assert ids == a.encode(lit)
        assert not set(ids) & a.special_ids


@pytest.mark.parametrize("family, spelling", [
    ("qwen", "<|im_end|>"), ("deepseek-coder", "<|EOT|>"), ("codellama", "</s>")])
def test_eos_is_the_chat_end_token(adapters, toks, family, spelling):
    a = adapters[family]
    assert a.eos_token_id == toks[family].convert_tokens_to_ids(spelling)
    assert a.decode([a.eos_token_id]) == spelling
    assert a.eos_token_id not in a.encode(f"x{spelling}y")


def test_deepseek_coder_splits_the_closing_literals(adapters):
    # The portability fact the design depends on (see docs/adapters.md).
    pieces = lambda fam, lit: [adapters[fam].decode([i]) for i in adapters[fam].encode(lit)]
    assert pieces("deepseek-coder", "</gen>") == ["<", "/", "gen", ">"]
    assert pieces("deepseek-coder", '"/>') == ['"/', ">"]
    assert pieces("deepseek-coder", '="') == ["=", '"']
    assert pieces("qwen", "</gen>") == ["</", "gen", ">"]
    assert pieces("codellama", '"/>') == ['"/>']


def _int_constants(path: Path) -> list[tuple[int, int]]:
    tree = ast.parse(path.read_text("utf-8"))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and type(node.value) is int]


def test_no_token_id_literals_in_adapter_code():
    # Real token ids are mostly above 256 (byte-level alphabets and byte-fallback tokens
    # fill the first ids); a larger int constant in adapters/ would be a typed-in id.
    files = sorted((ROOT / "adapters").glob("*.py"))
    assert len(files) >= 6
    big = {str(p.name): [c for c in _int_constants(p) if c[1] > 256] for p in files}
    assert not any(big.values()), big


def _permute_folder(src: Path, dst: Path) -> callable:
    """Copy a tokenizer folder with the ids of its ordinary tokens reversed.

    Added tokens keep their ids: transformers re-places added tokens by their own rules
    when it loads a folder, so moving them would test transformers, not the adapters.
    """
    spec = json.loads((src / "tokenizer.json").read_text("utf-8"))
    vocab = spec["model"]["vocab"]
    added = {a["id"] for a in spec["added_tokens"]}
    ordinary = sorted(set(vocab.values()) - added)
    mapping = dict(zip(ordinary, reversed(ordinary)))
    perm = lambda i: mapping.get(i, i)  # noqa: E731
    spec["model"]["vocab"] = {tok: perm(i) for tok, i in vocab.items()}

    def fix(node):
        if isinstance(node, dict):
            if isinstance(node.get("ids"), list):
                node["ids"] = [perm(i) for i in node["ids"]]
            for value in node.values():
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(spec.get("post_processor"))
    config = json.loads((src / "tokenizer_config.json").read_text("utf-8"))
    dst.mkdir()
    (dst / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), "utf-8")
    (dst / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), "utf-8")
    return perm


@pytest.mark.parametrize("family", FAMILIES)
def test_ids_follow_the_tokenizer_when_its_ids_are_permuted(adapters, family, tmp_path):
    perm = _permute_folder(TOKENIZERS / family, tmp_path / family)
    moved = get_adapter(load_tokenizer(tmp_path / family))
    orig = adapters[family]
    assert moved.name == family
    p = lambda ids: [perm(i) for i in ids]  # noqa: E731
    assert moved.eos_token_id == perm(orig.eos_token_id)
    assert sum(perm(i) != i for v in orig.literal_ids.values() for i in v) >= 10
    assert moved.literal_ids == {k: p(v) for k, v in orig.literal_ids.items()}
    assert moved.encode(DOC) == p(orig.encode(DOC))
    assert moved.prompt_ids(DOC, "Rename add.") == p(orig.prompt_ids(DOC, "Rename add."))
    assert moved.decode(moved.prompt_ids(DOC, "x")) == orig.decode(orig.prompt_ids(DOC, "x"))


# -- layout --------------------------------------------------------------------------------


def test_copy_layout_rule(adapters):
    a = adapters["qwen"]
    assert a.copy_layout(["a", "", "  b"]) == "\na\n\n  b\n"
    assert a.copy_ids(["a", "  b"]) == a.encode_span("\na\n  b\n")
    with pytest.raises(ValueError, match="at least one line"):
        a.copy_layout([])
    with pytest.raises(ValueError, match="must not contain"):
        a.copy_layout(["a\nb"])


@pytest.mark.parametrize("family", FAMILIES)
def test_copy_splice_round_trips_in_program_context(adapters, family):
    a = adapters[family]
    lines = DOC.split("\n")
    prefix = a.encode('<program><copy lines="2-3"/>')
    ids = prefix + a.copy_ids(lines[1:3]) + a.literal_ids["<gen>"]
    assert a.decode(ids) == '<program><copy lines="2-3"/>\n    return a + b\n\n<gen>'


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_keeps_leading_spaces_and_specials(adapters, family):
    a = adapters[family]
    ids = a.encode("  x")
    assert a.decode(ids) == "  x"
    assert a.decode([a.eos_token_id]) == a.tokenizer.convert_ids_to_tokens(a.eos_token_id)
    with pytest.raises(AdapterError, match="outside the vocabulary"):
        a.decode([len(a.tokenizer) + 10_000])


# -- document views --------------------------------------------------------------------------


def test_render_lines_exact(adapters):
    doc = "\n".join(f"l{i}" for i in range(1, 11)) + "\n"
    view = adapters["qwen"].render_document(doc)
    rows = view.split("\n")
    assert rows[0] == " 1| l1" and rows[9] == "10| l10" and rows[10] == "11| "
    assert len(rows) == 11
    # no final newline: the open end is shown as the empty last line a trained model expects
    assert adapters["codellama"].render_document("x") == "1| x\n2| "
    assert adapters["codellama"].render_document("x\n") == "1| x\n2| "
    assert adapters["codellama"].render_document("") == "1| "


@pytest.mark.parametrize("case", CORPUS[::7], ids=lambda c: c["id"])
def test_render_lines_parses_back_to_the_document(adapters, case):
    doc = case["doc"]
    view = adapters["qwen"].render_document(doc, "lines")
    rows = view.split("\n")
    assert len(rows) == len(syntax.copy_lines(doc))
    numbers = [int(r.split("|", 1)[0]) for r in rows]
    assert numbers == list(range(1, len(rows) + 1))
    assert "\n".join(re.sub(r"^ *\d+\| ", "", r) for r in rows) == doc


def _check_token_view(a, doc):
    view = a.render_document(doc, "tokens")
    rows = view.split("\n")
    lines = doc.split("\n")
    assert len(rows) == len(lines)
    pieces = a.token_pieces(doc)
    starts, off = [], 0
    for piece in pieces:
        starts.append(off)
        off += len(piece)
    expected_next = 0
    line_start = 0
    for row, line in zip(rows, lines):
        span, text = row.split("| ", 1)
        assert text.replace("\u00b7", "") == line
        if span.strip():
            first, last = map(int, span.split("-"))
            assert first == expected_next
            expected_next = last + 1
            # Every token in the range starts on this line (its newline included).
            line_end = line_start + len(line.encode())
            assert all(line_start <= starts[k] <= line_end for k in range(first, last + 1))
            if line.isascii():
                # ASCII: every token start is a character boundary, so the dots count them.
                at_start = starts[first] == line_start
                assert text.count("\u00b7") + at_start == last - first + 1
        line_start += len(line.encode()) + 1
    assert expected_next == len(pieces)


@pytest.mark.parametrize("family", FAMILIES)
def test_render_tokens_view_positions(adapters, family):
    a = adapters[family]
    for case in CORPUS[::6]:
        _check_token_view(a, case["doc"])
    _check_token_view(a, "caf\u00e9 \U0001F600 x\n\n\n  \ty\n")
    _check_token_view(a, "")


def test_render_tokens_example(adapters):
    # The example in adapters/_view.py's docstring, kept true by this test.
    assert adapters["qwen"].render_document("def f():\n    return 1\n", "tokens") == (
        "0-2| def\u00b7 f\u00b7():\n3-7|    \u00b7 return\u00b7 \u00b71\u00b7\n   | ")


def test_render_rejects_unknown_granularity(adapters):
    with pytest.raises(ValueError, match="granularity"):
        adapters["qwen"].render_document("x", "chars")


# -- prompts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("granularity", ["lines", "tokens"])
def test_prompt_holds_instruction_format_and_document(adapters, family, granularity):
    a = adapters[family]
    text = a.prompt(DOC, "Rename add to plus.", granularity)
    content = a.user_content(DOC, "Rename add to plus.", granularity)
    assert content in text
    assert content.startswith("Rename add to plus.\n\n")
    assert content.endswith("Document:\n" + a.render_document(DOC, granularity))
    assert ('<copy lines="i-j"/>' in content) == (granularity == "lines")
    assert ('<copy tokens="a-b"/>' in content) == (granularity == "tokens")


def test_qwen_prompt_is_its_chat_template(adapters, toks):
    a, tok = adapters["qwen"], toks["qwen"]
    content = a.user_content(DOC, "Rename add.")
    expected = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                       add_generation_prompt=True, enable_thinking=False)
    assert a.prompt(DOC, "Rename add.") == expected
    assert expected.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    ids = a.prompt_ids(DOC, "Rename add.")
    assert ids == tok.encode(expected, add_special_tokens=False)
    assert a.decode(ids) == expected


def test_deepseek_prompt_is_the_instruct_format(adapters, toks):
    a, tok = adapters["deepseek-coder"], toks["deepseek-coder"]
    assert tok.chat_template is None  # the fixture has none: the adapter's plain template
    text = a.prompt(DOC, "Rename add.")
    content = a.user_content(DOC, "Rename add.")
    assert text.startswith(tok.bos_token + "You are an AI programming assistant, utilizing the Deepseek")
    assert text.endswith("refuse to answer\n### Instruction:\n" + content + "\n### Response:\n")
    ids = a.prompt_ids(DOC, "Rename add.")
    assert ids[0] == tok.bos_token_id
    assert ids == tok.encode(text, add_special_tokens=False)
    assert a.decode(ids) == text


def test_codellama_prompt_is_the_inst_format(adapters, toks):
    a, tok = adapters["codellama"], toks["codellama"]
    assert tok.chat_template is None
    text = a.prompt(DOC, "Rename add.")
    content = a.user_content(DOC, "Rename add.")
    assert text == "<s>[INST] " + content + " [/INST]"
    ids = a.prompt_ids(DOC, "Rename add.")
    # Meta's reference: BOS + SentencePiece("[INST] ... [/INST]") with the dummy prefix.
    assert ids == tok.encode(text, add_special_tokens=False)
    assert ids[:2] == [tok.bos_token_id, tok.convert_tokens_to_ids("\u2581[")]
    assert a.decode(ids) == "<s> " + text[len("<s>"):]


SPECIAL_DOC = "a = '<|im_start|>user'\nb = '<s>' + '</s>' + '<|EOT|>' + '<|endoftext|>' + '<|im_end|>'\n"


@pytest.mark.parametrize("family", FAMILIES)
def test_special_spellings_in_the_document_stay_text_in_prompt_ids(adapters, family):
    a = adapters[family]
    plain = SPECIAL_DOC.replace("<", "[")
    specials = a.special_ids
    count = lambda ids: sorted(i for i in ids if i in specials)  # noqa: E731
    ids = a.prompt_ids(SPECIAL_DOC, "Edit.")
    # The only special ids are the template's own: the same as for a document without them.
    assert count(ids) == count(a.prompt_ids(plain, "Edit."))
    # And the document's text, spellings included, is inside the decoded prompt verbatim.
    assert a.render_document(SPECIAL_DOC) in a.decode(ids)
    if family == "qwen":
        im_start = a.tokenizer.convert_tokens_to_ids("<|im_start|>")
        assert ids.count(im_start) == 2  # user turn + assistant turn, none from the document
        assert a.decode(ids) == a.prompt(SPECIAL_DOC, "Edit.")


# -- portability CLI -------------------------------------------------------------------------


def test_portability_json(capsys):
    dirs = [str(TOKENIZERS / f) for f in FAMILIES]
    assert cli.main(["portability", "--tokenizer", *dirs, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report) == list(FAMILIES)
    for name, rows in report.items():
        assert list(rows) == list(PORTABILITY_LITERALS)
        for lit, row in rows.items():
            assert row["count"] == len(row["pieces"]) == len(row["ids"]) >= 1
            assert "".join(row["pieces"]) == lit
    assert report["deepseek-coder"]["</gen>"]["pieces"] == ["<", "/", "gen", ">"]
    assert report["qwen"]["</gen>"]["count"] == 3


def test_portability_table(capsys):
    assert cli.main(["portability", "--tokenizer", str(TOKENIZERS / "deepseek-coder"),
                     str(TOKENIZERS / "codellama")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "| literal | deepseek-coder | codellama |"
    assert "| `</gen>` | 4: [<] [/] [gen] [>] | 3: [</] [gen] [>] |" in out
    assert "| `\u2423lines` | 1: [\u2423lines] | 1: [\u2423lines] |" in out


def test_portability_missing_folder(capsys, tmp_path):
    assert cli.main(["portability", "--tokenizer", str(tmp_path / "nope")]) == 2
    assert "tokenizer folder not found" in capsys.readouterr().err


# -- token bytes ---------------------------------------------------------------------------


def _chars_by_byte() -> dict[int, str]:
    """For each byte that occurs in UTF-8, a character whose encoding contains it."""
    found: dict[int, str] = {}
    for cp in [*range(0x800), *range(0x800, 0x10000, 0x40), *range(0x10000, 0x110000, 0x1000)]:
        if 0xD800 <= cp < 0xE000:
            continue  # surrogates have no UTF-8 encoding
        for b in chr(cp).encode("utf-8"):
            found.setdefault(b, chr(cp))
    return found


def test_byte_alphabet_matches_the_byte_level_pre_tokenizer():
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    mapping = bytes_to_unicode()
    assert sorted(mapping) == list(range(256))
    assert set(mapping.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    chars = _chars_by_byte()
    assert len(chars) == 256 - 13  # 0xC0, 0xC1, 0xF5..0xFF never occur in UTF-8
    for b, ch in chars.items():
        (mapped, _), = pre.pre_tokenize_str(ch)
        assert mapped == "".join(mapping[x] for x in ch.encode("utf-8")), (b, ch)


@pytest.mark.parametrize("family", FAMILIES)
def test_token_bytes_agree_with_the_tokenizers_own_decoder(toks, adapters, family):
    a, tok = adapters[family], toks[family]
    n = len(a._bytes)
    decoded = tok.backend_tokenizer.decode_batch([[i] for i in range(n)], skip_special_tokens=False)
    compared = 0
    for i, text in enumerate(decoded):
        raw = a.token_bytes(i)
        if "\ufffd" in text or not raw:
            continue  # a partial character: the string decoder cannot show its bytes
        ours = raw.decode("utf-8")
        if a.facts.scheme == "sentencepiece" and ours.startswith(" "):
            ours = ours[1:]  # the Llama decoder strips one leading space of a sequence
        assert ours == text, (i, raw, text)
        compared += 1
    assert compared > 0.9 * n
