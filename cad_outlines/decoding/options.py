"""The option objects a generator holds: its :class:`~.sampler.SamplingOptions` and its
:class:`LoopSwitches`, each one frozen object, with attributes that read and write
through them (``gen.temperature = 0.7`` replaces ``gen.sampling``, checked at once).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .drafting import ForwardCost

__all__ = ["LoopSwitches", "Through"]


@dataclass(frozen=True)
class LoopSwitches:
    """How the decode loop computes its output (the benchmarks' ablations).

    Attributes
    ----------
    splice
        Append each copied span to the context in one forward (``False``: copied text
        stays out of the context, format-only mode, which can change the output).
    fast_forward
        Append grammar-forced runs in one forward instead of one step per token.
    draft_tags, draft_lookup
        Draft the likely program text (and, in gen bodies, prompt-lookup text) onto each
        forward and verify it (:mod:`.drafting`); greedy output is unchanged.
    forward_cost
        The machine's cost of a forward by width: drafts are cut to what pays for it
        (``None``: drafts go whole).
    """

    splice: bool = True
    fast_forward: bool = True
    draft_tags: bool = True
    draft_lookup: bool = True
    forward_cost: ForwardCost | None = None


class Through:
    """A class attribute that reads and writes one field of a frozen options object the
    instance holds as ``holder`` (writing replaces the object, so its checks run)."""

    def __init__(self, holder: str):
        self.holder = holder
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else getattr(getattr(obj, self.holder), self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.holder, dataclasses.replace(getattr(obj, self.holder), **{self.name: value}))
