"""Corpus loading errors carry file and line; exact reads; atomic writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cad_outlines import files
from cad_outlines.training.corpus import Case, CorpusError, load_corpus
from cad_outlines.files import FileDecodeError, atomic_write, read_text

from testdata import CORPUS_SAMPLE


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_sample():
    cases = load_corpus(CORPUS_SAMPLE)
    assert len(cases) == 60 and all(isinstance(c, Case) for c in cases)
    first = json.loads(CORPUS_SAMPLE.read_text(encoding="utf-8").split("\n")[0])
    assert cases[0].id == first["id"] and cases[0].doc == first["doc"]
    assert cases[0].gold == first["gold"] and cases[0].meta["commit"] == first["commit"]


def test_blank_lines_are_skipped_and_extra_fields_kept(tmp_path):
    path = write_lines(tmp_path / "c.jsonl", [
        json.dumps({"id": "a", "doc": "x\r\n", "gold": "y", "source": "s"}), "", "  ",
        json.dumps({"id": "b", "doc": "\u2028", "gold": ""})])
    cases = load_corpus(path)
    assert [c.id for c in cases] == ["a", "b"]
    assert cases[0].doc == "x\r\n" and cases[0].meta == {"source": "s"}
    assert cases[1].doc == "\u2028"


def test_raw_u2028_inside_a_record_does_not_split_it(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a", "doc": "p\u2028q", "gold": "r"}\n', encoding="utf-8")
    assert load_corpus(path)[0].doc == "p\u2028q"


@pytest.mark.parametrize("bad, problem", [
    ('{"id": "b", "doc": "x", "gold": ', "bad JSON"),
    ('["id", "doc", "gold"]', "JSON object"),
    ('{"id": "b", "gold": "x"}', "missing key(s): doc"),
    ('{"doc": "x"}', "missing key(s): id, gold"),
    ('{"id": "b", "doc": 3, "gold": "x"}', "'doc' must be a string, got int"),
    ('{"id": null, "doc": "", "gold": "x"}', "'id' must be a string, got NoneType"),
    ('{"id": "a", "doc": "", "gold": ""}', "id 'a' already used on line 1"),
])
def test_malformed_lines_name_file_line_and_problem(tmp_path, bad, problem):
    good = json.dumps({"id": "a", "doc": "d", "gold": "g"})
    path = write_lines(tmp_path / "bad.jsonl", [good, "", bad, good])
    with pytest.raises(CorpusError) as info:
        load_corpus(path)
    err = info.value
    assert err.line == 3 and err.path == str(path)
    assert str(err).startswith(f"{path}:3: ") and problem in str(err)


def test_non_utf8_corpus_names_file_and_offset(tmp_path):
    path = tmp_path / "latin1.jsonl"
    data = b'{"id": "a", "doc": "caf\xe9", "gold": ""}\n'
    path.write_bytes(data)
    with pytest.raises(FileDecodeError) as info:
        load_corpus(path)
    assert str(info.value).startswith(f"{path}: not valid UTF-8 at byte offset 23 ")
    assert info.value.offset == data.index(b"\xe9") == 23


def test_read_text_is_exact(tmp_path):
    path = tmp_path / "doc.txt"
    data = "crlf\r\nlone cr\rno final newline \u2028 \ufeff".encode() + b"\r\n\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + data)
    text = read_text(path)
    assert text.encode() == b"\xef\xbb\xbf" + data
    atomic_write(tmp_path / "copy.txt", text)
    assert (tmp_path / "copy.txt").read_bytes() == path.read_bytes()


def test_read_text_error_names_offset(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\nok\n\xff rest")
    with pytest.raises(FileDecodeError) as info:
        read_text(path)
    assert info.value.offset == 6 and str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_atomic_write_creates_and_replaces(tmp_path):
    path = tmp_path / "out.txt"
    atomic_write(path, "one\r\n")
    assert path.read_bytes() == b"one\r\n"
    os.chmod(path, 0o640)
    atomic_write(path, "two")
    assert path.read_bytes() == b"two"
    assert (path.stat().st_mode & 0o777) == 0o640
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "out.txt"
    path.write_bytes(b"old content\n")

    def broken_fsync(fd):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(files.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(path, "new content that must not appear\n")
    assert path.read_bytes() == b"old content\n"
    assert os.listdir(tmp_path) == ["out.txt"]  # no temp file left behind


def test_atomic_write_unencodable_text_touches_nothing(tmp_path):
    path = tmp_path / "out.txt"
    path.write_bytes(b"old\n")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(path, "lone surrogate \ud800")
    assert path.read_bytes() == b"old\n" and os.listdir(tmp_path) == ["out.txt"]


def test_atomic_write_interrupted_replace_keeps_old_file(tmp_path, monkeypatch):
    path = tmp_path / "out.txt"
    path.write_bytes(b"old\n")
    monkeypatch.setattr(files.os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, "new\n")
    assert path.read_bytes() == b"old\n" and os.listdir(tmp_path) == ["out.txt"]
