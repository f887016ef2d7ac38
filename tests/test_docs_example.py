"""The offline example in docs/generator.md runs as written."""

import re

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
