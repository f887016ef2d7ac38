"""The model side of the server: one decode at a time on a worker thread, from a bounded queue.

The transformers model runs one forward at a time anyway (a second decode beside it would
only split the CPU), so every job goes to a single worker thread, in arrival order.
:meth:`Engine.submit` admits a job or answers 429 when ``max_queue`` jobs already wait
behind the running one. The worker sends what it produces back to the event loop as
events on the job's queue: ``("chunk", text)`` as the answer grows, then ``("done",
Outcome)`` or ``("error", APIError)``. A job whose client left has its ``cancel`` flag set;
the decode checks it at every step (the ``progress`` callback of ``CaDGenerator.stream``,
the streamer of ``generate``) and stops there.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..adapters import get_adapter
from ..decoding.generator import CaDGenerator, IncompleteProgramError
from ..decoding.defaults import MODEL_FLOOR
from ..decoding.options import Instrumentation, LoopSwitches
from ..decoding.results import ContextLengthError
from ..decoding.runner import TransformersRunner
from ..errors import InputError, RequestCancelled
from ..language import syntax
from ..language.program import Copy, repeated_lines
from .protocol import APIError, ChatRequest, StopText, usage

log = logging.getLogger("cad_outlines.server")

#: Generators kept, by document (an edit of the same file reuses its view and grammar).
GENERATOR_CACHE = 8


@dataclass
class Outcome:
    """A finished job: the answer's text, why it ended, its usage and (edits) the CaD record."""

    content: str
    finish_reason: str  # "stop" or "length"
    usage: dict[str, Any]
    cad: dict[str, Any] | None = None


class Job:
    """One request on its way through the queue (see the module docstring)."""

    def __init__(self, request: ChatRequest, loop: asyncio.AbstractEventLoop):
        self.request = request
        self.cancel = threading.Event()
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.checked_at = time.monotonic()  # when the app last checked that the client is there
        self._loop = loop

    def emit(self, kind: str, payload: Any) -> None:
        """Hand an event to the event loop (called from the worker thread)."""
        self._loop.call_soon_threadsafe(self.events.put_nowait, (kind, payload))

    def check(self, _stats: Any = None) -> None:
        """Stop the decode if the client has gone (a ``progress`` callback)."""
        if self.cancel.is_set():
            raise RequestCancelled


def api_error(err: BaseException) -> APIError:
    """The HTTP answer to an error a job raised: the client's fault is a 4xx naming it."""
    if isinstance(err, APIError):
        return err
    if isinstance(err, ContextLengthError):
        return APIError(413, str(err), param="messages", code="context_length_exceeded")
    if isinstance(err, (InputError, ValueError)):  # bad prompt, option or document
        return APIError(400, str(err), code="invalid_value")
    log.exception("internal error", exc_info=err)
    return APIError(500, f"internal error ({type(err).__name__}); the server log has the traceback",
                    type="server_error", code="internal_error")


class Engine:
    """The transformers model behind the server (see the module docstring).

    Parameters
    ----------
    model
        An Outlines transformers model (``cad_outlines.tools.models.load`` or ``load_folder``).
    model_id
        The name clients send as ``model``.
    max_queue
        Jobs that may wait behind the running one; more are answered 429.
    max_tokens
        The budget when a request gives none: program tokens of an edit, new tokens of a chat.
    prefix_cache
        Reuse the KV of the prompt prefix each edit shares with the previous one
        (``TransformersRunner(prefix_cache=True)``): faster, but a reused prefix equals a
        fresh prefill only up to float rounding, so an answer may then depend on the
        request before it. Off by default: the same request gives the same answer.
    follow_prediction
        For apply-form messages: the snippet's literal merge as a prior the model
        overrules only where it gives the merge's token less than this
        (:class:`~cad_outlines.decoding.options.LoopSwitches`). ``None``: it only drafts;
        ``"model"`` (the default): the floor recorded with the model, if any.
    forward_cost
        The machine's :class:`~cad_outlines.decoding.drafting.ForwardCost`: each draft cut
        to what pays for the width it adds (worth it on a CPU); ``None``: drafts go whole.
    """

    def __init__(self, model: Any, model_id: str, *, max_queue: int = 32, max_tokens: int = 2048,
                 prefix_cache: bool = False, follow_prediction: float | str | None = MODEL_FLOOR,
                 forward_cost: Any = None):
        self.model, self.model_id = model, model_id
        # checked here, before serving
        self.loop = LoopSwitches(follow_prediction=follow_prediction, forward_cost=forward_cost)
        self.max_queue, self.max_tokens = max_queue, max_tokens
        self.adapter = get_adapter(model.hf_tokenizer)
        self.runner = TransformersRunner(model.model, prefix_cache=prefix_cache)
        #: The model's context in positions (``None``: no limit known).
        self.max_positions: int | None = self.runner.max_positions
        self.pending = 0  # running + waiting; read and written on the event loop's thread only
        self._generators: OrderedDict[str, CaDGenerator] = OrderedDict()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cad-decode")

    # -- on the event loop ----------------------------------------------------------------

    def submit(self, request: ChatRequest) -> Job:
        """Queue ``request`` for the worker, or raise a 429 :class:`APIError` when full."""
        check_budget(request, self.max_positions)
        check_queue(self.pending, self.max_queue)  # one running, max_queue waiting
        loop = asyncio.get_running_loop()
        job = Job(request, loop)
        self.pending += 1
        future = loop.run_in_executor(self._executor, self._run, job)
        future.add_done_callback(self._finished)
        return job

    def _finished(self, _future: Any) -> None:
        self.pending -= 1

    def close(self) -> None:
        """Drop the jobs still waiting; the running one finishes or stops at its cancel flag."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- on the worker thread -------------------------------------------------------------

    def _run(self, job: Job) -> None:
        if job.cancel.is_set():
            return  # its client left while it waited
        try:
            outcome = self._edit(job) if job.request.kind == "edit" else self._chat(job)
        except RequestCancelled:
            return
        except Exception as err:  # noqa: BLE001 - every error becomes an answer, never a dead worker
            job.emit("error", api_error(err))
            return
        job.emit("done", outcome)

    def generator(self, document: str) -> CaDGenerator:
        """The generator of ``document``, built once and kept (:data:`GENERATOR_CACHE`)."""
        gen = self._generators.pop(document, None)
        if gen is None:
            gen = CaDGenerator(self.model, document, max_new_tokens=self.max_tokens, loop=self.loop,
                               instrumentation=Instrumentation(runner=self.runner))
        self._generators[document] = gen
        while len(self._generators) > GENERATOR_CACHE:
            self._generators.popitem(last=False)
        return gen

    def _edit(self, job: Job) -> Outcome:
        """Decode the request's edit as a stream: every chunk goes out as it comes."""
        request = job.request
        assert request.document is not None
        gen = self.generator(request.document)
        prediction = gen.predicted(request.update) if request.update is not None else None
        steps = gen.stream(request.prompt, progress=job.check, prediction=prediction,
                           max_new_tokens=request.max_tokens or self.max_tokens, **request.sampling())
        text = ""
        # A stop string cuts the answer's text; the program is still decoded to its end,
        # so the ``cad`` record describes the whole edit.
        scan = StopText(request.stop)
        try:
            while True:
                try:
                    piece = next(steps)
                except StopIteration as stop:
                    result, finish = stop.value, "stop"
                    break
                text += piece
                if request.stream and (out := scan.release(text)):
                    job.emit("chunk", out)
        except IncompleteProgramError as err:  # the text streamed so far is the honest answer
            result, finish = err.result, "length"
        if request.stream and (rest := scan.release(text, final=True)):
            job.emit("chunk", rest)
        return edit_outcome(self.adapter, request, *scan.end(text, finish), result, merged=prediction is not None)

    def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The prompt ids of a plain chat (:func:`chat_ids`)."""
        return chat_ids(self.adapter, messages)

    def _chat(self, job: Job) -> Outcome:
        """Plain generation (transformers ``generate``): the server as an ordinary chat endpoint."""
        import torch

        request = job.request
        ids = self.chat_ids(request.prompt)
        budget = chat_budget(len(ids), request.max_tokens or self.max_tokens, self.max_positions)
        stops = {self.adapter.eos_token_id}
        if self.adapter.tokenizer.eos_token_id is not None:
            stops.add(self.adapter.tokenizer.eos_token_id)
        streamer = _Deltas(job, self.adapter, stops)
        options: dict[str, Any] = {"do_sample": False}
        if request.temperature > 0:
            options = {"do_sample": True, "temperature": request.temperature, "top_p": request.top_p, "top_k": 0}
        if request.stop:  # transformers ends the decode at them; the text is cut below
            options.update(stop_strings=list(request.stop), tokenizer=self.adapter.tokenizer)
        torch.manual_seed(request.seed)  # one worker thread: the global generator is this job's
        hf_model = self.model.model
        with torch.inference_mode():
            out = hf_model.generate(input_ids=torch.tensor([ids], device=self.runner.device),
                                    attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=self.runner.device),
                                    max_new_tokens=budget, eos_token_id=sorted(stops),
                                    pad_token_id=self.adapter.eos_token_id, streamer=streamer, **options)
        new = out[0, len(ids):].tolist()
        finish = "stop" if new and new[-1] in stops else "length"
        new = [t for t in new if t not in stops]
        content, finish = streamer.scan.end(self.adapter.decode(new), finish)
        streamer.flush(content, final=True)
        return Outcome(content, finish, usage(len(ids), len(new)))


def edit_usage(adapter: Any, document: str, content: str, result: Any) -> dict[str, Any]:
    """Usage of an edit: ``accepted`` = tokens spliced from the prediction (the copies),
    ``rejected`` = tokens of the prediction's lines no copy took."""
    copied: set[int] = set()
    for op in result.ops:
        if isinstance(op, Copy):
            copied.update(range(op.start, op.end + 1))
    lines = syntax.split_lines(document)
    left = "\n".join(line for k, line in enumerate(lines, 1) if k not in copied)
    return usage(result.stats.prompt_tokens, len(adapter.encode(content)),
                 accepted=result.stats.copied_tokens, rejected=len(adapter.encode(left)))


def edit_outcome(adapter: Any, request: ChatRequest, content: str, finish: str, result: Any,
                 merged: bool = False) -> Outcome:
    """The answer to an edit: its text, usage and the documented ``cad`` record (either
    engine). ``merged``: an apply-form snippet had a literal merge into the document
    (the prior the decode followed); the record says so for apply-form edits only."""
    assert request.document is not None
    record: dict[str, Any] = {"form": request.form}
    if request.form == "apply":
        record["merged"] = merged
    record.update(program=result.program, complete=result.complete, stop_reason=result.stats.stop_reason or None,
                  repeated_lines=repeated_lines(result.ops), stats=dataclasses.asdict(result.stats))
    return Outcome(content, finish, edit_usage(adapter, request.document, content, result), record)


def chat_ids(adapter: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt ids of a plain chat: the conversation in the tokenizer's chat template
    (the adapter's fallback template for a tokenizer without one)."""
    tok = adapter.tokenizer
    extra: dict[str, Any] = dict(adapter.chat_template_kwargs)
    if not getattr(tok, "chat_template", None):
        extra.update(chat_template=adapter.fallback_chat_template, bos=tok.bos_token or "",
                     eos=tok.convert_ids_to_tokens(adapter.eos_token_id))
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **extra)
    return list(tok.encode(text, add_special_tokens=False))


def check_budget(request: ChatRequest, max_positions: int | None) -> None:
    """A ``max_tokens`` past the model's context is the client's mistake (400)."""
    if request.max_tokens is not None and max_positions is not None and request.max_tokens > max_positions:
        raise APIError(400, f"max_tokens is {request.max_tokens}, past the model's context of "
                            f"{max_positions} tokens", param="max_tokens", code="invalid_value")


def chat_budget(prompt_tokens: int, budget: int, max_positions: int | None) -> int:
    """New tokens a chat may write: ``budget``, cut to the context left (413 when none is)."""
    if max_positions is None:
        return budget
    if prompt_tokens >= max_positions:
        raise ContextLengthError(f"the prompt is {prompt_tokens} tokens but the model's context is "
                                 f"{max_positions} positions")
    return min(budget, max_positions - prompt_tokens)


def check_queue(pending: int, max_queue: int) -> None:
    """429 when ``max_queue`` requests already wait behind the running one(s)."""
    if pending > max_queue:
        raise APIError(429, f"the server is busy: {pending} requests are running or waiting "
                            f"(--max-queue {max_queue}); retry later", type="rate_limit_error", code="queue_full")


class _Deltas:
    """A transformers streamer: each new token's text as a chunk, whole characters only."""

    def __init__(self, job: Job, adapter: Any, stops: set[int]):
        self.job, self.adapter, self.stops = job, adapter, stops
        self.ids: list[int] = []
        self.scan = StopText(job.request.stop)  # what of the text may go out yet
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        self.job.check()  # raising here stops generate at this token
        if not self.prompt_seen:  # generate puts the prompt first
            self.prompt_seen = True
            return
        self.ids += [t for t in value.flatten().tolist() if t not in self.stops]
        text = self.adapter.decode(self.ids)
        if not text.endswith("\ufffd"):  # a character split over tokens waits for its end
            self.flush(text)

    def flush(self, text: str, final: bool = False) -> None:
        if self.job.request.stream and (piece := self.scan.release(text, final)):
            self.job.emit("chunk", piece)

    def end(self) -> None:
        pass


__all__ = ["RequestCancelled", "Engine", "Job", "Outcome", "api_error", "chat_budget", "chat_ids", "check_budget",
           "check_queue", "edit_outcome", "edit_usage"]
