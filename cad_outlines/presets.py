"""The random-weight presets by name: architecture, shape and tokenizer family.

Kept apart from :mod:`cad_outlines.models` (which builds them with torch) so that the
command line can list and check preset names without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PRESETS", "PRESET_SUMMARIES", "Preset"]


@dataclass(frozen=True)
class Preset:
    """A named architecture: transformers config class + shape + tokenizer family."""

    name: str
    arch: str  # "qwen2" or "llama"
    tokenizer: str  # fixture folder / adapter family: "qwen", "deepseek-coder", "codellama"
    config: dict[str, Any] = field(default_factory=dict)


_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768)

PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("tiny-qwen", "qwen2", "qwen", dict(_TINY, vocab_size=151936, tie_word_embeddings=True)),
    Preset("tiny-deepseek-coder", "llama", "deepseek-coder", dict(_TINY, vocab_size=32256)),
    Preset("tiny-codellama", "llama", "codellama", dict(_TINY, vocab_size=32016)),
    # Published shapes (config.json of each checkpoint).
    Preset("qwen2.5-0.5b", "qwen2", "qwen", dict(
        hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
        rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=32768)),
    Preset("qwen2.5-1.5b", "qwen2", "qwen", dict(
        hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
        num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True,
        rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=32768)),
    Preset("qwen2.5-7b", "qwen2", "qwen", dict(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
        num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False,
        rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=32768)),
    Preset("deepseek-coder-1.3b", "llama", "deepseek-coder", dict(
        hidden_size=2048, intermediate_size=5504, num_hidden_layers=24, num_attention_heads=16,
        num_key_value_heads=16, vocab_size=32256, rope_theta=1e5, rms_norm_eps=1e-6,
        max_position_embeddings=16384)),
    Preset("codellama-7b", "llama", "codellama", dict(
        hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=32, vocab_size=32016, rope_theta=1e6, rms_norm_eps=1e-5,
        max_position_embeddings=16384)),
]}


def _summary(preset: Preset) -> str:
    c = preset.config
    arch = {"qwen2": "Qwen2", "llama": "Llama"}[preset.arch]
    return (f"{arch}, {c['num_hidden_layers']} layers x {c['hidden_size']}, "
            f"{preset.tokenizer} tokenizer")


#: One line per preset for ``--help``: architecture, depth x width, tokenizer.
PRESET_SUMMARIES: dict[str, str] = {name: _summary(p) for name, p in PRESETS.items()}
