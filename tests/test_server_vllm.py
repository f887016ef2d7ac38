"""``cad-outlines serve --engine vllm``: the same HTTP contract with every request in flight
in one vLLM engine (runs in the vLLM venv, scripts/vllm_venv.sh; skipped elsewhere).

Random weights cannot choose an edit, so the checks are the contract's: the ``openai``
client's types parse, a complete program's document is its resolve against the file, an
unfinished one says ``length``, plain chat answers, concurrent clients all get answers,
bad input is a 400 and the server keeps serving.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

if os.environ.get("CAD_OUTLINES_REQUIRE_VLLM") != "1":
    pytest.importorskip("vllm", reason="vLLM is not installed (see scripts/vllm_venv.sh)")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from cad_outlines.language import program  # noqa: E402
from cad_outlines.language.resolver import resolve  # noqa: E402
from cad_outlines.tools import models  # noqa: E402

from testdata import TOKENIZERS  # noqa: E402

pytestmark = pytest.mark.vllm

HEADS = dict(num_attention_heads=2, num_key_value_heads=1)  # vLLM's CPU attention: head size 32
DOC = "".join(f"value_{i} = {i * i}\n" for i in range(1, 21))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = models.save("tiny-qwen", tmp_path_factory.mktemp("model") / "tiny-qwen", tokenizer_root=TOKENIZERS,
                         config=HEADS)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "cad_outlines", "serve", "--engine", "vllm", "--model", str(folder),
                             "--port", "0", "--max-model-len", "4096", "--kv-cache-gib", "0.25", "-q",
                             "--follow-prediction", "1e-12"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        pytest.fail(f"the server did not start: {line!r} {proc.stderr.read()[-3000:]}")
    url = line.split(" at ", 1)[1].strip()
    yield url, proc
    proc.terminate()
    assert proc.wait(timeout=120) == 0


def _client(url: str):
    return openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)


def _check_edit(response, document: str) -> None:
    choice = response.choices[0]
    extra = response.model_extra["cad"]
    assert choice.finish_reason in ("stop", "length")
    assert extra["complete"] == (choice.finish_reason == "stop")
    if extra["complete"]:
        assert choice.message.content == resolve(program.parse(extra["program"]), document, "strict")
    usage = response.usage
    assert usage.prompt_tokens > 0 and usage.completion_tokens_details.accepted_prediction_tokens >= 0


def test_models_and_health(server):
    url, _ = server
    assert [m.id for m in _client(url).models.list().data] == ["tiny-qwen"]
    assert httpx.get(url.removesuffix("/v1") + "/health").json()["status"] == "ok"


def test_predicted_output_and_apply_form_and_chat(server):
    url, _ = server
    client = _client(url)
    edit = client.chat.completions.create(model="tiny-qwen", messages=[{"role": "user", "content": "square 5 again"}],
                                          prediction={"type": "content", "content": DOC}, max_tokens=24)
    _check_edit(edit, DOC)
    # --follow-prediction 1e-12: the snippet's merge is a prior even random weights follow
    update = "value_1 = 1\nvalue_2 = 5\nvalue_3 = 9\n# ... existing code ...\n"
    applied = client.chat.completions.create(
        model="tiny-qwen", max_tokens=64,
        messages=[{"role": "user", "content": f"<code>{DOC}</code>\n<update>{update}</update>"}])
    _check_edit(applied, DOC)
    assert applied.model_extra["cad"]["merged"] is True
    assert applied.choices[0].message.content == DOC.replace("value_2 = 4\n", "value_2 = 5\n")
    # streamed, the text comes a request at a time: the first copy, then the gen with the next copy
    pieces = [part.choices[0].delta.content for part in client.chat.completions.create(
        model="tiny-qwen", max_tokens=64, stream=True,
        messages=[{"role": "user", "content": f"<code>{DOC}</code>\n<update>{update}</update>"}])
        if part.choices and part.choices[0].delta.content]
    assert pieces[0] == "value_1 = 1" and len(pieces) >= 2  # the line end comes with the next op
    assert "".join(pieces) == applied.choices[0].message.content
    chat = client.chat.completions.create(model="tiny-qwen", messages=[{"role": "user", "content": "hi"}],
                                          max_tokens=6)
    assert isinstance(chat.choices[0].message.content, str) and chat.usage.completion_tokens <= 6
    streamed = client.chat.completions.create(model="tiny-qwen", messages=[{"role": "user", "content": "square 5 again"}],
                                              prediction={"type": "content", "content": DOC}, max_tokens=24,
                                              stream=True)
    text = "".join(part.choices[0].delta.content or "" for part in streamed if part.choices)
    assert text == edit.choices[0].message.content  # greedy: the same answer, streamed


def test_concurrent_clients_all_get_answers_and_bad_input_is_a_400(server):
    url, _ = server
    answers: list = []

    def one(k: int) -> None:
        answers.append(_client(url).chat.completions.create(
            model="tiny-qwen", messages=[{"role": "user", "content": f"edit {k}"}],
            prediction={"type": "content", "content": DOC}, max_tokens=16))

    threads = [threading.Thread(target=one, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 6
    for answer in answers:
        _check_edit(answer, DOC)
    with pytest.raises(openai.BadRequestError):
        _client(url).chat.completions.create(model="tiny-qwen", messages=[], max_tokens=4)
    bad = httpx.post(url + "/chat/completions", content=b"{not json", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert httpx.get(url.removesuffix("/v1") + "/health").status_code == 200  # still serving


def test_n_sampled_choices_run_side_by_side(server):
    url, _ = server
    ask = dict(model="tiny-qwen", messages=[{"role": "user", "content": "square 5 again"}],
               prediction={"type": "content", "content": DOC}, max_tokens=16, temperature=1.0, seed=21)
    reply = _client(url).chat.completions.create(n=2, **ask)
    assert [c.index for c in reply.choices] == [0, 1]
    for k, choice in enumerate(reply.choices):
        one = _client(url).chat.completions.create(**{**ask, "seed": 21 + k})  # choice k samples with seed + k
        assert choice.message.content == one.choices[0].message.content
        assert choice.model_extra["cad"]["program"] == one.model_extra["cad"]["program"]



def test_a_stop_string_ends_a_chat(server):
    """vLLM stops at the string; the answer ends before it (random weights finish no edit
    program, so the edit's cut is checked on the transformers engine, tests/test_server.py)."""
    from cad_outlines.server.protocol import StopText

    url, _ = server
    client = _client(url)
    chat = dict(model="tiny-qwen", messages=[{"role": "user", "content": "hi"}], max_tokens=12, temperature=1.0, seed=3)
    reply = client.chat.completions.create(**chat).choices[0].message.content
    assert len(reply) >= 4, reply
    stop = reply[len(reply) // 2:len(reply) // 2 + 2]
    cut = client.chat.completions.create(stop=[stop], **chat).choices[0]
    assert cut.message.content == StopText((stop,)).cut(reply) != reply and cut.finish_reason == "stop"
