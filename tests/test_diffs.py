"""The one diff writer: its output applies with GNU patch and git apply, byte for byte."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines.tools.diffs import NO_NEWLINE, line_summary, unified_diff

from testdata import ROOT

PATCH, GIT = shutil.which("patch"), shutil.which("git")

PAIRS = {
    "no final newline, last line changed": ("a = 1\nb = 2\nc = 3", "a = 1\nb = 2\nc = 4"),
    "final newline removed": ("a\nb\n", "a\nb"),
    "final newline added": ("a\nb", "a\nb\n"),
    "crlf": ("a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"),
    "crlf, no final newline": ("a\r\nb\r\nc", "a\r\nb\r\nC"),
    "mixed endings and a lone cr": ("a\r\nb\rc\nd", "a\r\nb\rX\nd\n"),
    "emptied": ("a\nb\n", ""),
    "from empty": ("", "new\nfile"),
}


def apply_with(tool: str, tmp_path, before: str, diff: str) -> bytes:
    work = tmp_path / tool
    work.mkdir()
    (work / "f.txt").write_bytes(before.encode())
    (work / "edit.patch").write_bytes(diff.encode())
    if tool == "patch":
        command = [PATCH, "-p1", "--batch", "--fuzz=0", "--no-backup-if-mismatch", "-i", "edit.patch"]
    else:
        command = [GIT, "apply", "--unsafe-paths", "-p1", "edit.patch"]
    done = subprocess.run(command, cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr + diff
    return (work / "f.txt").read_bytes()


@pytest.mark.parametrize("tool", [pytest.param("patch", marks=pytest.mark.skipif(PATCH is None, reason="no patch")),
                                  pytest.param("git", marks=pytest.mark.skipif(GIT is None, reason="no git"))])
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_diff_applies(tmp_path, tool, name):
    before, after = PAIRS[name]
    diff = unified_diff(before, after, "a/f.txt", "b/f.txt")
    if tool == "git" and (not before or not after):
        pytest.skip("git apply wants /dev/null headers for created or emptied files")
    assert apply_with(tool, tmp_path, before, diff) == after.encode()


def test_missing_final_newline_is_marked():
    diff = unified_diff("a = 1\nc = 3", "a = 1\nc = 4")
    assert "-c = 3\n" + NO_NEWLINE + "+c = 4\n" + NO_NEWLINE in diff
    assert "-c = 3+c = 4" not in diff  # difflib's own output runs the lines together


def test_equal_texts_give_no_diff():
    assert unified_diff("a\r\nb", "a\r\nb") == ""


line = st.text(alphabet=st.sampled_from("ab \r\u2028é"), max_size=4)


@pytest.mark.skipif(PATCH is None, reason="no patch")
@settings(max_examples=40, deadline=None)
@given(st.lists(line, max_size=6), st.lists(line, max_size=6), st.booleans(), st.booleans())
def test_generated_diffs_apply_with_patch(tmp_path_factory, a, b, end_a, end_b):
    before = "\n".join(a) + ("\n" if end_a and a else "")
    after = "\n".join(b) + ("\n" if end_b and b else "")
    diff = unified_diff(before, after, "a/f.txt", "b/f.txt")
    assert apply_with("patch", tmp_path_factory.mktemp("p"), before, diff) == after.encode()


def test_line_summary():
    assert line_summary("a\nb\nc\n", "a\nc\nd\n") == {"kept": 2, "added": 1, "removed": 1}
    assert line_summary("x\n" * 10000, "x\n" * 10000) == {"kept": 10000, "added": 0, "removed": 0}
    assert line_summary("a\nb", "") == {"kept": 0, "added": 0, "removed": 2}


def test_one_diff_writer_in_the_package():

    root = ROOT
    users = sorted(str(p.relative_to(root)) for folder in ("cad_outlines", "adapters")
                   for p in (root / folder).rglob("*.py")
                   if "difflib.unified_diff(" in p.read_text(encoding="utf-8"))
    assert users == ["cad_outlines/tools/diffs.py"]
