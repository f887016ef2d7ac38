"""One edit's requests on vLLM: the state a driver in :mod:`cad_outlines.engines.vllm` carries
from one request of an edit to the next.

:class:`EditSession` is a CaD edit. With ``splice="request"`` each stretch of program is
a request of its own that stops at a copy tag's close; the next one's prompt is the whole
context so far plus the copied span, found again by vLLM's prefix cache. With
``splice="session"`` the edit is one resumable request (a vLLM streaming-input session):
the logits processor ends each stretch after a completed copy with end-of-sequence, which
vLLM discards, and the span is the session's next input, appended to the KV the request
kept. :class:`RegenSession` is the regeneration baseline, one request per edit.

The editor is duck-typed (``adapter``, ``granularity``, ``prompt_style``, ``sampling``,
``max_new_tokens``, ``block_size``, ``max_positions``, ``mode``, ``splice``,
``follow_prediction``, ``repetition_guard``) so this module
does not import its driver.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Literal, Sequence

import msgspec
from vllm import SamplingParams
from vllm.sampling_params import RequestOutputKind

from ..decoding.compiling import compile_grammar
from ..decoding.constraint import ProgramConstraint
from ..decoding.document import DocumentView
from ..decoding.ending import end_program, ended_in_gen
from ..decoding.forcing import forced_ids, forced_rejected
from ..decoding.repetition import repeating, retypable
from ..decoding.results import CaDResult, context_limit
from ..language import program, syntax
from ..language.oracle import oracle_program
from ..language.program import Copy, Op
from ._vllm_processor import EXTRA_KEY
from ._vllm_stats import VLLMStats

__all__ = ["STOP_STRINGS", "EditSession", "RegenSession", "Splice", "add_session_input"]

#: What ends one request: a copy tag's close (a splice follows) or the program's end.
STOP_STRINGS = [syntax.COPY_CLOSE, syntax.PROGRAM_CLOSE]
#: How a copied span enters the KV cache (see :class:`~cad_outlines.engines.vllm.VLLMEditor`).
Splice = Literal["request", "session"]


class EditSession:
    """One edit's chain of requests: the state that continues from one to the next."""

    def __init__(self, editor: Any, document: str, instruction: str,
                 force_program: str | Sequence[Op] | None, prediction: str | None = None,
                 on_ops: Callable[[list[Op]], None] | None = None):
        self.editor = editor
        self.adapter = adapter = editor.adapter
        self.document = document
        self.granularity = editor.granularity
        self.view = DocumentView(document, adapter, self.granularity)
        self.upper = self.view.upper
        # The driver's own copy of the constraint reads the ops and the text; the
        # engine-side copy (in CaDLogitsProcessor) masks.
        self.constraint = ProgramConstraint(
            compile_grammar(adapter.tokenizer, self.upper, self.granularity), self.view.indices,
            monotone=editor.monotone)
        prompt = adapter.prompt_ids(self.view.text, instruction, self.granularity, style=editor.prompt_style)
        #: the engine's context; refused here when no edit keeping the document fits in it
        self.limit = context_limit(editor, len(prompt), self.view)
        self.context: list[int] = list(prompt)
        self.program_ids: list[int] = []
        self.forced: list[int] | None = None
        if force_program is not None:
            text = force_program if isinstance(force_program, str) else program.render(force_program)
            self.forced = forced_ids(adapter, text)
        #: the processor's ``follow`` arguments: the prediction's oracle program as a prior
        #: (line programs, a model or caller floor, as the transformers loop's ``_drafter``)
        self.follow: dict[str, Any] | None = None
        if prediction is not None and editor.follow_prediction is not None and self.granularity == "lines":
            plan = oracle_program(self.view.text, self.view.read_form(prediction))
            self.follow = {"plan": program.render(plan), "lines": list(self.view.lines),
                           "floor": float(editor.follow_prediction), "adapter": adapter.name}
        #: the repetition guard's text (:mod:`~cad_outlines.decoding.repetition`); None: off
        self.haystack = (retypable(self.view.text, instruction)
                         if editor.repetition_guard and force_program is None else None)
        #: called with the ops each finished request completes (a server streams their text)
        self.on_ops = on_ops
        self.stats = VLLMStats(prompt_tokens=len(prompt))
        self._start = time.perf_counter()
        #: context tokens whose KV the last request computed (a session keeps them)
        self._previous_context = 0
        self._over = False
        #: ``"session"``: one resumable request; ``rid`` its id once submitted, ``chunk``
        #: this stretch's tokens so far.
        self.splice = editor.splice
        self.rid: str | None = None
        self.chunk: list[int] = []
        last = Copy(self.upper, self.upper)
        # a copy of an empty last line appends nothing, so the session must not pause there
        self._keep_going = ([[self.upper, self.upper]] if self.granularity == "lines"
                            and not self.view.span_ids(last) else [])

    @property
    def resumable(self) -> bool:
        """Whether the edit is one resumable request (``splice="session"``)."""
        return self.splice == "session"

    def next_request(self) -> tuple[list[int], SamplingParams] | None:
        """The next request's prompt ids and parameters; ``None`` when the edit is over."""
        if self._over or self.constraint.done:
            return self._finish()
        budget = self.editor.max_new_tokens - len(self.program_ids)
        if budget <= 0:
            self.stats.stopped_early, self.stats.stop_reason = True, "max_new_tokens"
            return self._finish()
        if self.limit is not None:
            # vLLM refuses a prompt past max_model_len: stop, flagged incomplete, where
            # the spliced context leaves no room for another token
            room = self.limit - len(self.context)
            if room < 1:
                self.stats.stopped_early, self.stats.stop_reason = True, "context"
                return self._finish()
            budget = min(budget, room)
        args: dict[str, Any] = {"upper": self.upper, "granularity": self.granularity,
                                "replay": list(self.program_ids), "eos": self.adapter.eos_token_id}
        if self.view.holds_program_close:  # typed in a gen it may be the document's text
            args["keep_program_close"] = True
        if self.view.inside:  # the engine-side constraint keeps token copies whole characters too
            args["inside"] = self.view.inside
        if self.constraint.monotone:
            args["monotone"] = True
        if self.haystack is not None:
            args["haystack"] = self.haystack
        if self.forced is not None:
            args["force"] = self.forced[len(self.program_ids):]
        elif self.follow is not None:
            args["follow"] = self.follow
        editor = self.editor
        sampling = editor.sampling
        seed = None if sampling.seed is None else sampling.seed + self.stats.requests
        common = dict(max_tokens=budget, temperature=sampling.temperature, top_p=sampling.top_p, seed=seed,
                      stop_token_ids=[self.adapter.eos_token_id])
        if self.resumable:  # the processor pauses at each copy; the next input is its span
            args.update(pause=True, keep_going=self._keep_going)
            return (self.context[self._previous_context:],
                    SamplingParams(**common, output_kind=RequestOutputKind.DELTA, extra_args={EXTRA_KEY: args}))
        params = SamplingParams(**common, stop=STOP_STRINGS, include_stop_str_in_output=True,
                                extra_args={EXTRA_KEY: args})
        return list(self.context), params

    def take(self, output: Any) -> bool:
        """Take one engine output; whether this stretch of the program is over (then :meth:`feed`)."""
        if not self.resumable:
            return bool(output.finished)
        self.chunk += output.outputs[0].token_ids  # a session's outputs are deltas
        return output.finished or output.outputs[0].finish_reason is not None

    def feed(self, output: Any) -> None:
        """Take a finished request's output: advance the program, splice completed copies."""
        stats = self.stats
        if self.resumable:  # the session keeps what it held; it computes the new input
            cached = self._previous_context or (output.num_cached_tokens or 0)
            prompt_len = len(self.context)
            ids, self.chunk = self.chunk, []
        else:
            cached = output.num_cached_tokens or 0
            prompt_len = len(output.prompt_token_ids) if output.prompt_token_ids is not None else len(self.context)
            ids = list(output.outputs[0].token_ids)
        if stats.requests == 0:
            stats.prefill_seconds = (stats.first_token_seconds[0] if stats.first_token_seconds
                                     else time.perf_counter() - self._start)
        else:
            stats.splice_reusable_tokens += self._previous_context
            block = self.editor.block_size
            stats.splice_reusable_block_tokens += self._previous_context // block * block
            stats.splice_cached_tokens += cached
            stats.splice_computed_tokens += prompt_len - cached
        stats.requests += 1
        stats.prompt_tokens_cached += cached
        stats.prompt_tokens_computed += prompt_len - cached
        stats.forward_passes += len(ids)
        ended = bool(ids) and ids[-1] == self.adapter.eos_token_id
        if ended:
            ids.pop()
        clock = time.perf_counter()
        new_ops = self.constraint.advance(ids)
        # The processor ended the request: a looping gen (the same check on the same
        # text), else, inside a gen, where the model asked for </program>.
        looped = ended and self.haystack is not None and repeating(self.constraint, self.haystack) is not None
        ending = (ended_in_gen(self.constraint, self.granularity == "lines") if ended and not looped
                  and self.forced is None and not self.view.holds_program_close else None)
        if ending is not None:  # the processor stopped where the model asked for </program>
            new_ops += self.constraint.advance(end_program(self.constraint, ending, self.adapter.encode))
            stats.ended_in_gen = True
        stats.constraint_seconds += time.perf_counter() - clock
        self.program_ids += ids
        self.context += ids
        stats.decoded_tokens += len(ids)
        # The last sampled token has no KV yet, except in a session: there the
        # end-of-sequence that paused it was sampled last (and discarded).
        self._previous_context = len(self.context) - (0 if self.resumable else 1)
        paused = self.resumable and any(self.view.spans(new_ops))
        self.view.splice(new_ops, self.context, stats)
        if self.on_ops is not None and new_ops:
            self.on_ops(new_ops)
        if ended and not self.constraint.done and not paused:
            # The processor allowed only end-of-sequence: the constraint could not go on.
            self._over = True
            if self.forced is not None:
                raise forced_rejected(self.constraint.text)
            if looped:
                stats.stopped_early, stats.stop_reason = True, "repetition"

    def _finish(self) -> None:
        """Mark the edit over: its latency ends here (not when the last edit ends)."""
        if not self.stats.total_seconds:
            self.stats.total_seconds = time.perf_counter() - self._start
        return None

    def result(self) -> CaDResult:
        """The edit's :class:`~cad_outlines.decoding.generator.CaDResult` (document None if incomplete)."""
        complete = self.constraint.done
        document = None
        if complete:
            document = self.view.resolve(self.constraint.ops, self.editor.mode)
        self._finish()
        return CaDResult(document, self.constraint.text, list(self.constraint.ops), complete, self.stats)


class RegenSession:
    """The regeneration baseline: one unconstrained request per edit (``EditSession``'s interface)."""

    resumable = False

    def __init__(self, editor: Any, document: str, instruction: str, target: str | None,
                 layout: str = "plain"):
        self.editor = editor
        self.adapter = adapter = editor.adapter
        # the text the model reads and its line ends, as the transformers loop's view gives them
        self.view = view = DocumentView(document, adapter, editor.granularity)
        prompt = (adapter.plain_prompt_ids(view.text, instruction, editor.prompt_style) if layout == "plain" else
                  adapter.prompt_ids(view.text, instruction, editor.granularity, style=editor.prompt_style))
        self.prompt = prompt
        limit = context_limit(editor, len(prompt), view)  # refuses a document that cannot be retyped
        self.room = None if limit is None else limit - len(prompt)
        eos = adapter.eos_token_id
        self.forced = adapter.encode(target) + [eos] if target is not None else None
        self.stats = VLLMStats(prompt_tokens=len(prompt))
        self.text: str | None = None
        self._ended = False
        self._start = time.perf_counter()

    def next_request(self) -> tuple[list[int], SamplingParams] | None:
        if self.stats.requests:
            if not self.stats.total_seconds:
                self.stats.total_seconds = time.perf_counter() - self._start
            return None
        editor, eos = self.editor, self.adapter.eos_token_id
        budget = len(self.forced) if self.forced is not None else editor.max_new_tokens
        if self.room is not None:
            budget = min(budget, self.room)
        extra = {EXTRA_KEY: {"eos": eos, "force": self.forced}} if self.forced is not None else None
        sampling = editor.sampling
        params = SamplingParams(max_tokens=budget, temperature=sampling.temperature, top_p=sampling.top_p,
                                seed=sampling.seed, stop_token_ids=[eos], extra_args=extra)
        return list(self.prompt), params

    def take(self, output: Any) -> bool:
        return bool(output.finished)

    def feed(self, output: Any) -> None:
        stats = self.stats
        cached = output.num_cached_tokens or 0
        stats.requests += 1
        stats.prefill_seconds = (stats.first_token_seconds[0] if stats.first_token_seconds
                                 else time.perf_counter() - self._start)
        stats.prompt_tokens_cached += cached
        stats.prompt_tokens_computed += len(self.prompt) - cached
        ids = list(output.outputs[0].token_ids)
        stats.forward_passes += len(ids)
        self._ended = bool(ids) and ids[-1] == self.adapter.eos_token_id
        if self._ended:
            ids.pop()
        stats.decoded_tokens += len(ids)
        stats.stopped_early = not self._ended
        capped = self.room is not None and len(ids) >= self.room  # the engine's context, not the budget
        stats.stop_reason = "" if self._ended else "context" if capped else "max_new_tokens"
        self.text = self.adapter.decode(ids)

    def result(self) -> CaDResult:
        if not self.stats.total_seconds:
            self.stats.total_seconds = time.perf_counter() - self._start
        text = self.text or ""
        return CaDResult(self.view.restore(text) if self._ended else None, text, [], self._ended, self.stats)


def add_session_input(engine: Any, rid: str, prompt: list[int], params: SamplingParams) -> None:
    """Start session ``rid`` on an ``LLMEngine``, or give it its next input.

    What ``AsyncLLM.generate`` does with a stream of ``StreamingInput``: the same request
    id, marked resumable, so the scheduler appends ``prompt`` to the paused request
    instead of starting a new one. ``LLMEngine.add_request`` has no such flag.
    """
    request = engine.input_processor.process_inputs(rid, {"prompt_token_ids": prompt}, params,
                                                    supported_tasks=engine.get_supported_tasks(), resumable=True)
    request.external_req_id = rid
    # In one process both sides would extend the same prompt list; each gets its own.
    engine.output_processor.add_request(msgspec.structs.replace(request, prompt_token_ids=list(prompt)),
                                        None, None, 0)
    engine.engine_core.add_request(request)
