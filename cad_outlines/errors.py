"""The project's error types: what the user can fix vs. what the model did.

Every error the package raises on purpose derives from :class:`CaDError`, so a caller
(the command line above all) can tell them apart from a bug: anything else that escapes
is one. The two branches say who can act on it:

- :class:`InputError` -- a file, program, corpus, tokenizer, model folder or option the
  user passed is wrong; the message names what and where. It is also a ``ValueError``,
  so ``except ValueError`` in existing callers still catches it.
- :class:`ModelOutputError` -- the input was fine but the model did not produce a usable
  program (the token budget ran out, or its program does not resolve).
- :class:`MissingDependencyError` -- an optional dependency (an extra) is not installed;
  the message names the extra to install.
"""

from __future__ import annotations

__all__ = ["CaDError", "InputError", "MissingDependencyError", "ModelOutputError"]


class CaDError(Exception):
    """Base of every error cad-outlines raises on purpose."""


class InputError(CaDError, ValueError):
    """Bad input the user can fix; the message names what is wrong and where."""


class ModelOutputError(CaDError):
    """The model did not produce a usable program (unfinished or invalid)."""


class MissingDependencyError(CaDError, ImportError):
    """An optional dependency is missing; the message says which extra installs it."""
