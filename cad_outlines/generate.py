"""One-call entry points in the spirit of Outlines' generator factories."""

from __future__ import annotations

from typing import Any

from .decoding.generator import CaDGenerator
from .decoding.options import group_options
from .decoding.prompts import Prompt


def cad(model: Any, document: str, **options: Any) -> CaDGenerator:
    """Build a :class:`~cad_outlines.decoding.generator.CaDGenerator` for ``document``.

    Parameters
    ----------
    model
        ``outlines.from_transformers(hf_model, hf_tokenizer)``.
    document
        The text to edit.
    **options
        Flat keywords: the generator's own (``granularity``, ``max_new_tokens``, ``mode``,
        ``adapter``, ``prompt_template``, ``prompt_style``), any field of
        :class:`~cad_outlines.decoding.sampler.SamplingOptions` (``temperature``, ``seed``,
        ...), :class:`~cad_outlines.decoding.options.LoopSwitches` (``splice``,
        ``monotone_copies``, ...) or :class:`~cad_outlines.decoding.options.Instrumentation`
        (``runner``, ``observer``, ``trace_alpha``); or the objects themselves
        (``sampling=``, ``loop=``, ``instrumentation=``).

    Raises
    ------
    cad_outlines.errors.OptionTypeError
        An unknown keyword (a ``TypeError``), or a flat name beside its object.

    Examples
    --------
    >>> editor = cad_outlines.generate.cad(model, source, max_new_tokens=512)  # doctest: +SKIP
    >>> new_source = editor("rename `total` to `subtotal`")                   # doctest: +SKIP
    >>> new_source = editor("rename `total` to `subtotal`", temperature=0.7)  # doctest: +SKIP
    >>> for chunk in editor.stream("add a docstring"): print(chunk, end="")   # doctest: +SKIP
    """
    return CaDGenerator(model, document, **group_options(options))


def edit(model: Any, document: str, instruction: Prompt, **options: Any) -> str:
    """Edit ``document`` by ``instruction`` in one call and return the edited text.

    ``instruction`` may be a ``str``, an ``outlines.inputs.Chat`` or a list of message
    dicts; ``options`` are the flat keywords of :func:`cad`.

    Raises
    ------
    cad_outlines.IncompleteProgramError
        When ``max_new_tokens`` ran out before the program was complete.
    cad_outlines.InputError
        A bad option, document or prompt (:class:`cad_outlines.PromptError` for the prompt).
    """
    return CaDGenerator(model, document, **group_options(options, caller="cad_outlines.generate.edit"))(instruction)


def apply(model: Any, document: str, update: str, *, instruction: str | None = None, **options: Any) -> str:
    """Merge a lazy edit snippet into ``document`` in one call and return the edited text.

    ``update`` is the changed region with context, unchanged regions elided by marker
    lines (``# ... existing code ...``, in the file's comment syntax); ``instruction``
    optionally says more. ``options`` are the flat keywords of :func:`cad`. See
    :meth:`CaDGenerator.apply <cad_outlines.decoding.generator.CaDGenerator.apply>`.

    Raises
    ------
    cad_outlines.decoding.prompts.PromptError
        When the snippet is empty (only whitespace and marker lines).
    cad_outlines.decoding.generator.IncompleteProgramError
        When ``max_new_tokens`` ran out before the program was complete.
    """
    editor = CaDGenerator(model, document, **group_options(options, caller="cad_outlines.generate.apply"))
    return editor.apply(update, instruction=instruction)
