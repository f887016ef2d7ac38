"""demo and edit subcommands with random-weight presets (forced programs: the loop is real,
the program's choice is the test's)."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import subprocess

import pytest

from cad_outlines.tools import models
from cad_outlines.cli import main

PATCH = shutil.which("patch")


@pytest.fixture(autouse=True)
def shared_model(monkeypatch, tiny_model):
    # One tiny model per session instead of one build per command (built before the
    # patch: tiny_model itself calls models.load).
    for name in ("tiny-qwen", "tiny-codellama"):
        tiny_model(name)
    monkeypatch.setattr(models, "load", lambda name, **kw: tiny_model(name))


def edit(*argv):
    return main(["edit", *map(str, argv), "--preset", "tiny-qwen"])


def program(tmp_path, text):
    path = tmp_path / f"p{len(list(tmp_path.glob('*.prog')))}.prog"
    path.write_text(text, encoding="utf-8")
    return path


def test_demo_runs_and_matches(capsys):
    assert main(["demo", "--preset", "tiny-codellama"]) == 0
    out = capsys.readouterr().out
    assert "edited document equals the expected one: True" in out
    assert "copied (spliced) tokens" in out and "speed-up over regeneration" in out


def test_unfinished_program_exits_1_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("x = 1\r\ny = 2\r\n", encoding="utf-8", newline="")
    out = tmp_path / "b.py"
    assert edit(src, "--instruction", "swap", "--max-new-tokens", "2", "-o", out) == 1
    assert not out.exists()
    assert "max-new-tokens" in capsys.readouterr().err


@pytest.mark.skipif(PATCH is None, reason="GNU patch is not installed")
def test_edit_diff_applies_with_patch_on_several_files(tmp_path, capsys, monkeypatch):
    files = {"nofinal.py": b"a = 1\nb = 2\nc = 3", "crlf.py": b"a = 1\r\nb = 2\r\nc = 3\r\n",
             "sub/final.py": b"a = 1\nb = 2\nc = 3\n"}
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    prog = program(tmp_path, '<program><copy lines="2-2"/><gen>\nc = 4\n</gen><copy lines="1-1"/></program>')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("change c\n"))  # --instruction -
    assert edit(*files, "--instruction", "-", "--force-program", prog, "-v") == 0
    captured = capsys.readouterr()
    assert captured.err.count("lines kept") == 3 and "copied tokens" in captured.err
    (tmp_path / "edit.patch").write_text(captured.out, encoding="utf-8", newline="")
    before = {name: (tmp_path / name).read_bytes() for name in files}
    done = subprocess.run([PATCH, "-p1", "--batch", "--fuzz=0", "-i", "edit.patch"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    from cad_outlines.language.program import parse
    from cad_outlines.language.resolver import resolve

    from cad_outlines.tools.diffs import line_summary

    # A CRLF file is edited in its "\n" form and written back with CRLF ends: the new line
    # gets one too, and the copy of line 1 that ends the file carries no stray "\r".
    expected = {name: resolve(parse(prog.read_text(encoding="utf-8")), before[name].decode())
                for name in files if name != "crlf.py"} | {"crlf.py": "b = 2\r\nc = 4\r\na = 1"}
    for name in files:
        assert (tmp_path / name).read_bytes() == expected[name].encode()
        counts = line_summary(before[name].decode(), expected[name])
        assert (f"{name}: {counts['kept']} lines kept, {counts['added']} added, "
                f"{counts['removed']} removed") in captured.err


def test_in_place_through_symlink_and_json(tmp_path, capsys):
    target = tmp_path / "real.py"
    target.write_text("x = 1\ny = 2\n", encoding="utf-8")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    prog = program(tmp_path, '<program><copy lines="2-2"/><copy lines="1-1"/><copy lines="3-3"/></program>')
    assert edit(link, "--instruction", "swap", "--force-program", prog, "--in-place", "--json", "-q") == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # -q: nothing but errors
    [record] = json.loads(captured.out)
    assert record["document"] == "y = 2\nx = 1\n" and record["written"] == str(link)
    assert record["ops"][0] == {"op": "copy", "start": 2, "end": 2} and record["complete"]
    assert record["summary"] == {"kept": 1, "added": 1, "removed": 1}
    assert record["stats"]["copied_tokens"] > 0
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "y = 2\nx = 1\n"


def test_an_unchanged_file_is_not_rewritten_in_place(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("x = 1\ny = 2\n", encoding="utf-8")
    os.utime(src, (1_000_000, 1_000_000))
    same = program(tmp_path, '<program><copy lines="1-3"/></program>')
    assert edit(src, "--instruction", "x", "--force-program", same, "--in-place", "--json") == 0
    captured = capsys.readouterr()
    [record] = json.loads(captured.out)
    assert record["written"] is None and record["summary"] == {"kept": 2, "added": 0, "removed": 0}
    assert f"note: {src} is unchanged" in captured.err
    assert src.stat().st_mtime == 1_000_000 and src.read_text(encoding="utf-8") == "x = 1\ny = 2\n"
    out = tmp_path / "out.py"  # -o names a new file: it is written, unchanged or not
    assert edit(src, "--instruction", "x", "--force-program", same, "-o", out, "-q") == 0
    assert out.read_text(encoding="utf-8") == "x = 1\ny = 2\n"
    swap = program(tmp_path, '<program><copy lines="2-2"/><copy lines="1-1"/><copy lines="3-3"/></program>')
    assert edit(src, "--instruction", "x", "--force-program", swap, "--in-place", "-q") == 0
    assert src.stat().st_mtime != 1_000_000 and src.read_text(encoding="utf-8") == "y = 2\nx = 1\n"


def test_near_total_deletion_needs_its_flag(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("".join(f"line {k}\n" for k in range(10)), encoding="utf-8")
    before = src.read_bytes()
    empty = program(tmp_path, "<program></program>")
    assert edit(src, "--instruction", "x", "--force-program", empty, "--in-place") == 1
    assert src.read_bytes() == before and "--allow-deletion" in capsys.readouterr().err
    most = program(tmp_path, '<program><copy lines="1-3"/></program>')  # keeps 3 of 10
    assert edit(src, "--instruction", "x", "--force-program", most, "--in-place") == 1
    assert src.read_bytes() == before
    assert edit(src, "--instruction", "x", "--force-program", empty, "--in-place", "--allow-deletion") == 0
    assert src.read_bytes() == b""


def test_copies_that_repeat_most_of_a_file_need_their_flag(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("".join(f"line {k}\n" for k in range(10)), encoding="utf-8")
    before = src.read_bytes()
    looped = program(tmp_path, '<program><copy lines="1-10"/><copy lines="4-10"/><copy lines="11-11"/></program>')
    assert edit(src, "--instruction", "x", "--force-program", looped, "--in-place") == 1
    err = capsys.readouterr().err
    assert "repeat 7 of the file's 10 lines" in err and "--allow-duplication" in err
    assert src.read_bytes() == before
    # a block written twice and a move are edits, not loops
    twice = program(tmp_path, '<program><copy lines="1-3"/><copy lines="1-3"/><copy lines="4-11"/></program>')
    moved = program(tmp_path, '<program><copy lines="6-10"/><copy lines="1-5"/><copy lines="11-11"/></program>')
    for prog in (twice, moved):
        assert edit(src, "--instruction", "x", "--force-program", prog, "-q") == 0
    assert edit(src, "--instruction", "x", "--force-program", looped, "--in-place", "--allow-duplication", "-q") == 0
    assert src.read_bytes() == before + b"".join(f"line {k}\n".encode() for k in range(3, 10))


def test_a_repeating_gen_is_named_and_its_flag_lifts_the_guard(tmp_path, capsys, monkeypatch):
    """A run the repetition guard stopped is reported as that, with the flag that lifts
    the guard; ``--allow-repetition`` reaches the loop as ``repetition_guard=False``."""
    from types import SimpleNamespace

    from cad_outlines.decoding import generator
    from cad_outlines.tools.edit import EditOptions, judge

    stopped = SimpleNamespace(document=None, ops=[], stats=SimpleNamespace(stop_reason="repetition"))
    verdict = judge("a.py", "x = 1\n", stopped, EditOptions()).error
    assert "kept repeating the same text" in verdict and "--allow-repetition" in verdict
    assert "max-new-tokens" not in verdict and "nothing was written" in verdict
    guards, real = [], generator.CaDGenerator.__init__

    def spy(self, *args, loop=None, **kwargs):
        guards.append(loop.repetition_guard)
        real(self, *args, loop=loop, **kwargs)

    monkeypatch.setattr(generator.CaDGenerator, "__init__", spy)
    src = tmp_path / "a.py"
    src.write_text("x = 1\ny = 2\n", encoding="utf-8")
    for flag in ((), ("--allow-repetition",)):
        edit(src, "--instruction", "swap", "--max-new-tokens", "4", "-q", *flag)
    assert guards == [True, False]


def test_edit_missing_file_is_a_clear_error(tmp_path, capsys):
    assert edit(tmp_path / "nope.py", "--instruction", "x") == 2
    assert "nope.py" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_edit_on_vllm_without_vllm_says_how_to_install_it(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "model").mkdir()
    status = main(["edit", str(src), "--instruction", "x", "--engine", "vllm", "--model", str(tmp_path / "model")])
    err = capsys.readouterr().err
    assert status == 2
    assert "cad-outlines[vllm]" in err and "Traceback" not in err
    assert src.read_text(encoding="utf-8") == "x = 1\n"


@pytest.mark.parametrize("argv, message", [
    (["--engine", "vllm", "--preset", "tiny-qwen"], "needs --model DIR"),
    (["--preset", "tiny-qwen", "--kv-cache-gib", "1"], "are for --engine vllm"),
])
def test_edit_engine_options_are_checked_before_loading(tmp_path, capsys, argv, message):
    src = tmp_path / "a.py"
    src.write_text("x = 1\n", encoding="utf-8")
    assert main(["edit", str(src), "--instruction", "x", *argv]) == 2
    assert message in capsys.readouterr().err


def test_edit_with_a_forward_cost_file(tmp_path, capsys):
    """--forward-cost takes a saved curve (drafts cut, same document) and refuses a file
    that is not one, naming it, before anything is written."""
    from cad_outlines.decoding.drafting import ForwardCost

    src = tmp_path / "a.py"
    src.write_text("a = 1\nb = 2\nc = 3\n", encoding="utf-8")
    from cad_outlines.language.oracle import oracle_program
    from cad_outlines.language.program import render

    prog = program(tmp_path, render(oracle_program("a = 1\nb = 2\nc = 3\n", "a = 1\nb = 5\nc = 3\n")))
    cost = tmp_path / "cost.json"
    ForwardCost((1, 2, 17), (0.1, 0.11, 0.3), (0.1, 0.12, 0.4)).save(cost)
    out = tmp_path / "b.py"
    assert edit(src, "--instruction", "x", "--force-program", prog, "--forward-cost", cost, "-o", out) == 0
    assert out.read_text(encoding="utf-8") == "a = 1\nb = 5\nc = 3\n"
    bad = tmp_path / "bad.json"
    bad.write_text('{"widths": [2, 3]}', encoding="utf-8")
    out.unlink()
    assert edit(src, "--instruction", "x", "--forward-cost", bad, "-o", out) == 2
    err = capsys.readouterr().err
    assert "--forward-cost" in err and "bad.json" in err and "Traceback" not in err
    assert not out.exists()


def test_a_program_file_ending_in_a_newline_is_read_alike_by_apply_and_edit(tmp_path, capsys):
    """One rule for program files: the newline an editor or echo adds is not part of the
    program, for ``apply PROGRAM`` and ``edit --force-program`` alike."""
    src = tmp_path / "a.py"
    src.write_text("x = 1\ny = 2\n", encoding="utf-8")
    text = '<program><copy lines="2-2"/><gen>z = 3\n</gen><copy lines="1-1"/></program>'
    plain, saved = program(tmp_path, text), program(tmp_path, text + "\n")
    results = []
    for prog in (plain, saved):
        assert main(["apply", str(prog), str(src)]) == 0
        applied = capsys.readouterr().out
        out = tmp_path / f"out-{prog.stem}.py"
        assert edit(src, "--instruction", "swap", "--force-program", prog, "-o", out, "--json", "-q") == 0
        record = json.loads(capsys.readouterr().out)[0]
        assert out.read_text(encoding="utf-8") == applied and applied.startswith("y = 2\nz = 3\nx = 1")
        results.append(record["program"])
    assert results == [text, text]  # the same program forced, byte for byte
    broken = program(tmp_path, text.replace("</program>", "") + "\n")
    assert main(["apply", str(broken), str(src)]) == 2
    apply_err = capsys.readouterr().err
    assert edit(src, "--instruction", "x", "--force-program", broken) == 2
    edit_err = capsys.readouterr().err
    where = apply_err.split(f"{broken}: ", 1)[1]
    assert where.startswith("line 2, column 26:") and where in edit_err  # the same message


def test_a_file_whose_copy_cannot_fit_the_context_is_refused_by_name_before_the_prefill(tmp_path, capsys,
                                                                                         monkeypatch):
    from cad_outlines.decoding.runner import TransformersRunner

    monkeypatch.setattr(TransformersRunner, "forward", lambda *a, **k: pytest.fail("a forward ran"))
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * 2500, encoding="utf-8")  # its prompt fits tiny-qwen's 32,768 positions
    assert edit(big, "--instruction", "Change 1 to 2.", "-i") == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the loading status
    assert err.startswith(f"cad-outlines edit: error: {big}: the prompt is"), err
    assert "an edit that keeps the document cannot finish" in err and "Traceback" not in err
    assert big.read_text(encoding="utf-8") == "x = 1\n" * 2500
