"""One-call entry points in the spirit of Outlines' generator factories."""

from __future__ import annotations

from typing import Any

from .decoding.generator import CaDGenerator
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
        Any option of :class:`~cad_outlines.decoding.generator.CaDGenerator`.

    Examples
    --------
    >>> editor = cad_outlines.generate.cad(model, source, max_new_tokens=512)  # doctest: +SKIP
    >>> new_source = editor("rename `total` to `subtotal`")                   # doctest: +SKIP
    >>> new_source = editor("rename `total` to `subtotal`", temperature=0.7)  # doctest: +SKIP
    >>> for chunk in editor.stream("add a docstring"): print(chunk, end="")   # doctest: +SKIP
    """
    return CaDGenerator(model, document, **options)


def edit(model: Any, document: str, instruction: Prompt, **options: Any) -> str:
    """Edit ``document`` by ``instruction`` in one call and return the edited text.

    ``instruction`` may be a ``str``, an ``outlines.inputs.Chat`` or a list of message
    dicts; ``options`` are those of :class:`~cad_outlines.decoding.generator.CaDGenerator`.

    Raises
    ------
    cad_outlines.IncompleteProgramError
        When ``max_new_tokens`` ran out before the program was complete.
    cad_outlines.InputError
        A bad option, document or prompt (:class:`cad_outlines.PromptError` for the prompt).
    """
    return CaDGenerator(model, document, **options)(instruction)


def apply(model: Any, document: str, update: str, *, instruction: str | None = None, **options: Any) -> str:
    """Merge a lazy edit snippet into ``document`` in one call and return the edited text.

    ``update`` is the changed region with context, unchanged regions elided by marker
    lines (``# ... existing code ...``, in the file's comment syntax); ``instruction``
    optionally says more. ``options`` are those of
    :class:`~cad_outlines.decoding.generator.CaDGenerator`. See
    :meth:`CaDGenerator.apply <cad_outlines.decoding.generator.CaDGenerator.apply>`.

    Raises
    ------
    cad_outlines.decoding.prompts.PromptError
        When the snippet is empty (only whitespace and marker lines).
    cad_outlines.decoding.generator.IncompleteProgramError
        When ``max_new_tokens`` ran out before the program was complete.
    """
    return CaDGenerator(model, document, **options).apply(update, instruction=instruction)
