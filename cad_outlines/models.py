"""Random-weight presets of real architectures, paired with the matching fixture tokenizer.

No weights can be downloaded in this workplace, so benchmarks and tests build the real
architectures (Qwen2, Llama) from a config with seeded random weights. Speed, KV-cache
behaviour and grammar validity do not depend on weight values; anything that measures
*selection quality* does, and random weights say nothing about it.

The ``tiny-*`` presets (2 layers, hidden size 64, full real vocabulary) are for tests;
the others reproduce the published shapes of the named checkpoints for benchmarks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

TOKENIZERS_ENV = "CAD_OUTLINES_TOKENIZERS"


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


def tokenizer_dir(family: str, root: str | os.PathLike | None = None) -> Path:
    """Locate the fixture tokenizer folder of ``family``.

    Search order: ``root``; the ``CAD_OUTLINES_TOKENIZERS`` environment variable; the
    repository's ``tests/fixtures/tokenizers`` (present in a clone / editable install).

    Raises
    ------
    FileNotFoundError
        Naming every place searched.
    """
    candidates = [Path(p) for p in (root, os.environ.get(TOKENIZERS_ENV)) if p]
    candidates.append(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tokenizers")
    for base in candidates:
        if (base / family / "tokenizer.json").is_file():
            return base / family
        if base.name == family and (base / "tokenizer.json").is_file():
            return base
    searched = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"no tokenizer folder for {family!r} (searched: {searched}); pass a folder "
        f"or set {TOKENIZERS_ENV} to a directory holding {family}/tokenizer.json")


def build(name: str, *, seed: int = 0, dtype: str | torch.dtype = "float32",
          device: str | torch.device = "cpu", tokenizer_root: str | os.PathLike | None = None,
          attn_implementation: str = "sdpa", config: dict[str, Any] | None = None
          ) -> tuple[torch.nn.Module, Any]:
    """Build a preset: ``(hf_model, hf_tokenizer)`` with seeded random weights.

    Parameters
    ----------
    name
        A key of :data:`PRESETS`.
    seed
        Seed of the weight initialisation (same seed, same weights).
    dtype
        ``"float32"``, ``"bfloat16"``, ``"float16"`` or a ``torch.dtype``.
    device
        Where to allocate the weights (built in place, never copied).
    tokenizer_root
        Folder holding the fixture tokenizers (see :func:`tokenizer_dir`).
    attn_implementation
        Passed to the config (``"sdpa"`` or ``"eager"``).
    config
        Config fields overriding the preset's (e.g. ``num_attention_heads``: vLLM's CPU
        attention needs a head size of 32 or more, the ``tiny-*`` presets have 16).
    """
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    preset = PRESETS[name]
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir(preset.tokenizer, tokenizer_root)))
    config_cls, model_cls = {"qwen2": (Qwen2Config, Qwen2ForCausalLM),
                             "llama": (LlamaConfig, LlamaForCausalLM)}[preset.arch]
    kwargs = {**preset.config, **(config or {})}
    # The model's vocabulary must cover every tokenizer id (fixtures can carry added tokens).
    kwargs["vocab_size"] = max(kwargs["vocab_size"], len(tokenizer))
    config = config_cls(**kwargs)
    config._attn_implementation = attn_implementation
    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch_dtype)
        with torch.device(device):
            model = model_cls(config)
    finally:
        torch.set_default_dtype(previous)
    model.eval()
    return model, tokenizer


def load(name: str, **kwargs: Any):
    """Build a preset and wrap it the Outlines way: ``outlines.from_transformers(model, tok)``."""
    import outlines

    model, tokenizer = build(name, **kwargs)
    return outlines.from_transformers(model, tokenizer)


def save(name: str, directory: str | os.PathLike, **kwargs: Any) -> Path:
    """Build a preset and write it as a model folder a serving engine (vLLM) loads.

    The folder holds ``config.json``, the safetensors weights and the tokenizer files;
    the same ``name`` and ``seed`` give the same weights as :func:`build`. It is written
    next to ``directory`` and renamed into place, so a half-written folder never appears.

    Parameters
    ----------
    name
        A key of :data:`PRESETS`.
    directory
        The folder to create; it must not exist yet.
    **kwargs
        As for :func:`build` (``seed``, ``dtype``, ``tokenizer_root``).

    Raises
    ------
    FileExistsError
        If ``directory`` exists.
    """
    import tempfile

    target = Path(directory)
    if target.exists():
        raise FileExistsError(f"model folder already exists: {target}")
    model, tokenizer = build(name, **kwargs)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    staging.rename(target)
    return target
