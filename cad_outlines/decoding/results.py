"""What a decode produces: :class:`CaDResult`, its :class:`CaDStats`, and the loop's errors.

Shared by every engine (the transformers loop, the vLLM driver) and by the SFT builder,
so that a result means the same thing whichever produced it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

# The loop's errors live in cad_outlines.errors; re-exported here, their old home.
from ..errors import ContextLengthError, ForcedProgramError, IncompleteProgramError, UnsupportedModelError
from ..language.program import Op

__all__ = ["CaDResult", "CaDStats", "ContextLengthError", "ForcedProgramError", "IncompleteProgramError",
           "ProgressCallback", "UnsupportedModelError", "check_model"]


def context_limit(runner: Any, prompt_tokens: int, view: Any) -> int | None:
    """The runner's context length (``None``: no limit); fails before any forward when
    no edit that keeps the document (``view``, a :class:`~.document.DocumentView`) can
    finish: when the prompt and a copy of the whole document do not fit together.

    Past ``max_position_embeddings`` a model's positions are untrained (or out of its
    rotary table); decoding there would produce garbage, slowly, and copied lines take
    positions too. An edit that deletes most of such a document is refused with the rest:
    finding out otherwise costs the prompt's prefill and, for most edits, the whole run.
    """
    limit = getattr(runner, "max_positions", None)
    if not isinstance(limit, int):
        return None
    setting = getattr(runner, "max_positions_setting", "max_position_embeddings")  # vLLM's: max_model_len
    advice = (f"the document ({len(view.text)} characters) is too long for this model; "
              "split it or use a model with a longer context")
    if prompt_tokens >= limit:
        raise ContextLengthError(f"the prompt is {prompt_tokens} tokens but the model's context is {limit} "
                                 f"positions ({setting}): {advice}")
    if prompt_tokens + view.whole_copy_tokens > limit:
        raise ContextLengthError(
            f"the prompt is {prompt_tokens} tokens and a copy of the whole document {view.whole_copy_tokens} "
            f"more, past the model's context of {limit} positions ({setting}), so an edit "
            f"that keeps the document cannot finish: {advice}")
    return limit


@dataclass
class CaDStats:
    """Counts and wall-clock of one run.

    ``decoded_tokens`` were chosen by a decode step each, ``forced_tokens`` were
    fast-forwarded (grammar-forced), ``copied_tokens`` were spliced. Forward passes
    include the prompt prefill. Drafting: ``draft_tokens`` were proposed (appended to a
    forward), ``draft_accepted`` of them were kept (chosen, forced or spliced exactly as
    drafted), and ``forwards_saved`` decode steps needed no forward because all they
    appended was already in the cache; for a finished program
    ``forward_passes + forwards_saved == decoded_tokens``. Seconds (wall clock):
    ``prefill`` (the prompt), ``total`` (the run), ``draft`` (predicting, encoding and
    validating drafts). A benchmark that wants the rest of the breakdown passes the
    generator an ``observer`` of the loop's phases (``bench/_loop.PhaseClock``).
    """

    prompt_tokens: int = 0
    prompt_tokens_reused: int = 0  # taken from the runner's kept prompt prefix (not computed)
    decoded_tokens: int = 0
    forced_tokens: int = 0
    copied_tokens: int = 0
    splices: int = 0
    forward_passes: int = 0
    draft_tokens: int = 0
    #: Of ``draft_tokens``, those drafted as alternatives to another (digits side by
    #: side at one position, ``LoopSwitches.draft_trees``): at most one of a set is kept.
    draft_alternatives: int = 0
    draft_accepted: int = 0
    forwards_saved: int = 0
    #: Forwards that followed a token chosen inside a gen body (new text, not the
    #: program's structure: what no draft of tags and indices can spare).
    body_forwards: int = 0
    #: Forwards that followed a token chosen inside a copy tag's indices (the digits the
    #: model picks; a tag that closed and spliced in the same step counts as a splice).
    index_forwards: int = 0
    #: Forwards that carried a copy's spliced span.
    splice_forwards: int = 0
    draft_seconds: float = 0.0
    prefill_seconds: float = 0.0
    total_seconds: float = 0.0
    compile_seconds: float = 0.0
    tokenizer_setup_seconds: float = 0.0
    stopped_early: bool = False
    stop_reason: str = ""  # "max_new_tokens", "max_gen_tokens", "repetition" or "context" when stopped early
    #: The model asked for ``</program>`` inside a gen body; the program ended there (.ending).
    ended_in_gen: bool = False

    @property
    def program_tokens(self) -> int:
        """Tokens the program itself holds (decoded + forced)."""
        return self.decoded_tokens + self.forced_tokens


@dataclass
class CaDResult:
    """What one run produced.

    ``document`` is ``None`` when the program is incomplete (``complete`` is False):
    ``ops`` then holds only the ops that were complete, never a corrupted document.
    """

    document: str | None
    program: str
    ops: list[Op]
    complete: bool
    stats: CaDStats
    alpha: Any = None  # cad_outlines.decoding.alpha.AlphaTrace when trace_alpha=True


#: A progress display: called with the live stats (see :meth:`CaDGenerator.run`).
ProgressCallback = Callable[["CaDStats"], None]


def check_model(model: Any) -> None:
    """Raise :class:`UnsupportedModelError` unless ``model`` is an Outlines transformers model.

    The decode loop runs the model's forward itself (to splice copies into its KV cache)
    and reads its Hugging Face tokenizer, so it needs ``outlines.from_transformers``'s
    model; llama.cpp, vLLM, MLX, API models and a bare Hugging Face model are refused.
    """
    from outlines.models.transformers import Transformers

    if isinstance(model, Transformers) and hasattr(model, "hf_tokenizer"):
        return
    kind = f"{type(model).__module__}.{type(model).__qualname__}"
    hint = ""
    if hasattr(model, "generate") and hasattr(model, "config"):  # a bare transformers model
        hint = " Wrap a Hugging Face model first: outlines.from_transformers(hf_model, hf_tokenizer)."
    raise UnsupportedModelError(
        f"CaD editing supports Outlines transformers models only "
        f"(outlines.from_transformers(hf_model, hf_tokenizer)); got {kind}.{hint}")
