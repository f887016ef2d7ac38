"""cad-outlines: Copy-as-Decode editing for Outlines.

The model-free half (program, escape, resolver, oracle, grammar) imports no torch; the
generator and DCCD are imported lazily so ``import cad_outlines`` stays light.
"""

from importlib.metadata import PackageNotFoundError, version

from .errors import CaDError, InputError, ModelOutputError
from .program import Copy, CopyTokens, Gen, Op, ProgramParseError, parse, render

__all__ = ["CaDError", "Copy", "CopyTokens", "Gen", "InputError", "ModelOutputError", "Op",
           "ProgramParseError", "parse", "render"]

try:  # the version is written once, in pyproject.toml
    __version__ = version("cad-outlines")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
