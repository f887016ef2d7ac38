"""``cad-outlines serve`` driven by real clients: the ``openai`` package and ``httpx``.

Each server is a subprocess on a free loopback port (``--port 0``; the port is read from
its first line). The tiny random-weight preset cannot choose an edit, so its edits stop at
``max_tokens`` (finish_reason ``length``): the tests compare them with the same decode in
process, token for token. The real fine-tuned model (``smollm2-135m``) finishes its edits:
there the answer must equal ``generate.edit`` with the same options and seed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import cad_outlines.generate  # noqa: E402
from cad_outlines.decoding.generator import CaDGenerator, IncompleteProgramError  # noqa: E402
from cad_outlines.decoding.prompts import update_prompt  # noqa: E402
from cad_outlines.language.program import repeated_lines, scan_ops  # noqa: E402

from testdata import ROOT  # noqa: E402

KEY = "test-key-1234"
DOC = "def mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef total(xs):\n    return sum(xs)\n"
UPDATE = "def mean(xs):\n    if not xs:\n        raise ValueError('empty')\n# ... existing code ...\n"


class Server:
    """A ``cad-outlines serve`` subprocess; ``url`` ends in ``/v1``."""

    def __init__(self, tmp: Path, *args: str):
        self.log = tmp / f"server-{os.getpid()}-{time.monotonic_ns()}.log"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen([sys.executable, "-m", "cad_outlines", "serve", "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=open(self.log, "w"), text=True,
                                     cwd=ROOT, env=env)
        line = self._first_line(timeout=180)
        assert line.startswith("serving "), (line, self.log.read_text())
        self.url = line.split(" at ", 1)[1].strip()
        self.base = self.url[:-len("/v1")]
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)

    def _first_line(self, timeout: float) -> str:
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        return got[0] if got else f"(no line within {timeout} s; exit {self.proc.poll()})"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def health(self) -> dict:
        return httpx.get(f"{self.base}/health", timeout=10).json()


def client(server: Server, key: str | None = KEY, **kw) -> "openai.OpenAI":
    return openai.OpenAI(base_url=server.url, api_key=key or "none", max_retries=0, timeout=120, **kw)


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("serve"), "--preset", "tiny-qwen", "--api-key", KEY,
                    "--max-queue", "20", "--max-tokens", "64")
    yield server
    assert server.stop() == 0, server.log.read_text()[-2000:]


def in_process(model, document, prompt, **options) -> tuple[str, str]:
    """The content and finish_reason the server should answer for this edit."""
    chunks: list[str] = []
    try:
        for piece in CaDGenerator(model, document).stream(prompt, **options):
            chunks.append(piece)
    except IncompleteProgramError:
        return "".join(chunks), "length"
    return "".join(chunks), "stop"


def edit_request(server, document=DOC, instruction="make mean() safe", **kw):
    return client(server).chat.completions.create(
        model="tiny-qwen", messages=[{"role": "user", "content": instruction}],
        prediction={"type": "content", "content": document}, **kw)


# --- the openai client ------------------------------------------------------------------------


def test_models_and_health(tiny_server):
    assert [m.id for m in client(tiny_server).models.list().data] == ["tiny-qwen"]
    assert client(tiny_server).models.retrieve("tiny-qwen").id == "tiny-qwen"
    assert tiny_server.health()["status"] == "ok"


@pytest.mark.parametrize("options", [{}, {"temperature": 0.8, "top_p": 0.9, "seed": 7}])
def test_predicted_output_edit_equals_the_in_process_decode(tiny_server, tiny_model, options):
    # fields a client sends by default that ask for nothing else are accepted
    defaults = {"response_format": {"type": "text"}, "tool_choice": "none", "logprobs": False, "user": "u"}
    reply = edit_request(tiny_server, max_tokens=24, **options, **defaults)
    expected, finish = in_process(tiny_model("tiny-qwen"), DOC, "make mean() safe", max_new_tokens=24,
                                  **options)
    choice = reply.choices[0]
    assert (choice.message.content, choice.finish_reason) == (expected, finish)
    cad = reply.model_extra["cad"]
    assert cad["form"] == "prediction" and cad["program"].startswith("<program>")
    assert cad["stats"]["prompt_tokens"] == reply.usage.prompt_tokens
    ops, _ = scan_ops(cad["program"])  # the complete ops, also of an unfinished program
    assert cad["repeated_lines"] == repeated_lines(ops)
    details = reply.usage.completion_tokens_details
    assert details.accepted_prediction_tokens == cad["stats"]["copied_tokens"]
    assert details.rejected_prediction_tokens >= 0 and reply.usage.completion_tokens >= 0


def test_streaming_iterates_to_the_same_text(tiny_server):
    whole = edit_request(tiny_server, max_tokens=24).choices[0].message.content
    chunks = list(edit_request(tiny_server, max_tokens=24, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole and len(chunks) > 3
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == ["length"] and "cad" in finals[0].model_extra
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0


def test_n_sampled_choices_are_the_decodes_with_seeds_seed_and_up(tiny_server, tiny_model):
    options = {"temperature": 0.9, "seed": 11}
    reply = edit_request(tiny_server, max_tokens=16, n=3, **options)
    assert [c.index for c in reply.choices] == [0, 1, 2]
    model = tiny_model("tiny-qwen")
    for k, choice in enumerate(reply.choices):
        expected = in_process(model, DOC, "make mean() safe", max_new_tokens=16, temperature=0.9, seed=11 + k)
        assert (choice.message.content, choice.finish_reason) == expected
        assert choice.model_extra["cad"]["program"].startswith("<program>")
    assert reply.model_extra["cad"] == reply.choices[0].model_extra["cad"]
    assert len({c.message.content for c in reply.choices}) > 1  # three seeds, not one answer thrice
    one = [edit_request(tiny_server, max_tokens=16, temperature=0.9, seed=11 + k).usage for k in range(3)]
    assert reply.usage.prompt_tokens == one[0].prompt_tokens
    assert reply.usage.completion_tokens == sum(u.completion_tokens for u in one)
    assert reply.usage.completion_tokens_details.accepted_prediction_tokens == sum(
        u.completion_tokens_details.accepted_prediction_tokens for u in one)


def test_n_greedy_choices_are_one_answer_and_stream_by_index(tiny_server):
    whole = edit_request(tiny_server, max_tokens=16)
    reply = edit_request(tiny_server, max_tokens=16, n=2)
    assert [c.message.content for c in reply.choices] == [whole.choices[0].message.content] * 2
    assert reply.usage.completion_tokens == 2 * whole.usage.completion_tokens
    sampled = edit_request(tiny_server, max_tokens=16, n=2, temperature=0.9, seed=3)
    for ask, answer in (({}, reply), ({"temperature": 0.9, "seed": 3}, sampled)):
        chunks = list(edit_request(tiny_server, max_tokens=16, n=2, stream=True,
                                   stream_options={"include_usage": True}, **ask))
        texts, finals = ["", ""], [None, None]
        for c in chunks:
            for choice in c.choices:
                texts[choice.index] += choice.delta.content or ""
                finals[choice.index] = choice.finish_reason or finals[choice.index]
        assert texts == [c.message.content for c in answer.choices]
        assert finals == [c.finish_reason for c in answer.choices]
        assert chunks[-1].usage.completion_tokens == answer.usage.completion_tokens


def test_n_chat_choices(tiny_server):
    ask = dict(model="tiny-qwen", messages=[{"role": "user", "content": "Say hi"}], max_tokens=8)
    reply = client(tiny_server).chat.completions.create(n=2, temperature=1.0, seed=4, **ask)
    one = client(tiny_server).chat.completions.create(temperature=1.0, seed=5, **ask)
    assert reply.choices[1].message.content == one.choices[0].message.content
    assert "cad" not in (reply.model_extra or {}) and "cad" not in (reply.choices[0].model_extra or {})


def test_apply_form_message_is_an_edit(tiny_server, tiny_model):
    message = f"<instruction>guard it</instruction>\n<code>{DOC}</code>\n<update>{UPDATE}</update>"
    reply = client(tiny_server).chat.completions.create(
        model="tiny-qwen", messages=[{"role": "user", "content": message}], max_tokens=20)
    expected = in_process(tiny_model("tiny-qwen"), DOC, update_prompt(UPDATE, "guard it"), max_new_tokens=20)
    assert (reply.choices[0].message.content, reply.choices[0].finish_reason) == expected
    assert reply.model_extra["cad"]["form"] == "apply" and reply.model_extra["cad"]["merged"] is True


def test_apply_form_says_when_the_snippet_has_no_merge(tiny_server):
    """A snippet whose new lines have nothing of the file beside them cannot be merged:
    the model applies it alone, and ``cad.merged`` says so (``edit --update`` warns)."""
    unplaced = "# ... existing code ...\n    if not xs:\n        raise ValueError('empty')\n# ... existing code ...\n"
    for update, merged in ((unplaced, False), (UPDATE, True)):
        reply = client(tiny_server).chat.completions.create(
            model="tiny-qwen", messages=[{"role": "user", "content": f"<code>{DOC}</code><update>{update}</update>"}],
            max_tokens=8)
        assert reply.model_extra["cad"]["merged"] is merged
    reply = client(tiny_server).chat.completions.create(
        model="tiny-qwen", messages=[{"role": "user", "content": "guard it"}],
        prediction={"type": "content", "content": DOC}, max_tokens=8)
    assert "merged" not in reply.model_extra["cad"]  # a prediction is the client's own, not a merge


def test_a_server_that_follows_the_merge_answers_it(tmp_path):
    """serve --follow-prediction: an apply-form snippet's merge is a prior; at a floor no
    allowed token falls under, even random weights answer the merge."""
    from cad_outlines.language import snippets

    server = Server(tmp_path, "--preset", "tiny-qwen", "--max-tokens", "200", "--follow-prediction", "1e-12")
    try:
        message = f"<code>{DOC}</code>\n<update>{UPDATE}</update>"
        reply = client(server, key=None).chat.completions.create(
            model="tiny-qwen", messages=[{"role": "user", "content": message}])
        assert reply.choices[0].message.content == snippets.merge(DOC, UPDATE) != DOC
        assert reply.choices[0].finish_reason == "stop"
    finally:
        assert server.stop() == 0, server.log.read_text()[-2000:]


def test_plain_chat_is_deterministic_and_streams(tiny_server):
    ask = dict(model="tiny-qwen", messages=[{"role": "system", "content": "Be brief."},
                                            {"role": "user", "content": "Say hi"}],
               max_completion_tokens=12, temperature=0.9, seed=5)
    first = client(tiny_server).chat.completions.create(**ask)
    again = client(tiny_server).chat.completions.create(**ask)
    assert first.choices[0].message.content == again.choices[0].message.content
    assert first.choices[0].finish_reason in ("stop", "length") and "cad" not in (first.model_extra or {})
    assert first.usage.prompt_tokens > 0 and 0 < first.usage.completion_tokens <= 12
    streamed = "".join(c.choices[0].delta.content or "" for c in
                       client(tiny_server).chat.completions.create(stream=True, **ask) if c.choices)
    assert streamed == first.choices[0].message.content


def _stop_in(text: str) -> str:
    """Two characters of ``text`` first met as late as possible in it (the answer's start
    when every pair occurs there)."""
    assert len(text) >= 2, text
    return max(((k, text[k:k + 2]) for k in range(len(text) - 1) if text.find(text[k:k + 2]) == k))[1]


@pytest.mark.parametrize("kind", ["edit", "chat"])
def test_a_stop_string_ends_the_answer_before_it_streamed_or_not(tiny_server, kind):
    """``stop``: the content is the answer without it up to the stop string, the finish
    reason ``stop``, and the stream joins to the same text; an edit's program is whole."""
    from cad_outlines.server.protocol import StopText

    if kind == "edit":
        def ask(**kw):
            return edit_request(tiny_server, max_tokens=24, **kw)
    else:
        def ask(**kw):
            return client(tiny_server).chat.completions.create(
                model="tiny-qwen", messages=[{"role": "user", "content": "Say hi"}], max_tokens=16,
                temperature=1.0, seed=2, **kw)
    whole = ask().choices[0].message.content
    stop = _stop_in(whole)
    reply = ask(stop=[stop, "\x00never"])
    expected = StopText((stop,)).cut(whole)
    assert whole.startswith(expected) and len(expected) < len(whole)
    assert (reply.choices[0].message.content, reply.choices[0].finish_reason) == (expected, "stop")
    chunks = list(ask(stop=stop, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == expected
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    if kind == "edit":
        assert reply.model_extra["cad"]["program"] == ask().model_extra["cad"]["program"]


def test_the_clients_error_classes(tiny_server):
    with pytest.raises(openai.AuthenticationError):
        client(tiny_server, key="wrong").models.list()
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client(tiny_server).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="messages is empty"):
        client(tiny_server).chat.completions.create(model="tiny-qwen", messages=[])
    with pytest.raises(openai.BadRequestError) as info:
        client(tiny_server).chat.completions.create(model="tiny-qwen", temperature=3,
                                                    messages=[{"role": "user", "content": "x"}])
    assert info.value.body["param"] == "temperature"


# --- malformed requests over httpx -------------------------------------------------------------

USER = [{"role": "user", "content": "fix"}]
BASE = {"model": "tiny-qwen", "messages": USER}
CASES = [
    # (name, method, path, body (bytes, or a dict sent as JSON), status, param)
    ("bad json", "POST", "/v1/chat/completions", b"{bad", 400, None),
    ("not an object", "POST", "/v1/chat/completions", b"[1, 2]", 400, None),
    ("not utf-8", "POST", "/v1/chat/completions", b'{"model": "\xff"}', 400, None),
    ("NaN literal", "POST", "/v1/chat/completions", b'{"model": "tiny-qwen", "temperature": NaN}', 400, None),
    ("deep nesting", "POST", "/v1/chat/completions", b"[" * 100000 + b"]" * 100000, 400, None),
    ("no model", "POST", "/v1/chat/completions", {"messages": USER}, 400, "model"),
    ("messages not a list", "POST", "/v1/chat/completions", {**BASE, "messages": "hi"}, 400, "messages"),
    ("empty messages", "POST", "/v1/chat/completions", {**BASE, "messages": []}, 400, "messages"),
    ("message not an object", "POST", "/v1/chat/completions", {**BASE, "messages": [3]}, 400, "messages[0]"),
    ("bad role", "POST", "/v1/chat/completions", {**BASE, "messages": [{"role": "tool", "content": "x"}]},
     400, "messages[0].role"),
    ("image part", "POST", "/v1/chat/completions",
     {**BASE, "messages": [{"role": "user", "content": [
         {"type": "text", "text": "what is this"},
         {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]},
     400, "messages[0].content"),
    ("content a number", "POST", "/v1/chat/completions", {**BASE, "messages": [{"role": "user", "content": 5}]},
     400, "messages[0].content"),
    ("ends with assistant", "POST", "/v1/chat/completions",
     {**BASE, "messages": [*USER, {"role": "assistant", "content": "ok"}]}, 400, "messages"),
    ("late system", "POST", "/v1/chat/completions",
     {**BASE, "messages": [*USER, {"role": "system", "content": "x"}, *USER]}, 400, "messages[1].role"),
    ("temperature a string", "POST", "/v1/chat/completions", {**BASE, "temperature": "hot"}, 400, "temperature"),
    ("temperature huge", "POST", "/v1/chat/completions", {**BASE, "temperature": 1e308}, 400, "temperature"),
    ("top_p zero", "POST", "/v1/chat/completions", {**BASE, "top_p": 0}, 400, "top_p"),
    ("max_tokens huge", "POST", "/v1/chat/completions", {**BASE, "max_tokens": 10 ** 30}, 400, "max_tokens"),
    ("max_tokens past context", "POST", "/v1/chat/completions", {**BASE, "max_tokens": 2 ** 31}, 400,
     "max_tokens"),
    ("max_tokens zero", "POST", "/v1/chat/completions", {**BASE, "max_tokens": 0}, 400, "max_tokens"),
    ("max_tokens float", "POST", "/v1/chat/completions", {**BASE, "max_completion_tokens": 1.5}, 400,
     "max_completion_tokens"),
    ("max_tokens bool", "POST", "/v1/chat/completions", {**BASE, "max_tokens": True}, 400, "max_tokens"),
    ("seed negative", "POST", "/v1/chat/completions", {**BASE, "seed": -1}, 400, "seed"),
    ("seed huge", "POST", "/v1/chat/completions", {**BASE, "seed": 2 ** 64}, 400, "seed"),
    ("stream a string", "POST", "/v1/chat/completions", {**BASE, "stream": "yes"}, 400, "stream"),
    ("n zero", "POST", "/v1/chat/completions", {**BASE, "n": 0}, 400, "n"),
    ("n past the most", "POST", "/v1/chat/completions", {**BASE, "n": 9}, 400, "n"),
    ("n a string", "POST", "/v1/chat/completions", {**BASE, "n": "2"}, 400, "n"),
    ("tools", "POST", "/v1/chat/completions", {**BASE, "tools": [{"type": "function"}]}, 400, "tools"),
    ("tool_choice required", "POST", "/v1/chat/completions", {**BASE, "tool_choice": "required"}, 400,
     "tool_choice"),
    ("response_format json", "POST", "/v1/chat/completions", {**BASE, "response_format": {"type": "json_object"}},
     400, "response_format"),
    ("logprobs", "POST", "/v1/chat/completions", {**BASE, "logprobs": True}, 400, "logprobs"),
    ("stop a number", "POST", "/v1/chat/completions", {**BASE, "stop": 5}, 400, "stop"),
    ("stop empty", "POST", "/v1/chat/completions", {**BASE, "stop": [""]}, 400, "stop"),
    ("stop five", "POST", "/v1/chat/completions", {**BASE, "stop": list("abcde")}, 400, "stop"),
    ("prediction a string", "POST", "/v1/chat/completions", {**BASE, "prediction": "x"}, 400, "prediction"),
    ("prediction content a number", "POST", "/v1/chat/completions",
     {**BASE, "prediction": {"type": "content", "content": 5}}, 400, "prediction.content"),
    ("prediction with an empty instruction", "POST", "/v1/chat/completions",
     {**BASE, "messages": [{"role": "user", "content": " "}], "prediction": {"type": "content", "content": "a\n"}},
     400, "messages"),
    ("update without code", "POST", "/v1/chat/completions",
     {**BASE, "messages": [{"role": "user", "content": "<update>x = 1</update>"}]}, 400, "messages"),
    ("empty update", "POST", "/v1/chat/completions",
     {**BASE, "messages": [{"role": "user", "content": "<code>a\n</code><update># ... existing code ...</update>"}]},
     400, "messages"),
    ("code and prediction", "POST", "/v1/chat/completions",
     {**BASE, "messages": [{"role": "user", "content": "<code>a\n</code><update>b\n</update>"}],
      "prediction": {"type": "content", "content": "a\n"}}, 400, "prediction"),
    ("unknown model", "POST", "/v1/chat/completions", {**BASE, "model": "nope"}, 404, "model"),
    ("unknown model card", "GET", "/v1/models/nope", None, 404, "model"),
    ("unknown route", "GET", "/v1/completions", None, 404, None),
    ("unknown route post", "POST", "/v2/whatever", {}, 404, None),
    ("wrong method", "GET", "/v1/chat/completions", None, 405, None),
    ("document past the context", "POST", "/v1/chat/completions",
     {**BASE, "prediction": {"type": "content", "content": "x = 1\n" * 20000}}, 413, "messages"),
    ("document whose copy does not fit beside the prompt", "POST", "/v1/chat/completions",
     {**BASE, "prediction": {"type": "content", "content": "x = 1\n" * 2500}}, 413, "messages"),
]


@pytest.mark.parametrize("name, method, path, body, status, param", CASES, ids=[c[0] for c in CASES])
def test_malformed_requests_get_an_error_object_and_the_server_lives(tiny_server, name, method, path, body,
                                                                      status, param):
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    content = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    reply = httpx.request(method, f"{tiny_server.base}{path}", content=content, headers=headers, timeout=120)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert error["param"] == param, error
    assert tiny_server.health()["status"] == "ok"


@pytest.mark.parametrize("header", [None, "Bearer wrong", "Basic " + KEY, f"Bearer {KEY}x", "Bearer"])
def test_the_api_key_is_enforced(tiny_server, header):
    headers = {"Authorization": header} if header else {}
    reply = httpx.post(f"{tiny_server.base}/v1/chat/completions", json=BASE, headers=headers, timeout=30)
    assert reply.status_code == 401 and reply.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(f"{tiny_server.base}/v1/models", headers=headers, timeout=30).status_code == 401
    assert httpx.get(f"{tiny_server.base}/health", timeout=30).status_code == 200  # health needs no key


# --- concurrency, cancellation, shutdown ---------------------------------------------------------


def test_sixteen_concurrent_clients_get_the_serial_answers(tiny_server):
    jobs = [(f"line {k} = {k}\n" * (1 + k % 3) + DOC, f"change line {k}", {"seed": k, "temperature": 0.5 * (k % 2)})
            for k in range(16)]

    def ask(job):
        document, instruction, options = job
        reply = edit_request(tiny_server, document, instruction, max_tokens=12, **options)
        return reply.choices[0].message.content, reply.choices[0].finish_reason, reply.model_extra["cad"]["program"]

    serial = [ask(job) for job in jobs]
    with ThreadPoolExecutor(16) as pool:
        concurrent = list(pool.map(ask, jobs))
    assert concurrent == serial
    assert tiny_server.health()["pending"] == 0


def _wait_idle(server: Server, seconds: float) -> float:
    start = time.monotonic()
    while server.health()["pending"]:
        assert time.monotonic() - start < seconds, "the decode did not stop"
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.mark.parametrize("choices", [{}, {"n": 3, "temperature": 1.0}])
def test_a_client_that_leaves_stops_its_decode(tiny_server, choices):
    long_chat = {**BASE, "messages": [{"role": "user", "content": "write a long story"}], "max_tokens": 20000,
                 **choices}  # with n sampled choices, the ones still queued never start
    headers = {"Authorization": f"Bearer {KEY}"}
    with pytest.raises(httpx.ReadTimeout):  # a non-streaming request given up by its client
        httpx.post(f"{tiny_server.base}/v1/chat/completions", json=long_chat, headers=headers, timeout=1.0)
    _wait_idle(tiny_server, 5)
    with httpx.stream("POST", f"{tiny_server.base}/v1/chat/completions", json={**long_chat, "stream": True},
                      headers=headers, timeout=30) as reply:
        assert next(reply.iter_lines()).startswith("data: ")  # streaming has begun; now leave
    _wait_idle(tiny_server, 5)
    assert " 499 " in tiny_server.log.read_text()  # the access log says the client left


def test_one_log_line_per_request(tiny_server):
    httpx.get(f"{tiny_server.base}/v1/models/tiny-qwen", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    lines = [line for line in tiny_server.log.read_text().splitlines() if line.startswith("GET /v1/models/tiny-qwen ")]
    assert lines and lines[-1].split()[2] == "200" and lines[-1].endswith(" ms")


def test_a_full_queue_answers_429_and_sigterm_finishes_in_flight_work(tmp_path, tiny_model):
    server = Server(tmp_path, "--preset", "tiny-qwen", "--max-queue", "0")
    try:
        ask = dict(model="tiny-qwen", messages=[{"role": "user", "content": "go on"}], max_tokens=1500)
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(lambda: client(server, key=None).chat.completions.create(**ask))
            deadline = time.monotonic() + 30
            while server.health()["pending"] == 0:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            with pytest.raises(openai.RateLimitError, match="busy"):
                client(server, key=None).chat.completions.create(**ask)
            server.proc.send_signal(signal.SIGTERM)  # while the first request runs
            reply = running.result(timeout=120)
        assert reply.choices[0].finish_reason in ("stop", "length") and reply.usage.completion_tokens > 0
        assert server.proc.wait(timeout=60) == 0
    finally:
        server.stop()


def test_choices_that_do_not_all_fit_the_queue_get_429_and_none_runs(tmp_path):
    server = Server(tmp_path, "--preset", "tiny-qwen", "--max-queue", "1")
    try:  # two sampled choices fit (one running, one waiting); three do not
        ask = dict(model="tiny-qwen", messages=[{"role": "user", "content": "go on"}], max_tokens=4,
                   temperature=1.0, n=3)
        with pytest.raises(openai.RateLimitError, match="busy"):
            client(server, key=None).chat.completions.create(**ask)
        assert server.health()["pending"] == 0
        assert len(client(server, key=None).chat.completions.create(**{**ask, "n": 2}).choices) == 2
    finally:
        assert server.stop() == 0, server.log.read_text()[-2000:]


def test_serve_refuses_bad_arguments(capsys):
    from cad_outlines.cli import main

    assert main(["serve", "--preset", "tiny-qwen", "--engine", "vllm"]) == 2
    assert "--engine vllm" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--preset", "tiny-qwen", "--port", "70000"])
    assert main(["serve", "--preset", "tiny-qwen", "--api-key", " "]) == 2


# --- the real model: complete edits equal the Python API's ----------------------------------------


@pytest.fixture(scope="module")
def real_server(tmp_path_factory, real_model):
    real_model("smollm2-135m")  # skips (or fails under CAD_OUTLINES_REQUIRE_REAL=1) without the weights
    server = Server(tmp_path_factory.mktemp("serve-real"), "--preset", "smollm2-135m")
    yield server
    assert server.stop() == 0, server.log.read_text()[-2000:]


REAL_EDIT = ("import json\n\n\ndef load(path):\n    with open(path) as fh:\n        return json.load(fh)\n",
             "Replace line 6 with this line:\n        return json.loads(fh.read())")


@pytest.mark.parametrize("options", [{}, {"temperature": 0.7, "seed": 3}])
def test_real_model_edit_equals_generate_edit(real_server, real_model, options):
    document, instruction = REAL_EDIT
    expected = cad_outlines.generate.edit(real_model("smollm2-135m"), document, instruction, max_new_tokens=256,
                                          **options)
    reply = openai.OpenAI(base_url=real_server.url, api_key="none", max_retries=0, timeout=300).chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": instruction}],
        prediction={"type": "content", "content": document}, max_tokens=256, **options)
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content == expected
    assert reply.usage.completion_tokens_details.accepted_prediction_tokens > 0
    stream = openai.OpenAI(base_url=real_server.url, api_key="none", max_retries=0).chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": instruction}], stream=True,
        prediction={"type": "content", "content": document}, max_tokens=256, **options)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == expected


def test_real_model_sampled_choices_are_complete_edits_with_seeds_seed_and_up(real_server, real_model):
    document, instruction = REAL_EDIT
    reply = openai.OpenAI(base_url=real_server.url, api_key="none", max_retries=0, timeout=300).chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": instruction}], n=2, temperature=0.7, seed=3,
        prediction={"type": "content", "content": document}, max_tokens=256)
    for k, choice in enumerate(reply.choices):
        expected = cad_outlines.generate.edit(real_model("smollm2-135m"), document, instruction,
                                              max_new_tokens=256, temperature=0.7, seed=3 + k)
        assert (choice.index, choice.finish_reason, choice.message.content) == (k, "stop", expected)


def test_real_model_edit_of_a_crlf_file_comes_back_crlf(real_server, real_model):
    document, instruction = REAL_EDIT[0].replace("\n", "\r\n"), REAL_EDIT[1]
    expected = cad_outlines.generate.edit(real_model("smollm2-135m"), document, instruction, max_new_tokens=256)
    reply = openai.OpenAI(base_url=real_server.url, api_key="none", max_retries=0, timeout=300).chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": instruction}],
        prediction={"type": "content", "content": document}, max_tokens=256)
    content = reply.choices[0].message.content
    assert content == expected and content.count("\n") == content.count("\r\n") > 0  # no line ends mixed


def test_real_model_apply_form_finishes_a_valid_edit(real_server):
    message = f"<code>{DOC}</code>\n<update>{UPDATE}</update>"
    reply = openai.OpenAI(base_url=real_server.url, api_key="none", max_retries=0, timeout=300).chat.completions.create(
        model="smollm2-135m", messages=[{"role": "user", "content": message}], max_tokens=200)
    cad = reply.model_extra["cad"]
    assert reply.choices[0].finish_reason == "stop" and cad["complete"] and cad["form"] == "apply"
    assert reply.choices[0].message.content  # the merged file (the model was not trained on snippets)


def test_bench_http_reports_both_methods(tiny_server):
    from cad_outlines.bench.http import HttpConfig, format_table, run

    report = run(HttpConfig(url=tiny_server.url, api_key=KEY, clients=2, edits=2, max_tokens=8))
    assert set(report["summary"]) == {"cad", "regen"} and len(report["rows"]) == 4
    assert all(s["edits"] == 2 and s["edits_per_minute"] > 0 for s in report["summary"].values())
    assert "| CaD (`prediction`, or the apply form for a snippet) |" in format_table(report)


def test_bench_http_sends_lazy_snippets_as_apply_messages(tiny_server):
    from cad_outlines.bench.http import HttpConfig, format_table, run
    from cad_outlines.errors import InputError

    cfg = HttpConfig(url=tiny_server.url, api_key=KEY, clients=2, edits=2, max_tokens=8,
                     subset="commit_snippets", methods=("cad",))
    report = run(cfg)
    assert set(report["summary"]) == {"cad"} and [r["case"] for r in report["rows"]] == [
        "commit_snippets-000", "commit_snippets-001"]
    assert all(r["merged"] is True for r in report["rows"]) and report["summary"]["cad"]["merged"] == 2
    assert report["speedup_edits_per_minute"] is None and "of `commit_snippets`" in format_table(report)
    with pytest.raises(InputError, match="--subset nope: no such subset of the v2 cases"):
        run(HttpConfig(url=tiny_server.url, api_key=KEY, subset="nope"))
    with pytest.raises(InputError, match="--methods: fast"):
        run(HttpConfig(url=tiny_server.url, api_key=KEY, methods=("cad", "fast")))
