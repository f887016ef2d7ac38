"""What a caller may pass as a prompt, checked at the door.

A prompt is either an instruction (``str``) or a conversation: an Outlines
``outlines.inputs.Chat`` or a list of ``{"role": ..., "content": ...}`` dicts. The
document is always the generator's: the conversation's LAST message must be the user's
instruction, and the adapter appends the program-format statement and the numbered
document to it (see ``adapters/_view.py``). An optional system message (first) and the
earlier user/assistant turns are kept as they are.

A :class:`PromptTemplate` replaces the layout of that last user message. It is a Jinja
template (as Outlines' own templates are) over three variables: ``instruction`` (the
user's text, stripped), ``format`` (the program-format statement) and ``document`` (the
numbered document). ``document`` and ``instruction`` must both appear: a template that
drops either would silently edit blind or ignore the request.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union

import jinja2
import jinja2.meta

from ..adapters import check_style
from ..language.snippets import update_instruction
from ..errors import PromptError

#: The variables a :class:`PromptTemplate` may use.
TEMPLATE_VARIABLES = ("instruction", "format", "document")
#: The variables a :class:`PromptTemplate` must use.
REQUIRED_VARIABLES = ("instruction", "document")

Message = Mapping[str, str]
Prompt = Union[str, Sequence[Message], Any]  # Any: outlines.inputs.Chat


def trained_style(hf_model: Any) -> str:
    """The prompt style a model was trained on: ``cad_prompt_style`` of its config (the
    real-weight loader sets it from its adapter's record; ``save_pretrained`` keeps it),
    else ``"full"``. ``hf_model``: a transformers model, or its config (vLLM's ``hf_config``)."""
    return getattr(getattr(hf_model, "config", hf_model), "cad_prompt_style", "full")


def style_for(style: str | None, hf_model: Any, granularity: str) -> str:
    """``style``, or the model's own when ``None`` (:func:`trained_style`), checked.

    Raises
    ------
    PromptError
        For a style other than ``adapters.PROMPT_STYLES``, or ``compact`` with tokens.
    """
    style = trained_style(hf_model) if style is None else style
    try:
        check_style(style, granularity)
    except ValueError as err:
        raise PromptError(str(err)) from None
    return style


def update_prompt(update: str, instruction: str | None = None) -> str:
    """The instruction that applies the lazy edit snippet ``update``
    (:func:`~cad_outlines.language.snippets.update_instruction`, the layout the training
    mix uses too), checked at the door.

    Raises
    ------
    PromptError
        When ``update`` is not a ``str``, or holds no code besides marker lines.
    """
    if not isinstance(update, str):
        raise PromptError(f"the update snippet must be a str, got {type(update).__name__}")
    if instruction is not None and not isinstance(instruction, str):
        raise PromptError(f"the instruction must be a str or None, got {type(instruction).__name__}")
    try:
        return update_instruction(update, instruction)
    except ValueError as err:
        raise PromptError(str(err)) from None


def as_messages(prompt: Prompt) -> list[dict[str, str]]:
    """The conversation of ``prompt``: a list of ``{"role", "content"}`` dicts.

    Parameters
    ----------
    prompt
        An instruction (``str``), an ``outlines.inputs.Chat`` or a list of message dicts.

    Returns
    -------
    list[dict[str, str]]
        A copy; an instruction becomes one user message.

    Raises
    ------
    PromptError
        For an empty conversation, an unknown role, non-text content, a system message
        that is not first, or a conversation that does not end with a user message.
    """
    if isinstance(prompt, str):
        if not prompt.strip():
            raise PromptError("the instruction is empty: say what to change")
        return [{"role": "user", "content": prompt}]
    messages = getattr(prompt, "messages", prompt)  # outlines.inputs.Chat holds .messages
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise PromptError(f"a prompt is a str, an outlines.inputs.Chat or a list of message "
                          f"dicts; got {type(prompt).__name__}")
    if not messages:
        raise PromptError("the conversation is empty: it must end with the user's instruction")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message or "content" not in message:
            raise PromptError(f"message {i} must be a dict with 'role' and 'content', got {message!r:.80}")
        role, content = message["role"], message["content"]
        if role not in ("system", "user", "assistant"):
            raise PromptError(f"message {i} has role {role!r}; expected 'system', 'user' or 'assistant'")
        if role == "system" and i:
            raise PromptError(f"message {i} is a system message; only the first message may be one")
        if not isinstance(content, str):
            raise PromptError(f"message {i} ({role}) has {type(content).__name__} content; "
                              "only text is supported")
        out.append({"role": role, "content": content})
    if out[-1]["role"] == "user" and not out[-1]["content"].strip():
        raise PromptError("the instruction (the last user message) is empty: say what to change")
    if out[-1]["role"] != "user":
        article = "an" if out[-1]["role"] == "assistant" else "a"
        raise PromptError(f"the last message is {article} {out[-1]['role']} message; the conversation "
                          "must end with the user's instruction (the document is added to it)")
    return out


class PromptTemplate:
    """A user-supplied layout of the instruction message (see the module docstring).

    Parameters
    ----------
    source
        Jinja source, e.g. ``"{{ instruction }}\\n\\n{{ format }}\\n\\n{{ document }}"``.
        Trailing newlines are kept.

    Raises
    ------
    PromptError
        If the source does not parse, uses a variable other than
        :data:`TEMPLATE_VARIABLES`, or lacks one of :data:`REQUIRED_VARIABLES`.
    """

    _env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)

    def __init__(self, source: str):
        if not isinstance(source, str):
            raise PromptError(f"prompt_template must be a str (Jinja source), got {type(source).__name__}")
        try:
            ast = self._env.parse(source)
        except jinja2.TemplateSyntaxError as err:
            raise PromptError(f"prompt_template does not parse: {err.message} (line {err.lineno})") from None
        used = jinja2.meta.find_undeclared_variables(ast)
        unknown = sorted(used - set(TEMPLATE_VARIABLES))
        if unknown:
            raise PromptError(f"prompt_template uses unknown variable(s) {', '.join(unknown)}; "
                              f"the variables are {', '.join(TEMPLATE_VARIABLES)}")
        missing = [name for name in REQUIRED_VARIABLES if name not in used]
        if missing:
            raise PromptError(
                "prompt_template must contain " + " and ".join("{{ %s }}" % n for n in missing)
                + " (the generator supplies the document; the instruction is the user's request)")
        self.source = source
        self._template = self._env.from_string(source)

    def render(self, *, instruction: str, format: str, document: str) -> str:
        """The instruction message: the template filled in."""
        return self._template.render(instruction=instruction, format=format, document=document)

    def __repr__(self) -> str:
        return f"PromptTemplate({self.source!r})"
