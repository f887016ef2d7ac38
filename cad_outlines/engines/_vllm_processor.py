"""The program constraint as a vLLM logits processor (runs inside vLLM's engine core).

vLLM owns sampling, so the constraint reaches it as a logits processor: every request
that carries ``extra_args["cad"]`` gets its own :class:`~cad_outlines.decoding.constraint.ProgramConstraint`
(the same matcher, index-order and tag-boundary automata as the transformers loop), and
each step the tokens it disallows are set to ``-inf`` before vLLM samples.

A request is one stretch of a program between two splices. Its constraint starts from
the program tokens of the earlier stretches (``replay``), so the grammar state is the
one the previous request ended in. A request may also carry ``force``, the tokens it
must produce (teacher forcing, checked against the constraint), and a request with
``force`` but no ``upper`` is forced with no constraint (the regeneration baseline).
The arguments are plain data (ints, lists), because vLLM may ship them to an engine
process.

A request of a streaming session (``pause``: the splice keeps one request alive) ends
its stretch itself: once a copy completes, it allows only end-of-sequence, which vLLM
samples and discards while it computes the copy tag's last token; the driver then
appends the copied span to the same request. ``keep_going`` lists the copies whose span
is empty (a document's empty last line): there is nothing to append, so no pause.

A request may carry ``follow`` (an edit with a predicted document, e.g. a snippet's
literal merge): ``plan``, the oracle program of the prediction, ``lines``, the
document's lines, ``floor`` and ``adapter``. Where the program so far is the plan's
beginning, the plan's next token is taken whenever the model gives it at least
``floor`` of the masked distribution, as the transformers loop does
(``LoopSwitches.follow_prediction``): the same prior on both engines.

When the constraint cannot go on (a forced token it rejects, a dead end), the processor
allows only the end-of-sequence token: the request ends and the driver reports it. It
does so too where the model asks for ``</program>`` inside a gen body
(:func:`~cad_outlines.decoding.ending.asked_end`): the driver then ends the program
there, as the transformers loop does (:func:`~cad_outlines.decoding.ending.ended_in_gen`),
and where a gen body repeats itself past anything in ``haystack`` (the document and the
instruction; :mod:`~cad_outlines.decoding.repetition`): the driver then stops the edit,
``stop_reason == "repetition"``.
An exception here would take the whole engine down, not just one request.
"""

from __future__ import annotations

from typing import Any

import torch
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

from ..decoding.compiling import CompiledGrammar, compile_grammar
from ..decoding.constraint import ProgramConstraint
from ..decoding.document import copy_indices
from ..decoding.drafting import Drafter
from ..decoding.ending import asked_end
from ..decoding.repetition import repeating
from ..decoding.sampler import holds
from ..language import program
from ..language.program import Copy, CopyTokens

#: The key of a CaD request's arguments in ``SamplingParams.extra_args``.
EXTRA_KEY = "cad"
_CONSTRAINED = {"upper": int, "granularity": str, "replay": list}
_FOLLOW = {"plan": str, "lines": list, "floor": float, "adapter": str}


class CaDLogitsProcessor(AdapterLogitsProcessor):
    """Applies a program constraint to the vLLM requests that ask for one.

    Install it when building the engine: ``LLM(..., logits_processors=[CaDLogitsProcessor])``
    (:func:`cad_outlines.engines.vllm.load` does). Requests without
    ``extra_args["cad"]`` are left alone.
    """

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool):
        super().__init__(vllm_config, device, is_pin_memory)
        self._tokenizer_path = vllm_config.model_config.tokenizer
        self._tokenizer: Any = None
        self._compiled: dict[tuple[int, str], CompiledGrammar] = {}

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        args = (sampling_params.extra_args or {}).get(EXTRA_KEY)
        if args is None:
            return
        required = {"eos": int, **(_CONSTRAINED if "upper" in args else {"force": list})}
        for key, kind in required.items():
            if not isinstance(args.get(key), kind):
                raise ValueError(f"extra_args[{EXTRA_KEY!r}][{key!r}] must be of type {kind.__name__}, "
                                 f"got {args.get(key)!r}")
        if "upper" in args and args["granularity"] not in ("lines", "tokens"):
            raise ValueError(f"extra_args[{EXTRA_KEY!r}]['granularity'] must be 'lines' or 'tokens'")
        if args.get("haystack") is not None and not isinstance(args["haystack"], str):
            raise ValueError(f"extra_args[{EXTRA_KEY!r}]['haystack'] must be of type str")
        follow = args.get("follow")
        if follow is not None:
            from ..adapters import ADAPTERS

            for key, kind in _FOLLOW.items():
                if not isinstance(follow, dict) or not isinstance(follow.get(key), kind):
                    raise ValueError(f"extra_args[{EXTRA_KEY!r}]['follow'][{key!r}] must be of type {kind.__name__}")
            if follow["adapter"] not in ADAPTERS:
                raise ValueError(f"extra_args[{EXTRA_KEY!r}]['follow']['adapter'] must be one of {', '.join(ADAPTERS)}")

    def is_argmax_invariant(self) -> bool:
        return False  # it masks tokens, so greedy picks can change

    def new_req_logits_processor(self, params: SamplingParams) -> "_RequestConstraint | None":
        args = (params.extra_args or {}).get(EXTRA_KEY)
        if args is None:
            return None
        compiled = self._compile(args["upper"], args["granularity"]) if "upper" in args else None
        follow = None
        if compiled is not None and args.get("follow") is not None:
            from ..adapters import get_adapter

            encode = get_adapter(self._tokenizer_loaded(), args["follow"]["adapter"]).encode
            follow = _Follow(args["follow"], encode)
        return _RequestConstraint(compiled, args, follow)

    def _tokenizer_loaded(self) -> Any:
        if self._tokenizer is None:
            from ..adapters import load_tokenizer

            self._tokenizer = load_tokenizer(self._tokenizer_path)
        return self._tokenizer

    def _compile(self, upper: int, granularity: str) -> CompiledGrammar:
        key = (upper, granularity)
        if key not in self._compiled:
            self._tokenizer_loaded()
            if len(self._compiled) >= 256:  # documents of many sizes: keep the memory bounded
                self._compiled.pop(next(iter(self._compiled)))
            self._compiled[key] = compile_grammar(self._tokenizer, upper, granularity)  # type: ignore[arg-type]
        return self._compiled[key]


class _Follow:
    """A request's prediction: the plan's next token (:meth:`Drafter.plan_ids`), its
    tokens kept while the model takes them, read again where it leaves them."""

    def __init__(self, args: dict[str, Any], encode: Any):
        self.drafter = Drafter(args["lines"], "lines", plan=program.parse(args["plan"]))
        self.floor = float(args["floor"])
        self.encode = encode
        self.queue: list[int] = []

    def taken(self, ids: list[int]) -> None:
        for token in ids:
            if self.queue and self.queue[0] == token:
                self.queue.pop(0)
            else:
                self.queue.clear()

    def planned(self, constraint: ProgramConstraint) -> int | None:
        if not self.queue:
            self.queue = self.drafter.plan_ids(constraint.pending, constraint.ops, self.encode)
        return self.queue[0] if self.queue else None


class _RequestConstraint:
    """One request's constraint: replays the program so far, then masks each step.

    ``force`` (optional) is the token list this request must produce, checked against
    the constraint at every step as the transformers loop checks a forced program.
    ``compiled`` None: no constraint, only ``force``.
    """

    def __init__(self, compiled: CompiledGrammar | None, args: dict[str, Any], follow: _Follow | None = None):
        indices = (copy_indices(compiled.granularity, compiled.upper, args.get("inside", ()))
                   if compiled is not None else None)
        self.constraint = (ProgramConstraint(compiled, indices, monotone=bool(args.get("monotone")))
                           if compiled is not None else None)
        self.eos = args["eos"]
        self.force: list[int] | None = args.get("force")
        self.seen = 0
        self.failed = False
        self.pause = bool(args.get("pause"))
        self.ends = not args.get("keep_program_close")  # the document holds </program> as text
        self.haystack: str | None = args.get("haystack")  # the repetition guard's text (absent: off)
        self.keep_going = {tuple(pair) for pair in args.get("keep_going", ())}
        self.paused = False
        self.follow = follow
        if self.constraint is not None:
            try:
                self.constraint.advance(args["replay"])
            except ValueError:
                self.failed = True

    def __call__(self, output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        constraint = self.constraint
        if constraint is not None and not self.failed and len(output_ids) > self.seen:
            try:
                ops = constraint.advance(output_ids[self.seen:])
                if self.follow is not None:
                    self.follow.taken(output_ids[self.seen:])
            except ValueError:
                self.failed = True
            else:
                self.paused = self.paused or (self.pause and any(
                    isinstance(op, (Copy, CopyTokens)) and (op.start, op.end) not in self.keep_going for op in ops))
            self.seen = len(output_ids)
        if self.failed or self.paused or (constraint is not None and constraint.done):
            return self._only_eos(logits)
        if self.haystack is not None and self._repeating():
            self.failed = True  # the driver reads the loop off its own text: stop_reason "repetition"
            return self._only_eos(logits)
        allowed = constraint.allowed(logits.shape[-1]) if constraint is not None else None
        if self.force is not None:
            step = len(output_ids)
            token = self.force[step] if step < len(self.force) else None
            if token is None or (allowed is not None and not bool(allowed[token])):
                self.failed = True
                return self._only_eos(logits)
            return self._only(logits, token)
        if allowed is None:
            return logits
        if not bool(allowed.any()):
            self.failed = True
            return self._only_eos(logits)
        allowed = allowed.to(logits.device)
        try:
            asked = self.ends and asked_end(constraint, logits, allowed, constraint.compiled.granularity == "lines")
        except Exception:  # noqa: BLE001 - a check that fails must not take the engine down
            asked = None
        if asked:
            self.failed = True  # the driver ends the program where the model asked for it
            return self._only_eos(logits)
        if self.follow is not None:
            try:
                planned = self.follow.planned(constraint)
                if planned is not None and holds(logits, allowed, planned, self.follow.floor):
                    return self._only(logits, planned)  # the prediction's token, which the model does not overrule
            except Exception:  # noqa: BLE001 - a prior that fails must not take the engine down
                self.follow = None  # the model alone from here, as where the program leaves the plan
        return logits.masked_fill_(~allowed, float("-inf"))

    def _repeating(self) -> bool:
        try:
            return repeating(self.constraint, self.haystack) is not None
        except Exception:  # noqa: BLE001 - a check that fails must not take the engine down
            self.haystack = None
            return False

    @staticmethod
    def _only(logits: torch.Tensor, token: int) -> torch.Tensor:
        keep = logits[token].clone()
        logits.fill_(float("-inf"))
        logits[token] = keep
        return logits

    def _only_eos(self, logits: torch.Tensor) -> torch.Tensor:
        logits.fill_(float("-inf"))
        logits[self.eos] = 0.0
        return logits
