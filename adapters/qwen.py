"""Qwen2.5 / Qwen3: byte-level BPE with a ChatML chat template.

Detected by a byte-level backend whose special tokens include ``<|im_start|>`` and
``<|im_end|>``. Generation ends at ``<|im_end|>``. Qwen3's template is asked for no
thinking block (``enable_thinking=False``: it writes an empty ``<think></think>``), so the
answer starts with the program; Qwen2.5's template ignores the switch.
"""

from __future__ import annotations

from typing import Any

from ._backend import BackendFacts
from .base import Adapter


class QwenAdapter(Adapter):
    """Qwen2.5 / Qwen3 (ChatML)."""

    name = "qwen"
    eos_spelling = "<|im_end|>"
    required_spellings = ("<|im_start|>",)
    control_spellings = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
    # ChatML, for a Qwen tokenizer shipped without its template.
    fallback_chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
        "{% endfor %}{{ '<|im_start|>assistant\\n' }}")
    chat_template_kwargs = {"enable_thinking": False}

    @classmethod
    def matches(cls, tokenizer: Any, facts: BackendFacts) -> bool:
        return facts.scheme == "byte_level" and {"<|im_start|>", "<|im_end|>"} <= set(facts.specials)
