"""The checkout stays small enough to travel: scripts/gpu_bench.sh runs on a benchmark
machine that receives the working tree (tracked files and untracked ones git does not
ignore) and refuses one over 64 MiB. The rule lives in scripts/tree_size.py, which
scripts/gpu_pack.sh runs too."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tree_size():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    spec = importlib.util.spec_from_file_location("tree_size", ROOT / "scripts" / "tree_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_working_tree_fits_a_benchmark_machine(tree_size, capsys):
    assert tree_size.main([]) == 0, capsys.readouterr().err
    assert "limit 64 MiB" in capsys.readouterr().err


def test_a_tree_over_the_limit_is_refused_naming_its_largest_files(tree_size, capsys):
    sizes = tree_size.tree_sizes()
    largest = max(sizes, key=sizes.get)
    assert tree_size.main(["--limit", str(sum(sizes.values()))]) == 1
    err = capsys.readouterr().err
    assert "too large to travel" in err and str(largest.relative_to(ROOT)) in err


def test_carried_files_count_against_the_limit(tree_size, capsys):
    tree = sum(tree_size.tree_sizes().values())
    pyproject = (ROOT / "pyproject.toml").stat().st_size
    assert tree_size.main(["--plus", "pyproject.toml", "--limit", str(tree + pyproject)]) == 1
    assert tree_size.main(["--plus", "pyproject.toml", "--limit", str(tree + pyproject + 1)]) == 0


@pytest.mark.parametrize("path", ["cad_outlines/data/tokenizers/qwen/tokenizer.json",
                                  "tests/fixtures/tokenizers/codellama/tokenizer.json",
                                  "tests/fixtures/tokenizers/deepseek-coder/tokenizer.json"])
def test_tokenizer_files_are_stored_compact(path):
    # Indented, the three files were 9 MiB larger (the Qwen one ships in the wheel); the
    # content is the same either way (tests/test_conformance.py checks the encodings).
    with open(ROOT / path, "rb") as handle:
        head = handle.read(1 << 16)
    assert b"\n " not in head and b": " not in head[:200], f"{path} is indented; store it compact"
