"""scripts/gpu_bench.sh, the script a session runs once when a GPU is lent, run on the CPU.

A GPU session has 15 minutes of device time and no second try to spare, so the script is
run here end to end in its smoke-test form (a tiny preset, one case, a small kernel
curve): every step must finish with status 0 and write the tables the docs are made from.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_gpu_bench_script_runs_end_to_end_on_the_cpu(tmp_path):
    bin_dir = Path(sys.executable).parent
    if shutil.which("cad-outlines", path=str(bin_dir)) is None:
        pytest.skip("the cad-outlines command is not installed beside this Python")
    out = tmp_path / "out"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "OUT": str(out),
           "DEVICE": "cpu", "DTYPE": "float32", "PRESETS": "tiny-qwen", "LIMIT": "1",
           "CORPUS": "tests/fixtures/corpus_sample.jsonl", "LINES": "", "SPLIT": "all", "ORDER": "size",
           "KERNEL_PREFIX": "64", "KERNEL_MAX_N": "16",
           "KERNEL_TRIALS": "1", "STEP_TIMEOUT": "300", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(["bash", "scripts/gpu_bench.sh"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done, status 0" in done.stderr
    tag = "tiny-qwen_cpu_float32"
    kernel = json.loads((out / f"kernel_{tag}.json").read_text())
    assert kernel["prefix"] == 64 and kernel["n"][-1] == 16 and kernel["trials"] == 1
    assert "bnd_exact" in (out / f"ceiling_corpus_sample_{tag}.md").read_text()
    e2e = json.loads((out / f"e2e_corpus_sample_{tag}.json").read_text())
    assert not e2e["failures"] and len(e2e["cases"]) == 1
    runs = e2e["cases"][0]["runs"]
    # the prompt-lookup sweep next to CaD and its default (drafts whole), every run exact;
    # the headline's skipped rows (cad_auto among them) are not run
    assert {"regen", "cad", "cad_uncosted", "pld_k20_n3", "pld_k64_n5", "pld_k128_n7"} <= set(runs)
    assert not {"outlines", "cad_auto", "cad_plain"} & set(runs)
    assert e2e["config"]["prompt_style"] == "compact"
    assert all(run.get("exact", run.get("program_ok")) for run in runs.values())
    assert "prompt included" in (out / f"e2e_corpus_sample_{tag}.md").read_text()
    assert "torch" in (out / "machine.txt").read_text()


def test_the_gpu_cases_are_the_cpu_headlines_whole_files():
    # the bundled fixture (the GPU machine has no copy of the corpora) selects, with the script's
    # flags, the same four files as the CPU headline's Python run
    from cad_outlines.arguments import load_cases
    from cad_outlines.bench.e2e import select_cases

    chosen = select_cases(load_cases(str(ROOT / "tests/fixtures/whole_files_python.jsonl")), lines=(151, 400),
                          split="eval", limit=4)
    headline = json.loads((ROOT / "docs/bench/all_split_whole_commits_python_qwen2.5-coder-0.5b-base_cpu/e2e.json")
                          .read_text())
    assert [c.id for c in chosen] == [c["id"] for c in headline["cases"]]
    assert all(151 <= c.doc.count("\n") + 1 <= 401 for c in chosen)
