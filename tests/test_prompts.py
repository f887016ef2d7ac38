"""Prompts (model-free part): conversations and user templates are checked at the door."""

from __future__ import annotations

import pytest
from outlines.inputs import Chat

from cad_outlines.decoding.prompts import PromptError, PromptTemplate, as_messages


def test_an_instruction_is_one_user_message():
    assert as_messages("fix it") == [{"role": "user", "content": "fix it"}]


def test_a_chat_and_a_list_give_the_same_messages():
    messages = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "ok"}, {"role": "user", "content": "fix it"}]
    assert as_messages(Chat(list(messages))) == as_messages(messages) == messages


@pytest.mark.parametrize("prompt, fragment", [
    ([], "empty"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "must\nend".replace("\n", " ")),
    ([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}, {"role": "user", "content": "c"}],
     "only the first"),
    ([{"role": "tool", "content": "a"}], "role 'tool'"),
    ([{"role": "user", "content": ["a", "b"]}], "list content"),
    ([{"content": "a"}], "'role' and 'content'"),
    (42, "got int"),
])
def test_bad_conversations_say_what_is_wrong(prompt, fragment):
    with pytest.raises(PromptError, match=fragment):
        as_messages(prompt)


def test_template_renders_its_three_variables():
    t = PromptTemplate("{{ instruction }}\n--\n{{ format }}\n--\n{{ document }}\n")
    assert t.render(instruction="I", format="F", document="D") == "I\n--\nF\n--\nD\n"


@pytest.mark.parametrize("source, fragment", [
    ("{{ instruction }} only", r"must contain \{\{ document \}\}"),
    ("{{ document }} only", r"must contain \{\{ instruction \}\}"),
    ("{{ instruction }} {{ document }} {{ file }}", "unknown variable.*file"),
    ("{{ instruction }} {% if %}", "does not parse"),
])
def test_bad_templates_are_rejected(source, fragment):
    with pytest.raises(PromptError, match=fragment):
        PromptTemplate(source)
