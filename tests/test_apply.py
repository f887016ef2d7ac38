"""Lazy edit snippets: marker lines, the snippet's prompt layout, ``generate.apply``,
``CaDGenerator.apply`` and ``edit --update`` (forced programs on a tiny preset: random
weights cannot choose an edit; the real model only has to finish a valid program)."""

from __future__ import annotations

import io

import pytest

import cad_outlines.generate
from hypothesis import given, strategies as st

from cad_outlines.language.snippets import marker_lines as find_markers, update_instruction, update_of
from cad_outlines.bench.fuzz import check_result
from cad_outlines.cli import main
from cad_outlines.errors import InputError
from cad_outlines.decoding.generator import CaDGenerator, IncompleteProgramError
from cad_outlines.decoding.prompts import PromptError, update_prompt
from cad_outlines.tools import models

DOC = "def mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef total(xs):\n    return sum(xs)\n"
UPDATE = ("def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n"
          "    return sum(xs) / len(xs)\n# ... existing code ...\n")
# What a model should write for UPDATE: line 1, the new check, lines 2-6.
PROGRAM = ('<program><copy lines="1-1"/><gen>\n    if not xs:\n        raise ValueError(\'empty\')\n'
           '</gen><copy lines="2-7"/></program>')
GOLD = DOC.replace("(xs):\n    return sum(xs) /", "(xs):\n    if not xs:\n        raise ValueError('empty')\n"
                   "    return sum(xs) /", 1)


@pytest.mark.parametrize("line", [
    "# ... existing code ...", "    // ... existing code ...", "/* ... existing code ... */",
    "<!-- ... existing code ... -->", "-- ... existing code ...", "\t# … existing code …",
    "// ... rest of code ...", "  # ... existing code unchanged ...", "; ... existing code ...",
    "// ...existing code...\r",
])
def test_marker_lines_in_each_comment_syntax(line):
    assert find_markers(f"x = 1\n{line}\ny = 2\n") == [2]


@pytest.mark.parametrize("line", [
    "print('... existing code ...')", "x = 1  # ... existing code ...", "# existing code",
    "# ... new code ...", "...existing code...", "/* ... existing code ...",
])
def test_code_that_mentions_the_words_is_not_a_marker(line):
    assert find_markers(f"{line}\n") == []


def test_update_instruction_layout():
    text = update_instruction(UPDATE, "guard against empty lists")
    assert text.startswith("guard against empty lists\nApply this update to the document;")
    assert "`# ... existing code ...`" in text  # the snippet's own marker is quoted
    assert text.endswith("<update>\n" + UPDATE + "</update>")
    assert update_instruction("x = 1\n").startswith("Apply this update")  # no instruction
    assert "`// ... existing code ...`" in update_instruction("x = 1\n", path="a.c")  # the file's own syntax


@given(st.text(st.characters(codec="utf-8"), min_size=1).filter(str.strip),
       st.none() | st.text(st.characters(codec="utf-8")))
def test_update_of_reads_back_the_snippet_an_instruction_carries(snippet, instruction):
    try:
        text = update_instruction(snippet, instruction)
    except InputError:  # a snippet of markers only is refused: nothing to read back
        return
    assert update_of(text) == (snippet if snippet.endswith("\n") else snippet + "\n")


def test_update_of_a_plain_instruction_is_none():
    assert update_of("Rename `x` to `y`.") is None
    assert update_of("Apply this update to the document; but <update>\nx\n</update> is quoted here.") is None


@pytest.mark.parametrize("snippet", ["", "  \n", "// ... existing code ...\n"])
def test_an_empty_snippet_is_refused(snippet):
    with pytest.raises(PromptError, match="snippet is empty"):
        update_prompt(snippet)
    with pytest.raises(PromptError, match="must be a str"):
        update_prompt(b"x = 1")  # type: ignore[arg-type]


def test_apply_is_an_edit_with_the_snippet_as_instruction(tiny_model):
    model = tiny_model("tiny-qwen")
    gen = CaDGenerator(model, DOC)
    applied = gen.apply(UPDATE, force_program=PROGRAM)
    assert applied == GOLD
    result = gen.run(update_prompt(UPDATE), force_program=PROGRAM)
    assert result.stats.prompt_tokens == len(gen.adapter.prompt_ids(DOC, update_prompt(UPDATE)))


def test_generate_apply_runs_the_model_on_the_snippet_prompt(tiny_model):
    model = tiny_model("tiny-qwen")
    with pytest.raises(IncompleteProgramError) as info:  # random weights do not finish in 4 tokens
        cad_outlines.generate.apply(model, DOC, UPDATE, instruction="guard", max_new_tokens=4)
    gen = CaDGenerator(model, DOC)
    assert info.value.result.stats.prompt_tokens == len(gen.adapter.prompt_ids(DOC, update_prompt(UPDATE, "guard")))


@pytest.fixture
def shared_tiny(monkeypatch, tiny_model):
    tiny_model("tiny-qwen")
    monkeypatch.setattr(models, "load", lambda name, **kw: tiny_model(name))


def test_edit_update_writes_the_merged_file(tmp_path, capsys, shared_tiny, monkeypatch):
    src, out = tmp_path / "stats.py", tmp_path / "out.py"
    src.write_text(DOC, encoding="utf-8")
    prog = tmp_path / "p.prog"
    prog.write_text(PROGRAM, encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(UPDATE.encode("utf-8"))))  # --update -
    argv = ["edit", str(src), "--update", "-", "--preset", "tiny-qwen", "--force-program", str(prog),
            "-o", str(out), "-q"]
    assert main(argv) == 0
    assert out.read_text(encoding="utf-8") == GOLD


def test_edit_update_bad_input_is_one_line(tmp_path, capsys, shared_tiny):
    src, snippet = tmp_path / "a.py", tmp_path / "u.py"
    src.write_text(DOC, encoding="utf-8")
    snippet.write_text("# ... existing code ...\n", encoding="utf-8")
    assert main(["edit", str(src), "--update", str(snippet), "--preset", "tiny-qwen"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and f"--update {snippet}: the update snippet is empty" in err
    assert main(["edit", str(src), str(src), "--update", str(snippet), "--preset", "tiny-qwen"]) == 2
    assert "--update takes one FILE" in capsys.readouterr().err
    assert main(["edit", str(src), "--update", str(tmp_path / "nope"), "--preset", "tiny-qwen"]) == 2
    with pytest.raises(SystemExit) as exit_info:  # argparse: one or the other
        main(["edit", str(src), "--update", str(snippet), "--instruction", "x", "--preset", "tiny-qwen"])
    assert exit_info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err


def test_the_real_model_finishes_a_valid_program_for_a_snippet(real_model):
    model = real_model("smollm2-135m")
    gen = CaDGenerator(model, DOC, max_new_tokens=160)
    result = gen.run(update_prompt(UPDATE))
    assert result.complete and check_result(result, gen) == [], result.program


def test_edit_update_drafts_the_snippets_merge(tmp_path, shared_tiny):
    from cad_outlines.tools.edit import EditJob, run_edit

    prog = tmp_path / "p.prog"
    prog.write_text(PROGRAM, encoding="utf-8")
    runs = [list(run_edit(EditJob({"stats.py": DOC}, update_prompt(UPDATE), preset="tiny-qwen",
                                  force_program=str(prog), update=update)))[0] for update in (None, UPDATE)]
    assert [r.result.document for r in runs] == [GOLD, GOLD]
    # the snippet's merge is drafted: the forced program needs fewer forwards with it
    assert runs[1].result.stats.forward_passes < runs[0].result.stats.forward_passes


def test_edit_update_says_when_the_snippet_has_no_merge(tmp_path, capsys, shared_tiny):
    """New lines between two markers with no line of the file beside them cannot be placed
    literally: the model applies the snippet alone, and the user is told so (not under -q)."""
    src, snippet, prog = tmp_path / "stats.py", tmp_path / "u.py", tmp_path / "p.prog"
    src.write_text(DOC, encoding="utf-8")
    prog.write_text(PROGRAM, encoding="utf-8")
    base = ["edit", str(src), "--preset", "tiny-qwen", "--force-program", str(prog), "-o", str(tmp_path / "o.py")]
    unplaced = "# ... existing code ...\n    if not xs:\n        raise ValueError('empty')\n# ... existing code ...\n"
    for text, told in ((unplaced, True), (UPDATE, False)):
        snippet.write_text(text, encoding="utf-8")
        assert main([*base, "--update", str(snippet)]) == 0
        err = capsys.readouterr().err
        assert (f"{src}: the snippet cannot be placed by its own lines" in err) is told, err
    snippet.write_text(unplaced, encoding="utf-8")
    assert main([*base, "--update", str(snippet), "-q"]) == 0
    assert "cannot be placed" not in capsys.readouterr().err


def test_edit_update_can_follow_the_merge(tmp_path, capsys, shared_tiny):
    """--follow-prediction: the merge is a prior; a floor no allowed token falls under
    makes even a random-weight model write it; bad values and a missing snippet are one line."""
    src, snippet, out = tmp_path / "stats.py", tmp_path / "u.py", tmp_path / "out.py"
    src.write_text(DOC, encoding="utf-8")
    snippet.write_text(UPDATE, encoding="utf-8")
    base = ["edit", str(src), "--preset", "tiny-qwen", "-q"]
    assert main([*base, "--update", str(snippet), "--follow-prediction", "1e-12", "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == GOLD
    capsys.readouterr()
    for value in ("0", "1.5", "nan", "auto"):
        with pytest.raises(SystemExit) as exit_info:  # argparse's one usage error
            main([*base, "--update", str(snippet), "--follow-prediction", value])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(
            f"argument --follow-prediction: must be a number in (0, 1], 'model' or 'off', got {value}")
    assert main([*base, "--instruction", "x", "--follow-prediction", "0.05"]) == 2
    assert "--follow-prediction needs --update" in capsys.readouterr().err
    # vLLM takes the floor too (tests/test_vllm.py runs it): here the folder is what is refused
    vllm = ["edit", str(src), "--engine", "vllm", "--model", str(tmp_path), "-q", "--update", str(snippet)]
    assert main([*vllm, "--follow-prediction", "0.05"]) == 2
    assert "follow-prediction" not in capsys.readouterr().err
    # 'model' and 'off' need no snippet: tiny-qwen records no floor, so both leave the merge a draft
    for value in ("model", "off"):
        assert main([*base, "--instruction", "x", "--follow-prediction", value, "--max-new-tokens", "8"]) in (0, 1)
        assert "needs --update" not in capsys.readouterr().err


def test_an_adapters_apply_floor_is_read_from_its_record(tmp_path):
    """``apply.json`` beside an adapter records the floor ``follow_prediction="model"``
    uses; none: no floor; a bad record is one clear error naming the file. The shipped
    Qwen adapter has one (docs/learn.md: chosen on snippets of other files)."""
    import json

    from cad_outlines.errors import InputError
    from cad_outlines.tools.weights import adapter_apply_floor, adapter_dir

    assert adapter_apply_floor(tmp_path) is None
    (tmp_path / "apply.json").write_text(json.dumps({"follow_prediction": 1e-4}))
    assert adapter_apply_floor(tmp_path) == 1e-4
    for bad in ('{"follow_prediction": 0}', '{"follow_prediction": "0.1"}', '{"floor": 0.1}', "{"):
        (tmp_path / "apply.json").write_text(bad)
        with pytest.raises(InputError, match="apply.json: not an apply record"):
            adapter_apply_floor(tmp_path)
    shipped = adapter_apply_floor(adapter_dir("qwen2.5-coder-0.5b-cad"))
    assert shipped is not None and 0 < shipped <= 1
    assert adapter_apply_floor(adapter_dir("smollm2-135m-cad")) is None
