"""cad-outlines: Copy-as-Decode editing for Outlines.

The model-free half (program, escape, resolver, oracle, grammar) imports no torch; the
generator and DCCD are imported lazily so ``import cad_outlines`` stays light.
"""

from .program import Copy, CopyTokens, Gen, Op, ProgramParseError, parse, render

__all__ = ["Copy", "CopyTokens", "Gen", "Op", "ProgramParseError", "parse", "render"]
__version__ = "0.1.0"
