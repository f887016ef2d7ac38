"""The option objects a :class:`~.generator.CaDGenerator` takes, and the one map from
flat keywords to them.

``CaDGenerator(model, document, sampling=SamplingOptions(...), loop=LoopSwitches(...),
instrumentation=Instrumentation(...))`` is the public form: each object is frozen and
checked when it is built, and the generator holds it as one attribute (``gen.sampling``,
``gen.loop``, ``gen.instrumentation``), so an option is set in one place only. The
one-call entry points (:func:`cad_outlines.generate.cad`, ``edit``, ``apply``) keep flat
keywords (``temperature=0.2, splice=False``) and build the objects with
:func:`group_options`.

:class:`~.sampler.SamplingOptions` (``temperature``, ``top_p``, ``top_k``, ``min_p``,
``repetition_penalty``, ``seed``) lives with the sampler: they are the values every call
may override (``editor(prompt, temperature=0.7)``) and the ones every engine reads.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence

from ..errors import OptionError, OptionTypeError
from .defaults import FROM_MODEL, MODEL_FLOOR, check_floor
from .constraint import COPY_RATIO
from .drafting import ForwardCost
from .sampler import SAMPLING_OPTIONS, SamplingOptions

if TYPE_CHECKING:
    import torch

    from .runner import Runner

__all__ = ["CONSTRUCTOR_OPTIONS", "INSTRUMENTATION_OPTIONS", "Instrumentation", "LOOP_OPTIONS",
           "LoopSwitches", "MODEL_FLOOR", "group_options", "recorded_floor", "recorded_monotone"]


def recorded_floor(hf_model: Any) -> float | None:
    """The ``follow_prediction`` floor recorded with a model: ``cad_apply_floor`` of its
    config (the real-weight loader sets it from its adapter's ``apply.json``), else
    ``None``. ``hf_model``: a transformers model, or its config."""
    return getattr(getattr(hf_model, "config", hf_model), "cad_apply_floor", None)


def recorded_monotone(hf_model: Any) -> bool:
    """Whether a model was trained on monotone programs: ``cad_monotone_copies`` of its
    config (the real-weight loader sets it for an adapter trained in the CaD layout, whose
    targets are oracle programs: every copy starts after the previous one's end), else
    ``False``. ``hf_model``: a transformers model, or its config (vLLM's ``hf_config``)."""
    return bool(getattr(getattr(hf_model, "config", hf_model), "cad_monotone_copies", False))


#: A transformers-style logits processor: ``(input_ids, scores) -> scores``.
LogitsProcessor = Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]


@dataclass(frozen=True)
class LoopSwitches:
    """How the decode loop computes its output: the benchmarks' ablations, the loop's
    guards and the caller's logits processors (defaults as shown).

    Attributes
    ----------
    splice
        Append each copied span to the context in one forward (``False``: copied text
        stays out of the context, format-only mode, which can change the output).
    fast_forward
        Append grammar-forced runs in one forward instead of one step per token.
    draft_tags
        Draft the program text an editor most likely writes next (:mod:`.drafting`) onto
        each forward and verify it on the next steps: an accepted drafted token needs no
        forward of its own. Greedy output is unchanged; sampled output up to float
        rounding (docs/design.md, invariant 2, says how rarely a draw moves).
    draft_trees
        With ``draft_tags``, draft a copy index's digits as alternatives side by side: the
        other digits beside a drafted end index's first digit, or the digits allowed next
        when nothing is drafted (:mod:`.tree`; a tree attention mask, runners with
        ``trees``: :class:`~.runner.TransformersRunner` on eager or SDPA attention). The
        logits after whichever digit is chosen come in the same forward, so the digit
        after it needs no forward of its own. Never changes the output.
    draft_lookup
        With ``draft_tags``, also draft inside gen bodies by prompt lookup: the text that
        follows the body's last characters where they occur in the document (or an
        earlier gen). It changes forward counts, not greedy tokens.
    forward_cost
        The machine's cost of a forward by width (:class:`~.drafting.ForwardCost`): each
        draft is cut to the length that pays for its width. ``None`` keeps drafts whole
        (right on a GPU, where width is nearly free). Never changes the output.
    monotone_copies
        Guard: each copy must start after the previous copy's end (checked in the mask,
        like ``i <= j``), so a model cannot loop on the same lines. Edits that reorder
        lines (a swap) then need a gen for the moved text. ``"model"`` (the default): on
        for a model trained on oracle programs, which are all monotone
        (:func:`recorded_monotone`: the shipped fine-tuned presets), off otherwise, so a
        prompted model may still move lines with copies.
    copy_ratio
        Guard, on by default: a program's copies reproduce at most this many times the
        document's lines (tokens) in all (:data:`~.constraint.COPY_RATIO`: twice). Past
        it the mask caps the copy's end and refuses a new copy tag, so a model looping on
        copies must write a gen or close the program; copies can never fill the context.
        ``None``: no budget.
    max_gen_tokens
        Opt-in guard: a cap on the tokens of one gen body; a body that reaches it stops
        the run (``stats.stopped_early``, ``stats.stop_reason == "max_gen_tokens"``), so a
        model re-typing the document in a gen ends early instead of spending the budget.
    repetition_guard
        Guard, on by default: a gen body that ends in a short unit repeated more than the
        document or the instruction ever repeats it (:mod:`.repetition`) stops the run
        (``stats.stop_reason == "repetition"``), after about a hundred tokens of loop
        instead of at the budget. ``False``: off.
    follow_prediction
        With a ``prediction`` (:meth:`~.generator.CaDGenerator.apply`, the server's
        snippets and predicted outputs): where the predicted program's next token is
        drafted and holds at least this share of the model's masked distribution (softmax
        of its allowed logits), take it; elsewhere the model chooses as usual. The
        prediction then acts as a prior the model overrules only where it puts less than
        this on it (0.05: where it is confident the prediction is wrong). ``None``: the
        prediction only drafts (speed, never the output). ``"model"`` (the default): the
        floor recorded with the model's adapter (:func:`recorded_floor`, chosen on
        snippets of files it was not evaluated on), ``None`` for a model without one.
    logits_processors
        transformers-style ``(input_ids, scores) -> scores`` processors applied to every
        chosen token's masked scores (``input_ids``: the ids the model has seen), before
        the repetition penalty and the warpers. A bias, not a constraint: the mask is
        applied again after them, so they cannot make a disallowed token possible. They
        sit here, not in :class:`~.sampler.SamplingOptions`, because sampling options are
        plain values a call may override and every engine reads (vLLM included), while
        processors are callables of the transformers loop, fixed per generator.
    """

    splice: bool = True
    fast_forward: bool = True
    draft_tags: bool = True
    draft_trees: bool = True
    draft_lookup: bool = True
    forward_cost: ForwardCost | None = None
    monotone_copies: bool | Literal["model"] = FROM_MODEL
    copy_ratio: float | None = COPY_RATIO
    max_gen_tokens: int | None = None
    repetition_guard: bool = True
    follow_prediction: float | Literal["model"] | None = MODEL_FLOOR
    logits_processors: Sequence[LogitsProcessor] = ()

    def __post_init__(self) -> None:
        limit = self.max_gen_tokens
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise OptionError(f"max_gen_tokens must be an integer >= 1 or None, got {limit!r}")
        ratio = self.copy_ratio
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not ratio > 0):
            raise OptionError(f"copy_ratio must be a number > 0 or None, got {ratio!r}")
        check_floor(self.follow_prediction)
        if isinstance(self.monotone_copies, str) and self.monotone_copies != FROM_MODEL:
            raise OptionError(f"monotone_copies must be True, False or {FROM_MODEL!r}, got {self.monotone_copies!r}")
        if self.monotone_copies != FROM_MODEL:
            object.__setattr__(self, "monotone_copies", bool(self.monotone_copies))
        object.__setattr__(self, "logits_processors", tuple(self.logits_processors))

    def for_model(self, hf_model: Any) -> "LoopSwitches":
        """These switches with every ``"model"`` read from ``hf_model`` (``None``, a bare
        tokenizer's loop, records nothing): ``follow_prediction`` (:func:`recorded_floor`)
        and ``monotone_copies`` (:func:`recorded_monotone`)."""
        changes: dict[str, Any] = {}
        if self.follow_prediction == MODEL_FLOOR:
            changes["follow_prediction"] = recorded_floor(hf_model) if hf_model is not None else None
        if self.monotone_copies == FROM_MODEL:
            changes["monotone_copies"] = recorded_monotone(hf_model) if hf_model is not None else False
        return replace(self, **changes) if changes else self


@dataclass(frozen=True)
class Instrumentation:
    """What a benchmark, a test or a serving process hooks into the loop (defaults as shown).

    Attributes
    ----------
    runner
        The model side (:class:`~.runner.Runner`); ``None``: a ``TransformersRunner``
        over ``model.model``. Pass one to share a prompt-prefix cache across generators
        (``edit``, ``serve``), to count or clock forwards (an ``ObservedRunner``), or to
        run the loop on another engine.
    observer
        Called with the name of each phase of a decode step as the loop enters it
        (``mask``, ``choose``, ``advance``, ``verify``, ``forward`` or ``splice``,
        ``step``; ``end`` after the last): a benchmark clocks the phases; the loop keeps
        no stopwatch of its own beyond ``prefill_seconds`` and ``total_seconds``.
    trace_alpha
        Record the feasible mass of every constrained step (``result.alpha``).
    """

    runner: "Runner | None" = None
    observer: Callable[[str], None] | None = None
    trace_alpha: bool = False


#: Names of the :class:`LoopSwitches` and :class:`Instrumentation` fields.
LOOP_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(LoopSwitches))
INSTRUMENTATION_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(Instrumentation))
#: The generator's own keyword parameters (``tests/test_loop_options.py`` checks them
#: against ``CaDGenerator``'s signature).
CONSTRUCTOR_OPTIONS: tuple[str, ...] = ("granularity", "max_new_tokens", "sampling", "loop", "mode", "adapter",
                                        "prompt_template", "prompt_style", "instrumentation")
_GROUPS: dict[str, tuple[type, tuple[str, ...]]] = {
    "sampling": (SamplingOptions, SAMPLING_OPTIONS), "loop": (LoopSwitches, LOOP_OPTIONS),
    "instrumentation": (Instrumentation, INSTRUMENTATION_OPTIONS)}


def group_options(flat: Mapping[str, Any], *, caller: str = "cad_outlines.generate.cad") -> dict[str, Any]:
    """The generator's keyword arguments from flat ones.

    ``{"temperature": 0.2, "splice": False, "max_new_tokens": 512}`` becomes
    ``{"sampling": SamplingOptions(temperature=0.2), "loop": LoopSwitches(splice=False),
    "max_new_tokens": 512}``; the generator's own parameters (:data:`CONSTRUCTOR_OPTIONS`,
    the objects included) pass through.

    Raises
    ------
    OptionTypeError
        A ``TypeError`` (and an ``OptionError``) for an unknown keyword, or a flat name
        given beside the object that holds it (``seed=`` with ``sampling=``): an option
        is set one way. Each object's own checks raise ``OptionError`` as it is built.
    """
    kwargs: dict[str, Any] = {}
    gathered: dict[str, dict[str, Any]] = {group: {} for group in _GROUPS}
    for name, value in flat.items():
        group = next((g for g, (_, names) in _GROUPS.items() if name in names), None)
        if group is not None:
            gathered[group][name] = value
        elif name in CONSTRUCTOR_OPTIONS:
            kwargs[name] = value
        else:
            known = (*CONSTRUCTOR_OPTIONS, *SAMPLING_OPTIONS, *LOOP_OPTIONS, *INSTRUMENTATION_OPTIONS)
            raise OptionTypeError(f"{caller}: unknown option {name!r}; the options are {', '.join(known)}")
    for group, values in gathered.items():
        if not values:
            continue
        if kwargs.get(group) is not None:
            raise OptionTypeError(f"{caller}: {', '.join(values)} given beside {group}=; "
                                  f"set {'it' if len(values) == 1 else 'them'} in the {group} object")
        kwargs[group] = _GROUPS[group][0](**values)
    return kwargs
