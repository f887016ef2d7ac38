"""Bad input at the command line: one line, exit 2, before any work; nothing left behind."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import pytest

from cad_outlines import cli
from testdata import CORPUS_SAMPLE, TOKENIZERS


def run(capsys, argv):
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_line(err: str) -> bool:
    return "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [
    ["ceiling", CORPUS_SAMPLE, "--tokenizer", TOKENIZERS / "qwen", "-o", "/nonexistent-folder/stats.json"],
    ["sft", "build", CORPUS_SAMPLE, "--tokenizer", TOKENIZERS / "qwen", "-o", "/nonexistent-folder/rows.jsonl"],
    ["sft", "build", CORPUS_SAMPLE, "--tokenizer", TOKENIZERS / "qwen", "-o", "{tmp}", ],
])
def test_an_output_that_cannot_be_written_fails_before_any_work(capsys, tmp_path, argv):
    argv = [str(a).replace("{tmp}", str(tmp_path)) for a in argv]
    start = time.process_time()
    code, _, err = run(capsys, argv)
    assert code == 2 and one_line(err), err
    assert time.process_time() - start < 5  # was 60-130 s of work before the failure
    assert (argv[-1] in err) and ".tmp" not in err  # the user's path, not a temporary file


def test_sft_build_refuses_a_bad_adapter_and_max_tokens_at_parse_time(capsys):
    for extra in (["--adapter", "bogus"], ["--max-tokens", "-1"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["sft", "build", str(CORPUS_SAMPLE), "--tokenizer", str(TOKENIZERS / "qwen"),
                      "-o", "/tmp/x.jsonl", *extra])
        assert exit_info.value.code == 2


def test_a_reply_with_a_five_thousand_digit_index_is_input_not_a_bug(capsys, tmp_path):
    doc, reply = tmp_path / "d.txt", tmp_path / "r.txt"
    doc.write_text("a\nb\n")
    reply.write_text(f'<program><copy lines="1-{"9" * 5000}"/></program>')
    code, _, err = run(capsys, ["apply", "--from-reply", reply, doc])
    assert code == 2 and one_line(err) and "5000 digits" in err


def test_apply_reads_the_program_from_stdin(capsys, tmp_path, monkeypatch):
    doc = tmp_path / "d.txt"
    doc.write_text("a\nb\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'<program><copy lines="2-3"/></program>\n')))
    code, out, _ = run(capsys, ["apply", "-", doc])
    assert code == 0 and out == "b\n"


def test_a_seed_past_torch_range_is_refused_at_parse_time(tmp_path):
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["edit", str(src), "--instruction", "x", "--preset", "tiny-qwen", "--seed", "1" + "0" * 23])
    assert exit_info.value.code == 2


def test_a_model_folder_with_a_wrongly_typed_config_is_input(capsys, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": "big"}))
    src = tmp_path / "a.py"
    src.write_text("x = 1\n")
    code, _, err = run(capsys, ["edit", src, "--instruction", "x", "--model", folder, "-q"])
    assert code == 2 and one_line(err) and str(folder) in err


def test_a_forced_program_out_of_range_is_refused_before_the_model_loads(capsys, tmp_path, monkeypatch):
    src, prog = tmp_path / "a.py", tmp_path / "p.txt"
    src.write_text("".join(f"x{k} = {k}\n" for k in range(7)))
    prog.write_text('<program><copy lines="1-99"/></program>')
    monkeypatch.setattr("cad_outlines.tools.edit.load_model", lambda **kw: pytest.fail("the model was loaded"))
    code, _, err = run(capsys, ["edit", src, "--instruction", "x", "--preset", "tiny-qwen",
                                "--force-program", prog])
    assert code == 2 and one_line(err) and "1-99" in err and "lines 1-8" in err
    prog.write_text("<program><copy lines=")
    code, _, err = run(capsys, ["edit", src, "--instruction", "x", "--preset", "tiny-qwen",
                                "--force-program", prog])
    assert code == 2 and one_line(err)


def test_a_diff_of_a_symlink_or_a_file_elsewhere_applies_with_patch(tmp_path, capsys, monkeypatch):
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    other.mkdir()
    (work / "real.py").write_text("x = 1\ny = 2\n")
    (work / "link.py").symlink_to(work / "real.py")
    (other / "far.py").write_text("x = 1\ny = 2\n")
    prog = tmp_path / "p.txt"
    prog.write_text('<program><copy lines="2-2"/><copy lines="1-1"/><copy lines="3-3"/></program>')
    monkeypatch.chdir(work)
    for target, apply_in in (("link.py", work), (str(other / "far.py"), other)):
        code, diff, err = run(capsys, ["edit", target, "--instruction", "swap", "--preset", "tiny-qwen",
                                       "--force-program", prog])
        assert code == 0 and "note:" in err
        patched = subprocess.run(["patch", "-p1"], input=diff, text=True, cwd=apply_in, capture_output=True)
        assert patched.returncode == 0, patched.stdout + patched.stderr
    assert (work / "real.py").read_text() == "y = 2\nx = 1\n" and (work / "link.py").is_symlink()
    assert (other / "far.py").read_text() == "y = 2\nx = 1\n"


def test_a_stale_temporary_file_from_a_killed_write_is_removed_next_time(tmp_path):
    from cad_outlines.files import TEMP_TAG, atomic_write

    target = tmp_path / "out.txt"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f".out.txt.{TEMP_TAG}-{dead}-abc.tmp"
    live = tmp_path / f".out.txt.{TEMP_TAG}-{child.pid}-def.tmp"  # a write still running: kept
    stale.write_text("x" * 1000)
    live.write_text("y")
    try:
        atomic_write(target, "new\n")
        assert target.read_text() == "new\n" and not stale.exists() and live.exists()
    finally:
        child.kill()
        child.wait()


def test_the_summary_counts_a_last_line_copied_without_its_newline_as_kept(capsys, tmp_path):
    src, prog = tmp_path / "a.txt", tmp_path / "p.txt"
    src.write_text("hello\n")
    prog.write_text('<program><copy lines="1-1"/></program>')  # drops the final newline
    code, _, err = run(capsys, ["edit", src, "--instruction", "x", "--preset", "tiny-qwen",
                                "--force-program", prog])
    assert code == 0 and "1 lines kept, 0 added, 0 removed" in err


def test_batch_keeps_the_documents_finished_before_a_failure(tiny_model, monkeypatch):
    from cad_outlines.decoding.generator import CaDGenerator, IncompleteProgramError

    gen = CaDGenerator(tiny_model("tiny-qwen"), "a\nb\n")
    done = gen.run("x", force_program='<program><copy lines="2-3"/></program>')
    unfinished = gen.run("x", max_new_tokens=1)
    assert done.document == "b\n" and unfinished.document is None
    results = iter([done, unfinished])
    monkeypatch.setattr(gen, "run", lambda prompt, **options: next(results))
    with pytest.raises(IncompleteProgramError) as info:
        gen.batch(["first", "second"])
    assert info.value.completed == ["b\n"]  # was lost with the exception


def test_an_interrupt_after_the_output_is_in_place_reports_it_written(capsys, tmp_path, monkeypatch):
    from cad_outlines import files

    doc, prog, out = tmp_path / "d.txt", tmp_path / "p.txt", tmp_path / "out.txt"
    doc.write_text("a\nb\n")
    prog.write_text('<program><copy lines="2-3"/></program>')
    monkeypatch.setattr(files, "WRITTEN", [])
    real = files.atomic_write

    def write_then_interrupt(path, text):
        real(path, text)
        raise KeyboardInterrupt("signal 15")  # SIGTERM right after the rename

    monkeypatch.setattr(files, "atomic_write", write_then_interrupt)
    code, _, err = run(capsys, ["apply", prog, doc, "-o", out])
    assert code == 0 and "interrupted after writing" in err and out.read_text() == "b\n"
    monkeypatch.setattr(files, "WRITTEN", [])
    monkeypatch.setattr(files, "atomic_write", lambda path, text: (_ for _ in ()).throw(KeyboardInterrupt()))
    code, _, err = run(capsys, ["apply", prog, doc, "-o", tmp_path / "other.txt"])
    assert code == 130 and not (tmp_path / "other.txt").exists()  # Ctrl-C: 128 + SIGINT


def test_bench_quality_names_a_cases_file_it_cannot_read(capsys, tmp_path):
    missing = tmp_path / "cases.jsonl"
    code, _, err = run(capsys, ["bench", "quality", "--cases", missing, "--configs", "cad"])
    assert code == 2 and one_line(err), err
    assert f"--cases {missing}: cannot read it (No such file or directory)" in err


@pytest.mark.parametrize("given, says", [
    ("qwen2.5-coder-0.5b", "expected PRESET=DIR"),
    ("tiny-qwen=.", "'tiny-qwen' is not a real-weight preset"),
    ("qwen2.5-coder-0.5b-regen=.", "no configuration of this run loads 'qwen2.5-coder-0.5b-regen'"),
    ("qwen2.5-coder-0.5b=MISSING", "holds no LoRA adapter (no adapter_config.json)"),
])
def test_bench_quality_names_an_adapter_it_cannot_use(capsys, tmp_path, given, says):
    code, _, err = run(capsys, ["bench", "quality", "--configs", "qwen_cad", "--adapter",
                                given.replace("MISSING", str(tmp_path / "none"))])
    assert code == 2 and one_line(err), err
    assert says in err
