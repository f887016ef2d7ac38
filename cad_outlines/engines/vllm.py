"""Copy-as-Decode on vLLM: a splice appends the copied span to the request's KV cache.

vLLM owns sampling and the KV cache, so this is a driver of its own (the transformers
loop in :mod:`cad_outlines.decoding.generator` stays the one loop for transformers). It shares
the program model, the constraint, the adapters, the resolver and
:class:`~cad_outlines.decoding.generator.CaDResult` with that loop. One edit runs as a chain of
requests::

    request 1: prompt                                  -> program tokens up to "/>
    request 2: prompt + program so far + copy_ids(...)  -> ... up to the next "/>
    ...                                                 -> ... up to </program>

Every request decodes under the document's program constraint (the same
:class:`~cad_outlines.decoding.constraint.ProgramConstraint`: grammar, ``1 <= i <= j <= n``,
copy tags ending on a token boundary), applied by :class:`CaDLogitsProcessor` inside the
engine and replayed over the program so far, so the grammar state continues across
requests. A request stops at a copy tag's close (stop string ``"/>``) or at
``</program>``; the next one's prompt is the previous context plus its output plus the
adapter's ids of the copied span: the splice layout of the transformers path. vLLM's
automatic prefix caching finds the previous context in its KV cache, so only the span
(and the last, partial block) is prefilled. That is ``splice="request"``.

``splice="session"`` (where vLLM has streaming-input sessions, 0.32 on) keeps one
request alive per edit: the logits processor ends each stretch after a completed
copy with end-of-sequence, which vLLM samples and discards, and the span is the
session's next input, appended to the KV the request kept. No stop strings, no new
request, no partial block computed again (:mod:`cad_outlines.engines._vllm_sessions`).

Concurrency: with an ``LLM`` the driver steps the engine itself and submits each
continuation as soon as its predecessor finishes, so many edits share every forward
(continuous batching, one process). With an ``AsyncLLM`` each edit is a coroutine.

Examples
--------
>>> from cad_outlines.engines import vllm as cad_vllm                  # doctest: +SKIP
>>> llm = cad_vllm.load("path/to/model", dtype="float32")               # doctest: +SKIP
>>> editor = cad_vllm.VLLMEditor(llm, max_new_tokens=512)               # doctest: +SKIP
>>> editor.edit(source, "rename foo to bar")                            # doctest: +SKIP
>>> results = cad_vllm.edit_many(editor, [(doc, "add type hints") for doc in docs])  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import os
import time
import weakref
from typing import Any, Callable, Literal, Sequence

from ..errors import MissingDependencyError

try:
    from vllm import LLM, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM
except ImportError as err:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "cad_outlines.engines.vllm needs vLLM; install it with "
        "`pip install 'cad-outlines[vllm]'` (CPU: see scripts/vllm_venv.sh)") from err

from ..adapters import Adapter, get_adapter, load_tokenizer
from ..decoding.document import DocumentView
from ..decoding.prompts import style_for, update_prompt
from ..decoding.options import recorded_floor, recorded_monotone
from ..decoding.sampler import OptionError, SamplingOptions
from ..decoding.defaults import (DEFAULT_MAX_NEW_TOKENS, MODEL_FLOOR, check_budget, check_floor, check_layout,
                                 check_request)
from ..decoding.results import CaDResult, IncompleteProgramError
from ..language.grammar import Granularity
from ..language.program import Op
from ._vllm_processor import EXTRA_KEY, CaDLogitsProcessor
from ..errors import ContextLengthError, EngineSetupError, ResolveError
from ._vllm_sessions import EditSession, RegenSession, Splice, add_session_input
from ._vllm_stats import VLLMStats

__all__ = ["EXTRA_KEY", "CaDLogitsProcessor", "EngineSetupError", "VLLMEditor", "VLLMStats", "aedit_many",
           "edit_many", "load", "sessions_supported"]


def sessions_supported() -> bool:
    """Whether this vLLM keeps a request alive across new input (streaming-input
    sessions, ``resumable`` requests: vLLM 0.32 has them)."""
    from vllm.v1.engine.input_processor import InputProcessor

    return "resumable" in inspect.signature(InputProcessor.process_inputs).parameters


def load(model: str, *, async_engine: bool = False, **engine_kwargs: Any) -> "LLM | AsyncLLM":
    """Build a vLLM engine ready for CaD edits.

    Installs :class:`CaDLogitsProcessor` and turns on prefix caching; on the CPU it also
    picks the settings that keep start-up short (``enforce_eager``, one engine process,
    see ``docs/serving.md``). Any keyword overrides these defaults.

    Parameters
    ----------
    model
        A model folder or hub id vLLM can load.
    async_engine
        Build an ``AsyncLLM`` (edits as coroutines) instead of an ``LLM``.
    **engine_kwargs
        vLLM engine arguments (``dtype``, ``max_model_len``, ``kv_cache_memory_bytes``,
        ``block_size``, ...).
    """
    kwargs: dict[str, Any] = dict(enable_prefix_caching=True, enforce_eager=True,
                                  logits_processors=[CaDLogitsProcessor])
    kwargs.update(engine_kwargs)
    if CaDLogitsProcessor not in kwargs["logits_processors"]:
        kwargs["logits_processors"] = [*kwargs["logits_processors"], CaDLogitsProcessor]
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    if async_engine:
        from vllm.engine.arg_utils import AsyncEngineArgs

        return AsyncLLM.from_engine_args(AsyncEngineArgs(model=model, **kwargs))
    return LLM(model=model, **kwargs)


class VLLMEditor:
    """Edit documents with Copy-as-Decode programs on one vLLM engine.

    Parameters
    ----------
    engine
        A vLLM ``LLM`` or ``AsyncLLM`` built with :class:`CaDLogitsProcessor` (see
        :func:`load`), or an Outlines ``from_vllm_offline`` model (its ``LLM`` is used).
    granularity
        ``"lines"`` or ``"tokens"``, as for :class:`~cad_outlines.decoding.generator.CaDGenerator`.
    max_new_tokens
        Budget of program tokens per edit, over all its requests (copied tokens are free).
    temperature, top_p
        ``temperature=0`` is greedy; otherwise sampling with nucleus ``top_p``.
    **sampling
        The transformers engine's other sampling options (``top_k``, ``min_p``,
        ``repetition_penalty``) are checked like there and refused (``OptionError``)
        unless left at their defaults: this driver cannot honour them.
    seed
        ``None``: vLLM's engine-wide random state. An int gives each request its own
        seed (``seed + k`` for the edit's k-th request), so a run is reproducible; on
        vLLM's CPU build per-request seeds have crashed the engine under concurrent long
        prompts, hence the default.
    mode
        Resolver mode, ``"strict"`` or ``"clipped"``.
    adapter
        Adapter name or instance overriding auto-detection.
    prompt_style
        The prompt's layout, as for the transformers engine; ``None``: the model's own
        (``cad_prompt_style`` in its config, else ``"full"``).
    splice
        How a copied span enters the KV cache. ``"request"``: each splice is a new,
        prefix-cached continuation request. ``"session"``: the edit is one resumable
        request (a vLLM streaming-input session) that pauses at each copy's close and
        takes the span as its next input, keeping its KV blocks (vLLM 0.32 on).
        ``None``: ``"request"``, the longer-proven path; on a CPU the two measured the
        same (docs/serving.md), since there the copied spans' prefill, not the request,
        is what a splice costs.
    follow_prediction
        With a prediction (``run(..., prediction=)``, e.g. a snippet's literal merge): take
        the prediction's next token wherever the model gives it at least this share, as
        the transformers engine's ``LoopSwitches.follow_prediction``. ``"model"`` (the
        default): the floor recorded with the model (``cad_apply_floor``), else none;
        ``None``: the prediction is not used.
    repetition_guard
        Stop an edit whose gen body repeats itself past anything in the document or the
        instruction (``stop_reason == "repetition"``), as the transformers engine's
        ``LoopSwitches.repetition_guard`` (on by default).

    Raises
    ------
    EngineSetupError
        If ``engine`` is not a vLLM engine or lacks :class:`CaDLogitsProcessor`.

    An edit whose prompt and a copy of its whole document do not fit ``max_model_len`` is
    refused before its first request (:class:`~cad_outlines.errors.ContextLengthError`,
    ``.edit`` naming which of a ``run_many`` call's edits).
    """

    def __init__(self, engine: Any, *, granularity: Granularity = "lines",
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int | None = None, mode: Literal["strict", "clipped"] = "strict",
                 adapter: str | Adapter | None = None, prompt_style: str | None = None,
                 splice: Splice | None = None, follow_prediction: float | str | None = MODEL_FLOOR,
                 repetition_guard: bool = True, **sampling: Any):
        # The loop's checks and messages (granularity, mode, budget, sampling); then refuse what this driver cannot honour (the
        # transformers loop applies these after the mask; here vLLM's sampler would not).
        check_request(granularity, mode)
        check_budget(max_new_tokens)
        check_floor(follow_prediction)
        if splice not in (None, "request", "session"):
            raise OptionError(f"splice must be 'request', 'session' or None, got {splice!r}")
        if splice == "session" and not sessions_supported():
            raise EngineSetupError("splice='session' needs a vLLM with streaming-input sessions (0.32 or later)")
        options = SamplingOptions(temperature=temperature, top_p=top_p, seed=seed, **sampling)
        unsupported = [name for name in sampling if getattr(options, name) != getattr(SamplingOptions(), name)]
        if unsupported:
            raise OptionError(f"the vLLM engine does not support {', '.join(unsupported)} "
                              "(the transformers engine does)")
        if not isinstance(engine, (LLM, AsyncLLM)) and isinstance(getattr(engine, "model", None), LLM):
            engine = engine.model  # Outlines' VLLMOffline wraps an LLM
        if not isinstance(engine, (LLM, AsyncLLM)):
            raise EngineSetupError(f"expected a vLLM LLM or AsyncLLM (or an Outlines vLLM model), "
                                   f"got {type(engine).__name__}")
        installed = engine.model_config.logits_processors or []
        if not any(p is CaDLogitsProcessor or (isinstance(p, str) and p.endswith("CaDLogitsProcessor"))
                   for p in installed):
            raise EngineSetupError(
                "the vLLM engine has no CaDLogitsProcessor: build it with "
                "cad_outlines.engines.vllm.load(...) or pass "
                "logits_processors=[CaDLogitsProcessor] to LLM/AsyncLLM")
        self.engine = engine
        self.granularity = granularity
        self.max_new_tokens = max_new_tokens
        #: The sampling options of every request (vLLM's sampler honours temperature, top_p, seed).
        self.sampling = options
        self.mode = mode
        tokenizer = load_tokenizer(engine.model_config.tokenizer)
        self.adapter = adapter if isinstance(adapter, Adapter) else get_adapter(tokenizer, adapter)
        config = engine.llm_engine.vllm_config if isinstance(engine, LLM) else engine.vllm_config
        self.block_size: int = config.cache_config.block_size
        #: The engine's context (``max_model_len``): an edit that cannot fit in it is
        #: refused before its first request and stops, incomplete, where it would cross it
        #: (as on transformers, whose runner reads ``max_position_embeddings``).
        self.max_positions: int = engine.model_config.max_model_len
        self.max_positions_setting = "max_model_len"  # what error messages call it
        self.prompt_style = style_for(prompt_style, engine.model_config.hf_config, granularity)
        #: Copies start after the previous copy's end, for a model trained on oracle
        #: programs (as ``LoopSwitches(monotone_copies="model")`` on transformers).
        self.monotone = recorded_monotone(engine.model_config.hf_config)
        #: The prior a prediction gives (see the ``follow_prediction`` parameter).
        self.follow_prediction: float | None = (recorded_floor(engine.model_config.hf_config)
                                                if follow_prediction == MODEL_FLOOR else follow_prediction)
        self.repetition_guard = bool(repetition_guard)
        #: How spans enter the KV cache (see the ``splice`` parameter).
        self.splice: Splice = splice or "request"
        self._ids = itertools.count()

    # -- public API -------------------------------------------------------------------

    def edit(self, document: str, instruction: str) -> str:
        """Return the edited document; raise :class:`IncompleteProgramError` if unfinished."""
        result = self.run(document, instruction)
        if result.document is None:
            raise IncompleteProgramError(result)
        return result.document

    def apply(self, document: str, update: str, *, instruction: str | None = None) -> str:
        """Merge the lazy edit snippet ``update`` into ``document``, as
        :meth:`CaDGenerator.apply <cad_outlines.decoding.generator.CaDGenerator.apply>`:
        the snippet is the instruction, its literal merge the prediction (a prior with
        ``follow_prediction``'s floor). Raises :class:`IncompleteProgramError` if unfinished."""
        result = self.run(document, update_prompt(update, instruction), prediction=self.predicted(document, update))
        if result.document is None:
            raise IncompleteProgramError(result)
        return result.document

    def predicted(self, document: str, update: str) -> str | None:
        """The literal merge of the snippet ``update`` into ``document`` (``None`` where it
        cannot be placed): the prediction :meth:`apply` follows."""
        return DocumentView(document, self.adapter, self.granularity).merged(update)

    def run(self, document: str, instruction: str, *,
            force_program: str | Sequence[Op] | None = None, prediction: str | None = None) -> CaDResult:
        """Edit one document and return the full result (see :meth:`run_many`)."""
        return self.run_many([(document, instruction)],
                             force_programs=None if force_program is None else [force_program],
                             predictions=None if prediction is None else [prediction], progress=False)[0]

    async def arun(self, document: str, instruction: str, *,
                   force_program: str | Sequence[Op] | None = None, prediction: str | None = None,
                   on_ops: Callable[[list[Op]], None] | None = None) -> CaDResult:
        """:meth:`run` on an ``AsyncLLM``, as a coroutine. ``on_ops`` is called with the
        ops each request completes (a copy and the gen before it), for a caller that
        streams the document as it grows (``DocumentView.writer``)."""
        if not isinstance(self.engine, AsyncLLM):
            raise EngineSetupError("arun needs an AsyncLLM engine; use run() with an LLM")
        return await self._adrive(EditSession(self, document, instruction, force_program, prediction, on_ops))

    def run_many(self, edits: Sequence[tuple[str, str]], *,
                 force_programs: Sequence[str | Sequence[Op] | None] | None = None,
                 predictions: Sequence[str | None] | None = None,
                 progress: bool = True, return_exceptions: bool = False) -> list[Any]:
        """Run all ``(document, instruction)`` edits concurrently on the engine.

        Parameters
        ----------
        edits
            The documents and what to change in each.
        force_programs
            One program (text, ops or ``None``) per edit to drive it with instead of
            choosing tokens: teacher forcing through the real engine, for benchmarks and
            tests. A forced program the document's constraint rejects raises
            :class:`~cad_outlines.decoding.generator.ForcedProgramError`.
        predictions
            One predicted edited document (or ``None``) per edit, e.g. a snippet's literal
            merge (``DocumentView.merged``): its oracle program is a prior the model
            overrules only where it gives the prediction's token less than
            ``follow_prediction`` (line programs).
        progress
            Show a progress bar of finished edits.
        return_exceptions
            As for :func:`asyncio.gather`: a complete program whose copies do not resolve
            (:class:`~cad_outlines.errors.ResolveError`) takes its edit's place in the list
            instead of being raised, so the other edits keep their results.

        Returns
        -------
        list[CaDResult]
            In the order of ``edits``; an incomplete program has ``document`` None.
        """
        return self._drive(self._sessions(edits, force_programs, predictions), progress, return_exceptions)

    async def arun_many(self, edits: Sequence[tuple[str, str]], *,
                        force_programs: Sequence[str | Sequence[Op] | None] | None = None,
                        predictions: Sequence[str | None] | None = None,
                        progress: bool = True, return_exceptions: bool = False) -> list[Any]:
        """:meth:`run_many` on an ``AsyncLLM``, as a coroutine (inside a running event loop)."""
        if not isinstance(self.engine, AsyncLLM):
            raise EngineSetupError("arun_many needs an AsyncLLM engine; use run_many with an LLM")
        return await self._adrive_all(self._sessions(edits, force_programs, predictions), progress,
                                      return_exceptions)

    def _sessions(self, edits: Sequence[tuple[str, str]],
                  force_programs: Sequence[str | Sequence[Op] | None] | None,
                  predictions: Sequence[str | None] | None = None) -> list["EditSession"]:
        forced = _per_edit(force_programs, edits, "forced programs")
        predicted = _per_edit(predictions, edits, "predictions")
        sessions = []
        for number, ((doc, instruction), force, prediction) in enumerate(zip(edits, forced, predicted)):
            try:
                sessions.append(EditSession(self, doc, instruction, force, prediction))
            except ContextLengthError as err:  # before any request: say which edit
                err.edit = number
                raise
        return sessions

    def regenerate_many(self, edits: Sequence[tuple[str, str]], *,
                        targets: Sequence[str | None] | None = None,
                        progress: bool = True, layout: Literal["plain", "program"] = "plain") -> list[CaDResult]:
        """The baseline: the same prompts, the whole edited document typed token by token.

        One unconstrained request per edit, ending at end-of-sequence (or
        ``max_new_tokens``), as :meth:`CaDGenerator.regenerate
        <cad_outlines.decoding.generator.CaDGenerator.regenerate>` on transformers.

        Parameters
        ----------
        edits
            The documents and instructions.
        targets
            One text per edit (or ``None``) to teacher-force instead of choosing tokens,
            e.g. the gold document; ``result.document`` is then the regenerated text.
        progress
            Show a progress bar of finished edits.
        layout
            ``"plain"`` (the default, as on transformers): the instruction and the file as it
            is (``Adapter.plain_prompt_ids``); ``"program"``: the prompt :meth:`run_many` uses.
        """
        check_layout(layout)
        forced = _per_edit(targets, edits, "targets")
        return self._drive([RegenSession(self, doc, instruction, target, layout)
                            for (doc, instruction), target in zip(edits, forced)], progress)

    # -- transports -------------------------------------------------------------------

    def _drive(self, sessions: list["EditSession | RegenSession"], progress: bool,
               return_exceptions: bool = False) -> list[Any]:
        if isinstance(self.engine, AsyncLLM):
            return _run_coroutine(self._adrive_all(sessions, progress, return_exceptions), self.engine)
        self._step_loop(sessions, progress)
        return [_result(session, return_exceptions) for session in sessions]

    def _step_loop(self, sessions: list["EditSession | RegenSession"], progress: bool) -> None:
        """Drive an offline ``LLM``: each session's next request enters as its last ends."""
        engine = self.engine.llm_engine
        live: dict[str, tuple[EditSession | RegenSession, str, float]] = {}  # id -> session, other id, submitted
        open_sessions: set[str] = set()  # resumable requests alive in the engine, running or paused
        first: dict[str, float] = {}
        bar = _progress(len(sessions), progress)

        def submit(session: EditSession | RegenSession) -> None:
            request = session.next_request()
            rid = getattr(session, "rid", None)
            if request is None:
                if rid in open_sessions:  # a paused session waits for input that will not come: free it
                    open_sessions.discard(rid)
                    engine.abort_request([rid], internal=True)
                bar.update(1)
                return
            prompt, params = request
            start = time.perf_counter()
            if session.resumable:
                session.rid = rid = rid or self._request_id()
                open_sessions.add(rid)
                add_session_input(engine, rid, prompt, params)
                live[rid] = (session, rid, start)
                return
            rid = self._request_id()
            assigned = engine.add_request(rid, {"prompt_token_ids": prompt}, params)
            live[rid] = (session, assigned, start)
            live[assigned] = (session, rid, start)

        try:
            for session in sessions:
                submit(session)
            while engine.has_unfinished_requests():
                for output in engine.step():
                    if output.request_id not in live:
                        continue
                    session, other, start = live[output.request_id]
                    now = time.perf_counter()
                    if output.request_id not in first and output.outputs and output.outputs[0].token_ids:
                        first[output.request_id] = now
                        session.stats.first_token_seconds.append(now - start)
                    if not session.take(output):
                        continue
                    session.stats.decode_seconds += now - first.pop(output.request_id, now)
                    live.pop(output.request_id)
                    live.pop(other, None)
                    session.feed(output)
                    submit(session)
        except BaseException:
            # Whatever stopped the loop (a forced program rejected, an interrupt), nothing of
            # it may stay in the engine: a paused session would keep it busy forever.
            engine.abort_request(sorted(set(live) | open_sessions), internal=False)
            raise
        finally:
            bar.close()

    async def _adrive(self, session: "EditSession | RegenSession") -> CaDResult:
        """Drive one session on an ``AsyncLLM``: its requests one after another."""
        await self._adrive_requests(session)
        return session.result()

    async def _adrive_requests(self, session: "EditSession | RegenSession") -> None:
        if session.resumable:
            return await self._adrive_session(session)
        while (request := session.next_request()) is not None:
            prompt, params = request
            start = time.perf_counter()
            final, first = None, None
            async for output in self.engine.generate({"prompt_token_ids": prompt}, params,
                                                      request_id=self._request_id()):
                if first is None:
                    first = time.perf_counter()
                    session.stats.first_token_seconds.append(first - start)
                final = output
            session.stats.decode_seconds += time.perf_counter() - (first or start)
            session.feed(final)

    async def _adrive_session(self, session: "EditSession") -> None:
        """One edit as one streaming-input request: each span is the session's next input."""
        from vllm.engine.protocol import StreamingInput

        request = session.next_request()
        if request is None:
            return
        inputs: asyncio.Queue[tuple[list[int], SamplingParams]] = asyncio.Queue()
        inputs.put_nowait(request)

        async def stream() -> Any:
            while True:
                prompt, params = await inputs.get()
                yield StreamingInput({"prompt_token_ids": prompt}, params)

        start, first = time.perf_counter(), None
        # Closing the generator (the edit is over, or feed raised) aborts the request in vLLM.
        async with contextlib.aclosing(self.engine.generate(stream(), request[1],
                                                            request_id=self._request_id())) as outputs:
            async for output in outputs:
                now = time.perf_counter()
                if first is None and output.outputs and output.outputs[0].token_ids:
                    first = now
                    session.stats.first_token_seconds.append(now - start)
                if not session.take(output):
                    continue
                session.stats.decode_seconds += now - (first or now)
                session.feed(output)
                if (request := session.next_request()) is None:
                    break
                inputs.put_nowait(request)
                start, first = now, None

    async def _adrive_all(self, sessions: list["EditSession | RegenSession"],
                          progress: bool, return_exceptions: bool = False) -> list[Any]:
        bar = _progress(len(sessions), progress)

        async def one(session: EditSession | RegenSession) -> Any:
            await self._adrive_requests(session)
            bar.update(1)
            return _result(session, return_exceptions)

        try:
            return list(await asyncio.gather(*(one(session) for session in sessions)))
        finally:
            bar.close()

    def _request_id(self) -> str:
        return f"cad-{os.getpid()}-{next(self._ids)}"


def edit_many(editor: VLLMEditor, edits: Sequence[tuple[str, str]], *,
              force_programs: Sequence[str | Sequence[Op] | None] | None = None,
              predictions: Sequence[str | None] | None = None,
              progress: bool = True, return_exceptions: bool = False) -> list[Any]:
    """Run ``(document, instruction)`` edits concurrently on ``editor``'s engine.

    All edits share the engine's batches; each edit's continuation request is submitted
    as soon as its previous request finishes. See :meth:`VLLMEditor.run_many`.
    """
    return editor.run_many(edits, force_programs=force_programs, predictions=predictions, progress=progress,
                           return_exceptions=return_exceptions)


async def aedit_many(editor: VLLMEditor, edits: Sequence[tuple[str, str]], *,
                     force_programs: Sequence[str | Sequence[Op] | None] | None = None,
                     predictions: Sequence[str | None] | None = None,
                     progress: bool = True, return_exceptions: bool = False) -> list[Any]:
    """:func:`edit_many` as a coroutine (``AsyncLLM`` engines, inside a running event loop)."""
    if not isinstance(editor.engine, AsyncLLM):
        raise EngineSetupError("aedit_many needs an AsyncLLM engine; use edit_many with an LLM")
    return await editor.arun_many(edits, force_programs=force_programs, predictions=predictions,
                                  progress=progress, return_exceptions=return_exceptions)


def _result(session: "EditSession | RegenSession", return_exceptions: bool) -> Any:
    """The session's result; with ``return_exceptions``, its ResolveError instead of raising it."""
    try:
        return session.result()
    except ResolveError as err:
        if not return_exceptions:
            raise
        return err


def _per_edit(values: Sequence[Any] | None, edits: Sequence[Any], what: str) -> list[Any]:
    if values is None:
        return [None] * len(edits)
    if len(values) != len(edits):
        raise OptionError(f"{len(values)} {what} for {len(edits)} edits")
    return list(values)


def _progress(total: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="edits", unit="edit", disable=not enabled or total <= 1)


def _run_coroutine(coroutine: Any, engine: Any) -> Any:
    """Run ``coroutine`` to the end on ``engine``'s own event loop.

    An ``AsyncLLM`` starts its output handler in the loop of its first request and keeps
    it there, so every later call must run in that same loop (a fresh ``asyncio.run`` per
    call would leave the handler in a closed loop: the second batch of edits would hang).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        loop = _LOOPS.get(engine)
        if loop is None:
            loop = _LOOPS[engine] = asyncio.new_event_loop()
        return loop.run_until_complete(coroutine)
    coroutine.close()
    raise EngineSetupError("inside a running event loop: await aedit_many(...) / editor.arun(...)")


#: The event loop each ``AsyncLLM`` driven synchronously runs in (see :func:`_run_coroutine`).
_LOOPS: "weakref.WeakKeyDictionary[Any, asyncio.AbstractEventLoop]" = weakref.WeakKeyDictionary()
