"""Tokenizer adapters: per-family token facts for Copy-as-Decode.

Shipped as ``cad_outlines.adapters``. One small module per family; the shared logic
and the interface are in :mod:`.base`.

>>> tok = load_tokenizer("tests/fixtures/tokenizers/qwen")      # doctest: +SKIP
>>> adapter = get_adapter(tok)                                  # doctest: +SKIP
>>> adapter.name, adapter.literal_ids["<gen>"]                  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any

from ._errors import AdapterError
from ._view import PROMPT_STYLES, check_style
from .base import LITERALS, Adapter
from .codellama import CodeLlamaAdapter
from .deepseek_coder import DeepSeekCoderAdapter
from .facts import TokenizerFacts, tokenizer_facts
from .generic import GenericAdapter
from .qwen import QwenAdapter

#: Adapter families by name; auto-detection tries them in this order (generic last).
ADAPTERS: dict[str, type[Adapter]] = {
    QwenAdapter.name: QwenAdapter,
    DeepSeekCoderAdapter.name: DeepSeekCoderAdapter,
    CodeLlamaAdapter.name: CodeLlamaAdapter,
    GenericAdapter.name: GenericAdapter,
}


def detect_family(tokenizer: Any) -> str:
    """The family auto-detection picks for ``tokenizer`` (from its backend, not its path).

    Raises
    ------
    AdapterError
        If the tokenizer has no ``tokenizers`` backend.
    """
    facts = tokenizer_facts(tokenizer).backend
    for name, cls in ADAPTERS.items():
        if cls is not GenericAdapter and cls.matches(tokenizer, facts):
            return name
    return GenericAdapter.name


def get_adapter(tokenizer: Any, name: str | None = None) -> Adapter:
    """The adapter for a Hugging Face tokenizer.

    Parameters
    ----------
    tokenizer
        A loaded fast tokenizer (see :func:`load_tokenizer`).
    name
        A key of :data:`ADAPTERS` to override auto-detection; ``None`` detects the family
        from the tokenizer's backend (model, normalizer, pre-tokenizer, added tokens). An
        unrecognised tokenizer gets ``"generic"`` if it passes the round-trip probes.

    Raises
    ------
    AdapterError
        For an unknown name, a tokenizer lacking a token the family needs, or a failed
        probe (the message names it).
    """
    if name is not None and name not in ADAPTERS:
        raise AdapterError(f"unknown adapter {name!r}; choose one of {', '.join(ADAPTERS)}")
    family = name or detect_family(tokenizer)
    # One adapter per (tokenizer, family) while anyone holds it: the tokenizer's facts
    # hold it weakly, since the adapter refers to the tokenizer (see .facts).
    built = tokenizer_facts(tokenizer).adapters
    adapter = built.get(family)
    if adapter is None:
        adapter = built[family] = ADAPTERS[family](tokenizer)
    return adapter


def load_tokenizer(path: str | os.PathLike) -> Any:
    """Load a Hugging Face tokenizer folder offline (``AutoTokenizer.from_pretrained``).

    Raises
    ------
    FileNotFoundError
        If ``path`` is not a folder.
    AdapterError
        If the folder holds no ``tokenizer.json`` (the adapters read the fast
        tokenizer's pieces), or ``transformers`` cannot load it (the message says why).
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"tokenizer folder not found: {path}")
    if not os.path.isfile(os.path.join(path, "tokenizer.json")):
        # Checked here: transformers would try to convert a slow tokenizer and fail
        # with a multi-line message about sentencepiece/tiktoken.
        raise AdapterError(f"{path}: no tokenizer.json in this folder (a Hugging Face fast "
                           "tokenizer folder is needed, as saved by tokenizer.save_pretrained)")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as err:  # transformers raises many types here; report them as one
        raise AdapterError(f"cannot load a tokenizer from {path}: {type(err).__name__}: {err}") from err


__all__ = ["ADAPTERS", "LITERALS", "PROMPT_STYLES", "check_style", "Adapter", "AdapterError", "CodeLlamaAdapter",
           "DeepSeekCoderAdapter", "GenericAdapter", "QwenAdapter", "TokenizerFacts",
           "detect_family", "get_adapter", "load_tokenizer", "tokenizer_facts"]
