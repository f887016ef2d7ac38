"""Any other fast tokenizer, accepted only when the load-time probes pass.

The shared logic in :mod:`.base` handles byte-level BPE and SentencePiece byte fallback
by itself; for another scheme the per-token bytes come from the tokenizer's
``convert_tokens_to_string``, and the probes decide. The prompt uses the tokenizer's chat
template when it has one, else the user message followed by a newline (after BOS when
the tokenizer adds one).
"""

from __future__ import annotations

from .base import Adapter


class GenericAdapter(Adapter):
    """Fallback for unrecognised tokenizers (verified by round-trip probes)."""

    name = "generic"
