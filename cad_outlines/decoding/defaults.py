"""What every engine and entry point checks and defaults alike (no torch: the command
line reads its defaults from here when it builds its parser).

The transformers loop (:mod:`.generator`), the vLLM driver (:mod:`cad_outlines.engines.vllm`)
and the ``edit`` workflow (:mod:`cad_outlines.tools.edit`) take their defaults and run
their checks here, so a request means the same on every engine.
"""

from __future__ import annotations

from typing import Any

from ..errors import OptionError

__all__ = ["DEFAULT_MAX_NEW_TOKENS", "FROM_MODEL", "MODEL_FLOOR", "check_budget", "check_floor",
           "check_layout", "check_request", "explicit_floor"]

#: Budget of program tokens (decoded + forced; copied tokens are free) unless one is given.
DEFAULT_MAX_NEW_TOKENS = 2048
#: A loop switch's value "as recorded with the model" (``LoopSwitches.for_model`` reads it).
FROM_MODEL = "model"
#: ``follow_prediction``'s default: the floor recorded with the model (``LoopSwitches``).
MODEL_FLOOR = FROM_MODEL


def check_budget(max_new_tokens: Any) -> int:
    """``max_new_tokens`` itself, or an :class:`OptionError` naming it."""
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise OptionError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
    return max_new_tokens


def check_floor(floor: Any) -> None:
    """A ``follow_prediction`` floor: a number in (0, 1], :data:`MODEL_FLOOR` or ``None``;
    else an :class:`OptionError` naming it."""
    if floor is not None and floor != MODEL_FLOOR and (
            isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 < floor <= 1):
        raise OptionError(f"follow_prediction must be a number in (0, 1], {MODEL_FLOOR!r} or None, got {floor!r}")


def explicit_floor(floor: Any) -> bool:
    """Whether ``follow_prediction`` names a number rather than the default or nothing."""
    return floor not in (None, MODEL_FLOOR)


def check_request(granularity: Any, mode: Any) -> None:
    """The program's granularity and the resolver mode, checked before any work."""
    if granularity not in ("lines", "tokens"):
        raise OptionError(f"granularity must be 'lines' or 'tokens', got {granularity!r}")
    if mode not in ("strict", "clipped"):
        raise OptionError(f"mode must be 'strict' or 'clipped', got {mode!r}")


def check_layout(layout: Any) -> None:
    """The regeneration baseline's prompt: ``"plain"`` (the file as it is) or ``"program"``."""
    if layout not in ("plain", "program"):
        raise OptionError(f"layout must be 'plain' or 'program', got {layout!r}")
