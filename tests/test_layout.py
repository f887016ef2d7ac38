"""The package's rooms and the direction of imports between them (docs/design.md)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Rooms in data-path order: a room may import only rooms before it.
LAYERS = ["errors", "files", "language", "adapters", "decoding", "engines", "tools", "training",
          "arguments", "server", "bench", "generate", "cli_train", "cli_edit", "cli", "__main__", "__init__"]


def _module(path: Path) -> tuple[str, bool]:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "adapters":
        is_pkg = rel.stem == "__init__"
        return "cad_outlines.adapters" + ("" if is_pkg else "." + rel.stem), is_pkg
    parts = list(rel.with_suffix("").parts)
    is_pkg = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_pkg else parts), is_pkg


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports() -> dict[tuple[str, str], list[str]]:
    """(importing room, imported room) -> the importing files."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    files = [*(ROOT / "cad_outlines").rglob("*.py"), *(ROOT / "adapters").glob("*.py")]
    for path in files:
        if "data" in path.relative_to(ROOT).parts:
            continue
        module, is_pkg = _module(path)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("cad_outlines"):
                continue
            targets = ([target] if target != "cad_outlines"
                       else [f"cad_outlines.{alias.name}" for alias in node.names])
            for t in targets:
                a, b = _room(module), _room(t)
                if a != b and b in LAYERS:
                    edges[(a, b)].append(str(path.relative_to(ROOT)))
    return edges


def test_every_room_is_known():
    rooms = {p.stem if p.is_file() else p.name
             for p in (ROOT / "cad_outlines").iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name != "data"}
    assert rooms - {"adapters"} <= set(LAYERS), rooms - set(LAYERS)


def test_imports_run_down_the_data_path():
    edges = _imports()
    assert ("decoding", "language") in edges and ("bench", "decoding") in edges  # the scan works
    upward = {k: v for k, v in edges.items() if LAYERS.index(k[1]) > LAYERS.index(k[0])}
    assert not upward, upward


def test_top_level_names_are_lazy():
    code = ("import sys, cad_outlines as c; assert 'torch' not in sys.modules; "
            "assert c.CaDGenerator.__module__ == 'cad_outlines.decoding.generator'; "
            "assert c.DraftConditionedGenerator.__module__ == 'cad_outlines.decoding.dccd'; "
            "assert callable(c.cad) and callable(c.edit); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr


#: docs/design.md: "modules under ~600 lines"; a module past it gets split, not waved through.
MAX_MODULE_LINES = 600


def test_modules_stay_small():
    files = [*(ROOT / "cad_outlines").rglob("*.py"), *(ROOT / "adapters").glob("*.py")]
    sizes = {str(p.relative_to(ROOT)): len(p.read_text("utf-8").splitlines()) for p in files}
    assert len(sizes) > 40  # the scan found the package
    over = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, over
