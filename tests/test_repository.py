"""The checkout stays small enough to travel: scripts/gpu_bench.sh runs on a benchmark
machine that receives the working tree (tracked files and untracked ones git does not
ignore) and refuses one over 64 MiB."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What a benchmark machine accepts of the working tree.
TREE_LIMIT = 64 * 2**20


def _git(*args: str) -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "-C", str(ROOT), *args, "-z"], capture_output=True, check=True)
    return [p for p in out.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def test_the_working_tree_fits_a_benchmark_machine():
    files = [ROOT / p for p in _git("ls-files", "--cached", "--others", "--exclude-standard")]
    sizes = {p: p.lstat().st_size for p in files if p.is_symlink() or p.is_file()}
    total = sum(sizes.values())
    largest = sorted(sizes, key=sizes.get, reverse=True)[:3]
    assert total < TREE_LIMIT, (f"the working tree is {total / 2**20:.1f} MiB; largest: "
                                + ", ".join(f"{p.relative_to(ROOT)} ({sizes[p] / 2**20:.1f} MiB)" for p in largest))
