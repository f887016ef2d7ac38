"""The offline example in docs/generator.md runs as written."""

import os
import re
import subprocess

import pytest

from testdata import ROOT

DOC = ROOT / "docs" / "generator.md"


def test_offline_example_runs(capsys):
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Example that runs offline", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("<program><copy lines=\"1-1\"/><gen>")
    assert "splices" in out


def test_outlines_style_example_runs(capsys):
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Outlines-style calls, offline", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    exec(compile(code, str(DOC), "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    chunks = eval(lines[0])  # the printed list of streamed chunks
    assert chunks[0] == "def add(a, b):" and len(chunks) > 3
    assert lines[1].endswith(" True")


def _offline_blocks():
    """Every block fenced ```python offline or ```bash offline in README.md and docs/."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for k, match in enumerate(re.finditer(r"```(python|bash) offline\n(.*?)```", text, re.S)):
            yield pytest.param(match.group(1), match.group(2), id=f"{path.name}-{k}")


def test_some_blocks_are_marked_offline():
    assert len(list(_offline_blocks())) >= 3


@pytest.mark.parametrize("language, code", list(_offline_blocks()))
def test_every_block_marked_offline_runs_from_a_clone(language, code, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # docs name repo-relative paths
    if language == "python":
        exec(compile(code, "<doc block>", "exec"), {"__name__": "__doc_block__"})
    else:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
