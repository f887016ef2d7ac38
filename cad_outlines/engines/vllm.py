"""Copy-as-Decode on vLLM: a splice is a prefix-cached continuation request.

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
(and the last, partial block) is prefilled.

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
import itertools
import os
import time
from typing import Any, Literal, Sequence

from ..errors import MissingDependencyError

try:
    from vllm import LLM, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM
except ImportError as err:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "cad_outlines.engines.vllm needs vLLM; install it with "
        "`pip install 'cad-outlines[vllm]'` (CPU: see scripts/vllm_venv.sh)") from err

from ..language import program, syntax
from ..adapters import Adapter, get_adapter, load_tokenizer
from ..decoding.compiling import compile_grammar
from ..decoding.constraint import ProgramConstraint
from ..decoding.document import DocumentView
from ..decoding.prompts import style_for
from ..decoding.sampler import OptionError, SamplingOptions
from ..decoding.defaults import DEFAULT_MAX_NEW_TOKENS, check_budget, check_layout, check_request
from ..decoding.forcing import forced_ids, forced_rejected
from ..decoding.results import CaDResult, IncompleteProgramError
from ..language.grammar import Granularity
from ..language.program import Op
from ._vllm_processor import EXTRA_KEY, CaDLogitsProcessor
from ..errors import EngineSetupError, ResolveError
from ._vllm_stats import VLLMStats

__all__ = ["CaDLogitsProcessor", "EngineSetupError", "VLLMEditor", "VLLMStats", "aedit_many",
           "edit_many", "load"]

#: What ends one request: a copy tag's close (a splice follows) or the program's end.
STOP_STRINGS = [syntax.COPY_CLOSE, syntax.PROGRAM_CLOSE]


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

    Raises
    ------
    EngineSetupError
        If ``engine`` is not a vLLM engine or lacks :class:`CaDLogitsProcessor`.
    """

    def __init__(self, engine: Any, *, granularity: Granularity = "lines",
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, temperature: float = 0.0, top_p: float = 1.0,
                 seed: int | None = None, mode: Literal["strict", "clipped"] = "strict",
                 adapter: str | Adapter | None = None, prompt_style: str | None = None, **sampling: Any):
        # The loop's checks and messages (granularity, mode, budget, sampling); then refuse what this driver cannot honour (the
        # transformers loop applies these after the mask; here vLLM's sampler would not).
        check_request(granularity, mode)
        check_budget(max_new_tokens)
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
        self.prompt_style = style_for(prompt_style, engine.model_config.hf_config, granularity)
        self._ids = itertools.count()

    # -- public API -------------------------------------------------------------------

    def edit(self, document: str, instruction: str) -> str:
        """Return the edited document; raise :class:`IncompleteProgramError` if unfinished."""
        result = self.run(document, instruction)
        if result.document is None:
            raise IncompleteProgramError(result)
        return result.document

    def run(self, document: str, instruction: str, *,
            force_program: str | Sequence[Op] | None = None) -> CaDResult:
        """Edit one document and return the full result (see :meth:`run_many`)."""
        return self.run_many([(document, instruction)],
                             force_programs=None if force_program is None else [force_program],
                             progress=False)[0]

    async def arun(self, document: str, instruction: str, *,
                   force_program: str | Sequence[Op] | None = None) -> CaDResult:
        """:meth:`run` on an ``AsyncLLM``, as a coroutine."""
        if not isinstance(self.engine, AsyncLLM):
            raise EngineSetupError("arun needs an AsyncLLM engine; use run() with an LLM")
        return await self._adrive(_Session(self, document, instruction, force_program))

    def run_many(self, edits: Sequence[tuple[str, str]], *,
                 force_programs: Sequence[str | Sequence[Op] | None] | None = None,
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
        return self._drive(self._sessions(edits, force_programs), progress, return_exceptions)

    async def arun_many(self, edits: Sequence[tuple[str, str]], *,
                        force_programs: Sequence[str | Sequence[Op] | None] | None = None,
                        progress: bool = True, return_exceptions: bool = False) -> list[Any]:
        """:meth:`run_many` on an ``AsyncLLM``, as a coroutine (inside a running event loop)."""
        if not isinstance(self.engine, AsyncLLM):
            raise EngineSetupError("arun_many needs an AsyncLLM engine; use run_many with an LLM")
        return await self._adrive_all(self._sessions(edits, force_programs), progress, return_exceptions)

    def _sessions(self, edits: Sequence[tuple[str, str]],
                  force_programs: Sequence[str | Sequence[Op] | None] | None) -> list["_Session"]:
        forced = _per_edit(force_programs, edits, "forced programs")
        return [_Session(self, doc, instruction, force) for (doc, instruction), force in zip(edits, forced)]

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
        return self._drive([_RegenSession(self, doc, instruction, target, layout)
                            for (doc, instruction), target in zip(edits, forced)], progress)

    # -- transports -------------------------------------------------------------------

    def _drive(self, sessions: list["_Session | _RegenSession"], progress: bool,
               return_exceptions: bool = False) -> list[Any]:
        if isinstance(self.engine, AsyncLLM):
            return _run_coroutine(self._adrive_all(sessions, progress, return_exceptions))
        self._step_loop(sessions, progress)
        return [_result(session, return_exceptions) for session in sessions]

    def _step_loop(self, sessions: list["_Session | _RegenSession"], progress: bool) -> None:
        """Drive an offline ``LLM``: each session's next request enters as its last ends."""
        engine = self.engine.llm_engine
        live: dict[str, tuple[_Session | _RegenSession, str, float]] = {}  # id -> session, other id, submitted
        first: dict[str, float] = {}
        bar = _progress(len(sessions), progress)

        def submit(session: _Session | _RegenSession) -> None:
            request = session.next_request()
            if request is None:
                bar.update(1)
                return
            prompt, params = request
            rid = self._request_id()
            start = time.perf_counter()
            assigned = engine.add_request(rid, {"prompt_token_ids": prompt}, params)
            live[rid] = (session, assigned, start)
            live[assigned] = (session, rid, start)

        for session in sessions:
            submit(session)
        try:
            while engine.has_unfinished_requests():
                for output in engine.step():
                    if output.request_id not in live:
                        continue
                    session, other, start = live[output.request_id]
                    now = time.perf_counter()
                    if output.request_id not in first and output.outputs and output.outputs[0].token_ids:
                        first[output.request_id] = now
                        session.stats.first_token_seconds.append(now - start)
                    if not output.finished:
                        continue
                    session.stats.decode_seconds += now - first.pop(output.request_id, now)
                    live.pop(output.request_id)
                    live.pop(other, None)
                    session.feed(output)
                    submit(session)
        except BaseException:
            engine.abort_request(list(live), internal=False)
            raise
        finally:
            bar.close()

    async def _adrive(self, session: "_Session | _RegenSession") -> CaDResult:
        """Drive one session on an ``AsyncLLM``: its requests one after another."""
        await self._adrive_requests(session)
        return session.result()

    async def _adrive_requests(self, session: "_Session | _RegenSession") -> None:
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

    async def _adrive_all(self, sessions: list["_Session | _RegenSession"],
                          progress: bool, return_exceptions: bool = False) -> list[Any]:
        bar = _progress(len(sessions), progress)

        async def one(session: _Session | _RegenSession) -> Any:
            await self._adrive_requests(session)
            bar.update(1)
            return _result(session, return_exceptions)

        try:
            return list(await asyncio.gather(*(one(session) for session in sessions)))
        finally:
            bar.close()

    def _request_id(self) -> str:
        return f"cad-{os.getpid()}-{next(self._ids)}"


class _Session:
    """One edit's chain of requests: the state that continues from one to the next."""

    def __init__(self, editor: VLLMEditor, document: str, instruction: str,
                 force_program: str | Sequence[Op] | None):
        self.editor = editor
        self.adapter = adapter = editor.adapter
        self.document = document
        self.granularity = editor.granularity
        self.view = DocumentView(document, adapter, self.granularity)
        self.upper = self.view.upper
        # The driver's own copy of the constraint reads the ops and the text; the
        # engine-side copy (in CaDLogitsProcessor) masks.
        self.constraint = ProgramConstraint(
            compile_grammar(adapter.tokenizer, self.upper, self.granularity), self.view.indices)
        prompt = adapter.prompt_ids(document, instruction, self.granularity, style=editor.prompt_style)
        self.context: list[int] = list(prompt)
        self.program_ids: list[int] = []
        self.forced: list[int] | None = None
        if force_program is not None:
            text = force_program if isinstance(force_program, str) else program.render(force_program)
            self.forced = forced_ids(adapter, text)
        self.stats = VLLMStats(prompt_tokens=len(prompt))
        self._start = time.perf_counter()
        self._previous_context = 0  # tokens whose KV the last request computed
        self._over = False

    def next_request(self) -> tuple[list[int], SamplingParams] | None:
        """The next request's prompt ids and parameters; ``None`` when the edit is over."""
        if self._over or self.constraint.done:
            return self._finish()
        budget = self.editor.max_new_tokens - len(self.program_ids)
        if budget <= 0:
            self.stats.stopped_early, self.stats.stop_reason = True, "max_new_tokens"
            return self._finish()
        args: dict[str, Any] = {"upper": self.upper, "granularity": self.granularity,
                                "replay": list(self.program_ids), "eos": self.adapter.eos_token_id}
        if self.view.inside:  # the engine-side constraint keeps token copies whole characters too
            args["inside"] = self.view.inside
        if self.forced is not None:
            args["force"] = self.forced[len(self.program_ids):]
        editor = self.editor
        sampling = editor.sampling
        seed = None if sampling.seed is None else sampling.seed + self.stats.requests
        params = SamplingParams(
            max_tokens=budget, temperature=sampling.temperature, top_p=sampling.top_p, seed=seed,
            stop=STOP_STRINGS, include_stop_str_in_output=True,
            stop_token_ids=[self.adapter.eos_token_id], extra_args={EXTRA_KEY: args})
        return list(self.context), params

    def feed(self, output: Any) -> None:
        """Take a finished request's output: advance the program, splice completed copies."""
        stats = self.stats
        cached = output.num_cached_tokens or 0
        prompt_len = len(output.prompt_token_ids) if output.prompt_token_ids is not None else len(self.context)
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
        ids = list(output.outputs[0].token_ids)
        stats.forward_passes += len(ids)
        ended = bool(ids) and ids[-1] == self.adapter.eos_token_id
        if ended:
            ids.pop()
        clock = time.perf_counter()
        new_ops = self.constraint.advance(ids)
        stats.constraint_seconds += time.perf_counter() - clock
        self.program_ids += ids
        self.context += ids
        stats.decoded_tokens += len(ids)
        self._previous_context = len(self.context) - 1  # the last sampled token has no KV yet
        self.view.splice(new_ops, self.context, stats)
        if ended and not self.constraint.done:
            # The processor allowed only end-of-sequence: the constraint could not go on.
            self._over = True
            if self.forced is not None:
                raise forced_rejected(self.constraint.text)

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


class _RegenSession:
    """The regeneration baseline: one unconstrained request per edit (``_Session``'s interface)."""

    def __init__(self, editor: VLLMEditor, document: str, instruction: str, target: str | None,
                 layout: str = "plain"):
        self.editor = editor
        self.adapter = adapter = editor.adapter
        prompt = (adapter.plain_prompt_ids(document, instruction, editor.prompt_style) if layout == "plain" else
                  adapter.prompt_ids(document, instruction, editor.granularity, style=editor.prompt_style))
        self.prompt = prompt
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
        extra = {EXTRA_KEY: {"eos": eos, "force": self.forced}} if self.forced is not None else None
        sampling = editor.sampling
        params = SamplingParams(max_tokens=budget, temperature=sampling.temperature, top_p=sampling.top_p,
                                seed=sampling.seed, stop_token_ids=[eos], extra_args=extra)
        return list(self.prompt), params

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
        stats.stop_reason = "" if self._ended else "max_new_tokens"
        self.text = self.adapter.decode(ids)

    def result(self) -> CaDResult:
        if not self.stats.total_seconds:
            self.stats.total_seconds = time.perf_counter() - self._start
        text = self.text or ""
        return CaDResult(text if self._ended else None, text, [], self._ended, self.stats)


def edit_many(editor: VLLMEditor, edits: Sequence[tuple[str, str]], *,
              force_programs: Sequence[str | Sequence[Op] | None] | None = None,
              progress: bool = True, return_exceptions: bool = False) -> list[Any]:
    """Run ``(document, instruction)`` edits concurrently on ``editor``'s engine.

    All edits share the engine's batches; each edit's continuation request is submitted
    as soon as its previous request finishes. See :meth:`VLLMEditor.run_many`.
    """
    return editor.run_many(edits, force_programs=force_programs, progress=progress,
                           return_exceptions=return_exceptions)


async def aedit_many(editor: VLLMEditor, edits: Sequence[tuple[str, str]], *,
                     force_programs: Sequence[str | Sequence[Op] | None] | None = None,
                     progress: bool = True, return_exceptions: bool = False) -> list[Any]:
    """:func:`edit_many` as a coroutine (``AsyncLLM`` engines, inside a running event loop)."""
    if not isinstance(editor.engine, AsyncLLM):
        raise EngineSetupError("aedit_many needs an AsyncLLM engine; use edit_many with an LLM")
    return await editor.arun_many(edits, force_programs=force_programs, progress=progress,
                                  return_exceptions=return_exceptions)


def _result(session: "_Session | _RegenSession", return_exceptions: bool) -> Any:
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


def _run_coroutine(coroutine: Any) -> Any:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    coroutine.close()
    raise EngineSetupError("inside a running event loop: await aedit_many(...) / editor.arun(...)")
