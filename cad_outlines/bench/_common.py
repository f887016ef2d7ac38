"""What every benchmark shares: the environment record, thread setting, atomic outputs.

Each benchmark's JSON carries :func:`environment` so that a figure can always be traced
to the machine, versions, load and date that produced it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..errors import InputError, MissingDependencyError
from ..tools.calibration import cpu_model

_PACKAGES = ("torch", "transformers", "outlines", "outlines_core", "llguidance", "tokenizers",
             "numpy", "matplotlib")


def environment(**extra: Any) -> dict[str, Any]:
    """Machine, versions, load average, UTC date and git commit, plus ``extra``."""
    from importlib.metadata import PackageNotFoundError, version

    env: dict[str, Any] = {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "loadavg_1_5_15": _loadavg(),
        "git_commit": _git_commit(),
        "git_modified": _git_modified(),
    }
    for pkg in _PACKAGES:
        try:
            env[pkg] = version(pkg)
        except PackageNotFoundError:
            env[pkg] = None
    if "torch" in sys.modules:
        import torch

        env["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
    env.update(extra)
    return env


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads (``None``: torch's default), then
    restore the previous setting."""
    import torch

    if threads is not None and threads < 1:
        raise InputError(f"threads must be >= 1, got {threads}")
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def write_json(path: str | os.PathLike, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically."""
    from ..files import atomic_write

    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def save_figure(fig: Any, path: str | os.PathLike, dpi: int = 100) -> None:
    """Save a matplotlib figure as PNG atomically (temp file in the same folder)."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=directory)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight")
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp creates 0600; a plot is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (no display needed).

    Raises
    ------
    MissingDependencyError
        If matplotlib is not installed (it comes with the ``bench`` extra).
    """
    try:
        import matplotlib
    except ImportError:
        raise MissingDependencyError("plots need matplotlib: pip install 'cad-outlines[bench]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def progress(iterable: Any = None, **kwargs: Any) -> Any:
    """A tqdm bar on stderr; ``disable=True`` hides it."""
    from tqdm import tqdm

    return tqdm(iterable, file=sys.stderr, dynamic_ncols=True, **kwargs)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default); 0.0 for no values."""
    import numpy as np

    return float(np.percentile(values, q)) if values else 0.0


def _loadavg() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _git(*args: str) -> str | None:
    """stdout of ``git args`` in this checkout, or None (no git, not a checkout)."""
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _git_modified() -> list[str] | None:
    """Tracked files with uncommitted changes (the run used them as they were)."""
    out = _git("status", "--porcelain", "--untracked-files=no")
    return None if out is None else [line[3:] for line in out.splitlines()]


def _git_commit() -> str | None:
    out = _git("rev-parse", "--short", "HEAD")
    return out.strip() or None if out is not None else None
