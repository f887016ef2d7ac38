"""demo and edit subcommands with random-weight presets."""

from cad_outlines.cli import main


def test_demo_runs_and_matches(capsys):
    assert main(["demo", "--preset", "tiny-codellama"]) == 0
    out = capsys.readouterr().out
    assert "edited document equals the expected one: True" in out
    assert "copied (spliced) tokens" in out and "speed-up over regeneration" in out


def test_edit_writes_atomically_or_refuses(tmp_path, capsys):
    src = tmp_path / "a.py"
    src.write_text("x = 1\r\ny = 2\r\n", encoding="utf-8", newline="")
    out = tmp_path / "b.py"
    # A tiny budget cannot finish a program: nothing is written, the error says why.
    assert main(["edit", str(src), "--instruction", "swap", "--preset", "tiny-qwen",
                 "--max-new-tokens", "2", "-o", str(out)]) == 2
    assert not out.exists()
    assert "max-new-tokens" in capsys.readouterr().err
    prog = tmp_path / "p.prog"
    prog.write_text('<program><copy lines="2-2"/><copy lines="1-1"/><copy lines="3-3"/></program>')
    assert main(["edit", str(src), "--instruction", "swap", "--preset", "tiny-qwen",
                 "--force-program", str(prog), "-o", str(out)]) == 0
    assert out.read_bytes() == b"y = 2\r\nx = 1\r\n"
    captured = capsys.readouterr()
    assert "+y = 2" in captured.out and "-y = 2" in captured.out and "copied tokens" in captured.err


def test_edit_missing_file_is_a_clear_error(tmp_path, capsys):
    assert main(["edit", str(tmp_path / "nope.py"), "--instruction", "x", "--preset", "tiny-qwen"]) == 2
    assert "nope.py" in capsys.readouterr().err
