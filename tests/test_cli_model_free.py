"""The model-free subcommands: oracle, apply, ceiling (in process, and once as a script)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cad_outlines.cli import main
from cad_outlines.training.corpus import load_corpus
from cad_outlines.language.program import parse

from testdata import CORPUS_SAMPLE, TOKENIZERS

QWEN = str(TOKENIZERS / "qwen")
SAMPLE = CORPUS_SAMPLE

DOC = "one\r\ntwo\r\nthree\r\n"
GOLD = "one\r\n2 </gen> ⟨ é\r\nthree\r\n"


@pytest.fixture
def pair(tmp_path):
    doc, gold = tmp_path / "doc.txt", tmp_path / "gold.txt"
    doc.write_bytes(DOC.encode())
    gold.write_bytes(GOLD.encode())
    return doc, gold


def run(capfdbinary, argv):
    code = main([str(a) for a in argv])
    out, err = capfdbinary.readouterr()
    return code, out.decode(), err.decode()


@pytest.mark.parametrize("extra", [[], ["--cost-aware", "--tokenizer", QWEN],
                                   ["--granularity", "tokens", "--tokenizer", QWEN, "--min-span", "1"]])
def test_oracle_then_apply_round_trips(capfdbinary, pair, tmp_path, extra):
    doc, gold = pair
    code, program, _ = run(capfdbinary, ["oracle", doc, gold, *extra])
    assert code == 0 and program.startswith("<program>") and program.endswith("</program>\n")
    granularity = "tokens" if "tokens" in extra else "lines"
    assert parse(program.rstrip("\n"), granularity)
    path = tmp_path / "prog.txt"
    path.write_text(program, encoding="utf-8")
    tok = ["--tokenizer", QWEN] if granularity == "tokens" else []
    code, out, _ = run(capfdbinary, ["apply", path, doc, *tok])
    assert code == 0 and out.encode() == GOLD.encode()  # CRLF and non-ASCII byte-exact
    target = tmp_path / "out.txt"
    assert run(capfdbinary, ["apply", path, doc, "-o", target, *tok])[0] == 0
    assert target.read_bytes() == GOLD.encode()


def test_oracle_program_text(capfdbinary, pair):
    doc, gold = pair
    _, program, _ = run(capfdbinary, ["oracle", doc, gold])
    assert program == ('<program><copy lines="1-1"/><gen>\n2 ⟨/gen> ⟨ é\r\n</gen>'
                       '<copy lines="3-4"/></program>\n')


def test_apply_strict_error_and_clipped_warning(capfdbinary, pair, tmp_path):
    doc, _ = pair
    prog = tmp_path / "p.txt"
    prog.write_text('<program><copy lines="2-9"/></program>', encoding="utf-8")
    code, out, err = run(capfdbinary, ["apply", prog, doc])
    assert code == 2 and out == ""
    assert "error: op 0" in err and "2-9" in err
    code, out, err = run(capfdbinary, ["apply", prog, doc, "--mode", "clipped"])
    assert code == 0 and out == "two\r\nthree\r\n"
    assert "warning: op 0" in err and "clipped to 2-4" in err


def test_apply_reports_parse_error_with_offset(capfdbinary, pair, tmp_path):
    doc, _ = pair
    prog = tmp_path / "p.txt"
    prog.write_text('<program>\n<copy lines="1-2"/></program>', encoding="utf-8")
    code, out, err = run(capfdbinary, ["apply", prog, doc])
    assert code == 2 and out == ""
    assert f"{prog}: line 1, column 10:" in err and "at offset 9" in err
    prog.write_text('<program><copy lines="1-1"/><gen>\na\n</gen><gen>b</gen></program>\n', encoding="utf-8")
    code, out, err = run(capfdbinary, ["apply", prog, doc])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{prog}: line 3, column 7:" in err and "two gens in a row" in err


def test_apply_failure_leaves_output_untouched(capfdbinary, pair, tmp_path):
    doc, _ = pair
    prog = tmp_path / "p.txt"
    prog.write_text('<program><copy lines="7-9"/></program>', encoding="utf-8")
    target = tmp_path / "out.txt"
    target.write_bytes(b"keep me")
    assert run(capfdbinary, ["apply", prog, doc, "-o", target])[0] == 2
    assert target.read_bytes() == b"keep me"


def test_token_program_needs_tokenizer(capfdbinary, pair, tmp_path):
    doc, gold = pair
    code, _, err = run(capfdbinary, ["oracle", doc, gold, "--granularity", "tokens"])
    assert code == 2 and "--tokenizer" in err
    prog = tmp_path / "p.txt"
    prog.write_text('<program><copy tokens="0-1"/></program>', encoding="utf-8")
    code, _, err = run(capfdbinary, ["apply", prog, doc])
    assert code == 2 and "--tokenizer" in err


def test_missing_and_non_utf8_files(capfdbinary, pair, tmp_path):
    doc, gold = pair
    code, _, err = run(capfdbinary, ["oracle", tmp_path / "nope.txt", gold])
    assert code == 2 and "nope.txt" in err
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff")
    code, _, err = run(capfdbinary, ["oracle", bad, gold])
    assert code == 2 and "bad.txt: not valid UTF-8 at byte offset 3" in err


def test_ceiling_json_and_table(capfdbinary, tmp_path):
    code, out, err = run(capfdbinary, ["ceiling", SAMPLE, "--tokenizer", QWEN, "--json"])
    assert code == 0
    stats = json.loads(out)
    assert stats["n"] == 60 and stats["roundtrip_ok"] == 60
    assert stats["T_copy"] + stats["T_gen"] == stats["T"]
    assert "60/60" in err  # tqdm's bar goes to stderr
    written = Path(tmp_path) / "ceiling.json"
    code, out2, _ = run(capfdbinary, ["ceiling", SAMPLE, "--tokenizer", QWEN, "-o", str(written)])
    assert code == 0 and json.loads(written.read_text()) == stats and "| corpus_sample | 60 |" in out2
    code, out, _ = run(capfdbinary, ["ceiling", SAMPLE, "--tokenizer", QWEN,
                                     "--granularity", "tokens", "--min-span", "8"])
    assert code == 0 and "| corpus_sample | 60 |" in out and "| 60/60 |" in out


def test_ceiling_reports_corpus_line(capfdbinary, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "doc": "x", "gold": "y"}\n{"id": "b"}\n', encoding="utf-8")
    code, _, err = run(capfdbinary, ["ceiling", corpus, "--tokenizer", QWEN])
    assert code == 2 and f"{corpus}:2: missing key(s): doc, gold" in err


def test_console_script(tmp_path):
    exe = shutil.which("cad-outlines")
    assert exe, "the cad-outlines script is not installed (pip install -e .)"
    case = load_corpus(SAMPLE)[0]
    (tmp_path / "doc").write_text(case.doc, encoding="utf-8", newline="")
    (tmp_path / "gold").write_text(case.gold, encoding="utf-8", newline="")
    program = subprocess.run([exe, "oracle", "doc", "gold"], cwd=tmp_path, check=True,
                             capture_output=True).stdout
    (tmp_path / "prog").write_bytes(program)
    subprocess.run([exe, "apply", "prog", "doc", "-o", "out"], cwd=tmp_path, check=True)
    assert (tmp_path / "out").read_bytes() == case.gold.encode()
