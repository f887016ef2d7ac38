"""Shared fixtures: tiny random-weight presets (one per tokenizer family) and corpus samples."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
FAMILY_PRESETS = ["tiny-qwen", "tiny-deepseek-coder", "tiny-codellama"]


@lru_cache(maxsize=None)
def tiny_model(preset: str):
    """An Outlines model of a tiny preset, built once per test session (fp32, seed 0)."""
    from cad_outlines import models

    return models.load(preset, tokenizer_root=FIXTURES / "tokenizers")


@lru_cache(maxsize=None)
def corpus_sample() -> list[dict]:
    """The shared-corpus sample copied into tests/fixtures (see its README)."""
    with open(FIXTURES / "corpus_sample.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(params=FAMILY_PRESETS)
def family_model(request):
    return tiny_model(request.param)
