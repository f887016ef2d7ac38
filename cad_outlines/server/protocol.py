"""OpenAI's chat-completions schema: requests checked at the door, responses and errors built.

Nothing here runs a model. :func:`parse_chat_request` turns a request body into a
:class:`ChatRequest` or raises :class:`APIError` naming the field (``param``) that is
wrong; the builders write the JSON objects the ``openai`` client parses. Which of the three
jobs a request is (an edit of a predicted file, an apply-form snippet, plain chat) is
decided here too, from the request alone (docs/serving.md, "The HTTP server").
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..errors import APIError  # noqa: F401  (re-exported: the server answers with it)

#: Fields the server reads; other fields of OpenAI's schema are refused when they ask for
#: something it does not do (:data:`_UNSUPPORTED`), and ignored otherwise (``user``, ``store``).
_UNSUPPORTED = ("tools", "tool_choice", "functions", "function_call", "response_format", "logit_bias",
                "audio", "modalities", "web_search_options")
#: Values of those fields that ask for what the server does anyway (clients send them by
#: default): accepted.
_NO_OPS: dict[str, tuple[Any, ...]] = {"response_format": ({"type": "text"},), "tool_choice": ("none",)}
#: OpenAI's ranges.
TEMPERATURE_MAX = 2.0
SEED_LIMIT = 2 ** 63
#: The most choices one request may ask for (``n``); each sampled choice is a decode.
N_MAX = 8
#: The most stop strings one request may give (OpenAI's limit).
STOP_MAX = 4
_APPLY_TAG = re.compile(r"<(instruction|code|update)>(.*?)</\1>", re.S)

Kind = Literal["edit", "chat"]


def bad(message: str, param: str | None = None, code: str | None = None) -> APIError:
    """A 400 naming the field that is wrong."""
    return APIError(400, message, param=param, code=code)


@dataclass
class ChatRequest:
    """One checked chat-completions request.

    ``kind`` is ``"edit"`` (``document`` is the file; ``prompt`` the conversation whose
    last user message is the instruction) or ``"chat"`` (``prompt`` is the conversation).
    ``max_tokens`` is ``None`` when the client gave none (the server's default applies).
    """

    model: str
    kind: Kind
    prompt: list[dict[str, str]]
    document: str | None = None
    form: str = "chat"  # "prediction", "apply" or "chat": where the document came from
    update: str | None = None  # the apply form's snippet (its literal merge drafts the program)
    max_tokens: int | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    stream: bool = False
    include_usage: bool = False
    n: int = 1
    stop: tuple[str, ...] = ()  # the answer's text ends before the first of these
    options: dict[str, Any] = field(default_factory=dict)

    def sampling(self) -> dict[str, Any]:
        """The per-call options of the decode (``CaDGenerator``'s names)."""
        return {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed}

    def choices(self) -> list["ChatRequest"]:
        """One request per decode the ``n`` choices need: choice ``i`` samples with seed
        ``seed + i``; greedy (temperature 0) gives every choice the same answer, decoded once."""
        if self.temperature == 0:
            return [self]
        return [replace(self, seed=(self.seed + i) % SEED_LIMIT) for i in range(self.n)]


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def load_json(body: bytes) -> dict[str, Any]:
    """The request body as a JSON object (strict: no NaN/Infinity, UTF-8)."""
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as err:
        raise bad(f"the request body is not UTF-8 (byte {err.start})") from None
    except (ValueError, RecursionError) as err:
        raise bad(f"the request body is not valid JSON: {str(err)[:200]}") from None
    if not isinstance(data, dict):
        raise bad(f"the request body must be a JSON object, got {type(data).__name__}")
    return data


def _number(data: dict[str, Any], name: str, default: float, low: float, high: float,
            low_open: bool = False) -> float:
    value = data.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad(f"{name} must be a number, got {json.dumps(value)[:60]}", name)
    if value > high or value < low or (low_open and value == low):
        bracket = "(" if low_open else "["
        raise bad(f"{name} must be in {bracket}{low:g}, {high:g}], got {value}", name)
    return float(value)


def _integer(data: dict[str, Any], name: str, low: int, high: int) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"{name} must be an integer, got {json.dumps(value)[:60]}", name)
    if not low <= value <= high:
        raise bad(f"{name} must be an integer in [{low}, {high}], got {value}", name)
    return value


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for k, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise bad(f"{where}.content[{k}] is a {kind!s:.40} part; only text parts are supported",
                          f"{where}.content")
            parts.append(part["text"])
        return "".join(parts)
    raise bad(f"{where}.content must be a string or a list of text parts, got "
              f"{type(content).__name__}", f"{where}.content")


def _messages(data: dict[str, Any]) -> list[dict[str, str]]:
    messages = data.get("messages")
    if not isinstance(messages, list):
        raise bad("messages must be a list of messages", "messages")
    if not messages:
        raise bad("messages is empty: send at least one user message", "messages")
    out = []
    for k, message in enumerate(messages):
        where = f"messages[{k}]"
        if not isinstance(message, dict):
            raise bad(f"{where} must be an object with role and content", where)
        role = message.get("role")
        role = "system" if role == "developer" else role  # OpenAI's newer name for it
        if role not in ("system", "user", "assistant"):
            raise bad(f"{where}.role must be system, developer, user or assistant, got "
                      f"{json.dumps(role)[:40]}", f"{where}.role")
        if role == "system" and k:
            raise bad(f"{where} is a system message; only the first message may be one", f"{where}.role")
        out.append({"role": role, "content": _text(message.get("content"), where)})
    if out[-1]["role"] != "user":
        raise bad(f"the last message is a{'n' if out[-1]['role'] == 'assistant' else ''} {out[-1]['role']} "
                  "message; the conversation must end with a user message", "messages")
    return out


def _prediction(data: dict[str, Any]) -> str | None:
    prediction = data.get("prediction")
    if prediction is None:
        return None
    if not isinstance(prediction, dict) or prediction.get("type") != "content":
        raise bad('prediction must be {"type": "content", "content": ...}', "prediction")
    return _text(prediction.get("content"), "prediction")


def apply_form(text: str) -> dict[str, str] | None:
    """The ``<instruction>``/``<code>``/``<update>`` parts of an apply-model message, or
    ``None`` when it has no ``<update>`` (then it is an ordinary message). Contents are
    taken exactly as they stand between the tags."""
    parts: dict[str, str] = {}
    for match in _APPLY_TAG.finditer(text):
        parts.setdefault(match.group(1), match.group(2))
    return parts if "update" in parts else None


def _stop(data: dict[str, Any]) -> tuple[str, ...]:
    value = data.get("stop")
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops) or len(stops) > STOP_MAX:
        raise bad(f"stop must be a non-empty string or a list of at most {STOP_MAX} of them, got "
                  f"{json.dumps(value)[:60]}", "stop")
    return tuple(dict.fromkeys(stops))


class StopText:
    """An answer's text cut before the first stop string, released as it grows.

    :meth:`release` takes the whole text so far and returns what may be sent now: never a
    stop string, nor a tail that could still become one (it waits for the next text).
    With no stop strings everything is released at once.
    """

    def __init__(self, stops: tuple[str, ...] = ()):
        self.stops, self.sent, self.hit = stops, 0, False

    def cut(self, text: str) -> str:
        """``text`` up to the stop string a decoder meets first, the one that ends first
        (all of it when none occurs)."""
        found = [(i + len(s), i) for s, i in ((s, text.find(s)) for s in self.stops) if i >= 0]
        if found:
            self.hit = True
            return text[:min(found)[1]]
        return text

    def end(self, text: str, finish: str) -> tuple[str, str]:
        """The answer's text cut (:meth:`cut`) and its finish reason: ``"stop"`` where a
        stop string ended it, else ``finish``."""
        text = self.cut(text)
        return text, "stop" if self.hit else finish

    def release(self, text: str, final: bool = False) -> str:
        """The part of ``text`` not released before that may go out now (``final``: the
        text is complete, nothing is held back)."""
        safe = self.cut(text)  # once a stop string is in, this prefix no longer grows
        if not self.hit and not final:
            held = max((k for s in self.stops for k in range(1, len(s)) if safe.endswith(s[:k])), default=0)
            safe = safe[:len(safe) - held]
        piece, self.sent = safe[self.sent:], max(self.sent, len(safe))
        return piece


def parse_chat_request(data: dict[str, Any]) -> ChatRequest:
    """Check a chat-completions body and decide its job (see the module docstring).

    Raises
    ------
    APIError
        400 naming the first field that is wrong.
    """
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model must be a non-empty string (GET /v1/models lists it)", "model")
    for name in _UNSUPPORTED:
        if data.get(name) not in (None, [], {}, *_NO_OPS.get(name, ())):
            raise bad(f"{name} is not supported by this server", name)
    if data.get("logprobs") not in (None, False):
        raise bad("logprobs are not supported by this server", "logprobs")
    for name in ("frequency_penalty", "presence_penalty"):
        if _number(data, name, 0.0, -2.0, 2.0) != 0.0:
            raise bad(f"{name} is not supported (only 0)", name)
    stream = data.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad(f"stream must be a boolean, got {json.dumps(stream)[:40]}", "stream")
    stream_options = data.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise bad("stream_options must be an object", "stream_options")
    messages = _messages(data)
    limits = [name for name in ("max_tokens", "max_completion_tokens") if data.get(name) is not None]
    if len(limits) == 2 and data["max_tokens"] != data["max_completion_tokens"]:
        raise bad("give max_tokens or max_completion_tokens, not two different values", "max_tokens")
    max_tokens = _integer(data, limits[0], 1, 2 ** 31) if limits else None
    request = ChatRequest(
        model=model, kind="chat", prompt=messages, max_tokens=max_tokens,
        temperature=_number(data, "temperature", 0.0, 0.0, TEMPERATURE_MAX),
        top_p=_number(data, "top_p", 1.0, 0.0, 1.0, low_open=True),
        seed=_integer(data, "seed", 0, SEED_LIMIT - 1) or 0,
        stream=stream, include_usage=bool(stream_options.get("include_usage")),
        n=_integer(data, "n", 1, N_MAX) or 1, stop=_stop(data))
    document = _prediction(data)
    parts = apply_form(messages[-1]["content"])
    if parts is not None:
        from ..decoding.prompts import PromptError, update_prompt

        if "code" in parts and document is not None:
            raise bad("the file is given twice: as prediction and as <code> in the last message; "
                      "give one", "prediction")
        if "code" not in parts and document is None:
            raise bad("the last message has <update> but no <code>, and there is no prediction: "
                      "send the file in <code>...</code> or as prediction", "messages")
        try:
            instruction = update_prompt(parts["update"], parts.get("instruction"))
        except PromptError as err:
            raise bad(f"the last message's <update>: {err}", "messages") from None
        request.kind, request.form, request.update = "edit", "apply", parts["update"]
        request.document = parts.get("code", document)
        request.prompt = [*messages[:-1], {"role": "user", "content": instruction}]
    elif document is not None:
        if not messages[-1]["content"].strip():
            raise bad("the last user message is empty: with prediction it is the instruction", "messages")
        request.kind, request.form, request.document = "edit", "prediction", document
    return request


def new_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def completion(request_id: str, model: str, answers: list[tuple[str, str, dict[str, Any] | None]],
               usage: dict[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` object; ``answers`` holds each choice's ``(content,
    finish_reason, cad)`` (``cad``: the edit's program and counts, or none). The first
    choice's ``cad`` is also the body's; with several choices each carries its own."""
    choices = []
    for index, (content, finish_reason, cad) in enumerate(answers):
        choice = {"index": index, "message": {"role": "assistant", "content": content},
                  "finish_reason": finish_reason, "logprobs": None}
        if cad is not None and len(answers) > 1:
            choice["cad"] = cad
        choices.append(choice)
    body = {"id": request_id, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": usage}
    if answers[0][2] is not None:
        body["cad"] = answers[0][2]
    return body


def chunk(request_id: str, model: str, delta: dict[str, Any], finish_reason: str | None = None,
          index: int = 0, **extra: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk`` object with one choice (number ``index``)."""
    return {"id": request_id, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": [{"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            **extra}


def usage(prompt_tokens: int, completion_tokens: int, accepted: int | None = None,
          rejected: int | None = None) -> dict[str, Any]:
    """OpenAI's usage object; the prediction counts only for an edit."""
    body: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens}
    if accepted is not None:
        body["completion_tokens_details"] = {"accepted_prediction_tokens": accepted,
                                             "rejected_prediction_tokens": rejected or 0}
    return body


def total_usage(usages: list[dict[str, Any]]) -> dict[str, Any]:
    """The usage of several choices of one prompt: the prompt once, the completions summed."""
    body = dict(usages[0])
    if len(usages) == 1:
        return body
    body["completion_tokens"] = sum(u["completion_tokens"] for u in usages)
    body["total_tokens"] = body["prompt_tokens"] + body["completion_tokens"]
    if "completion_tokens_details" in body:
        body["completion_tokens_details"] = {
            name: sum(u["completion_tokens_details"][name] for u in usages)
            for name in body["completion_tokens_details"]}
    return body


def sse(data: dict[str, Any] | str) -> bytes:
    """One server-sent event: ``data: <json>`` and a blank line."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n".encode("utf-8")
