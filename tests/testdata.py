"""Where the test data lives, for the module-level constants of test files.

Test files import these names (``from testdata import FIXTURES``) where they need a path
or the corpus sample at import time (``pytest.mark.parametrize`` lists); a test that
needs them only at run time takes the fixtures of ``conftest.py`` instead. Nothing
imports ``conftest`` itself (pytest loads it as a plugin).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

#: The repository's root (grammars/, adapters/, docs/, pyproject.toml).
ROOT = Path(__file__).resolve().parents[1]
#: tests/fixtures: tokenizers, corpus sample, conformance vectors.
FIXTURES = ROOT / "tests" / "fixtures"
#: The real tokenizers of the three families, one folder each.
TOKENIZERS = FIXTURES / "tokenizers"
#: The shared-corpus sample copied into tests/fixtures (see its README).
CORPUS_SAMPLE = FIXTURES / "corpus_sample.jsonl"
#: The tokenizer families, by fixture folder name.
FAMILIES = ("qwen", "deepseek-coder", "codellama")
#: One tiny random-weight preset per family (cad_outlines.tools.presets).
FAMILY_PRESETS = ["tiny-qwen", "tiny-deepseek-coder", "tiny-codellama"]


@lru_cache(maxsize=None)
def corpus_records() -> tuple[dict, ...]:
    """The records of :data:`CORPUS_SAMPLE`, read once."""
    with open(CORPUS_SAMPLE, encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh)
