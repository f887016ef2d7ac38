"""Tokenizer facts in one place: what is derived from one tokenizer object, built once.

One weakly keyed cache maps a Hugging Face tokenizer object to its
:class:`TokenizerFacts`: the parsed backend and what it says (:mod:`._backend`), the
exact bytes of every token, the text encoders and the adapters built for it. What the
decoding layer derives from a tokenizer it keeps itself, keyed on these facts
(:mod:`cad_outlines.decoding.compiling`).

Nothing is stored on the tokenizer, so pickling it stays as cheap as before, and an
entry dies with its tokenizer: no fact refers to the tokenizer except the adapters,
which the entry holds weakly (an adapter that nobody holds any more is rebuilt from the
cached facts on the next :func:`cad_outlines.adapters.get_adapter`). The facts are a
snapshot taken at first use: tokens added to the tokenizer later are not seen.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable

from . import _backend
from ._backend import BackendFacts

_CACHE: "weakref.WeakKeyDictionary[Any, TokenizerFacts]" = weakref.WeakKeyDictionary()


@dataclass(eq=False)
class TokenizerFacts:
    """Everything derived from one tokenizer, shared by detection, adapters and constraints.

    Attributes
    ----------
    spec
        The parsed ``tokenizer.json``.
    backend
        :class:`._backend.BackendFacts` read from it (byte scheme, added tokens, ...).
    table
        The exact bytes of every token id (:func:`._backend.token_bytes_table`).
    adapters
        The adapters built for this tokenizer, by family, held weakly.
    """

    spec: dict
    backend: BackendFacts
    table: list[bytes]
    adapters: "weakref.WeakValueDictionary[str, Any]" = field(
        default_factory=weakref.WeakValueDictionary)
    _encoders: dict = field(default_factory=dict, repr=False)

    def text_encoder(self, control: Iterable[str]) -> Any:
        """The mid-sequence text encoder (:func:`._backend.text_encoder`) for ``control``.

        Building one copies the backend (most of an adapter's set-up), so one is kept
        per set of control spellings.
        """
        key = frozenset(control)
        if key not in self._encoders:
            self._encoders[key] = _backend.text_encoder(self.spec, self.table, key)
        return self._encoders[key]


def tokenizer_facts(tokenizer: Any) -> TokenizerFacts:
    """The :class:`TokenizerFacts` of ``tokenizer``: the same object for the same tokenizer.

    A tokenizer that cannot be weakly referenced (or hashed) gets fresh facts each call.

    Raises
    ------
    AdapterError
        If the tokenizer has no ``tokenizers`` backend (a slow tokenizer).
    """
    try:
        return _CACHE[tokenizer]
    except (KeyError, TypeError):
        pass
    spec = _backend.backend_spec(tokenizer)
    backend = _backend.read_facts(spec)
    table = _backend.token_bytes_table(spec, backend, getattr(tokenizer, "convert_tokens_to_string", None))
    facts = TokenizerFacts(spec, backend, table)
    try:
        _CACHE[tokenizer] = facts
    except TypeError:  # not weakly referenceable: no caching
        pass
    return facts
