"""DeepSeek-Coder (v1: 1.3B / 6.7B / 33B): 32k byte-level BPE.

Detected by a byte-level backend with BOS ``<｜begin▁of▁sentence｜>`` and an
``<|EOT|>`` token. This tokenizer splits ``</``, ``="`` and ``"/>`` into two pieces
each (see ``docs/adapters.md``). Without a chat template in the tokenizer, the prompt
is the DeepSeek-Coder instruct format as text (BOS, the model's default system line,
``### Instruction:`` / ``### Response:``); generation ends at ``<|EOT|>``.
"""

from __future__ import annotations

from typing import Any

from ._backend import BackendFacts
from .base import Adapter

_SYSTEM = (
    "You are an AI programming assistant, utilizing the Deepseek Coder model, developed by "
    "Deepseek Company, and you only answer questions related to computer science. For "
    "politically sensitive questions, security and privacy issues, and other non-computer "
    "science questions, you will refuse to answer\n"
)


class DeepSeekCoderAdapter(Adapter):
    """DeepSeek-Coder instruct format."""

    name = "deepseek-coder"
    eos_spelling = "<|EOT|>"
    control_spellings = ("<|EOT|>", "<|User|>", "<|Assistant|>")
    # The DeepSeek-Coder instruct format; a system message replaces the default line.
    fallback_chat_template = (
        "{{ bos }}{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n' }}"
        "{% else %}{{ default_system }}{% endif %}"
        "{% for m in messages %}"
        "{% if m['role'] == 'user' %}{{ '### Instruction:\\n' + m['content'] + '\\n' }}"
        "{% elif m['role'] == 'assistant' %}{{ '### Response:\\n' + m['content'] + '\\n' + eos + '\\n' }}"
        "{% endif %}{% endfor %}{{ '### Response:\\n' }}")
    chat_template_kwargs = {"default_system": _SYSTEM}

    @classmethod
    def matches(cls, tokenizer: Any, facts: BackendFacts) -> bool:
        return (facts.scheme == "byte_level" and "<|EOT|>" in facts.added
                and tokenizer.bos_token == "<\uff5cbegin\u2581of\u2581sentence\uff5c>")
