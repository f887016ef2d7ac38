"""cad-outlines: Copy-as-Decode editing for Outlines.

The package follows the data path: :mod:`cad_outlines.language` (the program language,
model-free), :mod:`cad_outlines.adapters` (tokenizer facts), :mod:`cad_outlines.decoding`
(runner, constraint, the one decode loop, DCCD), :mod:`cad_outlines.tools` (corpora,
presets, ceiling, demo, SFT, text mode), :mod:`cad_outlines.engines` (vLLM) and the
benchmarks (`bench/`; only the command line delegates to them). The language imports no
torch; the generators are imported lazily (on first use of the names below) so
``import cad_outlines`` stays light.
"""

from importlib.metadata import PackageNotFoundError, version

# What cad() / edit() / apply raise: every one a CaDError (cad_outlines.errors has the rest).
from .errors import (CaDError, ContextLengthError, IncompleteProgramError, InputError, ModelOutputError,
                     OptionError, PromptError, ResolveError, UnsupportedModelError)
from .language.program import Copy, CopyTokens, Gen, Op, ProgramParseError, parse, render

__all__ = ["CaDError", "CaDGenerator", "CaDResult", "ContextLengthError", "Copy", "CopyTokens",
           "DraftConditionedGenerator", "Gen", "IncompleteProgramError", "InputError", "ModelOutputError",
           "Op", "OptionError", "ProgramParseError", "PromptError", "ResolveError", "UnsupportedModelError",
           "cad", "edit", "parse", "render"]

_LAZY = {"CaDGenerator": "cad_outlines.decoding.generator",
         "CaDResult": "cad_outlines.decoding.generator",
         "DraftConditionedGenerator": "cad_outlines.decoding.dccd",
         "cad": "cad_outlines.generate", "edit": "cad_outlines.generate"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cad_outlines' has no attribute {name!r}")

try:  # the version is written once, in pyproject.toml
    __version__ = version("cad-outlines")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
