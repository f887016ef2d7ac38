"""The vLLM model behind the server: every request in flight runs in one ``AsyncLLM`` engine.

The same contract as :class:`~.engine.Engine` (``submit`` -> a :class:`~.engine.Job`
whose events the app reads; ``close``; ``pending``; ``max_positions``), but no worker
thread and no one-at-a-time queue: each job is a task on the event loop, an edit is a
:class:`~cad_outlines.engines.vllm.VLLMEditor` chain of continuation requests, a chat one
``generate`` request, and vLLM batches all of them. ``--max-queue`` bounds the requests in
flight. A streamed edit's text arrives a copy at a time: each request of the driver ends
at a copy's close, and the gen before it and the copy go out together (not token by
token, as on transformers); a client that leaves cancels its task, which aborts its vLLM
request.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..decoding.defaults import MODEL_FLOOR
from ..decoding.document import DocumentView
from ..engines import vllm as cad_vllm
from .engine import Job, Outcome, api_error, chat_budget, chat_ids, check_budget, check_queue, edit_outcome
from .protocol import ChatRequest, StopText, usage

#: Editors kept, by their options (temperature, top_p, seed, budget).
EDITOR_CACHE = 16
#: How often a running job checks that its client is still there.
CANCEL_POLL_SECONDS = 0.25


class VLLMEngine:
    """Serve a model folder on vLLM (see the module docstring).

    Parameters
    ----------
    folder
        A Hugging Face model folder (``cad_outlines.tools.models.save`` or a converted
        preset's folder).
    model_id
        The name clients send as ``model``.
    max_queue
        Requests that may be in flight at once beyond the first; more are answered 429.
    max_tokens
        The budget when a request gives none.
    follow_prediction
        For apply-form messages: the snippet's literal merge as a prior the model
        overrules only where it gives the merge's next token less than this share
        (``"model"``: the floor recorded with the model; ``None``: off), as on the
        transformers engine.
    engine_args
        vLLM engine arguments (``dtype``, ``max_model_len``, ``kv_cache_memory_bytes``, ...).
    """

    def __init__(self, folder: str, model_id: str, *, max_queue: int = 32, max_tokens: int = 2048,
                 follow_prediction: float | str | None = MODEL_FLOOR, **engine_args: Any):
        self.llm = cad_vllm.load(folder, async_engine=True, **engine_args)
        self.model_id, self.max_queue, self.max_tokens = model_id, max_queue, max_tokens
        self.follow_prediction = follow_prediction
        self.max_positions: int | None = self.llm.model_config.max_model_len
        self.pending = 0
        self._editors: dict[tuple[Any, ...], cad_vllm.VLLMEditor] = {}
        self.adapter = self.editor(0.0, 1.0, 0, max_tokens).adapter

    def editor(self, temperature: float, top_p: float, seed: int, budget: int) -> cad_vllm.VLLMEditor:
        """The editor of these options (built once: it loads the tokenizer and checks them)."""
        key = (temperature, top_p, seed, budget)
        if key not in self._editors:
            if len(self._editors) >= EDITOR_CACHE:
                self._editors.pop(next(iter(self._editors)))
            self._editors[key] = cad_vllm.VLLMEditor(self.llm, temperature=temperature, top_p=top_p,
                                                     seed=seed, max_new_tokens=budget,
                                                     follow_prediction=self.follow_prediction)
        return self._editors[key]

    def submit(self, request: ChatRequest) -> Job:
        """Start ``request`` as a task, or raise a 429 when ``max_queue`` are in flight."""
        check_budget(request, self.max_positions)
        check_queue(self.pending, self.max_queue)
        loop = asyncio.get_running_loop()
        job = Job(request, loop)
        self.pending += 1
        task = loop.create_task(self._run(job))
        task.add_done_callback(self._finished)
        return job

    def _finished(self, _task: Any) -> None:
        self.pending -= 1

    def close(self) -> None:
        """Stop the engine's background loop (requests still running are aborted)."""
        self.llm.shutdown()

    async def _run(self, job: Job) -> None:
        work = asyncio.ensure_future(self._edit(job) if job.request.kind == "edit" else self._chat(job))
        while not work.done():
            await asyncio.wait([work], timeout=CANCEL_POLL_SECONDS)
            if job.cancel.is_set() and not work.done():
                work.cancel()  # closing the engine's output stream aborts its request
                return
        try:
            outcome = work.result()
        except Exception as err:  # noqa: BLE001 - every error becomes an answer
            job.emit("error", api_error(err))
            return
        if job.request.stream and job.request.kind != "edit" and outcome.content:
            job.emit("chunk", outcome.content)  # a chat's text in one piece; an edit streamed its own
        job.emit("done", outcome)

    async def _edit(self, job: Job) -> Outcome:
        request = job.request
        assert request.document is not None
        editor = self.editor(request.temperature, request.top_p, request.seed, request.max_tokens or self.max_tokens)
        view = DocumentView(request.document, self.adapter)
        prediction = view.merged(request.update) if request.update is not None else None
        writer = view.writer()
        scan = StopText(request.stop)  # a stop string cuts the text; the program is decoded to its end
        text = ""

        def grow(ops: list[Any]) -> None:  # the text of each request's ops, as it ends
            nonlocal text
            text += writer.feed(ops, "")
            if request.stream and (out := scan.release(text)):
                job.emit("chunk", out)

        result = await editor.arun(request.document, request.prompt, prediction=prediction, on_ops=grow)
        # complete: the chunks join to the resolved document (the writer's contract); else
        # the text of the complete ops, as a truncated answer
        text += writer.close()
        if request.stream and (rest := scan.release(text, final=True)):
            job.emit("chunk", rest)
        return edit_outcome(self.adapter, request, *scan.end(text, "stop" if result.complete else "length"), result,
                            merged=prediction is not None)

    async def _chat(self, job: Job) -> Outcome:
        from vllm import SamplingParams

        request = job.request
        ids = chat_ids(self.adapter, request.prompt)
        budget = chat_budget(len(ids), request.max_tokens or self.max_tokens, self.max_positions)
        params = SamplingParams(max_tokens=budget, temperature=request.temperature, top_p=request.top_p,
                                seed=request.seed, stop_token_ids=[self.adapter.eos_token_id],
                                stop=list(request.stop) or None)
        final = None
        async for output in self.llm.generate({"prompt_token_ids": ids}, params, request_id=f"chat-{id(job)}"):
            final = output
        assert final is not None
        new = [t for t in final.outputs[0].token_ids if t != self.adapter.eos_token_id]
        finish = "length" if final.outputs[0].finish_reason == "length" else "stop"
        # vLLM stopped at a stop string; the ids still spell it
        content, finish = StopText(request.stop).end(self.adapter.decode(new), finish)
        return Outcome(content, finish, usage(len(ids), len(new)))


__all__ = ["VLLMEngine"]
