"""Every error type of the project, and the exit status each maps to.

Every error the package raises on purpose derives from :class:`CaDError`, so a caller
(the command line above all) can tell them apart from a bug: anything else that escapes
is one. The branches say who can act on it:

- :class:`InputError` -- a file, program, corpus, tokenizer, model folder or option the
  user passed is wrong; the message names what and where. It is also a ``ValueError``,
  so ``except ValueError`` in existing callers still catches it.
- :class:`ModelOutputError` -- the input was fine but the model did not produce a usable
  program (the token budget ran out, or its program does not resolve).
- :class:`MissingDependencyError` -- an optional dependency (an extra) is not installed;
  the message names the extra to install.
- :class:`ConstraintError` -- a constraint that contradicts itself (a bug, not the user's).

Each class carries the command line's exit status as ``exit_status``; the classes live
here (this module imports only the standard library) and the modules that raise them
re-export them under their old names.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

__all__ = ["APIError", "AdapterError", "AmbiguousReplyError", "CaDError", "ConstraintError", "ContextLengthError",
           "CopyRangeError", "CorpusError", "EXIT_INTERNAL", "EXIT_MODEL", "EXIT_OK", "EXIT_USAGE",
           "EngineSetupError", "FileDecodeError", "ForcedProgramError", "IncompleteProgramError",
           "InputError", "MalformedProgramError", "MissingDependencyError", "ModelOutputError",
           "NoProgramError", "OptionError", "OptionTypeError", "ProgramParseError", "PromptError", "PromptTypeError",
           "ReplyError", "RequestCancelled", "ResolveError", "SFTError", "UnsupportedModelError", "UsageError"]

#: The command line's exit statuses: done; the model did not deliver; the user's input
#: (or a file they named) is wrong; a bug (``EX_SOFTWARE``).
EXIT_OK, EXIT_MODEL, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 70


class CaDError(Exception):
    """Base of every error cad-outlines raises on purpose."""

    #: The exit status the command line returns for it.
    exit_status: int = EXIT_USAGE


class InputError(CaDError, ValueError):
    """Bad input the user can fix; the message names what is wrong and where."""


class ModelOutputError(CaDError):
    """The model did not produce a usable program (unfinished or invalid)."""

    exit_status = EXIT_MODEL


class MissingDependencyError(CaDError, ImportError):
    """An optional dependency is missing; the message says which extra installs it."""


class ConstraintError(CaDError, RuntimeError):
    """A constraint that rejects its own choice or allows nothing: a bug, reported as one."""

    exit_status = EXIT_INTERNAL


# --- input: files, programs, corpora, options ------------------------------------------


class UsageError(InputError):
    """A problem with the command's input that the user can fix."""


class FileDecodeError(InputError):
    """A file that is not valid UTF-8.

    Attributes
    ----------
    path
        The file.
    offset
        Byte offset of the first byte that does not decode.
    """

    def __init__(self, path: str | os.PathLike[str], offset: int, reason: str):
        self.path = os.fspath(path)
        self.offset = offset
        super().__init__(f"{self.path}: not valid UTF-8 at byte offset {offset} ({reason})")


class ProgramParseError(InputError):
    """Program text that does not parse.

    Attributes
    ----------
    offset
        Character offset of the error in the program text.
    expected
        Sorted names of what the grammar would have accepted there.
    """

    def __init__(self, message: str, offset: int, expected: Sequence[str] = ()):
        self.offset = offset
        self.expected = sorted(expected)
        detail = f" (expected one of: {', '.join(self.expected)})" if self.expected else ""
        super().__init__(f"{message} at offset {offset}{detail}")


class ResolveError(InputError):
    """An op that cannot be resolved against the document.

    Attributes
    ----------
    op_index
        0-based index of the offending op in the program.
    op
        The op itself.
    problem
        What is wrong, e.g. ``"line range 3-9 is outside the document's lines 1-5"``.
    """

    def __init__(self, op_index: int, op: object, problem: str):
        self.op_index = op_index
        self.op = op
        self.problem = problem
        super().__init__(f"op {op_index} {op!r}: {problem}")


class CorpusError(InputError):
    """A malformed corpus line.

    Attributes
    ----------
    path
        The corpus file.
    line
        1-based line number.
    """

    def __init__(self, path: str | os.PathLike[str], line: int, problem: str):
        self.path = os.fspath(path)
        self.line = line
        self.problem = problem
        super().__init__(f"{self.path}:{line}: {problem}")


class AdapterError(InputError):
    """A tokenizer no adapter can serve, or an adapter misused; the message says why."""


class OptionError(InputError):
    """A generation option with a value outside its range; the message names it."""


class OptionTypeError(OptionError, TypeError):
    """An option of the wrong type (also a ``TypeError``, what it was raised as before)."""


class PromptError(InputError):
    """A prompt or prompt template that cannot be used; the message says what and where."""


class PromptTypeError(PromptError, TypeError):
    """A prompt of the wrong type (also a ``TypeError``, what it was raised as before)."""


class UnsupportedModelError(InputError, TypeError):
    """A model the generator cannot drive; the message names the supported kind."""


class ForcedProgramError(InputError):
    """A forced program that the document's constraint rejects."""


class ContextLengthError(InputError):
    """A prompt, or a prompt and a copy of the whole document, that does not fit the
    model's context (``max_position_embeddings``; on vLLM ``max_model_len``)."""

    #: Which of several edits it refused (0-based), where one call ran many
    #: (``VLLMEditor.run_many``); ``None`` otherwise.
    edit: int | None = None


class SFTError(InputError):
    """A case that cannot become a training row (the message names the case and why)."""


class EngineSetupError(CaDError, RuntimeError):
    """The vLLM engine cannot run CaD edits as configured (the message says what to change)."""


# --- chat replies (text mode) ------------------------------------------------------------


class ReplyError(InputError):
    """A reply that yields no edited document.

    Attributes
    ----------
    problem
        What is wrong, in words.
    offset
        Character offset in the reply where it was found (``None``: the reply as a whole).
    """

    def __init__(self, problem: str, offset: int | None = None):
        self.problem = problem
        self.offset = offset
        where = f" (reply offset {offset})" if offset is not None else ""
        super().__init__(problem + where)


class NoProgramError(ReplyError):
    """The reply holds no ``<program>``."""


class AmbiguousReplyError(ReplyError):
    """The reply holds several programs that differ."""


class MalformedProgramError(ReplyError):
    """The program is there but cannot be read without guessing."""


class CopyRangeError(ReplyError):
    """A copy range the document does not have (strict mode)."""


# --- the model's output -----------------------------------------------------------------


#: Why a run stopped before ``</program>`` (``CaDStats.stop_reason``), in words; the token
#: budget (``max_new_tokens``) is worded by each caller, which knows its option's name.
STOPPED_BECAUSE = {"max_gen_tokens": "a gen body reached max_gen_tokens",
                   "repetition": "a gen body kept repeating the same text, more than the document ever does",
                   "context": "the model's context (max_position_embeddings) ran out"}


class IncompleteProgramError(ModelOutputError, RuntimeError):
    """The run stopped before ``</program>`` (``result.stats.stop_reason`` says why: the
    token budget, the gen cap, a gen repeating itself or the model's context); ``.result``
    holds the complete ops."""

    def __init__(self, result: Any):
        self.result = result  # a CaDResult
        why = STOPPED_BECAUSE.get(result.stats.stop_reason, "max_new_tokens ran out")
        super().__init__(f"{why} after {len(result.ops)} complete op(s); no edited document was produced"
                         + (" (raise max_new_tokens)" if why.startswith("max_new") else ""))


class APIError(CaDError):
    """An HTTP request the server answers with OpenAI's error object and this status.

    ``exit_status`` does not apply (no command exits with it); ``status`` is the HTTP one.
    """

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        """``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class RequestCancelled(CaDError):
    """Raised inside a server decode whose client has gone; the worker drops the job."""
