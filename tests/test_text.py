"""Text mode: programs found and read in chat replies, in the styles chat models write."""

from __future__ import annotations

import pytest

from cad_outlines.cli import main
from cad_outlines.tools.text import (AmbiguousReplyError, CopyRangeError, MalformedProgramError,
                                     NoProgramError, ReplyError, apply_reply, prompt_for)
from cad_outlines.language.program import parse

from testdata import ROOT, TOKENIZERS

DOC = "import os\ndef f(x):\n    return x\nprint(f(1))\n"
GOLD = "import os\ndef f(x):\n    return x + 1\nprint(f(1))\n"
CANON = '<program><copy lines="1-2"/><gen>\n    return x + 1\n</gen><copy lines="4-5"/></program>'
GEN = "<gen>\n    return x + 1\n</gen>"

# (name, reply, expected document or error type, repaired?)
VARIANTS = [
    ("bare canonical", CANON, GOLD, False),
    ("fenced xml", f"```xml\n{CANON}\n```", GOLD, False),
    ("fenced plain", f"```\n{CANON}\n```", GOLD, False),
    ("fenced tildes", f"~~~\n{CANON}\n~~~", GOLD, False),
    ("prose around, unfenced", f"Sure! Here is the edit:\n{CANON}\nThis changes line 3.", GOLD, False),
    ("explanation with inline code mentions",
     "The program is wrapped in `<program>` and uses `<copy lines=\"1-2\"/>` for unchanged lines.\n\n"
     f"```xml\n{CANON}\n```\nLines 1-2 and 4-5 are kept.", GOLD, False),
    ("thinking first", f"<think>line 3 must return x + 1</think>\n{CANON}", GOLD, False),
    ("pretty-printed", '```xml\n<program>\n  <copy lines="1-2"/>\n  ' + GEN + '\n  <copy lines="4-5"/>\n</program>\n```',
     GOLD, True),
    ("single quotes", f"<program><copy lines='1-2'/>{GEN}<copy lines='4-5'/></program>", GOLD, True),
    ("no quotes", f"<program><copy lines=1-2/>{GEN}<copy lines=4-5/></program>", GOLD, True),
    ("space before />", f'<program><copy lines="1-2" />{GEN}<copy lines="4-5" /></program>', GOLD, True),
    ("spaces in the range", f'<program><copy lines = " 1 - 2 "/>{GEN}<copy lines="4-5"/></program>', GOLD, True),
    ("explicit close tag", f'<program><copy lines="1-2"></copy>{GEN}<copy lines="4-5"></copy></program>', GOLD, True),
    ("not self-closed, next op follows", f'<program><copy lines="1-2">{GEN}<copy lines="4-5"></program>', GOLD, True),
    ("singular attribute", f'<program><copy line="1-2"/>{GEN}<copy line="4-5"/></program>', GOLD, True),
    ("en dash", f'<program><copy lines="1\u20132"/>{GEN}<copy lines="4\u20135"/></program>', GOLD, True),
    ("dot-dot range", f'<program><copy lines="1..2"/>{GEN}<copy lines="4..5"/></program>', GOLD, True),
    ("one-number ranges", f'<program><copy lines="1"/><copy lines="2"/>{GEN}<copy lines="4-5"/></program>',
     GOLD, True),
    ("missing </program> at the end", CANON[:-len("</program>")], GOLD, True),
    ("missing </program> in a fence", f"```xml\n{CANON[:-len('</program>')]}\n```\nDone.", GOLD, True),
    ("missing </program>, prose after", f"{CANON[:-len('</program>')]}\nThat is all.", GOLD, True),
    ("same program twice", f"Program:\n{CANON}\n\nFinal answer:\n```xml\n{CANON}\n```", GOLD, True),
    ("spaced gen and program tags", '<program ><copy lines="1-2"/><gen >\n    return x + 1\n</gen>'
     '<copy lines="4-5"/></program >', GOLD, True),
    ("gen without padding newlines", '<program><copy lines="1-2"/><gen>    return x + 1</gen>'
     '<copy lines="4-5"/></program>', GOLD, False),
    ("empty self-closed gen", '<program><copy lines="1-2"/><gen/><copy lines="4-5"/></program>',
     "import os\ndef f(x):\n\nprint(f(1))\n", True),
    ("two gens in a row", '<program><copy lines="1-2"/><gen>\n    return x\n</gen><gen>    + 1</gen>'
     '<copy lines="4-5"/></program>', "import os\ndef f(x):\n    return x\n    + 1\nprint(f(1))\n", True),
    ("delete by not copying", '<program><copy lines="1-2"/><copy lines="4-5"/></program>',
     "import os\ndef f(x):\nprint(f(1))\n", False),
    ("empty program", "<program></program>", "", False),
    # errors: never a guess
    ("prose only", "I would change line 3 to return x + 1.", NoProgramError, None),
    ("ops without <program>", f'<copy lines="1-2"/>{GEN}<copy lines="4-5"/>', NoProgramError, None),
    ("upper-case tags", CANON.upper(), NoProgramError, None),
    ("two different programs", f"Option A:\n{CANON}\nOption B:\n<program><copy lines=\"1-5\"/></program>",
     AmbiguousReplyError, None),
    ("gen never closed (truncated reply)", '<program><copy lines="1-2"/><gen>\n    return x +', MalformedProgramError, None),
    ("gen not closed before the next op", '<program><copy lines="1-2"/><gen>\n    return x + 1\n'
     '<copy lines="4-5"/></program>', MalformedProgramError, None),
    ("text between ops", f'<program><copy lines="1-2"/> then {GEN}<copy lines="4-5"/></program>',
     MalformedProgramError, None),
    ("token copies", '<program><copy tokens="0-5"/></program>', MalformedProgramError, None),
    ("range list", f'<program><copy lines="1-2,4"/>{GEN}</program>', MalformedProgramError, None),
    ("copy holding text", f'<program><copy lines="1-2">import os</copy>{GEN}</program>',
     MalformedProgramError, None),
    ("opened and cut off at once", "Here you go:\n<program>", MalformedProgramError, None),
    ("mismatched quotes", f'<program><copy lines="1-2\'/>{GEN}</program>', MalformedProgramError, None),
    ("range past the end", f'<program><copy lines="1-2"/>{GEN}<copy lines="4-9"/></program>',
     CopyRangeError, None),
    ("start after end", f'<program><copy lines="2-1"/>{GEN}<copy lines="4-5"/></program>', CopyRangeError, None),
    ("line zero", f'<program><copy lines="0-2"/>{GEN}<copy lines="4-5"/></program>', CopyRangeError, None),
]


def test_the_table_is_big_enough():
    assert len(VARIANTS) >= 30
    assert len({name for name, *_ in VARIANTS}) == len(VARIANTS)


@pytest.mark.parametrize("name, reply, expected, repaired", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_reply_variant(name, reply, expected, repaired):
    if isinstance(expected, type):
        with pytest.raises(expected) as err:
            apply_reply(reply, DOC)
        assert isinstance(err.value, ReplyError) and err.value.problem
        return
    result = apply_reply(reply, DOC)
    assert result.document == expected
    assert bool(result.repairs) is repaired, result.repairs
    # the canonical form is a program the strict parser reads to the same ops
    assert parse(result.program) == result.ops
    start, end = result.span
    assert reply[start:].startswith("<program")
    assert end <= len(reply)


def test_strict_reading_refuses_every_repair():
    for name, reply, expected, repaired in VARIANTS:
        if repaired:
            with pytest.raises(MalformedProgramError, match="lenient=False"):
                apply_reply(reply, DOC, lenient=False)
        elif not isinstance(expected, type):
            assert apply_reply(reply, DOC, lenient=False).document == expected, name


def test_clipped_mode_repairs_ranges_with_a_warning():
    reply = f'<program><copy lines="1-2"/>{GEN}<copy lines="4-9"/></program>'
    result = apply_reply(reply, DOC, mode="clipped")
    assert result.document == GOLD
    assert result.warnings and "clipped to 4-5" in result.warnings[0]


def test_errors_name_where():
    with pytest.raises(MalformedProgramError) as err:
        apply_reply(f'intro <program><copy lines="1-2"/> then {GEN}</program>', DOC)
    assert err.value.offset == len('intro <program><copy lines="1-2"/> ')
    assert "'then" in str(err.value)


def test_prompt_for_a_general_chat_model():
    messages = prompt_for(DOC, "make f return x + 1")
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "```xml" in messages[0]["content"] and "<copy lines=" in messages[0]["content"]
    user = messages[1]["content"]
    assert user.startswith("make f return x + 1")
    assert "3|     return x" in user and "5| " in user
    # the worked example in the system message is itself a valid reply
    example = messages[0]["content"].split("Reply:\n", 1)[1]
    assert apply_reply(example, "def f(a, b):\n    return a + b\n").document == "def f(a, b):\n    return a + c\n"


def test_prompt_for_a_fine_tuned_family_is_the_training_message():
    from cad_outlines.adapters import get_adapter, load_tokenizer


    messages = prompt_for(DOC, "make f return x + 1", family="qwen")
    adapter = get_adapter(load_tokenizer(TOKENIZERS / "qwen"))
    assert messages == [{"role": "user", "content": adapter.user_content(DOC, "make f return x + 1")}]
    with pytest.raises(ValueError, match="unknown family"):
        prompt_for(DOC, "x", family="gpt-9")


def test_cli_apply_from_reply(tmp_path, capsys):
    doc, reply, out = tmp_path / "f.py", tmp_path / "reply.txt", tmp_path / "out.py"
    doc.write_text(DOC, encoding="utf-8")
    reply.write_text(f"Sure:\n```xml\n<program><copy lines='1-2'/>{GEN}<copy lines='4-5'/></program>\n```\n",
                     encoding="utf-8")
    assert main(["apply", "--from-reply", str(reply), str(doc), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == GOLD
    assert "read" in capsys.readouterr().err  # the repairs are reported
    reply.write_text("no program here", encoding="utf-8")
    assert main(["apply", "--from-reply", str(reply), str(doc)]) == 2
    assert "holds no <program>" in capsys.readouterr().err
    assert main(["apply", str(doc)]) == 2  # neither PROGRAM nor --from-reply


def test_the_example_in_docs_text_mode_reads_as_shown():
    import re

    text = (ROOT / "docs" / "text-mode.md").read_text(encoding="utf-8")
    reply = re.search(r"````text\n(.*?)````", text, re.S).group(1)
    result = apply_reply(reply, DOC)
    assert result.document == GOLD
    shown = re.search(r"on stderr:\n\n```\n(.*?)```", text, re.S).group(1).splitlines()
    assert [line.split(": ", 2)[2] for line in shown] == list(result.repairs)
