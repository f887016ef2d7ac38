"""``CaDGenerator``: grammar-constrained editing with one-forward copy splices.

The one decode loop (:meth:`CaDGenerator._decode`) reads top to bottom::

    prefill the prompt (+ a draft)
    repeat until </program>:
        mask    the constraint's allowed set        (ProgramConstraint.allowed)
        choose  argmax / sample / the forced program's next token (the model asking
                for </program> inside a gen ends the program there: .ending; a gen
                repeating itself stops the run: .repetition)
        advance the grammar with it; take the grammar-forced run after it
        splice  the adapter's ids of every copy op that just completed
        verify  the leading tokens a draft already put in the cache are kept; the
                rest of the draft is cropped at the first mismatch
        step    ONE forward over [chosen, forced run, spliced span, ...] + a new draft,
                unless everything was in the draft (then its logits serve the next step)

Teacher forcing (``force_program``), unconstrained regeneration, ``splice=False``,
``fast_forward=False`` and ``draft_tags=False`` are branches of this loop, not copies of
it. The constraint only ever sees program tokens; spliced and drafted tokens enter the KV
cache alone (a drafted token reaches the grammar only once it is chosen).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from functools import cached_property
from typing import Any, Generator, Iterator, Literal, Sequence

import torch
from outlines.generator import SteerableGenerator

from ..language import program, syntax
from ..adapters import Adapter, get_adapter
from .alpha import AlphaTrace
from .compiling import CompiledGrammar, compile_grammar, tokenizer_setup_seconds
from .constraint import LoopConstraint, ProgramConstraint, Unconstrained
from .document import DocumentView
from .drafting import DraftBudget, Drafter, forward_clock
from .ending import asked_end, end_program
from .repetition import GenGuard, retypable
from .defaults import DEFAULT_MAX_NEW_TOKENS, check_budget, check_layout, check_request
from .forcing import ForcedText, forced_rejected
from .options import Instrumentation, LoopSwitches
from ..errors import CaDError
from ..language.grammar import Granularity, load_grammar, specialize
from ..language.program import Op
from .prompts import Prompt, PromptTemplate, as_messages, style_for, update_prompt
from .runner import ObservedRunner, Runner, TransformersRunner
from .sampler import SAMPLING_OPTIONS, Sampler, SamplingOptions, holds
from .streaming import drain, each_step
from .tree import DraftTree, PendingDraft, branch_indices, is_chain
# Re-exported: the result types and the loop's errors live in .results.
from .results import (CaDResult, CaDStats, ContextLengthError, ForcedProgramError,  # noqa: F401
                      IncompleteProgramError, ProgressCallback, UnsupportedModelError, check_model,
                      context_limit)


#: The longest draft appended to one forward (``<program><copy lines="1-1234`` is 13
#: Qwen tokens).
MAX_DRAFT_TOKENS = 16
#: The longest draft of a predicted program (:meth:`CaDGenerator.run`'s ``prediction``):
#: its gens are drafted whole when they fit.
MAX_PLAN_DRAFT_TOKENS = 64


#: Options every call accepts (``editor(prompt, temperature=0.7)``); the constructor's
#: values are the defaults.
CALL_OPTIONS: tuple[str, ...] = ("max_new_tokens", *SAMPLING_OPTIONS)


class CaDGenerator(SteerableGenerator):
    """Edit one document with Copy-as-Decode programs.

    Called like an Outlines generator: ``editor(prompt, **options)``,
    ``editor.stream(prompt, **options)``, ``editor.batch(prompts, **options)``, where
    ``prompt`` is an instruction, an ``outlines.inputs.Chat`` or a list of message dicts
    ending with the user's instruction (:mod:`.prompts`), and ``options`` are any of
    :data:`CALL_OPTIONS`, overriding the constructor's values for that call only.
    :func:`cad_outlines.generate.cad` builds one from flat keywords
    (``cad(model, doc, temperature=0.2, splice=False)``).

    Parameters
    ----------
    model
        An Outlines transformers model: ``outlines.from_transformers(hf_model, hf_tok)``
        (a bare tokenizer with a runner of its own: :meth:`for_tokenizer`).
    document
        The text to edit.
    granularity
        ``"lines"`` (``<copy lines="i-j"/>``) or ``"tokens"`` (``<copy tokens="a-b"/>``).
    max_new_tokens
        Budget of program tokens (decoded + forced; spliced tokens are free).
    sampling
        :class:`~.sampler.SamplingOptions`, every call's defaults (``temperature=0``: greedy).
    loop
        :class:`~.options.LoopSwitches`: splices, forced runs, drafts and their cost curve,
        the guards (``monotone_copies``, ``max_gen_tokens``, ``repetition_guard``), logits processors.
    mode
        Resolver mode, ``"strict"`` or ``"clipped"``.
    adapter
        Adapter name or instance overriding auto-detection.
    prompt_template
        Jinja layout of the instruction message (:class:`~.prompts.PromptTemplate`);
        ``None``: the layout of ``prompt_style``.
    prompt_style
        ``"full"`` or ``"compact"`` (instruction last); ``None``: the model's own
        (:func:`~.prompts.trained_style`).
    instrumentation
        :class:`~.options.Instrumentation`: the runner (the model side), a phase
        ``observer``, ``trace_alpha``.

    Raises
    ------
    UnsupportedModelError
        For any model but an Outlines transformers model (``None`` included).

    Examples
    --------
    >>> gen = CaDGenerator(model, document)                     # doctest: +SKIP
    >>> new_text = gen("rename foo to bar", temperature=0.7)    # doctest: +SKIP
    >>> result = gen.run("rename foo to bar"); result.stats     # doctest: +SKIP
    """

    def __init__(self, model: Any, document: str, *, granularity: Granularity = "lines",
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, sampling: SamplingOptions | None = None,
                 loop: LoopSwitches | None = None, mode: Literal["strict", "clipped"] = "strict",
                 adapter: str | Adapter | None = None, prompt_template: str | PromptTemplate | None = None,
                 prompt_style: str | None = None, instrumentation: Instrumentation | None = None):
        bare = isinstance(model, _TokenizerOnly)
        if model is None:
            raise UnsupportedModelError(
                "CaDGenerator needs an Outlines transformers model (outlines.from_transformers(hf_model, "
                "hf_tokenizer)); to run the loop on a bare tokenizer and a runner of your own, use "
                "CaDGenerator.for_tokenizer(tokenizer, document, runner)")
        if not bare:
            check_model(model)
        hf_tokenizer = model.hf_tokenizer
        check_request(granularity, mode)
        self.model, self.hf_model = (None, None) if bare else (model, model.model)
        self.document, self.granularity, self.max_new_tokens, self.mode = document, granularity, max_new_tokens, mode
        #: The sampling defaults of every call; how the loop computes; its hooks (one object each).
        self.sampling = sampling if sampling is not None else SamplingOptions()
        self.loop = loop if loop is not None else LoopSwitches()
        self.instrumentation = instrumentation if instrumentation is not None else Instrumentation()
        self._call_options({})  # check the budget now, not at the first call
        self.prompt_template = (prompt_template if prompt_template is None or isinstance(prompt_template, PromptTemplate)
                                else PromptTemplate(prompt_template))
        self.prompt_style = style_for(prompt_style, self.hf_model, granularity)
        if isinstance(adapter, Adapter):
            adapter.check_tokenizer(hf_tokenizer)
            self.adapter = adapter
        else:
            self.adapter = get_adapter(hf_tokenizer, adapter)
        #: The document's copy units, copy bounds, spliced ids and resolve call.
        self.view = DocumentView(document, self.adapter, granularity)
        self.compiled: CompiledGrammar = compile_grammar(hf_tokenizer if bare else model,
                                                         self.view.upper, granularity)
        #: The model side of the loop (:mod:`.runner`); benchmarks pass an observed one.
        self.runner: Runner = (self.instrumentation.runner if self.instrumentation.runner is not None
                               else TransformersRunner(self.hf_model))

    @classmethod
    def for_tokenizer(cls, tokenizer: Any, document: str, runner: Runner, **options: Any) -> "CaDGenerator":
        """The loop on a Hugging Face ``tokenizer`` and ``runner`` (the model side), no
        Outlines model: the SFT row builder records the loop's forwards this way.
        ``options`` are the constructor's keywords (an ``instrumentation`` keeps its
        observer and ``trace_alpha``; its runner is ``runner``)."""
        instrumentation = options.pop("instrumentation", None) or Instrumentation()
        return cls(_TokenizerOnly(tokenizer), document, **options,
                   instrumentation=dataclasses.replace(instrumentation, runner=runner))

    @classmethod
    def from_processor(cls, model: Any, processor: Any) -> "CaDGenerator":  # type: ignore[override]
        """Not available (``NotImplementedError``): the constraint is built from the
        document; use ``CaDGenerator(model, document)`` or ``generate.cad(model, document)``."""
        raise NotImplementedError(
            "CaDGenerator builds its constraint from the document it edits (the program grammar "
            "specialised to its length), so it cannot take a logits processor; use "
            "CaDGenerator(model, document) or cad_outlines.generate.cad(model, document)")

    @property
    def output_type(self) -> Any:
        """The program language, as an Outlines ``CFG``.

        ``outlines.Generator(model, editor.output_type)`` decodes the same language with
        Outlines' stock path (no splices, one token per forward): the comparison baseline.
        """
        from outlines.types import CFG

        return CFG(specialize(load_grammar(self.granularity), self.view.upper, self.granularity))

    # -- public API -----------------------------------------------------------------

    def __call__(self, prompt: Prompt, **options: Any) -> str:  # type: ignore[override]
        """Return the edited document; raise :class:`IncompleteProgramError` if unfinished.

        Parameters
        ----------
        prompt
            An instruction, an ``outlines.inputs.Chat`` or a list of message dicts.
        **options
            Any of :data:`CALL_OPTIONS`, for this call only.
        """
        result = self.run(prompt, **options)
        if result.document is None:
            raise IncompleteProgramError(result)
        return result.document

    def apply(self, update: str, *, instruction: str | None = None, **options: Any) -> str:
        """Merge the lazy edit snippet ``update`` into the document; return the edited document.

        ``update`` holds the changed region with some unchanged lines around it, other
        unchanged regions elided by marker lines in the file's comment syntax
        (``// ... existing code ...``); ``instruction`` optionally says more. The snippet
        becomes the instruction (:func:`~.prompts.update_prompt`), and the snippet's
        literal merge (:func:`~cad_outlines.language.snippets.merge`) is the run's
        ``prediction``: its program is drafted, the model keeps or leaves it. Raises as
        ``self(prompt)`` does.
        """
        result = self.run(update_prompt(update, instruction), prediction=self.predicted(update), **options)
        if result.document is None:
            raise IncompleteProgramError(result)
        return result.document

    def predicted(self, update: str) -> str | None:
        """The literal merge of the snippet ``update`` into the document (``None`` where
        it cannot be placed): the ``prediction`` :meth:`apply` drafts from."""
        return self.view.merged(update)

    def batch(self, prompts: Sequence[Prompt], **options: Any) -> list[str]:  # type: ignore[override]
        """Edit the document once per prompt (sequentially), with the same ``options``.

        Each prefill after the first reuses the KV of the prefix its prompt shares with the
        previous one (``TransformersRunner.reusing``): the chat header, and with the
        ``compact`` style the format statement and the document too. Raises at the first
        prompt that fails (e.g. :class:`IncompleteProgramError`); the documents finished
        before it are the error's ``completed`` list, in prompt order.
        """
        self._call_options(options)  # reject a bad option before the first decode
        done: list[str] = []
        with getattr(self.runner, "reusing", contextlib.nullcontext)():
            for prompt in prompts:
                try:
                    done.append(self(prompt, **options))
                except CaDError as err:
                    err.completed = done  # type: ignore[attr-defined]
                    raise
        return done

    def run(self, prompt: Prompt, *, force_program: str | Sequence[Op] | None = None,
            progress: ProgressCallback | None = None, prediction: str | None = None,
            **options: Any) -> CaDResult:
        """Run the decode loop and return the full :class:`CaDResult`.

        Parameters
        ----------
        prompt
            What to change: an instruction, an ``outlines.inputs.Chat`` or a list of
            message dicts ending with the user's instruction.
        force_program
            Drive the loop with this program (text or ops) instead of choosing tokens:
            teacher forcing through the real forward passes, for benchmarks and tests.
        progress
            Called with the live :class:`CaDStats` before the prompt prefill
            (``forward_passes == 0``) and after each step of the loop; for progress
            displays. It must not modify the stats.
        prediction
            The edited document the caller expects (the literal merge of an update
            snippet, a client's predicted output): while the program follows the one that
            writes it, that program is drafted and verified by the model's own choices, so
            a right prediction saves forwards; the output is the model's, as without it.
        **options
            Any of :data:`CALL_OPTIONS`, for this call only.
        """
        return drain(self._decode(prompt, force_program, self._call_options(options), progress=progress,
                                  prediction=prediction))

    def regenerate(self, prompt: Prompt, *, target: str | None = None,
                   progress: ProgressCallback | None = None,
                   layout: Literal["plain", "program"] = "plain", **options: Any) -> CaDResult:
        """The baseline: the same decode loop with no constraint, one token per forward.

        Parameters
        ----------
        prompt
            What to change: an instruction or a conversation, as for :meth:`run`.
        layout
            ``"plain"`` (the default): the prompt a user of plain generation sends, the
            instruction and the file as it is (``Adapter.plain_prompt``: no format
            statement, no line numbers); ``"program"``: the same prompt as :meth:`run`.
        target
            Teacher-force this text (e.g. the gold document) instead of choosing tokens;
            ``result.document`` is then the regenerated text.
        progress
            As in :meth:`run`.
        **options
            Any of :data:`CALL_OPTIONS`, for this call only.
        """
        check_layout(layout)
        return drain(self._decode(prompt, target, self._call_options(options), constrained=False,
                                  progress=progress, plain_prompt=layout == "plain"))

    def stream(self, prompt: Prompt, *, force_program: str | Sequence[Op] | None = None,  # type: ignore[override]
               progress: ProgressCallback | None = None, prediction: str | None = None,
               **options: Any) -> Generator[str, None, CaDResult]:
        """Yield the edited document as it grows.

        Gen text arrives token by token (what no later token can change; see
        :mod:`.streaming`), each copy as one chunk when its tag closes. The chunks
        concatenate to ``self(prompt, **options)``. Raises
        :class:`IncompleteProgramError` at the end if the budget ran out. ``progress`` is
        called as in :meth:`run` (an exception it raises stops the decode at that step),
        and the generator's return value (``StopIteration.value``) is the :class:`CaDResult`;
        ``prediction`` as in :meth:`run`.
        """
        return self._stream_text(prompt, force_program, self._call_options(options), progress, prediction)

    def stream_ops(self, prompt: Prompt, *, force_program: str | Sequence[Op] | None = None,
                   **options: Any) -> Iterator[Op]:
        """Yield each op of the program as it completes (then raise like :meth:`stream`)."""
        return self._stream_ops(prompt, force_program, self._call_options(options))

    # -- call plumbing ----------------------------------------------------------------

    def _call_options(self, overrides: dict[str, Any]) -> tuple[int, SamplingOptions]:
        """The budget and sampling options of one call: the defaults, then ``overrides``."""
        unknown = sorted(set(overrides) - set(CALL_OPTIONS))
        if unknown:
            raise TypeError(f"{type(self).__name__}: unknown option(s) {', '.join(map(repr, unknown))}; "
                            f"the options are {', '.join(CALL_OPTIONS)}")
        budget = check_budget(overrides.get("max_new_tokens", self.max_new_tokens))
        sampling = {name: overrides[name] for name in SAMPLING_OPTIONS if name in overrides}
        return budget, dataclasses.replace(self.sampling, **sampling) if sampling else self.sampling

    def _stream_text(self, prompt: Prompt, force_program: str | Sequence[Op] | None,
                     options: tuple[int, SamplingOptions], progress: ProgressCallback | None = None,
                     prediction: str | None = None) -> Generator[str, None, CaDResult]:
        writer = self.view.writer()

        def chunks(ops: list[Op], constraint: Any) -> list[str]:
            chunk = writer.feed(ops, constraint.pending)
            return [chunk] if chunk else []

        result = yield from each_step(self._decode(prompt, force_program, options, progress=progress,
                                                   prediction=prediction), chunks)
        if result.document is None:
            raise IncompleteProgramError(result)
        tail = writer.close()
        if tail:
            yield tail
        return result

    def _stream_ops(self, prompt: Prompt, force_program: str | Sequence[Op] | None,
                    options: tuple[int, SamplingOptions]) -> Iterator[Op]:
        result = yield from each_step(self._decode(prompt, force_program, options), lambda ops, _: ops)
        if result.document is None:
            raise IncompleteProgramError(result)

    def _prompt_ids(self, prompt: Prompt, plain: bool = False) -> list[int]:
        messages = as_messages(prompt)  # checked at the door: an empty instruction is refused
        instruction = prompt if isinstance(prompt, str) else messages
        if plain:
            return self.adapter.plain_prompt_ids(self.view.text, instruction, self.prompt_style)
        return self.adapter.prompt_ids(self.view.text, instruction, self.granularity, self.prompt_template,
                                       self.prompt_style)

    # -- the decode loop ------------------------------------------------------------

    def _decode(self, prompt: Prompt, force_program: str | Sequence[Op] | None,
                options: tuple[int, SamplingOptions], *, constrained: bool = True,
                progress: ProgressCallback | None = None, plain_prompt: bool = False,
                prediction: str | None = None,
                ) -> Generator[tuple[list[Op], LoopConstraint], None, CaDResult]:
        """THE loop. Yields, after every advance of the constraint, the ops it completed
        and the constraint (whose ``pending`` text is the op being written); returns the
        :class:`CaDResult` (the ``StopIteration`` value, what ``yield from`` evaluates to)."""
        start_time = time.perf_counter()
        mark = self.instrumentation.observer or (lambda phase: None)
        max_new_tokens, sampling = options
        stats = CaDStats(compile_seconds=self.compiled.compile_seconds,
                         tokenizer_setup_seconds=tokenizer_setup_seconds(self.adapter.tokenizer))
        loop = self.loop.for_model(self.hf_model)  # the switches the model records, resolved
        constraint: LoopConstraint = (
            ProgramConstraint(self.compiled, self.view.indices, loop.monotone_copies,
                              loop.copy_ratio) if constrained
            else Unconstrained(self.compiled, self.adapter.eos_token_id))
        forced = None
        if force_program is not None:
            text = force_program if isinstance(force_program, str) else program.render(force_program)
            forced = ForcedText.from_text(self.adapter, text, segmented=constrained)
        trace = AlphaTrace() if self.instrumentation.trace_alpha else None
        guard = (GenGuard(self.loop.max_gen_tokens, retypable(self.view.text, prompt) if self.loop.repetition_guard
                          else None) if constrained and force_program is None else None)
        ends = constrained and force_program is None and not self.view.holds_program_close  # .ending
        sampler = Sampler(sampling, processors=self.loop.logits_processors)

        prompt_ids = self._prompt_ids(prompt, plain_prompt)
        stats.prompt_tokens = len(prompt_ids)
        limit = context_limit(self.runner, len(prompt_ids), self.view)
        # The ids the model has seen (prompt + everything appended), for the repetition
        # penalty, as transformers' generate gives it; kept only when the sampler needs it.
        seen = list(prompt_ids) if sampler.needs_context else None
        cache = self.runner.new_cache()
        draft = None
        if self.loop.draft_tags and constrained:
            budget = DraftBudget(self.loop.forward_cost)  # its curve is calibrated by the run's forwards
            draft = PendingDraft(ObservedRunner(self.runner, budget.observe, forward_clock(self.runner))
                                 if budget.calibrates else self.runner, cache, budget)
        drafter = self._drafter(prediction) if draft is not None else None
        follow = loop.follow_prediction if prediction is not None and draft is not None else None
        proposal = self._propose(constraint, stats, len(prompt_ids), draft, drafter) if draft is not None else DraftTree()
        if progress is not None:
            progress(stats)
        clock = time.perf_counter()
        logits = self._forward_drafted(prompt_ids, proposal, cache, draft)
        stats.prefill_seconds = time.perf_counter() - clock
        stats.prompt_tokens_reused = getattr(self.runner, "reused", 0)
        stats.forward_passes += 1

        while not constraint.done:
            if progress is not None:
                progress(stats)
            if stats.program_tokens >= max_new_tokens:
                stats.stopped_early, stats.stop_reason = True, "max_new_tokens"
                break
            if guard is not None and (reason := guard.stop(constraint)):
                stats.stopped_early, stats.stop_reason = True, reason  # max_gen_tokens, repetition
                break
            # mask
            mark("mask")
            allowed = constraint.allowed(self.runner.vocab_size)
            mark("choose")
            # choose
            if forced is not None:
                token = forced.next()
                if token is None and constraint.accepts_end:
                    constraint.end()  # the forced text is over
                    break
                if token is None or (allowed is not None and not bool(allowed[token])):
                    raise forced_rejected(constraint.text, token)
            elif follow and (planned := self._planned(draft, drafter, constraint)) is not None \
                    and holds(logits, allowed, planned, follow):
                token = planned  # the prediction's token, which the model does not overrule
            else:
                token = sampler.choose_one(logits, allowed, seen)
            ending = asked_end(constraint, logits, allowed, self.granularity == "lines") if ends else None
            if trace is not None:
                trace.record(logits, allowed, token)
            stats.decoded_tokens += 1
            # advance the grammar, then take the forced runs and splices that follow
            mark("advance")
            context = [token]
            if ending is not None:  # </program> asked for inside a gen: the program ends there
                context = end_program(constraint, ending, self.adapter.encode)  # no forward follows
                stats.forced_tokens, stats.ended_in_gen = stats.forced_tokens + len(context) - 1, True
            new_ops = constraint.advance(context)
            in_body = constrained and constraint.in_gen and not constraint.pending.endswith(
                syntax.GEN_CLOSE_PREFIXES)
            in_index = constrained and syntax.COPY_START in constraint.pending
            if forced is not None:
                forced.consume([token], constraint.piece_bytes(token))
            spliced = False
            while True:
                yield new_ops, constraint
                if self.loop.splice and self.view.splice(new_ops, context, stats):
                    spliced = True
                run = constraint.forced() if self.loop.fast_forward and not constraint.done else []
                run = run[:max(0, max_new_tokens - stats.program_tokens)]
                if not run:
                    break
                if forced is not None:
                    forced.consume(run, b"".join(constraint.piece_bytes(t) for t in run))
                context += run
                stats.forced_tokens += len(run)
                new_ops = constraint.advance(run)
            mark("verify")
            if constraint.done:
                break  # nothing reads the logits after </program>
            if seen is not None:
                seen += context
            # verify: what a draft already put in the cache needs no forward
            if draft is not None:
                appended = len(context)
                context, after = draft.verify(context)
                stats.draft_accepted += appended - len(context)
                if not context:
                    logits = after
                    stats.forwards_saved += 1
                    continue
            # step or splice: ONE forward over everything appended (+ a new draft)
            proposal = self._propose(constraint, stats, len(context), draft, drafter) if draft is not None else DraftTree()
            if limit is not None:
                # Past max_position_embeddings the model's positions are untrained: stop,
                # flagged incomplete, rather than return a program decoded from garbage.
                room = limit - (stats.prompt_tokens + stats.program_tokens + stats.copied_tokens)
                if room < 0:
                    stats.stopped_early, stats.stop_reason = True, "context"
                    break
                proposal = proposal.cut(room)
            mark("splice" if spliced else "forward")
            logits = self._forward_drafted(context, proposal, cache, draft)
            mark("step")
            stats.forward_passes += 1
            stats.body_forwards += in_body
            stats.splice_forwards += spliced
            stats.index_forwards += in_index and not spliced

        mark("end")
        if draft is not None:
            draft.discard()  # the cache ends with the program, never with a guess
        complete = constraint.done
        if not constrained:
            document = self.view.restore(constraint.text) if complete else None
        elif complete:
            document = self.view.resolve(constraint.ops, self.mode)
        else:
            document = None
        stats.total_seconds = time.perf_counter() - start_time
        return CaDResult(document, constraint.text, list(constraint.ops), complete, stats, trace)

    # -- pieces of the loop ----------------------------------------------------------

    def _forward_drafted(self, context: Sequence[int], proposal: DraftTree, cache: Any,
                         draft: PendingDraft | None) -> torch.Tensor:
        """ONE forward over ``context`` + the draft ``proposal``; the logits after ``context``.

        The drafted tokens and the logits after each of them go to ``draft``.
        """
        runner = self.runner if draft is None else draft.runner  # the draft's may be observed
        if draft is not None:
            draft.trim()  # a forward starts with no unverified draft
        if not len(proposal):
            return runner.forward(context, cache)
        assert draft is not None and not len(draft), "a forward starts with no unverified draft"
        if is_chain(proposal.parents):
            rows = runner.forward(list(context) + proposal.ids, cache, rows=len(proposal) + 1)
        else:
            rows = runner.forward_tree(context, proposal.ids, proposal.parents, cache)  # type: ignore[attr-defined]
        draft.add(proposal, list(rows[1:]))
        return rows[0]

    @cached_property
    def drafter(self) -> Drafter:
        """The document's drafter, built on first use (never when drafts are off)."""
        if self.granularity == "lines":
            return Drafter(self.view.lines, "lines", lookup=self.loop.draft_lookup)
        return Drafter([self.adapter.decode([t]) for t in self.view.doc_ids], "tokens", lookup=self.loop.draft_lookup)

    def _drafter(self, prediction: str | None) -> Drafter:
        """The run's drafter: the document's, or one that follows the program writing
        ``prediction`` (its oracle program; line programs only)."""
        if prediction is None or self.granularity != "lines":
            return self.drafter
        from ..language.oracle import oracle_program

        return Drafter(self.view.lines, "lines", lookup=self.loop.draft_lookup,
                       plan=oracle_program(self.view.text, self.view.read_form(prediction)))

    def _planned(self, draft: PendingDraft, drafter: Drafter, constraint: ProgramConstraint) -> int | None:
        """The prediction's next token: the pending draft's first, or (a draft used up)
        the first of what the plan says next, the close of a planned copy's tag included;
        ``None`` once the program left the plan."""
        if len(draft) and not drafter.plan_closes(constraint.pending, constraint.ops):
            return draft.next_id() if draft.kind == "plan" else None  # digits may be drafted beside a close
        ids = drafter.plan_ids(constraint.pending, constraint.ops, self.adapter.encode)
        return ids[0] if ids else None

    def _propose(self, constraint: ProgramConstraint, stats: CaDStats, width: int,
                 draft: PendingDraft, drafter: Drafter) -> DraftTree:
        """``drafter``'s guess of what follows, cut where the grammar rejects it and where
        the rest would not pay for the width it adds to a forward of ``width``; with
        digit alternatives (:func:`.tree.branch_indices`) where the runner takes trees."""
        clock = time.perf_counter()
        text = drafter.predict(constraint.pending, constraint.ops)
        kind = drafter.kind
        cap = MAX_PLAN_DRAFT_TOKENS if kind == "plan" else MAX_DRAFT_TOKENS
        ids = self.adapter.encode(text)[:cap] if text else []
        ids = ids[:constraint.validate(ids)]
        tree = DraftTree.chain(ids[:draft.budget.length(kind, len(ids), width)], kind)
        if self.loop.draft_trees and getattr(draft.runner, "trees", False):
            branch_indices(tree, constraint.pending, lambda t: constraint.piece_bytes(t).decode("latin-1"),
                           constraint.validate, self.compiled.table.digits, self.view.indices.hi,
                           lambda size: draft.budget.fan_pays(size, width + len(tree)))
        stats.draft_tokens += len(tree)
        stats.draft_alternatives += sum(tree.alternative)
        stats.draft_seconds += time.perf_counter() - clock
        return tree


class _TokenizerOnly:
    """The model argument :meth:`CaDGenerator.for_tokenizer` passes: a tokenizer, no model."""

    def __init__(self, tokenizer: Any):
        self.hf_tokenizer = tokenizer
