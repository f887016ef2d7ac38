"""The edit workflow behind ``cad-outlines edit``, for both engines.

Load the model, decode every file (one after the other on transformers, all at once on
vLLM), then judge each result the same way: unfinished, refused by the deletion or the
duplication guard, or ready to write. The command line only parses arguments and prints
what comes back.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from ..decoding.defaults import DEFAULT_MAX_NEW_TOKENS, MODEL_FLOOR, explicit_floor
from ..errors import STOPPED_BECAUSE, ContextLengthError, InputError
from ..language.program import repeated_lines
from .calibration import AUTO, NO_COST_ON_VLLM, forward_cost_for, load_forward_cost
from .diffs import line_summary

__all__ = ["EditJob", "EditOptions", "EditOutcome", "check_forced", "edit_with_transformers", "edit_with_vllm",
           "judge", "load_model", "load_model_and_cost", "run_edit"]

Status = Callable[[str], None]
#: What ``edit --update`` says when the snippet has no literal merge into the file.
UNPLACED_SNIPPET = ("the snippet cannot be placed by its own lines (each stretch between markers needs its "
                    "first and last lines in the file, in order), so the model applies it without the merge "
                    "as a prior, which is far less reliable: check the diff, or give each change a few "
                    "unchanged lines of context")


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class EditOptions:
    """What every file of one ``edit`` run is decoded with."""

    granularity: str = "lines"
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    forward_cost: Any = None  # a ForwardCost (transformers only): drafts cut to what pays
    allow_deletion: bool = False  # accept an edit that leaves under half the lines
    allow_duplication: bool = False  # accept copies that repeat over half the lines
    allow_repetition: bool = False  # no repetition guard (a gen repeating itself stops the run)
    follow_prediction: float | str | None = MODEL_FLOOR  # with --update: the merge as a prior (LoopSwitches)


@dataclass(frozen=True)
class EditJob:
    """One ``edit`` run: the files, the instruction, the model and how to decode them.

    ``force_program`` and ``forward_cost_file`` are paths, read (and checked) by
    :func:`run_edit` before the model loads; the cost curve becomes ``options.forward_cost``
    (``forward_cost_file="auto"``: this machine's curve for the model, measured once and
    cached, :mod:`.calibration`).
    """

    documents: dict[str, str]  # file name -> its text
    instruction: str
    options: EditOptions = field(default_factory=EditOptions)
    engine: str = "transformers"  # or "vllm"
    model: str | None = None  # a model folder, or a .gguf file (transformers)
    preset: str | None = None  # a preset name instead of ``model`` (transformers)
    device: str = "cpu"
    dtype: str = "float32"
    force_program: str | None = None  # a program file to teacher-force (tests, benchmarks)
    forward_cost_file: str | None = None  # transformers: drafts cut to what pays for their width ("auto")
    engine_args: dict[str, Any] = field(default_factory=dict)  # vLLM's engine arguments
    update: str | None = None  # ``--update``'s snippet (the instruction carries it): its merge drafts


def run_edit(job: EditJob, *, progress: bool = False, status: Status = _quiet) -> Iterable[EditOutcome]:
    """The ``edit`` workflow: check the job, load its model, decode every file and judge it.

    Everything that can be wrong with the input (engine and model, the forced program,
    the cost curve) fails here before any model loads. On transformers the outcomes come
    one file at a time as each is decoded; on vLLM all at once.
    """
    if job.engine == "vllm":
        if job.preset:
            raise InputError("--engine vllm needs --model DIR (a model folder vLLM loads; "
                             "cad_outlines.tools.models.save writes one from a preset)")
        if job.forward_cost_file:
            raise InputError(NO_COST_ON_VLLM)
    if explicit_floor(job.options.follow_prediction) and job.update is None:
        raise InputError("--follow-prediction needs --update (the snippet whose merge it follows)")
    granularity = job.options.granularity
    forced = (check_forced(job.force_program, _read(job.force_program), job.documents, granularity)
              if job.force_program else None)
    if job.engine == "vllm":
        assert job.model is not None
        return edit_with_vllm(job.model, job.documents, job.instruction, job.options, forced=forced,
                              engine_args=job.engine_args, progress=progress, update=job.update, status=status)
    model, cost = load_model_and_cost(preset=job.preset, model=job.model, device=job.device, dtype=job.dtype,
                                      forward_cost=job.forward_cost_file, status=status)
    options = dataclasses.replace(job.options, forward_cost=cost) if cost is not None else job.options
    return edit_with_transformers(model, job.documents, job.instruction, options, forced=forced,
                                  progress=progress, update=job.update, status=status)


def _read(path: str) -> str:
    from ..files import read_text

    return read_text(path)


@dataclass
class EditOutcome:
    """One file's result and the verdict on it.

    ``error`` says why nothing may be written (the program is unfinished or does not
    resolve, or a guard refused it); ``None`` means ``result.document`` is the
    edited file.
    """

    name: str
    document: str
    result: Any  # CaDResult, or None when the program did not resolve
    error: str | None = None
    summary: dict[str, int] | None = None
    written: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def record(self) -> dict[str, Any]:
        """The ``--json`` record: file, program, ops, stats, edited document, summary."""
        r = self.result
        return {"file": self.name, "complete": bool(r and r.complete), "program": r.program if r else None,
                "ops": [_op_record(op) for op in r.ops] if r else [],
                "stats": dataclasses.asdict(r.stats) if r else None,
                "document": r.document if r else None, "summary": self.summary,
                "written": self.written, "error": self.error}


def _op_record(op: Any) -> dict[str, Any]:
    return {"op": type(op).__name__.lower(), **dataclasses.asdict(op)}


def judge(name: str, document: str, result: Any, options: EditOptions) -> EditOutcome:
    """The verdict on one file's result: unfinished, refused as a deletion or a duplication,
    or writable."""
    stats = result.stats
    if result.document is None:
        why = STOPPED_BECAUSE.get(stats.stop_reason,
                                  f"it was not finished within --max-new-tokens {options.max_new_tokens}")
        hint = " (pass --allow-repetition to let it go on)" if stats.stop_reason == "repetition" else ""
        return EditOutcome(name, document, result,
                           f"{name}: {why} ({len(result.ops)} complete op(s)); nothing was written{hint}")
    summary = line_summary(document, result.document)
    kept_lines = summary["kept"] + summary["added"]
    original_lines = summary["kept"] + summary["removed"]
    if original_lines and kept_lines * 2 < original_lines and not options.allow_deletion:
        return EditOutcome(name, document, result,
                           f"{name}: the edit would leave {kept_lines} of {original_lines} lines; nothing "
                           "was written (pass --allow-deletion to accept it)", summary)
    repeated = repeated_lines(result.ops)
    if original_lines and repeated * 2 > original_lines and not options.allow_duplication:
        return EditOutcome(name, document, result,
                           f"{name}: the edit's copies would repeat {repeated} of the file's {original_lines} "
                           "lines (a copy loop); nothing was written (pass --allow-duplication to accept it)",
                           summary)
    return EditOutcome(name, document, result, None, summary)


def _unresolved(name: str, document: str, err: Exception) -> EditOutcome:
    """The verdict on a complete program whose copies do not resolve (either engine)."""
    return EditOutcome(name, document, None,
                       f"{name}: the model's program does not resolve: {err}; nothing was written")


def check_forced(path: str, text: str, documents: dict[str, str], granularity: str) -> str:
    """The program to force: read as ``apply`` reads one (:func:`read_program`), checked to
    fit every document (line programs) before the model loads."""
    from ..language.program import read_program
    from ..language.resolver import ResolveError, resolve

    program = read_program(text, f"--force-program {path}", granularity)  # type: ignore[arg-type]
    ops = program.ops
    if granularity == "lines":  # token programs need the model's tokenizer: checked by the loop
        for name, document in documents.items():
            try:
                resolve(ops, document, "strict")
            except ResolveError as err:
                raise InputError(f"--force-program {path} on {name}: {err}") from None
    return program.text


def load_model(*, preset: str | None, model: str | None, device: str = "cpu", dtype: str = "float32",
               status: Status = _quiet) -> Any:
    """The Outlines model of a preset, a local folder or a ``.gguf`` file."""
    from . import models

    if preset:
        status(f"loading preset {preset} ...")
        return models.load(preset, device=device, dtype=dtype)
    assert model is not None
    if model.endswith(".gguf") and os.path.isfile(model):
        status(f"loading {model} (converted once to a cached folder, ~30 s the first time) ...")
    elif not os.path.isdir(model):
        raise InputError(f"--model {model}: directory does not exist (pass a local folder holding "
                         "config.json, the weights and the tokenizer, or a .gguf file; nothing is downloaded)")
    else:
        status(f"loading {model} ...")
    return models.load_folder(model, device=device, dtype=dtype)


def load_model_and_cost(*, preset: str | None, model: str | None, device: str = "cpu", dtype: str = "float32",
                        forward_cost: str | None = None, status: Status = _quiet) -> tuple[Any, Any]:
    """:func:`load_model` and the curve ``--forward-cost`` names (``None`` without one): a
    file is read before the model loads (a bad one fails first), ``"auto"`` is this
    machine's curve for the model, read from the cache or measured once after it loads."""
    cost = load_forward_cost(forward_cost) if forward_cost and forward_cost != AUTO else None
    loaded = load_model(preset=preset, model=model, device=device, dtype=dtype, status=status)
    if forward_cost == AUTO:
        cost = forward_cost_for(AUTO, loaded.model, status)
    return loaded, cost


def edit_with_transformers(model: Any, documents: dict[str, str], instruction: str, options: EditOptions, *,
                           forced: str | None = None, progress: bool = False,
                           update: str | None = None, status: Status = _quiet) -> Iterator[EditOutcome]:
    """Decode each file in turn with :class:`CaDGenerator`; yield each verdict as it is reached.

    ``update``: the snippet ``instruction`` was made from; its literal merge into each file
    is that run's ``prediction`` (drafts only, unless ``options.follow_prediction`` makes
    it a prior the model overrules where it is confident)."""
    from ..decoding.generator import CaDGenerator
    from ..decoding.options import Instrumentation, LoopSwitches
    from ..decoding.progress import DecodeProgress
    from ..decoding.runner import TransformersRunner
    from ..decoding.sampler import SamplingOptions
    from ..language.resolver import ResolveError

    # One runner for every file: each prefill reuses the KV of the prompt prefix it shares
    # with the previous file's (chat header, instruction, format statement).
    runner = TransformersRunner(model.model, prefix_cache=True)
    sampling = SamplingOptions(temperature=options.temperature, top_p=options.top_p, seed=options.seed)
    for name, document in documents.items():
        generator = CaDGenerator(model, document, granularity=options.granularity,
                                 max_new_tokens=options.max_new_tokens, sampling=sampling,
                                 loop=LoopSwitches(forward_cost=options.forward_cost,
                                                   follow_prediction=options.follow_prediction,
                                                   repetition_guard=not options.allow_repetition),
                                 instrumentation=Instrumentation(runner=runner))
        with DecodeProgress(name, options.max_new_tokens, enabled=progress) as bar:
            try:
                prediction = generator.predicted(update) if update is not None else None
                if update is not None and prediction is None:
                    status(f"{name}: {UNPLACED_SNIPPET}")
                result = generator.run(instruction, force_program=forced, progress=bar, prediction=prediction)
            except ResolveError as err:  # a complete program whose copies do not resolve
                yield _unresolved(name, document, err)
                continue
            except ContextLengthError as err:  # input, refused before the prefill: say which file
                raise ContextLengthError(f"{name}: {err}") from None
        yield judge(name, document, result, options)


def edit_with_vllm(model_dir: str, documents: dict[str, str], instruction: str, options: EditOptions, *,
                   forced: str | None = None, engine_args: dict[str, Any] | None = None,
                   progress: bool = False, update: str | None = None, status: Status = _quiet) -> list[EditOutcome]:
    """All files as concurrent edits on one vLLM engine, started and shut down here; one
    outcome per file, in order (a program that does not resolve spoils only its own file).
    ``update``: the snippet whose literal merge is each file's prediction, as on transformers."""
    from ..language.resolver import ResolveError

    if not os.path.isdir(model_dir):
        raise InputError(f"--model {model_dir}: directory does not exist (pass a local folder "
                         "vLLM can load; nothing is downloaded)")
    if options.forward_cost is not None:
        raise InputError(NO_COST_ON_VLLM)
    try:
        from ..engines import vllm as cad_vllm
    except ImportError as err:  # vLLM is optional; its message names the extra to install
        raise InputError(str(err)) from None
    status(f"loading {model_dir} on vLLM ...")
    try:
        llm = cad_vllm.load(model_dir, **(engine_args or {}))
    except (OSError, ValueError) as err:  # vLLM's errors for a folder or settings it cannot use
        # vLLM validates its config with pydantic: the first error's message says what is wrong.
        details = err.errors() if callable(getattr(err, "errors", None)) else None
        message = details[0].get("msg", str(err)) if details else str(err)
        raise InputError(f"--model {model_dir}: vLLM cannot start on this folder: "
                         f"{message.strip().splitlines()[0]}") from None
    try:
        # Per-request seeds have crashed vLLM's CPU engine under concurrency
        # (docs/serving.md): seed only when sampling.
        editor = cad_vllm.VLLMEditor(llm, granularity=options.granularity, max_new_tokens=options.max_new_tokens,
                                     temperature=options.temperature, top_p=options.top_p,
                                     seed=options.seed if options.temperature > 0 else None,
                                     follow_prediction=options.follow_prediction,
                                     repetition_guard=not options.allow_repetition)
        predictions = None
        if update is not None:
            predictions = [editor.predicted(document, update) for document in documents.values()]
            for name, merged in zip(documents, predictions):
                if merged is None:
                    status(f"{name}: {UNPLACED_SNIPPET}")
        # return_exceptions: a complete program whose copies do not resolve comes back as
        # its ResolveError, in its file's place, and the other files keep their results.
        results = cad_vllm.edit_many(editor, [(document, instruction) for document in documents.values()],
                                     force_programs=[forced] * len(documents), predictions=predictions,
                                     progress=progress, return_exceptions=True)
    except ContextLengthError as err:  # refused before any request; the engine says which edit
        raise ContextLengthError(f"{list(documents)[err.edit or 0]}: {err}") from None
    finally:
        llm.llm_engine.engine_core.shutdown()
    return [_unresolved(name, document, result) if isinstance(result, ResolveError)
            else judge(name, document, result, options)
            for (name, document), result in zip(documents.items(), results)]
