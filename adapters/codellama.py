"""Llama 2 / CodeLlama: SentencePiece BPE with a dummy ``▁`` prefix and byte fallback.

Detected by a SentencePiece backend with byte fallback, ``<s>`` / ``</s>`` as BOS/EOS
and a ``<0x0A>`` byte token. Without a chat template in the tokenizer, the prompt is the
Llama 2 ``[INST]`` format as text: ``<s>[INST] {user} [/INST]``, tokenized as Meta's
reference does (the text after ``<s>`` starts with the dummy ``▁``). The program then
starts with ``<``, without the word-initial ``▁`` free text would have there.
"""

from __future__ import annotations

from typing import Any

from ._backend import BackendFacts
from .base import Adapter


class CodeLlamaAdapter(Adapter):
    """Llama 2 / CodeLlama ``[INST]`` format."""

    name = "codellama"
    eos_spelling = "</s>"
    required_spellings = ("<s>", "<0x0A>")
    control_spellings = ("<s>", "</s>", "<unk>")
    # Llama 2 chat: a system message goes inside the first [INST] as <<SYS>>...<</SYS>>;
    # each earlier answer is followed by EOS, and each user turn opens with BOS.
    fallback_chat_template = (
        "{% if messages[0]['role'] == 'system' %}"
        "{% set system = '<<SYS>>\\n' + messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}"
        "{% set turns = messages[1:] %}"
        "{% else %}{% set system = '' %}{% set turns = messages %}{% endif %}"
        "{% for m in turns %}"
        "{% if m['role'] == 'user' %}{{ bos + '[INST] ' + (system if loop.first else '') + m['content'] + ' [/INST]' }}"
        "{% else %}{{ ' ' + m['content'] + ' ' + eos }}{% endif %}"
        "{% endfor %}")

    @classmethod
    def matches(cls, tokenizer: Any, facts: BackendFacts) -> bool:
        return (facts.scheme == "sentencepiece" and facts.byte_fallback
                and tokenizer.bos_token == "<s>" and tokenizer.eos_token == "</s>"
                and "<0x0A>" in tokenizer.get_vocab())
